# Bootstrap statistics (spec section 6.2, with the original's errors fixed).

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
bootstrap_p_value <- function(replicates, estimate) {
  replicates <- replicates[!is.na(replicates)]
  if (!length(replicates) || is.na(estimate)) return(NA_real_)
  centred <- stats::ecdf(replicates - mean(replicates))
  1 - centred(abs(estimate)) + centred(-abs(estimate))
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
  for (j in which(tested)) p[j] <- bootstrap_p_value(replicates[, j], estimates[j])
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
