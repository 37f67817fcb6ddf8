# bs_batch(backend = "future"): replicates in chunks on the user's future plan
# (multisession, cluster, future.batchtools on Slurm, ...).
#
# One future per chunk of replicates, so a cluster gets a few jobs of a
# sensible size rather than one job per replicate, and each job receives the
# serialised model once. The chunks are launched as workers free up and
# collected as they finish, in this R session: it signals progress and
# appends each chunk's replicates to the checkpoint as they arrive, so a run
# that outlives its allocation or this session resumes from what was
# collected. A chunk whose future fails (its job was killed, ran out of time
# or memory, could not be submitted, or its worker died) has its replicates
# recorded as failed with the future's error message; the other chunks are
# kept. The package never sets a plan; `resources` reach only the jobs of
# this run.

# Checks the future backend's own arguments before any work starts.
check_future_arguments <- function(backend, chunk.size, resources, call = sys.call(-1)) {
  if (backend != "future") {
    if (!is.null(chunk.size) || !is.null(resources)) {
      stop_input("`chunk.size` and `resources` need backend = \"future\".", call = call)
    }
    return(invisible())
  }
  if (!is.null(chunk.size)) check_whole_number(chunk.size, "chunk.size", lower = 1, call = call)
  if (!is.null(resources)) {
    if (!is.list(resources) || is.null(names(resources)) || !all(nzchar(names(resources))) ||
        anyDuplicated(names(resources))) {
      stop_input("`resources` must be NULL or a list with unique names (e.g. list(mem = \"2G\", ",
                 "time = \"01:00:00\")), not ", describe_value(resources), ".", call = call)
    }
    strategy <- future::plan("next")
    if (!inherits(strategy, "batchtools")) {
      name <- setdiff(class(strategy), c("FutureStrategy", "tweaked"))[1]
      stop_input("`resources` are passed to future.batchtools jobs, but the current plan (",
                 name, ") is not a batchtools plan; set one with future::plan(), or drop ",
                 "`resources`.", call = call)
    }
  }
  invisible()
}

# Replicates per future: as few futures as keep every worker busy (one chunk
# per worker), unless `chunk_size` says otherwise.
future_chunk_size <- function(replicates, workers = future::nbrOfWorkers(), chunk_size = NULL) {
  if (!is.null(chunk_size)) return(as.integer(chunk_size))
  if (!is.finite(workers) || workers < 1) return(1L)
  as.integer(ceiling(replicates / workers))
}

# Runs `replicates` on the current plan; returns rows as collect_replicates()
# does.
future_replicates <- function(plan, seed, replicates, chunk_size, resources, trim_memory,
                              notify, checkpoint, parameter_count, resample = "cells",
                              memory_per_replicate = FALSE, call = sys.call(-1)) {
  workers <- future::nbrOfWorkers()
  size <- future_chunk_size(length(replicates), workers, chunk_size)
  chunks <- unname(split(seq_along(replicates), (seq_along(replicates) - 1L) %/% size))
  make_future <- future_maker(resources)
  kill <- as.integer(getOption("wispack.inject_faults", list())$kill)

  rows <- vector("list", length(replicates))
  checkpoint_error <- NULL
  # A collected chunk is on disk before it is reported.
  # Each row is a replicate's outcome (bytes, as bootstrap_replicate() or
  # failed_outcome() make them).
  finish <- function(k, chunk_rows) {
    for (j in seq_along(chunks[[k]])) {
      at <- chunks[[k]][j]
      row <- chunk_rows[[j]]
      rows[[at]] <<- if (is.list(row) && is.raw(row$outcome)) row$outcome else
        failed_outcome(replicates[at], "no result")
      if (!is.null(checkpoint)) {
        written <- tryCatch(checkpoint_append(checkpoint, rows[[at]]),
                            error = function(e) conditionMessage(e))
        if (!isTRUE(written) && is.null(checkpoint_error)) checkpoint_error <<- written
      }
    }
    for (j in seq_along(chunks[[k]])) notify()
  }
  failed <- function(k, error) {
    reason <- paste("future failed:", trimws(conditionMessage(error)))
    lapply(replicates[chunks[[k]]], function(replicate) {
      list(outcome = failed_outcome(replicate, reason))
    })
  }

  future_chunks(
    length(chunks),
    launch = function(k) {
      make_future(replicates[chunks[[k]]], plan, seed, trim_memory, kill, resample,
                  memory_per_replicate)
    },
    collect = function(k, chunk_rows) {
      if (!is.list(chunk_rows) || length(chunk_rows) != length(chunks[[k]])) {
        chunk_rows <- failed(k, simpleError("the future returned no replicate results"))
      }
      finish(k, chunk_rows)
    },
    fail = function(k, error) finish(k, failed(k, error)),
    call = call
  )
  c(replicate_table(rows, parameter_count), list(checkpoint_error = checkpoint_error))
}

