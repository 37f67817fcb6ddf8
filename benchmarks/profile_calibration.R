# Calibration of the transition-point statistics: Wald (method = "wald")
# against the default, Wald with profile likelihood where the check flags
# an effect (method = "profile"), on simulated experiments with weakly
# placed transitions, most of them designs the package was not tuned on:
#   base         the calibration benchmark's design (calibration_design.R:
#                animals nested in genotype, hemisphere within animal, one
#                transition, log-rate steps 0.8-1.5, 40 bins);
#   small_steps  the same with log-rate steps 0.4-0.8;
#   age          animals nested in age (P12, P18), hemisphere within animal,
#                50 bins, 5 cells per bin, log-rate steps 0.5-0.9 (the
#                design of the issue that found the Wald tests of points
#                liberal);
#   two_points   two transitions per curve, log-rate steps 0.6-1.2;
#   unequal      base with unequal groups: KO has the group size, WT twice
#                as many animals;
#   ends         base with the transition near an end of the axis (baseline
#                point at 0.2 of the axis, bin 8.5 of 40);
#   close        two transitions close together (baseline points at 0.42
#                and 0.58 of the axis, 6.4 bins apart), log-rate steps
#                0.6-1.2.
# Group sizes 3, 5 and 8 animals per group are the targets; 2 is reported.
# Each data set has 8 genes: genes 1-6 without any treatment effect, genes
# 7-8 with effects on every rate, slope and point. Fits use the simulated
# numbers of transitions (so that every estimated point effect has a
# truth), as calibration.R does.
#
# The profile runs with a tolerance small enough to flag every effect, so
# that each effect has its Wald and its profile statistics and the combined
# procedure can be evaluated at any tolerance afterwards (the check's
# deviances do not depend on it). The summary reports, per design, group
# size and tolerance: the false-positive rate of point effects whose truth is
# 0 (unadjusted, alpha = 0.05), the coverage of all point effects' 95 %
# intervals, the share flagged, with Monte Carlo SEs clustered by data set.
#
# Rates and slopes are tested by Wald in both methods (only points are
# checked); the mode `components` fits the same data sets again and keeps
# every rate, slope and point effect's Wald statistics, and the summary then
# adds their false-positive rate and coverage per component.
#
# Usage (repository root, wispack installed):
#   Rscript benchmarks/profile_calibration.R run [datasets]   # default 20
#   Rscript benchmarks/profile_calibration.R components [datasets]
#   Rscript benchmarks/profile_calibration.R summary [components]
# Resumable (benchmarks/out/profile_calibration/); writes
# benchmarks/results/profile_calibration.csv, and the rows of the Wald tests
# and of the default combined procedure (tolerance 0.25) to
# inst/extdata/point_calibration.csv, which wisp()'s design warning quotes.
# 100 data sets (the Monte Carlo SE of each rate about 0.01) take about an
# hour on one core. The components' run (benchmarks/out/profile_calibration/
# components/, fits and Wald statistics only) takes about 15 minutes on one
# core and writes benchmarks/results/component_calibration.csv. Two
# processes share a run: start the second with WISPACK_BENCH_REVERSE=1 (it
# takes the data sets in reverse order).

args <- commandArgs(trailingOnly = TRUE)
mode <- if (length(args)) args[1] else "run"
stopifnot(mode %in% c("run", "components", "summary"))
datasets <- if (length(args) >= 2 && mode != "summary") as.integer(args[2]) else 20L
# `summary components` summarises the components' run alone.
part <- if (mode == "summary" && length(args) >= 2) args[2] else if (mode == "components") {
  "components"
} else "all"
stopifnot(part %in% c("all", "components"))
suppressPackageStartupMessages(library(wispack))
alpha <- 0.05
workers <- as.integer(Sys.getenv("WISPACK_BENCH_WORKERS", "1"))
dir <- file.path("benchmarks", "out", "profile_calibration")
dir.create(dir, recursive = TRUE, showWarnings = FALSE)
components_dir <- file.path(dir, "components")
# New designs go at the end: a data set's seed depends on its design's place.
designs <- c("base", "small_steps", "age", "two_points", "unequal", "ends", "close")
animals_per_group <- c(2L, 3L, 5L, 8L)
tolerances <- c(0.1, 0.25, 0.5, 1)

