# Messages of wisp(), muffled and collected.
messages_of <- function(code) {
  said <- character()
  value <- withCallingHandlers(code, message = function(m) {
    said <<- c(said, conditionMessage(m))
    invokeRestart("muffleMessage")
  })
  list(value = value, said = said)
}

fit_fields <- c("count.data.summed", "fitted.parameters", "param.names", "gamma.dispersion",
                "fix", "treatment", "weight.matrix", "grouping.variables", "param.idx0",
                "settings", "LRO.grid.search.results", "variables")

test_that("wisp(data) just works and tests the effects by profile-checked Wald tests", {
  run <- messages_of(wisp(small_counts(), model.settings = list(LRO_cost = "none")))
  fit <- run$value
  expect_true(any(grepl("Exposure: tokens", run$said, fixed = TRUE)))
  expect_true(any(grepl("Fitted 2 genes", run$said, fixed = TRUE)))
  # Statistics come with the fit: no advice to bootstrap for them.
  expect_false(any(grepl("bootstraps.num", run$said, fixed = TRUE)))
  expect_s3_class(fit, "wisp")
  expect_identical(fit$likelihood, "nb")
  expect_identical(fit$settings$likelihood, "nb")
  expect_named(fit$fit.diagnostics, c("pen.neg.value", "neg.loglik", "converged", "code",
                                      "num.evals", "iterations", "max.gradient", "on.bound",
                                      "fit.seconds", "seconds", "pid", "peak_rss_mb", "pss_mb",
                                      "private_dirty_mb", "n.params", "df"))
  for (field in c(fit_fields, "stats", "random.sd", "exposure")) {
    expect_true(field %in% names(fit), label = field)
  }
  # The default statistics: Wald, each point effect checked by profile
  # likelihood (wisp_statistics(method = "profile")); statistics = "wald"
  # skips the checks.
  expect_identical(fit$stats$method, "profile")
  expect_true(any(grepl("Statistics: Wald tests; [0-9]+ transition-point effects? checked by profile",
                        run$said)))
  checked <- fit$stats$parameters$component == "transition point" &
    fit$stats$parameters$term != "baseline"
  expect_true(all(!is.na(fit$stats$parameters$flagged[checked])))
  expect_true(all(is.na(fit$stats$parameters$flagged[!checked])))
  expect_identical(nrow(fit$stats$profiles), sum(checked))
  wald <- wisp(small_counts(), model.settings = list(LRO_cost = "none"), verbose = FALSE,
               statistics = "wald")
  expect_identical(wald$stats$method, "wald")
  expect_true(all(is.na(wald$stats$parameters$flagged)))
  expect_identical(wald$fitted.parameters, fit$fitted.parameters)
  expect_equal(wisp_statistics(wald, method = "profile")$stats, fit$stats)
  expect_error(wisp(small_counts(), statistics = "bootstrap"), class = "wisp_input_error",
               regexp = "statistics")
  expect_identical(fit$stats$parameters$parameter, names(coef(fit, "fixed")))
  expect_identical(names(fit$fitted.parameters), fit$param.names)
  expect_true(all(c("pred", "pred.log", "exposure") %in% names(fit$count.data.summed)))
  # The same fit as without messages.
  expect_identical(fit$fitted.parameters, small_fit()$fitted.parameters)
})

test_that("wisp(data) with the original likelihood says that statistics need a bootstrap", {
  run <- messages_of(wisp(small_counts(),
                          model.settings = list(likelihood = "original", LRO_cost = "none")))
  fit <- run$value
  expect_true(any(grepl("Summed", run$said, fixed = TRUE)))
  expect_true(any(grepl("bootstraps.num", run$said, fixed = TRUE)))
  expect_s3_class(fit, "wisp")
  expect_identical(fit$likelihood, "original")
  expect_named(fit$fit.diagnostics, c("pen.neg.value", "neg.loglik", "converged", "code",
                                      "num.evals", "iterations", "max.gradient", "on.bound",
                                      "fit.seconds", "seconds", "pid", "peak_rss_mb", "pss_mb",
                                      "private_dirty_mb", "n.params"))
  for (field in c(fit_fields, "start")) {
    expect_true(field %in% names(fit), label = field)
  }
  expect_null(fit$stats)
  expect_identical(names(fit$fitted.parameters), fit$param.names)
  expect_true(all(c("pred", "pred.log") %in% names(fit$count.data.summed)))
  expect_identical(fit$fitted.parameters, small_fit_original()$fitted.parameters)
})

