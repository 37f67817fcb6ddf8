# ggplot2 figures of "wisp" fits and "wisp_bootstrap" results: checked on
# their layers, mappings and data against values computed here from the fit.
# Fixtures in helper-plots.R; image snapshots in test-plot-snapshots.R.

skip_if_not_installed("ggplot2")

# The count likelihood's rate of psi (model vignette section 9.2), by hand.
rate_by_hand <- function(psi) {
  x <- expm1(psi) / 1e-3
  1e-8 + 1e-3 * (pmax(x, 0) + log1p(exp(-abs(x))))
}

# The rows of a curve layer at whole bins, beside the row of the fit's
# summed table (its fitted values) of the same curve and bin.
curve_at_bins <- function(curves, fit) {
  whole <- curves[curves$bin == round(curves$bin), , drop = FALSE]
  d <- fit$count.data.summed
  key <- function(x) paste(x$ran, x$context, x$species, x$treatment, x$bin, sep = "|")
  table <- d[match(key(whole), key(d)), , drop = FALSE]
  list(curve = whole, table = table)
}

test_that("the rate-count plot has counts, sample curves, population curves and change points", {
  for (fit in list(plots_fit(), plots_fit_original())) {
    label <- fit_label(fit)
    p <- plot(fit)
    expect_builds(p)
    expect_identical(layer_geoms(p), c("GeomPoint", "GeomLine", "GeomLine", "GeomVline"))
    expect_s3_class(p$facet, "FacetWrap")

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
    # On a grid finer than the bins; at the bins, the fitted values.
    expect_true(any(samples$bin != round(samples$bin)))
    at_bins <- curve_at_bins(samples, fit)
    expect_false(anyNA(at_bins$table$pred))
    expect_equal(at_bins$curve$y.pred, at_bins$table$pred / exposure, label = label)

    population <- p$layers[[3]]$data
    expect_true(all(population$ran == "none"))
    at_bins <- curve_at_bins(population, fit)
    expect_equal(at_bins$curve$y.pred, at_bins$table$pred)
    expect_identical(levels(population$treatment), fit$treatment$names)
    # Points and the population curve are on one scale: the mean count per
    # unit of exposure is near the population rate.
    key <- function(x) paste(x$species, x$treatment, x$bin)
    observed_mean <- tapply(counts$y.count, key(counts), mean)
    ratio <- observed_mean[key(at_bins$curve)] / at_bins$curve$y.pred
    expect_gt(stats::median(ratio), 0.8, label = label)
    expect_lt(stats::median(ratio), 1.25, label = label)

    expect_identical(nrow(p$layers[[4]]$data), nrow(fit$change.points))
    # The treatments' colours are the Okabe-Ito palette's first two.
    built <- ggplot2::ggplot_build(p)
    line <- built$data[[3]]
    expect_setequal(unique(line$colour), c("#0072B2", "#D55E00"))
  }
  expect_identical(plots_fit()$exposure$rule, "tokens")
  expect_identical(plot(plots_fit())$labels$y, "rate (expected count per cell)")
  expect_identical(plot(plots_fit_original())$labels$y, "rate (expected count)")
  expect_identical(plot(plots_fit())$labels$x, "bin")
})

test_that("the rate-count curves are drawn on a grid finer than the bins", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  fit <- plots_fit_example()
  p <- plot(fit, species = "gene2")
  built <- ggplot2::ggplot_build(p)
  geoms <- layer_geoms(p)
  lines <- which(geoms == "GeomLine")
  expect_length(lines, 2L) # the animals' curves, the population's
  bins <- max(fit$count.data.summed$bin)
  for (i in lines) {
    x <- built$data[[i]]$x
    expect_true(any(x != round(x)))
    # At least 5 points per bin on every curve.
    per_curve <- tapply(x, built$data[[i]]$group, function(x) length(unique(x)))
    expect_true(all(per_curve >= 5 * (bins - 1) + 1))
  }
  # At the bins, the curves are predict()'s values there (the rate per
  # cell: predict() with exposure 1).
  for (i in lines) {
    curves <- p$layers[[i]]$data
    whole <- curves[curves$bin == round(curves$bin), , drop = FALSE]
    expected <- predict(fit, data.frame(bin = whole$bin, context = as.character(whole$context),
                                        species = as.character(whole$species),
                                        treatment = as.character(whole$treatment),
                                        ran = whole$ran), type = "response")
    expect_equal(whole$y.pred, expected)
    expect_identical(nrow(whole), length(unique(curves$curve)) * as.integer(bins))
  }
  # On the log scale, predict()'s log(1 + rate).
  p <- plot(fit, species = "gene2", log.scale = TRUE, samples = FALSE)
  curves <- p$layers[[which(layer_geoms(p) == "GeomLine")]]$data
  whole <- curves[curves$bin == round(curves$bin), , drop = FALSE]
  expect_equal(whole$y.pred, predict(fit, data.frame(
    bin = whole$bin, context = "context1", species = "gene2",
    treatment = as.character(whole$treatment)), type = "link"))
  # Between the bins, the curve of the bins' fitted values is not the
  # straight line between them (near the transition of gene2).
  half <- curves[curves$bin %% 1 == 0.5, , drop = FALSE]
  chord <- vapply(seq_len(nrow(half)), function(k) {
    same <- whole$treatment == half$treatment[k]
    mean(whole$y.pred[same][match(half$bin[k] + c(-0.5, 0.5), whole$bin[same])])
  }, 0)
  expect_gt(max(abs(half$y.pred - chord)), 1e-3)
})

