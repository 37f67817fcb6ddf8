# ggplot2 figures of "wisp" fits and "wisp_bootstrap" results. The S3
# methods plot.wisp() and plot.wisp_bootstrap() are the exported entry
# points; the builders are internal: ratecount and decomposition in
# R/plot-ratecount.R, parameters, effects and time series in
# R/plot-parameters.R, the gene summary and the standard set in
# R/plot-summary.R, and the shared pieces (theme, colours, options, pages)
# here.

# ndensity: a computed variable of geom_histogram(), in after_stat().
utils::globalVariables(c(".data", "ndensity"))

#' Plot a wisp fit
#'
#' Figures of a fit, as [ggplot2][ggplot2::ggplot] objects that can be
#' printed, modified with `+` and saved with [ggplot2::ggsave()]. Every
#' figure reads at 7 x 5 in; with many genes a figure shows one page of
#' genes (`page`, `per.page`). [wisp_plots()] returns the standard set and
#' [wisp_gene_summary()] one page per gene.
#'
#' * `"ratecount"`: per gene (and context), the rate (the expected count)
#'   over the bins: the observed counts of the animals (random levels),
#'   jittered and faint; the fitted curve of each animal, dashed, under the
#'   treatments it was observed in; the population curve per treatment,
#'   solid; the detected change points, dotted; when the fit was
#'   bootstrapped, the 95 % bootstrap band of the population curve; and the
#'   layer or region boundaries of `dim.bounds`, labelled. Under the count
#'   likelihood everything is per unit of exposure (per cell, or per bin
#'   with `exposure = "none"`).
#' * `"timeseries"`: per gene, the block rates (or, with `component`, the
#'   transition slopes or points) of every treatment against the levels of
#'   the time series, one line per block and level of the other factors
#'   (the splitting factor), with their intervals and, for rates, the mean
#'   observed count of the bins of that block (crosses).
#' * `"parameters"`: the parameters of one `group` per gene (x) and block or
#'   transition (colour), one row of panels per component: the baseline
#'   (the reference treatment), the effects of one treatment, or the random
#'   effects (`"random"`: the warps of every animal). Violins of the
#'   bootstrap replicates when the fit has them (`violin`), otherwise
#'   estimates with their intervals; stars mark significant effects. Genes
#'   are grouped into columns by `gene.classes`.
#' * `"effects"`: the treatment effects with their intervals, one column of
#'   panels per gene and one row per component, coloured by treatment and
#'   marked `*`, `**` or `***` (adjusted p-value below alpha, alpha / 5,
#'   alpha / 50), filled when significant.
#' * `"distributions"`: histograms of the treatment effects (block rate,
#'   transition slope and point) and of the random effects (point, rate and
#'   slope warps), each pooled over genes, blocks, treatments and animals:
#'   of the bootstrap replicates when the fit has them, else of the
#'   estimates.
#' * `"decomposition"`: one gene in one context, layer by layer: the
#'   observed counts of the animals, their mean per bin (what the
#'   population curve is fitted to; the count likelihood has no
#'   extrapolated rows), each animal's fitted curve, the population curve
#'   with its band, and all of them together.
#' * `"residuals"`: the normal QQ plot of the residuals per gene, with a
#'   95 % band for a correct model and Kolmogorov-Smirnov p-values: under
#'   the count likelihood, randomized quantile residuals (standard normal
#'   when the model is right); under the original's, standardised log
#'   residuals. The quantile residuals are drawn with the seed
#'   `model.settings$rng_seed` of the fit, so the figure is the same every
#'   time (R's random number state is left alone); [wisp_residuals()] draws
#'   them with any seed and gives the tables and tests, and
#'   [plot.wisp_residuals()] the residuals against the bins and the
#'   dispersion check.
#'
#' Intervals in `"parameters"`, `"effects"` and `"timeseries"` are those of
#' `fit$stats` (see [summary.wisp()]): Wald intervals, or bootstrap
#' percentile intervals of a bootstrapped fit; tested effects at their
#' multiplicity-adjusted level in `"effects"` and `"parameters"`.
#'
#' Arguments named like entries of `plot.settings` (see [wisp()]) override
#' the fit's `plot.settings` for this figure; left `NULL`, the fit's value is
#' used.
#'
#' @param x A `"wisp"` object from [wisp()].
#' @param type The figure: `"ratecount"`, `"timeseries"`, `"parameters"`,
#'   `"effects"`, `"distributions"`, `"decomposition"`, `"residuals"` or
#'   `"genes"` (the gene-level tests: one tile per gene and term, coloured
#'   by the log fold change of the gene's total expected count, outlined
#'   and marked with a dot where the gene is called at FDR 0.05).
#' @param species,contexts Genes and contexts to show (default: all; for
#'   `"decomposition"` the first of each).
#' @param log.scale Draw rates on the log(rate + 1) scale.
#' @param counts Which observed counts the rate-count plot shows: `TRUE` or
#'   `"animals"` (every animal's count per bin), `"mean"` (their mean per
#'   treatment and bin), `"both"`, or `FALSE` / `"none"`.
#' @param samples,ci,change.points Whether the rate-count plot shows the
#'   per-animal curves, the bootstrap band (when there is one) and the
#'   change points.
#' @param animals Random levels (animals) whose counts and curves the
#'   rate-count and decomposition plots draw (default: all).
#' @param dim.bounds Positions (bins) of layer or region boundaries, drawn
#'   as labelled vertical lines (labels from the names); `numeric(0)` draws
#'   none.
#' @param y.lim Two numbers: the limits of the y axis of the rate-count and
#'   decomposition plots (data outside are kept, as with
#'   [ggplot2::coord_cartesian()]).
#' @param CI_style `TRUE`: intervals of curves as shaded bands; `FALSE`:
#'   as dot-dashed lines at their bounds.
#' @param splitting_factor A fixed effect whose levels set the hue of the
#'   treatments' colours (the other factors set their lightness), and the
#'   lines of the time-series plot.
#' @param splitting_factor_colors HCL hues (0-360), one per level of the
#'   splitting factor (recycled).
#' @param label_size Size of text labels (boundary and block labels,
#'   significance stars), in ggplot2's text size units (mm).
#' @param count.alpha.none Opacity of the mean observed counts
#'   (`counts = "mean"` and the decomposition plot).
#' @param group For `"parameters"`: `"baseline"` (default), the name of a
#'   non-reference treatment (its effects), or `"random"` (random effects).
#' @param violin For `"parameters"`: violins of the bootstrap replicates
#'   (default: when the fit has them); `FALSE` draws estimates with
#'   intervals.
#' @param gene.classes For `"parameters"`: classes of genes, a character
#'   vector named by gene (or a list of gene vectors named by class); genes
#'   are grouped into one column of panels per class.
#' @param time.series For `"timeseries"`: the fixed effect whose levels are
#'   the time points (default: `variables$timeseries` of the fit).
#' @param component For `"timeseries"`: `"Rt"` (block rates), `"tslope"` or
#'   `"tpoint"` (transition slopes or points).
#' @param page,per.page With many genes, the page to draw and how many
#'   genes a page holds (default: 12 panels for rate-count and time-series
#'   plots, 6 genes for the effects plot).
#' @param ... Nothing: an argument `plot()` does not take (e.g. `main`) is an
#'   error; add titles and themes to the returned plot with `+`.
#' @return A ggplot object.
#' @seealso [wisp_plots()], [wisp_gene_summary()], [plot.wisp_bootstrap()]
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 2, n.bins = 40)
#' fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
#' plot(fit, dim.bounds = c(L2 = 10, L4 = 22, L5 = 31))
#' plot(fit, type = "effects")
#' \donttest{
#' plot(fit, species = "gene1", log.scale = TRUE, splitting_factor = "hemisphere")
#' plot(fit, type = "parameters")
#' plot(fit, type = "decomposition", species = "gene2")
#' plot(fit, type = "residuals")
#' plot(fit, type = "genes")
#' }
plot.wisp <- function(x, type = c("ratecount", "timeseries", "parameters", "effects",
                                  "distributions", "decomposition", "residuals", "genes"),
                      species = NULL, contexts = NULL, log.scale = NULL, counts = TRUE,
                      samples = TRUE, ci = TRUE, change.points = TRUE, animals = NULL,
                      dim.bounds = NULL, y.lim = NULL, CI_style = NULL,
                      splitting_factor = NULL, splitting_factor_colors = NULL,
                      label_size = NULL, count.alpha.none = NULL, group = "baseline",
                      violin = NULL, gene.classes = NULL, time.series = NULL,
                      component = c("Rt", "tslope", "tpoint"), page = 1, per.page = NULL,
                      ...) {
  check_unused_arguments(..., .method = "plot.wisp")
  check_wisp_object(x, call = sys.call())
  type <- match_choice(type, "type", plot_types)
  call <- sys.call()
  species <- check_plot_levels(species, x$grouping.variables$species.lvls, "species", call)
  contexts <- check_plot_levels(contexts, x$grouping.variables$context.lvls, "contexts", call)
  for (flag in c("samples", "ci", "change.points")) check_flag(get(flag), flag, call = call)
  opts <- plot_options(x, list(log.scale = log.scale, dim.bounds = dim.bounds, y.lim = y.lim,
                               CI_style = CI_style, splitting_factor = splitting_factor,
                               splitting_factor_colors = splitting_factor_colors,
                               label_size = label_size, count.alpha.none = count.alpha.none),
                       call)
  opts$counts <- count_layers(counts, call)
  opts$samples <- samples
  opts$ci <- ci
  opts$change.points <- change.points
  opts$animals <- check_plot_levels(animals, setdiff(x$grouping.variables$ran.lvls, "none"),
                                    "animals", call)
  check_whole_number(page, "page", lower = 1, call = call)
  if (!is.null(per.page)) check_whole_number(per.page, "per.page", lower = 1, upper = 1000, call = call)
  switch(type,
    ratecount = {
      pages <- plot_pages(species, per.page %||% max(1L, 12L %/% length(contexts)), page, call)
      ratecount_plot(x, pages, contexts, opts)
    },
    timeseries = {
      component <- match_choice(component, "component", c("Rt", "tslope", "tpoint"), call)
      pages <- plot_pages(species, per.page %||% max(1L, 12L %/% length(contexts)), page, call)
      timeseries_plot(x, pages, contexts, opts, time.series, component, call)
    },
    parameters = {
      pages <- plot_pages(species, per.page %||% length(species), page, call)
      parameter_plot(x, pages, contexts, opts, group, violin, gene.classes, call)
    },
    effects = {
      pages <- plot_pages(species, per.page %||% max(1L, 6L %/% length(contexts)), page, call)
      effect_plot(x, pages, contexts, opts)
    },
    distributions = distribution_plot(x, species, contexts, opts),
    decomposition = decomposition_plot(x, species, contexts, opts, call),
    residuals = residual_plot(x, species, contexts),
    genes = gene_test_plot(x, species, opts)
  )
}

