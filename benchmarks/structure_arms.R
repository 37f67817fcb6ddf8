# The default structure selection of two builds side by side: on the
# designs of benchmarks/structure.R (all but the 12-context one), each data
# set is fitted with wisp(fit_only = TRUE, max.fork = 1) by the installed
# wispack, and the found degrees are compared with the simulated ones.
# Run once per build (each installed in its own library), then compare:
#
#   R_LIBS=<library A> Rscript benchmarks/structure_arms.R run <label A> <commit A> a.csv [n] [from]
#   R_LIBS=<library B> Rscript benchmarks/structure_arms.R run <label B> <commit B> b.csv [n] [from]
#   Rscript benchmarks/structure_arms.R compare a.csv b.csv
#
# n data sets per design (default 8) starting at data set `from` (default 1;
# structure.R's full mode uses 1-8). Writes one row per fit: curves with
# the exact degree, over, under, seconds, and the degrees found and true.

args <- commandArgs(trailingOnly = TRUE)
if (!length(args) || !args[1] %in% c("run", "compare")) {
  stop("usage: structure_arms.R run <label> <commit> <out.csv> [n] [from] | compare <a.csv> <b.csv>")
}

if (args[1] == "compare") {
  as_text <- c(found = "character", truth = "character")
  a <- utils::read.csv(args[2], stringsAsFactors = FALSE, colClasses = as_text)
  b <- utils::read.csv(args[3], stringsAsFactors = FALSE, colClasses = as_text)
  both <- merge(a, b, by = c("design", "dataset"), suffixes = c(".a", ".b"))
  cat(sprintf("%s (%s) against %s (%s): %d data sets, %d curves\n", a$label[1], a$commit[1],
              b$label[1], b$commit[1], nrow(both), sum(both$curves.a)))
  per_design <- do.call(rbind, lapply(split(both, both$design), function(d) data.frame(
    design = d$design[1], data_sets = nrow(d), curves = sum(d$curves.a),
    exact_a = sum(d$exact.a), exact_b = sum(d$exact.b), over_a = sum(d$over.a),
    over_b = sum(d$over.b), under_a = sum(d$under.a), under_b = sum(d$under.b),
    seconds_a = sum(d$seconds.a), seconds_b = sum(d$seconds.b),
    time_ratio = sum(d$seconds.b) / sum(d$seconds.a))))
  print(per_design, row.names = FALSE, digits = 3)
  cat(sprintf("exact: %d against %d of %d; time b / a: %.2f (%.1f s against %.1f s)\n",
              sum(both$exact.a), sum(both$exact.b), sum(both$curves.a),
              sum(both$seconds.b) / sum(both$seconds.a), sum(both$seconds.b),
              sum(both$seconds.a)))
  differ <- both[both$found.a != both$found.b, c("design", "dataset", "truth.a", "found.a", "found.b")]
  cat(sprintf("data sets whose degrees differ: %d\n", nrow(differ)))
  if (nrow(differ)) print(differ, row.names = FALSE)
  quit(save = "no")
}

label <- args[2]
commit <- args[3]
out <- args[4]
n <- if (length(args) >= 5) as.integer(args[5]) else 8L
from <- if (length(args) >= 6) as.integer(args[6]) else 1L
suppressPackageStartupMessages(library(wispack))
# The designs and seeds of structure.R, without running it.
keep <- c("draw_degrees", "crossed", "designs", "large_data", "dataset_seed")
for (e in parse("benchmarks/structure.R")) {
  if (is.call(e) && identical(e[[1]], as.name("<-")) && as.character(e[[2]]) %in% keep) {
    eval(e, globalenv())
  }
}
rows <- list()
for (design in setdiff(names(designs), "large12")) {
  for (i in seq(from, length.out = n)) {
    data <- designs[[design]]$simulate(dataset_seed(match(design, names(designs)), i))
    truth <- attr(data, "truth")$degrees
    seconds <- system.time(fit <- suppressWarnings(
      wisp(data, fit_only = TRUE, max.fork = 1, verbose = FALSE)))[["elapsed"]]
    found <- fit$degrees[rownames(truth), colnames(truth), drop = FALSE]
    rows[[length(rows) + 1]] <- data.frame(
      label = label, design = design, dataset = i, curves = length(truth),
      exact = sum(found == truth), over = sum(found > truth), under = sum(found < truth),
      seconds = seconds, found = paste(found, collapse = ""), truth = paste(truth, collapse = ""),
      commit = commit, engine = "nb", stringsAsFactors = FALSE)
    cat(sprintf("%s %d: %d / %d exact, %.2f s\n", design, i, sum(found == truth), length(truth),
                seconds))
  }
}
utils::write.csv(do.call(rbind, rows), out, row.names = FALSE)