test_that("the rate-count plot selects genes, contexts and animals and draws the log scale", {
  fit <- plots_fit()
  p <- plot(fit, species = "gene2", log.scale = TRUE, change.points = FALSE)
  expect_builds(p)
  expect_identical(layer_geoms(p), c("GeomPoint", "GeomLine", "GeomLine"))
  for (layer in p$layers) expect_true(all(layer$data$species == "gene2"))
  at_bins <- curve_at_bins(p$layers[[3]]$data, fit)
  expect_equal(at_bins$curve$y.pred, at_bins$table$pred.log)
  expect_equal(p$layers[[1]]$data$y.count, p$layers[[1]]$data$count.log)
  expect_identical(p$labels$y, "log(rate + 1)")

  p <- plot(fit, counts = FALSE, samples = FALSE, contexts = "context1")
  expect_identical(layer_geoms(p), c("GeomLine", "GeomVline"))

  p <- plot(fit, animals = "mouse2")
  expect_builds(p)
  expect_identical(unique(p$layers[[1]]$data$ran), "mouse2")
  expect_identical(unique(p$layers[[2]]$data$ran), "mouse2")

  expect_error(plot(fit, species = "gene"), class = "wisp_input_error")
  expect_error(plot(fit, contexts = "nowhere"), class = "wisp_input_error")
  expect_error(plot(fit, animals = "mouse9"), class = "wisp_input_error", regexp = "animals")
  expect_error(plot(fit, type = "nope"), class = "wisp_input_error")
  expect_error(plot(fit, counts = NA), class = "wisp_input_error")
  expect_error(plot(fit, dim.bounds = "L4"), class = "wisp_input_error", regexp = "dim.bounds")
  expect_error(plot(fit, y.lim = c(5, 1)), class = "wisp_input_error", regexp = "y.lim")
  expect_error(plot(fit, splitting_factor = "genotype"), class = "wisp_input_error",
               regexp = "hemisphere")
})

test_that("many genes are drawn a page at a time", {
  fit <- plots_fit()
  p <- plot(fit, per.page = 1, page = 2)
  expect_builds(p)
  for (layer in p$layers[1:3]) expect_true(all(layer$data$species == "gene2"))
  expect_match(p$labels$subtitle, "page 2 of 2")
  expect_error(plot(fit, per.page = 1, page = 3), class = "wisp_input_error", regexp = "2 pages")
  p <- plot(fit, type = "effects", per.page = 1)
  expect_true(all(p$data$species == "gene1"))
})

test_that("a bootstrapped rate-count plot has the interval band", {
  fit <- plots_booted()
  p <- plot(fit)
  expect_builds(p)
  expect_identical(layer_geoms(p), c("GeomRibbon", "GeomPoint", "GeomLine", "GeomLine", "GeomVline"))
  band <- p$layers[[1]]$data
  expect_true(all(band$ran == "none"))
  # On the curves' fine grid; at the bins, the fit's own band (its
  # quantiles of the replicates' fitted values).
  expect_true(any(band$bin != round(band$bin)))
  at_bins <- curve_at_bins(band, fit)
  expect_false(anyNA(at_bins$table$pred.low))
  expect_equal(at_bins$curve$y.low, rate_by_hand(at_bins$table$pred.low))
  expect_equal(at_bins$curve$y.high, rate_by_hand(at_bins$table$pred.high))
  p <- plot(fit, log.scale = TRUE)
  at_bins <- curve_at_bins(p$layers[[1]]$data, fit)
  expect_equal(at_bins$curve$y.low, at_bins$table$pred.low)
  expect_false("GeomRibbon" %in% layer_geoms(plot(fit, ci = FALSE)))
})