simulate_design <- function(design_name, animals, k) {
  seed <- 1e6 * match(design_name, designs) + 1e4 * animals + k + 7
  effect_prob <- c(rep(0, 6), 1, 1)
  if (design_name == "age") {
    design <- wisp_design(between = list(age = c("P12", "P18")),
                          within = list(hemisphere = c("left", "right")),
                          animals.per.group = animals)
    return(wisp_simulate(design = design, n.genes = 8, n.bins = 50, cells.per.bin = 5,
                         degrees = 1L, rate.step = c(0.5, 0.9), effect.prob = effect_prob,
                         seed = seed))
  }
  per_group <- if (design_name == "unequal") c(animals, 2L * animals) else animals
  design <- wisp_design(between = list(genotype = c("KO", "WT")),
                        within = list(hemisphere = c("left", "right")),
                        animals.per.group = per_group)
  wisp_simulate(design = design, n.genes = 8, n.bins = 40, cells.per.bin = 4,
                degrees = if (design_name %in% c("two_points", "close")) 2L else 1L,
                point.positions = switch(design_name, ends = 0.2, close = c(0.42, 0.58)),
                rate.step = switch(design_name, small_steps = c(0.4, 0.8),
                                   two_points = , close = c(0.6, 1.2), c(0.8, 1.5)),
                effect.prob = effect_prob, seed = seed)
}

one_dataset <- function(design_name, animals, k) {
  data <- simulate_design(design_name, animals, k)
  truth <- attr(data, "truth")
  started <- proc.time()[["elapsed"]]
  fit <- suppressWarnings(wisp(data, degrees = truth$degrees, verbose = FALSE, fit_only = TRUE,
                               model.settings = list(LRO_cost = "none"), max.fork = workers))
  fit_seconds <- proc.time()[["elapsed"]] - started
  started <- proc.time()[["elapsed"]]
  wald <- wisp_statistics(fit, method = "wald")$stats$parameters
  wald_seconds <- proc.time()[["elapsed"]] - started
  started <- proc.time()[["elapsed"]]
  profiled <- wisp_statistics(fit, method = "profile", tolerance = 1e-3, max.fork = workers)$stats
  profile_seconds <- proc.time()[["elapsed"]] - started
  checks <- profiled$profiles
  if (!nrow(checks)) return(NULL)
  w <- wald[match(checks$parameter, wald$parameter), ]
  z <- w$estimate / w$std.error
  q <- ifelse(is.finite(w$df), qt(1 - alpha / 2, pmax(w$df, 1)), qnorm(1 - alpha / 2))
  data.frame(
    design = design_name, animals = animals, dataset = k, parameter = checks$parameter,
    truth = unname(truth$effects[checks$parameter]), estimate = w$estimate,
    std.error = w$std.error, z = z, q = q,
    wald.low = w$CI.low, wald.high = w$CI.high, wald.p = w$p.value,
    deviance.zero = checks$deviance.zero, deviance.lower = checks$deviance.lower,
    deviance.upper = checks$deviance.upper, profile.method = checks$method,
    profile.low = checks$CI.low, profile.high = checks$CI.high, profile.p = checks$p.value,
    open = checks$open, fits = checks$fits, note = checks$note,
    converged = fit$fit.diagnostics$converged, fit.seconds = fit_seconds,
    wald.seconds = wald_seconds, profile.seconds = profile_seconds,
    stringsAsFactors = FALSE
  )
}

