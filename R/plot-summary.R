# The standard set of figures of a fit, and a one-page summary of a gene.

#' The standard figures of a fit
#'
#' The figures the original package drew after a fit, as a named list of
#' ggplot objects: `ratecount` (one element per page of genes, named
#' `ratecount`, `ratecount.2`, ...), `timeseries` (when the fit has a time
#' series), `effects` and `distributions` (when it has treatment effects),
#' `parameters.baseline`,
#' `parameters.<treatment>` for each non-reference treatment,
#' `parameters.random` (when it has random effects) and `residuals`.
#' `wisp(..., plot.settings = list(print.plots = TRUE))` prints them; by
#' default only interactive sessions do.
#'
#' @param fit A `"wisp"` object from [wisp()].
#' @param ... Arguments passed to every [plot.wisp()] call that takes them
#'   (e.g. `dim.bounds`, `log.scale`, `splitting_factor`).
#' @return A named list of ggplot objects.
#' @seealso [plot.wisp()], [wisp_gene_summary()]
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 2, n.bins = 30)
#' fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
#' plots <- wisp_plots(fit)
#' names(plots)
#' plots$effects
wisp_plots <- function(fit, ...) {
  check_wisp_object(fit)
  draw <- function(type, ...) plot.wisp(fit, type = type, ...)
  args <- list(...)
  take <- function(names) args[intersect(names(args), names)]
  shared <- c("species", "contexts", "label_size", "splitting_factor",
              "splitting_factor_colors")
  curve_args <- c(shared, "log.scale", "dim.bounds", "y.lim", "CI_style", "count.alpha.none",
                  "animals", "counts", "samples", "ci", "change.points")
  plots <- list()
  species <- args$species %||% fit$grouping.variables$species.lvls
  contexts <- args$contexts %||% fit$grouping.variables$context.lvls
  per_page <- max(1L, 12L %/% length(contexts))
  for (page in seq_len(ceiling(length(species) / per_page))) {
    name <- if (page == 1L) "ratecount" else paste0("ratecount.", page)
    plots[[name]] <- do.call(draw, c(list("ratecount", page = page), take(curve_args)))
  }
  if (!is.null(fit$variables$timeseries)) {
    plots$timeseries <- do.call(draw, c(list("timeseries"),
                                        take(c(shared, "log.scale"))))
  }
  if (length(fit$treatment$names) > 1) {
    plots$effects <- do.call(draw, c(list("effects"), take(shared)))
    plots$distributions <- do.call(draw, c(list("distributions"), take(shared)))
  }
  groups <- c("baseline", fit$treatment$names[-1],
              if (any(fit$parameters$role == "warp")) "random")
  for (group in groups) {
    plots[[paste0("parameters.", group)]] <- do.call(
      draw, c(list("parameters", group = group), take(c(shared, "gene.classes"))))
  }
  plots$residuals <- residual_plot(fit, species, contexts)
  plots
}

#' A one-page summary of a gene
#'
#' For one gene: its rate-count plot and residual diagnostics (left), the
#' effects of the treatments and the baseline parameters (right), on one
#' page, combined with 'patchwork'. Save it with
#' `ggplot2::ggsave("gene.pdf", wisp_gene_summary(fit, "Bcl11b"), width = 11,
#' height = 8.5)`.
#'
#' @param fit A `"wisp"` object from [wisp()].
#' @param gene The gene (a level of the fit's species).
#' @param contexts Contexts to show (default: all).
#' @param ... Arguments passed to the rate-count plot (see [plot.wisp()]),
#'   e.g. `dim.bounds` or `log.scale`.
#' @return A patchwork object (prints as one figure).
#' @seealso [plot.wisp()], [wisp_plots()]
#' @export
#' @examples
#' if (requireNamespace("patchwork", quietly = TRUE)) {
#'   counts <- wisp_simulate(n.genes = 2, n.bins = 30)
#'   fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
#'   wisp_gene_summary(fit, "gene1")
#' }
wisp_gene_summary <- function(fit, gene, contexts = NULL, ...) {
  check_wisp_object(fit)
  if (!requireNamespace("patchwork", quietly = TRUE)) {
    stop_input("wisp_gene_summary() needs the 'patchwork' package: install.packages(\"patchwork\") ",
               "(Debian: apt install r-cran-patchwork).")
  }
  if (!is.character(gene) || length(gene) != 1L || is.na(gene)) {
    stop_input("`gene` must be one gene of the fit, not ", describe_value(gene), ".")
  }
  check_plot_levels(gene, fit$grouping.variables$species.lvls, "gene")
  contexts <- check_plot_levels(contexts, fit$grouping.variables$context.lvls, "contexts")
  # Subtitles and long legends do not fit the quarters of a page: the
  # caption says what the layers are.
  small <- list(ggplot2::theme(plot.title = ggplot2::element_text(size = 11),
                               legend.position = "bottom"),
                ggplot2::labs(subtitle = NULL))
  rates <- plot.wisp(fit, "ratecount", species = gene, contexts = contexts, ...) +
    ggplot2::labs(title = "Rates and counts") + small +
    ggplot2::guides(colour = ggplot2::guide_legend(nrow = 2, override.aes = list(alpha = 1)))
  residuals <- residual_plot(fit, gene, contexts) + small
  right <- if (length(fit$treatment$names) > 1) {
    plot.wisp(fit, "effects", species = gene, contexts = contexts) + small
  }
  baseline <- plot.wisp(fit, "parameters", species = gene, contexts = contexts,
                        group = "baseline") + small
  left <- patchwork::wrap_plots(rates, residuals, ncol = 1, heights = c(3, 2))
  right <- if (is.null(right)) baseline else
    patchwork::wrap_plots(right, baseline, ncol = 1, heights = c(3, 2))
  patchwork::wrap_plots(left, right, ncol = 2, widths = c(2, 3)) +
    patchwork::plot_annotation(
      title = gene,
      caption = paste0("Rates: solid population curves, dashed animals' curves, points counts. ",
                       "Effects and baseline: ", sub("^bars: ", "", interval_note(fit)), "."),
      theme = ggplot2::theme(plot.title = ggplot2::element_text(
        size = plot_setting(fit, "title_size", 20), face = "bold")))
}

# Prints the standard figures when plot.settings$print.plots asks for them
# (wisp()'s last step).
print_wisp_plots <- function(fit) {
  if (!isTRUE(fit$plot.settings$print.plots)) return(invisible())
  for (plot in wisp_plots(fit)) print(plot)
  invisible()
}