test_that("the fit recovers the simulated structure and tracks the true curves", {
  counts <- small_counts()
  truth <- attr(counts, "truth")
  fit <- small_fit()
  expect_true(fit$fit.diagnostics$converged)
  expect_identical(fit$fit.diagnostics$code, "converged")
  expect_identical(unname(fit$degrees), unname(truth$degrees))
  # Population curves of the fit (psi, the log(1 + rate) scale) against the
  # true ones, matched by context, gene, treatment and bin.
  d <- fit$count.data.summed
  population <- d[d$ran == "none", ]
  expect_identical(nrow(population), 2L * 2L * 40L)
  true_curves <- unique(truth$rates[c("context", "species", "treatment", "bin",
                                      "log.rate.population")])
  key <- function(x) paste(x$context, x$species, x$treatment, x$bin, sep = "\r")
  at <- match(key(population), key(true_curves))
  expect_false(anyNA(at))
  gap <- abs(population$pred.log - true_curves$log.rate.population[at])
  expect_lt(stats::median(gap), 0.1)
  # and the estimated SDs and dispersions are of the right size
  dispersion <- coef(fit)[names(truth$dispersion)]
  expect_true(all(abs(log(dispersion / truth$dispersion)) < log(2)))
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
  expect_error(wisp(counts, degrees = -1L), class = "wisp_input_error", regexp = "degrees")
})

test_that("a fixed effect may be named treatment", {
  counts <- wisp_simulate(n.genes = 2, n.bins = 30, n.random = 3, degrees = 1L,
                          fixed.effects = list(treatment = c("control", "drug")), seed = 1)
  for (likelihood in c("nb", "original")) {
    fit <- wisp(counts, fit_only = TRUE, verbose = FALSE,
                model.settings = list(likelihood = likelihood, LRO_cost = "none"))
    expect_identical(fit$treatment$names, c("control", "drug"), info = likelihood)
    expect_true(any(grepl("_drug_X_", names(coef(fit)))), info = likelihood)
  }
})

test_that("degrees = fixes the transitions under either likelihood", {
  counts <- wisp_simulate(n.genes = 2, n.random = 3, n.bins = 30, degrees = 1L, seed = 21)
  for (likelihood in c("nb", "original")) {
    fit <- wisp(counts, degrees = 2L, fit_only = TRUE, verbose = FALSE,
                model.settings = list(likelihood = likelihood))
    expect_true(all(fit$degrees == 2L), info = likelihood)
    points <- grep("tpoint", names(coef(fit)), value = TRUE)
    expect_true(any(grepl("Tns/Blk2", points)), info = likelihood)
  }
})

test_that("a saved and reloaded fit can be bootstrapped", {
  reloaded <- saved_and_reloaded(small_fit())
  boot <- bs_batch(reloaded, 3, seed = 4)
  expect_identical(boot$t, bs_batch(small_fit(), 3, seed = 4)$t)
  expect_true(all(boot$diagnostics$ok))
})

