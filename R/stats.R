# The original's bootstrap statistics (model vignette §15.3),
# kept for reproduction as wisp_statistics(method = "centred"), and the
# bootstrap's attachment to a fit.

# The two bootstrap p-value rules, side by side:
# - centred_p_value(), the original's rule: wisp_statistics(method = "centred")
#   only, kept to reproduce the original package's results (parameter_statistics());
# - bootstrap_p_value(), the percentile rule, with bootstrap_interval() the
#   interval that agrees with it: wisp_statistics(method = "percentile"), the
#   default with replicates (wisp(bootstraps.num =), bs_batch()), under either
#   likelihood.

#' Two-sided centred-bootstrap p-value
#'
#' The replicates, centred on their mean, approximate the estimate's
#' distribution under the null of no effect. With F the empirical CDF of the
#' centred replicates, p = 1 - F(|estimate|) + F(-|estimate|), the original's
#' rule. Only replicates count (the original also counted the full-data fit
#' as a sample).
#' @param replicates Bootstrap estimates of one parameter (NA ignored).
#' @param estimate The full-data estimate.
#' @return A p-value in [0, 1], or NA without replicates.
#' @keywords internal
#' @noRd
centred_p_value <- function(replicates, estimate) {
  replicates <- replicates[!is.na(replicates)]
  if (!length(replicates) || is.na(estimate)) return(NA_real_)
  centred <- stats::ecdf(replicates - mean(replicates))
  1 - centred(abs(estimate)) + centred(-abs(estimate))
}

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

#' Estimates, intervals and multiplicity-adjusted p-values
#'
#' @param estimates Named full-data estimates (the fit, or replicate medians).
#' @param replicates Replicate x parameter matrix (rows of failed or excluded
#'   replicates removed), columns in the order of `estimates`.
#' @param tested Logical: which parameters get p-values (the non-reference
#'   fixed effects).
#' @param alpha Family-wise error rate.
#' @param adjustment `"holm"` (the real step-down procedure, via
#'   [stats::p.adjust()]) or `"bonferroni"`.
#' @return A data.frame with the original's columns `parameter, estimate,
#'   CI.low, CI.high, p.value, p.value.adj, alpha.adj, significance`.
#'   Tested parameters get percentile intervals at their own adjusted level;
#'   untested ones at `alpha`.
#' @keywords internal
#' @noRd
parameter_statistics <- function(estimates, replicates, tested, alpha = 0.05,
                                 adjustment = c("holm", "bonferroni")) {
  adjustment <- match.arg(adjustment)
  p <- rep(NA_real_, length(estimates))
  for (j in which(tested)) p[j] <- centred_p_value(replicates[, j], estimates[j])
  p_adj <- rep(NA_real_, length(p))
  alpha_adj <- rep(NA_real_, length(p))
  has_p <- !is.na(p)
  m <- sum(has_p)
  if (m > 0) {
    p_adj[has_p] <- stats::p.adjust(p[has_p], method = adjustment)
    if (adjustment == "holm") {
      # Holm compares the k-th smallest p-value with alpha / (m - k + 1).
      rank <- rank(p[has_p], ties.method = "first")
      alpha_adj[has_p] <- alpha / (m - rank + 1)
    } else {
      alpha_adj[has_p] <- alpha / m
    }
  }
  level <- ifelse(is.na(alpha_adj), alpha, alpha_adj)
  interval <- vapply(seq_along(estimates), function(j) {
    values <- replicates[, j]
    values <- values[!is.na(values)]
    if (!length(values)) return(c(NA_real_, NA_real_))
    unname(stats::quantile(values, c(level[j] / 2, 1 - level[j] / 2), type = 7))
  }, numeric(2))
  significance <- ifelse(is.na(p_adj), "",
                  ifelse(p_adj < alpha / 50, "***",
                  ifelse(p_adj < alpha / 5, "**",
                  ifelse(p_adj < alpha, "*", "ns"))))
  data.frame(parameter = names(estimates), estimate = unname(estimates),
             CI.low = interval[1, ], CI.high = interval[2, ], p.value = p,
             p.value.adj = p_adj, alpha.adj = alpha_adj, significance = significance,
             stringsAsFactors = FALSE, row.names = NULL)
}

# Runs the bootstrap for wisp() and attaches it with its statistics.
wisp_bootstrap_statistics <- function(result, bootstraps.num, max.fork, use.median,
                                      converged.only, seed, verbose) {
  started <- proc.time()[["elapsed"]]
  boot <- bs_batch(result, bootstraps.num, max.fork, seed = seed,
                   progress = verbose)
  if (verbose) {
    d <- boot$diagnostics
    message(sprintf("Bootstrap: %d replicates on %d worker%s, %d converged, %d failed (%.1f s).",
                    bootstraps.num, max.fork, if (max.fork > 1) "s" else "",
                    sum(d$converged %in% TRUE), sum(!d$ok), proc.time()[["elapsed"]] - started))
  }
  attach_bootstrap(result, boot, use.median = use.median, converged.only = converged.only)
}

