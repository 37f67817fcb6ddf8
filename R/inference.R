# Tests and intervals for a fit's fixed effects (model vignette, "Inference").
#
# Two methods, each with p-values that agree with its intervals: the
# unadjusted p-value is below alpha exactly when the unadjusted (1 - alpha)
# interval of the same method excludes 0.
# - Wald: estimate +/- quantile x standard error from the observed
#   information; t quantiles with df = animals - groups for effects of
#   factors that vary between animals only, normal quantiles otherwise.
# - Bootstrap percentile: p = min(1, 2 min(#{x <= 0} + 1, #{x >= 0} + 1) / (R + 1)),
#   never 0, with the order-statistic interval [x_(k), x_(R+1-k)],
#   k = ceiling(alpha (R + 1) / 2) - 1.

#' Two-sided bootstrap p-value of "the effect is 0"
#'
#' @param replicates Bootstrap estimates of one effect (NA ignored).
#' @return min(1, 2 min(#{x <= 0} + 1, #{x >= 0} + 1) / (R + 1)); NA without
#'   replicates. Never below 2 / (R + 1).
#' @keywords internal
#' @noRd
bootstrap_p_value <- function(replicates) {
  replicates <- replicates[!is.na(replicates)]
  n <- length(replicates)
  if (!n) return(NA_real_)
  below <- sum(replicates <= 0)
  above <- sum(replicates >= 0)
  min(1, 2 * (min(below, above) + 1) / (n + 1))
}

#' Order-statistic percentile interval that agrees with [bootstrap_p_value()]
#'
#' @return c(lower, upper): the k-th smallest and k-th largest replicate with
#'   k = ceiling(alpha (R + 1) / 2) - 1; (-Inf, Inf) when k < 1 (too few
#'   replicates for this level); NA without replicates.
#' @keywords internal
#' @noRd
bootstrap_interval <- function(replicates, alpha) {
  replicates <- sort(replicates[!is.na(replicates)])
  n <- length(replicates)
  if (!n) return(c(NA_real_, NA_real_))
  # A small tolerance keeps k from jumping when alpha (R + 1) / 2 is a whole
  # number that floating point lands just above.
  k <- ceiling(alpha * (n + 1) / 2 - 1e-9) - 1
  if (k < 1) return(c(-Inf, Inf))
  c(replicates[k], replicates[n + 1 - k])
}

#' Wald p-values and intervals
#'
#' @param estimate,se Estimates and standard errors (NA se: no test).
#' @param df Degrees of freedom per effect (Inf: normal quantiles).
#' @param alpha Level of the intervals.
#' @return A data.frame with `statistic`, `df`, `p.value`, `lower`, `upper`.
#' @keywords internal
#' @noRd
wald_tests <- function(estimate, se, df, alpha) {
  ok <- !is.na(estimate) & !is.na(se) & is.finite(se) & se > 0
  statistic <- ifelse(ok, estimate / se, NA_real_)
  quantile <- ifelse(is.finite(df), stats::qt(1 - alpha / 2, pmax(df, 1)), stats::qnorm(1 - alpha / 2))
  p <- ifelse(ok, 2 * ifelse(is.finite(df), stats::pt(-abs(statistic), pmax(df, 1)),
                             stats::pnorm(-abs(statistic))), NA_real_)
  data.frame(statistic = statistic, df = df, p.value = p,
             lower = ifelse(ok, estimate - quantile * se, NA_real_),
             upper = ifelse(ok, estimate + quantile * se, NA_real_))
}

#' Significance marks of adjusted p-values
#' @keywords internal
#' @noRd
significance_marks <- function(p_adjusted, alpha) {
  ifelse(is.na(p_adjusted), "",
  ifelse(p_adjusted < alpha / 50, "***",
  ifelse(p_adjusted < alpha / 5, "**",
  ifelse(p_adjusted < alpha, "*", "ns"))))
}

#' The smallest p-value a bootstrap of R replicates can give, and whether
#' Holm can reject anything with m tests at level alpha
#' @keywords internal
#' @noRd
bootstrap_resolution <- function(replicates, tests, alpha) {
  smallest <- 2 / (replicates + 1)
  list(smallest = smallest, holm_can_reject = smallest * tests < alpha,
       needed = ceiling(2 * tests / alpha - 1))
}
