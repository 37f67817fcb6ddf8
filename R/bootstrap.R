#' Bootstrap a wisp fit
#'
#' Refits the model to `bootstraps.num` resamples of the data. In each
#' replicate, the tokens of every cell (random level x context x gene x
#' treatment x bin) are redrawn with replacement from that cell's own tokens;
#' the population ("none") rows, the dispersion and the starting values are
#' recomputed with the fitted structure (degrees and change points) kept,
#' and the model is fitted again. A replicate's result depends only on
#' `seed` and its number, so every backend, worker count, `tasks.per.child`
#' and schedule gives bitwise-identical estimates.
#'
#' Backends:
#' * `"fork"` (default): the package's Rust engine forks short-lived worker
#'   processes (at most `max.fork` at once), each running `tasks.per.child`
#'   replicates. Failures (a crash, `timeout`, `child.memory.limit`) are
#'   recorded per replicate; Ctrl-C stops cleanly.
#' * `"mclapply"`: [parallel::mclapply()] with `mc.preschedule`.
#' * `"serial"`: one replicate after another in this R process.
#' * `"future"`: [future.apply::future_lapply()] on whatever [future::plan()]
#'   you set (multisession, cluster, batchtools, ...). The model travels to
#'   the workers as bytes; the workers need wispack installed.
#'
#' @param fit A `"wisp"` object from [wisp()] (it may have been saved with
#'   [saveRDS()] and read back).
#' @param bootstraps.num Number of replicates.
#' @param max.fork Worker processes (fork and mclapply backends).
#' @param backend One of `"fork"`, `"mclapply"`, `"serial"`, `"future"`.
#' @param tasks.per.child Replicates a forked worker runs before it exits
#'   (fork backend).
#' @param schedule `"rolling"` (a new worker as soon as one exits) or
#'   `"batch"` (wait for a whole batch of workers) (fork backend).
#' @param mc.preschedule Passed to [parallel::mclapply()].
#' @param seed Seed of the bootstrap; `NULL` draws one from R's random number
#'   generator (so [set.seed()] makes runs reproducible). It is recorded in
#'   the result.
#' @param timeout Seconds one replicate may run before its worker is killed
#'   (fork backend).
#' @param child.memory.limit Megabytes of memory a forked worker may add
#'   beyond its size at fork; a replicate that needs more fails with reason
#'   "memory limit" (fork backend).
#' @param trim.memory Return freed heap memory to the system after each
#'   replicate (glibc `malloc_trim`), for workers that run several.
#' @param checkpoint Reserved for resumable runs; must be `NULL`.
#' @param progress Report progress through the progressr package (when
#'   installed) as replicates finish.
#' @return An object of class `"wisp_bootstrap"`: `t0` (the full-data
#'   estimates), `t` (replicates x parameters, `NA` rows for failed
#'   replicates, parameter names as column names), `R` (number of
#'   replicates), `diagnostics` (one row per replicate: `ok, reason,
#'   pen.neg.value, neg.loglik, converged, code, num.evals, seconds, pid,
#'   peak_rss_mb, pss_mb, private_dirty_mb`; memory of the process that ran
#'   the replicate), `seed`, `backend` and `call`.
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 1, n.bins = 40, seed = 3)
#' fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
#' boot <- bs_batch(fit, 4, max.fork = 2, seed = 1)
#' boot$diagnostics[, c("ok", "converged", "num.evals")]
bs_batch <- function(fit, bootstraps.num, max.fork = 1L,
                     backend = c("fork", "mclapply", "serial", "future"),
                     tasks.per.child = 1L, schedule = c("rolling", "batch"),
                     mc.preschedule = TRUE, seed = NULL, timeout = Inf,
                     child.memory.limit = NULL, trim.memory = FALSE,
                     checkpoint = NULL, progress = interactive()) {
  call <- match.call()
  check_wisp_fit(fit)
  check_whole_number(bootstraps.num, "bootstraps.num", lower = 1, upper = 1e7)
  check_whole_number(max.fork, "max.fork", lower = 1, upper = 4096)
  check_worker_limit(max.fork, "max.fork")
  backend <- match_choice(backend, "backend", c("fork", "mclapply", "serial", "future"))
  check_whole_number(tasks.per.child, "tasks.per.child", lower = 1)
  schedule <- match_choice(schedule, "schedule", c("rolling", "batch"))
  check_flag(mc.preschedule, "mc.preschedule")
  check_timeout(timeout)
  if (!is.null(child.memory.limit)) {
    check_number(child.memory.limit, "child.memory.limit", lower = 1, upper = 1e9)
  }
  check_flag(trim.memory, "trim.memory")
  check_flag(progress, "progress")
  if (!is.null(checkpoint)) {
    stop_input("`checkpoint` is reserved for resumable bootstraps, which are not implemented ",
               "yet; leave it NULL.")
  }
  if (backend != "fork" && (is.finite(timeout) || !is.null(child.memory.limit))) {
    stop_input("`timeout` and `child.memory.limit` need backend = \"fork\".")
  }
  if (backend == "future" && !requireNamespace("future.apply", quietly = TRUE)) {
    stop_input("backend = \"future\" needs the future.apply package.")
  }
  if (is.null(seed)) {
    seed <- sample.int(.Machine$integer.max, 1L)
  } else {
    check_whole_number(seed, "seed", lower = -.Machine$integer.max)
  }
  replicates <- seq_len(bootstraps.num)
  notify <- progress_notifier(progress, bootstraps.num)

  rows <- switch(backend,
    fork = fork_replicates(fit$plan, seed, replicates, max.fork, tasks.per.child, schedule,
                           timeout, child.memory.limit, trim.memory, notify),
    mclapply = collect_replicates(parallel::mclapply(
      replicates, run_replicate_safely, plan = fit$plan, seed = seed, trim.memory = trim.memory,
      mc.cores = max.fork, mc.preschedule = mc.preschedule
    ), notify),
    serial = collect_replicates(lapply(replicates, function(i) {
      row <- run_replicate_safely(i, fit$plan, seed, trim.memory)
      notify()
      row
    }), NULL),
    future = collect_replicates(future.apply::future_lapply(
      replicates, run_replicate_safely, plan = fit$plan, seed = seed, trim.memory = trim.memory,
      future.seed = NULL, future.packages = "wispack"
    ), notify)
  )
  t <- rows$estimates
  colnames(t) <- names(fit$fitted.parameters)
  structure(list(t0 = fit$fitted.parameters, t = t, R = bootstraps.num,
                 diagnostics = rows$diagnostics, seed = seed, backend = backend,
                 max.fork = max.fork, call = call),
            class = "wisp_bootstrap")
}

