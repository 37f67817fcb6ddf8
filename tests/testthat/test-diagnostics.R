# Residual diagnostics (wisp_residuals() and its figures) and fits with a
# fixed dispersion (model.settings$dispersion).

diagnostics_fit <- function(seed, degrees = NULL, fitted_degrees = NULL, dispersion = 0.05,
                            cells = 5L, fixed_dispersion = NA, n.genes = 2, n.bins = 40) {
  counts <- wisp_simulate(n.genes = n.genes, n.bins = n.bins, seed = seed,
                          cells.per.bin = cells, degrees = degrees, dispersion = dispersion)
  if (is.null(fitted_degrees)) fitted_degrees <- attr(counts, "truth")$degrees
  wisp(counts, degrees = fitted_degrees, fit_only = TRUE, verbose = FALSE,
       model.settings = list(LRO_cost = "none", dispersion = fixed_dispersion))
}

diagnostics_small <- once(function() diagnostics_fit(401))

test_that("the residual tables are the mean, SD and number of the quantile residuals per group", {
  fit <- diagnostics_small()
  checked <- wisp_residuals(fit, seed = 7)
  set.seed(7)
  r <- residuals(fit, type = "quantile")
  d <- fit$count.data.summed
  keep <- !is.na(r)
  expect_identical(checked$type, "quantile")
  expect_equal(checked$residuals$residual, r[keep])
  expect_equal(checked$residuals$count, d$count[keep])
  for (group in c("animal", "treatment", "gene", "bin")) {
    column <- switch(group, animal = d$ran, treatment = d$treatment, gene = d$species,
                     bin = d$bin)[keep]
    table <- checked$tables[[group]]
    expect_equal(table$mean, as.vector(tapply(r[keep], column, mean)[as.character(table[[group]])]),
                 label = group)
    expect_equal(table$sd, as.vector(tapply(r[keep], column, stats::sd)[as.character(table[[group]])]),
                 label = group)
    expect_equal(sum(table$n), sum(keep), label = group)
  }
  expect_identical(checked$tables$animal$animal, c("mouse1", "mouse2", "mouse3"))
  expect_identical(checked$tables$treatment$treatment, fit$treatment$names)
  # The gene's KS p-value is that of its residuals.
  gene1 <- r[keep][d$species[keep] == "gene1"]
  expect_equal(checked$tables$gene$ks.p[1], stats::ks.test(gene1, "pnorm")$p.value)
  # The seed makes the draws repeatable and leaves R's stream alone.
  set.seed(99)
  before <- stats::runif(1)
  set.seed(99)
  again <- wisp_residuals(fit, seed = 7)
  expect_identical(stats::runif(1), before)
  expect_identical(again$residuals, checked$residuals)
  # Subsets are rows of the whole.
  gene2 <- wisp_residuals(fit, species = "gene2", by = "animal", seed = 7)
  expect_identical(names(gene2$tables), "animal")
  expect_equal(gene2$residuals$residual,
               checked$residuals$residual[checked$residuals$gene == "gene2"])
  expect_output(print(checked), "Kolmogorov-Smirnov against N\\(0, 1\\)")
  expect_output(print(checked), "By animal:")
})

test_that("the dispersion and bin checks are computed from the counts as documented", {
  fit <- diagnostics_small()
  checked <- wisp_residuals(fit, seed = 2)
  r <- checked$residuals
  phi <- fit$gamma.dispersion["gene1", "context1"]
  g <- r[r$gene == "gene1", ]
  # Var(y) = mu + phi mu^2 / exposure (model vignette 9.2), by hand.
  variance <- g$fitted + phi * g$fitted^2 / g$exposure
  row <- checked$dispersion[checked$dispersion$gene == "gene1", ]
  expect_equal(row$phi, phi)
  expect_equal(row$variance.ratio, mean((g$count - g$fitted)^2 / variance))
  expect_equal(row$qr.variance, mean(g$residual^2))
  n <- nrow(g)
  tail <- stats::pchisq(n * mean(g$residual^2), n)
  expect_equal(row$p.value, 2 * min(tail, 1 - tail))
  # Bin means per gene, context, treatment and bin over the animals.
  z <- tapply(g$residual, paste(g$treatment, g$bin), function(x) mean(x) * sqrt(length(x)))
  bins <- checked$bins[checked$bins$gene == "gene1", ]
  expect_identical(bins$means, length(z))
  expect_equal(bins$mean.square, mean(z^2))
  expect_equal(bins$p.value, stats::pchisq(sum(z^2), length(z), lower.tail = FALSE))
})

