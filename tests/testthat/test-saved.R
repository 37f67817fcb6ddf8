# Saved fits: the versioned, checksummed plan (`fit$plan`), fits saved by
# earlier versions, and damaged bytes.

fixture_fit <- function() readRDS(test_path("fixtures", "fit-v0.rds"))

test_that("a fit saved by wispack 0.1.0 bootstraps and predicts exactly as it did", {
  old <- fixture_fit()
  expect_true(is.raw(old$plan) && is.raw(old$model)) # the old layout: two copies
  expect_identical(wispack:::plan_info_rust(old$plan)$format, 0L)
  again <- bs_batch(old, 4, seed = old$bootstrap$seed)
  expect_identical(again$t, old$bootstrap$t)
  expect_identical(again$diagnostics$pen.neg.value, old$bootstrap$diagnostics$pen.neg.value)
  expect_identical(again$diagnostics$num.evals, old$bootstrap$diagnostics$num.evals)
  expect_identical(predict(old), old$count.data.summed$pred.log)
  expect_identical(predict(old, type = "response"), old$count.data.summed$pred)
  bands <- wispack:::model_prediction_bands_rust(old$plan, as.vector(t(old$bootstrap$t)),
                                                 c(0.025, 0.975))
  expect_identical(bands[[1]], old$count.data.summed$pred.low)
  expect_identical(bands[[2]], old$count.data.summed$pred.high)
  # The methods work on its fields (the old fit.diagnostics lack the new columns).
  expect_output(print(old), "Fit: converged")
  expect_output(print(summary(old)), "Fixed effects")
  expect_identical(coef(old), old$fitted.parameters)
})

test_that("refitting the fixture's data gives exactly what wispack 0.1.0 computed", {
  old <- fixture_fit()
  # The call of tests/testthat/fixtures/make-fit-v0.R.
  counts <- wisp_simulate(n.genes = 1, n.random = 2, n.bins = 16, cells.per.bin = 2, seed = 5)
  fit <- suppressWarnings(wisp(counts, bootstraps.num = 4, ran.seed = 7, verbose = FALSE,
                               model.settings = list(LRO_cost = "none")))
  # 0.1.0 called the reference treatment "ref"; it is named by its levels now
  reference <- paste(old$fix$ref.lvl, collapse = ":")
  rename <- function(x) replace(x, x %in% "ref", reference)
  old$treatment$names <- rename(old$treatment$names)
  dimnames(old$weight.matrix) <- lapply(dimnames(old$weight.matrix), rename)
  for (field in c("count.data.summed", "change.points", "parameters")) {
    old[[field]]$treatment <- rename(old[[field]]$treatment)
  }
  for (field in c("fitted.parameters", "start", "count.data.summed", "stats", "change.points",
                  "weight.matrix", "gamma.dispersion", "degrees", "parameters", "param.idx0",
                  "settings", "treatment", "fix", "sample.params.bs", "diagnostics.bs")) {
    expect_identical(fit[[field]], old[[field]], label = field)
  }
  expect_identical(fit$bootstrap$t, old$bootstrap$t)
  shared <- names(old$fit.diagnostics)
  expect_identical(fit$fit.diagnostics[setdiff(shared, "seconds")],
                   old$fit.diagnostics[setdiff(shared, "seconds")])
})

test_that("a new fit keeps one plan, versioned, that round-trips through saveRDS", {
  fit <- small_fit()
  expect_null(fit[["model"]])
  expect_identical(rawToChar(fit$plan[1:8]), "WISPSAVE")
  expect_identical(wispack:::plan_info_rust(fit$plan)$format, 1L)
  path <- tempfile(fileext = ".rds")
  on.exit(unlink(path))
  saveRDS(fit, path)
  reloaded <- readRDS(path)
  expect_identical(bs_batch(reloaded, 3, seed = 5)$t, bs_batch(fit, 3, seed = 5)$t)
  expect_identical(predict(reloaded), fit$count.data.summed$pred.log)
})

# bs_batch() on a copy of `fit` whose plan is `plan`: NULL when it runs, or
# the error's classes.
classes_of_bootstrap <- function(fit, plan) {
  fit$plan <- plan
  tryCatch({
    bs_batch(fit, 1, backend = "serial", seed = 1)
    NULL
  }, error = function(e) class(e))
}

test_that("every flipped byte and every cut of a saved plan is a corrupt-fit error", {
  fit <- small_fit()
  plan <- fit$plan
  set.seed(20)
  positions <- unique(c(1:40, sort(sample(length(plan), 200))))
  for (at in positions) {
    damaged <- plan
    damaged[at] <- as.raw(bitwXor(as.integer(damaged[at]), sample(255, 1)))
    expect_identical(classes_of_bootstrap(fit, damaged)[1], "wisp_corrupt_error",
                     label = sprintf("byte %d", at))
  }
  for (cut in unique(c(0:30, sort(sample(length(plan) - 1, 100))))) {
    expect_identical(classes_of_bootstrap(fit, plan[seq_len(cut)])[1], "wisp_corrupt_error",
                     label = sprintf("cut at %d", cut))
  }
  damaged <- fit
  damaged$plan[100] <- as.raw(bitwXor(as.integer(damaged$plan[100]), 1L))
  error <- expect_error(bs_batch(damaged, 2), class = "wisp_corrupt_error")
  expect_s3_class(error, "wisp_input_error") # handlers of input errors still see it
  expect_match(conditionMessage(error), "damaged")
})

test_that("damaged payloads behind a valid checksum are classed errors or valid plans", {
  skip_without_test_hooks()
  fit <- small_fit()
  plan <- fit$plan
  header <- 8 + 16 # magic, length and checksum
  set.seed(21)
  outcomes <- character()
  for (case in 1:300) {
    damaged <- plan
    at <- header + sample(length(plan) - header, sample(3, 1))
    damaged[at] <- as.raw(bitwXor(as.integer(damaged[at]), sample(255, length(at), TRUE)))
    if (case %% 5 == 0) damaged <- damaged[seq_len(header + sample(length(plan) - header, 1))]
    classes <- classes_of_bootstrap(fit, wispack:::saved_reseal_rust(damaged))
    outcomes <- c(outcomes, if (is.null(classes)) "ran" else classes[1])
    if (!is.null(classes)) expect_true("wisp_input_error" %in% classes, label = paste("case", case))
  }
  # Most damage breaks decoding or an invariant; some leaves a valid plan.
  expect_gt(sum(outcomes == "wisp_corrupt_error"), 150)
})

test_that("a plan of a newer format is refused with the version that wrote it", {
  skip_without_test_hooks()
  fit <- small_fit()
  newer <- fit$plan
  newer[25] <- as.raw(9) # the format number, after magic, length and checksum
  fit$plan <- wispack:::saved_reseal_rust(newer)
  error <- expect_error(bs_batch(fit, 2), class = "wisp_input_error")
  expect_false(inherits(error, "wisp_corrupt_error"))
  expect_match(conditionMessage(error), "saved by wispack [0-9.]+ in format 9")
  expect_match(conditionMessage(error), "update wispack")
})

test_that("a model's bytes are not taken for a fit's plan", {
  fit <- small_fit()
  model <- wispack:::model_build(wispack:::prepare_count_data(small_counts())$tokens,
                                 c("hemisphere", "age")[c("hemisphere", "age") %in%
                                                         names(small_counts())])
  fit$plan <- model$bytes
  expect_error(bs_batch(fit, 2), class = "wisp_input_error", regexp = "not the plan of a fit")
})
