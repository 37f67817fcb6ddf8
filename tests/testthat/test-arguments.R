# Odd values for every argument of the exported functions that reach the
# Rust core: each is accepted or refused with a classed error, never a panic,
# an unclassed error or a crash.

odd_values <- list(
  inf = Inf, minus_inf = -Inf, nan = NaN, na = NA, na_real = NA_real_, huge = 1e30,
  minus_huge = -1e30, above_int = 2^31, half = 0.5, minus_one = -1, zero = 0,
  text = "1", flag = TRUE, none = NULL, pair = c(1, 2), list = list(1), empty = integer()
)

# The outcome of `call` with `value` as argument `name`: "ok", or the class
# of the error; an error that is not a wispack error fails the test.
outcome_with <- function(fun, args, name, value) {
  args[name] <- list(value)
  result <- tryCatch(suppressMessages(suppressWarnings(do.call(fun, args))),
                     error = function(e) e)
  if (!inherits(result, "error")) return("ok")
  if (!inherits(result, "wisp_error")) {
    testthat::fail(sprintf("%s = %s: unclassed error: %s", name, deparse(value)[1],
                           conditionMessage(result)))
  }
  class(result)[1]
}

expect_classed_or_accepted <- function(fun, args, names) {
  for (name in names) {
    for (value_name in names(odd_values)) {
      outcome <- outcome_with(fun, args, name, odd_values[[value_name]])
      expect_true(outcome %in% c("ok", "wisp_input_error"),
                  label = sprintf("%s = %s gave %s", name, value_name, outcome))
    }
  }
}

test_that("bs_batch() accepts or refuses every odd argument with a classed error", {
  fit <- small_fit()
  # checkpoint = "1" is a valid path: keep what it writes out of the tests' directory
  scratch <- tempfile()
  dir.create(scratch)
  old <- setwd(scratch)
  on.exit({
    setwd(old)
    unlink(scratch, recursive = TRUE)
  })
  expect_classed_or_accepted(bs_batch, list(fit = fit, bootstraps.num = 1, seed = 1),
                             c("bootstraps.num", "max.fork", "tasks.per.child", "timeout",
                               "child.memory.limit", "seed", "trim.memory", "mc.preschedule",
                               "backend", "schedule", "checkpoint", "progress"))
  # the case that panicked in Duration::from_secs_f64
  expect_error(bs_batch(fit, 2, timeout = 1e30), class = "wisp_input_error", regexp = "timeout")
  expect_identical(child_pids(), integer())
})

test_that("wisp() accepts or refuses every odd argument and setting with a classed error", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  counts <- wisp_simulate(n.genes = 1, n.random = 2, n.bins = 20, cells.per.bin = 2, seed = 3)
  args <- list(count.data = counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
  expect_classed_or_accepted(wisp, args, c("bootstraps.num", "max.fork", "ran.seed", "fit_only",
                                           "use.median", "verbose", "variables"))
  settings <- c("buffer_factor", "ctol", "max_penalty_at_distance_factor", "LROcutoff",
                "LROwindow_factor", "rise_threshold_factor", "max_evals", "rng_seed",
                "warp_precision", "round_none", "max_bin", "LRO_method", "LRO_cost", "trtKO")
  for (setting in settings) {
    for (value_name in names(odd_values)) {
      model.settings <- list(LRO_cost = "none", max_evals = 200)
      model.settings[setting] <- list(odd_values[[value_name]])
      outcome <- outcome_with(wisp, args, "model.settings", model.settings)
      expect_true(outcome %in% c("ok", "wisp_input_error"),
                  label = sprintf("model.settings$%s = %s gave %s", setting, value_name, outcome))
    }
  }
})

test_that("wisp_simulate() accepts or refuses every odd argument with a classed error", {
  expect_classed_or_accepted(wisp_simulate, list(n.genes = 1, n.random = 2, n.bins = 20,
                                                 cells.per.bin = 1),
                             c("n.contexts", "n.genes", "n.random", "n.bins", "cells.per.bin",
                               "dispersion", "effect.size", "seed", "degrees", "time.series",
                               "fixed.effects", "rate.step"))
})

test_that("the methods accept or refuse odd arguments with a classed error", {
  fit <- small_fit()
  grid <- data.frame(bin = 1:3, context = "context1", species = "gene1", treatment = "ref")
  for (value_name in names(odd_values)) {
    value <- odd_values[[value_name]]
    bad_grid <- grid
    if (length(value) <= 1 && !is.list(value)) bad_grid$bin[2] <- if (length(value)) value else NA
    for (call in list(quote(predict(fit, bad_grid)), quote(predict(fit, type = value)),
                      quote(print(summary(fit), digits = value)),
                      quote(print(summary(fit), max.rows = value)),
                      quote(plot(fit, type = value)), quote(plot(fit, species = value)),
                      quote(wisp_truth(fit, value)), quote(confint(fit, parm = value)),
                      quote(confint(fit, level = value)), quote(coef(fit, type = value)),
                      quote(fitted(fit, type = value)), quote(residuals(fit, type = value)))) {
      result <- tryCatch(suppressWarnings(utils::capture.output(invisible(eval(call)))),
                         error = function(e) e)
      if (inherits(result, "error")) {
        expect_s3_class(result, "wisp_input_error")
      }
    }
  }
})
