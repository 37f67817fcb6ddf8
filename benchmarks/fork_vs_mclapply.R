# Fork-per-batch against parallel::mclapply: wall time, fits per second and
# memory of the whole process tree, measured by an external sampler
# (benchmarks/memory_sampler.py, every 10 ms, /proc/<pid>/smaps_rollup).
#
# Usage (from the repository root, wispack installed):
#   Rscript benchmarks/fork_vs_mclapply.R run REGIME WORKERS FITS REPEATS [ARMS] [OUT]
#     REGIME   small (312 parameters, 12,000 rows) or large (3,168 parameters, 103,680 rows)
#     WORKERS  worker processes (max.fork / mc.cores)
#     FITS     fits per long-lived worker, comma separated (B = WORKERS x FITS)
#     REPEATS  repeats; the order of the arms rotates from one repeat to the next
#     ARMS     comma separated arm ids, or "all" (default; see `arm_labels`)
#     OUT      CSV the rows are appended to
#              (default benchmarks/results/fork_vs_mclapply.csv)
#   Rscript benchmarks/fork_vs_mclapply.R report
#     rewrites the generated sections of benchmarks/fork_vs_mclapply.md and
#     benchmarks/fork_overhead.md from the CSVs in benchmarks/results/ and
#     copies the small summaries the vignette reads to vignettes/fork-per-batch/.
# Stages can be run separately: every `run` appends to OUT with its own
# `run_id`. benchmarks/run_all.sh runs everything.

arm_labels <- c(
  fork_rolling = "fork, rolling, 1 fit per child",
  fork_batch = "fork, batch schedule, 1 fit per child",
  fork_tpc5 = "fork, rolling, tasks.per.child = 5",
  mc_pre = "mclapply, preschedule TRUE",
  mc_nopre = "mclapply, preschedule FALSE",
  mc_chunked = "mclapply chunked (one call per batch)",
  mc_trim = "mclapply, preschedule TRUE, trim.memory = TRUE",
  mc_sub = "mclapply, preschedule TRUE, in a fresh Rscript (control)",
  mc_arena2 = "mclapply, preschedule TRUE, in a fresh Rscript, MALLOC_ARENA_MAX=2"
)
in_process_arms <- c("fork_rolling", "fork_batch", "fork_tpc5", "mc_pre", "mc_nopre",
                     "mc_chunked", "mc_trim")

script_file <- function() {
  file <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
  normalizePath(if (length(file)) file[1] else "benchmarks/fork_vs_mclapply.R")
}
bench_dir <- dirname(script_file())

# ---------------------------------------------------------------------------
# Models

regime_model <- function(regime) {
  cache_dir <- Sys.getenv("WISPACK_BENCH_CACHE", file.path(Sys.getenv("TMPDIR", "/tmp"), "wispack-bench-cache"))
  dir.create(cache_dir, showWarnings = FALSE, recursive = TRUE)
  built <- gsub("[^0-9A-Za-z]", "", utils::packageDescription("wispack")$Built)
  cache <- file.path(normalizePath(cache_dir), sprintf("%s-%s.rds", regime, built))
  if (file.exists(cache)) return(readRDS(cache))
  data <- if (regime == "small") {
    wisp_simulate(n.contexts = 1, n.genes = 6, n.random = 4,
                  fixed.effects = list(hemisphere = c("left", "right"), age = c("P12", "P18")),
                  n.bins = 100, cells.per.bin = 8,
                  degrees = matrix(c(3, 3, 3, 3, 3, 2), 1), seed = 1)
  } else if (regime == "large") {
    degrees <- matrix(rep(c(3, 3, 2), length.out = 72), 12)
    degrees[1:2, ] <- 3L
    wisp_simulate(n.contexts = 12, n.genes = 6, n.random = 5,
                  fixed.effects = list(hemisphere = c("left", "right"),
                                       age = c("P7", "P12", "P18")),
                  n.bins = 40, degrees = degrees, seed = 1)
  } else {
    stop("REGIME must be small or large")
  }
  fit <- wisp(data, model.settings = list(LRO_cost = "none"), verbose = FALSE)
  saveRDS(fit, cache)
  fit
}

# ---------------------------------------------------------------------------
# Memory sampler: a separate python3 process polling this process's tree

source(file.path(bench_dir, "memory_sampler.R"))
source(file.path(bench_dir, "headlines.R")) # with_provenance(), register_headline()

# ---------------------------------------------------------------------------
# Arms: each returns list(t = estimates, diagnostics = per-replicate rows,
# seconds = wall time of the bootstrap itself)

