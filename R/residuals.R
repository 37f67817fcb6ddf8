# Fitted values and residuals of a "wisp" fit: fitted(), residuals() and the
# randomized quantile residuals of the count likelihood.

#' Fitted values and residuals of a wisp fit
#'
#' One value per row of `fit$count.data.summed` (population rows, `ran ==
#' "none"`, included), in its order, except rows of an animal (random level)
#' under a treatment it was never observed in. Those exist only in the
#' summed table of `likelihood = "original"` (as in the original package),
#' which has every animal x treatment combination: with animals nested in a
#' between-animal factor (e.g. each animal has one genotype), an animal has
#' no fitted values under the other levels of that factor. `fitted(fit)`
#' is `fit$count.data.summed$pred[keep]` with `keep` the observed
#' combinations' rows (all rows under the count likelihood, whose table holds
#' observed cells only).
#'
#' `residuals()` follows R's convention, observed minus fitted. Note that
#' the residual tables of the original wispack were fitted minus observed:
#' their signs are reversed.
#'
#' `residuals(type = "quantile")` (count likelihood only) gives randomized
#' quantile residuals (Dunn and Smyth 1996): for an observed count y with
#' fitted negative-binomial distribution F (mean `pred`, size `exposure /
#' dispersion`), `qnorm(u)` with u drawn uniformly between F(y - 1) and
#' F(y). They are standard normal when the model is right, whatever the
#' counts' sizes, so a QQ plot or a test against the normal shows a misfit
#' (a missing transition, ignored overdispersion). The draws use R's random
#' number generator: call [set.seed()] first to repeat them.
#'
#' @param object A `"wisp"` object from [wisp()].
#' @param type For `fitted()`: `"response"` (expected counts, `pred`) or
#'   `"link"` (log scale, `pred.log` = log(rate + 1)). For `residuals()`:
#'   `"response"` (`count - pred`), `"log"` (`count.log - pred.log`) or
#'   `"quantile"` (randomized quantile residuals, count likelihood only).
#' @param ... Nothing: an argument these methods do not take is an error.
#' @return A numeric vector; residuals are `NA` where the summed cell is
#'   empty (no observed count) and, for the quantile residuals, on the
#'   population rows.
#' @seealso [predict.wisp()] for the curves at any bins and for intervals.
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 2, n.bins = 40)
#' fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
#' head(fitted(fit))
#' summary(residuals(fit, type = "log"))
fitted.wisp <- function(object, type = c("response", "link"), ...) {
  check_unused_arguments(..., .method = "fitted.wisp")
  type <- match_choice(type, "type", c("response", "link"))
  d <- object$count.data.summed[observed_rows(object), , drop = FALSE]
  if (type == "response") d$pred else d$pred.log
}

#' @rdname fitted.wisp
#' @export
residuals.wisp <- function(object, type = c("response", "log", "quantile"), ...) {
  check_unused_arguments(..., .method = "residuals.wisp")
  type <- match_choice(type, "type", c("response", "log", "quantile"))
  keep <- observed_rows(object)
  d <- object$count.data.summed[keep, , drop = FALSE]
  switch(type,
    response = d$count - d$pred,
    log = d$count.log - d$pred.log,
    quantile = quantile_residuals(object)[keep]
  )
}

# Randomized quantile residuals of a count fit (see ?residuals.wisp).
quantile_residuals <- function(fit, call = sys.call(-1)) {
  require_likelihood(fit, paste0(
    "quantile residuals need the count likelihood (likelihood = \"nb\"): the ",
    "original's objective is not a distribution of the counts."), call = call)
  d <- fit$count.data.summed
  observed <- which(!is.na(d$count) & d$ran != "none")
  dispersion <- fit$gamma.dispersion
  phi <- dispersion[cbind(match(d$species[observed], rownames(dispersion)),
                          match(d$context[observed], colnames(dispersion)))]
  y <- d$count[observed]
  mu <- d$pred[observed]
  size <- d$exposure[observed] / phi
  poisson <- !is.finite(size) | phi <= 0
  cdf <- function(q) {
    out <- numeric(length(q))
    out[poisson] <- stats::ppois(q[poisson], mu[poisson])
    out[!poisson] <- stats::pnbinom(q[!poisson], size = size[!poisson], mu = mu[!poisson])
    out
  }
  lower <- ifelse(y > 0, cdf(y - 1), 0)
  upper <- cdf(y)
  u <- stats::runif(length(y), lower, upper)
  # Keep qnorm finite where the fitted distribution puts (almost) no mass.
  u <- pmin(pmax(u, .Machine$double.eps), 1 - .Machine$double.eps)
  out <- rep(NA_real_, nrow(d))
  out[observed] <- stats::qnorm(u)
  out
}