test_that("the quantile residuals agree with statmod's qres.nbinom and qres.pois", {
  skip_if_not_installed("statmod")
  fit <- diagnostics_small()
  d <- fit$count.data.summed
  keep <- !is.na(d$count) & d$ran != "none"
  phi <- fit$gamma.dispersion[cbind(match(d$species[keep], rownames(fit$gamma.dispersion)),
                                    match(d$context[keep], colnames(fit$gamma.dispersion)))]
  # statmod draws u between F(y - 1) and F(y) (from pbeta) in the same order.
  glm_like <- list(y = d$count[keep], theta = d$exposure[keep] / phi,
                   fitted.values = d$pred[keep])
  set.seed(11)
  expected <- statmod::qres.nbinom(glm_like)
  set.seed(11)
  r <- residuals(fit, type = "quantile")
  expect_identical(which(!is.na(r)), which(keep))
  expect_equal(r[keep], expected, tolerance = 1e-8)

  # A Poisson fit: phi is held at 1e-8, which is the Poisson to 1e-8.
  poisson <- diagnostics_fit(401, fixed_dispersion = 0)
  d <- poisson$count.data.summed
  keep <- !is.na(d$count) & d$ran != "none"
  set.seed(12)
  expected <- statmod::qres.pois(list(y = d$count[keep], fitted.values = d$pred[keep]))
  set.seed(12)
  expect_equal(residuals(poisson, type = "quantile")[keep], expected, tolerance = 1e-5)
})

test_that("quantile residuals pass fits of the right model (KS at 1 %, several data sets)", {
  skip_on_cran()
  for (seed in 1:3) {
    counts <- wisp_simulate(seed = seed) # the defaults: 3 genes, 50 bins
    fit <- wisp(counts, degrees = attr(counts, "truth")$degrees, fit_only = TRUE,
                verbose = FALSE, model.settings = list(LRO_cost = "none"))
    checked <- wisp_residuals(fit, seed = seed)
    expect_gt(checked$normality$p.value, 0.01)
    expect_gt(checked$bin.normality$p.value, 0.01)
    expect_true(all(checked$dispersion$p.value > 0.01), label = paste("seed", seed))
    expect_true(all(checked$bins$p.value > 0.01), label = paste("seed", seed))
  }
})

test_that("quantile residuals flag overdispersed counts fitted as Poisson", {
  skip_on_cran()
  for (seed in 1:3) {
    right <- diagnostics_fit(seed, dispersion = 0.3)
    expect_gt(wisp_residuals(right, seed = seed)$normality$p.value, 0.01)
    poisson <- diagnostics_fit(seed, dispersion = 0.3, fixed_dispersion = 0)
    checked <- wisp_residuals(poisson, seed = seed)
    expect_lt(checked$normality$p.value, 0.01)
    expect_true(all(checked$dispersion$p.value < 0.01))
    expect_true(all(checked$dispersion$variance.ratio > 1.5))
  }
})

test_that("quantile residuals flag a missing transition through their bin means", {
  skip_on_cran()
  # Two transitions, fitted with two and with one. The fitted dispersion
  # grows to absorb the missing transition, so the pooled test misses it
  # (documented); the residuals' means along the bins do not.
  for (seed in 1:3) {
    right <- wisp_residuals(diagnostics_fit(seed, degrees = 2L, dispersion = 0.02, cells = 10L),
                            seed = seed)
    expect_gt(right$normality$p.value, 0.01)
    expect_gt(right$bin.normality$p.value, 0.01)
    wrong <- wisp_residuals(diagnostics_fit(seed, degrees = 2L, fitted_degrees = 1L,
                                            dispersion = 0.02, cells = 10L), seed = seed)
    expect_lt(wrong$bin.normality$p.value, 0.01)
    expect_true(any(wrong$bins$p.value < 1e-6))
  }
})

