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
#                0.6-1.2;
#   sparse       base with the sparse counts of a whole panel's typical
#                gene: first block rate 0.1-0.5 per cell (base: 3-12), so
#                most cells have no molecule of the gene; rate effects of
#                0.04 on the log(1 + rate) scale (about the rate itself);
#   moderate     base with first block rates of 1-3 per cell, between
#                sparse and base; rate effects of 0.25.
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
stopifnot(mode %in% c("run", "components", "genes", "summary"))
datasets <- if (length(args) >= 2 && mode != "summary") as.integer(args[2]) else 20L
# `genes` runs the designs named in its third argument (all by default).
gene_designs <- if (mode == "genes" && length(args) >= 3) strsplit(args[3], ",")[[1]] else NULL
# `summary components` summarises the components' run alone.
part <- if (mode == "summary" && length(args) >= 2) args[2] else if (mode %in% c("components", "genes")) {
  mode
} else "all"
stopifnot(part %in% c("all", "components", "genes"))
suppressPackageStartupMessages(library(wispack))
alpha <- 0.05
workers <- as.integer(Sys.getenv("WISPACK_BENCH_WORKERS", "1"))
dir <- file.path("benchmarks", "out", "profile_calibration")
dir.create(dir, recursive = TRUE, showWarnings = FALSE)
components_dir <- file.path(dir, "components")
genes_dir <- file.path(dir, "genes")
# Each gene's molecules per bin and animal, per data set (the summary's
# cache), and the bands the tables by expression use.
counts_path <- file.path(dir, "gene_counts.rds")
count_bands <- c(0, 2, 5, 10, 20, 40, 80, Inf)
# New designs go at the end: a data set's seed depends on its design's place.
designs <- c("base", "small_steps", "age", "two_points", "unequal", "ends", "close", "sparse",
             "moderate")
# The designs of well-expressed genes (first block rates of 3-12 per cell).
well_expressed <- setdiff(designs, c("sparse", "moderate"))
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
                rate.range = switch(design_name, sparse = c(0.1, 0.5), moderate = c(1, 3),
                                    c(3, 12)),
                effect.size = switch(design_name, sparse = 0.04, moderate = 0.25, 0.5),
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

# The gene-level tests of the default wisp() (anova(fit), one row per gene
# and term), with Wald statistics (the point checks do not change them).
gene_rows <- function(design_name, animals, k) {
  data <- simulate_design(design_name, animals, k)
  truth <- attr(data, "truth")
  fit <- suppressWarnings(wisp(data, degrees = truth$degrees, verbose = FALSE,
                               statistics = "wald", model.settings = list(LRO_cost = "none"),
                               max.fork = workers))
  tests <- as.data.frame(fit$gene.tests)
  changed <- vapply(tests$gene, function(gene) {
    any(truth$effects[grepl(paste0("_", gene, "_"), names(truth$effects), fixed = TRUE)] != 0)
  }, logical(1))
  data.frame(design = design_name, animals = animals, dataset = k, gene = tests$gene,
             term = tests$term, df = tests$df, statistic = tests$statistic,
             p = tests$p.value, method = tests$method, changed = changed,
             converged = tests$converged, stringsAsFactors = FALSE)
}

