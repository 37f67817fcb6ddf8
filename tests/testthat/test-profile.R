# Profile-likelihood statistics of transition points (method = "profile").

# A weakly placed transition (log-rate steps 0.3-0.6, 3 animals per age,
# point warps SD 0.3): gene1's "right" point effect is truly 0, yet its Wald
# statistic is -4.3 / 0.73 (p about 4e-9).
weak_step_fit <- once(function() {
  design <- wisp_design(between = list(age = c("P12", "P18")),
                        within = list(hemisphere = c("left", "right")), animals.per.group = 3)
  data <- wisp_simulate(design = design, n.genes = 4, n.bins = 50, cells.per.bin = 5,
                        degrees = 1L, rate.step = c(0.3, 0.6), effect.prob = c(0, 0, 1, 1),
                        seed = 57, random.sd = c(point = 0.3, rate = 0.1, slope = 0.15))
  # wisp()'s default statistics (profile-checked Wald tests).
  fit <- suppressWarnings(wisp(data, verbose = FALSE))
  list(data = data, fit = fit)
})

test_that("a true-null point effect the Wald test calls at p < 1e-6 is flagged and profiled", {
  case <- weak_step_fit()
  truth <- attr(case$data, "truth")$effects
  wald <- wisp_statistics(case$fit, method = "wald")$stats$parameters
  name <- "beta_tpoint_context1_gene1_right_X_Tns/Blk1"
  expect_equal(unname(truth[name]), 0)
  expect_lt(wald$p.value[wald$parameter == name], 1e-6)
  # The fit's own (default) statistics flag and profile it.
  expect_identical(case$fit$stats$method, "profile")
  profiled <- case$fit$stats
  row <- profiled$parameters[profiled$parameters$parameter == name, ]
  expect_true(row$flagged)
  expect_equal(row$method, "profile")
  expect_true(row$p.value >= 0.05 || (row$CI.low <= 0 && 0 <= row$CI.high))
  # The estimate is the same; the interval holds it.
  expect_equal(row$estimate, wald$estimate[wald$parameter == name])
  expect_true(row$CI.low <= row$estimate && row$estimate <= row$CI.high)
})

test_that("profile tests and intervals agree, and unflagged effects keep their Wald statistics", {
  case <- weak_step_fit()
  wald <- wisp_statistics(case$fit, method = "wald")$stats$parameters
  profiled <- wisp_statistics(case$fit, method = "profile")$stats
  p <- profiled$parameters
  points <- p$component == "transition point" & !is.na(p$p.value)
  expect_true(all(!is.na(p$flagged[points])))
  expect_true(all(is.na(p$flagged[!points])))
  kept <- !(points & p$method == "profile")
  for (column in c("estimate", "CI.low", "CI.high", "p.value")) {
    expect_equal(p[[column]][kept], wald[[column]][kept])
  }
  by_profile <- p[p$method == "profile", ]
  expect_gt(nrow(by_profile), 0)
  # The profile interval is {v : D(v) < q^2} and p comes from D(0): p <
  # alpha exactly when the interval excludes 0 (its ends are found to
  # within 0.05 on the signed-root scale, so the test leaves a margin).
  clear <- abs(stats::qnorm(by_profile$p.value / 2)) - stats::qnorm(0.975)
  excludes <- by_profile$CI.low > 0 | by_profile$CI.high < 0
  expect_equal(excludes[abs(clear) > 0.1], (by_profile$p.value < 0.05)[abs(clear) > 0.1])
  # The checks: D at 0 gives the profile p-value (signed root, normal for
  # these within-animal effects, t where the Wald test used t).
  checks <- profiled$profiles
  done <- checks$method == "profile"
  df <- wald$df[match(checks$parameter, wald$parameter)]
  root <- sqrt(pmax(checks$deviance.zero[done], 0))
  expected <- ifelse(is.finite(df[done]), 2 * stats::pt(-root, pmax(df[done], 1)),
                     2 * stats::pnorm(-root))
  expect_equal(checks$p.value[done], expected)
  # Holm within each gene runs on the p-values each effect got.
  gene <- p$gene[!is.na(p$p.value)]
  for (g in unique(gene)) {
    rows <- which(!is.na(p$p.value) & p$gene == g)
    expect_equal(p$p.value.adj[rows], stats::p.adjust(p$p.value[rows], "holm"))
  }
})

