# Randomized quantile residuals of the count likelihood.

quantile_fit <- function(seed, degrees = NULL, fitted_degrees = NULL, dispersion = 0.05,
                         cells = 3L) {
  counts <- wisp_simulate(n.genes = 2, n.random = 4, n.bins = 40, seed = seed,
                          cells.per.bin = cells, degrees = degrees, dispersion = dispersion)
  if (is.null(fitted_degrees)) fitted_degrees <- attr(counts, "truth")$degrees
  wisp(counts, degrees = fitted_degrees, fit_only = TRUE, verbose = FALSE,
       model.settings = list(LRO_cost = "none"))
}

ks_p <- function(fit, seed) {
  set.seed(seed)
  r <- residuals(fit, type = "quantile")
  suppressWarnings(stats::ks.test(r[!is.na(r)], "pnorm")$p.value)
}

test_that("each quantile residual is a normal quantile inside its count's probability step", {
  fit <- quantile_fit(301)
  set.seed(1)
  r <- residuals(fit, type = "quantile")
  d <- fit$count.data.summed
  # Population rows and empty cells have none.
  expect_true(all(is.na(r[d$ran == "none" | is.na(d$count)])))
  observed <- which(!is.na(r))
  expect_gt(length(observed), 100)
  # By hand: F(y) as a sum of dnbinom terms, size = exposure / dispersion.
  for (i in observed[c(1, 50, 100)]) {
    phi <- fit$gamma.dispersion[d$species[i], d$context[i]]
    mass <- stats::dnbinom(0:d$count[i], size = d$exposure[i] / phi, mu = d$pred[i])
    below <- sum(mass[-length(mass)])
    expect_true(below - 1e-12 <= stats::pnorm(r[i]) && stats::pnorm(r[i]) <= sum(mass) + 1e-12)
  }
  # R's random stream decides the draw within the step.
  set.seed(1)
  expect_identical(residuals(fit, type = "quantile"), r)
  expect_error(residuals(small_fit_original(), type = "quantile"), class = "wisp_input_error",
               regexp = "count likelihood")
})

test_that("quantile residuals pass a right model and flag a wrong one", {
  skip_on_cran()
  # The simulated structure, fitted: standard normal (Kolmogorov-Smirnov at 1 %).
  for (seed in 301:303) expect_gt(ks_p(quantile_fit(seed), seed), 0.01)
  # Overdispersed counts judged as Poisson (the dispersion set to 0).
  for (seed in 301:303) {
    fit <- quantile_fit(seed, dispersion = 0.3)
    expect_gt(ks_p(fit, seed), 0.01)
    fit$gamma.dispersion[] <- 0
    expect_lt(ks_p(fit, seed), 0.01)
  }
  # Two transitions fitted as none. (The pooled test is a weak detector of a
  # missing transition when the dispersion is estimated, which absorbs much
  # of the misfit: one of two transitions missing often passes. Plot the
  # residuals against the bins to see that.)
  for (seed in c(202, 203, 205)) {
    right <- quantile_fit(seed, degrees = 2L, dispersion = 0.01, cells = 8L)
    expect_gt(ks_p(right, seed), 0.01)
    wrong <- quantile_fit(seed, degrees = 2L, fitted_degrees = 0L, dispersion = 0.01, cells = 8L)
    expect_lt(ks_p(wrong, seed), 0.01)
  }
})
