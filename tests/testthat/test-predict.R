# predict() with the user's column names, at fractional bins, with Wald and
# bootstrap intervals; arguments a method does not take are errors (issue
# #15, item 7). Expected curves come from the fit's estimates through the
# plain-R reference curves (helper-reference-count.R, helper-reference.R).

# Simulated data under a lab's column names.
lab_counts <- function() {
  counts <- wisp_simulate(n.genes = 2, n.random = 3, n.bins = 30, seed = 21)
  names(counts)[match(c("bin", "context", "species", "ran"), names(counts))] <-
    c("depth_bin", "region", "gene", "mouse")
  counts
}
lab_variables <- list(bin = "depth_bin", context = "region", species = "gene", ran = "mouse")

lab_fit <- once(function() {
  wisp(lab_counts(), variables = lab_variables, model.settings = list(LRO_cost = "none"),
       verbose = FALSE)
})
lab_fit_original <- once(function() {
  wisp(lab_counts(), variables = lab_variables,
       model.settings = list(likelihood = "original", LRO_cost = "none"), verbose = FALSE)
})
lab_booted <- once(function() {
  suppressWarnings(wisp(lab_counts(), variables = lab_variables,
                        model.settings = list(LRO_cost = "none"), bootstraps.num = 19,
                        ran.seed = 3, verbose = FALSE))
})
lab_booted_original <- once(function() {
  suppressWarnings(wisp(lab_counts(), variables = lab_variables,
                        model.settings = list(likelihood = "original", LRO_cost = "none"),
                        bootstraps.num = 19, ran.seed = 3, verbose = FALSE))
})

# The population curve of (context, gene, treatment) at `estimates`, as
# list(R, s, p). One binary factor (hemisphere): the reference treatment's
# curve is the baseline, the other's the baseline plus its effect.
population_curve <- function(fit, context, species, treatment,
                             estimates = fit$fitted.parameters) {
  p <- fit$parameters
  values <- function(component) {
    at <- p$component == component & p$context %in% context & p$species %in% species
    base <- at & p$role == "baseline"
    v <- unname(estimates[p$name[base]][order(p$block[base])])
    if (treatment != p$treatment[base][1]) {
      effect <- at & p$role == "beta" & p$treatment %in% treatment
      v <- v + unname(estimates[p$name[effect]][order(p$block[effect])])
    }
    v
  }
  list(R = values("Rt"), s = values("tslope"), p = values("tpoint"))
}

# An animal's warps of one gene, c(point =, rate =, slope =).
animal_warps <- function(fit, species, animal, estimates = fit$fitted.parameters) {
  p <- fit$parameters
  at <- p$role == "warp" & p$species %in% species & p$ran %in% animal
  stats::setNames(unname(estimates[p$name[at]]), p$component[at])[c("point", "rate", "slope")]
}

# Psi by the reference: count likelihood (warped by `u` for an animal).
reference_count_curve <- function(fit, x, context, species, treatment, animal = NULL,
                                  estimates = fit$fitted.parameters) {
  curve <- population_curve(fit, context, species, treatment, estimates)
  if (!is.null(animal)) {
    curve <- reference_count_warp(curve, animal_warps(fit, species, animal, estimates),
                                  max(fit$count.data.summed$bin))
  }
  reference_count_psi(x, curve)
}

# Psi by the reference: the original's curve (warped by the animal's
# factors, with the original's bounds).
reference_original_curve <- function(fit, x, context, species, treatment, animal = NULL,
                                     estimates = fit$fitted.parameters) {
  curve <- population_curve(fit, context, species, treatment, estimates)
  if (!is.null(animal)) {
    w <- animal_warps(fit, species, animal, estimates)
    bound <- fit$settings$inf_warp
    bins <- max(fit$count.data.summed$bin)
    curve$R <- vapply(curve$R, reference_warp, 0, bound = bound, w = w[["rate"]])
    curve$s <- vapply(curve$s, reference_warp, 0, bound = bound, w = w[["slope"]])
    curve$p <- vapply(curve$p, reference_warp, 0, bound = bins, w = w[["point"]])
  }
  vapply(x, reference_psi, 0, Rt = curve$R, tslope = curve$s, tpoint = curve$p)
}

smooth_grid <- function(treatment = "right") {
  data.frame(depth_bin = seq(1, 30, by = 0.25), region = "context1", gene = "gene2",
             hemisphere = treatment, stringsAsFactors = FALSE)
}