#' Run one bootstrap replicate in this process
#'
#' The per-replicate function behind every backend of [bs_batch()]; the
#' benchmarks call it through `parallel::mclapply()` to compare strategies.
#' @param replicate Replicate number (from 1).
#' @param plan The fit's serialised bootstrap plan (`fit$plan`).
#' @param seed The bootstrap seed.
#' @param trim.memory Call `malloc_trim(0)` after the fit.
#' @return A list: `ok`, `reason`, `fit` (parameters, penalized_nll, nll,
#'   code, converged, evaluations, seconds) and `process` (seconds, pid,
#'   peak_rss_mb, pss_mb, private_dirty_mb of this process).
#' @keywords internal
bootstrap_replicate <- function(replicate, plan, seed, trim.memory = FALSE) {
  bootstrap_replicate_rust(plan, as.double(seed), as.integer(replicate), isTRUE(trim.memory))
}

run_replicate_safely <- function(replicate, plan, seed, trim.memory = FALSE) {
  tryCatch(bootstrap_replicate(replicate, plan, seed, trim.memory),
           error = function(e) list(ok = FALSE, reason = paste("error:", conditionMessage(e))))
}

diagnostic_columns <- c("ok", "reason", "pen.neg.value", "neg.loglik", "converged", "code",
                        "num.evals", "seconds", "pid", "peak_rss_mb", "pss_mb", "private_dirty_mb")

