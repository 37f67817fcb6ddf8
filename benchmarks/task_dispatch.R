# What a run and a task cost the fork engine's default workers (fed one task
# at a time), apart from the tasks' own time, from a session of SESSION_GB
# GB, on 2 workers, 5 repeats (medians, ranges in brackets):
#   - a run of 2 empty tasks (the cost of a run: fork, PSS read and exit of
#     two children, the call from R), and of 2002: the difference is the
#     marginal cost of 2000 tasks, reported per task and worker;
#   - for comparison, parallel::mclapply() over 2 elements that do nothing,
#     and over 2 that read /proc/self/smaps_rollup (as bs_batch()'s mclapply
#     backend does once per worker), and one read of smaps_rollup in this
#     session.
#
# Usage (from the repository root, wispack installed with its test hooks,
# WISPACK_TEST_HOOKS=true R CMD INSTALL .):
#   Rscript benchmarks/task_dispatch.R SESSION_GB
# Prints its figures; nothing is written.
library(wispack)
st <- wispack:::engine_selftest
gb <- as.numeric(commandArgs(TRUE)[1])
ballast <- list()
while (length(ballast) < gb) ballast[[length(ballast) + 1]] <- runif(1.25e8)
invisible(gc())
seconds <- function(expr) {
  s <- proc.time()[["elapsed"]]
  force(expr)
  proc.time()[["elapsed"]] - s
}
fed <- function(n) st(n, workers = 2, tasks_per_child = NULL, memory_per_task = FALSE)
status <- readLines("/proc/self/status")
rss <- as.numeric(sub("[^0-9]*([0-9]+).*", "\\1", grep("^VmRSS:", status, value = TRUE))) / 1024
res <- t(replicate(5, c(
  fed_2 = seconds(fed(2)),
  fed_2002 = seconds(fed(2002)),
  mclapply_2 = seconds(parallel::mclapply(1:2, function(i) i, mc.cores = 2)),
  mclapply_2_pss = seconds(parallel::mclapply(1:2, function(i) readLines("/proc/self/smaps_rollup"),
                                              mc.cores = 2)),
  smaps_rollup_here = seconds(readLines("/proc/self/smaps_rollup"))
)))
res <- cbind(res, marginal_us = 1e6 * (res[, "fed_2002"] - res[, "fed_2"]) * 2 / 2000)
cat(sprintf("session RSS %.0f MB\n", rss))
for (column in colnames(res)) {
  x <- res[, column]
  cat(sprintf("  %-18s %8.3f (%.3f-%.3f)%s\n", column, median(x), min(x), max(x),
              if (column == "marginal_us") " us per task and worker" else " s"))
}
