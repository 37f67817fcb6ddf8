#' Bootstrap a wisp fit
#'
#' Refits the model to `bootstraps.num` resamples of the data, with the
#' fitted structure (degrees and change points) kept. How a replicate
#' redraws the data is `resample` (the model vignette, "The bootstrap",
#' defines the schemes):
#' * `"parametric"` (the default for the count likelihood): random effects
#'   drawn from their fitted normal distributions and counts from the fitted
#'   negative binomial, then refitted. It relies on the model being right,
#'   and needs no animals to redraw. On the simulated designs of
#'   `vignette("inference")` (3 to 8 animals per genotype) its intervals
#'   cover the truth about 95 % of the time.
#' * `"animals"`: the animals (random levels) with replacement within their
#'   groups, the animals that share their between-animal factor levels (e.g.
#'   genotype), each drawn animal's data kept whole. It assumes nothing about
#'   how the animals vary, but a resample of a few animals holds fewer
#'   distinct animals than the data: with 3 to 8 animals per group its
#'   intervals are too narrow and true nulls come out significant 9 to 20 %
#'   of the time (`vignette("inference")`). With a single animal, or every
#'   animal alone in its group, it cannot resample anything and is an error.
#' * `"cells"` (the original's scheme, and the default for `likelihood =
#'   "original"`): the tokens of every cell (random level x context x gene x
#'   treatment x bin) with replacement from that cell's own tokens, the
#'   animals fixed: the spread reflects cell-to-cell noise only, so effects
#'   of factors that vary between animals are tested against too little
#'   variation.
#'
#' Under the count likelihood each replicate starts from the full-data
#' estimate; under the original, the population rows, the dispersion and
#' the starting values are recomputed first. Under `"animals"` a replicate's
#' random effects belong to whichever animal was drawn into each slot, so
#' they are `NaN` in `t`. For most uses the statistics that [wisp()]
#' reports for the count likelihood (Wald, with profile likelihood for
#' transition points) need no bootstrap at all. A replicate's
#' result depends only on `seed`, its number and the scheme, so every
#' backend, worker count, `tasks.per.child` and schedule
#' gives bitwise-identical estimates.
#'
#' Backends (which exist, and the default, depend on the platform: see
#' Platforms below):
#' * `"fork"` (default on Linux and macOS): the package's Rust engine forks
#'   worker processes (at most `max.fork` at once): by default one per slot
#'   for the whole run, each sent one replicate at a time, or a fresh one
#'   every `tasks.per.child` replicates (see "Replicates per worker" below).
#'   Failures (a crash, `timeout`, `child.memory.limit`) are recorded per
#'   replicate; Ctrl-C stops cleanly.
#' * `"mclapply"`: [parallel::mclapply()] with `mc.preschedule` (Linux and
#'   macOS).
#' * `"serial"`: one replicate after another in this R process.
#' * `"future"`: on whatever [future::plan()] you set (multisession,
#'   cluster, future.batchtools on Slurm, ...), one future (one job under
#'   future.batchtools) per chunk of `chunk.size` replicates. The model
#'   travels to each chunk once, as bytes; the workers need wispack
#'   installed. See "Running on a cluster" below. The default
#'   on Windows.
#'
#' @param fit A `"wisp"` object from [wisp()] (it may have been saved with
#'   [saveRDS()] and read back).
#' @param bootstraps.num Number of replicates.
#' @param max.fork Worker processes (fork and mclapply backends); more than
#'   the machine's cores draws a warning. The future backend runs on the
#'   workers of the plan, and records their number.
#' @param backend One of `"fork"`, `"mclapply"`, `"serial"`, `"future"`. By
#'   default `"fork"` where the platform can fork (Linux, macOS); on Windows
#'   `"future"`, or `"serial"` when the future.apply package is not
#'   installed.
#' @param tasks.per.child Replicates a forked worker runs before it exits
#'   (fork backend): `NULL` (default), workers that live for the whole run
#'   and are sent one replicate at a time, the next as soon as they finish
#'   one; or a whole number, e.g. 1 for a fresh process per replicate (see
#'   "Replicates per worker" below).
#' @param schedule With a number for `tasks.per.child` (fork backend):
#'   `"rolling"` (a new worker as soon as one exits) or `"batch"` (wait for a
#'   whole batch of workers). Ignored with `tasks.per.child = NULL`, where
#'   workers are forked once per run.
#' @param mc.preschedule Passed to [parallel::mclapply()].
#' @param seed Seed of the bootstrap; `NULL` draws one from R's random number
#'   generator (so [set.seed()] makes runs reproducible). It is recorded in
#'   the result.
#' @param timeout Seconds one replicate may run before its worker is killed
#'   (fork backend).
#' @param child.memory.limit Megabytes of memory a forked worker may add
#'   beyond its size at fork; a replicate that needs more fails with reason
#'   "memory limit" (fork backend, Linux only). The limit holds for the
#'   worker's life, so with the default workers, which run many replicates,
#'   heap an earlier replicate freed but kept counts against it: add
#'   `trim.memory = TRUE`, or `tasks.per.child = 1` for a fresh worker per
#'   replicate, to hold each replicate to the limit alone.
#' @param trim.memory Return freed heap memory to the system after each
#'   replicate (glibc `malloc_trim`), for workers that run several.
#' @param memory.per.replicate Read `pss_mb` and `private_dirty_mb` after
#'   every replicate (`TRUE`), once per worker, after its last replicate
#'   (`FALSE`, default), or never (`NA`: both columns `NA`; `peak_rss_mb`,
#'   which costs nothing, is still read). Reading them makes the kernel walk
#'   the worker's page tables, which takes about 9 ms in a 1 GB R session
#'   and 34 ms in a 4 GB one on a quiet machine, and 0.2-0.3 s at 4 GB on a
#'   loaded one: a cost paid per replicate with `TRUE`, per worker and run
#'   with `FALSE`, and not at all with `NA` (for short runs from a large
#'   session, where it is most of what a run costs beyond its replicates).
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
#'   installed) as replicates finish: see "Progress" below.
#' @param resample What a replicate redraws: `"parametric"` (the default for
#'   the count likelihood, and only there), random effects from their fitted
#'   distribution and counts from the fitted likelihood; `"animals"`, the
#'   random levels with replacement within the groups of animals that share
#'   their between-animal factor levels, each drawn animal's data kept whole;
#'   `"cells"` (the default for `likelihood = "original"`, the original's
#'   scheme), the tokens of every cell with replacement from that cell's own
#'   tokens, animals fixed (cell-to-cell noise only). The
#'   scheme is part of the checkpoint key.
#' @param replicates Replicate numbers to run instead of `1:bootstraps.num`,
#'   e.g. `201:400` to extend a run of 200 with the same `seed`; runs with
#'   different numbers attach to one fit ([wisp_statistics()]'s `boot`).
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
#' @section Replicates per worker:
#' A forked worker costs more than its replicates: the fork itself (the
#' kernel copies the R session's page tables: about 3 ms for a lean session,
#' 20 ms for 1 GB, 50 ms for 4 GB, and more on a loaded machine), its exit,
#' and its memory report. With `tasks.per.child = NULL` (the default) the
#' fork backend pays it once per slot: it forks `max.fork` workers at the
#' start of the run and sends each one replicate number at a time, the next
#' as soon as the worker has reported the last one, until none is left; then
#' the workers exit. Like `mclapply(mc.preschedule = TRUE)`, it forks once
#' per slot; unlike it, it balances the load as it goes (a worker that
#' drew slow replicates is given fewer), and each replicate is reported
#' (and checkpointed) as it ends. A worker that crashes, is killed for
#' `timeout` or exceeds `child.memory.limit` fails the one replicate it was
#' running, and a new worker takes its slot for the replicates still
#' waiting; a replicate that hangs holds back no other. `schedule` does not
#' apply: there is no batch of workers to wait for.
#'
#' With a number, `tasks.per.child` wins: each worker is given that many
#' replicates when it is forked and a fresh worker follows (1: a fresh
#' process per replicate, which starts every replicate from the session's
#' memory as it was, at the cost of a fork each). A worker that fails
#' fails the replicate it was running only; the replicates it had not
#' started yet go to a new worker, but a replicate that hangs holds back
#' those queued behind it in its worker until `timeout` kills it.
#'
#' Whatever the grouping, a replicate's estimates are the same (they depend
#' on `seed`, its number and the scheme only). With several replicates per
#' worker, `child.memory.limit` bounds the worker, which runs its replicates
#' one after another (a replicate's memory is freed when it ends), and the
#' memory columns of `diagnostics` describe the worker (see Value).
#' `vignette("fork-per-batch")` ("Forked bootstrap workers") shows the
#' figures behind the default.
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
#' @section Progress:
#' With `progress = TRUE` (the default in interactive sessions) and the
#' progressr package installed, `bs_batch()` signals one progress step per
#' replicate through progressr. Nothing is shown until you choose how:
#' `progressr::handlers(global = TRUE)` once per session shows every later
#' run's progress (with `progressr::handlers("txtprogressbar")`, `"cli"`,
#' ... to choose the style), or wrap a single call in
#' `progressr::with_progress()`. In a non-interactive session (e.g.
#' `Rscript`), also set `options(progressr.enable = TRUE)`. When a step
#' arrives depends on the backend:
#' * `"fork"`, `"serial"`: as each replicate ends (after it was appended to
#'   the checkpoint).
#' * `"future"`: as each chunk is collected, one step per replicate of the
#'   chunk (smaller `chunk.size`, finer progress).
#' * `"mclapply"`: all at the end: [parallel::mclapply()] returns only when
#'   every replicate has ended, so there is nothing to report before.
#'
#' Progress conditions reach handlers set with [withCallingHandlers()]
#' around the call on every backend. An error in such a handler (or Ctrl-C
#' while one runs) stops the run: forked workers are killed first.
#' @section Platforms:
#' * Linux: every backend, `"fork"` by default. The memory columns of
#'   `diagnostics` are read from `/proc`: `peak_rss_mb` (the worker's peak
#'   resident set size, `VmHWM`), `pss_mb` (its proportional set size:
#'   pages shared with other processes divided among them) and
#'   `private_dirty_mb` (pages it wrote since it was forked), in MiB.
#' * macOS: every backend, `"fork"` by default; `child.memory.limit` is not
#'   available (macOS does not enforce address-space limits), and the memory
#'   columns are `NA` (there is no `/proc`, and nothing like PSS).
#' * Windows: there is no `fork()`, so only `"serial"` and `"future"`:
#'   `"future"` by default when future.apply is installed, replicates then
#'   running on the workers of your [future::plan()] (e.g.
#'   `future::plan(future::multisession, workers = 4)`; with the default
#'   sequential plan and `max.fork > 1` a message says so), and `"serial"`
#'   otherwise. Asking for `"fork"` or `"mclapply"` is an error of class
#'   `wisp_input_error` that names these two. `timeout` and
#'   `child.memory.limit` need the fork backend; the memory columns are
#'   `NA`. [wisp()]'s grid search runs on `max.fork` threads.
#'
#' @section Interrupts and failures:
#' A replicate whose worker is killed, crashes, panics, exceeds `timeout` or
#' `child.memory.limit` is recorded as failed (`NA` row of `t`, `ok =
#' FALSE` and the reason in `diagnostics`); the other replicates are kept.
#' Ctrl-C (SIGINT) during a fork-backend run kills and reaps every worker and
#' signals an error of class `wisp_interrupted` whose `result` element is the
#' `"wisp_bootstrap"` of the replicates finished so far (the others failed
#' with reason "interrupted"); with a checkpoint, they are also on disk.
#' A corrupted `fit` is an error of class `wisp_corrupt_error`, a failure of
#' the machine (`fork()`, a pipe, the checkpoint file) one of class
#' `wisp_system_error`: see [wisp_conditions].
#' @return An object of class `"wisp_bootstrap"`: `t0` (the full-data
#'   estimates), `t` (replicates x parameters, `NA` rows for failed
#'   replicates, parameter names as column names), `R` (number of
#'   replicates), `diagnostics` (one row per replicate: `ok`, `reason` (why
#'   it failed), `pen.neg.value` (the minimised objective: under the
#'   original, nll + boundary penalty; under the count likelihood, J with its
#'   random-effect and prior terms), `neg.loglik`, `converged`, `code` (how
#'   the fit ended: `"converged"`, `"evaluation limit"`, `"iteration
#'   limit"`, `"variance update limit"` or `"failed: "` and the reason, as
#'   in [wisp()]'s `fit.diagnostics`),
#'   `num.evals` (objective evaluations), `iterations` (optimiser
#'   iterations), `max.gradient` (largest absolute gradient of the objective
#'   at the estimate), `on.bound` (estimates on a bound; always 0 under the
#'   original likelihood),
#'   `fit.seconds` (the optimisation), `seconds` (the whole replicate), and
#'   `pid`, `peak_rss_mb`, `pss_mb`, `private_dirty_mb` of the process that
#'   ran it: `peak_rss_mb` is that worker's peak so far, read after every
#'   replicate; `pss_mb` and `private_dirty_mb` are read once per worker,
#'   after its last replicate (none for a worker that was killed), and are
#'   `NA` for its other replicates unless
#'   `memory.per.replicate = TRUE` (a worker is a forked child of the fork
#'   backend, an `mclapply` child, a chunk of the future backend, or this
#'   session for the serial backend); the memory columns are `NA` except on
#'   Linux, see Platforms),
#'   `seed`, `backend`, `max.fork` (the workers; for the future
#'   backend, those of the plan, [future::nbrOfWorkers()]), `call` and
#'   `provenance` (which wispack ran it, as a fit's: see [wisp()]).
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 1, n.bins = 40, seed = 3)
#' fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
#' boot <- bs_batch(fit, 4, max.fork = 2, seed = 1)
#' boot$diagnostics[, c("ok", "converged", "num.evals")]
bs_batch <- function(fit, bootstraps.num, max.fork = 1L,
                     backend = c("fork", "mclapply", "serial", "future"),
                     tasks.per.child = NULL, schedule = c("rolling", "batch"),
                     mc.preschedule = TRUE, seed = NULL, timeout = Inf,
                     child.memory.limit = NULL, trim.memory = FALSE,
                     checkpoint = NULL, progress = interactive(), resample = NULL,
                     replicates = NULL, chunk.size = NULL, resources = NULL,
                     memory.per.replicate = FALSE) {
  call <- match.call()
  resample <- check_resample(resample, fit)
  plan_info <- wisp_fit_plan(fit, resample)
  if (resample == "animals") check_animal_groups(plan_info$animal_groups, resample_schemes(fit))
  if (!is.null(replicates)) {
    if (!is.numeric(replicates) || !length(replicates) || anyNA(replicates) ||
        any(replicates != round(replicates)) || any(replicates < 1 | replicates > 1e9) ||
        anyDuplicated(replicates)) {
      stop_input("`replicates` must be distinct whole numbers from 1 (replicate numbers), not ",
                 describe_value(replicates), ".")
    }
    replicates <- sort(as.integer(replicates))
    if (!missing(bootstraps.num) && !identical(as.numeric(bootstraps.num), as.numeric(length(replicates)))) {
      stop_input("`bootstraps.num` (", format(bootstraps.num), ") and `replicates` (",
                 length(replicates), " numbers) disagree; give one of them.")
    }
    bootstraps.num <- length(replicates)
  } else {
    if (missing(bootstraps.num)) {
      stop_input("`bootstraps.num` is missing: how many replicates? E.g. bs_batch(fit, 1000), ",
                 "or which ones with `replicates`.")
    }
    check_whole_number(bootstraps.num, "bootstraps.num", lower = 1, upper = 1e7)
    replicates <- seq_len(bootstraps.num)
  }
  check_whole_number(max.fork, "max.fork", lower = 1, upper = 4096)
  check_worker_limit(max.fork, "max.fork")
  backend <- bootstrap_backend(backend, max.fork, child.memory.limit)
  if (backend %in% c("fork", "mclapply")) warn_workers_above_cores(max.fork, "max.fork")
  if (!is.null(tasks.per.child)) check_whole_number(tasks.per.child, "tasks.per.child", lower = 1)
  check_flag(memory.per.replicate, "memory.per.replicate", allow_na = TRUE)
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
  wanted <- replicates
  if (!is.null(checkpoint)) {
    checkpoint <- checkpoint_start(checkpoint, plan_info$key, seed, wanted, parameter_count)
    seed <- checkpoint$seed
    done <- checkpoint$done
  }
  if (is.null(seed)) seed <- sample.int(.Machine$integer.max, 1L)
  if (!is.null(checkpoint)) checkpoint$seed <- seed
  replicates <- setdiff(wanted, done$replicates)
  notify <- progress_notifier(progress, length(replicates))

  rows <- if (!length(replicates)) {
    collect_replicates(list(), NULL, parameter_count)
  } else {
    switch(backend,
      fork = fork_replicates(fit$plan, resample, seed, replicates, max.fork, tasks.per.child,
                             schedule, timeout, child.memory.limit, trim.memory, notify,
                             checkpoint, memory.per.replicate),
      mclapply = {
        measure <- reads_memory(memory.per.replicate,
                                mclapply_last_of_worker(length(replicates), max.fork,
                                                        mc.preschedule))
        collect_replicates(parallel::mclapply(seq_along(replicates), function(i) {
          run_replicate_safely(replicates[i], fit$plan, seed, trim.memory, checkpoint, resample,
                               memory = measure[i])
        }, mc.cores = max.fork, mc.preschedule = mc.preschedule),
        notify, parameter_count, checkpoint, replicates)
      },
      serial = collect_replicates(lapply(seq_along(replicates), function(i) {
        row <- run_replicate_safely(replicates[i], fit$plan, seed, trim.memory, checkpoint,
                                    resample,
                                    memory = reads_memory(memory.per.replicate,
                                                          i == length(replicates)))
        notify()
        row
      }), NULL, parameter_count, checkpoint, replicates),
      future = future_replicates(fit$plan, seed, replicates, chunk.size, resources, trim.memory,
                                 notify, checkpoint, parameter_count, resample,
                                 memory.per.replicate)
    )
  }
  result <- bootstrap_result(fit, wanted, replicates, rows, done, seed, backend,
                             if (backend == "future") future_workers() else max.fork,
                             call, resample)
  if (length(rows$checkpoint_error) && !is.na(rows$checkpoint_error[1])) {
    checkpoint_write_warning(checkpoint$path, rows$checkpoint_error[1])
  }
  if (isTRUE(rows$interrupted)) {
    finished <- sum(result$diagnostics$ok)
    stop(wisp_condition("interrupted", paste0(
      "wispack: interrupted; all child processes were killed. The ", finished,
      " finished replicate", if (finished != 1) "s are" else " is",
      " in this condition's `result`",
      if (!is.null(checkpoint)) " and in the checkpoint" else "", "."),
      call = NULL, result = result))
  }
  result
}

