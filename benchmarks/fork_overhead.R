# Per-task overhead of wispack's fork engine against parallel::mclapply, for a
# trivial task, with a lean parent and with a parent holding 1 GB (and more)
# of R objects.
#
# Usage (from the repository root, with wispack installed with its test hooks,
# which time the core and the engine directly: WISPACK_TEST_HOOKS=true R CMD INSTALL .):
#   Rscript benchmarks/fork_overhead.R [n_tasks] [repeats] [workers] [parent_gb]
#   parent_gb: comma-separated sizes of the parent's ballast in GB (default 1;
#   benchmarks/run_all.sh uses 1,4). The ballast is grown in 1 GB numeric
#   vectors with every page touched, so a 4 GB parent holds four 1 GB objects.
# Writes benchmarks/results/fork_overhead.csv and prints a Markdown table of
# medians (and ranges) of milliseconds per task.

raw_args <- commandArgs(trailingOnly = TRUE)
args <- suppressWarnings(as.integer(raw_args))
n_tasks <- if (length(args) >= 1) args[1] else 40L
repeats <- if (length(args) >= 2) args[2] else 7L
workers <- if (length(args) >= 3) args[3] else 2L
parent_gb <- if (length(raw_args) >= 4) as.numeric(strsplit(raw_args[4], ",")[[1]]) else 1

suppressPackageStartupMessages(library(wispack))
selftest <- wispack:::engine_selftest

arms <- list(
  "engine, fresh child per task" = function() selftest(n_tasks, workers = workers),
  "engine, 5 tasks per child" = function() selftest(n_tasks, workers = workers, tasks_per_child = 5),
  "mclapply, preschedule TRUE" = function() {
    parallel::mclapply(seq_len(n_tasks), function(i) i, mc.cores = workers, mc.preschedule = TRUE)
  },
  "mclapply, preschedule FALSE" = function() {
    parallel::mclapply(seq_len(n_tasks), function(i) i, mc.cores = workers, mc.preschedule = FALSE)
  }
)

rss_mb <- function() {
  status <- readLines("/proc/self/status")
  as.numeric(sub("[^0-9]*([0-9]+).*", "\\1", grep("^VmRSS:", status, value = TRUE))) / 1024
}

# Each engine child reads /proc/self/smaps_rollup (for PSS) before it reports;
# the kernel walks every mapped page for that, so its cost grows with the parent.
smaps_rollup_ms <- function() {
  1000 * system.time(for (i in 1:50) readLines("/proc/self/smaps_rollup"))[["elapsed"]] / 50
}

measure <- function(parent) {
  rows <- list(data.frame(parent = parent, parent_rss_mb = round(rss_mb()),
                          arm = "(reading smaps_rollup once)",
                          ms_per_task = replicate(repeats, smaps_rollup_ms()),
                          repeat_no = seq_len(repeats)))
  for (arm in names(arms)) {
    arms[[arm]]() # warm-up
    ms <- vapply(seq_len(repeats), function(r) {
      1000 * system.time(arms[[arm]]())[["elapsed"]] / n_tasks
    }, numeric(1))
    rows[[arm]] <- data.frame(parent = parent, parent_rss_mb = round(rss_mb()), arm = arm,
                              ms_per_task = ms, repeat_no = seq_len(repeats))
  }
  do.call(rbind, rows)
}

invisible(gc())
results <- list(measure("lean"))
ballast <- list()
for (gb in sort(parent_gb)) {
  while (length(ballast) < gb) ballast[[length(ballast) + 1]] <- runif(1.25e8) # 1 GB, touched
  invisible(gc())
  results[[length(results) + 1]] <- measure(sprintf("holding %g GB", gb))
}
rm(ballast)
results <- do.call(rbind, results)
dir.create("benchmarks/results", showWarnings = FALSE, recursive = TRUE)
source("benchmarks/headlines.R") # with_provenance(), register_headline()
engine <- ifelse(startsWith(results$arm, "engine"), "fork",
                 ifelse(startsWith(results$arm, "mclapply"), "mclapply", "none"))
utils::write.csv(with_provenance(results, engine), "benchmarks/results/fork_overhead.csv", row.names = FALSE)

summary <- aggregate(ms_per_task ~ parent_rss_mb + parent + arm, data = results,
                     FUN = function(x) c(median = median(x), min = min(x), max = max(x)))
cat(sprintf("%d tasks, %d workers, %d repeats; R %s; %s\n\n", n_tasks, workers, repeats,
            getRversion(), format(Sys.time(), "%Y-%m-%d")))
cat("| parent | parent RSS (MB) | arm | ms per task, median | range |\n|---|---:|---|---:|---|\n")
for (i in seq_len(nrow(summary))) {
  s <- summary$ms_per_task[i, ]
  cat(sprintf("| %s | %d | %s | %.2f | %.2f–%.2f |\n", summary$parent[i], summary$parent_rss_mb[i],
              summary$arm[i], s[["median"]], s[["min"]], s[["max"]]))
}

# Headline figures for benchmarks/RESULTS.md (benchmarks/headlines.R).
# The engine's cost per fresh child, and the PSS read that is part of it.
shown <- summary$arm %in% c("engine, fresh child per task", "(reading smaps_rollup once)")
register_headline("fork_overhead",
                  sprintf("%s (parent %s)", summary$arm[shown], summary$parent[shown]),
                  sprintf("%.2f", summary$ms_per_task[shown, "median"]), "ms per task",
                  paste("Rscript benchmarks/fork_overhead.R", n_tasks, repeats, workers,
                        paste(parent_gb, collapse = ",")))
