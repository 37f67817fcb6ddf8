# wisp() gene by gene (issue #26, item 5): the same panel fitted as always
# (every curve's structure selection in parallel passes over the panel),
# with a checkpoint (each gene's selection and fit as a task of its own on
# the fork engine, appended to the checkpoint as it ends) and on a future
# plan (multisession, one future per chunk of genes). Side by side in one
# R process, arms interleaved, repeated; fit_only = TRUE (the statistics
# that follow are the same code on every arm). Also checks that every arm
# gives the plain arm's fit, bit for bit.
#
#   Rscript benchmarks/genes_apart.R [GENES] [TYPES] [CELLS] [REPEATS] [MAX_FORK]
#     defaults: 40 genes x 4 types, 40,000 cells, 50 bins, 3 repeats, 2 workers
#
# Writes benchmarks/results/genes_apart.csv (one row per arm and repeat)
# and prints the medians.

args <- as.numeric(commandArgs(trailingOnly = TRUE))
arg <- function(i, default) if (length(args) >= i && is.finite(args[i])) args[i] else default
genes <- arg(1, 40)
types <- arg(2, 4)
cells <- arg(3, 40000)
repeats <- arg(4, 3)
max_fork <- arg(5, 2)
bench_dir <- local({
  file <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
  if (length(file)) dirname(normalizePath(file)) else "benchmarks"
})
# The panel simulator of benchmarks/panel.R (only its definition is taken).
for (expr in parse(file.path(bench_dir, "panel.R"))) {
  if (is.call(expr) && identical(expr[[2]], as.name("simulate_panel"))) eval(expr)
}

suppressPackageStartupMessages({
  library(Matrix)
  library(wispack)
  library(future)
})
panel <- simulate_panel(genes, types, cells)
binned <- wisp_bin(panel$counts, panel$cells, position = "depth", bins = 50,
                   range = c(0, 1000), keep = c("type", "mouse", "genotype", "hemisphere"))
binned$genotype <- factor(binned$genotype, levels = c("WT", "KO"))
roles <- list(context = "type", ran = "mouse")
fit_arm <- function(arm) {
  path <- tempfile(fileext = ".ckp")
  on.exit(unlink(path))
  started <- proc.time()[["elapsed"]]
  fit <- switch(arm,
    plain = wisp(binned, roles, fit_only = TRUE, verbose = FALSE, max.fork = max_fork),
    checkpoint = wisp(binned, roles, fit_only = TRUE, verbose = FALSE, max.fork = max_fork,
                      checkpoint = path),
    future = wisp(binned, roles, fit_only = TRUE, verbose = FALSE, backend = "future"))
  list(fit = fit, seconds = proc.time()[["elapsed"]] - started,
       checkpoint_mb = if (file.exists(path)) file.size(path) / 2^20 else NA_real_)
}
plan(multisession, workers = max_fork)
arms <- c("plain", "checkpoint", "future")
rows <- list()
reference <- NULL
for (r in seq_len(repeats)) {
  for (arm in arms) {
    result <- fit_arm(arm)
    if (is.null(reference)) reference <- result$fit
    same <- identical(result$fit$fitted.parameters, reference$fitted.parameters) &&
      identical(result$fit$structure.selection, reference$structure.selection) &&
      identical(result$fit$plan, reference$plan)
    rows[[length(rows) + 1L]] <- data.frame(
      arm = arm, repeat_number = r, genes = genes, types = types, cells = cells,
      max_fork = max_fork, seconds = round(result$seconds, 2),
      checkpoint_mb = round(result$checkpoint_mb, 2), identical_to_plain = same)
  }
}
plan(sequential)
table <- do.call(rbind, rows)
dir.create(file.path(bench_dir, "results"), showWarnings = FALSE)
source(file.path(bench_dir, "headlines.R")) # with_provenance(), register_headline()
utils::write.csv(with_provenance(table, ifelse(table$arm == "future", "future", "fork")),
                 file.path(bench_dir, "results", "genes_apart.csv"), row.names = FALSE)
medians <- stats::aggregate(seconds ~ arm, table, stats::median)
medians$ratio_to_plain <- round(medians$seconds / medians$seconds[medians$arm == "plain"], 2)
medians$all_identical <- tapply(table$identical_to_plain, table$arm, all)[medians$arm]
print(table)
print(medians)

# Headline figures for benchmarks/RESULTS.md (benchmarks/headlines.R).
others <- medians$arm != "plain"
register_headline("genes_apart", paste(medians$arm[others], "time / plain"),
                  sprintf("%.2f", medians$ratio_to_plain[others]), "ratio",
                  "Rscript benchmarks/genes_apart.R")
