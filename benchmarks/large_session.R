# The fork backend with its default settings against parallel::mclapply, from
# a lean R session and from one holding several GB, on the small and the
# large model, side by side in one run; and the per-task overhead of the fork
# engine against the task's own time (issue 17, "Large R sessions").
#
# Usage (from the repository root, wispack installed with its test hooks,
# WISPACK_TEST_HOOKS=true R CMD INSTALL .):
#   Rscript benchmarks/large_session.R SESSION_GB REGIMES WORKERS FITS REPEATS [OUT_DIR] [ARMS] [OVERHEAD] [MEMORY]
#     SESSION_GB  GB of numeric vectors the session allocates and touches
#                 before it runs anything (0: a lean session); run one
#                 session per command, so a lean session is really lean
#     REGIMES     comma separated: small (312 parameters) and/or large (3168)
#                 (models as in benchmarks/fork_vs_mclapply.R, cached there),
#                 or none (the engine self-test only)
#     WORKERS     max.fork / mc.cores
#     FITS        replicates per worker (B = WORKERS x FITS), comma separated
#                 per regime in the order of REGIMES
#     REPEATS     timed repeats; the order of the arms rotates per repeat
#     ARMS        comma separated arm ids (default: all of them)
#     OVERHEAD    1 (default): also the engine self-test below; 0: not;
#                 defaults: the self-test of the engine's defaults only
#                 (not a fresh child per task, which takes minutes from a
#                 session of several GB on a loaded machine)
#     MEMORY      1 (default): one more run of each arm under the memory
#                 sampler; 0: timed repeats only
#   Appends to OUT_DIR/large_session.csv (timed runs; default
#   benchmarks/results), OUT_DIR/large_session_memory.csv (one run per arm
#   under the memory sampler, kept apart so that the sampler's page-table
#   walks, 34 ms per process at 4 GB, do not slow the timed runs) and
#   OUT_DIR/large_session_overhead.csv (engine self-test: per-task overhead
#   against task time), then prints Markdown tables of this run.
#   Rscript benchmarks/large_session.R report [OUT_DIR]
#     prints the Markdown tables of every run in the CSVs and writes their
#     summaries to vignettes/fork-per-batch/large_session*.csv (the vignette
#     reads them).
#
# Arms (every arm runs bs_batch() with progress = FALSE and the same seed):
#   fork_default  backend "fork", every other argument at its default
#                 (tasks.per.child = NULL; PSS once per worker): since
#                 commit "Fork engine: by default long-lived workers fed one
#                 task at a time", max.fork workers per run fed one
#                 replicate at a time; before, an automatic number of
#                 replicates per worker
#   fork_fresh    backend "fork", tasks.per.child = 1, memory.per.replicate =
#                 TRUE: a fresh child and a PSS read per replicate (the
#                 defaults before issue 17)
#   fork_no_pss   fork_default with memory.per.replicate = NA: no PSS read
#   mc_pre        backend "mclapply", mc.preschedule = TRUE
#   mc_nopre      backend "mclapply", mc.preschedule = FALSE

arm_labels <- c(
  fork_default = "fork, defaults (tasks.per.child = NULL, PSS once per worker)",
  fork_fresh = "fork, tasks.per.child = 1, memory.per.replicate = TRUE (old defaults)",
  fork_no_pss = "fork, defaults but memory.per.replicate = NA (no PSS read)",
  mc_pre = "mclapply, preschedule TRUE",
  mc_nopre = "mclapply, preschedule FALSE"
)

script_file <- function() {
  file <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
  normalizePath(if (length(file)) file[1] else "benchmarks/large_session.R")
}
bench_dir <- dirname(script_file())

# The models of fork_vs_mclapply.R (same data, same cache).
regime_model <- function(regime) {
  env <- new.env()
  lines <- readLines(file.path(bench_dir, "fork_vs_mclapply.R"))
  start <- grep("^regime_model <- function", lines)
  end <- start + grep("^}", lines[start:length(lines)])[1] - 1
  eval(parse(text = lines[start:end]), env)
  env$regime_model(regime)
}

rss_mb <- function() {
  status <- readLines("/proc/self/status")
  as.numeric(sub("[^0-9]*([0-9]+).*", "\\1", grep("^VmRSS:", status, value = TRUE))) / 1024
}

