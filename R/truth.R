#' Set a fit's estimates beside the simulated truth
#'
#' For data made by [wisp_simulate()], lines up every true parameter with
#' its estimate (and, for a bootstrapped fit, its percentile interval), so
#' you can see how well the model recovers what was simulated. Parameters
#' are matched by name, so the fit must have found the simulated degrees
#' for a curve's parameters to be compared; curves whose detected degree
#' differs are reported in the `degree.matches` column.
#'
#' @param fit A `"wisp"` object fitted to simulated data.
#' @param data The data.frame from [wisp_simulate()] (its `truth` attribute
#'   is used), or the truth list itself.
#' @return A data.frame of class `"wisp_truth"` with columns `parameter`,
#'   `role`, `component`, `context`, `species`, `truth`, `estimate`,
#'   `CI.low`, `CI.high` (NA without a bootstrap), `covered` (truth inside
#'   the interval) and `degree.matches`. Its `plot()` method draws estimates
#'   against the truth.
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 2, n.bins = 40, seed = 3)
#' fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
#' comparison <- wisp_truth(fit, counts)
#' head(comparison)
#' plot(comparison)
wisp_truth <- function(fit, data) {
  check_wisp_fit(fit)
  truth <- if (is.data.frame(data)) attr(data, "truth") else data
  if (!is.list(truth) || !is.numeric(truth$parameters) || is.null(truth$degrees)) {
    stop_input("`data` must be a data.frame from wisp_simulate() (with its \"truth\" ",
               "attribute) or that truth list.")
  }
  p <- fit$parameters
  true_degree <- truth$degrees[cbind(match(p$context, rownames(truth$degrees)),
                                     match(p$species, colnames(truth$degrees)))]
  fit_degree <- fit$degrees[cbind(match(p$context, rownames(fit$degrees)),
                                  match(p$species, colnames(fit$degrees)))]
  # Only curve parameters depend on the degree; random effects, their SDs
  # and the dispersions are the same parameters whatever degree was found.
  curve <- p$role %in% c("baseline", "beta")
  degree_matches <- ifelse(!curve, TRUE, !is.na(true_degree) & !is.na(fit_degree) &
                             true_degree == fit_degree)
  stats <- fit$stats$parameters
  at <- if (is.null(stats)) rep(NA_integer_, nrow(p)) else match(p$name, stats$parameter)
  result <- data.frame(
    parameter = p$name, role = p$role, component = p$component, context = p$context,
    species = p$species,
    truth = ifelse(degree_matches, unname(truth$parameters[p$name]), NA_real_),
    estimate = unname(fit$fitted.parameters[p$name]),
    CI.low = if (is.null(stats)) NA_real_ else stats$CI.low[at],
    CI.high = if (is.null(stats)) NA_real_ else stats$CI.high[at],
    degree.matches = degree_matches, stringsAsFactors = FALSE
  )
  result$covered <- result$truth >= result$CI.low & result$truth <= result$CI.high
  result <- result[, c("parameter", "role", "component", "context", "species", "truth",
                       "estimate", "CI.low", "CI.high", "covered", "degree.matches")]
  class(result) <- c("wisp_truth", "data.frame")
  result
}

#' @describeIn wisp_truth Estimates against the truth, one panel per role
#'   and component, with bootstrap intervals when there are any.
#' @param x A `"wisp_truth"` table.
#' @param ... Unused.
#' @export
plot.wisp_truth <- function(x, ...) {
  data <- as.data.frame(unclass(x), stringsAsFactors = FALSE)
  data <- data[!is.na(data$truth), ]
  data$panel <- paste(data$role, data$component)
  plot <- ggplot2::ggplot(data, ggplot2::aes(x = .data$truth, y = .data$estimate)) +
    ggplot2::geom_abline(slope = 1, intercept = 0, colour = "grey50", linetype = "dashed")
  if (any(!is.na(data$CI.low))) {
    plot <- plot + ggplot2::geom_linerange(
      ggplot2::aes(ymin = .data$CI.low, ymax = .data$CI.high), colour = "grey60")
  }
  plot + ggplot2::geom_point(size = 1.5) +
    ggplot2::facet_wrap(~panel, scales = "free") +
    ggplot2::labs(x = "simulated truth", y = "estimate",
                  title = "Estimates against the simulated truth") +
    ggplot2::theme_bw()
}