timed <- function(expr) {
  start <- proc.time()[["elapsed"]]
  value <- expr
  list(t = value$t, diagnostics = value$diagnostics,
       seconds = proc.time()[["elapsed"]] - start)
}

chunked_mclapply <- function(fit, B, K, seed) {
  batches <- split(seq_len(B), ceiling(seq_len(B) / K))
  results <- list()
  for (batch in batches) {
    results <- c(results, parallel::mclapply(batch, wispack:::bootstrap_replicate,
                                             plan = fit$plan, seed = seed, mc.cores = K))
  }
  rows <- wispack:::replicate_table(lapply(results, `[[`, "outcome"),
                                    length(fit$fitted.parameters))
  list(t = rows$estimates, diagnostics = rows$diagnostics)
}

# The MALLOC_ARENA_MAX arm needs a fresh process (glibc reads the variable at
# start-up); `mc_sub` is the same call in a fresh process without it.
subprocess_arm <- function(fit_file, B, K, seed, env) {
  out <- tempfile(fileext = ".rds")
  status <- system2(file.path(R.home("bin"), "Rscript"),
                    c(shQuote(script_file()), "child", shQuote(fit_file), B, K, seed, shQuote(out)),
                    env = env)
  if (status != 0 || !file.exists(out)) stop("subprocess arm failed")
  value <- readRDS(out)
  unlink(out)
  value
}

run_arm <- function(arm, fit, fit_file, B, K, seed) {
  quiet <- list(progress = FALSE, seed = seed)
  bs <- function(...) do.call(bs_batch, c(list(fit, B, K, ...), quiet))
  switch(arm,
    fork_rolling = timed(bs(backend = "fork", schedule = "rolling", tasks.per.child = 1)),
    fork_batch = timed(bs(backend = "fork", schedule = "batch", tasks.per.child = 1)),
    fork_tpc5 = timed(bs(backend = "fork", tasks.per.child = 5)),
    mc_pre = timed(bs(backend = "mclapply", mc.preschedule = TRUE)),
    mc_nopre = timed(bs(backend = "mclapply", mc.preschedule = FALSE)),
    mc_chunked = timed(chunked_mclapply(fit, B, K, seed)),
    mc_trim = timed(bs(backend = "mclapply", mc.preschedule = TRUE, trim.memory = TRUE)),
    mc_sub = subprocess_arm(fit_file, B, K, seed, character()),
    mc_arena2 = subprocess_arm(fit_file, B, K, seed, "MALLOC_ARENA_MAX=2"),
    stop("unknown arm ", arm)
  )
}

child_main <- function(args) {
  suppressPackageStartupMessages(library(wispack))
  fit <- readRDS(args[1])
  B <- as.integer(args[2])
  K <- as.integer(args[3])
  seed <- as.integer(args[4])
  invisible(gc())
  value <- timed(bs_batch(fit, B, K, backend = "mclapply", mc.preschedule = TRUE, seed = seed,
                          progress = FALSE))
  saveRDS(value, args[5])
}

# ---------------------------------------------------------------------------
# run