available_gb <- function() {
  info <- readLines("/proc/meminfo")
  as.numeric(sub("[^0-9]*([0-9]+).*", "\\1", grep("^MemAvailable:", info, value = TRUE))) / 1024^2
}

source(file.path(bench_dir, "memory_sampler.R"))
source(file.path(bench_dir, "headlines.R")) # with_provenance(), register_headline()

run_arm <- function(arm, fit, B, K, seed) {
  bs <- function(...) bs_batch(fit, B, K, progress = FALSE, seed = seed, ...)
  start <- proc.time()[["elapsed"]]
  boot <- switch(arm,
    fork_default = bs(backend = "fork"),
    fork_fresh = bs(backend = "fork", tasks.per.child = 1, memory.per.replicate = TRUE),
    fork_no_pss = bs(backend = "fork", memory.per.replicate = NA),
    mc_pre = bs(backend = "mclapply", mc.preschedule = TRUE),
    mc_nopre = bs(backend = "mclapply", mc.preschedule = FALSE),
    stop("unknown arm ", arm)
  )
  list(seconds = proc.time()[["elapsed"]] - start, boot = boot)
}

append_csv <- function(rows, file) {
  exists <- file.exists(file)
  if (exists) {
    old <- utils::read.csv(file, stringsAsFactors = FALSE)
    if (!identical(names(old), names(rows))) { # a column was added: rewrite the file
      for (column in setdiff(names(rows), names(old))) old[[column]] <- NA
      for (column in setdiff(names(old), names(rows))) rows[[column]] <- NA
      utils::write.csv(rbind(old, rows[names(old)]), file, row.names = FALSE)
      return(invisible())
    }
  }
  utils::write.table(rows, file, sep = ",", row.names = FALSE, col.names = !exists,
                     append = exists, qmethod = "double")
}

# Engine self-test: `n` tasks that sleep `task_s` seconds each on `workers`
# workers. Per-task overhead = wall * workers / n - task_s.
overhead_rows <- function(session, parent_rss, workers, repeats, run_id, fresh = TRUE) {
  selftest <- wispack:::engine_selftest
  rows <- list()
  for (task_s in c(0.02, 0.05, 0.1)) {
    n <- max(20L, as.integer(ceiling(2 / task_s)) %/% 2L * 2L) # about 1 s of work per worker
    # (the defaults were labelled "engine defaults (automatic, PSS once per
    # child)" in the runs of the engine that sized batches per child)
    variants <- list(
      "engine defaults (fed workers, PSS once per child)" =
        function() selftest(n, workers = workers, sleep = task_s, tasks_per_child = NULL,
                            memory_per_task = FALSE),
      "fresh child per task, PSS per task" =
        function() selftest(n, workers = workers, sleep = task_s)
    )
    if (!fresh) variants <- variants[1]
    for (r in seq_len(repeats)) {
      for (v in names(variants)) {
        start <- proc.time()[["elapsed"]]
        result <- variants[[v]]()
        wall <- proc.time()[["elapsed"]] - start
        stopifnot(all(result$ok))
        per_task <- wall * workers / n
        rows[[length(rows) + 1]] <- data.frame(
          run_id = run_id, session = session, parent_rss_mb = round(parent_rss),
          workers = workers, task_s = task_s, tasks = n, variant = v, repeat_no = r,
          wall_s = wall, children = length(unique(result$pid)),
          overhead_ms_per_task = 1000 * (per_task - task_s),
          overhead_pct = 100 * (per_task - task_s) / task_s
        )
      }
    }
  }
  do.call(rbind, rows)
}

