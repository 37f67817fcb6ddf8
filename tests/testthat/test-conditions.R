# The error taxonomy (?wisp_conditions): each kind of failure has its class.

test_that("input, corrupt and system errors have their classes and a common parent", {
  fit <- small_fit()
  input <- expect_error(bs_batch(fit, 0), class = "wisp_input_error")
  expect_s3_class(input, "wisp_error")
  expect_false(inherits(input, "wisp_corrupt_error"))

  damaged <- fit
  damaged$plan[60] <- as.raw(bitwXor(as.integer(damaged$plan[60]), 1L))
  corrupt <- expect_error(bs_batch(damaged, 2), class = "wisp_corrupt_error")
  expect_s3_class(corrupt, "wisp_input_error")
  expect_s3_class(corrupt, "wisp_error")
  expect_error(predict(damaged), class = "wisp_corrupt_error")

  # A checkpoint that cannot be created: the system's error, not the user's.
  skip_if_not(dir.exists("/proc/self"))
  system <- expect_error(bs_batch(fit, 2, checkpoint = "/proc/wispack-checkpoint"),
                         class = "wisp_system_error")
  expect_s3_class(system, "wisp_error")
  expect_false(inherits(system, "wisp_input_error"))
  expect_match(conditionMessage(system), "checkpoint")
})

test_that("Rust errors keep their kind across the boundary", {
  condition <- function(kind) {
    tryCatch(wispack:::rust_result(structure(
      list(message = "extendr_err", value = list(kind = kind, message = "why")),
      class = c("extendr_error", "error", "condition"))), error = identity)
  }
  expect_identical(class(condition("input"))[1:2], c("wisp_input_error", "wisp_error"))
  expect_identical(class(condition("corrupt"))[1:3],
                   c("wisp_corrupt_error", "wisp_input_error", "wisp_error"))
  expect_identical(class(condition("system"))[1:2], c("wisp_system_error", "wisp_error"))
  interrupted <- condition("interrupted")
  expect_s3_class(interrupted, "wisp_interrupted")
  expect_false(inherits(interrupted, "wisp_error")) # a wisp_error handler lets Ctrl-C through
  expect_identical(conditionMessage(interrupted), "why")
})

test_that("test-only entry points refuse with an input error in builds without them", {
  if (wispack:::test_hooks_enabled()) {
    expect_true(is.data.frame(wispack:::engine_selftest(1)))
  } else {
    expect_error(wispack:::engine_selftest(1), class = "wisp_input_error",
                 regexp = "WISPACK_TEST_HOOKS")
    expect_error(wispack:::inject_faults(list(kill = 1L)), class = "wisp_input_error")
  }
})
