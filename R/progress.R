# Stages of fewer fits say only that they start.
long_stage <- 10L

# The progress of wisp()'s stages. `report(stage, done, total)` is what Rust
# calls as each distinct change-point structure of the grid search (stage
# "grid"), each curve's structure selection (stages "structure" and, with
# the random effects held at the fit of that first choice, stage "warps",
# then "reselect", under structure = "likelihood") and each gene (stage
# "fit"; "species": each gene's whole selection and fit, with a checkpoint
# or on futures, after "kept", the genes the checkpoint held) is fitted, or
# each gene's transition points are checked by profile likelihood (stage
# "profile"),
# with done = 0 before the first fit of a stage (stage "joint": the
# original's one fit of every gene, reported from R). It signals one progressr step per fit (with
# `progress`; one progressor per stage, finished after its last step) and,
# through `say`, coarse messages: the stage and what it fits when it starts,
# and, for stages of `long_stage` fits or more, how many are done at most
# every quarter.
# `finish()` finishes a stage that an error cut short; wisp() calls it on
# exit.
stage_progress <- function(say, progress, workers, envir = parent.frame()) {
  force(envir) # the caller's frame, not wherever the callback first runs
  step <- NULL # the progressor of the stage under way
  finish <- function() {
    if (!is.null(step)) {
      current <- step
      step <<- NULL
      current(type = "finish")
    }
    invisible()
  }
  report <- function(stage, done, total) {
    done <- as.integer(done)
    total <- as.integer(total)
    unit <- switch(stage, grid = "change-point structure", structure = , reselect = "curve",
                   "gene")
    if (identical(stage, "kept")) {
      say(sprintf("Checkpoint: %d of %s fitted already.", done, count_noun(total, unit)))
      return(invisible())
    }
    # The original's one fit of every gene: a step, without messages.
    if (identical(stage, "joint")) say <- function(...) invisible()
    # What a step does, and has done.
    verb <- if (identical(stage, "profile")) c("check", "checked") else c("fit", "fitted")
    if (done == 0L) {
      finish()
      # Nothing left to fit (every gene's fit came with the structure step).
      if (total == 0L) return(invisible())
      step <<- progress_notifier(progress && total > 0L, total, envir = envir, on_exit = FALSE)
      say(sprintf("%s: %s to %s%s.",
                  switch(stage, grid = "Grid search",
                         structure = "Structure (degrees by BIC, random effects at 0)",
                         warps = "Structure: random effects of that choice",
                         reselect = "Structure (degrees by BIC, random effects held)",
                         species = "Structure and fit, gene by gene",
                         profile = "Profile checks of transition points",
                         "Fit"),
                  count_noun(total, unit), verb[1],
                  if (workers > 1 && total > 1) {
                    sprintf(" on %s", count_noun(min(workers, total), "worker"))
                  } else ""))
      return(invisible())
    }
    if (!is.null(step)) step()
    # For long stages only (a stage line says how many there are), at most
    # every quarter and at the end.
    quarter <- ceiling(total / 4)
    if (total >= long_stage && done %/% quarter != (done - 1L) %/% quarter) {
      say(sprintf("  %d of %s %s", done, count_noun(total, unit), verb[2]))
    }
    if (done >= total) finish()
    invisible()
  }
  list(report = report, finish = finish)
}
