# Cost of one objective evaluation (value + gradient) and of one fit, on
# simulated models of the two sizes in the model-core issue, and how the
# evaluation cost grows with rows and with parameters.
#
# Usage (from the repository root, with wispack installed with its test hooks,
# which time the core and the engine directly: WISPACK_TEST_HOOKS=true R CMD INSTALL .):
#   Rscript benchmarks/model_eval.R [repeats]
# Writes benchmarks/results/model_eval.csv and prints Markdown tables.

args <- as.integer(commandArgs(trailingOnly = TRUE))
repeats <- if (length(args) >= 1) args[1] else 5L
suppressPackageStartupMessages(library(wispack))

peak_rss_mb <- function() {
  status <- readLines("/proc/self/status")
  as.numeric(gsub("[^0-9]", "", grep("^VmHWM:", status, value = TRUE))) / 1024
}

# A simulated model with its true parameters; degrees fixed so the parameter
# count is known.
simulated_model <- function(n.contexts, n.genes, n.random, fixed.effects, n.bins, degrees) {
  data <- wisp_simulate(n.contexts = n.contexts, n.genes = n.genes, n.random = n.random,
                        fixed.effects = fixed.effects, n.bins = n.bins, degrees = degrees,
                        seed = 1)
  truth <- attr(data, "truth")
  model <- wispack:::model_build(data, names(fixed.effects), NULL, truth$degrees, bins = n.bins)
  list(model = model, truth = unname(truth$parameters))
}

evaluation_ms <- function(sim, calls = 30) {
  per_call <- wispack:::model_time_evaluation_rust(sim$model$bytes, sim$truth, as.integer(calls))
  1000 * stats::median(per_call)
}

# A start away from the truth: every parameter moved by 5 % of its size, so
# the fit has work to do.
perturbed <- function(sim) {
  start <- sim$truth * 1.05
  if (!wispack:::model_is_feasible(sim$model, start)) start <- sim$truth
  start
}

fit_seconds <- function(sim) {
  start <- perturbed(sim)
  fit <- wispack:::model_fit(sim$model, start)$diagnostics
  c(seconds = fit$fit.seconds, evaluations = fit$num.evals, converged = fit$converged)
}

factors_2x2 <- list(hemisphere = c("left", "right"), age = c("P12", "P18"))
factors_2x3 <- list(hemisphere = c("left", "right"), age = c("P7", "P12", "P18"))
small_degrees <- matrix(c(3, 3, 3, 3, 3, 2), 1)
large_degrees <- matrix(rep(c(3, 3, 2), length.out = 72), 12)
large_degrees[1:2, ] <- 3L

rows <- list()
record <- function(model_name, sim, measure, values) {
  rows[[length(rows) + 1]] <<- data.frame(
    model = model_name, rows = nrow(sim$model$summed), params = length(sim$truth),
    measure = measure, repeat_no = seq_along(values), value = values)
}

cat("Building the small model...\n")
small <- simulated_model(1, 6, 4, factors_2x2, 100, small_degrees)
record("small", small, "evaluation_ms", replicate(repeats, evaluation_ms(small)))
if (wispack:::test_hooks_enabled()) {
  fits <- replicate(repeats, fit_seconds(small))
  record("small", small, "fit_seconds", fits["seconds", ])
  record("small", small, "fit_evaluations", fits["evaluations", ])
  record("small", small, "fit_converged", fits["converged", ])
}

# Peak RSS so far is the small model's (the large one is not built yet).
record("small", small, "peak_rss_mb_of_R", peak_rss_mb())

cat("Building the large model...\n")
large <- simulated_model(12, 6, 5, factors_2x3, 100, large_degrees)
record("large", large, "evaluation_ms", replicate(repeats, evaluation_ms(large, 10)))
if (wispack:::test_hooks_enabled()) {
  fits <- replicate(max(1, repeats %/% 2), fit_seconds(large))
  record("large", large, "fit_seconds", fits["seconds", ])
  record("large", large, "fit_evaluations", fits["evaluations", ])
  record("large", large, "fit_converged", fits["converged", ])
}
record("large", large, "peak_rss_mb_of_R", peak_rss_mb())

cat("Scaling with rows (bins) and with parameters (genes)...\n")
for (bins in c(50, 100, 200, 400)) {
  sim <- simulated_model(1, 6, 4, factors_2x2, bins, small_degrees)
  record(sprintf("small, %d bins", bins), sim, "evaluation_ms", replicate(repeats, evaluation_ms(sim)))
}
for (genes in c(6, 12, 24, 48)) {
  sim <- simulated_model(1, genes, 4, factors_2x2, 100, matrix(rep(c(3, 3, 3, 3, 3, 2), length.out = genes), 1))
  record(sprintf("small, %d genes", genes), sim, "evaluation_ms", replicate(repeats, evaluation_ms(sim)))
}

results <- do.call(rbind, rows)
dir.create("benchmarks/results", showWarnings = FALSE)
source("benchmarks/headlines.R") # with_provenance(), register_headline()
utils::write.csv(with_provenance(results, "original"), "benchmarks/results/model_eval.csv", row.names = FALSE)

summary <- aggregate(value ~ model + rows + params + measure, data = results,
                     FUN = function(x) c(median = stats::median(x), min = min(x), max = max(x)))
summary <- summary[order(summary$measure, summary$rows, summary$params), ]
cat(sprintf("\n%d repeats; R %s; %s\n\n", repeats, getRversion(), format(Sys.time(), "%Y-%m-%d")))
cat("| model | rows | params | measure | median | range |\n|---|---:|---:|---|---:|---|\n")
for (i in seq_len(nrow(summary))) {
  v <- summary$value[i, ]
  cat(sprintf("| %s | %d | %d | %s | %.3g | %.3g–%.3g |\n", summary$model[i], summary$rows[i],
              summary$params[i], summary$measure[i], v[["median"]], v[["min"]], v[["max"]]))
}

# Headline figures for benchmarks/RESULTS.md (benchmarks/headlines.R).
med <- function(model, measure) stats::median(results$value[results$model == model & results$measure == measure])
register_headline("model_eval",
                  c("small model, one evaluation of the original objective",
                    "large model, one evaluation of the original objective"),
                  c(med("small", "evaluation_ms"), med("large", "evaluation_ms")), "ms",
                  paste("Rscript benchmarks/model_eval.R", repeats))
if (wispack:::test_hooks_enabled()) {
  register_headline("model_eval", c("small model, fit", "large model, fit"),
                    c(med("small", "fit_seconds"), med("large", "fit_seconds")), "s",
                    paste("Rscript benchmarks/model_eval.R", repeats))
}