run_main <- function(args) {
  regime <- args[1]
  K <- as.integer(args[2])
  fits <- as.integer(strsplit(args[3], ",")[[1]])
  repeats <- as.integer(args[4])
  arms <- if (length(args) >= 5 && args[5] != "all") strsplit(args[5], ",")[[1]] else names(arm_labels)
  out <- if (length(args) >= 6) args[6] else file.path(bench_dir, "results", "fork_vs_mclapply.csv")
  stopifnot(all(arms %in% names(arm_labels)), K >= 1, all(fits >= 1), repeats >= 1)
  suppressPackageStartupMessages(library(wispack))
  seed <- 1L
  run_id <- format(Sys.time(), "%Y%m%d-%H%M%S")
  commit <- bench_commit()

  cat(sprintf("[%s] %s regime: building or loading the model...\n", format(Sys.time(), "%T"), regime))
  fit <- regime_model(regime)
  fit_file <- tempfile(fileext = ".rds")
  if (any(c("mc_sub", "mc_arena2") %in% arms)) saveRDS(fit, fit_file)
  params <- length(fit$fitted.parameters)
  cat(sprintf("%d parameters, %d summed rows; workers %d; fits per worker %s; %d repeats; arms %s\n",
              params, nrow(fit$count.data.summed), K, paste(fits, collapse = ","), repeats,
              paste(arms, collapse = ",")))
  sampler_out <- tempfile(fileext = ".csv")
  trace_file <- file.path(dirname(out), "fork_vs_mclapply_traces.csv")
  references <- list()
  for (r in seq_len(repeats)) {
    for (f in fits) {
      B <- K * f
      order <- arms[(seq_along(arms) + r - 2) %% length(arms) + 1] # rotate per repeat
      for (arm in order) {
        invisible(gc())
        trace <- if (r == 1 && f == max(fits)) tempfile(fileext = ".csv") else NULL
        start_sampler(sampler_out, trace)
        value <- tryCatch(run_arm(arm, fit, fit_file, B, K, seed),
                          error = function(e) {
                            message("arm ", arm, " failed: ", conditionMessage(e))
                            NULL
                          })
        memory <- stop_sampler(sampler_out)
        if (is.null(value)) next
        d <- value$diagnostics
        key <- as.character(B)
        if (is.null(references[[key]])) references[[key]] <- value$t
        row <- data.frame(
          run_id = run_id, date = format(Sys.time(), "%Y-%m-%d %H:%M:%S"), regime = regime,
          params = params, workers = K, fits_per_worker = f, replicates = B, arm = arm,
          repeat_no = r, wall_s = round(value$seconds, 3),
          fits_per_s = round(B / value$seconds, 4),
          memory,
          rep_ok = sum(d$ok), rep_converged = sum(d$converged %in% TRUE),
          rep_seconds_median = round(stats::median(d$seconds, na.rm = TRUE), 3),
          rep_pss_mb_median = round(stats::median(d$pss_mb, na.rm = TRUE), 1),
          rep_pss_mb_max = round(max(d$pss_mb, na.rm = TRUE), 1),
          rep_private_dirty_mb_max = round(max(d$private_dirty_mb, na.rm = TRUE), 1),
          rep_peak_rss_mb_max = round(max(d$peak_rss_mb, na.rm = TRUE), 1),
          distinct_pids = length(unique(d$pid)),
          identical_estimates = identical(unname(value$t), unname(references[[key]])),
          stringsAsFactors = FALSE)
        row <- with_provenance(row, if (startsWith(arm, "fork")) "fork" else "mclapply", commit)
        exists_out <- file.exists(out)
        utils::write.table(row, out, sep = ",", append = exists_out, col.names = !exists_out,
                           row.names = FALSE)
        if (!is.null(trace) && file.exists(trace)) {
          tr <- utils::read.csv(trace)
          tr <- cbind(run_id = run_id, regime = regime, workers = K, fits_per_worker = f,
                      arm = arm, tr)
          tr <- with_provenance(tr, if (startsWith(arm, "fork")) "fork" else "mclapply", commit)
          exists_trace <- file.exists(trace_file)
          utils::write.table(tr, trace_file, sep = ",", append = exists_trace,
                             col.names = !exists_trace, row.names = FALSE)
          unlink(trace)
        }
        cat(sprintf("[%s] r%d B=%-3d %-13s %6.2f s  %5.2f fits/s  PSS %6.0f  USS %6.0f  RSS %6.0f MB  (%d ticks, median %.0f ms)%s\n",
                    format(Sys.time(), "%T"), r, B, arm, row$wall_s, row$fits_per_s,
                    row$peak_pss_mb, row$peak_uss_mb, row$peak_rss_mb, row$samples,
                    row$interval_median_ms, if (row$identical_estimates) "" else "  ESTIMATES DIFFER"))
      }
    }
  }
  unlink(fit_file)
}

# ---------------------------------------------------------------------------
# report

results_dir <- function() Sys.getenv("BENCH_RESULTS", file.path(bench_dir, "results"))

# Machine description, written once per full run.
machine_main <- function(args) {
  first <- function(cmd) tryCatch(system(cmd, intern = TRUE)[1], error = function(e) NA_character_)
  cpu <- sub(".*:\\s*", "", grep("^model name", readLines("/proc/cpuinfo"), value = TRUE)[1])
  mem_kb <- as.numeric(sub("[^0-9]*([0-9]+).*", "\\1",
                           grep("^MemTotal", readLines("/proc/meminfo"), value = TRUE)))
  rows <- c(
    date = format(Sys.time(), "%Y-%m-%d %H:%M %Z"),
    cpu = sprintf("%s, %d logical CPUs (virtualised, shared with other users)", cpu,
                  parallel::detectCores()),
    memory = sprintf("%.0f GB, no swap", mem_kb / 1024^2),
    kernel = first("uname -sr"),
    os = sub('^PRETTY_NAME="?([^"]*)"?', "\\1",
             grep("^PRETTY_NAME", readLines("/etc/os-release"), value = TRUE)),
    glibc = first("ldd --version 2>&1 | head -1"),
    R = R.version.string,
    rustc = first("rustc --version 2>/dev/null"),
    python = first("python3 --version 2>&1"),
    wispack = sprintf("%s (built %s)", utils::packageVersion("wispack"),
                      utils::packageDescription("wispack")$Built),
    transparent_hugepages = first("cat /sys/kernel/mm/transparent_hugepage/enabled"),
    load_average_at_start = paste(strsplit(readLines("/proc/loadavg"), " ")[[1]][1:3], collapse = " ")
  )
  utils::write.csv(with_provenance(data.frame(key = names(rows), value = unname(rows)), "none"),
                   file.path(results_dir(), "fork_vs_mclapply_machine.csv"), row.names = FALSE)
}

