# Saved fits: the versioned, checksummed plan (`fit$plan`), fits saved by
# earlier versions, and damaged bytes.

fixture_fit <- function() readRDS(test_path("fixtures", "fit-v0.rds"))

test_that("a fit saved by wispack 0.1.0 bootstraps and predicts exactly as it did", {
  old <- fixture_fit()
  expect_true(is.raw(old$plan) && is.raw(old$model)) # the old layout: two copies
  # A fit without a likelihood is the original's, resampled by cells.
  expect_identical(wispack:::fit_likelihood(old), "original")
  info <- wispack:::plan_info_rust(old$plan, "cells")
  expect_identical(info$format, 0L)
  expect_identical(info$likelihood, "original")
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
  expect_identical(again$resample, "cells")
  expect_output(print(old), "Fit: converged")
  expect_output(print(summary(old)), "Fixed effects")
  # Its statistics are the original's centred ones, and say so.
  expect_output(print(summary(old)), "centred[[:space:]]+p-values")
  expect_identical(summary(old)$method, "centred")
  expect_identical(summary(old)$coefficients$p.value.adj,
                   old$stats$parameters$p.value.adj[old$parameters$role != "warp"])
  expect_identical(coef(old), old$fitted.parameters)
})

test_that("refitting the fixture's data gives exactly what wispack 0.1.0 computed", {
  old <- fixture_fit()
  # The data of tests/testthat/fixtures/make-fit-v0.R, drawn by the 0.1.0
  # simulator (see make-counts-v0.R), refitted with the original's objective.
  counts <- readRDS(test_path("fixtures", "counts-v0.rds"))
  fit <- suppressWarnings(wisp(counts, bootstraps.num = 4, ran.seed = 7, verbose = FALSE,
                               model.settings = list(likelihood = "original", LRO_cost = "none")))
  # 0.1.0 called the reference treatment "ref"; it is named by its levels now
  reference <- paste(old$fix$ref.lvl, collapse = ":")
  rename <- function(x) replace(x, x %in% "ref", reference)
  old$treatment$names <- rename(old$treatment$names)
  dimnames(old$weight.matrix) <- lapply(dimnames(old$weight.matrix), rename)
  for (field in c("count.data.summed", "change.points", "parameters")) {
    old[[field]]$treatment <- rename(old[[field]]$treatment)
  }
  for (field in c("fitted.parameters", "start", "count.data.summed", "change.points",
                  "weight.matrix", "gamma.dispersion", "degrees", "parameters", "param.idx0",
                  "treatment", "fix", "sample.params.bs", "diagnostics.bs")) {
    expect_identical(fit[[field]], old[[field]], label = field)
  }
  # Settings: 0.1.0's, plus those of the count likelihood.
  expect_identical(fit$settings[names(old$settings)], old$settings)
  expect_identical(fit$settings$likelihood, "original")
  expect_identical(fit$bootstrap$t, old$bootstrap$t)
  shared <- names(old$fit.diagnostics)
  expect_identical(fit$fit.diagnostics[setdiff(shared, "seconds")],
                   old$fit.diagnostics[setdiff(shared, "seconds")])
  # 0.1.0's statistics were the centred ones: the original's routine gives
  # them bit for bit, and wisp_statistics(method = "centred") shows them.
  replicates <- fit$bootstrap$t[fit$bootstrap$diagnostics$converged, , drop = FALSE]
  expect_identical(nrow(replicates), old$stats$replicates.used)
  tested <- fit$parameters$role == "beta"
  expect_identical(wispack:::parameter_statistics(fit$fitted.parameters, replicates, tested,
                                                  0.05, "holm"),
                   old$stats$parameters)
  centred <- wisp_statistics(fit, method = "centred")$stats
  expect_identical(centred$method, "centred")
  at <- match(centred$parameters$parameter, old$stats$parameters$parameter)
  for (column in c("estimate", "CI.low", "CI.high", "p.value", "p.value.adj", "significance")) {
    expect_identical(centred$parameters[[column]], old$stats$parameters[[column]][at],
                     label = column)
  }
  # The fit's own statistics follow today's rule: never 0.
  expect_identical(fit$stats$method, "percentile")
  expect_true(all(fit$stats$parameters$p.value >= 2 / 5, na.rm = TRUE))
})