#' Attach a bootstrap and its statistics to a fit (wisp(bootstraps.num =))
#'
#' Sets what only wisp() chooses (`converged.only`, `use.median`'s estimates),
#' then attaches the replicates through wisp_statistics(boot =), which adds
#' the band and the original's fields and warns (bootstrap_fields(),
#' warn_bootstrap_replicates(), warn_bootstrap_resolution()), so that the two
#' ways of bootstrapping a fit give it the same things.
#' @param result A `"wisp"` object.
#' @param boot A `"wisp_bootstrap"` of it.
#' @param alpha Family-wise error rate.
#' @param adjustment `"holm"` or `"bonferroni"`.
#' @keywords internal
#' @noRd
attach_bootstrap <- function(result, boot, use.median = FALSE, converged.only = TRUE,
                             alpha = 0.05, adjustment = "holm") {
  d <- boot$diagnostics
  converged <- d$converged %in% TRUE
  boot$converged.only <- converged.only
  use <- d$ok & (!converged.only | converged)
  replicates <- boot$t[use, , drop = FALSE]
  if (nrow(replicates) < 2) {
    stop("fewer than 2 usable bootstrap replicates; no statistics can be computed",
         call. = FALSE)
  }
  if (use.median) {
    medians <- apply(replicates, 2, stats::median, na.rm = TRUE)
    names(medians) <- names(result$fitted.parameters)
    # Parameters the scheme does not redraw (warps under resample =
    # "animals") have no replicates: they keep their estimates.
    unresampled <- colSums(!is.na(replicates)) == 0
    medians[unresampled] <- result$fitted.parameters[unresampled]
    result$fitted.parameters <- medians
    pred_log <- fit_predictions(result, medians)
    result$count.data.summed$pred.log <- pred_log
    result$count.data.summed$pred <- fit_response(result, pred_log)
  }
  result$bootstrap <- NULL
  wisp_statistics(result, method = "percentile", level = 1 - alpha, adjustment = adjustment,
                  boot = boot)
}

# What replicates give a fit besides its statistics, from
# wisp(bootstraps.num =) and wisp_statistics(boot =) alike: the 2.5 % and
# 97.5 % quantiles of the predicted log rates (`pred.low`, `pred.high` of
# count.data.summed: the rate-count figure's band) over the replicates the
# statistics use, and the original's `sample.params.type`,
# `sample.params.bs` (every replicate, then the estimates as the last row)
# and `diagnostics.bs`.
bootstrap_fields <- function(result) {
  boot <- result$bootstrap
  d <- boot$diagnostics
  use <- bootstrap_used_replicates(boot)
  if (sum(use) >= 2) {
    bands <- fit_bands(result, boot$t[use, , drop = FALSE], c(0.025, 0.975))
    result$count.data.summed$pred.low <- bands[[1]]
    result$count.data.summed$pred.high <- bands[[2]]
  }
  converged <- d$converged %in% TRUE
  result$sample.params.type <- "bs"
  result$sample.params.bs <- rbind(boot$t, estimate = result$fitted.parameters)
  result$diagnostics.bs <- data.frame(
    pen.neg.value = d$pen.neg.value, neg.loglik = d$neg.loglik,
    success.code = ifelse(!d$ok, NA_integer_, ifelse(converged, 3L,
                   ifelse(d$code %in% model_rules()$termination$limits, 5L, 0L))),
    num.evals = d$num.evals
  )
  result
}

# The warnings about the replicates themselves, when they are attached:
# fewer than 90 % converged, and a single random level (the bootstrap then
# says nothing about variation between animals).
warn_bootstrap_replicates <- function(result) {
  boot <- result$bootstrap
  d <- boot$diagnostics
  converged <- d$converged %in% TRUE
  if (mean(converged) < 0.9) {
    warning(sprintf("only %d of %d bootstrap replicates converged (%.0f %%)%s", sum(converged),
                    nrow(d), 100 * mean(converged),
                    if (!isFALSE(boot$converged.only) && any(converged)) {
                      "; statistics use the converged ones"
                    } else ""),
            call. = FALSE)
  }
  if (sum(result$grouping.variables$ran.lvls != "none") == 1L) {
    warning("there is a single random level (animal): the bootstrap (resample = \"",
            boot$resample, "\") redraws counts within it, so the intervals reflect ",
            "variation between cells only, not variation between animals.", call. = FALSE)
  }
  invisible(result)
}

# Expected counts of the rows of fit$count.data.summed from their log rates
# (count likelihood: exposure x rate, the rate itself on population rows).
fit_response <- function(fit, pred_log) {
  curve_rate(fit)(pred_log) * summed_exposure(fit, fit$count.data.summed)
}