test_that("the residual figures draw what wisp_residuals() holds, with axis titles", {
  skip_if_not_installed("ggplot2")
  checked <- wisp_residuals(diagnostics_small(), seed = 5)
  r <- checked$residuals
  qq <- plot(checked)
  expect_no_warning(ggplot2::ggplot_build(qq))
  gene1 <- qq$data[grepl("^gene1", qq$data$gene), ]
  n <- sum(r$gene == "gene1")
  expect_equal(gene1$sample, sort(r$residual[r$gene == "gene1"]))
  expect_equal(gene1$theoretical, stats::qnorm(stats::ppoints(n)))
  # The band: the 2.5 % and 97.5 % quantiles of the i-th of n normal order
  # statistics, checked by simulation at one i.
  set.seed(1)
  i <- 10
  draws <- replicate(4000, sort(stats::rnorm(n))[i])
  expect_equal(c(gene1$lower[i], gene1$upper[i]), unname(stats::quantile(draws, c(0.025, 0.975))),
               tolerance = 0.05)

  bins <- plot(checked, "bins")
  expect_no_warning(ggplot2::ggplot_build(bins))
  means <- bins$layers[[4]]$data
  g <- r[r$gene == "gene1" & r$treatment == checked$tables$treatment$treatment[1], ]
  expect_equal(means$mean[means$gene == "gene1" & means$treatment == levels(means$treatment)[1]],
               as.vector(tapply(g$residual, g$bin, mean)))
  # The legend names each treatment by one level of every fixed effect
  # ("left, P12"), not by its effect-like name ("right", "right:P18").
  fit <- diagnostics_small()
  legend <- ggplot2::ggplot_build(bins)$plot$scales$get_scales("colour")$get_labels()
  parts <- strsplit(legend, ", ", fixed = TRUE)
  expect_true(all(lengths(parts) == length(fit$fix$names)))
  for (f in seq_along(fit$fix$names)) {
    expect_true(all(vapply(parts, `[`, "", f) %in% fit$fix$lvls[[fit$fix$names[f]]]))
  }
  expect_identical(anyDuplicated(legend), 0L)
  expect_length(legend, length(unique(r$treatment)))

  dispersion <- plot(checked, "dispersion")
  expect_no_warning(ggplot2::ggplot_build(dispersion))
  points <- dispersion$data
  # Each point is the mean of (count - fitted)^2 over a group of counts: the
  # groups' counts add up to all counts.
  expect_identical(sum(points$n), nrow(r))
  for (p in list(qq, bins, dispersion)) {
    expect_true(nzchar(p$labels$x) && nzchar(p$labels$y) && nzchar(p$labels$title))
  }
  # plot(fit, type = "residuals") takes the text sizes of plot.settings.
  fit <- diagnostics_small()
  fit$plot.settings$axis_size <- 21
  fit$plot.settings$title_size <- 30
  p <- plot(fit, type = "residuals")
  expect_equal(p$theme$axis.title$size, 21)
  expect_equal(p$theme$plot.title$size, 21)
  expect_error(plot(checked, "other"), class = "wisp_input_error", regexp = "`type`")
  expect_error(plot(wisp_residuals(small_fit_original()), "dispersion"),
               class = "wisp_input_error", regexp = "count likelihood")
})

test_that("wisp_residuals() explains bad arguments", {
  fit <- diagnostics_small()
  expect_error(wisp_residuals(list()), class = "wisp_input_error", regexp = "`fit`")
  expect_error(wisp_residuals(fit, by = "mouse"), class = "wisp_input_error", regexp = "`by`")
  expect_error(wisp_residuals(fit, species = "gene9"), class = "wisp_input_error",
               regexp = "gene9")
  expect_error(wisp_residuals(fit, seed = "a"), class = "wisp_input_error", regexp = "`seed`")
  original <- wisp_residuals(small_fit_original())
  expect_identical(original$type, "log")
  expect_null(original$normality)
  expect_null(original$dispersion)
})

