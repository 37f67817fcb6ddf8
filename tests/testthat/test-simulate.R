test_that("the simulator returns the default roles, one column per fixed effect and a truth", {
  counts <- wisp_simulate(n.genes = 2, n.random = 3, n.bins = 30,
                          fixed.effects = list(hemisphere = c("left", "right"),
                                               age = c(7, 12, 18)), seed = 4)
  expect_named(counts, c("count", "bin", "context", "species", "ran", "hemisphere", "age"))
  expect_true(is.numeric(counts$age))
  truth <- attr(counts, "truth")
  expect_named(truth, c("degrees", "parameters", "effects", "warping", "pred.log", "settings"))
  expect_identical(dim(truth$degrees), c(1L, 2L))
  expect_true(all(counts$count >= 0 & counts$count == round(counts$count)))
  # 2 genes x 3 mice x 6 treatments x 30 bins x 5 cells
  expect_identical(nrow(counts), 2L * 3L * 6L * 30L * 5L)
})

test_that("simulated counts follow the true curves", {
  counts <- wisp_simulate(n.genes = 2, n.random = 3, n.bins = 40, cells.per.bin = 20,
                          dispersion = 0, seed = 9)
  truth <- attr(counts, "truth")
  cells <- aggregate(count ~ bin + context + species + ran + hemisphere, data = counts, FUN = sum)
  model <- wispack:::model_build(counts, "hemisphere", NULL, truth$degrees, bins = 40)
  summed <- model$summed
  real <- summed$ran != "none"
  expected <- exp(truth$pred.log[real]) - 1
  observed <- summed$count[real]
  # Poisson sums: standardised residuals average about 0 with unit spread.
  z <- (observed - expected) / sqrt(expected)
  expect_lt(abs(mean(z)), 0.1)
  expect_lt(abs(stats::sd(z) - 1), 0.1)
  # block means on the log scale are near the true rates
  expect_lt(stats::median(abs(log1p(observed) - truth$pred.log[real])), 0.15)
})

test_that("the simulator leaves the caller's random stream alone and is reproducible", {
  set.seed(1)
  before <- runif(1)
  set.seed(1)
  first <- wisp_simulate(n.genes = 1, n.bins = 20, seed = 2)
  after <- runif(1)
  expect_identical(before, after)
  expect_identical(first, wisp_simulate(n.genes = 1, n.bins = 20, seed = 2))
})

test_that("the simulator refuses bad arguments", {
  expect_error(wisp_simulate(n.genes = 0), class = "wisp_input_error", regexp = "n.genes")
  expect_error(wisp_simulate(fixed.effects = list(a = "x")), class = "wisp_input_error",
               regexp = "fixed.effects")
  expect_error(wisp_simulate(fixed.effects = list(bin = c("a", "b"))),
               class = "wisp_input_error", regexp = "bin")
  expect_error(wisp_simulate(degrees = matrix(1, 2, 2)), class = "wisp_input_error",
               regexp = "degrees")
  expect_error(wisp_simulate(time.series = "age"), class = "wisp_input_error",
               regexp = "time.series")
})

test_that("wisp(wisp_simulate()) works as it stands", {
  fit <- wisp(wisp_simulate(), verbose = FALSE)
  expect_s3_class(fit, "wisp")
  expect_true(fit$fit.diagnostics$converged)
})

test_that("a bootstrapped fit recovers large effects and covers most true values", {
  counts <- wisp_simulate(n.genes = 2, n.random = 3, n.bins = 40, seed = 12)
  fit <- suppressWarnings(wisp(counts, bootstraps.num = 60, max.fork = 2, ran.seed = 3,
                               model.settings = list(LRO_cost = "none"), verbose = FALSE))
  comparison <- wisp_truth(fit, counts)
  expect_s3_class(comparison, "wisp_truth")
  expect_true(all(comparison$degree.matches))
  large <- comparison$role == "beta" & comparison$component == "Rt" & abs(comparison$truth) >= 0.5
  expect_gt(sum(large), 0)
  expect_identical(sign(comparison$estimate[large]), sign(comparison$truth[large]))
  # "Most": the cell bootstrap keeps the animals fixed (spec section 9.9),
  # so its intervals are narrower than the truth's spread; a majority of the
  # true rate parameters must still fall inside them.
  rates <- comparison$component == "Rt"
  expect_gt(mean(comparison$covered[rates], na.rm = TRUE), 0.5)
  plot <- plot(comparison)
  expect_s3_class(plot, "ggplot")
  expect_silent(ggplot2::ggplot_build(plot))
})
