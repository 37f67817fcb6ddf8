# Calibration of wispack's tests and intervals on simulated experiments with
# a known truth: animals nested in a between-animal factor (genotype; 3, 5
# or 8 animals per group) crossed with a within-animal factor (hemisphere),
# null genes (no treatment effect) beside genes with effects.
#
# For every method and component (Rt, tslope, tpoint) it reports, each with
# its Monte Carlo standard error:
# - coverage of the unadjusted 95 % intervals of the treatment effects;
# - the unadjusted false-positive rate at alpha = 0.05 (true effects of 0);
# - the Holm family-wise error rate (a data set with any true-0 effect
#   rejected after Holm adjustment over all of the fit's tested effects);
# - power (Holm-adjusted rejections of non-zero effects).
# Methods: the count likelihood ("nb") with Wald tests (the default) and
# with the bootstrap schemes "animals", "parametric" and "cells"; the
# original likelihood with its scheme "cells" (and "animals"); fits with the
# simulated structure, and Wald tests of fits with a detected structure.
#
# Usage (from the repository root, with wispack installed):
#   Rscript benchmarks/calibration.R quick     # 6 data sets per design, 49 replicates
#   Rscript benchmarks/calibration.R full      # 30 data sets per design with 199
#                                              # replicates per bootstrap; the Wald
#                                              # rows on 100 data sets per design
#   Rscript benchmarks/calibration.R summary   # tables from what has been computed
# Stages are resumable: every (data set, method) result is kept in
# benchmarks/out/calibration/<mode>/ and skipped when it exists.
# Writes benchmarks/results/calibration.csv and prints Markdown tables.

args <- commandArgs(trailingOnly = TRUE)
mode <- if (length(args)) args[1] else "quick"
stopifnot(mode %in% c("quick", "full", "summary"))
suppressPackageStartupMessages(library(wispack))

settings <- list(
  quick = list(datasets = 6L, wald_datasets = 6L, replicates = 49L, original_datasets = 3L),
  full = list(datasets = 30L, wald_datasets = 100L, replicates = 199L, original_datasets = 12L)
)
animals_per_group <- c(3L, 5L, 8L)
alpha <- 0.05
workers <- 2L

out_dir <- function(m) file.path("benchmarks", "out", "calibration", m)

# The simulated experiments (same seeds in every calibration benchmark).
source("benchmarks/calibration_design.R")

# One row per tested effect: the method's estimate, interval and p-values.
effect_rows <- function(fit, stats, truth, method, likelihood, structure) {
  beta <- fit$parameters$role == "beta"
  names <- fit$parameters$name[beta]
  s <- stats[match(names, stats$parameter), ]
  data.frame(
    parameter = names, component = fit$parameters$component[beta],
    species = fit$parameters$species[beta],
    truth = unname(truth$effects[names]), estimate = s$estimate,
    lower = s$CI.low, upper = s$CI.high, p = s$p.value, p_holm = s$p.value.adj,
    method = method, likelihood = likelihood, structure = structure,
    stringsAsFactors = FALSE
  )
}

run_method <- function(path, compute) {
  if (file.exists(path)) return(invisible(readRDS(path)))
  started <- proc.time()[["elapsed"]]
  rows <- tryCatch(compute(), error = function(e) {
    message("  failed: ", conditionMessage(e))
    NULL
  })
  if (!is.null(rows)) rows$seconds <- proc.time()[["elapsed"]] - started
  saveRDS(rows, path)
  invisible(rows)
}

