# The two likelihoods as classes of a fit. A fit of the count likelihood
# (likelihood = "nb", the default) is c("wisp_nb", "wisp"), one of the
# original's objective c("wisp_original", "wisp"); the exported methods are
# on "wisp" (shared), and what differs between the two is in the internal
# generics below, one method per likelihood. Fits saved before the classes
# existed are class "wisp" only: each generic's "wisp" method gives them
# their class (as_current_fit()) and dispatches again.
#
# wisp() chooses the likelihood from model.settings before any fit exists
# (wisp_count() or wisp_original()), as the settings' validation does
# (settings.R): those choices are on the settings, not on a fit.

# The fit with its likelihood's class: a "wisp" object saved without one
# gets "wisp_nb" or "wisp_original" from its `likelihood` field (absent:
# "original", fits made before the count likelihood existed). Anything else
# is returned as it is.
as_current_fit <- function(fit) {
  if (!inherits(fit, "wisp") || inherits(fit, c("wisp_nb", "wisp_original"))) return(fit)
  likelihood <- if (is.null(fit$likelihood)) "original" else fit$likelihood
  if (!identical(likelihood, "nb") && !identical(likelihood, "original")) {
    stop_corrupt("`fit` has an unknown likelihood ", describe_value(likelihood),
                 "; was it modified? Refit with wisp().", call = NULL)
  }
  class(fit) <- c(paste0("wisp_", likelihood), class(fit))
  fit
}

# The likelihood of a fit: "nb" or "original".
fit_likelihood <- function(fit) UseMethod("fit_likelihood")
#' @export
fit_likelihood.wisp_nb <- function(fit) "nb"
#' @export
fit_likelihood.wisp_original <- function(fit) "original"
#' @export
fit_likelihood.default <- function(fit) {
  if (is.null(fit$likelihood)) "original" else fit$likelihood
}

# The rate per unit of exposure at curve values `psi` (the log(1 + rate)
# scale), from the Rust core (one definition of each likelihood's link):
# under "nb" floored smoothly above 0 (1e-8 + 1e-3 log(1 + exp((e^psi - 1) /
# 1e-3)), model vignette §9.2); under "original" e^psi - 1, computed as R and
# the original package do, so the predictions saved in older fits are
# reproduced bit for bit (test-saved.R). Keeps the attributes of `psi`
# (names, dim); NA and NaN stay as they are.
rate_at <- function(psi, likelihood) {
  rate <- psi
  known <- !is.na(psi)
  rate[known] <- curve_rate_rust(as.double(psi[known]), likelihood)
  rate
}

# The rate function of a fit's curves (see rate_at()).
curve_rate <- function(fit) {
  likelihood <- fit_likelihood(fit)
  function(psi) rate_at(psi, likelihood)
}

# ---------------------------------------------------------------------------
# Curves: Psi of the summed rows and at any points

# Predicted log rates of every row of fit$count.data.summed at `parameters`.
fit_predictions <- function(fit, parameters) UseMethod("fit_predictions")
#' @export
fit_predictions.wisp <- function(fit, parameters) {
  fit_predictions(as_current_fit(fit), parameters)
}
#' @export
fit_predictions.wisp_nb <- function(fit, parameters) {
  psi <- count_predict_rust(fit$plan, as.double(parameters))
  c(psi$rows, psi$population)
}
#' @export
fit_predictions.wisp_original <- function(fit, parameters) {
  model_predict(model_from_bytes(fit$plan, fit$settings), parameters)
}

# Quantiles of the predicted log rates of every row over parameter samples.
fit_bands <- function(fit, samples, probabilities) UseMethod("fit_bands")
#' @export
fit_bands.wisp <- function(fit, samples, probabilities) {
  fit_bands(as_current_fit(fit), samples, probabilities)
}
#' @export
fit_bands.wisp_nb <- function(fit, samples, probabilities) {
  values <- as.vector(t(samples))
  bands <- count_bands_rust(fit$plan, values, probabilities)
  lapply(seq_along(probabilities), function(i) c(bands$rows[[i]], bands$population[[i]]))
}
#' @export
fit_bands.wisp_original <- function(fit, samples, probabilities) {
  values <- as.vector(t(samples))
  model_prediction_bands_rust(fit$plan, values, probabilities)
}

# Psi at `points` (from prediction_points()) for each parameter vector: the
# rows of `samples` (or one vector). A points x samples matrix.
curve_values <- function(object, points, samples) UseMethod("curve_values")
#' @export
curve_values.wisp <- function(object, points, samples) {
  curve_values(as_current_fit(object), points, samples)
}
#' @export
curve_values.wisp_nb <- function(object, points, samples) {
  count <- length(object$fitted.parameters)
  samples <- matrix(as.double(samples), ncol = count)
  code <- function(values, levels) as.integer(match(values, levels) - 1L)
  model <- count_labels(object)
  ran <- ifelse(points$ran == "none", -1L, code(points$ran, model$ran_levels))
  values <- count_curves_rust(object$plan, as.vector(t(samples)), as.integer(ran),
                              code(points$context, model$contexts),
                              code(points$species, model$species),
                              code(points$treatment, model$treatments), points$bin)
  matrix(values, nrow = length(points$bin))
}
# The labels of a count fit's plan in the core's order (contexts, species,
# random levels, treatments), as the fit keeps them (wisp_count_result()
# takes them from the plan's description); describing the plan again only
# for a fit without them.
count_labels <- function(fit) {
  groups <- fit$grouping.variables
  if (is.null(groups$context.lvls) || is.null(groups$species.lvls) ||
      !identical(groups$ran.lvls[1], "none") || is.null(fit$treatment$names)) {
    return(count_description(fit$plan))
  }
  list(contexts = groups$context.lvls, species = groups$species.lvls,
       ran_levels = groups$ran.lvls[-1], treatments = fit$treatment$names)
}