test_that("predict() takes the user's column names and fractional bins, for both likelihoods", {
  for (fit in list(lab_fit(), lab_fit_original())) {
    label <- fit_label(fit)
    reference <- if (label == "nb") reference_count_curve else reference_original_curve
    grid <- smooth_grid()
    expected <- reference(fit, grid$depth_bin, "context1", "gene2", "right")
    expect_equal(predict(fit, grid), expected, tolerance = 1e-9, label = label)
    # The role names work too, and give the same.
    by_role <- data.frame(bin = grid$depth_bin, context = "context1", species = "gene2",
                          treatment = "right")
    expect_identical(predict(fit, by_role), predict(fit, grid), label = label)
    # The reference treatment, and an animal's (warped) curve.
    expect_equal(predict(fit, transform(grid, hemisphere = "left")),
                 reference(fit, grid$depth_bin, "context1", "gene2", "left"),
                 tolerance = 1e-9, label = label)
    expect_equal(predict(fit, transform(grid, mouse = "mouse2")),
                 reference(fit, grid$depth_bin, "context1", "gene2", "right", animal = "mouse2"),
                 tolerance = 1e-9, label = label)
    # Expected counts: the rate, per unit of exposure unless one is given.
    rate <- if (label == "nb") reference_count_rate(expected) else exp(expected) - 1
    expect_equal(predict(fit, grid, type = "response"), rate, tolerance = 1e-9, label = label)
    if (label == "nb") {
      expect_equal(predict(fit, transform(grid, exposure = 4), type = "response"), 4 * rate,
                   tolerance = 1e-9)
    }
    # Bins within the fit's bins only, and a message that names the columns.
    expect_error(predict(fit, transform(grid, depth_bin = 0.5)), class = "wisp_input_error",
                 regexp = "depth_bin")
    expect_error(predict(fit, transform(grid, depth_bin = 30.25)), class = "wisp_input_error",
                 regexp = "from 1 to 30")
    expect_error(predict(fit, grid[names(grid) != "gene"]), class = "wisp_input_error",
                 regexp = "`gene` or `species`")
    expect_error(predict(fit, transform(grid, gene = "gene9")), class = "wisp_input_error",
                 regexp = "gene9")
  }
})

test_that("predict() gives Wald intervals of population curves by the delta method", {
  fit <- lab_fit()
  grid <- smooth_grid()[seq(1, 117, by = 4), ]
  level <- 0.9
  out <- predict(fit, grid, interval = "confidence", level = level)
  expect_identical(colnames(out), c("fit", "lwr", "upr"))
  # The delta method by hand: the gradient of the reference curve in the
  # gene's fixed effects by central differences, and vcov().
  fixed <- names(coef(fit, "fixed"))
  fixed <- fixed[fit$parameters$species[match(fixed, fit$parameters$name)] == "gene2"]
  psi_at <- function(theta) {
    estimates <- fit$fitted.parameters
    estimates[fixed] <- theta
    reference_count_curve(fit, grid$depth_bin, "context1", "gene2", "right",
                          estimates = estimates)
  }
  theta <- fit$fitted.parameters[fixed]
  gradient <- vapply(seq_along(theta), function(j) {
    step <- 1e-6 * max(1, abs(theta[[j]]))
    up <- theta
    down <- theta
    up[j] <- up[j] + step
    down[j] <- down[j] - step
    (psi_at(up) - psi_at(down)) / (2 * step)
  }, numeric(nrow(grid)))
  covariance <- vcov(fit)[fixed, fixed]
  expect_false(anyNA(covariance))
  se <- sqrt(rowSums((gradient %*% covariance) * gradient))
  z <- qnorm(1 - (1 - level) / 2)
  psi <- psi_at(theta)
  expect_equal(unname(out[, "fit"]), psi, tolerance = 1e-9)
  expect_equal(unname(out[, "lwr"]), psi - z * se, tolerance = 1e-6)
  expect_equal(unname(out[, "upr"]), psi + z * se, tolerance = 1e-6)
  # On the response scale, the limits are carried by the rate function.
  response <- predict(fit, grid, type = "response", interval = "confidence", level = level)
  expect_equal(unname(response[, "lwr"]), reference_count_rate(psi - z * se), tolerance = 1e-6)
  expect_equal(unname(response[, "upr"]), reference_count_rate(psi + z * se), tolerance = 1e-6)
  # An animal's curve has no Wald interval; the original's fits none at all.
  expect_error(predict(fit, transform(grid, mouse = "mouse1"), interval = "confidence"),
               class = "wisp_input_error", regexp = "population")
  expect_error(predict(lab_fit_original(), grid, interval = "confidence"),
               class = "wisp_input_error", regexp = "bootstrap")
})

# Percentile limits at `level` of the reference curve over the replicates a
# fit's statistics use, computed here from fit$bootstrap$t.
reference_percentiles <- function(fit, grid, level, animal = NULL) {
  reference <- if (fit_label(fit) == "nb") reference_count_curve else reference_original_curve
  d <- fit$bootstrap$diagnostics
  replicates <- fit$bootstrap$t[d$ok & d$converged %in% TRUE, , drop = FALSE]
  expect_gt(nrow(replicates), 10)
  curves <- vapply(seq_len(nrow(replicates)), function(i) {
    estimates <- stats::setNames(replicates[i, ], names(fit$fitted.parameters))
    reference(fit, grid$depth_bin, "context1", "gene2", "right", animal = animal,
              estimates = estimates)
  }, numeric(nrow(grid)))
  a <- (1 - level) / 2
  apply(curves, 1, function(v) {
    quantile(v[is.finite(v)], probs = c(a, 1 - a), type = 7, names = FALSE)
  })
}