run_main <- function(args) {
  session_gb <- as.numeric(args[1])
  regimes <- setdiff(strsplit(args[2], ",")[[1]], "none")
  K <- as.integer(args[3])
  fits <- as.integer(strsplit(args[4], ",")[[1]])
  fits <- rep_len(fits, length(regimes))
  repeats <- as.integer(args[5])
  out_dir <- if (length(args) >= 6) args[6] else file.path(bench_dir, "results")
  arms <- if (length(args) >= 7) strsplit(args[7], ",")[[1]] else names(arm_labels)
  stopifnot(all(arms %in% names(arm_labels)))
  with_overhead <- length(args) < 8 || args[8] != "0"
  overhead_fresh <- length(args) < 8 || args[8] != "defaults"
  with_memory <- length(args) < 9 || args[9] != "0"
  dir.create(out_dir, showWarnings = FALSE, recursive = TRUE)
  suppressPackageStartupMessages(library(wispack))
  seed <- 1L
  run_id <- format(Sys.time(), "%Y%m%d-%H%M%S")
  session <- if (session_gb > 0) sprintf("holding %g GB", session_gb) else "lean"
  models <- lapply(setNames(regimes, regimes), function(regime) {
    cat(sprintf("[%s] %s model: building or loading...\n", format(Sys.time(), "%T"), regime))
    regime_model(regime)
  })
  ballast <- list()
  if (session_gb > 0) {
    if (available_gb() < session_gb + 3) {
      stop(sprintf("only %.1f GB available; not allocating %g GB", available_gb(), session_gb))
    }
    while (length(ballast) < session_gb) ballast[[length(ballast) + 1]] <- runif(1.25e8)
  }
  invisible(gc())
  parent_rss <- rss_mb()
  cat(sprintf("[%s] %s session: RSS %.0f MB; %d workers; %d repeats\n", format(Sys.time(), "%T"),
              session, parent_rss, K, repeats))
  interval <- if (session_gb > 0) 0.25 else 0.05
  sampler_out <- tempfile(fileext = ".csv")
  for (g in seq_along(regimes)) {
    regime <- regimes[g]
    fit <- models[[regime]]
    B <- K * fits[g]
    rows <- list()
    reference <- NULL
    for (r in seq_len(repeats + with_memory)) {
      memory_run <- r > repeats
      order <- arms[(seq_along(arms) + r - 2) %% length(arms) + 1]
      for (arm in order) {
        invisible(gc())
        if (memory_run) start_sampler(sampler_out, interval = interval)
        value <- run_arm(arm, fit, B, K, seed)
        memory <- if (memory_run) stop_sampler(sampler_out) else NULL
        d <- value$boot$diagnostics
        if (is.null(reference)) reference <- value$boot$t
        row <- data.frame(
          run_id = run_id, session = session, parent_rss_mb = round(parent_rss), regime = regime,
          parameters = length(fit$fitted.parameters), workers = K, B = B, arm = arm,
          repeat_no = if (memory_run) NA_integer_ else r, wall_s = value$seconds,
          replicate_s_mean = mean(d$seconds), children = length(unique(d$pid)),
          ok = sum(d$ok), same_estimates = identical(value$boot$t, reference),
          peak_pss_mb = if (memory_run) memory$peak_pss_mb else NA_real_,
          mean_pss_mb = if (memory_run) memory$pss_auc_mb_s / memory$sampled_s else NA_real_,
          root_pss_start_mb = if (memory_run) memory$root_pss_start_mb else NA_real_,
          sampler_interval_ms = if (memory_run) memory$interval_median_ms else NA_real_
        )
        row <- with_provenance(row, if (startsWith(arm, "fork")) "fork" else "mclapply")
        cat(sprintf("  %s B=%d %-12s %s %6.2f s, %d children%s\n", regime, B, arm,
                    if (memory_run) "memory" else sprintf("rep %d", r), value$seconds,
                    row$children,
                    if (memory_run) sprintf(", peak summed PSS %.0f MB", row$peak_pss_mb) else ""))
        append_csv(row, file.path(out_dir, if (memory_run) "large_session_memory.csv" else
          "large_session.csv"))
      }
    }
  }
  if (with_overhead) {
    cat(sprintf("[%s] engine overhead against task time\n", format(Sys.time(), "%T")))
    overhead <- overhead_rows(session, parent_rss, K, repeats, run_id, overhead_fresh)
    append_csv(with_provenance(overhead, "fork"), file.path(out_dir, "large_session_overhead.csv"))
  }
  rm(ballast)
  runs <- report_main(out_dir, run_ids = run_id)
  # The fork engine's headline: its default arm against prescheduled mclapply,
  # registered from runs into the repository's results only.
  if (normalizePath(out_dir) == normalizePath(file.path(bench_dir, "results"))) {
    d <- runs[runs$arm == "fork_default" & is.finite(runs$ratio_pre), ]
    where <- sprintf("%s session, %s model", if (session_gb > 0) sprintf("%g GB", session_gb) else "lean",
                     d$regime)
    command <- paste("Rscript benchmarks/large_session.R", paste(args, collapse = " "))
    if (nrow(d)) {
      register_headline("large_session",
                        paste("default fork backend (fed workers) time / prescheduled mclapply,", where),
                        sprintf("%.2f", d$ratio_pre), "ratio", command)
    }
    m <- is.finite(d$above_session_mb)
    if (any(m)) {
      register_headline("large_session",
                        paste("peak summed PSS above the session, default fork backend,", where[m]),
                        sprintf("%.0f", d$above_session_mb[m]), "MB", command)
    }
  }
}

