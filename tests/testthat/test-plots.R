# ggplot2 figures of "wisp" fits and "wisp_bootstrap" results: checked on
# their layers, mappings and data.

skip_if_not_installed("ggplot2")

plots_counts <- function() wisp_simulate(n.genes = 2, n.bins = 40, seed = 1)

plots_fit <- once(function() {
  wisp(plots_counts(), model.settings = list(LRO_cost = "none"), verbose = FALSE)
})

plots_fit_original <- once(function() {
  wisp(plots_counts(), model.settings = list(likelihood = "original", LRO_cost = "none"),
       verbose = FALSE)
})

plots_booted <- once(function() {
  suppressWarnings(wisp(plots_counts(), model.settings = list(LRO_cost = "none"),
                        bootstraps.num = 20, ran.seed = 1, verbose = FALSE))
})

layer_geoms <- function(p) vapply(p$layers, function(l) class(l$geom)[1], "")

# Builds the plot (as printing would) and fails on any warning.
expect_builds <- function(p) {
  expect_s3_class(p, "ggplot")
  expect_no_warning(built <- ggplot2::ggplot_build(p))
  invisible(built)
}

test_that("the rate-count plot has counts, sample curves, population curves and change points", {
  for (fit in list(plots_fit(), plots_fit_original())) {
    label <- fit_label(fit)
    p <- plot(fit)
    expect_builds(p)
    expect_identical(layer_geoms(p), c("GeomPoint", "GeomLine", "GeomLine", "GeomVline"))
    expect_s3_class(p$facet, "FacetGrid")

    # Counts and curves per unit of exposure: the count likelihood's cell
    # keys hold 5 cells each here (exposure "tokens"), the original's 1.
    exposure <- if (label == "nb") 5 else 1
    counts <- p$layers[[1]]$data
    expect_true(all(counts$ran != "none"))
    expect_false(anyNA(counts$y.count))
    expect_equal(counts$y.count, counts$count / exposure, label = label)
    expect_s3_class(p$layers[[1]]$position, "PositionJitter")
    expect_equal(p$layers[[1]]$aes_params$alpha, fit$plot.settings$count.alpha.ran)

    samples <- p$layers[[2]]$data
    expect_true(all(samples$ran != "none"))
    expect_identical(p$layers[[2]]$aes_params$linetype, "dashed")
    expect_identical(length(unique(samples$curve)), 3L * 2L) # mice x treatments
    expect_equal(samples$y.pred, samples$pred / exposure, label = label)

    population <- p$layers[[3]]$data
    expect_true(all(population$ran == "none"))
    expect_equal(population$y.pred, population$pred)
    expect_identical(levels(population$treatment), fit$treatment$names)
    # Points and the population curve are on one scale: the mean count per
    # unit of exposure is near the population rate.
    key <- function(x) paste(x$species, x$treatment, x$bin)
    observed_mean <- tapply(counts$y.count, key(counts), mean)
    ratio <- observed_mean[key(population)] / population$y.pred
    expect_gt(stats::median(ratio), 0.8, label = label)
    expect_lt(stats::median(ratio), 1.25, label = label)

    expect_identical(nrow(p$layers[[4]]$data), nrow(fit$change.points))
  }
  expect_identical(plots_fit()$exposure$rule, "tokens")
  expect_identical(plot(plots_fit())$labels$y, "rate (expected count per cell)")
  expect_identical(plot(plots_fit_original())$labels$y, "rate (expected count)")
})

test_that("the rate-count plot selects genes and contexts and draws the log scale", {
  fit <- plots_fit()
  p <- plot(fit, species = "gene2", log.scale = TRUE, change.points = FALSE)
  expect_builds(p)
  expect_identical(layer_geoms(p), c("GeomPoint", "GeomLine", "GeomLine"))
  for (layer in p$layers) expect_true(all(layer$data$species == "gene2"))
  population <- p$layers[[3]]$data
  expect_equal(population$y.pred, population$pred.log)
  expect_equal(p$layers[[1]]$data$y.count, p$layers[[1]]$data$count.log)
  expect_identical(p$labels$y, "log(rate + 1)")

  p <- plot(fit, counts = FALSE, samples = FALSE, contexts = "context1")
  expect_identical(layer_geoms(p), c("GeomLine", "GeomVline"))

  expect_error(plot(fit, species = "gene"), class = "wisp_input_error")
  expect_error(plot(fit, contexts = "nowhere"), class = "wisp_input_error")
  expect_error(plot(fit, type = "nope"), class = "wisp_input_error")
  expect_error(plot(fit, counts = NA), class = "wisp_input_error")
})

test_that("a bootstrapped rate-count plot has the interval band", {
  fit <- plots_booted()
  p <- plot(fit)
  expect_builds(p)
  expect_identical(layer_geoms(p), c("GeomRibbon", "GeomPoint", "GeomLine", "GeomLine", "GeomVline"))
  band <- p$layers[[1]]$data
  expect_true(all(band$ran == "none"))
  # The count likelihood's rate of psi (model vignette §9.2), by hand.
  rate <- function(psi) {
    x <- expm1(psi) / 1e-3
    1e-8 + 1e-3 * (pmax(x, 0) + log1p(exp(-abs(x))))
  }
  expect_equal(band$y.low, rate(band$pred.low))
  expect_equal(band$y.high, rate(band$pred.high))
  p <- plot(fit, log.scale = TRUE)
  expect_equal(p$layers[[1]]$data$y.low, p$layers[[1]]$data$pred.low)
  expect_false("GeomRibbon" %in% layer_geoms(plot(fit, ci = FALSE)))
})

