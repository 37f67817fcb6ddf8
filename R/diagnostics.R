# Residual diagnostics of a fit: tables of residual mean and spread (what the
# original's analyze.residuals() gave), a test of the quantile residuals
# against the standard normal, a dispersion check, and their figures.

#' Residual diagnostics of a wisp fit
#'
#' Draws the residuals of a fit once and summarises them: their mean,
#' standard deviation and number by animal, treatment, gene, context and bin
#' (the tables of the original's `analyze.residuals()`), a test of the
#' quantile residuals against the standard normal, and a dispersion check.
#' [plot()][plot.wisp_residuals] draws a QQ plot, the residuals against the
#' bins per gene, and the dispersion check.
#'
#' @section Which residuals:
#' Under the count likelihood (the default) the residuals are randomized
#' quantile residuals (Dunn and Smyth 1996; see [residuals.wisp()]): standard
#' normal whatever the counts' sizes when the model is right. So their mean
#' per animal, treatment, gene or bin should be near 0 (within about
#' 2 / sqrt(n)) and their SD near 1, and a QQ plot against the normal should
#' follow the line. A missing transition shows as runs of residuals of one
#' sign along the bins; counts more variable than the fitted dispersion
#' allows (e.g. overdispersed counts fitted as Poisson,
#' `model.settings$dispersion = 0`) show as an SD above 1 and tails heavier
#' than the normal's. Under `likelihood = "original"`, whose objective is not
#' a distribution of the counts, the residuals are the log residuals
#' (observed minus fitted on the log(count + 1) scale), and only their
#' tables are given.
#'
#' @section Tests:
#' `normality` is a Kolmogorov-Smirnov test of all the quantile residuals
#' against the standard normal, and `tables$gene$ks.p` the same test per
#' gene (not adjusted for multiplicity). The fit's own estimates make the
#' residuals fit a little better than new data would (few parameters per
#' hundreds of counts: negligible here); the random draw within each count's
#' probability step makes the p-value itself random (repeat with other
#' seeds before reading much into a p-value near the threshold).
#'
#' A missing transition makes the residuals of neighbouring bins share a
#' sign in every animal, but the fitted dispersion grows to absorb the misfit,
#' so the pooled test above often misses it. The residuals' means per gene,
#' context, treatment and bin (over the animals) show it: standardised, z =
#' mean * sqrt(n), they are standard normal under the model. `bin.normality`
#' is a Kolmogorov-Smirnov test of all of them against the standard normal,
#' and `bins` has one row per gene and context: the number of means, their
#' mean square (mean of z^2; 1 under the model, a little less because the
#' fit follows the data) and the upper-tail chi-square p-value of sum z^2
#' (large when the curve misses the data along the bins). Counts more
#' variable than the model allows make the means vary more too, so this
#' check also rejects under ignored overdispersion; the dispersion check
#' below tells the two apart (it passes a missing transition, whose misfit
#' the fitted dispersion has absorbed).
#'
#' `dispersion` has one row per gene and context: the number of counts, the
#' fitted dispersion `phi`, the ratio of the counts' observed to their
#' model-expected variance (the mean squared Pearson residual, (y - mu)^2 /
#' (mu + phi mu^2 / exposure); near 1 when the fitted variance is right,
#' above 1 when the counts vary more), the mean square of the quantile
#' residuals (`qr.variance`, 1 under the model), and a two-sided p-value for
#' `qr.variance` = 1 (n times it is chi-square on n degrees of freedom under
#' the model).
#'
#' @param fit A `"wisp"` object from [wisp()].
#' @param by The tables to make: any of `"animal"`, `"treatment"`, `"gene"`,
#'   `"context"` and `"bin"`.
#' @param species,contexts Genes and contexts to include (default: all).
#' @param seed `NULL` (use R's random number generator as it is) or a seed
#'   for the draws of the quantile residuals, which are then repeatable
#'   (R's random number state is left as it was).
#' @return A `"wisp_residuals"` object: a list with `type` (`"quantile"` or
#'   `"log"`), `residuals` (one row per observed count: `animal`, `context`,
#'   `gene`, `treatment`, `bin`, `count`, `exposure`, `fitted` (the expected
#'   count), `residual`, and under the count likelihood `variance` (the
#'   model's variance of the count) and `pearson` ((count - fitted) /
#'   sqrt(variance))), `tables` (a named list of data frames with the group,
#'   `n`, `mean` and `sd`), `normality` and `bin.normality` (`"htest"`
#'   objects, or `NULL`), `bins` and `dispersion` (data frames, or `NULL`;
#'   see Tests).
#' @seealso [residuals.wisp()], [plot.wisp_residuals()], and
#'   `plot(fit, type = "residuals")` ([plot.wisp()]).
#' @references Dunn, P. K. and Smyth, G. K. (1996). Randomized quantile
#'   residuals. *Journal of Computational and Graphical Statistics* 5,
#'   236-244.
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 2, n.bins = 30)
#' fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
#' checked <- wisp_residuals(fit, seed = 1)
#' checked
#' checked$tables$animal
#' plot(checked, "bins")
wisp_residuals <- function(fit, by = c("animal", "treatment", "gene", "context", "bin"),
                           species = NULL, contexts = NULL, seed = NULL) {
  call <- sys.call()
  if (!inherits(fit, "wisp")) {
    stop_input("`fit` must be a \"wisp\" object from wisp(), not ", class(fit)[1], ".",
               call = call)
  }
  groups <- c("animal", "treatment", "gene", "context", "bin")
  if (!is.character(by) || !length(by) || anyNA(by) || !all(by %in% groups)) {
    stop_input("`by` must name tables among ", paste0("\"", groups, "\"", collapse = ", "),
               ", not ", describe_value(by), ".", call = call)
  }
  by <- unique(by)
  species <- check_plot_levels(species, fit$grouping.variables$species.lvls, "species",
                               call = call)
  contexts <- check_plot_levels(contexts, fit$grouping.variables$context.lvls, "contexts",
                                call = call)
  if (!is.null(seed) && (!is.numeric(seed) || length(seed) != 1L || !is.finite(seed))) {
    stop_input("`seed` must be NULL or one number, not ", describe_value(seed), ".", call = call)
  }
  checked <- checked_residuals(fit, seed, call)
  type <- checked$type
  # Quantile residuals (count likelihood) are standard normal under the
  # model: their tests and the dispersions' table go with them.
  count_fit <- identical(type, "quantile")
  d <- fit$count.data.summed
  keep <- observed_rows(fit) & d$ran != "none" & !is.na(d$count)
  residual <- checked$residual
  keep <- keep & d$species %in% species & d$context %in% contexts
  rows <- data.frame(
    animal = d$ran[keep], context = d$context[keep], gene = d$species[keep],
    treatment = d$treatment[keep], bin = d$bin[keep], count = d$count[keep],
    exposure = if (is.null(d$exposure)) rep(1, sum(keep)) else d$exposure[keep],
    fitted = d$pred[keep], residual = residual[keep], stringsAsFactors = FALSE
  )
  if (count_fit) {
    phi <- fit$gamma.dispersion[cbind(match(rows$gene, rownames(fit$gamma.dispersion)),
                                      match(rows$context, colnames(fit$gamma.dispersion)))]
    rows$variance <- rows$fitted + phi * rows$fitted^2 / rows$exposure
    rows$pearson <- (rows$count - rows$fitted) / sqrt(rows$variance)
  }
  ordered_levels <- list(
    animal = setdiff(fit$grouping.variables$ran.lvls, "none"),
    treatment = fit$treatment$names, gene = species, context = contexts,
    bin = sort(unique(rows$bin))
  )
  tables <- lapply(stats::setNames(by, by), function(group) {
    residual_table(rows, group, ordered_levels[[group]], normal = count_fit)
  })
  normality <- NULL
  dispersion <- NULL
  bins <- NULL
  bin_normality <- NULL
  if (count_fit && nrow(rows)) {
    normality <- normal_ks_test(rows$residual)
    normality$data.name <- "quantile residuals against the standard normal"
    dispersion <- dispersion_table(rows, species, contexts, fit$gamma.dispersion)
    means <- bin_means(rows)
    bin_normality <- normal_ks_test(means$z)
    bin_normality$data.name <- "standardised bin means of the quantile residuals against N(0, 1)"
    bins <- bin_table(means, species, contexts)
  }
  structure(list(type = type, residuals = rows, tables = tables, normality = normality,
                 bin.normality = bin_normality, bins = bins, dispersion = dispersion,
                 likelihood = fit_likelihood(fit), seed = seed,
                 treatment.labels = treatment_labels(fit)),
            class = "wisp_residuals")
}

