# S3 methods of "wisp" fits and "wisp_bootstrap" results.

methods_counts <- function() {
  counts <- wisp_simulate(n.genes = 2, n.bins = 40, seed = 1)
  # Empty cells: mouse2 has no tokens of gene1 in bins 3 to 6.
  counts[!(counts$ran == "mouse2" & counts$bin %in% 3:6 & counts$species == "gene1"), ]
}

methods_fit <- once(function() {
  wisp(methods_counts(), model.settings = list(LRO_cost = "none"), verbose = FALSE)
})

methods_booted <- once(function() {
  suppressWarnings(wisp(methods_counts(), model.settings = list(LRO_cost = "none"),
                        bootstraps.num = 20, ran.seed = 1, verbose = FALSE))
})

test_that("print.wisp shows the fit and whether it was bootstrapped", {
  fit <- methods_fit()
  out <- capture.output(res <- print(fit))
  expect_identical(res, fit)
  expect_true(any(grepl("632 observed", out, fixed = TRUE)))
  expect_true(any(grepl("Not bootstrapped", out, fixed = TRUE)))
  expect_true(any(grepl("Transitions per curve", out, fixed = TRUE)))
  out <- capture.output(print(methods_booted()))
  expect_true(any(grepl("Bootstrapped: 20 replicates", out, fixed = TRUE)))
})

test_that("summary.wisp has the fixed-effect table, with statistics when bootstrapped", {
  fit <- methods_fit()
  s <- summary(fit)
  expect_s3_class(s, "summary.wisp")
  fixed <- fit$parameters$role %in% c("baseline", "beta")
  expect_identical(s$coefficients$parameter, fit$parameters$name[fixed])
  expect_equal(s$coefficients$estimate, unname(fit$fitted.parameters[fixed]))
  expect_false(s$bootstrapped)
  expect_false("p.value" %in% names(s$coefficients))
  expect_identical(s$n.warp, sum(fit$parameters$role == "warp"))
  expect_output(print(s), "estimates only")

  booted <- methods_booted()
  s <- summary(booted)
  expect_true(s$bootstrapped)
  expect_identical(s$replicates, booted$stats$replicates.used)
  at <- match(s$coefficients$parameter, booted$stats$parameters$parameter)
  for (column in c("CI.low", "CI.high", "p.value", "p.value.adj", "significance")) {
    expect_identical(s$coefficients[[column]], booted$stats$parameters[[column]][at])
  }
  beta <- s$coefficients$role == "beta"
  expect_true(all(!is.na(s$coefficients$p.value[beta])))
  expect_true(all(is.na(s$coefficients$p.value[!beta])))
  expect_output(print(s), "Signif.")
  expect_output(print(s, max.rows = 3), "more rows")
})

test_that("coef.wisp selects parameters by role", {
  fit <- methods_fit()
  p <- fit$parameters
  expect_identical(coef(fit), fit$fitted.parameters)
  for (role in c("baseline", "beta", "warp")) {
    expect_identical(names(coef(fit, role)), p$name[p$role == role])
  }
  expect_identical(names(coef(fit, "fixed")), p$name[p$role != "warp"])
  expect_length(coef(fit, "fixed"), length(coef(fit, "baseline")) + length(coef(fit, "beta")))
  expect_error(coef(fit, "nope"), class = "wisp_input_error")
})

test_that("confint.wisp gives percentile intervals from the replicates", {
  expect_error(confint(methods_fit()), class = "wisp_input_error")
  booted <- methods_booted()
  ci <- confint(booted)
  expect_true(is.matrix(ci))
  expect_identical(dim(ci), c(length(booted$fitted.parameters), 2L))
  expect_identical(rownames(ci), names(booted$fitted.parameters))
  expect_identical(colnames(ci), c("2.5 %", "97.5 %"))
  expect_true(all(ci[, 1] <= ci[, 2]))
  d <- booted$bootstrap$diagnostics
  t <- booted$bootstrap$t[d$ok & d$converged %in% TRUE, , drop = FALSE]
  by_hand <- apply(t, 2, stats::quantile, probs = c(0.025, 0.975), type = 7, names = FALSE)
  expect_equal(unname(ci), unname(t(by_hand)))

  beta <- names(coef(booted, "beta"))
  ci90 <- confint(booted, beta, level = 0.9)
  expect_identical(rownames(ci90), beta)
  expect_identical(colnames(ci90), c("5 %", "95 %"))
  expect_identical(confint(booted, 2:3), ci[2:3, , drop = FALSE])
  expect_error(confint(booted, "not a parameter"), class = "wisp_input_error")
  expect_error(confint(booted, level = 2), class = "wisp_input_error")
  # The bootstrap object itself.
  expect_equal(confint(booted$bootstrap), ci)
})

test_that("fitted.wisp and residuals.wisp follow R's conventions", {
  fit <- methods_fit()
  d <- fit$count.data.summed
  expect_identical(fitted(fit), d$pred)
  expect_identical(fitted(fit, type = "link"), d$pred.log)
  expect_length(fitted(fit), nrow(d))
  r <- residuals(fit)
  expect_equal(r, d$count - d$pred)                      # observed - fitted
  expect_equal(residuals(fit, "log"), d$count.log - d$pred.log)
  empty <- is.na(d$count)
  expect_identical(sum(empty), 8L)
  expect_true(all(is.na(r[empty])))
  expect_true(all(!is.na(r[!empty])))
  expect_equal(resid(fit), r)
  expect_error(residuals(fit, "pearson"), class = "wisp_input_error")
})

