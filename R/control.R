# wisp_control(): the count model's Newton limits, the way lme4's
# lmerControl() and glmmTMB's glmmTMBControl() hold an optimiser's limits.
# The defaults are the Rust core's (model_rules()$control, from
# src/rust/src/rules.rs); R does not write them again.

# The default of one control setting, from the core.
control_default <- function(name) model_rules()$control[[name]]

# The control settings that are whole numbers (the others are tolerances).
control_counts <- c("newton_max_iterations", "max_variance_updates")

#' Control the fit of the count likelihood
#'
#' The limits of the damped Newton fit of the count likelihood
#' (`model.settings$likelihood = "nb"`, the default), for [wisp()]'s
#' `control` argument, in the manner of `lme4::lmerControl()`. Each gene is
#' fitted by Newton steps with the exact Hessian; the fit has converged when
#' every gradient entry times its parameter's standard error is at most
#' `newton_gradient_tolerance` and the Newton decrement is at most
#' `newton_decrement_tolerance` relative to the objective, and the random
#' effects' variances have settled: their largest change between two updates
#' is below `variance_tolerance`. The defaults are the package's Rust core's.
#' The fit's saved plan keeps them, so the replicates of [bs_batch()] are
#' fitted with the same limits.
#'
#' These settings apply to `likelihood = "nb"` only: under `likelihood =
#' "original"`, setting any of them is an error, since the original's L-BFGS
#' fit is controlled by `model.settings$ctol` and `model.settings$max_evals`
#' instead (which, in turn, have no effect under `"nb"`).
#'
#' @param newton_max_iterations Most iterations of each run of Newton steps
#'   (a whole number >= 1): a gene's fit runs them again after each update
#'   of the random effects' variances, and `fit.diagnostics$iterations`
#'   counts them all.
#' @param newton_gradient_tolerance Largest scaled gradient entry (gradient
#'   times standard error) of a converged fit (a positive number).
#' @param newton_decrement_tolerance Largest Newton decrement, relative to
#'   the objective, of a converged fit (a positive number).
#' @param max_variance_updates Most updates of the random effects' variances
#'   (a whole number >= 1).
#' @param variance_tolerance The change of the variances below which they
#'   have settled (a positive number).
#' @param trace `TRUE` to keep the trace of the full-data fit's iterations
#'   in `fit$newton.trace`: one row per Newton iteration of
#'   each gene (`species`), numbered by run (`run`: one run of Newton steps
#'   per update of the variances, then the final one) and `iteration` (0 is
#'   the run's start), with the objective there (`value`), the damping of
#'   the step taken from there (`lambda`, `NA` on a run's last row), the
#'   Newton decrement gᵀH⁻¹g (`decrement`), the largest scaled gradient
#'   entry (`scaled_gradient`, `NA` until the decrement is near its
#'   tolerance) and the objective evaluations so far (`evaluations`). Within
#'   a run `value` never increases (a step is taken only when it lowers the
#'   objective). Bootstrap replicates are never traced.
#' @return An object of class `"wisp_control"`: a list of the six
#'   settings, with the names of those given explicitly in its attribute
#'   `"given"`.
#' @seealso [wisp()]
#' @export
#' @examples
#' wisp_control()
#' counts <- wisp_simulate(n.genes = 1, n.bins = 30, seed = 3)
#' # A fit stopped after one Newton iteration does not converge.
#' fit <- suppressWarnings(wisp(counts, model.settings = list(LRO_cost = "none"),
#'                              control = wisp_control(newton_max_iterations = 1),
#'                              fit_only = TRUE, verbose = FALSE))
#' fit$fit.diagnostics[c("converged", "code", "iterations")]
#' # The iterations of a fit, one row each.
#' traced <- suppressWarnings(wisp(counts, model.settings = list(LRO_cost = "none"),
#'                                 control = wisp_control(trace = TRUE),
#'                                 fit_only = TRUE, verbose = FALSE))
#' head(traced$newton.trace)
wisp_control <- function(newton_max_iterations = control_default("newton_max_iterations"),
                         newton_gradient_tolerance = control_default("newton_gradient_tolerance"),
                         newton_decrement_tolerance = control_default("newton_decrement_tolerance"),
                         max_variance_updates = control_default("max_variance_updates"),
                         variance_tolerance = control_default("variance_tolerance"),
                         trace = control_default("trace")) {
  call <- sys.call()
  given <- as.character(names(as.list(match.call())[-1L]))
  settings <- list(newton_max_iterations = newton_max_iterations,
                   newton_gradient_tolerance = newton_gradient_tolerance,
                   newton_decrement_tolerance = newton_decrement_tolerance,
                   max_variance_updates = max_variance_updates,
                   variance_tolerance = variance_tolerance)
  for (name in names(settings)) {
    value <- settings[[name]]
    if (name %in% control_counts) {
      if (!is.numeric(value) || length(value) != 1L || is.na(value) || !is.finite(value) ||
          value < 1 || value != round(value) || value > 1e9) {
        stop_input("wisp_control(", name, " =) must be one whole number from 1 to 1e9, not ",
                   describe_value(value), ".", call = call)
      }
    } else if (!is.numeric(value) || length(value) != 1L || is.na(value) || !is.finite(value) ||
               value <= 0) {
      stop_input("wisp_control(", name, " =) must be one positive finite number, not ",
                 describe_value(value), ".", call = call)
    }
    settings[[name]] <- as.double(value)
  }
  if (!is.logical(trace) || length(trace) != 1L || is.na(trace)) {
    stop_input("wisp_control(trace =) must be TRUE or FALSE, not ", describe_value(trace), ".",
               call = call)
  }
  settings$trace <- trace
  structure(settings, given = given, class = "wisp_control")
}