if (mode %in% c("run", "components", "genes")) {
  started <- Sys.time()
  out_dir <- switch(mode, run = dir, components = components_dir, genes = genes_dir)
  dir.create(out_dir, recursive = TRUE, showWarnings = FALSE)
  one <- switch(mode, run = one_dataset, components = component_rows, genes = gene_rows)
  order <- if (nzchar(Sys.getenv("WISPACK_BENCH_REVERSE"))) rev else identity
  for (k in order(seq_len(datasets))) {
    for (design_name in if (is.null(gene_designs)) designs else gene_designs) {
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
files <- list.files(dir, "_k[0-9]+\\.rds$", full.names = TRUE)
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
if (part %in% c("all", "components") && length(component_files)) {
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
# Gene level: per design, group size and term, the share of unchanged genes
# (no treatment effect at all) with p < 0.05 from anova(fit), and of the
# changed ones, with Monte Carlo SEs clustered by data set.
gene_files <- list.files(genes_dir, "\\.rds$", full.names = TRUE)
if (part %in% c("all", "genes") && length(gene_files)) {
  gene_data <- do.call(rbind, lapply(gene_files, readRDS))
  gene_summaries <- list()
  for (design_name in designs) for (animals in animals_per_group) {
    for (term in unique(gene_data$term)) {
      r <- gene_data[gene_data$design == design_name & gene_data$animals == animals &
                       gene_data$term == term, , drop = FALSE]
      if (!nrow(r)) next
      fpr <- clustered_rate((r$p < alpha)[!r$changed], r$dataset[!r$changed])
      power <- clustered_rate((r$p < alpha)[r$changed], r$dataset[r$changed])
      gene_summaries[[length(gene_summaries) + 1]] <- data.frame(
        design = design_name, animals = animals, term = term,
        datasets = length(unique(r$dataset)), null.genes = fpr[["n"]],
        false.positive = fpr[["rate"]], false.positive.se = fpr[["se"]],
        changed.genes = power[["n"]], power = power[["rate"]], power.se = power[["se"]],
        not.converged = mean(!r$converged), stringsAsFactors = FALSE)
    }
  }
  gene_table <- do.call(rbind, gene_summaries)
  gene_table$commit <- bench_commit()
  gene_table$engine <- if (workers > 1) "fork" else "serial"
  utils::write.csv(gene_table, file.path("benchmarks", "results", "gene_calibration_designs.csv"),
                   row.names = FALSE)
  cat("| design | animals | term | data sets | null genes | false positives | changed genes | power |\n")
  cat("|---|---|---|---|---|---|---|---|\n")
  for (i in seq_len(nrow(gene_table))) {
    g <- gene_table[i, ]
    cat(sprintf("| %s | %d | %s | %d | %d | %s | %d | %s |\n", g$design, g$animals, g$term,
                g$datasets, g$null.genes, fmt(g$false.positive, g$false.positive.se),
                g$changed.genes, fmt(g$power, g$power.se)))
  }
  cat("\n")
  # By expression, as for the points: unchanged genes' false positives per
  # term by band of the gene's molecules per bin and animal, pooled over the
  # designs at 3, 5 and 8 animals per group.
  gene_counts <- if (file.exists(counts_path)) readRDS(counts_path) else NULL
  banded <- gene_data[gene_data$animals %in% c(3L, 5L, 8L) & !gene_data$changed, ]
  banded$per_row <- gene_counts$per_row[match(
    paste(banded$design, banded$animals, banded$dataset, banded$gene),
    paste(gene_counts$design, gene_counts$animals, gene_counts$dataset, gene_counts$gene))]
  banded <- banded[!is.na(banded$per_row), ]
  band <- cut(banded$per_row, count_bands, right = FALSE)
  cluster <- paste(banded$design, banded$animals, banded$dataset)
  gene_by_counts <- list()
  for (term in unique(banded$term)) for (b in levels(band)) {
    here <- band %in% b & banded$term == term
    fpr <- clustered_rate((banded$p < alpha)[here], cluster[here])
    gene_by_counts[[length(gene_by_counts) + 1]] <- data.frame(
      counts.from = count_bands[match(b, levels(band))],
      counts.to = count_bands[match(b, levels(band)) + 1], term = term,
      designs = length(unique(banded$design[here])), null.genes = fpr[["n"]],
      false.positive = fpr[["rate"]], false.positive.se = fpr[["se"]],
      stringsAsFactors = FALSE)
  }
  gene_count_table <- do.call(rbind, gene_by_counts)
  gene_count_table <- gene_count_table[gene_count_table$null.genes > 0, ]
  gene_count_table$commit <- bench_commit()
  gene_count_table$engine <- if (workers > 1) "fork" else "serial"
  utils::write.csv(gene_count_table, file.path("benchmarks", "results", "gene_calibration_counts.csv"),
                   row.names = FALSE)
  utils::write.csv(gene_count_table[setdiff(names(gene_count_table), "engine")],
                   file.path("inst", "extdata", "gene_calibration_counts.csv"), row.names = FALSE)
  cat("| molecules per bin and animal | term | null genes | false positives |\n")
  cat("|---|---|---|---|\n")
  for (i in seq_len(nrow(gene_count_table))) {
    g <- gene_count_table[i, ]
    cat(sprintf("| %s to %s | %s | %d | %s |\n", g$counts.from, g$counts.to, g$term,
                g$null.genes, fmt(g$false.positive, g$false.positive.se)))
  }
  cat("\n")
}
if (part != "all") quit(save = "no")

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
# The designs of well-expressed genes only: sparse genes have their own
# warning, from the table by counts below.
shipped <- summary_table[summary_table$method %in% c("wald", "profile.tol0.25") &
                           summary_table$design %in% well_expressed,
                         c("design", "animals", "method", "datasets", "null.tests",
                           "false.positive", "false.positive.se", "coverage", "coverage.se",
                           "flagged", "commit")]
shipped$method[shipped$method == "profile.tol0.25"] <- "profile"
utils::write.csv(shipped, file.path("inst", "extdata", "point_calibration.csv"), row.names = FALSE)

# By expression: each gene's molecules per bin and animal (the mean count of
# its rows in the summed table: one per animal, within-animal level and
# bin), from the simulated data again (cached), and the false-positive rate
# and coverage of point effects by band of it, pooled over the designs at
# 3, 5 and 8 animals per group. wisp()'s warning on sparse genes quotes it.
gene_counts <- if (file.exists(counts_path)) readRDS(counts_path) else NULL
needed <- unique(rows[c("design", "animals", "dataset")])
have <- paste(gene_counts$design, gene_counts$animals, gene_counts$dataset)
needed <- needed[!paste(needed$design, needed$animals, needed$dataset) %in% have, , drop = FALSE]
for (i in seq_len(nrow(needed))) {
  data <- simulate_design(needed$design[i], needed$animals[i], needed$dataset[i])
  units <- intersect(c("ran", "bin", "genotype", "age", "hemisphere"), names(data))
  summed <- stats::aggregate(data["count"], data[c("species", units)], sum)
  per_row <- tapply(summed$count, summed$species, mean)
  gene_counts <- rbind(gene_counts, data.frame(
    design = needed$design[i], animals = needed$animals[i], dataset = needed$dataset[i],
    gene = names(per_row), per_row = as.vector(per_row), stringsAsFactors = FALSE))
}
saveRDS(gene_counts, counts_path)
rows$gene <- sub("^.*_(gene[0-9]+)_.*$", "\\1", rows$parameter)
rows$per_row <- gene_counts$per_row[match(paste(rows$design, rows$animals, rows$dataset, rows$gene),
                                          paste(gene_counts$design, gene_counts$animals,
                                                gene_counts$dataset, gene_counts$gene))]
by_counts <- list()
banded <- rows[rows$animals %in% c(3L, 5L, 8L), ]
band <- cut(banded$per_row, count_bands, right = FALSE)
cluster <- paste(banded$design, banded$animals, banded$dataset)
for (method in c("wald", "profile.tol0.25")) {
  m <- if (method == "wald") {
    data.frame(low = banded$wald.low, high = banded$wald.high, p = banded$wald.p)
  } else {
    combined(banded, 0.25)
  }
  for (b in levels(band)) {
    here <- band %in% b
    null <- here & banded$truth == 0
    fpr <- clustered_rate((m$p < alpha)[null], cluster[null])
    cover <- clustered_rate((m$low <= banded$truth & banded$truth <= m$high)[here], cluster[here])
    by_counts[[length(by_counts) + 1]] <- data.frame(
      counts.from = count_bands[match(b, levels(band))],
      counts.to = count_bands[match(b, levels(band)) + 1],
      method = if (method == "wald") "wald" else "profile",
      designs = length(unique(banded$design[here])), null.tests = fpr[["n"]],
      false.positive = fpr[["rate"]], false.positive.se = fpr[["se"]],
      coverage = cover[["rate"]], coverage.se = cover[["se"]], stringsAsFactors = FALSE)
  }
}
count_table <- do.call(rbind, by_counts)
count_table$commit <- summary_table$commit[1]
count_table$engine <- summary_table$engine[1]
utils::write.csv(count_table, file.path("benchmarks", "results", "point_calibration_counts.csv"),
                 row.names = FALSE)
utils::write.csv(count_table[setdiff(names(count_table), "engine")],
                 file.path("inst", "extdata", "point_calibration_counts.csv"), row.names = FALSE)
band_range <- function(method, sparse) {
  m <- count_table[count_table$method == method & (count_table$counts.to <= 10) == sparse, ]
  sprintf("%.3f-%.3f", min(m$false.positive), max(m$false.positive))
}
register_headline(
  "profile_calibration",
  c("point effects of genes below 10 molecules per bin and animal: false positives by count band, default statistics",
    "point effects of genes below 10 molecules per bin and animal: false positives by count band, Wald alone",
    "point effects of genes with 10 or more molecules per bin and animal: false positives by count band, default statistics",
    "point effects of genes with 10 or more molecules per bin and animal: false positives by count band, Wald alone"),
  c(band_range("profile", TRUE), band_range("wald", TRUE), band_range("profile", FALSE),
    band_range("wald", FALSE)),
  rep("rate", 4),
  "R_LIBS=<library with wispack> Rscript benchmarks/profile_calibration.R run 100; ... summary")

# Headline figures: per method, the design x group-size cells (3, 5 and 8
# animals per group) whose false-positive rate and coverage are both within
# 2 Monte Carlo SE of their bands (3-7 %, 93-97 %), and the largest
# false-positive rate.
targets <- summary_table[summary_table$animals %in% c(3L, 5L, 8L) &
                           summary_table$design %in% well_expressed, ]
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
    "largest false-positive rate of true-null point effects, 7 well-expressed designs x 3-8 animals, default statistics",
    "largest false-positive rate of true-null point effects, 7 well-expressed designs x 3-8 animals, Wald alone"),
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