plot_types <- c("ratecount", "timeseries", "parameters", "effects", "distributions",
                "decomposition", "residuals", "genes")

`%||%` <- function(a, b) if (is.null(a)) b else a

# rate_label() and curve_rate(), the y axis and the rate of the curves
# under the fit's likelihood, are in likelihoods.R.

check_plot_levels <- function(values, known, name, call = sys.call(-1)) {
  if (is.null(values)) return(known)
  if (!is.character(values) || !length(values) || anyNA(values)) {
    stop_input("`", name, "` must be NULL or a character vector of levels of the fit.",
               call = call)
  }
  unknown <- setdiff(values, known)
  if (length(unknown)) {
    stop_input("`", name, "` has level", if (length(unknown) > 1) "s", " not in the fit: ",
               paste0("\"", utils::head(unknown, 5), "\"", collapse = ", "), "; known: ",
               paste0("\"", utils::head(known, 10), "\"", collapse = ", "),
               if (length(known) > 10) ", ...", ".", call = call)
  }
  known[known %in% values]
}

plot_setting <- function(fit, name, default) {
  value <- fit$plot.settings[[name]]
  if (is.null(value) || !length(value)) default else value
}

# The plot settings of a figure: the fit's plot.settings (with the defaults
# of this release filled in, for fits saved by an older one), overridden by
# the arguments given to plot() (NULL: not given), validated as wisp()
# validates plot.settings.
plot_options <- function(fit, given, call = sys.call(-1)) {
  given <- Filter(Negate(is.null), given)
  if (length(given)) {
    validated <- wisp_plot_settings(given, call = call, what = "argument")
    given <- validated[names(given)]
  }
  saved <- fit$plot.settings
  if (is.null(saved)) saved <- list()
  saved <- saved[intersect(names(saved), names(wisp_default_plot_settings()))]
  # Not modifyList(): it drops entries set to NULL (empty dim.bounds), and
  # `$` would then match a longer name partially.
  opts <- wisp_default_plot_settings()
  for (name in names(saved)) opts[name] <- list(saved[[name]])
  for (name in names(given)) opts[name] <- list(given[[name]])
  opts
}