fmt_range <- function(x, digits = 2) {
  if (!length(x) || all(is.na(x))) return("")
  sprintf(paste0("%.", digits, "f (%.", digits, "f–%.", digits, "f)"), stats::median(x), min(x),
          max(x))
}

# One row per (run, session, model, B, arm): medians over the timed repeats,
# within-repeat ratios against both mclapply arms, and the memory run.
summarise_runs <- function(timed, memory) {
  rows <- list()
  keys <- unique(timed[c("run_id", "session", "regime", "B")])
  for (k in seq_len(nrow(keys))) {
    here <- merge(timed, keys[k, ])
    mem <- merge(memory, keys[k, ])
    for (arm in names(arm_labels)) {
      a <- here[here$arm == arm, ]
      if (!nrow(a)) next
      ratio <- function(ref) {
        b <- here[here$arm == ref, ]
        a$wall_s / b$wall_s[match(a$repeat_no, b$repeat_no)]
      }
      over <- 100 * (a$wall_s * a$workers / a$B - a$replicate_s_mean) / a$replicate_s_mean
      m <- mem[mem$arm == arm, ]
      r_pre <- ratio("mc_pre")
      r_nopre <- ratio("mc_nopre")
      rows[[length(rows) + 1]] <- data.frame(
        run_id = a$run_id[1], session = a$session[1], parent_rss_mb = a$parent_rss_mb[1],
        regime = a$regime[1], parameters = a$parameters[1], workers = a$workers[1], B = a$B[1],
        arm = arm, repeats = nrow(a), wall_s = stats::median(a$wall_s),
        wall_min = min(a$wall_s), wall_max = max(a$wall_s),
        replicate_s = stats::median(a$replicate_s_mean),
        ratio_pre = stats::median(r_pre), ratio_pre_min = min(r_pre), ratio_pre_max = max(r_pre),
        ratio_nopre = stats::median(r_nopre), ratio_nopre_min = min(r_nopre),
        ratio_nopre_max = max(r_nopre), overhead_pct = stats::median(over),
        children_min = min(a$children), children_max = max(a$children),
        peak_pss_mb = if (nrow(m)) m$peak_pss_mb[1] else NA_real_,
        mean_pss_mb = if (nrow(m) && !is.null(m$mean_pss_mb)) m$mean_pss_mb[1] else NA_real_,
        above_session_mb = if (nrow(m)) m$peak_pss_mb[1] - m$root_pss_start_mb[1] else NA_real_,
        same_estimates = all(a$same_estimates)
      )
    }
  }
  do.call(rbind, rows)
}

summarise_overhead <- function(overhead) {
  rows <- list()
  keys <- unique(overhead[c("run_id", "session", "task_s", "variant")])
  keys <- keys[order(keys$run_id, keys$task_s, keys$variant), ]
  for (k in seq_len(nrow(keys))) {
    a <- merge(overhead, keys[k, ])
    rows[[k]] <- data.frame(
      run_id = a$run_id[1], session = a$session[1], parent_rss_mb = a$parent_rss_mb[1],
      task_ms = 1000 * a$task_s[1], tasks = a$tasks[1], variant = a$variant[1],
      children_min = min(a$children), children_max = max(a$children),
      overhead_ms = stats::median(a$overhead_ms_per_task),
      overhead_ms_min = min(a$overhead_ms_per_task), overhead_ms_max = max(a$overhead_ms_per_task),
      overhead_pct = stats::median(a$overhead_pct), overhead_pct_min = min(a$overhead_pct),
      overhead_pct_max = max(a$overhead_pct)
    )
  }
  do.call(rbind, rows)
}