# A Kolmogorov-Smirnov test against the standard normal. Quantile residuals
# are continuous draws: a tie (ks.test's warning) needs two draws clamped at
# the same extreme, which does not change the test.
normal_ks_test <- function(x) {
  suppressWarnings(stats::ks.test(x, "pnorm"))
}

# Mean, SD and number of residuals per level of `group`.
residual_table <- function(rows, group, levels, normal) {
  column <- if (group == "bin") rows$bin else rows[[group]]
  present <- levels[levels %in% column]
  split_residuals <- split(rows$residual, factor(column, levels = present))
  out <- data.frame(
    level = if (group == "bin") as.numeric(present) else as.character(present),
    n = vapply(split_residuals, length, 1L),
    mean = vapply(split_residuals, mean, 0),
    sd = vapply(split_residuals, function(x) if (length(x) > 1L) stats::sd(x) else NA_real_, 0),
    stringsAsFactors = FALSE
  )
  names(out)[1] <- group
  if (normal && group == "gene") {
    out$ks.p <- vapply(split_residuals, function(x) normal_ks_test(x)$p.value, 0)
  }
  rownames(out) <- NULL
  out
}

# The mean residual per gene, context, treatment and bin (over the animals),
# with its number and z = mean * sqrt(n): standard normal under the model.
bin_means <- function(rows) {
  key <- interaction(rows$gene, rows$context, rows$treatment, rows$bin, drop = TRUE,
                     sep = "\r")
  first <- !duplicated(key)
  means <- rows[first, c("gene", "context", "treatment", "bin")]
  index <- as.character(key[first])
  means$mean <- as.vector(tapply(rows$residual, key, mean)[index])
  means$n <- as.vector(table(key)[index])
  means$z <- means$mean * sqrt(means$n)
  rownames(means) <- NULL
  means[order(means$gene, means$context, means$treatment, means$bin), ]
}