# Every non-baseline effect's Wald statistics (the default statistics of
# rates and slopes), for the per-component summary.
component_rows <- function(design_name, animals, k) {
  data <- simulate_design(design_name, animals, k)
  truth <- attr(data, "truth")
  fit <- suppressWarnings(wisp(data, degrees = truth$degrees, verbose = FALSE, fit_only = TRUE,
                               model.settings = list(LRO_cost = "none"), max.fork = workers))
  w <- wisp_statistics(fit, method = "wald")$stats$parameters
  w <- w[w$term != "baseline" & w$parameter %in% names(truth$effects), , drop = FALSE]
  data.frame(design = design_name, animals = animals, dataset = k, parameter = w$parameter,
             component = w$component, term = w$term,
             truth = unname(truth$effects[w$parameter]), estimate = w$estimate,
             low = w$CI.low, high = w$CI.high, p = w$p.value,
             converged = fit$fit.diagnostics$converged, stringsAsFactors = FALSE)
}

if (mode %in% c("run", "components")) {
  started <- Sys.time()
  out_dir <- if (mode == "run") dir else components_dir
  dir.create(out_dir, recursive = TRUE, showWarnings = FALSE)
  one <- if (mode == "run") one_dataset else component_rows
  order <- if (nzchar(Sys.getenv("WISPACK_BENCH_REVERSE"))) rev else identity
  for (k in order(seq_len(datasets))) {
    for (design_name in designs) {
      for (animals in animals_per_group) {
        path <- file.path(out_dir, sprintf("%s_a%d_k%03d.rds", design_name, animals, k))
        if (file.exists(path)) next
        message(format(Sys.time(), "[%H:%M:%S] "), design_name, ", ", animals,
                " animals per group, data set ", k, "/", datasets)
        rows <- tryCatch(one(design_name, animals, k), error = function(e) {
          message("  failed: ", conditionMessage(e))
          NULL
        })
        saveRDS(rows, path)
      }
    }
  }
  message("elapsed: ", format(round(difftime(Sys.time(), started, units = "mins"), 1)))
}

source("benchmarks/headlines.R") # register_headline(), bench_commit()
fmt <- function(x, se) sprintf("%.3f (%.3f)", x, se)
in_band <- function(x, se, low, high) x + 2 * se >= low & x - 2 * se <= high
files <- list.files(dir, "\\.rds$", full.names = TRUE)
rows <- do.call(rbind, lapply(files, readRDS))
if (is.null(rows) || !nrow(rows)) stop("no results yet")

# The combined procedure at tolerance `tau`, from the recorded checks: the
# rule of wisp_statistics(method = "profile") applied to each effect.
combined <- function(rows, tau) {
  root <- function(d) sqrt(pmax(d, 0))
  signed_zero <- sign(rows$estimate) * root(rows$deviance.zero)
  checks <- cbind(rows$deviance.zero, rows$deviance.lower, rows$deviance.upper)
  flagged <- rowSums(is.na(checks)) > 0 | apply(checks < -0.01, 1, any, na.rm = TRUE) |
    abs(signed_zero - rows$z) > tau | abs(root(rows$deviance.lower) - rows$q) > tau |
    abs(root(rows$deviance.upper) - rows$q) > tau |
    ((abs(rows$z) > rows$q) != (rows$deviance.zero > rows$q^2))
  flagged[is.na(flagged)] <- TRUE
  use <- flagged & rows$profile.method == "profile"
  data.frame(flagged = flagged,
             low = ifelse(use, rows$profile.low, rows$wald.low),
             high = ifelse(use, rows$profile.high, rows$wald.high),
             p = ifelse(use, rows$profile.p, rows$wald.p))
}

# Rate with a Monte Carlo SE clustered by data set (effects of one data set
# are not independent).
clustered_rate <- function(x, cluster) {
  keep <- !is.na(x)
  x <- x[keep]
  cluster <- cluster[keep]
  n <- length(x)
  if (!n) return(c(rate = NA, se = NA, n = 0))
  m <- mean(x)
  totals <- tapply(x - m, cluster, sum)
  c(rate = m, se = sqrt(sum(totals^2)) / n, n = n)
}