# The one loop of the future backends (bs_batch() and wisp()): futures 1..n
# started by `launch(k)`, no more at once than the plan has workers (so that
# none blocks waiting for a free worker while finished ones wait to be
# collected), each collected in this session as it finishes: `collect(k,
# value)`, or `fail(k, error)` when its future failed (its job was killed,
# exceeded its memory or time, could not be submitted, or its worker died).
future_chunks <- function(n, launch, collect, fail, call = sys.call(-1)) {
  workers <- future::nbrOfWorkers()
  slots <- if (is.finite(workers)) max(1L, as.integer(workers)) else n
  running <- list()
  unanswered <- list() # when resolved() first failed, by chunk
  launched <- 0L
  wait <- 0.02
  while (launched < n || length(running)) {
    while (length(running) < slots && launched < n) {
      launched <- launched + 1L
      job <- tryCatch(launch(launched), error = identity)
      if (inherits(job, "error")) {
        fail(launched, job)
      } else {
        running[[as.character(launched)]] <- job
      }
    }
    # A FutureError from resolved() (e.g. a dead worker) ends the future, and
    # value() says why; other errors (e.g. a scheduler that does not answer
    # for a while) are retried for up to 5 minutes.
    done <- Filter(function(key) {
      state <- tryCatch(future::resolved(running[[key]]), FutureError = function(e) TRUE,
                        error = function(e) NA)
      if (!is.na(state)) {
        unanswered[[key]] <<- NULL
        return(state)
      }
      if (is.null(unanswered[[key]])) unanswered[[key]] <<- Sys.time()
      difftime(Sys.time(), unanswered[[key]], units = "secs") > 300
    }, names(running))
    for (key in done) {
      k <- as.integer(key)
      error <- NULL
      value <- tryCatch(future::value(running[[key]]), error = function(e) {
        # A worker that cannot load wispack is a setup problem, not a failed
        # chunk: every chunk would fail the same way.
        e <- worker_library_error(e, call = call)
        if (inherits(e, "wisp_error")) stop(e)
        error <<- e
        NULL
      })
      if (is.null(error)) collect(k, value) else fail(k, error)
      running[[key]] <- NULL
      unanswered[[key]] <- NULL
    }
    if (!length(done) && length(running)) {
      Sys.sleep(wait)
      wait <- min(wait * 1.5, 1)
    } else {
      wait <- 0.02
    }
  }
  invisible()
}

# A function(expr, globals, label) that starts a future of `expr` on the
# current plan, with wispack attached. With `resources`, the future is made
# by the plan's own constructor with them merged into the plan's resources
# (future() does not pass them on); the plan itself is not changed.
future_launcher <- function(resources) {
  strategy <- NULL
  if (length(resources)) {
    strategy <- future::plan("next")
    planned <- tryCatch(eval(formals(strategy)$resources, baseenv()), error = function(e) NULL)
    resources <- utils::modifyList(if (is.list(planned)) planned else list(), resources)
  }
  function(expr, globals, label) {
    if (is.null(strategy)) {
      future::future(expr, substitute = FALSE, globals = globals, packages = "wispack",
                     label = label)
    } else {
      strategy(expr, substitute = FALSE, globals = globals, packages = "wispack",
               label = label, resources = resources)
    }
  }
}

# A function that starts the future of one chunk of replicates on the
# current plan (see future_launcher()).
future_maker <- function(resources) {
  launch <- future_launcher(resources)
  function(chunk, plan, seed, trim_memory, kill, resample, memory_per_replicate = FALSE) {
    globals <- list(run_replicate_chunk = run_replicate_chunk, replicates = chunk, plan = plan,
                    seed = seed, trim_memory = trim_memory, kill = kill,
                    collector = Sys.getpid(), resample = resample,
                    memory_per_replicate = memory_per_replicate)
    expr <- quote(run_replicate_chunk(replicates, plan, seed, trim_memory, kill, collector,
                                      resample, memory_per_replicate))
    label <- if (length(chunk) == 1L) {
      paste0("wispack-", chunk)
    } else {
      paste0("wispack-", chunk[1], "-", chunk[length(chunk)])
    }
    launch(expr, globals, label)
  }
}

# Runs on the worker: one row per replicate, as run_replicate_safely() gives.
# `kill` is a test hook (options(wispack.inject_faults = list(kill = ...))):
# a worker other than the collecting session kills itself before those
# replicates, as a job killed by its scheduler would end.
run_replicate_chunk <- function(replicates, plan, seed, trim_memory, kill = integer(),
                                collector = NA_integer_, resample = "cells",
                                memory_per_replicate = FALSE) {
  # PSS and private dirty are read once per chunk, after its last replicate
  # (reading them walks the worker's page tables; see bs_batch()).
  lapply(seq_along(replicates), function(i) {
    replicate <- replicates[i]
    if (replicate %in% kill && Sys.getpid() != collector) {
      tools::pskill(Sys.getpid(), tools::SIGKILL)
    }
    run_replicate_safely(replicate, plan, seed, trim_memory, resample = resample,
                         memory = reads_memory(memory_per_replicate, i == length(replicates)))
  })
}