test_that("the parameter plot shows the baseline, a treatment's effects or the random effects", {
  fit <- plots_fit()
  p <- plot(fit, type = "parameters")
  expect_builds(p)
  expect_identical(layer_geoms(p), c("GeomErrorbar", "GeomPoint"))
  baseline <- fit$parameters$role == "baseline"
  expect_identical(p$data$parameter, fit$parameters$name[baseline])
  expect_equal(p$data$estimate, unname(fit$fitted.parameters[baseline]))
  intervals <- confint(fit, parm = p$data$parameter, method = "wald")
  expect_equal(p$data$CI.low, unname(intervals[, 1]))
  expect_equal(p$data$CI.high, unname(intervals[, 2]))
  expect_identical(p$labels$title, "Baseline (left)")
  expect_s3_class(p$facet, "FacetGrid")

  p <- plot(fit, type = "parameters", group = "right")
  expect_builds(p)
  effects <- fit$parameters$role == "beta" & fit$parameters$treatment %in% "right"
  expect_identical(p$data$parameter, fit$parameters$name[effects])
  expect_identical(p$labels$title, "Effects of right vs left")
  expect_identical(layer_geoms(p)[1], "GeomHline")

  p <- plot(fit, type = "parameters", group = "random")
  expect_builds(p)
  warps <- fit$parameters$role == "warp"
  expect_identical(p$data$parameter, fit$parameters$name[warps])
  expect_identical(levels(p$data$index), c("mouse1", "mouse2", "mouse3"))
  expect_identical(layer_geoms(p), c("GeomHline", "GeomPoint"))

  # The original likelihood without a bootstrap has no intervals.
  expect_identical(layer_geoms(plot(plots_fit_original(), type = "parameters")), "GeomPoint")

  # Gene classes group the genes into columns of panels.
  p <- plot(fit, type = "parameters", gene.classes = list(up = "gene2", down = "gene1"))
  expect_builds(p)
  expect_identical(levels(p$data$class), c("up", "down"))
  expect_identical(as.character(p$data$class[p$data$species == "gene1"][1]), "down")
  expect_identical(levels(p$data$gene), c("gene2", "gene1"))
  expect_error(plot(fit, type = "parameters", gene.classes = c(gene9 = "x")),
               class = "wisp_input_error", regexp = "gene.classes")
  expect_error(plot(fit, type = "parameters", group = "left"), class = "wisp_input_error",
               regexp = "group")
  expect_error(plot(fit, type = "parameters", violin = TRUE), class = "wisp_input_error",
               regexp = "bootstrap")
})

test_that("a bootstrapped parameter plot draws violins of the replicates", {
  booted <- plots_booted()
  p <- plot(booted, type = "parameters", group = "right")
  expect_builds(p)
  expect_identical(layer_geoms(p)[1:4], c("GeomHline", "GeomViolin", "GeomErrorbar", "GeomPoint"))
  values <- p$layers[[2]]$data
  boot <- booted$bootstrap
  used <- boot$diagnostics$ok & boot$diagnostics$converged
  first <- p$data$parameter[1]
  expect_equal(sort(values$value[values$parameter == first]),
               sort(boot$t[used, match(first, names(booted$fitted.parameters))]))
  at <- match(p$data$parameter, booted$stats$parameters$parameter)
  expect_equal(p$data$CI.low, booted$stats$parameters$CI.low[at])
  expect_false("GeomViolin" %in% layer_geoms(plot(booted, type = "parameters", violin = FALSE)))
})

test_that("the effect plot marks significance per treatment effect", {
  fit <- plots_fit()
  p <- plot(fit, type = "effects")
  expect_builds(p)
  geoms <- layer_geoms(p)
  expect_identical(geoms[1:3], c("GeomHline", "GeomLinerange", "GeomPoint"))
  expect_s3_class(p$facet, "FacetGrid")
  beta <- fit$parameters$role == "beta"
  expect_identical(p$data$parameter, fit$parameters$name[beta])
  stats <- fit$stats$parameters
  significant <- stats$significance[match(p$data$parameter, stats$parameter)] %in%
    c("*", "**", "***")
  expect_identical(p$data$significant, significant)
  if (any(significant)) {
    expect_identical(geoms[4], "GeomText")
    marks <- p$layers[[4]]$data
    expect_identical(marks$parameter, p$data$parameter[significant])
    expect_identical(marks$significance, stats$significance[match(marks$parameter, stats$parameter)])
  }
  # Effects are named by the levels they compare; components by words.
  scale <- p$scales$get_scales("colour")
  expect_identical(unname(scale$labels), "right vs left")
  expect_setequal(levels(p$data$component.label),
                  c("block\nrate", "transition\nslope", "transition\npoint"))
  expect_identical(p$labels$x, "block (rates) or transition (slopes, points)")

  # Without statistics: estimates only.
  p <- plot(plots_fit_original(), type = "effects")
  expect_builds(p)
  expect_identical(layer_geoms(p), c("GeomHline", "GeomPoint"))
})

# The x of every parameter's point, interval and star in a built figure of
# parameters, each layer's row found by the parameter's own numbers: its
# panel (its component, and `facet_value(row)` of its row of fit$parameters
# in the column `facet` of the layout), its
# estimate (the point), its interval (the bar) and its significance at
# the top of its interval (the star), from fit$fitted.parameters and
# fit$stats$parameters, not from the figure's data.
parameter_positions <- function(p, fit, parameters, facet, facet_value) {
  built <- ggplot2::ggplot_build(p)
  geoms <- layer_geoms(p)
  layout <- built$layout$layout
  points <- built$data[[which(geoms == "GeomPoint")]]
  bars <- built$data[[which(geoms %in% c("GeomLinerange", "GeomErrorbar"))]]
  stars <- built$data[[which(geoms == "GeomText")]]
  stars <- stars[nzchar(stars$label), , drop = FALSE]
  components <- c(Rt = "block\nrate", tslope = "transition\nslope",
                  tpoint = "transition\npoint")
  stats <- fit$stats$parameters
  rows <- fit$parameters[match(parameters, fit$parameters$name), , drop = FALSE]
  one <- function(layer, keep) {
    at <- which(keep)
    if (length(at) != 1L) return(NA_real_)
    layer$x[at]
  }
  near <- function(a, b) abs(a - b) < 1e-8
  out <- lapply(seq_len(nrow(rows)), function(i) {
    panel <- layout$PANEL[layout$component.label == components[[rows$component[i]]] &
                            layout[[facet]] == facet_value(rows[i, ])]
    estimate <- unname(fit$fitted.parameters[rows$name[i]])
    s <- stats[stats$parameter == rows$name[i], ]
    star <- if (s$significance %in% c("*", "**", "***")) {
      one(stars, stars$PANEL == panel & stars$label == s$significance &
            near(stars$y, s$CI.high))
    } else NA_real_
    data.frame(parameter = rows$name[i], block = rows$block[i], treatment = rows$treatment[i],
               species = rows$species[i], PANEL = panel,
               significant = s$significance %in% c("*", "**", "***"),
               point = one(points, points$PANEL == panel & near(points$y, estimate)),
               bar = one(bars, bars$PANEL == panel & near(bars$ymin, s$CI.low) &
                           near(bars$ymax, s$CI.high)),
               star = star, stringsAsFactors = FALSE)
  })
  do.call(rbind, out)
}