# Which observed counts the rate-count plot draws.
count_layers <- function(counts, call) {
  if (isTRUE(counts)) return("animals")
  if (isFALSE(counts)) return("none")
  if (!is.character(counts) || length(counts) != 1L ||
      !counts %in% c("animals", "mean", "both", "none")) {
    stop_input("`counts` must be TRUE, FALSE, \"animals\", \"mean\", \"both\" or \"none\", not ",
               describe_value(counts), ".", call = call)
  }
  counts
}

# One page of genes: list(species, page, pages).
plot_pages <- function(species, per.page, page, call) {
  pages <- max(1L, ceiling(length(species) / per.page))
  if (page > pages) {
    stop_input("`page` is ", page, " but these genes fill ", pages, " page",
               if (pages > 1) "s", " of ", per.page, ".", call = call)
  }
  shown <- species[seq.int((page - 1L) * per.page + 1L, min(length(species), page * per.page))]
  list(species = shown, page = as.integer(page), pages = as.integer(pages), all = species)
}

# A line under the subtitle that says which page this is.
page_note <- function(pages) {
  if (pages$pages == 1L) return(NULL)
  sprintf("page %d of %d (genes %s to %s of %d; plot(..., page = ) draws the others)",
          pages$page, pages$pages, pages$species[1], pages$species[length(pages$species)],
          length(pages$all))
}

