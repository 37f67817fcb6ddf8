# wisp() with a checkpoint or backend = "future": every gene's structure
# selection and fit as a task of its own (the Rust core's species tasks,
# src/rust/src/nb/panel.rs), so that finished genes can be kept in a
# checkpoint and genes can run on the user's future plan (multisession, a
# Slurm cluster through future.batchtools, ...). The genes' works are then
# put together by count_fit_rust() into exactly the fit that all genes at
# once give.

# Checks wisp()'s `backend`, `checkpoint`, `chunk.size` and `resources`;
# returns NULL (fit every gene at once, as always) or the list that
# count_fit() takes as `apart`.
check_genes_apart <- function(backend, checkpoint, chunk.size, resources, settings,
                              call = sys.call(-1)) {
  backend <- match_choice(backend, "backend", c("fork", "future"), call = call)
  if (!is.null(checkpoint)) checkpoint <- check_checkpoint_path(checkpoint, call = call)
  check_future_arguments(backend, chunk.size, resources, call = call)
  if (backend == "fork" && is.null(checkpoint)) return(NULL)
  what <- if (backend == "future") "backend = \"future\"" else "`checkpoint`"
  if (settings$likelihood != "nb") {
    stop_input(what, " fits gene by gene, but likelihood = \"", settings$likelihood,
               "\" couples every gene in one objective; use likelihood = \"nb\" (the default), ",
               "or drop ", what, ".", call = call)
  }
  if (!settings$structure %in% c("auto", "likelihood")) {
    stop_input(what, " needs the default structure selection (model.settings$structure = ",
               "\"likelihood\"), which chooses each gene's transitions from its own data; ",
               "structure = \"", settings$structure, "\" chooses them for every gene at once.",
               call = call)
  }
  if (backend == "future" && !requireNamespace("future", quietly = TRUE)) {
    stop_input("backend = \"future\" needs the future package.", call = call)
  }
  list(backend = backend, checkpoint = checkpoint, chunk.size = chunk.size,
       resources = resources)
}

# Every gene's work (raw vectors, in gene order) for count_fit_rust(): those
# in the checkpoint kept, the others fitted on `workers` forked workers or on
# the future plan, each appended to the checkpoint as it arrives. `data` and
# `core` are count_fit_rust()'s arguments.
fit_genes_apart <- function(data, core, apart, workers, progress, call = sys.call(-1)) {
  task <- with_context(do.call(count_species_task_rust, c(data, list(core))),
                       "cannot fit the model: ", call = call)
  genes <- task$species
  works <- vector("list", length(genes))
  checkpoint <- apart$checkpoint
  if (!is.null(checkpoint)) {
    kept <- fit_checkpoint_start(checkpoint, task$key, genes, call)
    works[match(kept$species, genes)] <- kept$work
  }
  todo <- which(vapply(works, is.null, TRUE))
  if (!is.null(checkpoint) && length(todo) < length(genes) && !is.null(progress)) {
    progress("kept", length(genes) - length(todo), length(genes))
  }
  if (length(todo)) {
    works[todo] <- if (apart$backend == "future") {
      future_genes(task, todo, apart, progress, call)
    } else {
      with_context(continue_jump(count_species_fit_rust(
        task$task, todo - 1L, as.integer(workers),
        if (is.null(checkpoint)) "" else checkpoint, task$key, progress
      )), "cannot fit the model: ", call = call)
    }
  }
  works
}

# Opens a fit's checkpoint (creating or repairing it) and returns its genes
# (`species`, `work`) that belong to this fit; one of another fit is an error.
fit_checkpoint_start <- function(path, key, genes, call = sys.call(-1)) {
  contents <- with_context(fit_checkpoint_open_rust(path), "cannot use `checkpoint`: ",
                           call = call)
  warn_damaged_checkpoint(path, contents, "genes they held will be fitted again", call)
  if (any(contents$key != key)) {
    stop_input("checkpoint '", path, "' belongs to a fit of other data or settings; use a new ",
               "path (or delete the file).", call = call)
  }
  keep <- which(contents$species %in% genes & !duplicated(contents$species, fromLast = TRUE))
  list(species = contents$species[keep], work = contents$work[keep])
}

# The genes `todo` (1-based, of task$species) on the current future plan, in
# chunks of `apart$chunk.size` genes (by default one chunk per worker); each
# chunk's genes are appended to the checkpoint as the chunk is collected. A
# chunk whose future failed leaves its genes unfitted: the others are
# collected (and checkpointed) first, then the fit stops with an error that
# names them.
future_genes <- function(task, todo, apart, progress, call = sys.call(-1)) {
  size <- future_chunk_size(length(todo), future::nbrOfWorkers(), apart$chunk.size)
  chunks <- unname(split(todo, (seq_along(todo) - 1L) %/% size))
  launch <- future_launcher(apart$resources)
  kill <- as.integer(getOption("wispack.inject_faults", list())$kill)
  works <- vector("list", length(todo))
  failures <- character()
  done <- 0L
  if (!is.null(progress)) progress("species", 0L, length(todo))
  future_chunks(
    length(chunks),
    launch = function(k) {
      genes <- chunks[[k]]
      subtask <- with_context(count_species_subtask_rust(task$task, genes - 1L),
                              "cannot fit the model: ", call = call)
      globals <- list(run_gene_chunk = run_gene_chunk, subtask = subtask, n = length(genes),
                      key = task$key,
                      kill = if (any(genes %in% kill)) TRUE else FALSE,
                      collector = Sys.getpid())
      label <- paste0("wispack-genes-", genes[1],
                      if (length(genes) > 1L) paste0("-", genes[length(genes)]) else "")
      launch(quote(run_gene_chunk(subtask, n, key, kill, collector)), globals, label)
    },
    collect = function(k, value) {
      genes <- chunks[[k]]
      if (!is.list(value) || length(value) != length(genes) || !all(vapply(value, is.raw, TRUE))) {
        failures <<- c(failures, sprintf("%s (%s)", paste(task$species[genes], collapse = ", "),
                                          "the future returned no fits"))
        return(invisible())
      }
      at <- match(genes, todo)
      works[at] <<- value
      if (!is.null(apart$checkpoint)) {
        for (work in value) fit_checkpoint_append_rust(apart$checkpoint, task$key, work)
      }
      for (gene in genes) {
        done <<- done + 1L
        if (!is.null(progress)) progress("species", done, length(todo))
      }
    },
    fail = function(k, error) {
      failures <<- c(failures, sprintf("%s (%s)", paste(task$species[chunks[[k]]], collapse = ", "),
                                       trimws(conditionMessage(error))))
    },
    call = call
  )
  if (length(failures)) {
    stop(wisp_condition("system", paste0(
      "wispack: the futures of some genes failed: ", paste(failures, collapse = "; "), ". ",
      if (!is.null(apart$checkpoint)) {
        "The other genes are in the checkpoint: rerun with the same `checkpoint` to fit only these."
      } else {
        "Give a `checkpoint` path, so that a rerun fits only the genes that did not finish."
      }), call = call))
  }
  works
}

# Runs on a future's worker: the works of the `n` genes of `subtask`, in order.
# `kill` is a test hook (options(wispack.inject_faults = list(kill = genes))):
# a worker other than the collecting session kills itself, as a job killed
# by its scheduler would end.
run_gene_chunk <- function(subtask, n, key, kill = FALSE, collector = NA_integer_) {
  if (isTRUE(kill) && Sys.getpid() != collector) tools::pskill(Sys.getpid(), tools::SIGKILL)
  count_species_fit_rust(subtask, seq_len(n) - 1L, 1L, "", key, NULL)
}
