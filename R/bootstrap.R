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
#' * `"future"`: on whatever [future::plan()] you set (multisession,
#'   cluster, future.batchtools on Slurm, ...), one future (one job under
#'   future.batchtools) per chunk of `chunk.size` replicates. The model
#'   travels to each chunk once, as bytes; the workers need wispack
#'   installed. See "Running on a cluster" below.
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
#' @param checkpoint `NULL`, or the path of a checkpoint file that makes the
#'   run resumable. Every backend appends each replicate's outcome to it as
#'   soon as it is known, in a checksummed frame that is flushed to disk
#'   (`fsync`) before the run goes on. Rerunning `bs_batch()` with the same
#'   fit and path (and the same `seed`, or `seed = NULL` to take the one
#'   recorded there) runs only the replicates that have not succeeded yet;
#'   the result is identical to that of an uninterrupted run (apart from the
#'   timing and memory columns of `diagnostics`). A frame that fails its
#'   checksum (e.g. the tail of a run killed while writing) is dropped with a
#'   warning of class `wisp_checkpoint_warning` and its replicate run again.
#'   A larger `bootstraps.num` extends a finished run. An existing file that
#'   is not a checkpoint, or a checkpoint of another fit or seed, is an error
#'   and is left unchanged. Use one path per run, and one run at a time.
#' @param progress Report progress through the progressr package (when
#'   installed) as replicates finish.
#' @param chunk.size Replicates per future (backend `"future"`). `NULL`
#'   (default) makes one chunk per worker: `ceiling(n /
#'   future::nbrOfWorkers())` replicates each, for the `n` replicates still
#'   to run. Smaller chunks give finer progress and checkpoints and lose less
#'   when a job fails, at the cost of more jobs.
#' @param resources `NULL`, or a named list of resources for each job of this
#'   run on a future.batchtools plan (backend `"future"`), merged into the
#'   plan's own `resources`. With the template wispack ships, each element
#'   becomes an sbatch option: `list(mem = "2G", time = "01:00:00")`. The
#'   plan is not changed.
#' @section Running on a cluster:
#' With `backend = "future"`, this R session launches the chunks' futures (no
#' more at once than [future::nbrOfWorkers()]), collects each as it
#' finishes, appends its replicates to `checkpoint` and signals progress, so
#' the workers never write the checkpoint and a run that outlives its
#' allocation or this session resumes from what was collected. A chunk whose
#' future fails (its job was killed, exceeded its memory or time, could not
#' be submitted, or its worker died) has its replicates recorded as failed,
#' with reason `"future failed: "` and the future's error message (for a
#' batchtools job, the tail of its log); the other chunks are kept, and a
#' rerun with the same checkpoint runs only the replicates that did not
#' succeed. The package never sets a plan. A Slurm template for
#' future.batchtools is shipped: `system.file("templates", "slurm.tmpl",
#' package = "wispack")`; `vignette("cluster", package = "wispack")` walks
#' through a run.
#' @section Interrupts and failures:
#' A replicate whose worker is killed, crashes, panics, exceeds `timeout` or
#' `child.memory.limit` is recorded as failed (`NA` row of `t`, `ok =
#' FALSE` and the reason in `diagnostics`); the other replicates are kept.
#' Ctrl-C (SIGINT) during a fork-backend run kills and reaps every worker and
#' signals an error of class `wisp_interrupted` whose `result` element is the
#' `"wisp_bootstrap"` of the replicates finished so far (the others failed
#' with reason "interrupted"); with a checkpoint, they are also on disk.
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
                     checkpoint = NULL, progress = interactive(), chunk.size = NULL,
                     resources = NULL) {
  call <- match.call()
  plan_info <- wisp_fit_plan(fit)
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
  if (!is.null(checkpoint)) checkpoint <- check_checkpoint_path(checkpoint)
  if (backend != "fork" && (is.finite(timeout) || !is.null(child.memory.limit))) {
    stop_input("`timeout` and `child.memory.limit` need backend = \"fork\".")
  }
  if (backend == "future" && !requireNamespace("future", quietly = TRUE)) {
    stop_input("backend = \"future\" needs the future package.")
  }
  check_future_arguments(backend, chunk.size, resources)
  if (!is.null(seed)) check_whole_number(seed, "seed", lower = -.Machine$integer.max)
  parameter_count <- length(fit$fitted.parameters)
  done <- NULL
  if (!is.null(checkpoint)) {
    checkpoint <- checkpoint_start(checkpoint, plan_info$key, seed, bootstraps.num,
                                   parameter_count)
    seed <- checkpoint$seed
    done <- checkpoint$done
  }
  if (is.null(seed)) seed <- sample.int(.Machine$integer.max, 1L)
  if (!is.null(checkpoint)) checkpoint$seed <- seed
  replicates <- setdiff(seq_len(bootstraps.num), done$replicates)
  notify <- progress_notifier(progress, length(replicates))

  rows <- if (!length(replicates)) {
    collect_replicates(list(), NULL, parameter_count)
  } else {
    switch(backend,
      fork = fork_replicates(fit$plan, seed, replicates, max.fork, tasks.per.child, schedule,
                             timeout, child.memory.limit, trim.memory, notify, checkpoint),
      mclapply = collect_replicates(parallel::mclapply(
        replicates, run_replicate_safely, plan = fit$plan, seed = seed,
        trim.memory = trim.memory, checkpoint = checkpoint,
        mc.cores = max.fork, mc.preschedule = mc.preschedule
      ), notify, parameter_count, checkpoint, replicates),
      serial = collect_replicates(lapply(replicates, function(i) {
        row <- run_replicate_safely(i, fit$plan, seed, trim.memory, checkpoint)
        notify()
        row
      }), NULL, parameter_count, checkpoint, replicates),
      future = future_replicates(fit$plan, seed, replicates, chunk.size, resources, trim.memory,
                                 notify, checkpoint, parameter_count)
    )
  }
  result <- bootstrap_result(fit, bootstraps.num, replicates, rows, done, seed, backend,
                             max.fork, call)
  if (length(rows$checkpoint_error) && !is.na(rows$checkpoint_error[1])) {
    checkpoint_write_warning(checkpoint$path, rows$checkpoint_error[1])
  }
  if (isTRUE(rows$interrupted)) {
    finished <- sum(result$diagnostics$ok)
    stop(structure(
      class = c("wisp_interrupted", "error", "condition"),
      list(message = paste0(
        "wispack: interrupted; all child processes were killed. The ", finished,
        " finished replicate", if (finished != 1) "s are" else " is",
        " in this condition's `result`",
        if (!is.null(checkpoint)) " and in the checkpoint" else "", "."),
        call = NULL, result = result)
    ))
  }
  result
}