test_that("the grid search gives the same result on one or two workers, for both likelihoods", {
  counts <- wisp_simulate(n.genes = 1, n.random = 2, n.bins = 40, seed = 5)
  for (likelihood in c("nb", "original")) {
    # The grid search runs under the change-point detector ("lro"; the
    # count likelihood's default chooses degrees by BIC instead).
    settings <- list(likelihood = likelihood, structure = "lro")
    one <- wisp(counts, max.fork = 1, verbose = FALSE, model.settings = settings)
    two <- wisp(counts, max.fork = 2, verbose = FALSE, model.settings = settings)
    expect_identical(one$LRO.grid.search.results, two$LRO.grid.search.results, label = likelihood)
    expect_identical(one$fitted.parameters, two$fitted.parameters, label = likelihood)
    grid <- one$LRO.grid.search.results
    expect_identical(nrow(grid), 81L)
    expect_equal(grid$AIC, 2 * (grid$n_params + grid$neg_loglik), label = likelihood)
    expect_equal(grid$BIC, grid$n_params * log(sum(!is.na(one$count.data.summed$count))) +
                   2 * grid$neg_loglik, label = likelihood)
    best <- which.min(grid$AIC)
    expect_identical(one$settings$LROcutoff, 2) # settings keep the user's values
    expect_true(is.finite(grid$AIC[best]))
    # The chosen grid point is the fit, with logLik's degrees of freedom.
    expect_equal(grid$neg_loglik[best], one$fit.diagnostics$neg.loglik, label = likelihood)
    expect_identical(grid$n_params[best], attr(logLik(one), "df"), label = likelihood)
  }
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

test_that("rise_threshold_factor reaches the original's fit: it sets the starting slopes", {
  counts <- small_counts()
  fit_with <- function(factor) {
    wisp(counts, verbose = FALSE,
         model.settings = list(likelihood = "original", LRO_cost = "none",
                               rise_threshold_factor = factor))
  }
  low <- fit_with(0.1)
  high <- fit_with(0.99)
  default <- fit_with(0.8)
  p <- small_fit_original()$parameters
  slopes <- p$role == "baseline" & p$component == "tslope"
  expect_gt(sum(slopes), 0)
  # Lower targets are reached in shorter runs: steeper starting slopes.
  expect_true(all(low$start[slopes] >= high$start[slopes]))
  expect_true(any(low$start[slopes] > high$start[slopes]))
  expect_false(identical(low$fitted.parameters, high$fitted.parameters))
  # 0.8 is the default, and the fit is the default fit.
  expect_identical(default$start, small_fit_original()$start)
  expect_identical(default$fitted.parameters, small_fit_original()$fitted.parameters)
})

test_that("the count likelihood's estimate does not depend on rise_threshold_factor's start", {
  counts <- small_counts()
  fit_with <- function(factor) {
    wisp(counts, verbose = FALSE,
         model.settings = list(LRO_cost = "none", structure = "lro",
                               rise_threshold_factor = factor))
  }
  low <- fit_with(0.1)
  high <- fit_with(0.99)
  # The setting reaches the fit: it starts elsewhere and takes another path ...
  expect_false(identical(low$fit.diagnostics[c("iterations", "num.evals")],
                         high$fit.diagnostics[c("iterations", "num.evals")]))
  # ... to the same optimum (no start-anchored penalty), up to the variance
  # updates' tolerance (|d log sigma| < 1e-4 moves the marginal likelihood
  # by a few 1e-5).
  expect_true(low$fit.diagnostics$converged && high$fit.diagnostics$converged)
  expect_equal(low$fit.diagnostics$neg.loglik, high$fit.diagnostics$neg.loglik, tolerance = 1e-7)
  expect_equal(low$fitted.parameters, high$fitted.parameters, tolerance = 1e-5)
  expect_equal(low$fitted.parameters, small_fit()$fitted.parameters, tolerance = 1e-5)
})

test_that("the count fit's seconds include the structure step whose fits it reuses", {
  fit <- small_fit()
  # With structure = "likelihood" the chosen curves' fits are made during the
  # structure step and not redone, so the fit took at least that long.
  expect_true(fit$structure.seconds > 0)
  expect_gte(fit$fit.diagnostics$fit.seconds, fit$structure.seconds)
  expect_gte(fit$fit.diagnostics$seconds, fit$structure.seconds)
})