test_that("the parameter plot shows estimates, with intervals when bootstrapped", {
  for (fit in list(plots_fit(), plots_fit_original())) {
    p <- plot(fit, type = "parameters")
    expect_builds(p)
    expect_identical(layer_geoms(p), "GeomPoint")
    # By default the fixed effects: baseline values and treatment effects (not
    # the random effects, nor the count likelihood's SDs and dispersions).
    fixed <- fit$parameters$role %in% c("baseline", "beta")
    expect_identical(p$data$parameter, fit$parameters$name[fixed], label = fit_label(fit))
    expect_equal(p$data$estimate, unname(fit$fitted.parameters[fixed]), label = fit_label(fit))
    expect_s3_class(p$facet, "FacetGrid")
  }

  booted <- plots_booted()
  p <- plot(booted, type = "parameters")
  expect_builds(p)
  expect_identical(layer_geoms(p), c("GeomErrorbarh", "GeomPoint"))
  at <- match(p$data$parameter, booted$stats$parameters$parameter)
  expect_equal(p$data$CI.low, booted$stats$parameters$CI.low[at])
  expect_equal(p$data$CI.high, booted$stats$parameters$CI.high[at])

  p <- plot(booted, type = "parameters", roles = c("beta", "warp"), species = "gene1")
  expect_builds(p)
  keep <- booted$parameters$role %in% c("beta", "warp") & booted$parameters$species == "gene1"
  expect_identical(p$data$parameter, booted$parameters$name[keep])
  expect_error(plot(booted, type = "parameters", roles = "random"), class = "wisp_input_error")
})

test_that("the effect plot marks significance per treatment effect", {
  booted <- plots_booted()
  p <- plot(booted, type = "effects")
  expect_builds(p)
  expect_identical(layer_geoms(p), c("GeomVline", "GeomErrorbarh", "GeomPoint", "GeomText"))
  expect_s3_class(p$facet, "FacetWrap")
  beta <- booted$parameters$role == "beta"
  expect_identical(p$data$parameter, booted$parameters$name[beta])
  stats <- booted$stats$parameters
  marks <- p$layers[[4]]$data
  expect_identical(marks$significance, stats$significance[match(marks$parameter, stats$parameter)])
  expect_true(all(marks$significance %in% c("*", "**", "***")))
  expect_identical(marks$parameter, p$data$parameter[p$data$significant])
  expect_identical(p$data$significant, p$data$significance %in% c("*", "**", "***"))

  # Without a bootstrap: estimates only.
  p <- plot(plots_fit(), type = "effects")
  expect_builds(p)
  expect_identical(layer_geoms(p), c("GeomVline", "GeomPoint"))
})

test_that("the residual plot is the normal QQ plot of wisp_residuals(), with axis titles", {
  # More in test-diagnostics.R.
  for (fit in list(plots_fit(), plots_fit_original())) {
    label <- fit_label(fit)
    p <- plot(fit, type = "residuals")
    expect_builds(p)
    expect_identical(layer_geoms(p), c("GeomRibbon", "GeomAbline", "GeomPoint"))
    expect_true(nzchar(p$labels$x) && nzchar(p$labels$y), label = label)
    # Drawn with the fit's rng_seed: the same figure every time.
    expect_identical(plot(fit, type = "residuals")$data, p$data)
    r <- wisp_residuals(fit, seed = fit$settings$rng_seed)$residuals
    gene1 <- p$data[grepl("^gene1", p$data$gene), ]
    expected <- sort(r$residual[r$gene == "gene1"])
    if (label == "original") expected <- expected / stats::sd(expected)
    expect_equal(gene1$sample, expected, label = label)

    p <- plot(fit, type = "residuals", species = "gene1")
    expect_identical(nrow(p$data), sum(r$gene == "gene1"))
  }
})

test_that("the bootstrap plot shows time and memory per replicate and convergence codes", {
  boot <- plots_booted()$bootstrap
  p <- plot(boot)
  expect_builds(p)
  expect_identical(layer_geoms(p), "GeomPoint")
  expect_identical(levels(p$data$metric),
                   c("seconds", "peak RSS (MB)", "PSS (MB)", "private dirty (MB)"))
  seconds <- p$data[p$data$metric == "seconds", ]
  expect_equal(seconds$value, boot$diagnostics$seconds)
  expect_identical(seconds$replicate, seq_len(boot$R))
  expect_identical(seconds$code, boot$diagnostics$code)

  p <- plot(boot, type = "codes")
  expect_builds(p)
  expect_identical(layer_geoms(p), "GeomBar")
  expect_identical(nrow(p$data), as.integer(boot$R))

  boot$diagnostics$ok[3] <- FALSE
  boot$diagnostics$peak_rss_mb[3] <- NA
  p <- plot(boot, type = "codes")
  expect_identical(as.character(p$data$code[3]), "failed")
  expect_builds(plot(boot))
})
