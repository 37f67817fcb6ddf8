# The rate-count plot and the decomposition of one gene into its layers.

# The colour scale of treatments (colour and fill) of the rate-count
# figures: the colours of treatment_colours(), the treatments labelled by
# all their levels (treatment_labels()).
treatment_level_scale <- function(fit, opts, call = sys.call(-1)) {
  colours <- treatment_colours(fit, opts, call)
  ggplot2::scale_colour_manual(values = colours, breaks = names(colours),
                               labels = unname(treatment_labels(fit)[names(colours)]),
                               name = "treatment", aesthetics = c("colour", "fill"))
}

# The rows of fit$count.data.summed that a rate-count figure draws, with
# y values on the figure's scale: `y.count` (observed count per unit of
# exposure) and `y.pred` (fitted rate; per unit of exposure too), and the
# band `y.low`, `y.high` of the population rows when the fit has one.
ratecount_rows <- function(fit, species, contexts, opts) {
  d <- fit$count.data.summed
  # Only animals under the treatments they were observed in (the original's
  # summed table has every animal x treatment combination).
  d <- d[observed_rows(fit) & d$species %in% species & d$context %in% contexts, , drop = FALSE]
  d$treatment <- factor(d$treatment, levels = fit$treatment$names)
  d$species <- factor(d$species, levels = species)
  d$context <- factor(d$context, levels = contexts)
  d$panel <- factor(panel_labels(d$species, d$context, length(contexts) > 1),
                    levels = unique(panel_labels(rep(species, each = length(contexts)),
                                                 rep(contexts, length(species)),
                                                 length(contexts) > 1)))
  # Counts and the curves of random levels are per cell key (exposure x
  # rate under the count likelihood); the population curve is a rate per
  # unit of exposure. Draw all of them per unit of exposure, as the log
  # scale (log(1 + count / exposure), psi) does.
  exposure <- if (is.null(d$exposure)) 1 else ifelse(is.na(d$exposure), 1, d$exposure)
  log.scale <- isTRUE(opts$log.scale)
  d$y.count <- if (log.scale) d$count.log else d$count / exposure
  d$y.pred <- if (log.scale) d$pred.log else d$pred / exposure
  if (!is.null(d$pred.low) && !is.null(d$pred.high)) {
    rate <- curve_rate(fit)
    d$y.low <- if (log.scale) d$pred.low else rate(d$pred.low)
    d$y.high <- if (log.scale) d$pred.high else rate(d$pred.high)
  }
  # With a single random level there is no "none" row: that level is the
  # population.
  d$population <- if (any(d$ran == "none")) d$ran == "none" else rep(TRUE, nrow(d))
  d$animal <- d$ran != "none"
  d
}

# Points per bin of the drawn curves: the curves are functions of a
# continuous position, and drawn at the bins only they would be polygons
# with corners at the bins (a jagged peak).
curve_points_per_bin <- 8L

# The curves of some rows of ratecount_rows() (population or animals'
# rows: one curve per random level, context, gene and treatment) on a fine
# grid of bins, from predict(): `bin`, `y.pred` and, with `band`, `y.low`
# and `y.high` (the 95 % bootstrap band, as the fit's own band at the
# bins), on the figure's scale, per unit of exposure.
curve_rows <- function(fit, rows, opts, band = FALSE) {
  keep <- c("panel", "species", "context", "treatment", "ran", "population", "animal")
  rows <- rows[is.finite(rows$y.pred), , drop = FALSE]
  empty <- rows[0, keep, drop = FALSE]
  empty$bin <- numeric(0)
  empty$y.pred <- numeric(0)
  if (band) empty$y.low <- empty$y.high <- numeric(0)
  # (No finite curve: e.g. a gene whose fit failed shows its counts only.)
  empty$curve <- character(0)
  if (!nrow(rows)) return(empty)
  key <- paste(rows$ran, rows$context, rows$species, rows$treatment, sep = "\r")
  curves <- lapply(split(seq_len(nrow(rows)), factor(key, levels = unique(key))), function(i) {
    bins <- range(rows$bin[i])
    grid <- sort(unique(c(seq(bins[1], bins[2], by = 1 / curve_points_per_bin), bins[2])))
    out <- rows[rep(i[1], length(grid)), keep, drop = FALSE]
    out$bin <- grid
    out
  })
  out <- do.call(rbind, curves)
  rownames(out) <- NULL
  newdata <- data.frame(bin = out$bin, context = as.character(out$context),
                        species = as.character(out$species), ran = as.character(out$ran),
                        stringsAsFactors = FALSE)
  treatment <- as.character(out$treatment)
  if ("treatment" %in% fit$fix$names) {
    levels <- treatment_levels(fit)
    for (factor in fit$fix$names) {
      newdata[[factor]] <- levels[[factor]][match(treatment, levels$treatment)]
    }
  } else {
    newdata$treatment <- treatment
  }
  type <- if (isTRUE(opts$log.scale)) "link" else "response"
  booted <- inherits(fit$bootstrap, "wisp_bootstrap")
  if (band && booted) {
    # A panel at a time: the curves at every point for every replicate are
    # a points x replicates matrix.
    out$y.pred <- out$y.low <- out$y.high <- NA_real_
    for (k in split(seq_len(nrow(out)), out$panel, drop = TRUE)) {
      values <- stats::predict(fit, newdata[k, , drop = FALSE], type = type,
                               interval = "confidence", level = 0.95, method = "bootstrap")
      out$y.pred[k] <- values[, "fit"]
      out$y.low[k] <- values[, "lwr"]
      out$y.high[k] <- values[, "upr"]
    }
  } else {
    out$y.pred <- stats::predict(fit, newdata, type = type)
    if (band) {
      # A band without the replicates it came from (a fit saved without
      # them): between its values at the bins.
      out$y.low <- out$y.high <- NA_real_
      for (k in split(seq_len(nrow(out)), paste(out$ran, out$context, out$species,
                                                 out$treatment, sep = "\r"))) {
        at <- rows[rows$ran == out$ran[k[1]] & rows$context == out$context[k[1]] &
                     rows$species == out$species[k[1]] & rows$treatment == out$treatment[k[1]], ,
                   drop = FALSE]
        between <- function(y) {
          if (sum(is.finite(y)) < 2) return(NA_real_)
          stats::approx(at$bin, y, out$bin[k], rule = 2)$y
        }
        out$y.low[k] <- between(at$y.low)
        out$y.high[k] <- between(at$y.high)
      }
    }
  }
  out$curve <- paste(out$ran, out$treatment, sep = " / ")
  out
}