expect_aligned <- function(positions) {
  # Every point and bar found once; a star for every significant effect.
  expect_false(anyNA(positions$point))
  expect_false(anyNA(positions$bar))
  expect_false(anyNA(positions$star[positions$significant]))
  expect_true(all(is.na(positions$star[!positions$significant])))
  expect_equal(positions$bar, positions$point)
  marked <- positions[positions$significant, , drop = FALSE]
  expect_equal(marked$star, marked$point)
}

test_that("the effect plot draws each effect's point, interval and star at one x", {
  fit <- plots_fit_example()
  beta <- fit$parameters$name[fit$parameters$role == "beta"]
  # The figure's point: blocks holding significant and non-significant
  # effects (the case that was misdrawn).
  stats <- fit$stats$parameters[match(beta, fit$stats$parameters$parameter), ]
  key <- paste(fit$parameters$species, fit$parameters$component,
               fit$parameters$block)[match(beta, fit$parameters$name)]
  significant <- stats$significance %in% c("*", "**", "***")
  mixed <- tapply(significant, key, function(x) any(x) && !all(x))
  expect_true(any(mixed))

  gene <- function(row) row$species
  positions <- parameter_positions(plot(fit, type = "effects"), fit, beta, "panel", gene)
  expect_aligned(positions)
  # Each effect over its block, the treatments of a block apart.
  expect_true(all(abs(positions$point - positions$block) < 0.5))
  per_block <- split(positions$point, paste(positions$PANEL, positions$block))
  expect_true(all(vapply(per_block, function(x) !anyDuplicated(round(x, 8)), TRUE)))
  # In treatment order, left to right.
  order_ok <- vapply(split(positions, paste(positions$PANEL, positions$block)), function(b) {
    identical(order(b$point), order(match(b$treatment, fit$treatment$names)))
  }, TRUE)
  expect_true(all(order_ok))

  # The same in the effects panel of the gene summary.
  skip_if_not_installed("patchwork")
  summary <- wisp_gene_summary(fit, "gene1")
  titles <- vapply(patch_plots(summary), function(q) {
    title <- q$labels$title
    if (is.null(title)) "" else title
  }, "")
  effects <- patch_plots(summary)[[which(titles == "Treatment effects")]]
  gene1 <- beta[fit$parameters$species[match(beta, fit$parameters$name)] == "gene1"]
  positions <- parameter_positions(effects, fit, gene1, "panel", gene)
  expect_aligned(positions)
  expect_true(any(positions$significant) && !all(positions$significant))
})

test_that("the parameter plot draws each parameter's point, interval and star at one x", {
  fit <- plots_fit_example()
  right <- fit$parameters$name[fit$parameters$role == "beta" & fit$parameters$treatment == "right"]
  positions <- parameter_positions(plot(fit, type = "parameters", group = "right"), fit, right,
                                   "class", function(row) "all genes")
  expect_true(any(positions$significant) && !all(positions$significant))
  expect_aligned(positions)
  # Each gene's parameters around the gene's place on the axis.
  gene <- match(positions$species, fit$grouping.variables$species.lvls)
  expect_true(all(abs(positions$point - gene) < 0.5))
})

test_that("figures label each treatment by all its levels, not like an effect", {
  fit <- plots_fit_example()
  # wisp_example's treatments are named as the original names them:
  # "right" is (right, P12), "P18" is (left, P18).
  expect_identical(fit$treatment$names, c("left:P12", "right", "P18", "right:P18"))
  levels <- c("left, P12", "right, P12", "left, P18", "right, P18")
  legend_labels <- function(p) {
    built <- ggplot2::ggplot_build(p)
    scale <- built$plot$scales$get_scales("colour")
    as.character(scale$get_labels(scale$get_breaks()))
  }
  expect_identical(legend_labels(plot(fit)), levels)
  expect_identical(legend_labels(plot(fit, type = "decomposition")), levels)
  expect_identical(plot(fit, type = "parameters")$labels$title, "Baseline (left, P12)")
  # The effects plot names effects, by the levels they compare.
  expect_identical(legend_labels(plot(fit, type = "effects")),
                   c("right vs left", "P18 vs P12", "right:P18 (interaction)"))
  # A single factor's treatments are its levels.
  expect_identical(legend_labels(plot(plots_fit())), c("left", "right"))
})