test_that("a new fit keeps one plan, versioned, that round-trips through saveRDS", {
  for (fit in list(small_fit(), small_fit_original())) {
    label <- fit_label(fit)
    expect_null(fit[["model"]])
    expect_identical(rawToChar(fit$plan[1:8]), "WISPSAVE")
    resample <- if (label == "nb") "parametric" else "cells"
    info <- wispack:::plan_info_rust(fit$plan, resample)
    expect_identical(info$format, 1L, label = label)
    expect_identical(info$likelihood, label)
    reloaded <- saved_and_reloaded(fit)
    boot <- bs_batch(reloaded, 3, seed = 5)
    expect_identical(boot$resample, resample)
    expect_identical(boot$t, bs_batch(fit, 3, seed = 5)$t, label = label)
    expect_identical(predict(reloaded), fit$count.data.summed$pred.log, label = label)
  }
  # The resampling scheme is part of the checkpoint key.
  expect_false(identical(wispack:::plan_info_rust(small_fit_original()$plan, "cells")$key,
                         wispack:::plan_info_rust(small_fit_original()$plan, "animals")$key))
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
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  for (fit in list(small_fit(), small_fit_original())) {
    plan <- fit$plan
    set.seed(20)
    positions <- unique(c(1:40, sort(sample(length(plan), 200))))
    for (at in positions) {
      damaged <- plan
      damaged[at] <- as.raw(bitwXor(as.integer(damaged[at]), sample(255, 1)))
      expect_identical(classes_of_bootstrap(fit, damaged)[1], "wisp_corrupt_error",
                       label = sprintf("%s: byte %d", fit_label(fit), at))
    }
    for (cut in unique(c(0:30, sort(sample(length(plan) - 1, 100))))) {
      expect_identical(classes_of_bootstrap(fit, plan[seq_len(cut)])[1], "wisp_corrupt_error",
                       label = sprintf("%s: cut at %d", fit_label(fit), cut))
    }
  }
  fit <- small_fit()
  damaged <- fit
  damaged$plan[100] <- as.raw(bitwXor(as.integer(damaged$plan[100]), 1L))
  error <- expect_error(bs_batch(damaged, 2), class = "wisp_corrupt_error")
  expect_s3_class(error, "wisp_input_error") # handlers of input errors still see it
  expect_match(conditionMessage(error), "damaged")
})

test_that("damaged payloads behind a valid checksum are classed errors or valid plans", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  skip_without_test_hooks()
  header <- 8 + 16 # magic, length and checksum
  for (fit in list(small_fit(), small_fit_original())) {
    label <- fit_label(fit)
    cases <- if (label == "nb") 300 else 150
    plan <- fit$plan
    set.seed(21)
    outcomes <- character()
    for (case in seq_len(cases)) {
      damaged <- plan
      at <- header + sample(length(plan) - header, sample(3, 1))
      damaged[at] <- as.raw(bitwXor(as.integer(damaged[at]), sample(255, length(at), TRUE)))
      if (case %% 5 == 0) damaged <- damaged[seq_len(header + sample(length(plan) - header, 1))]
      classes <- classes_of_bootstrap(fit, wispack:::saved_reseal_rust(damaged))
      outcomes <- c(outcomes, if (is.null(classes)) "ran" else classes[1])
      if (!is.null(classes)) {
        expect_true("wisp_input_error" %in% classes, label = paste(label, "case", case))
      }
    }
    # Most damage breaks decoding or an invariant; some leaves a valid plan.
    expect_gt(sum(outcomes == "wisp_corrupt_error"), cases / 2, label = label)
  }
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

test_that("a count fit saved in format 1 (before held effects) still loads and bootstraps", {
  # fixtures/make-fit-v1.R: saved by commit d31da59 with 4 parametric
  # replicates; this version must compute exactly what that one did.
  old <- suppressWarnings(readRDS(test_path("fixtures", "fit-v1.rds")))
  expect_identical(wispack:::plan_info_rust(old$plan, "parametric")$format, 1L)
  expect_identical(old$held.effects, NULL)
  expect_identical(predict(old), old$count.data.summed$pred.log)
  again <- suppressWarnings(bs_batch(old, 4, seed = old$bootstrap$seed, resample = "parametric"))
  expect_identical(again$t, old$bootstrap$t)
  expect_true(is.finite(as.numeric(logLik(old))))
  expect_s3_class(suppressWarnings(summary(old)), "summary.wisp")
})

test_that("a reduced fit keeps its held effects through saveRDS, and its bootstrap holds them", {
  counts <- wisp_simulate(n.genes = 1, n.bins = 24, seed = 9,
                          fixed.effects = list(genotype = c("WT", "KO")))
  reduced <- wisp(counts, model.settings = list(trtKO = "KO"), verbose = FALSE)
  expect_identical(wispack:::plan_info_rust(reduced$plan, "parametric")$format, 2L)
  reloaded <- saved_and_reloaded(reduced)
  boot <- bs_batch(reloaded, 3, seed = 2)
  held <- reloaded$parameters$role == "beta" & reloaded$parameters$treatment == "KO"
  expect_true(any(held))
  expect_true(all(abs(boot$t[, held]) < 1e-5))
  free <- reloaded$parameters$role == "baseline"
  expect_true(all(apply(boot$t[, free, drop = FALSE], 2, stats::sd) > 0))
})