# The "wisp_bootstrap" object: replicates taken from the checkpoint (`done`)
# and the ones just run (`replicates`, with their `rows`), in replicate order.
bootstrap_result <- function(fit, wanted, replicates, rows, done, seed, backend, max.fork,
                             call, resample) {
  parameter_count <- length(fit$fitted.parameters)
  t <- matrix(NA_real_, length(wanted), parameter_count)
  diagnostics <- new_diagnostics(n = length(wanted))
  if (length(done$replicates)) {
    at <- match(done$replicates, wanted)
    t[at, ] <- done$estimates
    diagnostics[at, ] <- done$diagnostics
  }
  if (length(replicates)) {
    at <- match(replicates, wanted)
    t[at, ] <- rows$estimates
    diagnostics[at, ] <- rows$diagnostics
  }
  colnames(t) <- names(fit$fitted.parameters)
  structure(list(t0 = fit$fitted.parameters, t = t, R = length(wanted),
                 replicates = wanted, diagnostics = diagnostics, seed = seed,
                 resample = resample, backend = backend, max.fork = max.fork, call = call,
                 provenance = wisp_provenance()),
            class = "wisp_bootstrap")
}

# The "animals" scheme redraws animals within their groups (animals sharing
# their between-animal levels); a group of one animal always redraws itself.
# When every group has one animal the replicates would all be the data: an
# error that names the fit's other `schemes`. Some groups of one animal draw
# a warning.
check_animal_groups <- function(groups, schemes, call = sys.call(-1)) {
  sizes <- table(groups)
  if (all(sizes == 1L)) {
    why <- if (length(sizes) == 1L) "there is a single random level (animal)" else
      "every animal is alone in its group of between-animal factor levels"
    stop_input("resample = \"animals\" redraws animals within their groups, but ", why,
               ", so every replicate would be the data itself; use resample = ",
               paste0("\"", setdiff(schemes, "animals"), "\"", collapse = " or "), ".",
               call = call)
  }
  if (any(sizes == 1L)) {
    warning(sprintf(paste0(
      "%d of %d groups of animals (animals sharing their between-animal factor levels) ",
      "have a single animal, which every replicate redraws unchanged: effects that rest on ",
      "those groups get too little between-animal variation in their intervals."),
      sum(sizes == 1L), length(sizes)), call. = FALSE)
  }
  invisible(NULL)
}

