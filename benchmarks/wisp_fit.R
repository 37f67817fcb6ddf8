# wisp() end to end on data of the original's tutorial size (1 context,
# 6 genes, 4 mice, hemisphere x 2 ages, 100 bins, ~77,000 tokens): run time
# without and with the LRO grid search, and how often the detected degree
# of a (context, gene) curve equals the simulated one.
#
# Usage: Rscript benchmarks/wisp_fit.R [repeats] [datasets]
# Writes benchmarks/results/wisp_fit.csv and prints Markdown tables.

args <- as.integer(commandArgs(trailingOnly = TRUE))
repeats <- if (length(args) >= 1) args[1] else 3L
datasets <- if (length(args) >= 2) args[2] else 10L
suppressPackageStartupMessages(library(wispack))

tutorial_data <- function(seed) {
  wisp_simulate(n.contexts = 1, n.genes = 6, n.random = 4,
                fixed.effects = list(hemisphere = c("left", "right"), age = c("P12", "P18")),
                n.bins = 100, cells.per.bin = 8, seed = seed)
}

timing <- list()
data <- tutorial_data(1)
cat(sprintf("Timing on %d tokens...\n", nrow(data)))
for (r in seq_len(repeats)) {
  no_grid <- system.time(fit <- wisp(data, fit_only = TRUE, verbose = FALSE,
                                     model.settings = list(LRO_cost = "none")))[["elapsed"]]
  grid <- system.time(wisp(data, fit_only = TRUE, max.fork = 2, verbose = FALSE))[["elapsed"]]
  timing[[r]] <- data.frame(repeat_no = r, tokens = nrow(data), no_grid_seconds = no_grid,
                            grid_seconds = grid, converged_no_grid = fit$fit.diagnostics$converged,
                            code_no_grid = fit$fit.diagnostics$code,
                            evaluations_no_grid = fit$fit.diagnostics$num.evals)
}
timing <- do.call(rbind, timing)

cat(sprintf("Degree recovery on %d simulated datasets...\n", datasets))
recovery <- list()
for (seed in seq_len(datasets)) {
  data <- tutorial_data(100 + seed)
  truth <- attr(data, "truth")$degrees
  for (method in c("improved", "original")) {
    for (cost in c("none", "AIC")) {
      fit <- wisp(data, fit_only = TRUE, max.fork = 2, verbose = FALSE,
                  model.settings = list(LRO_cost = cost, LRO_method = method))
      found <- fit$degrees[rownames(truth), colnames(truth)]
      recovery[[length(recovery) + 1]] <- data.frame(
        seed = seed, method = method, grid_search = cost, curves = length(truth),
        exact = sum(found == truth), true_transitions = sum(truth),
        found_transitions = sum(found))
    }
  }
}
recovery <- do.call(rbind, recovery)

dir.create("benchmarks/results", showWarnings = FALSE)
source("benchmarks/headlines.R") # with_provenance(), register_headline()
utils::write.csv(with_provenance(timing, "serial+fork"), "benchmarks/results/wisp_fit_timing.csv", row.names = FALSE)
utils::write.csv(with_provenance(recovery, "fork"), "benchmarks/results/wisp_fit_recovery.csv", row.names = FALSE)

range_text <- function(x) sprintf("%.2f (%.2f–%.2f)", stats::median(x), min(x), max(x))
cat(sprintf("\n%d repeats; R %s; %s\n\n", repeats, getRversion(), format(Sys.time(), "%Y-%m-%d")))
cat("| call | seconds, median (range) |\n|---|---|\n")
cat(sprintf("| `wisp(..., fit_only = TRUE, model.settings = list(LRO_cost = \"none\"))` | %s |\n",
            range_text(timing$no_grid_seconds)))
cat(sprintf("| the same with the AIC grid search, `max.fork = 2` | %s |\n",
            range_text(timing$grid_seconds)))
cat(sprintf("\nWithout the grid search the fit ended %s in every repeat (%s evaluations).\n",
            paste(unique(timing$code_no_grid), collapse = "/"),
            paste(range(timing$evaluations_no_grid), collapse = "–")))
summary <- aggregate(cbind(exact, curves, true_transitions, found_transitions) ~ method + grid_search,
                     data = recovery, FUN = sum)
cat("\n| detection | grid search | curves with the exact degree | transitions found / simulated |\n|---|---|---|---|\n")
for (i in seq_len(nrow(summary))) {
  s <- summary[i, ]
  cat(sprintf("| %s | %s | %d / %d (%.0f %%) | %d / %d |\n", s$method, s$grid_search, s$exact,
              s$curves, 100 * s$exact / s$curves, s$found_transitions, s$true_transitions))
}

# Headline figures for benchmarks/RESULTS.md (benchmarks/headlines.R).
best <- summary[summary$method == "improved" & summary$grid_search == "AIC", ]
register_headline("wisp_fit",
                  c("wisp() without the grid search", "wisp() with the AIC grid search, max.fork = 2",
                    "curves with the exact degree, improved detection with the AIC grid"),
                  c(sprintf("%.2f", stats::median(timing$no_grid_seconds)),
                    sprintf("%.2f", stats::median(timing$grid_seconds)),
                    sprintf("%d / %d", best$exact, best$curves)),
                  c("s", "s", "curves"), paste("Rscript benchmarks/wisp_fit.R", repeats, datasets))