# The misfit along the bins per gene and context (see ?wisp_residuals).
bin_table <- function(means, species, contexts) {
  grid <- expand.grid(context = contexts, gene = species, stringsAsFactors = FALSE)[, 2:1]
  out <- lapply(seq_len(nrow(grid)), function(i) {
    z <- means$z[means$gene == grid$gene[i] & means$context == grid$context[i]]
    data.frame(gene = grid$gene[i], context = grid$context[i], means = length(z),
               mean.square = if (length(z)) mean(z^2) else NA_real_,
               p.value = if (length(z)) stats::pchisq(sum(z^2), length(z), lower.tail = FALSE)
                 else NA_real_,
               stringsAsFactors = FALSE)
  })
  do.call(rbind, out)
}

# The dispersion check per gene and context (see ?wisp_residuals).
dispersion_table <- function(rows, species, contexts, dispersion) {
  grid <- expand.grid(context = contexts, gene = species, stringsAsFactors = FALSE)[, 2:1]
  out <- lapply(seq_len(nrow(grid)), function(i) {
    r <- rows[rows$gene == grid$gene[i] & rows$context == grid$context[i], , drop = FALSE]
    n <- nrow(r)
    square <- sum(r$residual^2)
    lower <- stats::pchisq(square, n)
    data.frame(
      gene = grid$gene[i], context = grid$context[i], n = n,
      phi = dispersion[grid$gene[i], grid$context[i]],
      variance.ratio = if (n) mean(r$pearson^2) else NA_real_,
      qr.variance = if (n) square / n else NA_real_,
      p.value = if (n) min(1, 2 * min(lower, 1 - lower)) else NA_real_,
      stringsAsFactors = FALSE
    )
  })
  do.call(rbind, out)
}