test_that("the time-series plot draws each block's rate per treatment against time", {
  fit <- plots_fit_time()
  p <- plot(fit, type = "timeseries")
  expect_builds(p)
  expect_identical(layer_geoms(p), c("GeomErrorbar", "GeomLine", "GeomPoint", "GeomPoint"))
  d <- p$data
  expect_identical(levels(d$time), c("P7", "P14", "P21"))
  expect_identical(levels(d$line), c("left", "right"))
  # By hand: the block's value under (right, P14) is the baseline plus the
  # effects of right, P14 and right:P14, on the log(1 + rate) scale.
  par <- fit$parameters
  value <- function(treatment) {
    row <- par$role %in% c("baseline", "beta") & par$component == "Rt" & par$species == "gene1" &
      par$block == 1 & (par$role == "baseline" | par$treatment %in% treatment)
    names <- par$name[row]
    list(names = names, z = sum(fit$fitted.parameters[names]))
  }
  right14 <- value(c("right", "P14", "right:P14"))
  expect_length(right14$names, 4L)
  at <- d$species == "gene1" & d$block == 1 & d$line == "right" & d$time == "P14"
  expect_equal(d$y[at], rate_by_hand(right14$z))
  # Its Wald interval: z +- 1.96 sd, with the variance of the sum of the
  # four parameters from vcov().
  V <- vcov(fit)[right14$names, right14$names]
  se <- sqrt(sum(V))
  expect_equal(d$y.low[at], rate_by_hand(right14$z - stats::qnorm(0.975) * se))
  expect_equal(d$y.high[at], rate_by_hand(right14$z + stats::qnorm(0.975) * se))
  left7 <- value(character(0))
  at <- d$species == "gene1" & d$block == 1 & d$line == "left" & d$time == "P7"
  expect_equal(d$y[at], rate_by_hand(left7$z))

  # The crosses: the mean observed count per cell of the block's bins.
  crosses <- p$layers[[4]]$data
  cp <- fit$change.points
  reference <- fit$treatment$names[1]
  first <- min(cp$bin[cp$species == "gene1" & cp$treatment == reference])
  rows <- fit$count.data.summed
  rows <- rows[rows$ran != "none" & rows$species == "gene1" & rows$treatment == reference &
                 !is.na(rows$count) & rows$bin < first, ]
  at <- crosses$species == "gene1" & crosses$treatment == reference & crosses$block == 1
  expect_equal(crosses$y[at], mean(rows$count / rows$exposure))

  p <- plot(fit, type = "timeseries", component = "tpoint", log.scale = TRUE)
  expect_builds(p)
  expect_identical(p$labels$y, "transition point (bin)")
  expect_error(plot(plots_fit(), type = "timeseries"), class = "wisp_input_error",
               regexp = "time series")
  expect_builds(plot(plots_fit(), type = "timeseries", time.series = "hemisphere"))
  expect_error(plot(fit, type = "timeseries", splitting_factor = "age"),
               class = "wisp_input_error", regexp = "splitting factor")
})

test_that("the distribution plot pools the effects and warps by component", {
  fit <- plots_fit()
  p <- plot(fit, type = "distributions")
  expect_builds(p)
  expect_identical(layer_geoms(p), c("GeomBar", "GeomVline"))
  # Without a bootstrap: one value per effect and warp, the estimates.
  keep <- fit$parameters$role %in% c("beta", "warp")
  expect_identical(sort(p$data$value), sort(unname(fit$fitted.parameters[keep])))
  rate_effects <- fit$parameters$role == "beta" & fit$parameters$component == "Rt"
  expect_equal(sort(p$data$value[p$data$component == "block rate"]),
               sort(unname(fit$fitted.parameters[rate_effects])))
  # With one: every used replicate of every effect and warp.
  booted <- plots_booted()
  p <- plot(booted, type = "distributions")
  expect_builds(p)
  boot <- booted$bootstrap
  used <- sum(boot$diagnostics$ok & boot$diagnostics$converged)
  expect_identical(nrow(p$data), used * sum(booted$parameters$role %in% c("beta", "warp")))
})