# A subtitle from its pieces, wrapped to fit a 7-inch-wide figure.
plot_subtitle <- function(..., width = 80) {
  pieces <- unlist(list(...))
  pieces <- pieces[nzchar(pieces)]
  if (!length(pieces)) return(NULL)
  # Lines break between the pieces ("dotted: change points" stays whole),
  # and only a piece longer than a line is broken inside.
  lines <- character()
  line <- ""
  for (piece in pieces) {
    joined <- if (nzchar(line)) paste0(line, "; ", piece) else piece
    if (nchar(joined) <= width) {
      line <- joined
      next
    }
    if (nzchar(line)) lines <- c(lines, paste0(line, ";"))
    wrapped <- strwrap(piece, width = width)
    lines <- c(lines, utils::head(wrapped, -1L))
    line <- wrapped[length(wrapped)]
  }
  paste(c(lines, line), collapse = "\n")
}

# The panel label of a gene in a context: the gene, and the context when
# the figure shows more than one.
panel_labels <- function(species, context, multi_context, sep = " \u00b7 ") {
  if (multi_context) paste(species, context, sep = sep) else as.character(species)
}

wisp_theme <- function(fit, opts = NULL, legend = "bottom") {
  size <- function(name, default) {
    value <- if (!is.null(opts[[name]])) opts[[name]] else plot_setting(fit, name, default)
    value
  }
  ggplot2::theme_bw(base_size = 10) +
    ggplot2::theme(
      plot.title = ggplot2::element_text(size = size("title_size", 20) * 0.7, face = "bold"),
      plot.title.position = "plot",
      plot.subtitle = ggplot2::element_text(size = 9, colour = "grey25"),
      axis.title = ggplot2::element_text(size = size("axis_size", 12)),
      legend.text = ggplot2::element_text(size = size("legend_size", 10)),
      legend.title = ggplot2::element_text(size = size("legend_size", 10)),
      legend.position = legend,
      legend.margin = ggplot2::margin(0, 0, 0, 0),
      strip.background = ggplot2::element_rect(fill = "grey95"),
      strip.text = ggplot2::element_text(size = 9),
      panel.grid.minor = ggplot2::element_blank()
    )
}

# The Okabe-Ito palette (colour-blind safe), ordered for contrast on white;
# yellow last.
okabe_ito <- c("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
               "#F0E442")

plot_palette <- function(n) {
  if (n <= length(okabe_ito)) okabe_ito[seq_len(n)] else grDevices::hcl.colors(n, "Dark 3")
}

# The fixed-effect levels of each treatment: one row per treatment, one
# column per factor.
treatment_levels <- function(fit) {
  components <- fit$treatment$components
  factors <- fit$fix$names
  table <- as.data.frame(do.call(rbind, lapply(components, function(x) unname(x[factors]))),
                         stringsAsFactors = FALSE)
  names(table) <- factors
  table$treatment <- fit$treatment$names
  table
}