test_that("predict() gives bootstrap percentile intervals from the fit's replicates", {
  level <- 0.8
  grid <- smooth_grid()[seq(1, 117, by = 8), ]
  for (fit in list(lab_booted(), lab_booted_original())) {
    label <- fit_label(fit)
    reference <- if (label == "nb") reference_count_curve else reference_original_curve
    limits <- reference_percentiles(fit, grid, level)
    out <- predict(fit, grid, interval = "confidence", level = level)
    expect_equal(unname(out[, "lwr"]), limits[1, ], tolerance = 1e-8, label = label)
    expect_equal(unname(out[, "upr"]), limits[2, ], tolerance = 1e-8, label = label)
    expect_equal(unname(out[, "fit"]), reference(fit, grid$depth_bin, "context1", "gene2", "right"),
                 tolerance = 1e-9, label = label)
  }
  # Wald intervals remain available for a bootstrapped count fit.
  booted <- lab_booted()
  expect_false(isTRUE(all.equal(predict(booted, grid, interval = "confidence", method = "wald"),
                                predict(booted, grid, interval = "confidence"))))
})

test_that("bootstrap intervals of an animal's curve need replicates that keep the animals", {
  level <- 0.8
  grid <- transform(smooth_grid()[seq(1, 117, by = 8), ], mouse = "mouse3")
  # The original's cell resampling keeps the animals.
  fit <- lab_booted_original()
  limits <- reference_percentiles(fit, grid, level, animal = "mouse3")
  out <- predict(fit, grid, interval = "confidence", level = level)
  expect_equal(unname(out[, "lwr"]), limits[1, ], tolerance = 1e-8)
  expect_equal(unname(out[, "upr"]), limits[2, ], tolerance = 1e-8)
  # Resampling animals: a replicate's random effects are NaN, so an
  # animal's curve has no bootstrap interval.
  fit <- lab_fit()
  boot <- bs_batch(fit, 19, resample = "animals", seed = 5, progress = FALSE)
  booted <- suppressWarnings(wisp_statistics(fit, boot = boot))
  warps <- booted$parameters$name[booted$parameters$role == "warp"]
  ok <- booted$bootstrap$diagnostics$ok %in% TRUE
  expect_true(all(is.nan(booted$bootstrap$t[ok, warps])))
  expect_error(predict(booted, grid, interval = "confidence"), class = "wisp_input_error",
               regexp = "resample = \"parametric\"")
  # A parametric bootstrap (the count likelihood's default) keeps them.
  boot <- bs_batch(fit, 19, seed = 5, progress = FALSE)
  expect_identical(boot$resample, "parametric")
  parametric <- suppressWarnings(wisp_statistics(fit, boot = boot))
  limits <- reference_percentiles(parametric, grid, level, animal = "mouse3")
  expect_false(anyNA(limits))
  out <- predict(parametric, grid, interval = "confidence", level = level)
  expect_equal(unname(out[, "lwr"]), limits[1, ], tolerance = 1e-8)
  expect_equal(unname(out[, "upr"]), limits[2, ], tolerance = 1e-8)
})

test_that("arguments a method does not take are errors, not swallowed", {
  fit <- lab_fit()
  grid <- smooth_grid()[1:3, ]
  expect_error(predict(fit, grid, se.fit = TRUE), class = "wisp_input_error", regexp = "se.fit")
  expect_error(predict(fit, grid, "response", "confidence", 0.9, "wald", "extra"),
               class = "wisp_input_error", regexp = "extra")
  expect_error(fitted(fit, scale = "log"), class = "wisp_input_error", regexp = "scale")
  expect_error(residuals(fit, type = "log", pearson = TRUE), class = "wisp_input_error",
               regexp = "pearson")
  expect_error(confint(fit, levels = 0.9), class = "wisp_input_error", regexp = "levels")
  expect_error(summary(fit, conf.level = 0.9), class = "wisp_input_error", regexp = "conf.level")
  expect_error(coef(fit, "beta", complete = TRUE), class = "wisp_input_error",
               regexp = "complete")
  expect_error(vcov(fit, "beta", full = TRUE), class = "wisp_input_error", regexp = "full")
  expect_error(plot(fit, main = "my fit"), class = "wisp_input_error", regexp = "main")
  boot <- bs_batch(fit, 2, seed = 1, progress = FALSE)
  expect_error(confint(boot, method = "wald"), class = "wisp_input_error", regexp = "method")
  expect_error(summary(boot, digits = 2), class = "wisp_input_error", regexp = "digits")
  expect_error(plot(boot, title = "x"), class = "wisp_input_error", regexp = "title")
  # The arguments they do take still work.
  expect_length(summary(fit, level = 0.9)$coefficients$CI.low, length(coef(fit, "fixed")))
})
