# The default wisp() on data the size of the original's tutorials (issue
# #26's six-gene target): 1 context, 6 genes, 4 mice crossed with
# hemisphere x age, 100 bins, 8 cells per bin (76,800 tokens), one worker
# (max.fork = 1), with its default statistics and gene-level tests.
#
#   R_LIBS=<library> Rscript benchmarks/tutorial_fit.R <label> <out.csv> [repeats]
#
# Run it for each build in turn (A B A B) on one machine: only ratios within
# one run are comparable. One row per repeat: seconds (elapsed) of wisp().

args <- commandArgs(trailingOnly = TRUE)
if (length(args) < 2) stop("usage: tutorial_fit.R <label> <out.csv> [repeats]")
label <- args[1]
out <- args[2]
repeats <- if (length(args) >= 3) as.integer(args[3]) else 5L
suppressPackageStartupMessages(library(wispack))
data <- wisp_simulate(n.contexts = 1, n.genes = 6, n.random = 4,
                      fixed.effects = list(hemisphere = c("left", "right"),
                                           age = c("P12", "P18")),
                      n.bins = 100, cells.per.bin = 8, seed = 1)
seconds <- vapply(seq_len(repeats), function(i) {
  system.time(fit <<- suppressWarnings(wisp(data, max.fork = 1, verbose = FALSE)))[["elapsed"]]
}, 0)
commit <- utils::packageDescription("wispack")$RemoteSha
commit <- if (is.null(commit)) readLines(system.file("COMMIT", package = "wispack"))[1] else commit
rows <- data.frame(label = label, repeat_no = seq_len(repeats), tokens = nrow(data),
                   seconds = seconds, degrees = paste(fit$degrees, collapse = ""),
                   commit = substr(commit, 1, 7), engine = "nb")
if (file.exists(out)) rows <- rbind(utils::read.csv(out, stringsAsFactors = FALSE), rows)
utils::write.csv(rows, out, row.names = FALSE)
cat(sprintf("%s (%s): median %.2f s (range %.2f-%.2f), degrees %s\n", label, substr(commit, 1, 7),
            stats::median(seconds), min(seconds), max(seconds),
            paste(fit$degrees, collapse = "")))
