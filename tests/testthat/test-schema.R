# One schema for the outcome of a fit or replicate: the Rust record's columns
# (src/rust/src/outcome.rs) and R's list (R/schema.R) agree, and every path
# fills them.

test_that("R's column list is the Rust record's, names and types", {
  columns <- wispack:::outcome_table_rust(list(), 0L)$diagnostics
  expect_identical(names(columns), names(wispack:::diagnostic_columns))
  expect_identical(vapply(columns, typeof, ""), wispack:::diagnostic_columns)
  empty <- wispack:::new_diagnostics(n = 2)
  expect_identical(vapply(empty, typeof, ""), wispack:::diagnostic_columns)
  expect_identical(empty$ok, c(FALSE, FALSE))
  expect_true(all(is.na(unlist(empty[-1]))))
})

test_that("the new columns report how each fit ended", {
  fit <- small_fit()
  f <- fit$fit.diagnostics
  expect_true(f$iterations >= 1 && f$iterations <= f$num.evals)
  expect_true(is.finite(f$max.gradient) && f$max.gradient >= 0)
  expect_identical(f$on.bound, 0L)
  expect_true(f$fit.seconds <= f$seconds)
  expect_identical(f$pid, Sys.getpid())
  boot <- bs_batch(fit, 3, seed = 6)
  d <- boot$diagnostics
  expect_true(all(d$iterations >= 1 & d$iterations <= d$num.evals))
  expect_true(all(is.finite(d$max.gradient) & d$max.gradient >= 0))
  expect_identical(d$on.bound, rep(0L, 3))
  expect_true(all(d$fit.seconds <= d$seconds))
  # Every backend fills every column alike (timing and process columns aside).
  fit_columns <- c("ok", "reason", "pen.neg.value", "neg.loglik", "converged", "code",
                   "num.evals", "iterations", "max.gradient", "on.bound")
  serial <- bs_batch(fit, 3, seed = 6, backend = "serial")$diagnostics
  expect_identical(serial[fit_columns], d[fit_columns])
  expect_identical(serial$pid, rep(Sys.getpid(), 3))
})

test_that("a failed replicate has its reason and NA everywhere else", {
  outcome <- wispack:::failed_outcome(3L, "no result")
  table <- wispack:::replicate_table(list(outcome), 2L)
  expect_false(table$diagnostics$ok)
  expect_identical(table$diagnostics$reason, "no result")
  expect_true(all(is.na(unlist(table$diagnostics[-(1:2)]))))
  expect_identical(table$estimates, matrix(NA_real_, 1, 2))
})
