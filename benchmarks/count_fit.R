# Speed and memory of the count likelihood (the default) on the two model
# sizes of the model-core issue, for fits that meet the gradient criterion:
# - small: 1 context, 6 genes, 4 animals, hemisphere x age (2 x 2), 100 bins;
# - large: 12 contexts, 6 genes, 5 animals, hemisphere x age (2 x 3), 100 bins;
# and a bootstrap replicate of the small model, which starts from the
# full-data estimate. Structures are the simulated ones (degrees fixed), so
# the timing is the fit's, not the change-point search's.
#
# Usage (from the repository root, with wispack installed):
#   Rscript benchmarks/count_fit.R [repeats]
# Writes benchmarks/results/count_fit.csv and prints a Markdown table.

args <- as.integer(commandArgs(trailingOnly = TRUE))
repeats <- if (length(args) >= 1) args[1] else 5L
suppressPackageStartupMessages(library(wispack))

peak_rss_mb <- function() {
  status <- readLines("/proc/self/status")
  as.numeric(gsub("[^0-9]", "", grep("^VmHWM:", status, value = TRUE))) / 1024
}

simulated <- function(n.contexts, within, animals, seed = 1) {
  design <- wisp_design(within = within, animals.per.group = animals)
  wisp_simulate(design = design, n.contexts = n.contexts, n.genes = 6, n.bins = 100,
                cells.per.bin = 5, degrees = 3L, seed = seed)
}

rows <- list()
record <- function(model, measure, values, extra = list()) {
  rows[[length(rows) + 1]] <<- data.frame(model = model, measure = measure,
                                          repeat_no = seq_along(values), value = values)
}

fit_once <- function(data, workers) {
  truth <- attr(data, "truth")
  started <- proc.time()[["elapsed"]]
  fit <- wisp(data, degrees = truth$degrees, fit_only = TRUE, verbose = FALSE,
              max.fork = workers)
  list(fit = fit, wall = proc.time()[["elapsed"]] - started)
}

cat("Small model...\n")
small_data <- simulated(1, list(hemisphere = c("left", "right"), age = c("P12", "P18")), 4)
small <- lapply(seq_len(repeats), function(r) fit_once(small_data, 1))
d <- small[[1]]$fit$fit.diagnostics
cat(sprintf("  %d observed rows, %d parameters, converged %s, max scaled gradient %.2g\n",
            nobs(small[[1]]$fit), d$n.params, d$converged, d$max.gradient))
record("small", "fit_seconds", vapply(small, function(x) x$fit$fit.diagnostics$fit.seconds, 0))
record("small", "wisp_seconds", vapply(small, function(x) x$wall, 0))
record("small", "newton_iterations", vapply(small, function(x) x$fit$fit.diagnostics$iterations, 0))
record("small", "evaluations", vapply(small, function(x) x$fit$fit.diagnostics$num.evals, 0))
record("small", "converged", vapply(small, function(x) as.numeric(x$fit$fit.diagnostics$converged), 0))
record("small", "rows", nobs(small[[1]]$fit))
record("small", "parameters", d$n.params)

# A bootstrap replicate of the small model, in this process, with the
# default scheme (parametric: its time includes drawing new animals and
# counts and refitting from the estimate).
fit <- small[[1]]$fit
replicates <- bs_batch(fit, max(10L, 4L * repeats), backend = "serial", seed = 1,
                       progress = FALSE)
record("small", "replicate_seconds", replicates$diagnostics$seconds)
record("small", "replicate_iterations", replicates$diagnostics$iterations)
record("small", "replicate_converged", as.numeric(replicates$diagnostics$converged))
record("small", "peak_rss_mb_of_R", peak_rss_mb())

cat("Large model...\n")
large_data <- simulated(12, list(hemisphere = c("left", "right"), age = c("P7", "P12", "P18")), 5)
for (workers in 1:2) {
  large <- lapply(seq_len(max(1L, repeats %/% 2L)), function(r) fit_once(large_data, workers))
  name <- sprintf("large, %d worker%s", workers, if (workers > 1) "s" else "")
  record(name, "wisp_seconds", vapply(large, function(x) x$wall, 0))
  record(name, "fit_seconds", vapply(large, function(x) x$fit$fit.diagnostics$fit.seconds, 0))
  record(name, "newton_iterations", vapply(large, function(x) x$fit$fit.diagnostics$iterations, 0))
  record(name, "converged", vapply(large, function(x) as.numeric(x$fit$fit.diagnostics$converged), 0))
  if (workers == 1) {
    record(name, "rows", nobs(large[[1]]$fit))
    record(name, "parameters", large[[1]]$fit$fit.diagnostics$n.params)
  }
}
record("large", "peak_rss_mb_of_R", peak_rss_mb())

results <- do.call(rbind, rows)
dir.create("benchmarks/results", showWarnings = FALSE)
source("benchmarks/headlines.R") # with_provenance(), register_headline()
utils::write.csv(with_provenance(results, "nb"), "benchmarks/results/count_fit.csv", row.names = FALSE)
summary <- aggregate(value ~ model + measure, data = results,
                     FUN = function(x) c(median = stats::median(x), min = min(x), max = max(x), n = length(x)))
cat(sprintf("\n%d repeats; R %s; %s\n\n", repeats, getRversion(), format(Sys.time(), "%Y-%m-%d")))
cat("| model | measure | median | range | n |\n|---|---|---:|---|---:|\n")
for (i in seq_len(nrow(summary))) {
  v <- summary$value[i, ]
  cat(sprintf("| %s | %s | %.3g | %.3g–%.3g | %d |\n", summary$model[i], summary$measure[i],
              v[["median"]], v[["min"]], v[["max"]], as.integer(v[["n"]])))
}

# Headline figures for benchmarks/RESULTS.md (benchmarks/headlines.R).
med <- function(model, measure) {
  stats::median(results$value[results$model == model & results$measure == measure])
}
register_headline("count_fit",
                  c("small model, whole wisp()", "small model, one bootstrap replicate",
                    "large model, fit on 1 worker", "large model, fit on 2 workers",
                    "small model, peak RSS of R"),
                  c(med("small", "wisp_seconds"), med("small", "replicate_seconds"),
                    med("large, 1 worker", "fit_seconds"), med("large, 2 workers", "fit_seconds"),
                    med("small", "peak_rss_mb_of_R")),
                  c("s", "s", "s", "s", "MB"),
                  paste("R_LIBS=<library with wispack> Rscript benchmarks/count_fit.R", repeats))