# The "wisp_bootstrap" object: replicates taken from the checkpoint (`done`)
# and the ones just run (`replicates`, with their `rows`), in replicate order.
bootstrap_result <- function(fit, bootstraps.num, replicates, rows, done, seed, backend,
                             max.fork, call) {
  parameter_count <- length(fit$fitted.parameters)
  t <- matrix(NA_real_, bootstraps.num, parameter_count)
  diagnostics <- empty_diagnostics(bootstraps.num)
  if (length(done$replicates)) {
    t[done$replicates, ] <- done$estimates
    diagnostics[done$replicates, ] <- done$diagnostics
  }
  if (length(replicates)) {
    t[replicates, ] <- rows$estimates
    diagnostics[replicates, ] <- rows$diagnostics
  }
  colnames(t) <- names(fit$fitted.parameters)
  structure(list(t0 = fit$fitted.parameters, t = t, R = bootstraps.num,
                 diagnostics = diagnostics, seed = seed, backend = backend,
                 max.fork = max.fork, call = call),
            class = "wisp_bootstrap")
}

empty_diagnostics <- function(n) {
  data.frame(ok = logical(n), reason = rep(NA_character_, n), pen.neg.value = rep(NA_real_, n),
             neg.loglik = rep(NA_real_, n), converged = rep(NA, n), code = rep(NA_character_, n),
             num.evals = rep(NA_integer_, n), seconds = rep(NA_real_, n),
             pid = rep(NA_integer_, n), peak_rss_mb = rep(NA_real_, n),
             pss_mb = rep(NA_real_, n), private_dirty_mb = rep(NA_real_, n),
             stringsAsFactors = FALSE)
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

# With a `checkpoint` (from checkpoint_start()), the row is appended to it
# here, in whatever process runs the replicate; `checkpointed` says whether
# that worked.
run_replicate_safely <- function(replicate, plan, seed, trim.memory = FALSE, checkpoint = NULL) {
  row <- tryCatch(bootstrap_replicate(replicate, plan, seed, trim.memory),
                  error = function(e) list(ok = FALSE, reason = paste("error:", conditionMessage(e))))
  if (!is.null(checkpoint)) row$checkpointed <- try_checkpoint_append(checkpoint, replicate, row)
  row
}

diagnostic_columns <- c("ok", "reason", "pen.neg.value", "neg.loglik", "converged", "code",
                        "num.evals", "seconds", "pid", "peak_rss_mb", "pss_mb", "private_dirty_mb")

# Replicate rows from the in-process backends; an element that is not a
# replicate result (e.g. a worker that died under mclapply) is a failure.
# With a checkpoint, rows the worker did not append (or, with
# `always_append`, every row) are appended here.
collect_replicates <- function(results, notify, parameter_count, checkpoint = NULL,
                               replicates = NULL, always_append = FALSE) {
  n <- length(results)
  estimates <- matrix(NA_real_, n, parameter_count)
  diagnostics <- empty_diagnostics(n)
  checkpoint_error <- NULL
  for (i in seq_len(n)) {
    r <- results[[i]]
    if (!is.null(checkpoint) && (always_append || !is.list(r) || !isTRUE(r$checkpointed))) {
      written <- tryCatch(checkpoint_append_row(checkpoint, replicates[i], r),
                          error = function(e) conditionMessage(e))
      if (!isTRUE(written) && is.null(checkpoint_error)) checkpoint_error <- written
    }
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
  list(estimates = estimates, diagnostics = diagnostics, checkpoint_error = checkpoint_error)
}

fork_replicates <- function(plan, seed, replicates, workers, tasks_per_child, schedule,
                            timeout, memory_limit, trim_memory, notify, checkpoint = NULL) {
  out <- run_engine(bootstrap_fork_rust(
    plan, as.double(seed), as.integer(replicates), as.integer(workers),
    as.integer(tasks_per_child), schedule, as.double(timeout),
    if (is.null(memory_limit)) NA_real_ else as.double(memory_limit),
    trim_memory, function(replicate, ok) notify(), injected_faults(),
    if (is.null(checkpoint)) "" else checkpoint$path
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
  if (isTRUE(out$interrupted)) {
    unfinished <- !diagnostics$ok & diagnostics$pid %in% 0L
    diagnostics$reason[unfinished] <- "interrupted"
    diagnostics$pid[unfinished] <- NA_integer_
  }
  estimates <- matrix(out$estimates, nrow = length(replicates), ncol = out$parameter_count,
                      byrow = TRUE)
  list(estimates = estimates, diagnostics = diagnostics, interrupted = isTRUE(out$interrupted),
       checkpoint_error = out$checkpoint_error)
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
    # Finished when bs_batch() returns, not when this helper does.
    step <- progressr::progressor(steps = steps, envir = parent.frame())
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
  wisp_fit_plan(fit, call = call)
  invisible(fit)
}

# Checks that `fit` is an intact "wisp" object: its serialised plan decodes,
# holds the same model as `fit$model`, and has the parameters of
# `fit$fitted.parameters`. Returns the plan's parameter names and checkpoint
# key.
wisp_fit_plan <- function(fit, call = sys.call(-1)) {
  if (!inherits(fit, "wisp")) {
    stop_input("`fit` must be a \"wisp\" object from wisp(), not ", class(fit)[1], ".", call = call)
  }
  if (!is.list(fit) || !is.raw(fit$plan) || !is.raw(fit$model) ||
      !is.numeric(fit$fitted.parameters)) {
    stop_input("`fit` is missing its serialised model; was it modified? Refit with wisp().",
               call = call)
  }
  info <- tryCatch(bootstrap_plan_check_rust(fit$plan, fit$model), error = function(e) {
    stop_input("`fit` is corrupted: its serialised model cannot be read (",
               conditionMessage(e), "). Refit with wisp().", call = call)
  })
  if (!isTRUE(info$model_matches)) {
    stop_input("`fit` is corrupted: its `plan` and `model` do not hold the same model. ",
               "Refit with wisp().", call = call)
  }
  if (!identical(names(fit$fitted.parameters), info$parameter_names) ||
      anyNA(fit$fitted.parameters)) {
    stop_input("`fit` is corrupted: `fitted.parameters` do not match its model's ",
               length(info$parameter_names), " parameters. Refit with wisp().", call = call)
  }
  info
}
