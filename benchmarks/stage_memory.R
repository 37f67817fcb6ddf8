# Where wisp()'s R heap peaks on a panel (issue #26, item 3): a simulated
# panel (benchmarks/panel.R's simulator) binned by wisp_bin(), then the
# stages of wisp() called one by one (preparing the data, the fit and its
# result, the Wald statistics, the gene-level tests), each with R's heap
# peak above its start (gc(reset = TRUE) before, gc()'s "max used" after)
# and what it keeps. R's heap only: the Rust core's memory is not in it.
#
#   Rscript benchmarks/stage_memory.R [GENES] [TYPES] [CELLS] [BINS]
#     defaults: 20 genes x 12 types, 200,000 cells, 100 bins
#
# Prints one line per stage.

args <- as.numeric(commandArgs(trailingOnly = TRUE))
arg <- function(i, default) if (length(args) >= i && is.finite(args[i])) args[i] else default
genes <- arg(1, 20)
types <- arg(2, 12)
cells <- arg(3, 200000)
bins <- arg(4, 100)
bench_dir <- local({
  file <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
  if (length(file)) dirname(normalizePath(file)) else "benchmarks"
})
for (expr in parse(file.path(bench_dir, "panel.R"))) {
  if (is.call(expr) && identical(expr[[2]], as.name("simulate_panel"))) eval(expr)
}
suppressPackageStartupMessages({
  library(Matrix)
  library(wispack)
})
stage <- function(label, expr) {
  invisible(gc(reset = TRUE))
  base <- sum(gc()[, 2])
  started <- proc.time()[["elapsed"]]
  value <- force(expr)
  seconds <- proc.time()[["elapsed"]] - started
  after <- gc()
  cat(sprintf("%-20s %6.1f s  R heap peak above start %7.1f MB, kept %6.1f MB\n", label,
              seconds, sum(after[, 6]) - base, sum(after[, 2]) - base))
  value
}
panel <- simulate_panel(genes, types, cells)
binned <- wisp_bin(panel$counts, panel$cells, position = "depth", bins = bins,
                   range = c(0, 1000), keep = c("type", "mouse", "genotype", "hemisphere"))
binned$genotype <- factor(binned$genotype, levels = c("WT", "KO"))
rm(panel)
cat(sprintf("%d genes x %d types, %d cells, %d bins: %d binned rows (%.1f MB)\n", genes, types,
            cells, bins, nrow(binned), as.numeric(utils::object.size(binned)) / 2^20))
ns <- asNamespace("wispack")
settings <- ns$wisp_model_settings(list())
newton <- ns$wisp_control_settings(wisp_control(), settings, list())
variables <- list(context = "type", ran = "mouse")
prepared <- stage("prepare the data", ns$prepare_count_data(
  binned, variables, settings$max_bin, missing_treatments = "warn", say = function(...) NULL))
fit <- stage("fit and result", ns$wisp_count(
  prepared, settings, ns$wisp_plot_settings(list()), variables, quote(wisp()), 1,
  function(...) NULL, NULL, NULL, newton))
rm(prepared)
fit <- stage("Wald statistics", suppressWarnings(wisp_statistics(fit, method = "wald")))
tests <- stage("gene-level tests", ns$default_gene_tests(fit, 1))
cat(sprintf("parameters %d; fit object %.1f MB (count.data.summed %.1f MB)\n",
            length(fit$fitted.parameters), as.numeric(utils::object.size(fit)) / 2^20,
            as.numeric(utils::object.size(fit$count.data.summed)) / 2^20))