# Two bootstraps of one fit, seed and scheme, with different replicate
# numbers, as one (in replicate order).
combine_bootstraps <- function(a, b) {
  order <- order(c(a$replicates, b$replicates))
  t <- rbind(a$t, b$t)[order, , drop = FALSE]
  diagnostics <- rbind(a$diagnostics, b$diagnostics)[order, , drop = FALSE]
  rownames(diagnostics) <- NULL
  a$t <- t
  a$diagnostics <- diagnostics
  a$replicates <- c(a$replicates, b$replicates)[order]
  a$R <- length(a$replicates)
  a
}

# The resampling scheme: the fit's default by default (resample_schemes():
# "parametric" for the count likelihood, "cells" for the original's; "cells"
# for what is not a fit, which wisp_fit_plan() then refuses).
check_resample <- function(resample, fit, call = sys.call(-1)) {
  schemes <- if (inherits(fit, "wisp")) resample_schemes(fit) else c("cells", "animals")
  if (is.null(resample)) return(schemes[1])
  resample <- match_choice(resample, "resample", c("cells", "animals", "parametric"), call = call)
  if (resample == "cells" && identical(fit$exposure$rule, "given")) {
    stop_input("resample = \"cells\" redraws each bin's cells, but this fit has only their ",
               "sums (a binned table); use resample = \"parametric\" or \"animals\", or fit ",
               "the tokens of wisp_bin(..., format = \"tokens\").", call = call)
  }
  if (!resample %in% schemes) {
    stop_input("resample = \"parametric\" draws data from the fitted count likelihood, so it ",
               "needs likelihood = \"nb\"; use \"cells\" or \"animals\" here.", call = call)
  }
  resample
}