test_that("predict.wisp equals fitted() on the training grid", {
  fit <- methods_fit()
  d <- fit$count.data.summed
  expect_equal(predict(fit, type = "response"), fitted(fit), tolerance = 1e-12)
  expect_equal(predict(fit), fitted(fit, type = "link"), tolerance = 1e-12)

  set.seed(2)
  rows <- sample(nrow(d), 50)
  newdata <- d[rows, c("bin", "context", "species", "treatment", "ran")]
  expect_equal(predict(fit, newdata, type = "response"), d$pred[rows], tolerance = 1e-12)
  expect_equal(predict(fit, newdata), d$pred.log[rows], tolerance = 1e-12)

  # Without `ran`: the population curve.
  grid <- data.frame(bin = 1:40, context = "context1", species = "gene2", treatment = "right")
  population <- d[d$ran == "none" & d$species == "gene2" & d$treatment == "right", ]
  expect_equal(predict(fit, grid, type = "response"), population$pred[order(population$bin)],
               tolerance = 1e-12)
  # Fixed-effect columns instead of `treatment`.
  by_levels <- data.frame(bin = 1:40, context = "context1", species = "gene2", hemisphere = "right")
  expect_equal(predict(fit, by_levels), predict(fit, grid))

  expect_error(predict(fit, transform(grid, bin = 0L)), class = "wisp_input_error")
  expect_error(predict(fit, transform(grid, bin = bin + 1L)), class = "wisp_input_error")
  expect_error(predict(fit, transform(grid, bin = 2.5)), class = "wisp_input_error")
  expect_error(predict(fit, transform(grid, species = "gene")), class = "wisp_input_error")
  expect_error(predict(fit, transform(grid, treatment = "middle")), class = "wisp_input_error")
  expect_error(predict(fit, grid[, -4]), class = "wisp_input_error")
  expect_error(predict(fit, transform(grid, ran = "mouse9")), class = "wisp_input_error")
})

test_that("predict.wisp uses the estimates of a use.median fit", {
  skip_on_cran()
  booted <- suppressWarnings(wisp(methods_counts(), model.settings = list(LRO_cost = "none"),
                                  bootstraps.num = 20, ran.seed = 1, use.median = TRUE,
                                  verbose = FALSE))
  expect_equal(predict(booted, type = "response"), fitted(booted), tolerance = 1e-12)
})

test_that("logLik, nobs, AIC and BIC agree with the fit", {
  fit <- methods_fit()
  ll <- logLik(fit)
  expect_s3_class(ll, "logLik")
  expect_equal(as.numeric(ll), -fit$fit.diagnostics$neg.loglik)
  df <- length(fit$fitted.parameters)
  expect_identical(attr(ll, "df"), as.integer(df))
  n <- sum(!is.na(fit$count.data.summed$count))
  expect_identical(nobs(fit), n)
  expect_identical(attr(ll, "nobs"), n)
  expect_equal(AIC(fit), 2 * fit$fit.diagnostics$neg.loglik + 2 * df)
  expect_equal(BIC(fit), 2 * fit$fit.diagnostics$neg.loglik + log(n) * df)
})

test_that("wisp_bootstrap: print, summary and as.data.frame", {
  booted <- methods_booted()
  boot <- booted$bootstrap
  expect_s3_class(boot, "wisp_bootstrap")
  out <- capture.output(res <- print(boot))
  expect_identical(res, boot)
  expect_true(any(grepl("20 replicates", out, fixed = TRUE)))

  s <- summary(boot)
  expect_s3_class(s, "summary.wisp_bootstrap")
  expect_identical(sum(s$codes), 20L)
  expect_identical(s$ok, sum(boot$diagnostics$ok))
  expect_identical(rownames(s$time), "seconds")
  expect_identical(rownames(s$memory), c("peak_rss_mb", "pss_mb", "private_dirty_mb"))
  expect_identical(names(s$time), c("min", "median", "mean", "max"))
  expect_equal(s$time$median, stats::median(boot$diagnostics$seconds))
  expect_output(print(s), "Convergence codes")

  df <- as.data.frame(boot)
  expect_s3_class(df, "data.frame")
  expect_identical(nrow(df), 20L)
  expect_identical(names(df), c("replicate", names(boot$diagnostics), names(boot$t0)))
  expect_identical(df$replicate, 1:20)
  expect_equal(unname(as.matrix(df[names(boot$t0)])), unname(boot$t))
  expect_identical(df$code, boot$diagnostics$code)
})

test_that("wisp_bootstrap methods record failed replicates", {
  boot <- methods_booted()$bootstrap
  boot$diagnostics$ok[2] <- FALSE
  boot$diagnostics$converged[2] <- NA
  boot$diagnostics$code[2] <- NA
  boot$diagnostics$reason[2] <- "timeout"
  boot$t[2, ] <- NA
  s <- summary(boot)
  expect_identical(unname(s$codes[["failed"]]), 1L)
  expect_identical(unname(s$reasons[["timeout"]]), 1L)
  expect_output(print(s), "Failure reasons")
  expect_true(all(is.na(unlist(as.data.frame(boot)[2, names(boot$t0)]))))
  ci <- confint(boot)
  by_hand <- apply(boot$t[-2, ], 2, stats::quantile, probs = c(0.025, 0.975), names = FALSE)
  expect_equal(unname(ci), unname(t(by_hand)))
})
