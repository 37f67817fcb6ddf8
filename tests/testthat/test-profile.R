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
  fit <- suppressWarnings(wisp(data, verbose = FALSE, fit_only = TRUE))
  list(data = data, fit = fit)
})

test_that("a true-null point effect the Wald test calls at p < 1e-6 is flagged and profiled", {
  case <- weak_step_fit()
  truth <- attr(case$data, "truth")$effects
  wald <- wisp_statistics(case$fit, method = "wald")$stats$parameters
  profiled <- wisp_statistics(case$fit, method = "profile")$stats
  name <- "beta_tpoint_context1_gene1_right_X_Tns/Blk1"
  expect_equal(unname(truth[name]), 0)
  expect_lt(wald$p.value[wald$parameter == name], 1e-6)
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