test_that("the decomposition draws one gene layer by layer", {
  fit <- plots_fit()
  p <- plot(fit, type = "decomposition", species = "gene2")
  expect_builds(p)
  panels <- c("observed counts (animals)", "mean observed count", "animals' curves",
              "population curve", "together")
  layer_panels <- lapply(p$layers[1:7], function(l) unique(as.character(l$data$layer)))
  expect_identical(unlist(layer_panels), panels[c(1, 5, 2, 3, 5, 4, 5)])
  for (layer in p$layers) expect_true(all(layer$data$species == "gene2"))
  # The mean observed count per treatment and bin, by hand.
  means <- p$layers[[3]]$data
  rows <- fit$count.data.summed
  rows <- rows[rows$ran != "none" & rows$species == "gene2" & rows$treatment == "right" &
                 rows$bin == 7, ]
  expect_equal(means$y.count[means$treatment == "right" & means$bin == 7],
               mean(rows$count / rows$exposure))
  expect_match(p$labels$title, "gene2")
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

test_that("subtitles break between their pieces, each line at most 80 characters", {
  expect_identical(
    wispack:::plot_subtitle("solid: population curve", "dashed: animals' curves",
                            "points: animals' counts", "dotted: change points"),
    "solid: population curve; dashed: animals' curves; points: animals' counts;\ndotted: change points")
  expect_identical(wispack:::plot_subtitle("a", "", "b"), "a; b")
  expect_null(wispack:::plot_subtitle("", NULL))
  long <- wispack:::plot_subtitle("short", strrep("word ", 30), "tail")
  lines <- strsplit(long, "\n", fixed = TRUE)[[1]]
  expect_identical(lines[1], "short;")
  expect_true(all(nchar(lines) <= 80))
  expect_identical(gsub("[;\n ]", "", long), gsub(" ", "", paste0("short", strrep("word", 30), "tail")))
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
  expect_identical(as.character(seconds$code), boot$diagnostics$code)
  # Converged replicates in the package's first colour, not ggplot's pink.
  built <- ggplot2::ggplot_build(p)$data[[1]]
  expect_identical(unique(built$colour), "#0072B2")
  # Metrics measured for only some replicates (once per worker) say so.
  sparse <- boot
  sparse$diagnostics$pss_mb <- c(rep(NA, sparse$R - 1L), 60)
  sparse$diagnostics$private_dirty_mb <- c(rep(NA, sparse$R - 1L), 3)
  expect_identical(plot(sparse)$labels$subtitle,
                   "PSS and private dirty: measured once per worker, after its last replicate")
  every <- boot
  every$diagnostics$pss_mb <- every$diagnostics$private_dirty_mb <- seq_len(every$R)
  expect_null(plot(every)$labels$subtitle)

  p <- plot(boot, type = "codes")
  expect_builds(p)
  expect_identical(layer_geoms(p), "GeomBar")
  expect_identical(nrow(p$data), as.integer(boot$R))

  boot$diagnostics$ok[3] <- FALSE
  boot$diagnostics$peak_rss_mb[3] <- NA
  p <- plot(boot, type = "codes")
  expect_identical(as.character(p$data$code[3]), "failed")
  # A failed replicate is black in both figures; no other code is.
  bars <- ggplot2::ggplot_build(p)$data[[1]]
  expect_identical(sort(bars$fill), sort(c("#000000", "#0072B2")))
  points <- ggplot2::ggplot_build(plot(boot))$data[[1]]
  expect_identical(unique(points$colour[points$x == 3]), "#000000")
  expect_false("#000000" %in% points$colour[points$x != 3])
})

# ---------------------------------------------------------------------------
# plot.settings: every entry changes the figure it names.

# The fit with plot.settings as wisp(plot.settings = settings) would keep them.
with_plot_settings <- function(fit, ...) {
  fit$plot.settings <- wispack:::wisp_plot_settings(list(...))
  fit
}

# Hue (degrees) and lightness of colours, from their CIE Luv coordinates
# (grDevices::hcl() takes polar Luv).
hue_lightness <- function(colours) {
  luv <- grDevices::convertColor(t(grDevices::col2rgb(colours)) / 255, from = "sRGB", to = "Luv")
  data.frame(colour = colours, l = luv[, 1], h = (atan2(luv[, 3], luv[, 2]) * 180 / pi) %% 360)
}

built_layer <- function(p, geom) {
  built <- ggplot2::ggplot_build(p)
  built$data[[which(layer_geoms(p) == geom)[1]]]
}

settings_tested <- c("print.plots", "dim.bounds", "log.scale", "splitting_factor", "CI_style",
                     "splitting_factor_colors", "label_size", "title_size", "axis_size",
                     "legend_size", "count_size", "count_jitter", "count.alpha.ran",
                     "count.alpha.none", "pred.alpha.ran", "pred.alpha.none", "y.lim")

test_that("every plot.settings entry has a test below", {
  expect_setequal(names(wispack:::wisp_default_plot_settings()), settings_tested)
})

test_that("dim.bounds draws labelled boundaries, from the fit or from the argument", {
  fit <- plots_fit()
  plain <- plot(fit, change.points = FALSE)
  expect_false(any(c("GeomVline", "GeomText") %in% layer_geoms(plain)))
  bounded <- with_plot_settings(fit, dim.bounds = c(L4 = 12.5, L5 = 30))
  p <- plot(bounded, change.points = FALSE)
  expect_builds(p)
  expect_equal(unique(built_layer(p, "GeomVline")$xintercept), c(12.5, 30))
  expect_identical(unique(built_layer(p, "GeomText")$label), c("L4", "L5"))
  # The argument wins over the fit's setting; unnamed bounds have no labels.
  p <- plot(bounded, change.points = FALSE, dim.bounds = 20)
  expect_equal(unique(built_layer(p, "GeomVline")$xintercept), 20)
  expect_false("GeomText" %in% layer_geoms(p))
  p <- plot(bounded, type = "decomposition")
  expect_equal(unique(built_layer(p, "GeomVline")$xintercept), c(12.5, 30))
})

test_that("log.scale draws the curves on the log(rate + 1) scale", {
  fit <- with_plot_settings(plots_fit(), log.scale = TRUE)
  at_bins <- curve_at_bins(plot(fit)$layers[[3]]$data, fit)
  expect_equal(at_bins$curve$y.pred, at_bins$table$pred.log)
  at_bins <- curve_at_bins(plot(fit, log.scale = FALSE)$layers[[3]]$data, fit)
  expect_equal(at_bins$curve$y.pred, at_bins$table$pred)
})

test_that("splitting_factor and its colours set the hue by one factor, the lightness by the others", {
  fit <- plots_fit_time()
  levels <- wispack:::treatment_levels(fit)
  p <- plot(with_plot_settings(fit, splitting_factor = "hemisphere"), samples = FALSE,
            counts = FALSE, change.points = FALSE)
  expect_builds(p)
  line <- built_layer(p, "GeomLine")
  treatments <- levels(p$layers[[1]]$data$treatment)[line$group]
  colours <- unique(data.frame(treatment = treatments, colour = line$colour))
  hl <- cbind(colours, hue_lightness(colours$colour)[c("l", "h")])
  hl$hemisphere <- levels$hemisphere[match(hl$treatment, levels$treatment)]
  hl$age <- levels$age[match(hl$treatment, levels$treatment)]
  left <- hl[hl$hemisphere == "left", ]
  right <- hl[hl$hemisphere == "right", ]
  expect_lt(max(abs(left$h - 120)), 12)
  expect_lt(max(abs(right$h - 240)), 12)
  # Lightness steps through the ages.
  expect_identical(order(left$l), match(c("P7", "P14", "P21"), left$age))
  expect_gt(diff(range(left$l)), 20)

  p <- plot(fit, splitting_factor = "hemisphere", splitting_factor_colors = c(30, 300),
            samples = FALSE, counts = FALSE, change.points = FALSE)
  line <- built_layer(p, "GeomLine")
  treatments <- levels(p$layers[[1]]$data$treatment)[line$group]
  hemisphere <- levels$hemisphere[match(treatments, levels$treatment)]
  hues <- hue_lightness(line$colour)$h
  expect_lt(max(abs(hues[hemisphere == "left"] - 30)), 12)
  expect_lt(max(abs(hues[hemisphere == "right"] - 300)), 12)

  # Without a splitting factor the treatments take the Okabe-Ito palette.
  p <- plot(fit, samples = FALSE, counts = FALSE, change.points = FALSE)
  expect_identical(sort(unique(built_layer(p, "GeomLine")$colour)),
                   sort(c("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9")))
  # In the time-series plot, the splitting factor's levels colour the lines.
  p <- plot(fit, type = "timeseries", splitting_factor = "hemisphere",
            splitting_factor_colors = c(30, 300))
  line <- built_layer(p, "GeomLine")
  expect_lt(min(abs(hue_lightness(unique(line$colour))$h - 30)), 12)
})

test_that("CI_style = FALSE draws the band's bounds as dashed lines", {
  fit <- plots_booted()
  band <- plot(fit)
  expect_identical(layer_geoms(band)[1], "GeomRibbon")
  lines <- plot(with_plot_settings(fit, CI_style = FALSE))
  expect_false("GeomRibbon" %in% layer_geoms(lines))
  bounds <- lines$layers[[1]]$data
  expect_identical(lines$layers[[1]]$aes_params$linetype, "dotdash")
  population <- band$layers[[1]]$data
  expect_equal(sort(bounds$y), sort(c(population$y.low, population$y.high)))
})

test_that("label_size sets the size of boundary labels and significance stars", {
  fit <- plots_fit()
  p <- plot(with_plot_settings(fit, dim.bounds = c(L4 = 12), label_size = 4.2))
  expect_equal(unique(built_layer(p, "GeomText")$size), 4.2)
  p <- plot(fit, type = "effects", label_size = 2.2)
  skip_if_not("GeomText" %in% layer_geoms(p), "no significant effect")
  expect_equal(unique(built_layer(p, "GeomText")$size), 2.2)
})

test_that("title_size, axis_size and legend_size set the text sizes of every figure", {
  fit <- with_plot_settings(plots_fit(), title_size = 30, axis_size = 15, legend_size = 13)
  for (type in c("ratecount", "effects", "parameters", "decomposition")) {
    theme <- ggplot2::theme_get() + plot(fit, type = type)$theme
    expect_equal(theme$plot.title$size, 21, label = type)
    expect_equal(theme$axis.title$size, 15, label = type)
    expect_equal(theme$legend.text$size, 13, label = type)
  }
  theme <- plot(plots_fit())$theme
  expect_equal(theme$axis.title$size, 12)
})

test_that("count_size, count_jitter and count.alpha.ran set the animals' count points", {
  fit <- plots_fit()
  points <- built_layer(plot(fit), "GeomPoint")
  expect_equal(unique(points$size), 1.5)
  expect_equal(unique(points$alpha), 0.25)
  p <- plot(with_plot_settings(fit, count_size = 3, count.alpha.ran = 0.6, count_jitter = 0))
  points <- built_layer(p, "GeomPoint")
  expect_equal(unique(points$size), 3)
  expect_equal(unique(points$alpha), 0.6)
  # Without jitter the points sit on their bins; with jitter 2, up to 2 away.
  expect_true(all(points$x == round(points$x)))
  points <- built_layer(plot(with_plot_settings(fit, count_jitter = 2)), "GeomPoint")
  expect_gt(max(abs(points$x - p$layers[[1]]$data$bin)), 0.5)
  expect_lte(max(abs(points$x - p$layers[[1]]$data$bin)), 2)
})

test_that("count.alpha.none sets the opacity of the mean observed counts", {
  fit <- plots_fit()
  p <- plot(with_plot_settings(fit, count.alpha.none = 0.7), counts = "mean")
  expect_identical(layer_geoms(p)[1], "GeomPoint")
  means <- built_layer(p, "GeomPoint")
  expect_equal(unique(means$alpha), 0.7)
  expect_equal(unique(means$shape), 15)
  # One point per treatment, bin and gene: the animals' mean.
  expect_identical(nrow(means), 2L * 2L * 40L)
  p <- plot(fit, counts = "both", count.alpha.none = 0.1)
  alphas <- vapply(which(layer_geoms(p) == "GeomPoint"), function(i)
    unique(ggplot2::ggplot_build(p)$data[[i]]$alpha), 0)
  expect_equal(alphas, c(0.25, 0.1))
})

test_that("pred.alpha.ran and pred.alpha.none set the opacity of the curves", {
  p <- plot(with_plot_settings(plots_fit(), pred.alpha.ran = 0.3, pred.alpha.none = 0.5))
  built <- ggplot2::ggplot_build(p)
  expect_equal(unique(built$data[[2]]$alpha), 0.3)
  expect_equal(unique(built$data[[3]]$alpha), 0.5)
})

test_that("y.lim sets the limits of the y axis", {
  fit <- plots_fit()
  free <- ggplot2::ggplot_build(plot(fit))$layout$panel_params[[1]]$y.range
  p <- plot(with_plot_settings(fit, y.lim = c(0, 50)))
  range <- ggplot2::ggplot_build(p)$layout$panel_params[[1]]$y.range
  expect_equal(range, c(0, 50) + c(-1, 1) * 0.05 * 50)
  expect_false(isTRUE(all.equal(free, range)))
  p <- plot(fit, type = "decomposition", y.lim = c(1, 9))
  expect_equal(ggplot2::ggplot_build(p)$layout$panel_params[[1]]$y.range, c(0.6, 9.4))
})

test_that("print.plots prints the standard figures at the end of wisp(), and only when asked", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  expect_false(wispack:::wisp_default_plot_settings()$print.plots) # not interactive here
  # Pages drawn on an uncompressed PDF device while `expr` runs.
  count_pages <- function(expr) {
    file <- withr::local_tempfile(fileext = ".pdf")
    grDevices::pdf(file, compress = FALSE)
    device <- grDevices::dev.cur()
    on.exit(if (device %in% grDevices::dev.list()) grDevices::dev.off(device))
    force(expr)
    grDevices::dev.off(device)
    sum(grepl("/Type /Page\\b", readLines(file, warn = FALSE)) &
          !grepl("/Type /Pages", readLines(file, warn = FALSE)))
  }
  pages <- count_pages(fit <- wisp(plots_counts(), model.settings = list(LRO_cost = "none"),
                                   plot.settings = list(print.plots = TRUE), verbose = FALSE))
  expect_identical(pages, length(wisp_plots(fit)))
  expect_gte(pages, 5L)
  expect_identical(count_pages(wisp(plots_counts(), model.settings = list(LRO_cost = "none"),
                                    verbose = FALSE)), 0L)
})

test_that("wisp_plots() returns the standard set by name", {
  fit <- plots_fit_time()
  plots <- wisp_plots(fit)
  treatments <- fit$treatment$names[-1]
  expect_identical(names(plots), c("ratecount", "timeseries", "effects", "distributions",
                                   "parameters.baseline",
                                   paste0("parameters.", treatments), "parameters.random",
                                   "residuals"))
  for (name in names(plots)) expect_builds(plots[[name]])
  plots <- wisp_plots(plots_fit_original(), dim.bounds = c(L4 = 20))
  expect_equal(unique(built_layer(plots$ratecount, "GeomText")$x), 20)
  expect_false("timeseries" %in% names(plots))
})

test_that("the gene summary puts the rate-count, residual and parameter plots on one page", {
  skip_if_not_installed("patchwork")
  fit <- plots_fit()
  page <- wisp_gene_summary(fit, "gene2", dim.bounds = c(L4 = 20))
  expect_s3_class(page, "patchwork")
  file <- withr::local_tempfile(fileext = ".pdf")
  expect_no_warning(ggplot2::ggsave(file, page, width = 11, height = 8.5))
  expect_gt(file.size(file), 1000)
  expect_error(wisp_gene_summary(fit, "gene9"), class = "wisp_input_error", regexp = "gene")
  expect_error(wisp_gene_summary(fit, c("gene1", "gene2")), class = "wisp_input_error")
})