# Per component (rates, slopes, and points for reference), the default
# statistics' false-positive rate and coverage: Wald for rates and slopes.
component_files <- list.files(components_dir, "\\.rds$", full.names = TRUE)
if (length(component_files)) {
  component_data <- do.call(rbind, lapply(component_files, readRDS))
  component_summaries <- list()
  for (design_name in designs) for (animals in animals_per_group) {
    for (component in sort(unique(component_data$component))) {
      r <- component_data[component_data$design == design_name &
                            component_data$animals == animals &
                            component_data$component == component, , drop = FALSE]
      if (!nrow(r)) next
      null <- r$truth == 0
      fpr <- clustered_rate((r$p < alpha)[null], r$dataset[null])
      cover <- clustered_rate(r$low <= r$truth & r$truth <= r$high, r$dataset)
      component_summaries[[length(component_summaries) + 1]] <- data.frame(
        design = design_name, animals = animals, component = component,
        datasets = length(unique(r$dataset)), null.tests = fpr[["n"]],
        false.positive = fpr[["rate"]], false.positive.se = fpr[["se"]],
        coverage = cover[["rate"]], coverage.se = cover[["se"]],
        converged = mean(r$converged[!duplicated(r$dataset)]), stringsAsFactors = FALSE)
    }
  }
  component_table <- do.call(rbind, component_summaries)
  component_table$commit <- bench_commit()
  component_table$engine <- if (workers > 1) "fork" else "serial"
  utils::write.csv(component_table, file.path("benchmarks", "results", "component_calibration.csv"),
                   row.names = FALSE)
  component_targets <- component_table[component_table$animals %in% c(3L, 5L, 8L), ]
  for (component in c("block rate", "transition slope")) {
    m <- component_targets[component_targets$component == component, ]
    fp_in <- in_band(m$false.positive, m$false.positive.se, 0.03, 0.07)
    cover_in <- in_band(m$coverage, m$coverage.se, 0.93, 0.97)
    short <- sub(".* ", "", component)
    register_headline(
      "profile_calibration",
      c(sprintf("%s effects (Wald, the default): cells (of %d) within 2 SE of both bands", short, nrow(m)),
        sprintf("%s effects: cells (of %d) with false positives within 2 SE of 3-7 %%", short, nrow(m)),
        sprintf("%s effects: false-positive range, 3-8 animals", short),
        sprintf("%s effects: coverage range, 3-8 animals", short)),
      c(sum(fp_in & cover_in), sum(fp_in),
        sprintf("%.3f-%.3f", min(m$false.positive), max(m$false.positive)),
        sprintf("%.3f-%.3f", min(m$coverage), max(m$coverage))),
      c("cells", "cells", "rate", "rate"),
      "R_LIBS=<library with wispack> Rscript benchmarks/profile_calibration.R components 100; ... summary components")
  }
  cat("| design | animals | component | data sets | null tests | false positives | coverage |\n")
  cat("|---|---|---|---|---|---|---|\n")
  for (i in seq_len(nrow(component_table))) {
    s <- component_table[i, ]
    cat(sprintf("| %s | %d | %s | %d | %d | %s | %s |\n", s$design, s$animals, s$component,
                s$datasets, s$null.tests, fmt(s$false.positive, s$false.positive.se),
                fmt(s$coverage, s$coverage.se)))
  }
  cat("\n")
}
if (identical(part, "components")) quit(save = "no")