#' @export
curve_values.wisp_original <- function(object, points, samples) {
  count <- length(object$fitted.parameters)
  samples <- matrix(as.double(samples), ncol = count)
  code <- function(values, levels) as.integer(match(values, levels) - 1L)
  model <- model_from_bytes(object$plan, object$settings)
  values <- model_curves_rust(object$plan, as.vector(t(samples)),
                              code(points$ran, model$ran_levels),
                              code(points$context, model$contexts),
                              code(points$species, model$species),
                              code(points$treatment, model$treatments), points$bin)
  matrix(values, nrow = length(points$bin))
}

# ---------------------------------------------------------------------------
# Exposure: what an expected count is relative to (count likelihood only;
# the original's rates are expected counts)

# The exposure of rows of fit$count.data.summed (1 on population rows).
summed_exposure <- function(fit, rows) UseMethod("summed_exposure")
#' @export
summed_exposure.wisp <- function(fit, rows) summed_exposure(as_current_fit(fit), rows)
#' @export
summed_exposure.wisp_nb <- function(fit, rows) ifelse(is.na(rows$exposure), 1, rows$exposure)
#' @export
summed_exposure.wisp_original <- function(fit, rows) rep(1, nrow(rows))

# The exposure of the `n` rows of predict()'s `newdata` (default 1).
newdata_exposure <- function(fit, newdata, n, call) UseMethod("newdata_exposure")
#' @export
newdata_exposure.wisp <- function(fit, newdata, n, call) {
  newdata_exposure(as_current_fit(fit), newdata, n, call)
}
#' @export
newdata_exposure.wisp_nb <- function(fit, newdata, n, call) {
  exposure <- newdata$exposure
  if (is.null(exposure)) {
    exposure <- rep(1, n)
  } else if (!is.numeric(exposure) || anyNA(exposure) || any(!is.finite(exposure)) ||
             any(exposure <= 0)) {
    stop_input("`newdata$exposure` must hold positive numbers.", call = call)
  }
  exposure
}
#' @export
newdata_exposure.wisp_original <- function(fit, newdata, n, call) rep(1, n)

# ---------------------------------------------------------------------------
# What needs a likelihood of the counts (Wald statistics and intervals,
# vcov(), quantile residuals, anova()): the count model's objective is one,
# the original's is not.

# Stops with `message` (a wisp_input_error with `call`) unless the fit's
# objective is a likelihood of the counts.
require_likelihood <- function(fit, message, call) UseMethod("require_likelihood")
#' @export
require_likelihood.wisp <- function(fit, message, call) {
  require_likelihood(as_current_fit(fit), message, call)
}
#' @export
require_likelihood.wisp_nb <- function(fit, message, call) invisible(fit)
#' @export
require_likelihood.wisp_original <- function(fit, message, call) {
  stop_input(message, call = call)
}

# The statistics a fit has without a bootstrap: "profile" (Wald, profile
# likelihood where the check flags a point effect) for the count
# likelihood, NULL (none) for the original's.
statistics_without_bootstrap <- function(fit) UseMethod("statistics_without_bootstrap")
#' @export
statistics_without_bootstrap.wisp <- function(fit) {
  statistics_without_bootstrap(as_current_fit(fit))
}
#' @export
statistics_without_bootstrap.wisp_nb <- function(fit) "profile"
#' @export
statistics_without_bootstrap.wisp_original <- function(fit) NULL

# The residuals that wisp_residuals() checks, as list(type, residual) with
# one residual per row of fit$count.data.summed: randomized quantile
# residuals (drawn with `seed` when it is not NULL) for the count likelihood,
# the log residuals (count.log - pred.log) for the original's.
checked_residuals <- function(fit, seed, call) UseMethod("checked_residuals")
#' @export
checked_residuals.wisp <- function(fit, seed, call) {
  checked_residuals(as_current_fit(fit), seed, call)
}
#' @export
checked_residuals.wisp_nb <- function(fit, seed, call) {
  residual <- if (is.null(seed)) quantile_residuals(fit, call = call) else
    with_seed(seed, quantile_residuals(fit, call = call))
  list(type = "quantile", residual = residual)
}
#' @export
checked_residuals.wisp_original <- function(fit, seed, call) {
  d <- fit$count.data.summed
  list(type = "log", residual = d$count.log - d$pred.log)
}

# ---------------------------------------------------------------------------
# Bootstrap schemes

# The resampling schemes of bs_batch() a fit allows, its default first:
# "parametric" (the best calibrated on benchmarks/calibration.R) draws from
# the fitted count likelihood, so the original's default is "cells" (its own
# scheme).
resample_schemes <- function(fit) UseMethod("resample_schemes")
#' @export
resample_schemes.wisp <- function(fit) resample_schemes(as_current_fit(fit))
#' @export
resample_schemes.wisp_nb <- function(fit) c("parametric", "cells", "animals")
#' @export
resample_schemes.wisp_original <- function(fit) c("cells", "animals")

# ---------------------------------------------------------------------------
# Plots

# The y axis of the rate plots on the linear scale.
rate_label <- function(fit) UseMethod("rate_label")
#' @export
rate_label.wisp <- function(fit) rate_label(as_current_fit(fit))
#' @export
rate_label.wisp_nb <- function(fit) {
  per <- if (identical(fit$exposure$rule, "none")) "bin" else "cell"
  sprintf("rate (expected count per %s)", per)
}
#' @export
rate_label.wisp_original <- function(fit) "rate (expected count)"