test_that("an effect is unflagged only where its checks look quadratic", {
  case <- weak_step_fit()
  wald <- wisp_statistics(case$fit, method = "wald")$stats$parameters
  checks <- wisp_statistics(case$fit, method = "profile")$stats$profiles
  df <- wald$df[match(checks$parameter, wald$parameter)]
  q <- ifelse(is.finite(df), stats::qt(0.975, pmax(df, 1)), stats::qnorm(0.975))
  z <- checks$estimate / checks$std.error
  quadratic <- abs(sqrt(pmax(checks$deviance.lower, 0)) - q) <= 0.25 &
    abs(sqrt(pmax(checks$deviance.upper, 0)) - q) <= 0.25 &
    abs(sign(z) * sqrt(pmax(checks$deviance.zero, 0)) - z) <= 0.25 &
    checks$deviance.zero >= -0.01 & (abs(z) > q) == (checks$deviance.zero > q^2)
  quadratic[is.na(quadratic)] <- FALSE
  expect_gt(sum(quadratic), 0)
  expect_gt(sum(!quadratic), 0)
  expect_equal(checks$flagged, !quadratic)
})

test_that("confint() gives the fit's profile intervals, and bad tolerances are refused", {
  case <- weak_step_fit()
  fit <- wisp_statistics(case$fit, method = "profile")
  name <- "beta_tpoint_context1_gene1_right_X_Tns/Blk1"
  row <- fit$stats$parameters[fit$stats$parameters$parameter == name, ]
  expect_equal(unname(confint(fit, parm = name)[1, ]), c(row$CI.low, row$CI.high))
  expect_false(isTRUE(all.equal(unname(confint(fit, parm = name, method = "wald")[1, ]),
                                c(row$CI.low, row$CI.high))))
  expect_error(wisp_statistics(case$fit, method = "profile", tolerance = -1), "tolerance")
  expect_output(print(fit), "by profile likelihood")
})