span <- function(lo, hi) if (lo == hi) format(lo) else paste0(lo, "–", hi)
trio <- function(m, lo, hi, digits = 2) {
  if (is.na(m)) return("–")
  sprintf(paste0("%.", digits, "f (%.", digits, "f–%.", digits, "f)"), m, lo, hi)
}

report_main <- function(out_dir = file.path(bench_dir, "results"), run_ids = NULL,
                        vignette_dir = NULL) {
  timed <- utils::read.csv(file.path(out_dir, "large_session.csv"))
  memory <- utils::read.csv(file.path(out_dir, "large_session_memory.csv"))
  overhead <- utils::read.csv(file.path(out_dir, "large_session_overhead.csv"))
  if (!is.null(run_ids)) {
    timed <- timed[timed$run_id %in% run_ids, ]
    memory <- memory[memory$run_id %in% run_ids, ]
    overhead <- overhead[overhead$run_id %in% run_ids, ]
  }
  runs <- summarise_runs(timed, memory)
  costs <- summarise_overhead(overhead)
  if (!is.null(vignette_dir) && !is.null(costs)) {
    utils::write.csv(runs, file.path(vignette_dir, "large_session.csv"), row.names = FALSE)
    utils::write.csv(costs, file.path(vignette_dir, "large_session_overhead.csv"),
                     row.names = FALSE)
  }
  cat("\n| run | session (RSS MB) | model | B | arm | wall s | time / mc_pre | time / mc_nopre |",
      "overhead per replicate | children | peak summed PSS (MB) | peak above the session (MB) |",
      "mean summed PSS (MB) | same estimates |\n")
  cat("|---|---|---|---:|---|---|---|---|---:|---:|---:|---:|---:|---|\n")
  for (i in seq_len(NROW(runs))) {
    x <- runs[i, ]
    ratio <- function(m, lo, hi, ref) if (x$arm == ref) "ref" else trio(m, lo, hi)
    cat(sprintf("| %s | %s (%d) | %s (%d) | %d | `%s` | %s | %s | %s | %.1f %% | %s | %s | %s | %s | %s |\n",
                x$run_id, x$session, x$parent_rss_mb, x$regime, x$parameters, x$B, x$arm,
                trio(x$wall_s, x$wall_min, x$wall_max),
                ratio(x$ratio_pre, x$ratio_pre_min, x$ratio_pre_max, "mc_pre"),
                ratio(x$ratio_nopre, x$ratio_nopre_min, x$ratio_nopre_max, "mc_nopre"),
                x$overhead_pct, span(x$children_min, x$children_max),
                if (is.na(x$peak_pss_mb)) "–" else sprintf("%.0f", x$peak_pss_mb),
                if (is.na(x$above_session_mb)) "–" else sprintf("%.0f", x$above_session_mb),
                if (is.na(x$mean_pss_mb)) "–" else sprintf("%.0f", x$mean_pss_mb),
                if (x$same_estimates) "yes" else "NO"))
  }
  cat("\n| run | session (RSS MB) | task (ms) | tasks | variant | children | overhead ms per task |",
      "% of the task |\n")
  cat("|---|---|---:|---:|---|---:|---|---|\n")
  for (i in seq_len(NROW(costs))) {
    x <- costs[i, ]
    cat(sprintf("| %s | %s (%d) | %.0f | %d | %s | %s | %s | %s |\n", x$run_id, x$session,
                x$parent_rss_mb,
                x$task_ms, x$tasks, x$variant, span(x$children_min, x$children_max),
                trio(x$overhead_ms, x$overhead_ms_min, x$overhead_ms_max, 1),
                trio(x$overhead_pct, x$overhead_pct_min, x$overhead_pct_max, 1)))
  }
  invisible(runs)
}

args <- commandArgs(trailingOnly = TRUE)
if (!length(args)) stop("usage: large_session.R SESSION_GB REGIMES WORKERS FITS REPEATS | report")
if (args[1] == "report") {
  report_main(if (length(args) >= 2) args[2] else file.path(bench_dir, "results"),
              vignette_dir = file.path(dirname(bench_dir), "vignettes", "fork-per-batch"))
} else {
  run_main(args)
}
