# Memory floor curve: the memory of one long-lived worker after fit k, for
# k = 1..N: as is, with malloc_trim(0) after every fit, and with gc() plus
# malloc_trim(0) after every fit (which separates R's own heap between
# collections from memory the fit keeps). Each variant runs in its own worker
# forked from this (garbage-collected) R process, which is what a long-lived
# mclapply worker is; the variants run at the same time. After every fit the
# worker reads its own /proc/self/smaps_rollup.
#
# Usage (from the repository root, wispack installed):
#   Rscript benchmarks/memory_floor.R REGIME FITS [REPEATS] [OUT]
#     REGIME small or large (the models of fork_vs_mclapply.R), FITS = N
# Appends to OUT (default benchmarks/results/memory_floor.csv).

script_file <- function() {
  file <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
  normalizePath(if (length(file)) file[1] else "benchmarks/memory_floor.R")
}
args <- commandArgs(trailingOnly = TRUE)
regime <- if (length(args) >= 1) args[1] else "small"
n_fits <- if (length(args) >= 2) as.integer(args[2]) else 20L
repeats <- if (length(args) >= 3) as.integer(args[3]) else 1L
out <- if (length(args) >= 4) args[4] else file.path(dirname(script_file()), "results", "memory_floor.csv")
suppressPackageStartupMessages(library(wispack))

# The model builder of fork_vs_mclapply.R (same cache), without running it.
bench <- new.env()
source_lines <- readLines(file.path(dirname(script_file()), "fork_vs_mclapply.R"))
eval(parse(text = source_lines[seq_len(grep("^# Memory sampler", source_lines) - 1)]), bench)
fit <- bench$regime_model(regime)

rollup <- function(pid = "self") {
  lines <- readLines(sprintf("/proc/%s/smaps_rollup", pid))[-1]
  values <- as.numeric(sub("^[^:]+:\\s+([0-9]+).*", "\\1", lines)) / 1024
  names(values) <- sub(":.*", "", lines)
  values
}

worker <- function(trim, collect = FALSE) {
  rows <- vector("list", n_fits + 1)
  record <- function(k, seconds) {
    m <- rollup()
    data.frame(k = k, rss_mb = m[["Rss"]], pss_mb = m[["Pss"]],
               private_dirty_mb = m[["Private_Dirty"]],
               uss_mb = m[["Private_Clean"]] + m[["Private_Dirty"]],
               anon_mb = m[["Anonymous"]], fit_seconds = seconds)
  }
  rows[[1]] <- record(0, NA_real_)
  for (k in seq_len(n_fits)) {
    r <- wispack:::bootstrap_replicate(k, fit$plan, 1L, trim)
    if (collect) invisible(gc())
    done <- wispack:::replicate_table(list(r$outcome), length(fit$fitted.parameters))
    rows[[k + 1]] <- record(k, done$diagnostics$fit.seconds)
  }
  do.call(rbind, rows)
}

params <- length(fit$fitted.parameters)
source(file.path(dirname(script_file()), "headlines.R")) # with_provenance()
commit <- bench_commit()
cat(sprintf("%s regime (%d parameters): %d fits per worker, %d repeats\n", regime, params,
            n_fits, repeats))
for (r in seq_len(repeats)) {
  invisible(gc())
  parent <- rollup()
  jobs <- list(parallel::mcparallel(worker(FALSE), name = "no trim"),
               parallel::mcparallel(worker(TRUE), name = "malloc_trim after every fit"),
               parallel::mcparallel(worker(TRUE, TRUE), name = "gc() and malloc_trim after every fit"))
  results <- parallel::mccollect(jobs)
  for (variant in names(results)) {
    value <- results[[variant]]
    if (!is.data.frame(value)) stop("worker failed: ", paste(format(value), collapse = " "))
    value <- cbind(date = format(Sys.time(), "%Y-%m-%d %H:%M:%S"), regime = regime,
                   params = params, variant = variant, repeat_no = r,
                   parent_pss_mb = round(parent[["Pss"]], 1), value)
    value <- with_provenance(value, "mcparallel", commit)
    exists_out <- file.exists(out)
    utils::write.table(value, out, sep = ",", append = exists_out, col.names = !exists_out,
                       row.names = FALSE)
    cat(sprintf("  %-37s private dirty after fit 1, %d: %.1f, %.1f MB; PSS %.1f, %.1f MB\n",
                variant, n_fits, value$private_dirty_mb[2], value$private_dirty_mb[n_fits + 1],
                value$pss_mb[2], value$pss_mb[n_fits + 1]))
  }
}
