# One class per likelihood: c("wisp_nb", "wisp") and c("wisp_original",
# "wisp"), and fits saved with class "wisp" alone (the committed fixtures).

test_that("a fit's class names its likelihood", {
  expect_identical(class(small_fit()), c("wisp_nb", "wisp"))
  expect_identical(class(small_fit_original()), c("wisp_original", "wisp"))
  expect_identical(wispack:::fit_likelihood(small_fit()), "nb")
  expect_identical(wispack:::fit_likelihood(small_fit_original()), "original")
})

test_that("fits saved with class \"wisp\" alone get their likelihood's class and work", {
  for (file in c("fit-v0.rds", "fit-v1.rds")) {
    old <- readRDS(test_path("fixtures", file))
    expect_identical(class(old), "wisp")
    current <- wispack:::as_current_fit(old)
    likelihood <- if (is.null(old$likelihood)) "original" else old$likelihood
    expect_identical(class(current), c(paste0("wisp_", likelihood), "wisp"), label = file)
    # Only the class changes, and giving it twice changes nothing.
    expect_identical(unclass(current), unclass(old))
    expect_identical(wispack:::as_current_fit(current), current)
    # The internal generics dispatch through it: the old object and the
    # current one give the same answers.
    expect_identical(predict(old), predict(current), label = file)
    expect_identical(predict(old, type = "response"), predict(current, type = "response"))
    expect_identical(wispack:::rate_label(old), wispack:::rate_label(current))
    expect_identical(wispack:::resample_schemes(old), wispack:::resample_schemes(current))
    expect_identical(coef(old), coef(current))
    expect_identical(capture.output(print(summary(old))),
                     capture.output(print(summary(current))))
  }
  v0 <- readRDS(test_path("fixtures", "fit-v0.rds"))
  expect_identical(wispack:::fit_likelihood(v0), "original")
  expect_identical(wispack:::resample_schemes(v0), c("cells", "animals"))
  expect_error(vcov(v0), class = "wisp_input_error", regexp = "count likelihood")
  v1 <- readRDS(test_path("fixtures", "fit-v1.rds"))
  expect_identical(wispack:::fit_likelihood(v1), "nb")
  expect_identical(wispack:::resample_schemes(v1)[1], "parametric")
  expect_identical(vcov(v1), vcov(wispack:::as_current_fit(v1)))
})

test_that("a \"wisp\" object with an unknown likelihood is refused, not looped on", {
  broken <- unclass(small_fit())
  broken$likelihood <- "poisson"
  class(broken) <- "wisp"
  expect_error(wispack:::as_current_fit(broken), class = "wisp_corrupt_error")
  expect_error(predict(broken), class = "wisp_error")
})

test_that("the rates of the curves are the core's (count likelihood) and exp(psi) - 1 (original)", {
  psi <- c(-Inf, -40, -5, -1e-3, 0, 1e-300, 1e-3, 0.5, 3, 20, 700, Inf, NA, NaN)
  nb <- wispack:::rate_at(psi, "nb")
  expect_identical(nb[-(13:14)], wispack:::curve_rate_rust(psi[-(13:14)], "nb"))
  expect_identical(nb[13:14], c(NA, NaN))
  expect_identical(wispack:::rate_at(psi, "original"), exp(psi) - 1)
  m <- matrix(c(0.1, 0.2, 0.3, 0.4), 2, dimnames = list(c("a", "b"), NULL))
  expect_identical(dimnames(wispack:::rate_at(m, "nb")), dimnames(m))
  # A count fit's expected counts are exposure x the core's rate.
  fit <- small_fit()
  d <- fit$count.data.summed
  observed <- !is.na(d$exposure)
  expect_identical(d$pred[observed],
                   d$exposure[observed] * wispack:::curve_rate_rust(d$pred.log[observed], "nb"))
})