# The mean observed count (per unit of exposure, on the figure's scale) of
# the animals per treatment and bin: what the population curve is fitted to.
mean_counts <- function(animals) {
  observed <- animals[!is.na(animals$y.count), , drop = FALSE]
  if (!nrow(observed)) return(observed[0, c("panel", "treatment", "bin", "y.count")])
  means <- stats::aggregate(observed["y.count"],
                            by = observed[c("panel", "treatment", "bin")], FUN = mean)
  means[order(means$panel, means$treatment, means$bin), , drop = FALSE]
}

# The rate-count plot: one panel per (gene, context), on one page of genes.
ratecount_plot <- function(fit, pages, contexts, opts) {
  d <- ratecount_rows(fit, pages$species, contexts, opts)
  pop <- d[d$population, , drop = FALSE]
  animals <- d[d$animal & d$ran %in% opts$animals, , drop = FALSE]
  has_population_level <- any(d$ran == "none")

  has_band <- opts$ci && !is.null(pop$y.low)
  pop_curves <- curve_rows(fit, pop, opts, band = has_band)
  p <- ggplot2::ggplot(pop_curves, ggplot2::aes(x = .data$bin)) + wisp_theme(fit, opts) +
    treatment_level_scale(fit, opts)
  if (has_band) p <- p + interval_layers(pop_curves, opts)
  if (opts$counts %in% c("animals", "both")) {
    observed <- animals[!is.na(animals$y.count), , drop = FALSE]
    p <- p + ggplot2::geom_point(
      data = observed, ggplot2::aes(y = .data$y.count, colour = .data$treatment),
      alpha = opts$count.alpha.ran, size = opts$count_size,
      position = ggplot2::position_jitter(width = opts$count_jitter, height = 0, seed = 1L)
    )
  }
  if (opts$counts %in% c("mean", "both")) {
    p <- p + ggplot2::geom_point(
      data = mean_counts(animals), ggplot2::aes(y = .data$y.count, colour = .data$treatment),
      alpha = opts$count.alpha.none, size = opts$count_size, shape = 15
    )
  }
  if (opts$samples && has_population_level && nrow(animals)) {
    p <- p + ggplot2::geom_line(
      data = curve_rows(fit, animals, opts),
      ggplot2::aes(y = .data$y.pred, colour = .data$treatment, group = .data$curve),
      linetype = "dashed", linewidth = 0.35, alpha = opts$pred.alpha.ran
    )
  }
  p <- p + ggplot2::geom_line(
    data = pop_curves,
    ggplot2::aes(y = .data$y.pred, colour = .data$treatment, group = .data$treatment),
    linewidth = 0.9, alpha = opts$pred.alpha.none
  )
  has_cp <- FALSE
  cp <- fit$change.points
  if (opts$change.points && !is.null(cp) && nrow(cp)) {
    cp <- cp[cp$species %in% pages$species & cp$context %in% contexts, , drop = FALSE]
    if (nrow(cp)) {
      has_cp <- TRUE
      cp$treatment <- factor(cp$treatment, levels = fit$treatment$names)
      cp$panel <- factor(panel_labels(cp$species, cp$context, length(contexts) > 1),
                         levels = levels(d$panel))
      p <- p + ggplot2::geom_vline(
        data = cp, ggplot2::aes(xintercept = .data$bin, colour = .data$treatment),
        linetype = "dotted", linewidth = 0.5, show.legend = FALSE
      )
    }
  }
  p <- p + dim_bound_layers(opts)
  if (length(opts$y.lim)) p <- p + ggplot2::coord_cartesian(ylim = opts$y.lim)
  n_panels <- nlevels(d$panel)
  p + bin_axis_scale(fit) + ggplot2::facet_wrap(ggplot2::vars(.data$panel), scales = "free_y",
                          ncol = min(n_panels, if (n_panels <= 3) n_panels else
                            if (n_panels == 4) 2 else 3)) +
    ggplot2::labs(
      x = bin_axis_title(fit), y = if (isTRUE(opts$log.scale)) "log(rate + 1)" else rate_label(fit),
      colour = "treatment", fill = "treatment", title = "Rates and counts",
      subtitle = plot_subtitle(
        "solid: population curve",
        if (opts$samples && has_population_level && nrow(animals)) "dashed: animals' curves",
        if (opts$counts %in% c("animals", "both")) "points: animals' counts",
        if (opts$counts %in% c("mean", "both")) "squares: mean count",
        if (has_band) paste0(if (isTRUE(opts$CI_style)) "band" else "dot-dashed bounds",
                             ": 95 % bootstrap interval"),
        if (has_cp) "dotted: change points",
        page_note(pages)
      )
    ) +
    ggplot2::guides(colour = ggplot2::guide_legend(override.aes = list(alpha = 1)))
}