#' Run one bootstrap replicate in this process
#'
#' The per-replicate function behind every backend of [bs_batch()]; the
#' benchmarks call it through `parallel::mclapply()` to compare strategies.
#' @param replicate Replicate number (from 1).
#' @param plan The fit's saved plan (`fit$plan`).
#' @param seed The bootstrap seed.
#' @param trim.memory Call `malloc_trim(0)` after the fit.
#' @param checkpoint `NULL`, or a checkpoint from `checkpoint_start()` that
#'   the replicate is appended to.
#' @param resample The resampling scheme (see [bs_batch()]).
#' @param memory Read PSS and private dirty memory too (a walk of this
#'   process's page tables), not only the peak RSS.
#' @return A list: `outcome`, the replicate's record as bytes (the columns of
#'   `diagnostics` and the estimates; [replicate_table()] turns a list of
#'   them into a table), and `checkpointed`, whether it was appended to the
#'   checkpoint.
#' @keywords internal
bootstrap_replicate <- function(replicate, plan, seed, trim.memory = FALSE, checkpoint = NULL,
                                resample = "cells", memory = TRUE) {
  bootstrap_replicate_rust(plan, resample, as.double(seed), as.integer(replicate),
                           isTRUE(trim.memory), isTRUE(memory),
                           if (is.null(checkpoint)) "" else checkpoint$path,
                           if (is.null(checkpoint)) "" else checkpoint$key)
}