run_dataset <- function(animals, k, config, dir) {
  data <- simulate_dataset(animals, k)
  truth <- attr(data, "truth")
  tag <- sprintf("a%d_k%03d", animals, k)
  path <- function(method) file.path(dir, sprintf("%s_%s.rds", tag, method))
  fit_nb <- NULL
  nb <- function() {
    if (is.null(fit_nb)) {
      fit_nb <<- wisp(data, degrees = truth$degrees, verbose = FALSE,
                      model.settings = list(LRO_cost = "none"), fit_only = TRUE)
    }
    fit_nb
  }
  run_method(path("nb_wald"), function() {
    fit <- nb()
    stats <- wisp_statistics(fit, method = "wald", level = 1 - alpha)$stats$parameters
    rows <- effect_rows(fit, stats, truth, "wald", "nb", "true")
    rows$converged <- fit$fit.diagnostics$converged
    rows
  })
  run_method(path("nb_wald_detected"), function() {
    fit <- wisp(data, verbose = FALSE, fit_only = TRUE)
    stats <- wisp_statistics(fit, method = "wald", level = 1 - alpha)$stats$parameters
    rows <- effect_rows(fit, stats, truth, "wald", "nb", "detected")
    # Effects of curves whose detected degree differs from the simulated one
    # are not the simulated ones: left out.
    same <- fit$degrees[cbind(rep(1, length(rows$species)), match(rows$species, colnames(fit$degrees)))] ==
      truth$degrees[cbind(rep(1, length(rows$species)), match(rows$species, colnames(truth$degrees)))]
    rows$same_degree <- same
    rows$converged <- fit$fit.diagnostics$converged
    rows
  })
  # The Wald rows cost a fit each, so they use more data sets than the
  # bootstrap rows (whose replicates cost 200 fits each).
  if (k > config$datasets) return(invisible())
  for (scheme in c("animals", "parametric", "cells")) {
    run_method(path(paste0("nb_", scheme)), function() {
      fit <- nb()
      boot <- bs_batch(fit, config$replicates, max.fork = workers, resample = scheme,
                       seed = k, progress = FALSE)
      stats <- suppressWarnings(wisp_statistics(fit, boot = boot, method = "percentile",
                                                level = 1 - alpha))$stats$parameters
      rows <- effect_rows(fit, stats, truth, scheme, "nb", "true")
      rows$converged <- mean(boot$diagnostics$converged %in% TRUE)
      rows
    })
  }
  if (k <= config$original_datasets) {
    fit_original <- NULL
    original <- function() {
      if (is.null(fit_original)) {
        fit_original <<- wisp(data, degrees = truth$degrees, verbose = FALSE, fit_only = TRUE,
                              model.settings = list(LRO_cost = "none", likelihood = "original"))
      }
      fit_original
    }
    for (scheme in c("cells", "animals")) {
      run_method(path(paste0("original_", scheme)), function() {
        fit <- original()
        boot <- bs_batch(fit, config$replicates, max.fork = workers, resample = scheme,
                         seed = k, progress = FALSE)
        percentile <- suppressWarnings(wisp_statistics(fit, boot = boot, method = "percentile",
                                                       level = 1 - alpha))$stats$parameters
        centred <- suppressWarnings(wisp_statistics(fit, boot = boot, method = "centred",
                                                    level = 1 - alpha))$stats$parameters
        rbind(effect_rows(fit, percentile, truth, scheme, "original", "true"),
              effect_rows(fit, centred, truth, paste(scheme, "(original statistics)"),
                          "original", "true"))
      })
    }
  }
}

# ---------------------------------------------------------------------------
# Summary

rate_se <- function(x) {
  x <- x[!is.na(x)]
  n <- length(x)
  p <- if (n) mean(x) else NA_real_
  c(rate = p, se = if (n) sqrt(p * (1 - p) / n) else NA_real_, n = n)
}

summarise_rows <- function(rows) {
  rows <- rows[is.na(rows$same_degree) | rows$same_degree, ]
  keys <- unique(rows[c("animals", "likelihood", "method", "structure")])
  out <- list()
  for (i in seq_len(nrow(keys))) {
    key <- keys[i, ]
    r <- merge(rows, key)
    null <- r$truth == 0
    for (component in c("Rt", "tslope", "tpoint", "all")) {
      c_rows <- if (component == "all") r else r[r$component == component, ]
      c_null <- c_rows$truth == 0
      covered <- c_rows$lower <= c_rows$truth & c_rows$truth <= c_rows$upper
      fp <- c_rows$p[c_null] < alpha
      power <- c_rows$p_holm[!c_null] < alpha
      out[[length(out) + 1]] <- data.frame(
        key, component = component,
        coverage = rate_se(covered)[["rate"]], coverage_se = rate_se(covered)[["se"]],
        effects = sum(!is.na(covered)),
        false_positive = rate_se(fp)[["rate"]], false_positive_se = rate_se(fp)[["se"]],
        power = rate_se(power)[["rate"]], power_se = rate_se(power)[["se"]],
        stringsAsFactors = FALSE)
    }
    # Holm family-wise error: per data set, any true-0 effect rejected after Holm.
    fwer <- tapply(r$p_holm < alpha & null, r$dataset, function(x) any(x, na.rm = TRUE))
    out[[length(out)]]$holm_fwer <- NA
    last <- length(out)
    out[[last]]$holm_fwer <- rate_se(fwer)[["rate"]]
    out[[last]]$holm_fwer_se <- rate_se(fwer)[["se"]]
    out[[last]]$datasets <- length(fwer)
    out[[last]]$no_p_zero <- all(is.na(r$p) | r$p > 0)
  }
  do.call(rbind, lapply(out, function(x) {
    for (column in c("holm_fwer", "holm_fwer_se", "datasets", "no_p_zero")) {
      if (is.null(x[[column]])) x[[column]] <- NA
    }
    x
  }))
}