# One gene in one context, layer by layer: what the figure is made of.
decomposition_plot <- function(fit, species, contexts, opts, call) {
  gene <- species[1]
  context <- contexts[1]
  d <- ratecount_rows(fit, gene, context, opts)
  pop <- d[d$population, , drop = FALSE]
  animals <- d[d$animal & d$ran %in% opts$animals, , drop = FALSE]
  has_population_level <- any(d$ran == "none")
  panels <- c("observed counts (animals)", "mean observed count", "animals' curves",
              "population curve", "together")
  at <- function(data, panel) {
    data$layer <- factor(rep(panel, nrow(data)), levels = panels)
    data
  }
  observed <- animals[!is.na(animals$y.count), , drop = FALSE]
  means <- mean_counts(animals)
  has_band <- opts$ci && !is.null(pop$y.low)
  pop_curves <- curve_rows(fit, pop, opts, band = has_band)
  jitter <- ggplot2::position_jitter(width = opts$count_jitter, height = 0, seed = 1L)
  p <- ggplot2::ggplot(mapping = ggplot2::aes(x = .data$bin)) + wisp_theme(fit, opts) +
    treatment_level_scale(fit, opts)
  if (has_band) {
    for (panel in panels[4:5]) p <- p + interval_layers(at(pop_curves, panel), opts)
  }
  for (panel in panels[c(1, 5)]) {
    p <- p + ggplot2::geom_point(
      data = at(observed, panel), ggplot2::aes(y = .data$y.count, colour = .data$treatment),
      alpha = opts$count.alpha.ran, size = opts$count_size, position = jitter
    )
  }
  p <- p + ggplot2::geom_point(
    data = at(means, panels[2]), ggplot2::aes(y = .data$y.count, colour = .data$treatment),
    alpha = max(opts$count.alpha.none, 0.05), size = opts$count_size, shape = 15
  )
  if (has_population_level && nrow(animals)) {
    curves <- curve_rows(fit, animals, opts)
    for (panel in panels[c(3, 5)]) {
      p <- p + ggplot2::geom_line(
        data = at(curves, panel),
        ggplot2::aes(y = .data$y.pred, colour = .data$treatment, group = .data$curve),
        linetype = "dashed", linewidth = 0.35, alpha = opts$pred.alpha.ran
      )
    }
  }
  for (panel in panels[4:5]) {
    p <- p + ggplot2::geom_line(
      data = at(pop_curves, panel),
      ggplot2::aes(y = .data$y.pred, colour = .data$treatment, group = .data$treatment),
      linewidth = 0.9, alpha = opts$pred.alpha.none
    )
  }
  p <- p + dim_bound_layers(opts)
  if (length(opts$y.lim)) p <- p + ggplot2::coord_cartesian(ylim = opts$y.lim)
  p + bin_axis_scale(fit) +
    ggplot2::facet_wrap(ggplot2::vars(.data$layer), ncol = 3, drop = FALSE) +
    ggplot2::labs(
      x = bin_axis_title(fit), y = if (isTRUE(opts$log.scale)) "log(rate + 1)" else rate_label(fit),
      colour = "treatment", fill = "treatment",
      title = sprintf("Decomposition of %s%s", gene,
                      if (length(fit$grouping.variables$context.lvls) > 1)
                        paste0(" in ", context) else ""),
      subtitle = plot_subtitle(
        "the count likelihood fits the animals' counts; the population curve has no rows of its own",
        "its data are the animals' counts, summarised by their mean per bin")
    ) +
    ggplot2::guides(colour = ggplot2::guide_legend(override.aes = list(alpha = 1)))
}