#' Diagnostics and estimates of replicate outcomes
#'
#' @param outcomes A list of `outcome`s from [bootstrap_replicate()].
#' @param parameter_count Number of parameters of the fit.
#' @return A list: `diagnostics` (a data.frame with the columns of
#'   [bs_batch()]'s diagnostics, one row per outcome) and `estimates` (an
#'   outcomes x parameters matrix, `NA` rows for failed replicates).
#' @keywords internal
replicate_table <- function(outcomes, parameter_count) {
  table <- outcome_table_rust(outcomes, as.integer(parameter_count))
  list(diagnostics = new_diagnostics(table$diagnostics),
       estimates = matrix(table$estimates, nrow = length(outcomes), ncol = parameter_count,
                          byrow = TRUE))
}

# A replicate that failed in R (an error, or a worker that died) as an outcome.
failed_outcome <- function(replicate, reason) {
  outcome_failure_rust(as.integer(replicate), reason)
}

# bootstrap_replicate() whose errors become failed replicates.
run_replicate_safely <- function(replicate, plan, seed, trim.memory = FALSE, checkpoint = NULL,
                                 resample = "cells", memory = TRUE) {
  tryCatch(bootstrap_replicate(replicate, plan, seed, trim.memory, checkpoint, resample, memory),
           error = function(e) {
             list(outcome = failed_outcome(replicate, paste("error:", conditionMessage(e))),
                  checkpointed = FALSE)
           })
}

