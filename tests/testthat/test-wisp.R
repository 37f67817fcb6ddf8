test_that("wisp(data) just works and says that statistics need a bootstrap", {
  counts <- small_counts()
  said <- character()
  fit <- withCallingHandlers(
    wisp(counts, model.settings = list(LRO_cost = "none")),
    message = function(m) {
      said <<- c(said, conditionMessage(m))
      invokeRestart("muffleMessage")
    }
  )
  expect_true(any(grepl("Summed", said, fixed = TRUE)))
  expect_true(any(grepl("bootstraps.num", said, fixed = TRUE)))
  expect_s3_class(fit, "wisp")
  expect_named(fit$fit.diagnostics, c("pen.neg.value", "neg.loglik", "converged", "code",
                                      "num.evals", "iterations", "max.gradient", "on.bound",
                                      "fit.seconds", "seconds", "pid", "peak_rss_mb", "pss_mb",
                                      "private_dirty_mb", "n.params"))
  for (field in c("count.data.summed", "fitted.parameters", "param.names", "gamma.dispersion",
                  "fix", "treatment", "weight.matrix", "grouping.variables", "param.idx0",
                  "settings", "LRO.grid.search.results", "variables")) {
    expect_true(field %in% names(fit), label = field)
  }
  expect_identical(names(fit$fitted.parameters), fit$param.names)
  expect_true(all(c("pred", "pred.log") %in% names(fit$count.data.summed)))
})

test_that("the fit recovers the simulated structure and tracks the true curves", {
  counts <- small_counts()
  truth <- attr(counts, "truth")
  fit <- small_fit()
  expect_true(fit$fit.diagnostics$converged)
  expect_identical(fit$fit.diagnostics$code, "converged")
  expect_identical(unname(fit$degrees), unname(truth$degrees))
  # Population curves of the fit against the true ones, on the log scale.
  population <- fit$count.data.summed$ran == "none"
  gap <- abs(fit$count.data.summed$pred.log[population] - truth$pred.log[population])
  expect_lt(stats::median(gap), 0.1)
})

test_that("the same seed gives an identical fit", {
  counts <- small_counts()
  again <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
  expect_identical(again$fitted.parameters, small_fit()$fitted.parameters)
})

test_that("every argument is validated up front, whatever path runs", {
  counts <- small_counts()
  expect_error(wisp(counts, fit_only = TRUE, max.fork = -1), class = "wisp_input_error",
               regexp = "max.fork")
  expect_error(wisp(counts, fit_only = TRUE, bootstraps.num = 2.5), class = "wisp_input_error",
               regexp = "bootstraps.num")
  expect_error(wisp(counts, fit_only = NA), class = "wisp_input_error", regexp = "fit_only")
  expect_error(wisp(counts, model.settings = list(LRO_cost = "AICc")),
               class = "wisp_input_error", regexp = "LRO_cost")
  expect_error(wisp(counts, MCMC.settings = list(MCMC.steps = 100)),
               class = "wisp_input_error", regexp = "bootstrap")
  expect_error(wisp(counts, plot.settings = list(colour = "red")),
               class = "wisp_input_error", regexp = "colour")
  expect_error(wisp(counts, ran.seed = 1.5), class = "wisp_input_error", regexp = "ran.seed")
})

test_that("a saved and reloaded fit can be bootstrapped", {
  path <- tempfile(fileext = ".rds")
  saveRDS(small_fit(), path)
  reloaded <- readRDS(path)
  boot <- bs_batch(reloaded, 3, seed = 4)
  expect_identical(boot$t, bs_batch(small_fit(), 3, seed = 4)$t)
  expect_true(all(boot$diagnostics$ok))
})

test_that("the grid search gives the same result on one or two workers", {
  counts <- wisp_simulate(n.genes = 1, n.random = 2, n.bins = 40, seed = 5)
  one <- wisp(counts, max.fork = 1, verbose = FALSE)
  two <- wisp(counts, max.fork = 2, verbose = FALSE)
  expect_identical(one$LRO.grid.search.results, two$LRO.grid.search.results)
  expect_identical(one$fitted.parameters, two$fitted.parameters)
  grid <- one$LRO.grid.search.results
  expect_identical(nrow(grid), 81L)
  expect_equal(grid$AIC, 2 * (grid$n_params + grid$neg_loglik))
  expect_equal(grid$BIC, grid$n_params * log(sum(!is.na(one$count.data.summed$count))) +
                 2 * grid$neg_loglik)
  best <- which.min(grid$AIC)
  expect_identical(one$settings$LROcutoff, 2) # settings keep the user's values
  expect_true(is.finite(grid$AIC[best]))
})

test_that("gene and context names that are prefixes of one another work", {
  counts <- small_counts()
  counts$species[counts$species == "gene2"] <- "gene1b"
  counts$species[counts$species == "gene1"] <- "gene1"
  fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
  expect_setequal(fit$grouping.variables$species.lvls, c("gene1", "gene1b"))
  expect_identical(length(fit$param.idx0$beta$Rt$context1$gene1) > 0, TRUE)
  expect_length(intersect(fit$param.idx0$beta$Rt$context1$gene1,
                          fit$param.idx0$beta$Rt$context1$gene1b), 0)
})

test_that("rise_threshold_factor reaches the fit: it sets the starting slopes", {
  counts <- small_counts()
  fit_with <- function(factor) {
    wisp(counts, verbose = FALSE,
         model.settings = list(LRO_cost = "none", rise_threshold_factor = factor))
  }
  low <- fit_with(0.1)
  high <- fit_with(0.99)
  default <- fit_with(0.8)
  p <- small_fit()$parameters
  slopes <- p$role == "baseline" & p$component == "tslope"
  expect_gt(sum(slopes), 0)
  # Lower targets are reached in shorter runs: steeper starting slopes.
  expect_true(all(low$start[slopes] >= high$start[slopes]))
  expect_true(any(low$start[slopes] > high$start[slopes]))
  expect_false(identical(low$fitted.parameters, high$fitted.parameters))
  # 0.8 is the default, and the fit is the default fit.
  expect_identical(default$start, small_fit()$start)
  expect_identical(default$fitted.parameters, small_fit()$fitted.parameters)
})