# One animal: no random effects, so the marginal objective M of the profile
# is the count objective J itself (with the curves' priors), which the plain-R
# reference of helper-reference-count.R computes from the tokens.
test_that("profile deviances and intervals match a brute-force profile by stats::optim", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  bins <- 30
  data <- wisp_simulate(n.genes = 1, n.random = 1, n.bins = bins, cells.per.bin = 6,
                        degrees = 1L, rate.step = c(0.6, 0.8), effect.prob = 1,
                        point.effect = 3, cell.ids = TRUE, seed = 15)
  fit <- suppressWarnings(wisp(data, model.settings = list(exposure = "cells"), verbose = FALSE,
                               fit_only = TRUE, max.fork = 1))
  expect_equal(unname(fit$degrees[1, 1]), 1)
  # tolerance 1e-3 profiles every point effect (this one's checks are within
  # 0.16 of quadratic, so the default would leave it to Wald).
  stats <- wisp_statistics(fit, method = "profile", tolerance = 1e-3)$stats
  check <- stats$profiles
  expect_identical(nrow(check), 1L)
  expect_identical(check$method, "profile")

  # The reference problem, written from the model's definition: treatments
  # left (reference) and right, W = [1 0; 1 1]; the default priors (slope
  # and step SD 2, effect SD 1); points of a 1-transition curve in
  # (0.5 + g, B + 0.5 - g).
  tokens <- data
  tokens$treatment <- as.character(tokens$hemisphere)
  rows <- reference_count_table(tokens, "treatment", exposure = "cells")
  weights <- matrix(c(1, 1, 0, 1), 2, dimnames = list(c("left", "right"), c("left", "right")))
  priors <- list(slope_sd = 2, step_sd = 2, effect_sd = 1, weights = weights)
  sigma <- matrix(0, 1, 3, dimnames = list("gene1", c("point", "rate", "slope")))
  lower <- 0.5 + reference_count_gap(bins)
  upper <- bins + 0.5 - reference_count_gap(bins)
  slope_max <- reference_count_slope_max
  expit <- reference_count_sigmoid
  objective <- function(rates, slope_logits, points, log_phi) {
    curve <- function(t, R, s, p) {
      data.frame(context = "context1", species = "gene1", treatment = t,
                 component = c("Rt", "Rt", "tslope", "tpoint"), block = c(1, 2, 1, 1),
                 value = c(R, s, p))
    }
    curves <- rbind(curve("left", rates[1:2], slope_max * expit(slope_logits[1]), points[1]),
                    curve("right", rates[3:4], slope_max * expit(slope_logits[2]), points[2]))
    reference_count_objective(rows, curves, NULL,
                              matrix(log_phi, 1, 1, dimnames = list("context1", "gene1")),
                              sigma, bins, priors)$value
  }
  # x: 4 block rates, 2 slope logits, the points' logits on their range (or,
  # with the effect held at v, the left point's on the range that keeps both
  # inside), log phi.
  free <- function(x) {
    objective(x[1:4], x[5:6], lower + (upper - lower) * expit(x[7:8]), x[9])
  }
  minimise <- function(f, x) {
    best <- list(par = x, value = f(x))
    for (round in 1:4) {
      next_fit <- stats::optim(best$par, f, method = "BFGS",
                               control = list(maxit = 1000, reltol = 1e-14))
      improved <- next_fit$value < best$value - 1e-9
      if (next_fit$value < best$value) best <- next_fit
      if (!improved) break
    }
    best
  }
  # The unconstrained fit from a flat start reaches the package's optimum.
  start <- c(rep(log1p(mean(rows$count / rows$exposure)), 4), 0, 0, 0, 0, log(0.05))
  top <- minimise(free, start)
  expect_lt(abs(top$value - fit$fit.diagnostics$pen.neg.value), 1e-4)
  points <- lower + (upper - lower) * expit(top$par[7:8])
  expect_lt(abs(diff(points) - check$estimate), 1e-3)
  # D(v) = 2 (min J with the effect held at v - min J), each held fit
  # started from the free optimum moved onto the constraint.
  deviance <- function(v) {
    from <- lower + max(0, -v)
    to <- upper - max(0, v)
    held <- function(x) {
      left <- from + (to - from) * expit(x[7])
      objective(x[1:4], x[5:6], c(left, left + v), x[8])
    }
    left <- min(max(points[1], from + 1e-6), to - 1e-6)
    x <- c(top$par[1:6], reference_count_logit((left - from) / (to - from)), top$par[9])
    2 * (minimise(held, x)$value - top$value)
  }
  q <- stats::qnorm(0.975)
  wald_ends <- check$estimate + c(-1, 1) * q * check$std.error
  brute <- vapply(c(0, wald_ends), deviance, 0)
  expect_equal(c(check$deviance.zero, check$deviance.lower, check$deviance.upper), brute,
               tolerance = 1e-3)
  # Not quadratic: the two ends differ from q^2 = 3.84 by more than 0.4.
  expect_gt(min(abs(brute[2:3] - q^2)), 0.4)
  expect_equal(check$p.value, 2 * stats::pnorm(-sqrt(brute[1])), tolerance = 1e-3)
  # The interval's ends are where the brute-force sqrt(D) crosses q (the
  # package finds them to 0.05 on that scale) ...
  at_ends <- vapply(c(check$CI.low, check$CI.high), deviance, 0)
  expect_lt(max(abs(sqrt(at_ends) - q)), 0.05)
  # ... and on a grid over the effect, D < q^2 inside the interval, > q^2
  # outside, with the profile falling then rising.
  grid <- seq(check$CI.low - 2, check$CI.high + 2, length.out = 9)
  on_grid <- vapply(grid, deviance, 0)
  inside <- grid > check$CI.low & grid < check$CI.high
  expect_true(all(on_grid[inside] < q^2))
  expect_true(all(on_grid[!inside] > q^2))
  lowest <- which.min(on_grid)
  expect_true(all(diff(on_grid[seq_len(lowest)]) < 0))
  expect_true(all(diff(on_grid[lowest:length(grid)]) > 0))
  row <- stats$parameters[stats$parameters$parameter == check$parameter, ]
  expect_equal(c(row$CI.low, row$CI.high), c(check$CI.low, check$CI.high))
})