summaries <- list()
for (design_name in designs) for (animals in animals_per_group) {
  r <- rows[rows$design == design_name & rows$animals == animals, , drop = FALSE]
  if (!nrow(r)) next
  cluster <- r$dataset
  null <- r$truth == 0
  methods <- c(list(wald = data.frame(flagged = FALSE, low = r$wald.low, high = r$wald.high,
                                      p = r$wald.p),
                    profile.all = data.frame(flagged = TRUE,
                                             low = ifelse(r$profile.method == "profile",
                                                          r$profile.low, r$wald.low),
                                             high = ifelse(r$profile.method == "profile",
                                                           r$profile.high, r$wald.high),
                                             p = ifelse(r$profile.method == "profile",
                                                        r$profile.p, r$wald.p))),
               setNames(lapply(tolerances, function(t) combined(r, t)),
                        paste0("profile.tol", tolerances)))
  for (name in names(methods)) {
    m <- methods[[name]]
    fpr <- clustered_rate((m$p < alpha)[null], cluster[null])
    cover <- clustered_rate(m$low <= r$truth & r$truth <= m$high, cluster)
    flag <- clustered_rate(m$flagged, cluster)
    summaries[[length(summaries) + 1]] <- data.frame(
      design = design_name, animals = animals, method = name,
      datasets = length(unique(cluster)), null.tests = fpr[["n"]],
      false.positive = fpr[["rate"]], false.positive.se = fpr[["se"]],
      coverage = cover[["rate"]], coverage.se = cover[["se"]],
      flagged = flag[["rate"]],
      fit.seconds = stats::median(tapply(r$fit.seconds, cluster, `[`, 1)),
      profile.seconds = stats::median(tapply(r$profile.seconds, cluster, `[`, 1)),
      stringsAsFactors = FALSE)
  }
}
summary_table <- do.call(rbind, summaries)
summary_table$commit <- tryCatch(system("git rev-parse --short HEAD", intern = TRUE),
                                 error = function(e) NA)
summary_table$engine <- if (workers > 1) "fork" else "serial"
dir.create(file.path("benchmarks", "results"), showWarnings = FALSE)
utils::write.csv(summary_table, file.path("benchmarks", "results", "profile_calibration.csv"),
                 row.names = FALSE)
# What wisp()'s warning on small designs quotes: the Wald tests and the
# default combined procedure (tolerance 0.25), per design and group size.
shipped <- summary_table[summary_table$method %in% c("wald", "profile.tol0.25"),
                         c("design", "animals", "method", "datasets", "null.tests",
                           "false.positive", "false.positive.se", "coverage", "coverage.se",
                           "flagged", "commit")]
shipped$method[shipped$method == "profile.tol0.25"] <- "profile"
utils::write.csv(shipped, file.path("inst", "extdata", "point_calibration.csv"), row.names = FALSE)

# Headline figures: per method, the design x group-size cells (3, 5 and 8
# animals per group) whose false-positive rate and coverage are both within
# 2 Monte Carlo SE of their bands (3-7 %, 93-97 %), and the largest
# false-positive rate.
targets <- summary_table[summary_table$animals %in% c(3L, 5L, 8L), ]
headline <- function(method) {
  m <- targets[targets$method == method, ]
  c(sum(in_band(m$false.positive, m$false.positive.se, 0.03, 0.07) &
          in_band(m$coverage, m$coverage.se, 0.93, 0.97)),
    max(m$false.positive), nrow(m))
}
default <- headline("profile.tol0.25")
wald <- headline("wald")
register_headline(
  "profile_calibration",
  c(sprintf("point effects: cells (of %d, 7 designs x 3-8 animals) within 2 SE of both bands, default statistics", default[3]),
    sprintf("point effects: cells (of %d) within 2 SE of both bands, Wald alone", wald[3]),
    "largest false-positive rate of true-null point effects, 3-8 animals, default statistics",
    "largest false-positive rate of true-null point effects, 3-8 animals, Wald alone"),
  c(default[1], wald[1], round(default[2], 3), round(wald[2], 3)),
  c("cells", "cells", "rate", "rate"),
  "R_LIBS=<library with wispack> Rscript benchmarks/profile_calibration.R run 100; ... summary")
cat("| design | animals | method | data sets | null tests | false positives | coverage | flagged |\n")
cat("|---|---|---|---|---|---|---|---|\n")
for (i in seq_len(nrow(summary_table))) {
  s <- summary_table[i, ]
  cat(sprintf("| %s | %d | %s | %d | %d | %s | %s | %.2f |\n", s$design, s$animals, s$method,
              s$datasets, s$null.tests, fmt(s$false.positive, s$false.positive.se),
              fmt(s$coverage, s$coverage.se), s$flagged))
}
