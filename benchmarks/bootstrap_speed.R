# 100 bootstrap replicates of the 12,000-row model (1 context, 6 genes,
# 4 mice, 2 x 2 factors, 100 bins) with 2 workers: the fork engine against
# mclapply, measured side by side in one run.
#
# Usage: Rscript benchmarks/bootstrap_speed.R [replicates] [repeats] [workers]
# Writes benchmarks/results/bootstrap_speed.csv and prints a Markdown table.

args <- as.integer(commandArgs(trailingOnly = TRUE))
replicates <- if (length(args) >= 1) args[1] else 100L
repeats <- if (length(args) >= 2) args[2] else 3L
workers <- if (length(args) >= 3) args[3] else 2L
suppressPackageStartupMessages(library(wispack))

data <- wisp_simulate(n.contexts = 1, n.genes = 6, n.random = 4,
                      fixed.effects = list(hemisphere = c("left", "right"), age = c("P12", "P18")),
                      n.bins = 100, cells.per.bin = 8,
                      degrees = matrix(c(3, 3, 3, 3, 3, 2), 1), seed = 1)
fit <- wisp(data, model.settings = list(LRO_cost = "none"), verbose = FALSE)
cat(sprintf("Model: %d summed rows, %d parameters; %d replicates on %d workers.\n",
            nrow(fit$count.data.summed), length(fit$fitted.parameters), replicates, workers))

arms <- list(
  "fork (rolling, fresh child per replicate)" = function() bs_batch(fit, replicates, workers,
                                                                    tasks.per.child = 1, seed = 1),
  "mclapply (preschedule TRUE)" = function() bs_batch(fit, replicates, workers, backend = "mclapply", seed = 1),
  "mclapply (preschedule FALSE)" = function() bs_batch(fit, replicates, workers, backend = "mclapply",
                                                       mc.preschedule = FALSE, seed = 1)
)
rows <- list()
reference <- NULL
for (r in seq_len(repeats)) {
  for (arm in names(arms)) {
    seconds <- system.time(boot <- arms[[arm]]())[["elapsed"]]
    if (is.null(reference)) reference <- boot$t
    rows[[length(rows) + 1]] <- data.frame(
      arm = arm, repeat_no = r, seconds = seconds,
      converged = sum(boot$diagnostics$converged %in% TRUE),
      identical_to_first = identical(boot$t, reference))
  }
}
results <- do.call(rbind, rows)
source("benchmarks/headlines.R") # with_provenance(), register_headline()
dir.create("benchmarks/results", showWarnings = FALSE)
utils::write.csv(with_provenance(results, ifelse(startsWith(results$arm, "fork"), "fork", "mclapply")),
                 "benchmarks/results/bootstrap_speed.csv", row.names = FALSE)
cat(sprintf("\n%d repeats; R %s; %s\n\n", repeats, getRversion(), format(Sys.time(), "%Y-%m-%d")))
cat("| arm | seconds for", replicates, "replicates, median (range) | converged | identical estimates |\n|---|---|---|---|\n")
for (arm in names(arms)) {
  x <- results[results$arm == arm, ]
  cat(sprintf("| %s | %.1f (%.1f–%.1f) | %d / %d | %s |\n", arm, stats::median(x$seconds),
              min(x$seconds), max(x$seconds), min(x$converged), replicates,
              if (all(x$identical_to_first)) "yes" else "NO"))
}

# Headline figures for benchmarks/RESULTS.md (benchmarks/headlines.R).
med <- function(arm) stats::median(results$seconds[results$arm == arm])
register_headline("bootstrap_speed",
                  sprintf("%d replicates, %s, %d workers", replicates, names(arms)[1:2], workers),
                  sprintf("%.1f", c(med(names(arms)[1]), med(names(arms)[2]))), "s",
                  paste("Rscript benchmarks/bootstrap_speed.R", replicates, repeats, workers))