med_range <- function(x, digits = 1) {
  x <- x[is.finite(x)]
  if (!length(x)) return("–")
  f <- paste0("%.", digits, "f")
  if (length(x) == 1) return(sprintf(f, x))
  sprintf(paste0(f, " (", f, "–", f, ")"), stats::median(x), min(x), max(x))
}

# Per-repeat ratios against the reference arm of the same run, repeat and size.
with_ratios <- function(fvm) {
  ref_arm <- ifelse(fvm$arm %in% c("mc_sub", "mc_arena2"), "mc_sub", "mc_pre")
  key <- paste(fvm$run_id, fvm$regime, fvm$workers, fvm$fits_per_worker, fvm$repeat_no)
  ref_key <- paste(key, ref_arm)
  own_key <- paste(key, fvm$arm)
  idx <- match(ref_key, own_key)
  fvm$ref_arm <- ref_arm
  fvm$time_ratio <- fvm$wall_s / fvm$wall_s[idx]
  fvm$pss_ratio <- fvm$peak_pss_mb / fvm$peak_pss_mb[idx]
  fvm$rss_ratio <- fvm$peak_rss_mb / fvm$peak_rss_mb[idx]
  fvm$uss_ratio <- fvm$peak_uss_mb / fvm$peak_uss_mb[idx]
  fvm
}

summarise_fvm <- function(fvm) {
  groups <- unique(fvm[c("regime", "params", "workers", "fits_per_worker", "replicates", "arm")])
  stat <- function(x, name) {
    x <- x[is.finite(x)]
    out <- if (length(x)) c(stats::median(x), min(x), max(x)) else rep(NA_real_, 3)
    stats::setNames(as.list(out), paste0(name, c("_median", "_min", "_max")))
  }
  rows <- lapply(seq_len(nrow(groups)), function(i) {
    g <- groups[i, ]
    x <- fvm[fvm$regime == g$regime & fvm$workers == g$workers &
               fvm$fits_per_worker == g$fits_per_worker & fvm$arm == g$arm, ]
    data.frame(g, label = unname(arm_labels[g$arm]), repeats = nrow(x),
               stat(x$wall_s, "wall_s"), stat(x$fits_per_s, "fits_per_s"),
               stat(x$peak_pss_mb, "peak_pss_mb"), stat(x$peak_uss_mb, "peak_uss_mb"),
               stat(x$peak_rss_mb, "peak_rss_mb"), stat(x$peak_rss_mb / x$peak_pss_mb, "rss_over_pss"),
               stat(x$time_ratio, "time_ratio"), stat(x$pss_ratio, "pss_ratio"),
               stat(x$rss_ratio, "rss_ratio"), stat(x$uss_ratio, "uss_ratio"),
               stat(x$pss_auc_mb_s, "pss_auc_mb_s"),
               rep_seconds = stats::median(x$rep_seconds_median),
               rep_pss_mb_max = stats::median(x$rep_pss_mb_max),
               rep_private_dirty_mb_max = stats::median(x$rep_private_dirty_mb_max),
               rep_peak_rss_mb_max = stats::median(x$rep_peak_rss_mb_max),
               distinct_pids = stats::median(x$distinct_pids),
               converged = min(x$rep_converged), ok = min(x$rep_ok),
               identical = all(x$identical_estimates),
               interval_median_ms = stats::median(x$interval_median_ms),
               interval_p95_ms = max(x$interval_p95_ms),
               ref_arm = x$ref_arm[1], stringsAsFactors = FALSE)
  })
  out <- do.call(rbind, rows)
  out <- out[order(out$regime != "small", out$workers, out$fits_per_worker,
                   match(out$arm, names(arm_labels))), ]
  rownames(out) <- NULL
  out
}

replace_block <- function(lines, name, block) {
  begin <- sprintf("<!-- BEGIN %s: generated by benchmarks/fork_vs_mclapply.R report; do not edit -->", name)
  end <- sprintf("<!-- END %s -->", name)
  b <- which(lines == begin)
  e <- which(lines == end)
  block <- c(begin, block, end)
  if (length(b) == 1 && length(e) == 1 && e > b) {
    c(lines[seq_len(b - 1)], block, lines[-seq_len(e)])
  } else {
    c(lines, "", block)
  }
}

