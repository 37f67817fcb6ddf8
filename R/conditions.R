#' Conditions signalled by wispack
#'
#' Every error wispack raises has a class that says what kind of problem it
#' is, so that code can handle each kind on its own with [tryCatch()] or
#' [withCallingHandlers()]:
#'
#' \describe{
#'   \item{`wisp_input_error`}{Something the caller can fix: an argument,
#'     the data or a setting (wrong type, length or range; NA, Inf or
#'     negative counts; labels that collide; ...). The message names the
#'     argument or column and the problem.}
#'   \item{`wisp_corrupt_error`}{Stored bytes that cannot be used: a saved
#'     fit (`fit$plan`) that fails its checksum, does not decode, or decodes
#'     to a model that breaks the model's rules; a fit whose parts disagree.
#'     It is also a `wisp_input_error`, so handlers written for that class
#'     keep working. Refit with [wisp()].}
#'   \item{`wisp_system_error`}{The machine failed: `fork()`, a pipe,
#'     `poll()`, reading or writing a file (e.g. a checkpoint), memory.
#'     Retrying, or freeing resources, may help. [wisp()] and [wisp_bin()]
#'     check the memory their largest steps will hold against what the
#'     process can get before they start them, and turn R's own allocation
#'     failures into this class, so that running out of memory is an error
#'     that says how much was needed and what to do, not an abort of R.}
#'   \item{`wisp_interrupted`}{Ctrl-C (SIGINT) during work on the fork
#'     engine: every child process was killed and reaped before it was
#'     signalled. From [bs_batch()], its `result` element is the
#'     `"wisp_bootstrap"` of the replicates finished so far.}
#' }
#'
#' The first three also have class `wisp_error`; `wisp_interrupted` does not,
#' so that a handler for `wisp_error` does not swallow an interrupt. A fit
#' saved by a newer version of wispack, in a format this version cannot
#' read, is a `wisp_input_error` whose message names the version that wrote
#' it.
#'
#' Warnings: `wisp_checkpoint_warning` when a checkpoint had damaged frames
#' (they are dropped and their replicates run again) or could not be written;
#' `wisp_design_warning` from [wisp()] when its tests of transition
#' points are outside the designs where they were found calibrated: fewer
#' than 5 animals per group (the message quotes the calibration benchmark's
#' figures for the fit's statistics and group size), or genes with fewer
#' than 10 molecules per bin and animal (the message names the curves and
#' quotes the benchmark's figures for genes that sparse, for the point tests
#' and for the gene-level tests of [anova.wisp()]);
#' `wisp_resolution_warning` from [wisp()]
#' (`bootstraps.num`) and [wisp_statistics()] (`boot`) when the bootstrap
#' has too few replicates for its Holm- or Bonferroni-adjusted percentile
#' tests to reject anything (the smallest p-value, 2 / (B + 1) for B usable
#' replicates, times the number of tested effects is not below alpha): it
#' names B, the replicates needed and how to add them. Silence the design
#' warning, once read, with
#' `withCallingHandlers(wisp(...), wisp_design_warning = function(w)
#' invokeRestart("muffleWarning"))`.
#'
#' @name wisp_conditions
#' @examples
#' tryCatch(bs_batch(list(), 2), wisp_input_error = function(e) conditionMessage(e))
#' counts <- wisp_simulate(n.genes = 1, n.bins = 30, seed = 1)
#' fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
#' fit$plan[40] <- as.raw(255 - as.integer(fit$plan[40]))
#' tryCatch(bs_batch(fit, 2), wisp_corrupt_error = function(e) class(e))
NULL

# Classes of the condition of each kind of error (see ?wisp_conditions).
condition_classes <- list(
  input = c("wisp_input_error", "wisp_error"),
  corrupt = c("wisp_corrupt_error", "wisp_input_error", "wisp_error"),
  system = c("wisp_system_error", "wisp_error"),
  interrupted = "wisp_interrupted"
)

# An error condition of `kind` ("input", "corrupt", "system", "interrupted");
# `...` adds fields (e.g. `result`).
wisp_condition <- function(kind, message, call = sys.call(-1), ...) {
  classes <- condition_classes[[kind]]
  if (is.null(classes)) classes <- condition_classes$input
  structure(class = c(classes, "error", "condition"),
            list(message = message, call = call, ...))
}

wisp_input_error <- function(message, call = sys.call(-1)) {
  wisp_condition("input", message, call)
}

stop_input <- function(..., call = sys.call(-1)) {
  stop(wisp_condition("input", paste0(...), call = call))
}

stop_corrupt <- function(..., call = sys.call(-1)) {
  stop(wisp_condition("corrupt", paste0(...), call = call))
}

# A `wisp_system_error` when a forecast of the memory a step will hold at
# once (`forecast`: list(bytes, available) from the Rust core) is more than
# this process can get: the step would otherwise end in an allocation
# failure, which aborts R when it happens in Rust.
check_memory <- function(forecast, what, advice, call = sys.call(-1)) {
  if (isTRUE(forecast$available)) return(invisible())
  stop(wisp_condition("system", paste0(
    what, " needs about ", format_bytes(forecast$bytes), " of memory at once, more than this ",
    "process can get (its address-space limit, `ulimit -v`, or the machine's memory); ",
    advice, "."), call = call))
}

format_bytes <- function(bytes) {
  if (bytes >= 1e9) sprintf("%.1f GB", bytes / 1e9) else sprintf("%.0f MB", bytes / 1e6)
}

# Evaluates `expr`, turning R's own allocation failures ("cannot allocate
# vector of size ...") into a `wisp_system_error` that says what to do.
with_memory_advice <- function(expr, advice, call = sys.call(-1)) {
  withCallingHandlers(expr, error = function(e) {
    if (!inherits(e, "wisp_error") && grepl("cannot allocate", conditionMessage(e))) {
      stop(wisp_condition("system", paste0(conditionMessage(e), ": this process ran out of ",
                                           "memory; ", advice, "."), call = call))
    }
  })
}

# Evaluates `expr`; a wispack error from it gets `prefix` in front of its
# message and keeps its class, and `call` as its call.
with_context <- function(expr, prefix, call = sys.call(-1)) {
  tryCatch(expr, wisp_error = function(e) {
    e$message <- paste0(prefix, conditionMessage(e))
    e$call <- call
    stop(e)
  })
}