# Replicate rows from the in-process backends; an element that is not a
# replicate result (e.g. a worker that died under mclapply) is a failure.
# With a checkpoint, rows the worker did not append (or, with
# `always_append`, every row) are appended here.
collect_replicates <- function(results, notify, parameter_count, checkpoint = NULL,
                               replicates = NULL, always_append = FALSE) {
  checkpoint_error <- NULL
  outcomes <- lapply(seq_along(results), function(i) {
    r <- results[[i]]
    if (is.list(r) && is.raw(r$outcome)) return(r$outcome)
    failed_outcome(replicates[i], if (inherits(r, "try-error")) {
      paste("error:", trimws(as.character(r)))
    } else {
      "no result"
    })
  })
  if (!is.null(checkpoint)) {
    for (i in seq_along(results)) {
      r <- results[[i]]
      if (always_append || !is.list(r) || !isTRUE(r$checkpointed)) {
        written <- tryCatch(checkpoint_append(checkpoint, outcomes[[i]]),
                            error = function(e) conditionMessage(e))
        if (!isTRUE(written) && is.null(checkpoint_error)) checkpoint_error <- written
      }
    }
  }
  if (!is.null(notify)) for (i in seq_along(results)) notify()
  c(replicate_table(outcomes, parameter_count), list(checkpoint_error = checkpoint_error))
}