report_main <- function(args) {
  rdir <- results_dir()
  # The generated blocks live in the benchmarks' own pages; BENCH_PAGES puts
  # them into another folder (a dry run). benchmarks/RESULTS.md is a summary
  # written by tools/write-results.py from benchmarks/headlines.csv.
  pages <- Sys.getenv("BENCH_PAGES", bench_dir)
  fvm_md <- file.path(pages, "fork_vs_mclapply.md")
  overhead_md <- file.path(pages, "fork_overhead.md")
  vdir <- Sys.getenv("BENCH_VIGNETTE_DATA",
                     file.path(dirname(bench_dir), "vignettes", "fork-per-batch"))
  dir.create(vdir, showWarnings = FALSE, recursive = TRUE)
  read <- function(name) {
    f <- file.path(rdir, name)
    if (file.exists(f)) utils::read.csv(f, stringsAsFactors = FALSE) else NULL
  }
  fvm <- read("fork_vs_mclapply.csv")
  floor <- read("memory_floor.csv")
  overhead <- read("fork_overhead.csv")
  traces <- read("fork_vs_mclapply_traces.csv")
  machine <- read("fork_vs_mclapply_machine.csv")
  if (is.null(fvm)) stop("no ", file.path(rdir, "fork_vs_mclapply.csv"), "; run the benchmark first")

  fvm <- with_ratios(fvm)
  summary <- summarise_fvm(fvm)
  md <- character()
  add <- function(fmt, ...) md <<- c(md, if (...length()) sprintf(fmt, ...) else fmt)

  # -- machine, commands, protocol
  add("## Machine, protocol and figures")
  add("")
  if (!is.null(machine)) {
    add("Machine and software of the run:")
    add("")
    add("| | |\n|---|---|")
    for (i in seq_len(nrow(machine))) add("| %s | %s |", machine$key[i], machine$value[i])
    add("")
  }
  stages <- unique(fvm[c("run_id", "regime", "workers")])
  add("Command (from the repository root, wispack installed; about 40 minutes on a quiet machine):")
  add("")
  add("```sh\nsh benchmarks/run_all.sh 2   # 2 = worker count; see the script for stage and size settings\n```")
  add("")
  add(paste("The run reported here was done in stages (the exact commands are listed under the",
            "conclusion below); these are the stages that appended to",
            "`benchmarks/results/fork_vs_mclapply.csv`:"))
  add("")
  add("| stage (run id) | regime | parameters | workers | fits per worker | replicates B | repeats | arms |")
  add("|---|---|---:|---:|---|---|---:|---|")
  for (i in seq_len(nrow(stages))) {
    x <- fvm[fvm$run_id == stages$run_id[i] & fvm$regime == stages$regime[i] &
               fvm$workers == stages$workers[i], ]
    add("| %s | %s | %d | %d | %s | %s | %d | %s |", stages$run_id[i], stages$regime[i],
        x$params[1], stages$workers[i], paste(sort(unique(x$fits_per_worker)), collapse = ", "),
        paste(sort(unique(x$replicates)), collapse = ", "), max(x$repeat_no),
        paste(unique(x$arm), collapse = ", "))
  }
  add("")
  add(paste("Protocol: one model fit per regime (cached), `gc()` in the parent before every run,",
            "the same seed for every arm (the table's last column checks the estimates are",
            "bitwise identical to the first arm of the same size), and the order of the arms",
            "rotated from one repeat to the next. Memory comes from `benchmarks/memory_sampler.py`,",
            "a separate Python process that every 10 ms walks the benchmark's process tree and",
            "sums `/proc/<pid>/smaps_rollup` over it: Pss (shared pages split between sharers, so",
            "the sum is the RAM actually used), Private_Clean + Private_Dirty (USS) and Rss",
            sprintf("(shared pages counted once per process). Achieved tick: median %.0f ms, worst 95th percentile %.0f ms.",
                    stats::median(fvm$interval_median_ms), max(fvm$interval_p95_ms)),
            "Figures are medians over repeats with the range in brackets; ratios are formed",
            "within one repeat (same run, same size) and then summarised. The machine is shared",
            "with other engineers building Rust, so single timings carry ±25 % noise; compare",
            "arms through the within-repeat ratios."))
  add("")
  add("Arms:")
  add("")
  add("| id | arm |\n|---|---|")
  for (a in intersect(names(arm_labels), unique(fvm$arm))) add("| `%s` | %s |", a, arm_labels[[a]])
  add("")
  add(paste("`mc_sub` and `mc_arena2` run `bs_batch(backend = \"mclapply\")` in a fresh `Rscript`",
            "(glibc reads MALLOC_ARENA_MAX at start-up), so their memory includes a second R",
            "process and they are compared with each other only (their ratio column is against",
            "`mc_sub`). With one worker `mclapply` does not fork at all (it falls back to",
            "`lapply` in the parent)."))
  add("")

  # -- headline: the original's comparison
  add("### Summary: a fresh child per replicate (`fork_rolling`) against `mclapply` (`mc_pre`)")
  add("")
  add(paste("The original compared these two, with memory as summed VmRSS. Ratios < 1 favour",
            "fork-per-batch; medians over repeats of the within-repeat ratio (range)."))
  add("")
  add("| regime | workers | fits per worker | B | time fork / mclapply | peak PSS fork / mclapply | peak USS fork / mclapply | peak RSS fork / mclapply |")
  add("|---|---:|---:|---:|---|---|---|---|")
  head_rows <- summary[summary$arm == "fork_rolling", ]
  for (i in seq_len(nrow(head_rows))) {
    h <- head_rows[i, ]
    x <- fvm[fvm$arm == "fork_rolling" & fvm$regime == h$regime & fvm$workers == h$workers &
               fvm$fits_per_worker == h$fits_per_worker, ]
    add("| %s (%d) | %d | %d | %d | %s | %s | %s | %s |", h$regime, h$params, h$workers,
        h$fits_per_worker, h$replicates, med_range(x$time_ratio, 2), med_range(x$pss_ratio, 2),
        med_range(x$uss_ratio, 2), med_range(x$rss_ratio, 2))
  }
  add("")

  # -- full tables
  for (g in split(summary, paste(summary$regime != "small", summary$workers), drop = TRUE)) {
    add("### %s model (%d parameters), %d worker%s: every arm", tools::toTitleCase(g$regime[1]),
        g$params[1], g$workers[1], if (g$workers[1] > 1) "s" else "")
    add("")
    add(paste("Time and memory of the whole bootstrap call (memory: peak over the run of the",
              "sum over the process tree, MB). Per-replicate columns come from the",
              "`wisp_bootstrap` diagnostics: median seconds per fit, and the largest",
              "Private_Dirty and PSS any worker reported right after a fit."))
    add("")
    add("| fits / worker (B) | arm | wall s | fits/s | time vs ref | peak PSS | peak USS | peak RSS | RSS/PSS | s per fit | max private dirty per worker | max PSS per worker | workers forked | same estimates |")
    add("|---|---|---|---|---|---|---|---|---|---:|---:|---:|---:|---|")
    for (i in seq_len(nrow(g))) {
      h <- g[i, ]
      x <- fvm[fvm$arm == h$arm & fvm$regime == h$regime & fvm$workers == h$workers &
                 fvm$fits_per_worker == h$fits_per_worker, ]
      ref <- if (h$arm == h$ref_arm) "ref" else paste(med_range(x$time_ratio, 2), "vs", h$ref_arm)
      add("| %d (%d) | `%s` | %s | %s | %s | %s | %s | %s | %.2f | %.2f | %.1f | %.1f | %g | %s |",
          h$fits_per_worker, h$replicates, h$arm, med_range(x$wall_s, 2), med_range(x$fits_per_s, 2),
          ref, med_range(x$peak_pss_mb, 0), med_range(x$peak_uss_mb, 0), med_range(x$peak_rss_mb, 0),
          h$rss_over_pss_median, h$rep_seconds, h$rep_private_dirty_mb_max, h$rep_pss_mb_max,
          h$distinct_pids, if (h$identical) "yes" else "NO")
    }
    add("")
  }

  # -- RSS overstatement
  add("### How far summed RSS overstates")
  add("")
  add(paste("Peak summed RSS divided by peak summed PSS, per arm (median over repeats); the",
            "table gives the median and the range of those per-arm figures (in-process arms)."))
  add("")
  add("| regime | workers | summed RSS / summed PSS: median over arms (range over arms) |")
  add("|---|---:|---|")
  rss_rows <- summary[summary$arm %in% in_process_arms, ]
  for (g in split(rss_rows, paste(rss_rows$regime != "small", rss_rows$workers), drop = TRUE)) {
    add("| %s | %d | %s |", g$regime[1], g$workers[1], med_range(g$rss_over_pss_median, 2))
  }
  add("")

  # -- floor curve
  floor_summary <- NULL
  if (!is.null(floor)) {
    add("### Memory floor of one long-lived worker (`benchmarks/memory_floor.R`)")
    add("")
    add(paste("One worker forked from the benchmark process runs N fits back to back and reads",
              "its own `smaps_rollup` after each; the two variants (with and without",
              "`malloc_trim(0)` after every fit) run side by side. Private_Dirty is what the",
              "worker added on top of the pages it shares with its parent (PSS also moves when",
              "the sibling worker exits, so it is not used here). Medians over repeats, MB."))
    add("")
    ks <- function(n) unique(c(0, 1, 2, 5, 10, 20, n)[c(0, 1, 2, 5, 10, 20, n) <= n])
    add("| regime | variant | private dirty after fit k = … | growth per fit after fit 2 (MB) | fit s (median) |")
    add("|---|---|---|---:|---:|")
    floor_summary <- aggregate(cbind(private_dirty_mb, pss_mb, rss_mb, uss_mb, fit_seconds) ~
                                 regime + params + variant + k, data = floor, FUN = stats::median,
                               na.action = na.pass)
    for (g in split(floor_summary, paste(floor_summary$regime, floor_summary$variant), drop = TRUE)) {
      g <- g[order(g$k), ]
      n <- max(g$k)
      shown <- g[g$k %in% ks(n), ]
      tail_k <- g[g$k >= 2, ]
      slope <- if (nrow(tail_k) >= 2) stats::coef(stats::lm(private_dirty_mb ~ k, tail_k))[[2]] else NA
      add("| %s (%d) | %s | %s | %.2f | %.2f |", g$regime[1], g$params[1], g$variant[1],
          paste(sprintf("k=%d: %.1f", shown$k, shown$private_dirty_mb), collapse = "; "),
          slope, stats::median(g$fit_seconds, na.rm = TRUE))
    }
    add("")
  }

  # -- fork cost against parent size
  overhead_summary <- NULL
  fit_s <- tapply(fvm$rep_seconds_median[fvm$arm == "fork_rolling"],
                  fvm$regime[fvm$arm == "fork_rolling"], stats::median)
  fit_of <- function(regime) if (regime %in% names(fit_s)) fit_s[[regime]] else NA_real_
  if (!is.null(overhead)) {
    overhead_summary <- aggregate(ms_per_task ~ parent + arm, data = overhead,
                                  FUN = function(x) c(median = stats::median(x), min = min(x), max = max(x)))
    overhead_summary <- data.frame(parent = overhead_summary$parent, arm = overhead_summary$arm,
                                   ms_median = overhead_summary$ms_per_task[, "median"],
                                   ms_min = overhead_summary$ms_per_task[, "min"],
                                   ms_max = overhead_summary$ms_per_task[, "max"])
    rss <- aggregate(parent_rss_mb ~ parent, data = overhead, FUN = max)
    overhead_summary$parent_rss_mb <- rss$parent_rss_mb[match(overhead_summary$parent, rss$parent)]
    overhead_summary <- overhead_summary[order(overhead_summary$parent_rss_mb, overhead_summary$arm), ]
    add("### Fork cost against parent size (`benchmarks/fork_overhead.R`)")
    add("")
    add(paste("Per-task cost of a trivial task (40 tasks, wall time / tasks) with a lean parent and",
              "with the parent holding 1 GB and 4 GB of touched numeric vectors. The last columns",
              "set the cost of a fresh child per task (the engine's default) against the median",
              sprintf("fit time measured above (small: %.2f s, large: %.1f s per fit).",
                      fit_of("small"), fit_of("large"))))
    add("")
    add("| parent | parent RSS (MB) | arm | ms per task | % of a small fit | % of a large fit |")
    add("|---|---:|---|---|---:|---:|")
    for (i in seq_len(nrow(overhead_summary))) {
      o <- overhead_summary[i, ]
      add("| %s | %d | %s | %.2f (%.2f–%.2f) | %.1f | %.2f |", o$parent, o$parent_rss_mb, o$arm,
          o$ms_median, o$ms_min, o$ms_max, 100 * o$ms_median / 1000 / (fit_of("small")),
          100 * o$ms_median / 1000 / (fit_of("large")))
    }
    add("")
  }

  page <- function(file, title) if (file.exists(file)) readLines(file, warn = FALSE) else title
  lines <- replace_block(page(fvm_md, "# Fork-per-batch against mclapply"), "fork-vs-mclapply", md)
  writeLines(lines, fvm_md)
  if (!is.null(overhead_summary)) {
    table <- c("Command (wispack installed, release build; the full run uses `benchmarks/run_all.sh`):", "",
               "```sh", "Rscript benchmarks/fork_overhead.R 40 5 2 1,4   # 40 tasks, 5 repeats, 2 workers, 1 and 4 GB parents",
               "```", "",
               paste("A trivial task (return a number), 40 tasks on 2 workers, wall time divided by",
                     "the number of tasks; first with a lean R process, then with the parent",
                     "holding 1 GB and then 4 GB of numeric vectors (1 GB each, every page touched).",
                     "Raw data: `benchmarks/results/fork_overhead.csv`. The figures are from the",
                     "latest `run_all.sh` run; what they mean against fit times is in",
                     "[fork_vs_mclapply.md](fork_vs_mclapply.md)."), "",
               "| parent | parent RSS (MB) | arm | ms per task, median | range |", "|---|---:|---|---:|---|",
               sprintf("| %s | %d | %s | %.2f | %.2f–%.2f |", overhead_summary$parent,
                       overhead_summary$parent_rss_mb, overhead_summary$arm, overhead_summary$ms_median,
                       overhead_summary$ms_min, overhead_summary$ms_max))
    lines <- replace_block(page(overhead_md, "# Fork engine overhead"), "fork-overhead-table", table)
    writeLines(lines, overhead_md)
  }

  # -- small CSVs for the vignette
  keep <- c("regime", "params", "workers", "fits_per_worker", "replicates", "arm", "label", "repeats",
            grep("_(median|min|max)$", names(summary), value = TRUE),
            "rep_seconds", "rep_pss_mb_max", "rep_private_dirty_mb_max", "rep_peak_rss_mb_max",
            "distinct_pids", "identical", "ref_arm")
  num <- vapply(summary[keep], is.numeric, logical(1))
  out <- summary[keep]
  out[num] <- lapply(out[num], signif, 4)
  utils::write.csv(out, file.path(vdir, "fork_vs_mclapply_summary.csv"), row.names = FALSE)
  if (!is.null(floor_summary)) {
    floor_summary[c("private_dirty_mb", "pss_mb", "rss_mb", "uss_mb", "fit_seconds")] <-
      lapply(floor_summary[c("private_dirty_mb", "pss_mb", "rss_mb", "uss_mb", "fit_seconds")], signif, 4)
    utils::write.csv(floor_summary, file.path(vdir, "memory_floor.csv"), row.names = FALSE)
  }
  if (!is.null(overhead_summary)) {
    overhead_summary[3:5] <- lapply(overhead_summary[3:5], signif, 4)
    overhead_summary$small_fit_s <- signif(fit_of("small"), 4)
    overhead_summary$large_fit_s <- signif(fit_of("large"), 4)
    utils::write.csv(overhead_summary, file.path(vdir, "fork_overhead.csv"), row.names = FALSE)
  }
  if (!is.null(traces)) {
    last_run <- tapply(traces$run_id, paste(traces$regime, traces$workers), max)
    traces <- traces[traces$run_id == last_run[paste(traces$regime, traces$workers)] &
                       traces$workers == max(traces$workers), ]
    # the small regime at its largest size, thinned to the peak of every 100 ms
    traces <- traces[traces$regime == "small", ]
    traces <- traces[traces$fits_per_worker == max(traces$fits_per_worker), ]
    traces$bin <- floor(traces$t * 10) / 10
    traces <- aggregate(cbind(procs, pss_mb, uss_mb, rss_mb) ~ regime + workers + fits_per_worker +
                          arm + bin, data = traces, FUN = max)
    names(traces)[names(traces) == "bin"] <- "t"
    traces[c("pss_mb", "uss_mb", "rss_mb")] <- lapply(traces[c("pss_mb", "uss_mb", "rss_mb")], round)
    traces <- traces[order(traces$arm, traces$t), ]
    utils::write.csv(traces, file.path(vdir, "memory_traces.csv"), row.names = FALSE)
  }
  # The vignette shows the machine, not where the table came from.
  if (!is.null(machine)) utils::write.csv(machine[c("key", "value")], file.path(vdir, "machine.csv"),
                                          row.names = FALSE)
  cat("Rewrote", fvm_md, if (!is.null(overhead_summary)) overhead_md, "and the CSVs in", vdir, "\n")
}

`%||%` <- function(a, b) if (is.null(a)) b else a

args <- commandArgs(trailingOnly = TRUE)
if (!length(args)) stop("usage: fork_vs_mclapply.R run|report|child ...")
switch(args[1],
  run = run_main(args[-1]),
  child = child_main(args[-1]),
  report = report_main(args[-1]),
  machine = machine_main(args[-1]),
  stop("unknown command ", args[1])
)
