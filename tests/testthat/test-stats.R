test_that("the centred-bootstrap p-value counts both tails of the centred replicates", {
  replicates <- c(1, 2, 3, 4, 5, 6, 7, 8, 9, 10) # mean 5.5, centred -4.5 .. 4.5
  # estimate 3.5: 1 - F(3.5) = share of centred values > 3.5 = 1/10 (4.5);
  # F(-3.5) = share <= -3.5 = 2/10 (-4.5, -3.5)
  expect_equal(wispack:::centred_p_value(replicates, 3.5), 0.3)
  expect_equal(wispack:::centred_p_value(replicates, -3.5), 0.3)
  expect_equal(wispack:::centred_p_value(replicates, 0), 1)
  expect_equal(wispack:::centred_p_value(replicates, 100), 0)
  expect_identical(wispack:::centred_p_value(c(NA, NA), 1), NA_real_)
})

test_that("Holm adjustment is the real step-down procedure of p.adjust", {
  set.seed(3)
  estimates <- c(a = 0.05, b = 2, c = 0.3, d = 1, e = 0)
  replicates <- sapply(c(0.2, 0.5, 0.4, 0.3, 0.2), function(sd) rnorm(400, 0, sd))
  stats <- wispack:::parameter_statistics(estimates, replicates,
                                          tested = c(TRUE, TRUE, TRUE, TRUE, FALSE))
  tested <- stats[1:4, ]
  expect_equal(tested$p.value.adj, p.adjust(tested$p.value, "holm"))
  expect_true(all(tested$p.value.adj <= 1))
  expect_identical(stats$significance[5], "")
  expect_true(is.na(stats$p.value[5]))
  # alpha.adj follows the ranks: the smallest p-value is tested at alpha / m
  expect_equal(tested$alpha.adj[which.min(tested$p.value)], 0.05 / 4)
  bonferroni <- wispack:::parameter_statistics(estimates, replicates, c(TRUE, TRUE, TRUE, TRUE, FALSE),
                                               adjustment = "bonferroni")
  expect_equal(bonferroni$p.value.adj[1:4], pmin(1, 4 * tested$p.value))
})

test_that("intervals are type-7 percentiles at the parameter's adjusted level", {
  replicates <- cbind(x = seq(0, 1, length.out = 101), y = seq(10, 20, length.out = 101))
  stats <- wispack:::parameter_statistics(c(x = 0.5, y = 15), replicates, tested = c(TRUE, FALSE))
  expect_equal(stats$CI.low[2], unname(quantile(replicates[, 2], 0.025)))
  expect_equal(stats$CI.high[2], unname(quantile(replicates[, 2], 0.975)))
  expect_equal(stats$CI.low[1], unname(quantile(replicates[, 1], stats$alpha.adj[1] / 2)))
  expect_named(stats, c("parameter", "estimate", "CI.low", "CI.high", "p.value",
                        "p.value.adj", "alpha.adj", "significance"))
})

test_that("significance marks follow the adjusted p-value", {
  replicates <- cbind(rnorm(1000, 0, 0.01), rnorm(1000, 0, 1))
  stats <- wispack:::parameter_statistics(c(a = 5, b = 0.01), replicates, c(TRUE, TRUE))
  expect_identical(stats$significance, c("***", "ns"))
})