# Which replicates end an mclapply worker, i.e. the last each process runs
# (parallel::mclapply()'s scheduling: fewer than 2 elements or cores run in
# this session; without prescheduling every element gets its own child;
# with it, element i goes to child (i - 1) %% cores + 1).
mclapply_last_of_worker <- function(n, cores, preschedule) {
  cores <- min(cores, n)
  if (n < 2L || cores < 2L) return(seq_len(n) == n)
  if (!preschedule) return(rep(TRUE, n))
  seq_len(n) > n - cores
}

# Whether a replicate reads PSS and private dirty (`memory.per.replicate`:
# TRUE every replicate, FALSE a worker's `last` one, NA none).
reads_memory <- function(memory_per_replicate, last) {
  if (is.na(memory_per_replicate)) rep(FALSE, length(last)) else memory_per_replicate | last
}

# `tasks_per_child` NULL: workers fed one replicate at a time (0 tells the engine so).
fork_replicates <- function(plan, resample, seed, replicates, workers, tasks_per_child, schedule,
                            timeout, memory_limit, trim_memory, notify, checkpoint = NULL,
                            memory_per_replicate = FALSE) {
  out <- continue_jump(bootstrap_fork_rust(
    plan, resample, as.double(seed), as.integer(replicates), as.integer(workers),
    if (is.null(tasks_per_child)) 0L else as.integer(tasks_per_child), schedule,
    as.double(timeout), if (is.null(memory_limit)) NA_real_ else as.double(memory_limit),
    as.logical(memory_per_replicate), trim_memory, function(replicate, ok) notify(),
    if (is.null(checkpoint)) "" else checkpoint$path,
    if (is.null(checkpoint)) "" else checkpoint$key
  ))
  estimates <- matrix(out$estimates, nrow = length(replicates), ncol = out$parameter_count,
                      byrow = TRUE)
  list(estimates = estimates, diagnostics = new_diagnostics(out$diagnostics),
       interrupted = isTRUE(out$interrupted), checkpoint_error = out$checkpoint_error)
}