#' @rdname wisp_residuals
#' @param x A `"wisp_residuals"` object.
#' @param rows Most rows of each table to print.
#' @param ... Nothing (an error if given).
#' @export
print.wisp_residuals <- function(x, rows = 10L, ...) {
  check_unused_arguments(..., .method = "print.wisp_residuals")
  what <- if (x$type == "quantile") "randomized quantile residuals" else
    "log residuals (observed - fitted, log(count + 1) scale)"
  cat(sprintf("Residuals of a wisp fit: %d %s\n", nrow(x$residuals), what))
  if (x$type == "quantile") {
    cat("Under the model they are standard normal: mean 0, SD 1 in every group.\n")
  }
  if (!is.null(x$normality)) {
    cat(sprintf("Kolmogorov-Smirnov against N(0, 1): D = %.4f, p = %s\n",
                x$normality$statistic, format.pval(x$normality$p.value, digits = 3)))
    cat(sprintf("  the same for their standardised means per bin: D = %.4f, p = %s\n",
                x$bin.normality$statistic, format.pval(x$bin.normality$p.value, digits = 3)))
  }
  if (!is.null(x$bins)) {
    cat("\nMisfit along the bins (mean.square is 1 under the model):\n")
    print(format_table(x$bins), row.names = FALSE)
  }
  if (!is.null(x$dispersion)) {
    cat("\nDispersion check (variance.ratio and qr.variance are 1 under the model):\n")
    print(format_table(x$dispersion), row.names = FALSE)
  }
  for (name in names(x$tables)) {
    table <- x$tables[[name]]
    cat(sprintf("\nBy %s:\n", name))
    print(format_table(utils::head(table, rows)), row.names = FALSE)
    if (nrow(table) > rows) cat(sprintf("... %d more rows\n", nrow(table) - rows))
  }
  invisible(x)
}

format_table <- function(table) {
  for (name in names(table)) {
    if (is.double(table[[name]]) && name != "bin") {
      table[[name]] <- if (name %in% c("p.value", "ks.p")) {
        format.pval(table[[name]], digits = 2)
      } else {
        signif(table[[name]], 3)
      }
    }
  }
  table
}

#' Figures of residual diagnostics
#'
#' * `"qq"`: per gene, the residuals' quantiles against the standard
#'   normal's, with the line of equality and a pointwise 95 % band for the
#'   sorted residuals of a correct model (from the normal's order
#'   statistics); the panel titles give the gene's Kolmogorov-Smirnov
#'   p-value. Points outside the band in the tails: heavier tails than the
#'   model allows (e.g. ignored overdispersion).
#' * `"bins"`: per gene (and context), the residuals against
#'   the bins, with their mean per bin and treatment; the grey band is where
#'   95 % of the means of standard normal residuals lie. Means that leave the
#'   band along a run of bins: the curve misses the data there (e.g. a
#'   missing transition).
#' * `"dispersion"` (count likelihood only): per gene, the counts grouped by
#'   their model variance (up to 10 groups per gene and context): the mean
#'   squared deviation (count - fitted)^2 of each group against the mean model
#'   variance, on log scales, with the line of equality. Points above the
#'   line: the counts vary more than the fitted dispersion allows.
#'
#' Under `likelihood = "original"` the residuals are log residuals:
#' `"qq"` then shows them standardised (divided by their SD per gene).
#'
#' @param x A `"wisp_residuals"` object from [wisp_residuals()].
#' @param type The figure: `"qq"`, `"bins"` or `"dispersion"`.
#' @param ... Nothing (an error if given).
#' @return A ggplot object.
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 2, n.bins = 30)
#' fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
#' checked <- wisp_residuals(fit, seed = 1)
#' plot(checked)
#' plot(checked, "bins")
#' plot(checked, "dispersion")
plot.wisp_residuals <- function(x, type = c("qq", "bins", "dispersion"), ...) {
  check_unused_arguments(..., .method = "plot.wisp_residuals")
  type <- match_choice(type, "type", c("qq", "bins", "dispersion"))
  if (!nrow(x$residuals)) {
    stop_input("there are no residuals to plot (no observed count in the genes and contexts ",
               "chosen).", call = sys.call())
  }
  switch(type,
    qq = residual_qq_plot(x),
    bins = residual_bin_plot(x),
    dispersion = residual_dispersion_plot(x, call = sys.call())
  )
}

# Okabe-Ito colours (colour-blind safe), without black.
# The palette is plot_palette() of plots.R, shared by every figure.
diagnostic_theme <- function() {
  ggplot2::theme_bw(base_size = 11) +
    ggplot2::theme(strip.background = ggplot2::element_rect(fill = "grey95"),
                   plot.title = ggplot2::element_text(face = "bold"),
                   plot.title.position = "plot", legend.position = "bottom")
}