test_that("model.settings$dispersion fixes the dispersion, and the fit keeps it", {
  skip_on_cran()
  poisson <- diagnostics_fit(402, fixed_dispersion = 0)
  expect_true(all(poisson$gamma.dispersion < 2e-8))
  estimated <- diagnostics_fit(402)
  # Fixed dispersions are not parameters of the likelihood's df.
  dispersions <- sum(estimated$parameters$role == "dispersion")
  expect_identical(attr(logLik(poisson), "df"), attr(logLik(estimated), "df") - dispersions)
  # Held at a value, it is that value; at the estimate, the curves agree.
  phi <- estimated$gamma.dispersion[1, 1]
  counts <- wisp_simulate(n.genes = 2, n.bins = 40, seed = 402, cells.per.bin = 5)
  held <- wisp(counts[counts$species == "gene1", ], degrees = estimated$degrees[, "gene1"],
               fit_only = TRUE, verbose = FALSE,
               model.settings = list(LRO_cost = "none", dispersion = phi))
  expect_equal(unname(held$gamma.dispersion[1, 1]), unname(phi))
  betas <- held$parameters$name[held$parameters$role %in% c("baseline", "beta")]
  expect_equal(held$fitted.parameters[betas], estimated$fitted.parameters[betas],
               tolerance = 1e-3)
  # The plan keeps the setting (format 2): a reloaded fit bootstraps alike.
  info <- wispack:::plan_info_rust(poisson$plan, "parametric")
  expect_identical(info$format, 2L)
  expect_identical(wispack:::plan_info_rust(estimated$plan, "parametric")$format, 1L)
  reloaded <- saved_and_reloaded(poisson)
  boot <- bs_batch(reloaded, 2, seed = 3)
  expect_identical(boot$t, bs_batch(poisson, 2, seed = 3)$t)
  sd_columns <- grepl("^dispersion_", colnames(boot$t))
  expect_true(all(boot$t[, sd_columns] < 2e-8))
})

test_that("model.settings$dispersion is checked", {
  counts <- wisp_simulate(n.genes = 1, n.bins = 20, seed = 1)
  for (bad in list(-1, c(0, 1), "0", Inf, 1000)) {
    expect_error(wisp(counts, verbose = FALSE, model.settings = list(dispersion = bad)),
                 class = "wisp_input_error", regexp = "dispersion must be NA")
  }
  expect_error(wisp(counts, verbose = FALSE,
                    model.settings = list(likelihood = "original", dispersion = 0)),
               class = "wisp_input_error", regexp = "dispersion apply to likelihood")
})

test_that("the bins figure names wisp_example's treatments by all their levels", {
  fit <- without_design_warning(wisp(wisp_example, fit_only = TRUE, verbose = FALSE))
  bins <- plot(wisp_residuals(fit, seed = 1), "bins")
  legend <- ggplot2::ggplot_build(bins)$plot$scales$get_scales("colour")$get_labels()
  # wisp_example: hemisphere left/right crossed with age P12/P18 (by hand).
  expect_setequal(legend, c("left, P12", "right, P12", "left, P18", "right, P18"))
})

test_that("the residual figures look as they did (vdiffr snapshots)", {
  skip_on_cran()
  skip_if_not_installed("vdiffr")
  checked <- wisp_residuals(diagnostics_small(), seed = 5)
  vdiffr::expect_doppelganger("residuals-qq", plot(checked))
  vdiffr::expect_doppelganger("residuals-bins", plot(checked, "bins"))
  vdiffr::expect_doppelganger("residuals-dispersion", plot(checked, "dispersion"))
  vdiffr::expect_doppelganger("plot-type-residuals", plot(diagnostics_small(), type = "residuals"))
})

test_that("the residual figures' titles fit a figure one column wide", {
  # At the theme's sizes a line of about 60 characters spans 120 mm, the
  # width of a journal's column and a half: longer lines were clipped.
  checked <- wisp_residuals(diagnostics_small(), seed = 5)
  for (type in c("qq", "bins", "dispersion")) {
    labels <- plot(checked, type)$labels
    lines <- unlist(strsplit(c(labels$title, labels$subtitle), "\n", fixed = TRUE))
    expect_true(all(nchar(lines) <= 60), label = paste(type, ":", paste(lines, collapse = " | ")))
    # The y title runs along a panel about 80 mm high.
    expect_lte(nchar(labels$y), 35, label = paste(type, "y title:", labels$y))
  }
})