#' @rdname wisp_control
#' @param x A `"wisp_control"` object.
#' @param ... Unused.
#' @export
print.wisp_control <- function(x, ...) {
  cat("wisp control (Newton fit of the count likelihood, likelihood = \"nb\"):\n")
  given <- attr(x, "given")
  for (name in names(x)) {
    cat(sprintf("  %-27s %s%s\n", name, format(x[[name]]),
                if (name %in% given) "" else " (default)"))
  }
  invisible(x)
}

# Checks wisp()'s `control` against the likelihood (`settings`, validated
# model settings) and the user's own `model.settings`, and returns the
# entries for the core's settings of the count fit: the Newton limits and trace
# under "nb", none under "original" (where giving any is an error). Under
# "nb", `ctol` or `max_evals` in `model.settings` draw a warning: they set
# the original's L-BFGS fit.
wisp_control_settings <- function(control, settings, model.settings, call = sys.call(-1)) {
  if (is.list(control) && !inherits(control, "wisp_control")) {
    control <- do.call(wisp_control, control)
  }
  if (!inherits(control, "wisp_control")) {
    stop_input("`control` must come from wisp_control(), not ", describe_value(control), ".",
               call = call)
  }
  given <- attr(control, "given")
  if (identical(settings$likelihood, "original")) {
    if (length(given)) {
      stop_input("wisp_control(", paste(given, collapse = ", "), ") appl",
                 if (length(given) > 1L) "y" else "ies", " to likelihood = \"nb\" only (the ",
                 "Newton fit of the count likelihood); the original's L-BFGS fit is controlled ",
                 "by model.settings$ctol and model.settings$max_evals.", call = call)
    }
    return(list())
  }
  ignored <- intersect(c("ctol", "max_evals"), names(model.settings))
  if (length(ignored)) {
    warning(sprintf(paste0(
      "model.settings$%s %s ignored under likelihood = \"nb\" (%s the original's L-BFGS ",
      "fit); the count likelihood's Newton fit is controlled by control = ",
      "wisp_control(newton_gradient_tolerance =, newton_max_iterations =)."),
      paste(ignored, collapse = " and "), if (length(ignored) > 1L) "are" else "is",
      if (length(ignored) > 1L) "they set" else "it sets"), call. = FALSE)
  }
  unclass(control)[names(model_rules()$control)]
}
