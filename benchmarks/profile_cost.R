# The cost of the default statistics' profile checks (issue #25: statistics,
# profiles and gene-level tests together at most the fit's time). A panel of
# benchmarks/panel.R's simulator (GENES genes x 4 cell types x 50 bins, 480
# cells per gene, 8 mice in two genotypes, both hemispheres) is binned and
# fitted once with wisp(statistics = "wald"); then wisp_statistics(fit)
# (the profile checks of every transition-point effect) is timed REPEATS
# times. Run it with two builds in turn (R_LIBS) to compare them side by
# side; LABEL names the build in the CSV.
#
#   R_LIBS=<build> Rscript benchmarks/profile_cost.R GENES REPEATS LABEL OUT.csv
#
# One row per repeat: the seconds of wisp_statistics(), the effects checked
# and flagged, the held fits made (in all, and per flagged effect), the
# ends not settled within the search's fits, and the fit's own seconds.

args <- commandArgs(trailingOnly = TRUE)
if (length(args) < 4) stop("usage: Rscript benchmarks/profile_cost.R GENES REPEATS LABEL OUT.csv")
genes <- as.numeric(args[1])
repeats <- as.integer(args[2])
label <- args[3]
out <- args[4]

bench_dir <- local({
  file <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
  dirname(normalizePath(file))
})
suppressPackageStartupMessages({
  library(Matrix)
  library(wispack)
})
# The panel simulator of benchmarks/panel.R (its function definitions only).
for (e in parse(file.path(bench_dir, "panel.R"))) {
  if (is.call(e) && identical(e[[1]], as.name("<-")) && is.call(e[[3]]) &&
      identical(e[[3]][[1]], as.name("function"))) eval(e, globalenv())
}

set.seed(1)
panel <- simulate_panel(genes, 4, genes * 480)
binned <- wisp_bin(panel$counts, panel$cells, position = "depth", bins = 50,
                   range = c(0, 1000), keep = c("type", "mouse", "genotype", "hemisphere"),
                   unit = "um")
binned$genotype <- factor(binned$genotype, levels = c("WT", "KO"))
fit_seconds <- system.time(
  fit <- suppressWarnings(wisp(binned, variables = list(context = "type", ran = "mouse"),
                               max.fork = 2, statistics = "wald", verbose = FALSE))
)[["elapsed"]]

commit <- tryCatch(system2("git", c("-C", bench_dir, "rev-parse", "--short", "HEAD"),
                           stdout = TRUE, stderr = FALSE), error = function(e) "unknown")
rows <- lapply(seq_len(repeats), function(r) {
  seconds <- system.time(stats <- wisp_statistics(fit, max.fork = 2)$stats)[["elapsed"]]
  checks <- stats$profiles
  data.frame(
    label = label, genes = genes, repeat_no = r, fit_s = round(fit_seconds, 2),
    statistics_s = round(seconds, 2), checked = nrow(checks), flagged = sum(checks$flagged),
    held_fits = sum(checks$fits),
    fits_per_flagged = round(mean(checks$fits[checks$flagged]), 3),
    not_settled = sum(grepl("not settled", checks$note)),
    commit = commit[1], engine = "fork", stringsAsFactors = FALSE)
})
result <- do.call(rbind, rows)
print(result)
utils::write.csv(result, out, row.names = FALSE, append = FALSE)