# Replicate rows from the in-process backends; an element that is not a
# replicate result (e.g. a worker that died under mclapply) is a failure.
collect_replicates <- function(results, notify) {
  n <- length(results)
  estimates <- NULL
  diagnostics <- data.frame(ok = logical(n), reason = NA_character_, pen.neg.value = NA_real_,
                            neg.loglik = NA_real_, converged = NA, code = NA_character_,
                            num.evals = NA_integer_, seconds = NA_real_, pid = NA_integer_,
                            peak_rss_mb = NA_real_, pss_mb = NA_real_, private_dirty_mb = NA_real_,
                            stringsAsFactors = FALSE)
  for (i in seq_len(n)) {
    r <- results[[i]]
    if (!is.list(r) || is.null(r$ok)) {
      diagnostics$reason[i] <- if (inherits(r, "try-error")) {
        paste("error:", trimws(as.character(r)))
      } else {
        "no result"
      }
      next
    }
    diagnostics$ok[i] <- isTRUE(r$ok)
    if (!is.null(r$process)) {
      for (column in c("seconds", "pid", "peak_rss_mb", "pss_mb", "private_dirty_mb")) {
        value <- r$process[[column]]
        if (!is.null(value)) diagnostics[[column]][i] <- value
      }
    }
    if (isTRUE(r$ok)) {
      f <- r$fit
      if (is.null(estimates)) estimates <- matrix(NA_real_, n, length(f$parameters))
      estimates[i, ] <- f$parameters
      diagnostics$pen.neg.value[i] <- f$penalized_nll
      diagnostics$neg.loglik[i] <- f$nll
      diagnostics$converged[i] <- f$converged
      diagnostics$code[i] <- f$code
      diagnostics$num.evals[i] <- f$evaluations
    } else {
      diagnostics$reason[i] <- if (is.null(r$reason)) "no result" else r$reason
    }
  }
  if (!is.null(notify)) for (i in seq_len(n)) notify()
  list(estimates = estimates, diagnostics = diagnostics)
}

fork_replicates <- function(plan, seed, replicates, workers, tasks_per_child, schedule,
                            timeout, memory_limit, trim_memory, notify) {
  out <- run_engine(bootstrap_fork_rust(
    plan, as.double(seed), as.integer(replicates), as.integer(workers),
    as.integer(tasks_per_child), schedule, as.double(timeout),
    if (is.null(memory_limit)) NA_real_ else as.double(memory_limit),
    trim_memory, function(replicate, ok) notify(), injected_faults()
  ))
  records <- out$records
  fits <- out$fits
  diagnostics <- data.frame(
    ok = records$ok, reason = records$reason, pen.neg.value = fits$pen.neg.value,
    neg.loglik = fits$neg.loglik, converged = fits$converged, code = fits$code,
    num.evals = fits$num.evals, seconds = records$seconds, pid = records$pid,
    peak_rss_mb = records$peak_rss_mb, pss_mb = records$pss_mb,
    private_dirty_mb = records$private_dirty_mb, stringsAsFactors = FALSE
  )
  estimates <- matrix(out$estimates, nrow = length(replicates), ncol = out$parameter_count,
                      byrow = TRUE)
  list(estimates = estimates, diagnostics = diagnostics)
}

# Test hook: options(wispack.inject_faults = list(kill = 2, hang = 5)) makes
# those replicates misbehave in their forked child (kill, segfault, panic,
# hang, allocate). Never set outside tests.
injected_faults <- function() {
  faults <- getOption("wispack.inject_faults", list())
  lapply(faults, as.integer)
}

progress_notifier <- function(progress, steps) {
  if (progress && requireNamespace("progressr", quietly = TRUE)) {
    step <- progressr::progressor(steps = steps)
    function() step()
  } else {
    function() invisible()
  }
}

match_choice <- function(value, name, choices, call = sys.call(-1)) {
  if (identical(value, choices)) return(choices[1])
  if (!is.character(value) || length(value) != 1L || !value %in% choices) {
    stop_input("`", name, "` must be one of ", paste0("\"", choices, "\"", collapse = ", "),
               ", not ", describe_value(value), ".", call = call)
  }
  value
}

# A "wisp" object whose model can still be bootstrapped.
check_wisp_fit <- function(fit, call = sys.call(-1)) {
  if (!inherits(fit, "wisp")) {
    stop_input("`fit` must be a \"wisp\" object from wisp(), not ", class(fit)[1], ".", call = call)
  }
  if (!is.raw(fit$plan) || !is.raw(fit$model) || !is.numeric(fit$fitted.parameters)) {
    stop_input("`fit` is missing its serialised model; was it modified? Refit with wisp().",
               call = call)
  }
  invisible(fit)
}