check_splitting_factor <- function(fit, splitting_factor, call) {
  if (is.null(splitting_factor)) return(NULL)
  if (!splitting_factor %in% fit$fix$names) {
    stop_input("the splitting factor \"", splitting_factor, "\" is not a fixed effect of the ",
               "fit; its fixed effects are ",
               paste0("\"", fit$fix$names, "\"", collapse = ", "), ".", call = call)
  }
  splitting_factor
}

# Colours of the treatments (named by treatment). Without a splitting
# factor, the Okabe-Ito palette in treatment order; with one, the hue of
# each treatment is that of its level of the splitting factor
# (splitting_factor_colors, HCL hues, recycled) and the lightness steps
# through the levels of the other factors, as the original drew them.
treatment_colours <- function(fit, opts, call = sys.call(-1)) {
  treatments <- fit$treatment$names
  split <- check_splitting_factor(fit, opts[["splitting_factor"]], call)
  if (is.null(split)) return(stats::setNames(plot_palette(length(treatments)), treatments))
  levels_table <- treatment_levels(fit)
  split_levels <- fit$fix$lvls[[split]]
  hues <- opts$splitting_factor_colors
  if (is.null(hues) || !length(hues)) hues <- c(120, 240)
  hues <- rep_len(hues, length(split_levels))
  others <- setdiff(fit$fix$names, split)
  other_key <- if (length(others)) {
    do.call(paste, c(unname(as.list(levels_table[others])), sep = ":"))
  } else rep("", nrow(levels_table))
  other_levels <- unique(other_key)
  lightness <- if (length(other_levels) > 1) seq(35, 75, length.out = length(other_levels)) else 50
  hue <- hues[match(levels_table[[split]], split_levels)]
  light <- lightness[match(other_key, other_levels)]
  stats::setNames(grDevices::hcl(hue, c = 75, l = light), treatments)
}

# A colour scale of treatments (colour and fill) in treatment order.
treatment_scale <- function(fit, opts, name = "treatment", call = sys.call(-1)) {
  colours <- treatment_colours(fit, opts, call)
  ggplot2::scale_colour_manual(values = colours, breaks = names(colours), name = name,
                               aesthetics = c("colour", "fill"))
}

# The layer or region boundaries (opts$dim.bounds) as labelled vertical
# lines: a list of layers to add to a plot.
dim_bound_layers <- function(opts) {
  bounds <- opts$dim.bounds
  if (is.null(bounds) || !length(bounds)) return(list())
  labels <- names(bounds)
  if (is.null(labels)) labels <- rep("", length(bounds))
  lines <- data.frame(x = unname(as.numeric(bounds)), label = labels, stringsAsFactors = FALSE)
  layers <- list(ggplot2::geom_vline(data = lines, ggplot2::aes(xintercept = .data$x),
                                     colour = "grey35", linetype = "longdash", linewidth = 0.4))
  named <- lines[nzchar(lines$label), , drop = FALSE]
  if (nrow(named)) {
    layers <- c(layers, list(ggplot2::geom_text(
      data = named, ggplot2::aes(x = .data$x, y = Inf, label = .data$label),
      inherit.aes = FALSE, angle = 90, hjust = 1.1, vjust = -0.4, size = opts$label_size,
      colour = "grey25"
    )))
  }
  layers
}

# Intervals of a curve as a band (CI_style = TRUE) or as dot-dashed lines at
# its bounds.
interval_layers <- function(data, opts, group = "treatment") {
  if (isTRUE(opts$CI_style)) {
    return(list(ggplot2::geom_ribbon(
      data = data,
      ggplot2::aes(x = .data$bin, ymin = .data$y.low, ymax = .data$y.high,
                   fill = .data$treatment, group = .data[[group]]),
      alpha = 0.2, colour = NA, inherit.aes = FALSE
    )))
  }
  keep <- unique(c("bin", "treatment", group))
  bounds <- rbind(data.frame(data[keep], y = data$y.low, bound = "low"),
                  data.frame(data[keep], y = data$y.high, bound = "high"))
  bounds$line <- paste(bounds[[group]], bounds$bound)
  list(ggplot2::geom_line(
    data = bounds,
    ggplot2::aes(x = .data$bin, y = .data$y, colour = .data$treatment, group = .data$line),
    linetype = "dotdash", linewidth = 0.4, inherit.aes = FALSE
  ))
}