# Columns of facets for `panels` panels: grows with the number of genes.
facet_columns <- function(panels) {
  if (panels <= 3) panels else if (panels <= 8) ceiling(panels / 2) else
    ceiling(sqrt(panels * 1.4))
}

# "p = 0.42" or "p < 0.0001".
p_text <- function(p) {
  ifelse(p < 1e-4, "p < 0.0001", paste("p =", formatC(p, digits = 2, format = "fg")))
}

residual_qq_plot <- function(x) {
  rows <- x$residuals
  genes <- unique(rows$gene)
  quantile_type <- x$type == "quantile"
  points <- do.call(rbind, lapply(genes, function(gene) {
    r <- rows$residual[rows$gene == gene]
    if (!quantile_type) r <- r / stats::sd(r)
    n <- length(r)
    i <- seq_len(n)
    data.frame(gene = gene, theoretical = stats::qnorm(stats::ppoints(n)), sample = sort(r),
               lower = stats::qnorm(stats::qbeta(0.025, i, n - i + 1)),
               upper = stats::qnorm(stats::qbeta(0.975, i, n - i + 1)),
               stringsAsFactors = FALSE)
  }))
  labels <- if (quantile_type) {
    p <- x$tables$gene$ks.p
    if (is.null(p)) p <- vapply(genes, function(g) normal_ks_test(rows$residual[rows$gene == g])$p.value, 0)
    stats::setNames(sprintf("%s (KS %s)", genes, p_text(p)), genes)
  } else {
    stats::setNames(genes, genes)
  }
  points$gene <- factor(labels[points$gene], levels = labels)
  ylab <- if (quantile_type) "quantile residual" else "log residual / SD"
  subtitle <- if (quantile_type) {
    # Two lines: one does not fit a figure a column wide (85-120 mm).
    sprintf("all genes: Kolmogorov-Smirnov %s\ngrey: 95 %% band of a correct model",
            p_text(x$normality$p.value))
  } else {
    "log residuals standardised per gene\ngrey: 95 % band for normal residuals"
  }
  ggplot2::ggplot(points, ggplot2::aes(x = .data$theoretical)) +
    ggplot2::geom_ribbon(ggplot2::aes(ymin = .data$lower, ymax = .data$upper),
                         fill = "grey80") +
    ggplot2::geom_abline(intercept = 0, slope = 1, colour = "grey20", linetype = "dashed") +
    ggplot2::geom_point(ggplot2::aes(y = .data$sample), colour = plot_palette(1), size = 0.9,
                        alpha = 0.7) +
    ggplot2::facet_wrap(ggplot2::vars(.data$gene), ncol = facet_columns(length(genes))) +
    ggplot2::labs(x = "standard normal quantile", y = ylab, title = "Normal QQ plot of residuals",
                  subtitle = subtitle) +
    diagnostic_theme()
}