# A function that signals one step of progress through progressr (when
# `progress` and progressr is installed; a no-op otherwise), for `steps`
# steps; `type = "finish"` finishes it. With `on_exit`, the progressor also
# finishes when the frame `envir` (by default the caller's) exits. Whether
# and how progress is shown is progressr's business
# (progressr::handlers(global = TRUE), and the option progressr.enable
# outside interactive sessions).
progress_notifier <- function(progress, steps, envir = parent.frame(), on_exit = TRUE) {
  force(envir)
  if (progress && requireNamespace("progressr", quietly = TRUE)) {
    step <- progressr::progressor(steps = steps, envir = envir, on_exit = on_exit)
    function(...) step(...)
  } else {
    function(...) invisible()
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

# Checks that `fit` is an intact "wisp" object: its saved plan decodes
# (whatever format it was saved in) and has the parameters of
# `fit$fitted.parameters`. Returns the plan's parameter names, its
# checkpoint key and its format.
wisp_fit_plan <- function(fit, resample = "cells", call = sys.call(-1)) {
  if (!inherits(fit, "wisp")) {
    stop_input("`fit` must be a \"wisp\" object from wisp(), not ", class(fit)[1], ".", call = call)
  }
  if (!is.list(fit) || !is.raw(fit$plan) || !is.numeric(fit$fitted.parameters)) {
    stop_corrupt("`fit` is missing its saved plan (the serialised model); was it modified? ",
                 "Refit with wisp().", call = call)
  }
  info <- with_context(plan_info_rust(fit$plan, resample), "`fit` cannot be used: ", call = call)
  # NaN marks estimates the data do not inform (count likelihood); NA never occurs.
  if (!identical(names(fit$fitted.parameters), info$parameter_names) ||
      any(is.na(fit$fitted.parameters) & !is.nan(fit$fitted.parameters))) {
    stop_corrupt("`fit` is corrupted: `fitted.parameters` do not match its model's ",
                 length(info$parameter_names), " parameters. Refit with wisp().", call = call)
  }
  info
}