load_rows <- function(m) {
  files <- list.files(out_dir(m), pattern = "[.]rds$", full.names = TRUE)
  rows <- lapply(files, function(f) {
    r <- readRDS(f)
    if (is.null(r) || !nrow(r)) return(NULL)
    tag <- sub("_.*", "", basename(f))
    r$animals <- as.integer(sub("a", "", tag))
    r$dataset <- sub("^(a[0-9]+_k[0-9]+)_.*", "\\1", basename(f))
    if (is.null(r$same_degree)) r$same_degree <- NA
    if (is.null(r$converged)) r$converged <- NA
    r
  })
  do.call(rbind, rows)
}

print_tables <- function(summary) {
  fmt <- function(p, se) ifelse(is.na(p), "–", sprintf("%.3f ± %.3f", p, se))
  cat("\n| animals/group | likelihood | method | structure | component | effects | coverage | false positives | power (Holm) |\n")
  cat("|---:|---|---|---|---|---:|---|---|---|\n")
  for (i in seq_len(nrow(summary))) {
    s <- summary[i, ]
    cat(sprintf("| %d | %s | %s | %s | %s | %d | %s | %s | %s |\n", s$animals, s$likelihood, s$method,
                s$structure, s$component, s$effects, fmt(s$coverage, s$coverage_se),
                fmt(s$false_positive, s$false_positive_se), fmt(s$power, s$power_se)))
  }
  fw <- summary[summary$component == "all", ]
  cat("\n| animals/group | likelihood | method | structure | data sets | Holm family-wise error | no p-value 0 |\n")
  cat("|---:|---|---|---|---:|---|---|\n")
  for (i in seq_len(nrow(fw))) {
    s <- fw[i, ]
    cat(sprintf("| %d | %s | %s | %s | %d | %s | %s |\n", s$animals, s$likelihood, s$method,
                s$structure, s$datasets, fmt(s$holm_fwer, s$holm_fwer_se), s$no_p_zero))
  }
}

# ---------------------------------------------------------------------------
# Main

if (mode != "summary") {
  config <- settings[[mode]]
  dir <- out_dir(mode)
  dir.create(dir, recursive = TRUE, showWarnings = FALSE)
  total <- max(config$datasets, config$wald_datasets)
  for (k in seq_len(total)) {
    for (animals in animals_per_group) {
      cat(sprintf("[%s] %d animals per group, data set %d/%d\n", format(Sys.time(), "%H:%M:%S"),
                  animals, k, total))
      run_dataset(animals, k, config, dir)
    }
  }
}
m <- if (mode == "summary") {
  if (length(list.files(out_dir("full")))) "full" else "quick"
} else mode
rows <- load_rows(m)
summary <- summarise_rows(rows)
summary <- summary[order(summary$animals, summary$likelihood, summary$method, summary$structure,
                         match(summary$component, c("Rt", "tslope", "tpoint", "all"))), ]
source("benchmarks/headlines.R") # with_provenance(), register_headline()
dir.create("benchmarks/results", showWarnings = FALSE)
utils::write.csv(with_provenance(summary, summary$likelihood), sprintf("benchmarks/results/calibration%s.csv",
                                  if (m == "quick") "_quick" else ""), row.names = FALSE)
seconds <- aggregate(seconds ~ method + likelihood + structure, data = unique(rows[c("dataset", "method", "likelihood", "structure", "seconds")]), FUN = stats::median)
cat(sprintf("\nMode %s; %d data sets; R %s; %s\n", m, length(unique(rows$dataset)), getRversion(),
            format(Sys.time(), "%Y-%m-%d")))
print_tables(summary)
cat("\nMedian seconds per data set and method:\n")
print(seconds, row.names = FALSE)

# Headline figures for benchmarks/RESULTS.md (benchmarks/headlines.R).
# Only after a full run: a summary of RDS files fitted earlier would get this checkout's commit.
if (mode == "full") {
  wald <- summary[summary$likelihood == "nb" & summary$method == "wald" & summary$structure == "true" &
                    summary$component == "all", ]
  command <- "R_LIBS=<library with wispack> Rscript benchmarks/calibration.R full"
  register_headline("calibration",
                    sprintf("Wald coverage of 95 %% intervals, every component, %d animals per group", wald$animals),
                    sprintf("%.3f", wald$coverage), "rate", command)
  register_headline("calibration",
                    sprintf("Wald false positives at 0.05, every component, %d animals per group", wald$animals),
                    sprintf("%.3f", wald$false_positive), "rate", command)
}
