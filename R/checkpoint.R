# Resumable bootstraps: bs_batch(..., checkpoint = path).
#
# The checkpoint is an append-only file of checksummed frames, one per
# finished replicate, each holding the replicate's outcome record
# (src/rust/src/checkpoint.rs, src/rust/src/outcome.rs). Every backend appends each
# replicate's outcome as it becomes known and fsyncs it: the fork engine's
# parent, the serial loop, the workers of mclapply (the parent appends what a
# worker could not), and the session collecting the future backend's chunks
# (R/cluster.R). A rerun with the same path keeps
# the successful replicates it finds and runs the rest, failed ones included
# (a failure may have been the machine's, e.g. a killed worker). Frames that
# fail their checksum (a tail cut short by a crash, damaged bytes) are
# dropped with a warning of class `wisp_checkpoint_warning`, and their
# replicates are run again.

# The normalised checkpoint path, or an input error.
check_checkpoint_path <- function(checkpoint, call = sys.call(-1)) {
  if (!is.character(checkpoint) || length(checkpoint) != 1L || is.na(checkpoint) ||
      !nzchar(checkpoint)) {
    stop_input("`checkpoint` must be NULL or one file path, not ", describe_value(checkpoint),
               ".", call = call)
  }
  path <- normalizePath(path.expand(enc2native(checkpoint)), mustWork = FALSE)
  if (dir.exists(path)) {
    stop_input("`checkpoint` must name a file, but '", path, "' is a directory.", call = call)
  }
  if (!dir.exists(dirname(path))) {
    stop_input("the directory of `checkpoint` ('", dirname(path), "') does not exist.",
               call = call)
  }
  path
}

# Opens (creating or repairing) the checkpoint of a run of `fit` and checks
# that it belongs to this fit and seed. Returns list(path, key, seed, done):
# `seed` is the seed recorded in the checkpoint when `seed` is NULL (so a
# resumed run continues the same bootstrap), and `done` holds the successful
# replicates (estimates and diagnostics) among the `wanted` replicate numbers.
checkpoint_start <- function(path, key, seed, wanted, parameter_count,
                             call = sys.call(-1)) {
  contents <- with_context(checkpoint_open_rust(path), "cannot use `checkpoint`: ",
                           call = call)
  warn_damaged_checkpoint(path, contents, "replicates they held will be run again", call)
  foreign <- contents$key != key
  if (any(foreign)) {
    stop_input("checkpoint '", path, "' belongs to a bootstrap of a different fit; use a new ",
               "path (or delete the file).", call = call)
  }
  seeds <- unique(contents$seed)
  if (length(seeds) > 1L) {
    stop_input("checkpoint '", path, "' mixes bootstraps with different seeds; use a new path.",
               call = call)
  }
  if (length(seeds) == 1L) {
    if (is.null(seed)) {
      seed <- seeds
    } else if (!isTRUE(all.equal(as.double(seed), seeds, tolerance = 0))) {
      stop_input("checkpoint '", path, "' holds replicates of seed ", format(seeds), ", not ",
                 format(seed), "; pass seed = ", format(seeds), " (or seed = NULL) to resume ",
                 "it, or use a new path.", call = call)
    }
  }
  keep <- which(contents$diagnostics$ok & contents$replicate %in% wanted)
  # The last successful frame of a replicate wins (all of them are equal).
  keep <- keep[!duplicated(contents$replicate[keep], fromLast = TRUE)]
  replicates <- contents$replicate[keep]
  estimates <- matrix(NA_real_, length(keep), parameter_count)
  for (i in seq_along(keep)) {
    values <- contents$estimates[[keep[i]]]
    if (length(values) != parameter_count) {
      stop_input("checkpoint '", path, "' holds replicates with ", length(values),
                 " parameters, not ", parameter_count, "; use a new path.", call = call)
    }
    estimates[i, ] <- values
  }
  diagnostics <- new_diagnostics(contents$diagnostics)[keep, , drop = FALSE]
  rownames(diagnostics) <- NULL
  list(path = path, key = key, seed = seed,
       done = list(replicates = replicates, estimates = estimates, diagnostics = diagnostics))
}

# Appends one replicate's outcome (bytes from bootstrap_replicate() or
# failed_outcome()) durably; TRUE when it was written.
checkpoint_append <- function(checkpoint, outcome) {
  checkpoint_append_rust(checkpoint$path, checkpoint$key, as.double(checkpoint$seed), outcome)
  invisible(TRUE)
}

# The warning of a checkpoint (a bootstrap's or a fit's) whose damaged
# stretches open() dropped (`contents`: damage_length, damage_at_end), if any;
# `redone` says what happens to what they held.
warn_damaged_checkpoint <- function(path, contents, redone, call) {
  damaged <- length(contents$damage_length)
  if (!damaged) return(invisible())
  warning(structure(
    class = c("wisp_checkpoint_warning", "warning", "condition"),
    list(message = sprintf(paste0(
      "checkpoint '%s' had %d damaged stretch%s (%s bytes%s); they were dropped and the %s."),
      path, damaged, if (damaged > 1) "es" else "",
      format(sum(contents$damage_length), scientific = FALSE),
      if (any(contents$damage_at_end)) ", a cut-short tail among them" else "", redone),
      call = call)
  ))
}

checkpoint_write_warning <- function(path, message, call = sys.call(-1)) {
  warning(structure(
    class = c("wisp_checkpoint_warning", "warning", "condition"),
    list(message = paste0("could not write checkpoint '", path, "' (", message, "); the ",
                          "result is complete, but a rerun will redo the replicates not saved."),
         call = call)
  ))
}