# The normal QQ plot of the fit's residuals (see ?plot.wisp_residuals for it
# and for the other residual figures). The quantile residuals are drawn with
# the fit's rng_seed, so that the figure is the same every time.
residual_plot <- function(fit, species, contexts) {
  plot(wisp_residuals(fit, species = species, contexts = contexts,
                      seed = residual_plot_seed(fit)), "qq") +
    # The text sizes of plot.settings, as in the other figures.
    ggplot2::theme(
      plot.title = ggplot2::element_text(size = plot_setting(fit, "title_size", 20) * 0.7),
      axis.title = ggplot2::element_text(size = plot_setting(fit, "axis_size", 12)),
      legend.text = ggplot2::element_text(size = plot_setting(fit, "legend_size", 10))
    )
}

residual_plot_seed <- function(fit) {
  seed <- fit$settings$rng_seed
  if (is.numeric(seed) && length(seed) == 1L && is.finite(seed)) seed else 42L
}

#' Plot a wisp bootstrap
#'
#' @param x A `"wisp_bootstrap"` object from [bs_batch()].
#' @param type `"replicates"`: per replicate, its seconds and memory
#'   (peak RSS, PSS and private dirty memory of the process that ran it),
#'   coloured by convergence code; `"codes"`: the number of replicates per
#'   convergence code (failed replicates as `"failed"`).
#' @param ... Nothing: an argument `plot()` does not take is an error.
#' @return A ggplot object.
#' @seealso [summary.wisp_bootstrap()]
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 2, n.bins = 40)
#' fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
#' boot <- bs_batch(fit, 20, seed = 1)
#' plot(boot)
#' plot(boot, type = "codes")
plot.wisp_bootstrap <- function(x, type = c("replicates", "codes"), ...) {
  check_unused_arguments(..., .method = "plot.wisp_bootstrap")
  type <- match_choice(type, "type", c("replicates", "codes"))
  d <- x$diagnostics
  code <- replicate_codes(d)
  if (type == "codes") {
    codes <- data.frame(code = factor(code, levels = unique(c(sort(unique(code[code != "failed"])),
                                                              if (any(code == "failed")) "failed"))))
    return(
      ggplot2::ggplot(codes, ggplot2::aes(x = .data$code, fill = .data$code)) +
        ggplot2::geom_bar(show.legend = FALSE) +
        ggplot2::scale_fill_manual(values = code_colours(levels(codes$code))) +
        wisp_theme(NULL) +
        ggplot2::labs(x = "convergence code", y = "replicates",
                      title = sprintf("Bootstrap convergence (%d replicates)", as.integer(x$R)))
    )
  }
  metrics <- c(seconds = "seconds", peak_rss_mb = "peak RSS (MB)", pss_mb = "PSS (MB)",
               private_dirty_mb = "private dirty (MB)")
  long <- do.call(rbind, lapply(names(metrics), function(m) {
    data.frame(replicate = seq_len(nrow(d)), metric = metrics[[m]], value = d[[m]],
               code = code, stringsAsFactors = FALSE)
  }))
  long <- long[!is.na(long$value), , drop = FALSE]
  long$metric <- factor(long$metric, levels = unname(metrics))
  # Long-lived workers measure PSS and private dirty memory once, after
  # their last replicate: say so, or a panel of a few points looks broken.
  measured <- vapply(names(metrics), function(m) sum(!is.na(d[[m]])), integer(1))
  sparse <- metrics[measured > 0 & measured < nrow(d)]
  codes <- unique(c(sort(unique(code[code != "failed"])), if (any(code == "failed")) "failed"))
  long$code <- factor(long$code, levels = codes)
  ggplot2::ggplot(long, ggplot2::aes(x = .data$replicate, y = .data$value, colour = .data$code)) +
    ggplot2::geom_point(size = 1.5) +
    ggplot2::scale_colour_manual(values = code_colours(codes)) +
    ggplot2::facet_wrap(ggplot2::vars(.data$metric), scales = "free_y", ncol = 1) +
    wisp_theme(NULL, legend = "right") +
    ggplot2::labs(x = "replicate", y = NULL, colour = "convergence",
                  title = sprintf("Bootstrap replicates: time and memory (%d replicates)",
                                  as.integer(x$R)),
                  subtitle = if (length(sparse)) {
                    plot_subtitle(paste0(paste(sub(" (MB)", "", sparse, fixed = TRUE), collapse = " and "),
                                         ": measured once per worker, after its last replicate"))
                  })
}

# Convergence codes in the package's palette, "failed" always in black.
code_colours <- function(codes) {
  colours <- stats::setNames(plot_palette(length(codes)), codes)
  colours[codes == "failed"] <- "#000000"
  colours
}