residual_bin_plot <- function(x) {
  rows <- x$residuals
  treatments <- unique(rows$treatment)
  rows$treatment <- factor(rows$treatment, levels = treatments)
  means <- bin_means(rows)
  means$treatment <- factor(means$treatment, levels = treatments)
  # Where 95 % of the means of n standard normal residuals lie (the largest
  # treatment group's n per bin: the band is drawn once per panel).
  band_key <- interaction(means$gene, means$context, means$bin, drop = TRUE, sep = "\r")
  band <- means[!duplicated(band_key), c("gene", "context", "bin")]
  band$half <- 1.96 / sqrt(as.vector(tapply(means$n, band_key, max)[as.character(
    band_key[!duplicated(band_key)])]))
  colours <- plot_palette(length(treatments))
  # Treatments by all their levels ("left, P12"), as in the other figures;
  # residuals made before the labels were kept show the treatments' names.
  legend_labels <- if (is.null(x$treatment.labels)) treatments else
    unname(x$treatment.labels[treatments])
  # One panel per gene (and context, when there are several), wrapped so
  # that the layout grows with the genes.
  panel_of <- function(d) {
    if (length(unique(rows$context)) > 1L) paste(d$gene, d$context, sep = ", ") else d$gene
  }
  panels <- unique(panel_of(rows))
  rows$panel <- factor(panel_of(rows), levels = panels)
  means$panel <- factor(panel_of(means), levels = panels)
  band$panel <- factor(panel_of(band), levels = panels)
  ylab <- if (x$type == "quantile") "quantile residual" else "log residual"
  band_text <- if (x$type == "quantile") "grey: 95 % range of a mean under the model" else
    "grey: +- 1.96 / sqrt(n)"
  ggplot2::ggplot() +
    ggplot2::geom_ribbon(data = band, ggplot2::aes(x = .data$bin, ymin = -.data$half,
                                                   ymax = .data$half), fill = "grey85") +
    ggplot2::geom_hline(yintercept = 0, colour = "grey40") +
    ggplot2::geom_point(data = rows, ggplot2::aes(x = .data$bin, y = .data$residual),
                        colour = "grey45", size = 0.6, alpha = 0.35,
                        position = ggplot2::position_jitter(width = 0.2, height = 0, seed = 1)) +
    ggplot2::geom_line(data = means, ggplot2::aes(x = .data$bin, y = .data$mean,
                                                  colour = .data$treatment), linewidth = 0.7) +
    ggplot2::scale_colour_manual(values = colours, labels = legend_labels) +
    ggplot2::facet_wrap(ggplot2::vars(.data$panel), ncol = facet_columns(nlevels(rows$panel))) +
    ggplot2::labs(x = "bin", y = ylab, colour = "mean per bin, treatment",
                  title = "Residuals along the bins",
                  subtitle = paste0("points: residuals; lines: their mean per bin\n", band_text)) +
    diagnostic_theme()
}

residual_dispersion_plot <- function(x, call) {
  if (x$type != "quantile") {
    stop_input("the dispersion check needs the count likelihood (likelihood = \"nb\"): the ",
               "original's objective has no variance of the counts.", call = call)
  }
  rows <- x$residuals
  rows$square <- (rows$count - rows$fitted)^2
  groups <- split(rows, interaction(rows$gene, rows$context, drop = TRUE, sep = "\r"))
  points <- do.call(rbind, lapply(groups, function(r) {
    k <- max(1L, min(10L, floor(nrow(r) / 20)))
    cut_points <- unique(stats::quantile(r$variance, seq(0, 1, length.out = k + 1)))
    group <- if (length(cut_points) > 1) {
      cut(r$variance, cut_points, include.lowest = TRUE)
    } else {
      factor(rep(1, nrow(r)))
    }
    data.frame(gene = r$gene[1], context = r$context[1],
               expected = as.vector(tapply(r$variance, group, mean)),
               observed = as.vector(tapply(r$square, group, mean)),
               n = as.vector(table(group)), stringsAsFactors = FALSE)
  }))
  points <- points[points$n > 0, , drop = FALSE]
  genes <- unique(rows$gene)
  summary <- x$dispersion
  labels <- stats::setNames(vapply(genes, function(g) {
    s <- summary[summary$gene == g, , drop = FALSE]
    sprintf("%s (variance ratio %s)", g, paste(formatC(s$variance.ratio, digits = 2,
                                                       format = "f"), collapse = ", "))
  }, ""), genes)
  points$gene <- factor(labels[points$gene], levels = labels)
  contexts <- unique(rows$context)
  ggplot2::ggplot(points, ggplot2::aes(x = .data$expected, y = .data$observed)) +
    ggplot2::geom_abline(intercept = 0, slope = 1, colour = "grey20", linetype = "dashed") +
    ggplot2::geom_point(ggplot2::aes(colour = .data$context), size = 2) +
    ggplot2::geom_line(ggplot2::aes(colour = .data$context)) +
    ggplot2::scale_x_log10() + ggplot2::scale_y_log10() +
    ggplot2::scale_colour_manual(values = plot_palette(length(contexts)),
                                 guide = if (length(contexts) > 1) "legend" else "none") +
    ggplot2::facet_wrap(ggplot2::vars(.data$gene), ncol = facet_columns(length(genes))) +
    ggplot2::labs(x = "model variance of the count (group mean)",
                  y = "mean (count - fitted)^2", colour = "context",
                  title = "Dispersion check",
                  subtitle = "counts grouped by model variance\nabove the line: overdispersed") +
    diagnostic_theme()
}
