# Teaching figures: the poly-sigmoid and the warps of the random effects,
# drawn from their formulas (model vignette §5 and §7), as the original's
# demo.sigmoid.plots() and demo.warp.plots() did.

#' Teaching figure: the poly-sigmoid
#'
#' Draws a curve of the model (model vignette, §5) with its parameters
#' marked: the block rates \eqn{R_k} (dashed, on the log(1 + rate) scale),
#' the transition points \eqn{p_k} (dotted) and, at each point, the tangent
#' of slope \eqn{s_k (R_{k+1} - R_k) / 4} that the transition's slope
#' \eqn{s_k} gives the curve there. The curve is
#' \deqn{\Psi(x) = R_1 + \sum_{k=1}^{d} (R_{k+1} - R_k)\,
#'   \sigma(s_k (x - p_k)), \quad \sigma(v) = 1 / (1 + e^{-v}).}
#' The right axis reads \eqn{\Psi} as a rate, \eqn{e^\Psi - 1}.
#'
#' @param rates The block rates \eqn{R_1, \dots, R_{d+1}} (log(1 + rate)
#'   scale, finite).
#' @param slopes The transitions' slopes \eqn{s_k} per bin (positive), one
#'   fewer than `rates`.
#' @param points The transitions' points \eqn{p_k} in bins, increasing, as
#'   many as `slopes`.
#' @param bins The number of bins \eqn{B}: the curve is drawn over the
#'   binned axis (0.5, B + 0.5).
#' @return A ggplot object; its first layer's data hold the curve (`x`,
#'   `psi`).
#' @seealso [wisp_demo_warp()]; `vignette("model", package = "wispack")`.
#' @export
#' @examples
#' wisp_demo_polysigmoid()
#' wisp_demo_polysigmoid(rates = c(0.5, 2), slopes = 0.3, points = 20)
wisp_demo_polysigmoid <- function(rates = c(1, 3, 0.5), slopes = c(0.8, 0.4),
                                  points = c(12, 28), bins = 40) {
  check_demo_curve(rates, slopes, points, bins, call = sys.call())
  x <- seq(0.5, bins + 0.5, length.out = 401)
  curve <- data.frame(x = x, psi = demo_psi(x, rates, slopes, points))
  d <- length(slopes)
  edges <- c(0.5, points, bins + 0.5)
  # Each block's label between the tangents that reach into it (2 / s bins).
  reach <- c(0, 2 / slopes, 0)
  label_x <- (edges[-length(edges)] + reach[-length(reach)] + edges[-1] - reach[-1]) / 2
  blocks <- data.frame(x = edges[-length(edges)], xend = edges[-1], y = rates, label_x = label_x,
                       label = sprintf("R[%d] == %s", seq_along(rates), format(rates)))
  ggplot2::ggplot() +
    ggplot2::geom_line(data = curve, ggplot2::aes(x = .data$x, y = .data$psi),
                       colour = "#0072B2", linewidth = 1) +
    ggplot2::geom_segment(data = blocks, ggplot2::aes(x = .data$x, xend = .data$xend,
                                                      y = .data$y, yend = .data$y),
                          linetype = "dashed", colour = "grey35") +
    ggplot2::geom_text(data = blocks, ggplot2::aes(x = .data$label_x, y = .data$y,
                                                   label = .data$label),
                       parse = TRUE, vjust = -0.6, size = 3.5) +
    (if (d) demo_transition_layers(rates, slopes, points)) +
    ggplot2::scale_y_continuous(sec.axis = ggplot2::sec_axis(~ expm1(.), name = "rate"),
                                expand = ggplot2::expansion(mult = c(0.16, 0.1))) +
    ggplot2::labs(x = "bin position x", y = expression(Psi(x) == log(1 + rate)),
                  title = "The poly-sigmoid",
                  subtitle = sprintf("%d transition%s: block rates (dashed), points (dotted), slopes (tangents)",
                                     d, if (d == 1) "" else "s")) +
    ggplot2::theme_bw(base_size = 11)
}

# The points' dotted lines and labels, and the tangents at the points.
demo_transition_layers <- function(rates, slopes, points) {
  d <- length(slopes)
  step <- diff(rates)
  centre <- rates[-1] - step / 2
  gradient <- slopes * step / 4
  reach <- 2 / slopes
  marks <- data.frame(x = points, y = centre,
                      point_label = sprintf("p[%d] == %s", seq_len(d), format(points)),
                      slope_label = sprintf("s[%d] == %s", seq_len(d), format(slopes)))
  tangents <- data.frame(x = points - reach, xend = points + reach,
                         y = centre - gradient * reach, yend = centre + gradient * reach)
  list(
    ggplot2::geom_vline(xintercept = points, linetype = "dotted", colour = "grey35"),
    ggplot2::geom_segment(data = tangents, ggplot2::aes(x = .data$x, xend = .data$xend,
                                                        y = .data$y, yend = .data$yend),
                          colour = "#D55E00", linewidth = 0.8),
    ggplot2::geom_point(data = marks, ggplot2::aes(x = .data$x, y = .data$y), colour = "#D55E00",
                        size = 2),
    ggplot2::geom_text(data = marks, ggplot2::aes(x = .data$x, y = -Inf,
                                                  label = .data$point_label),
                       parse = TRUE, vjust = -0.4, size = 3.3),
    ggplot2::geom_text(data = marks, ggplot2::aes(x = .data$x, y = .data$y,
                                                  label = .data$slope_label),
                       parse = TRUE, hjust = -0.25, vjust = 1.2, size = 3.3, colour = "#D55E00")
  )
}

# Psi(x) of one curve (model vignette §5).
demo_psi <- function(x, rates, slopes, points) {
  psi <- rep(rates[1], length(x))
  for (k in seq_along(slopes)) {
    psi <- psi + (rates[k + 1] - rates[k]) * stats::plogis(slopes[k] * (x - points[k]))
  }
  psi
}

check_demo_curve <- function(rates, slopes, points, bins, call) {
  number <- function(x) is.numeric(x) && !anyNA(x) && all(is.finite(x))
  if (!number(bins) || length(bins) != 1L || bins < 2 || bins != round(bins)) {
    stop_input("`bins` must be one whole number of at least 2, not ", describe_value(bins), ".",
               call = call)
  }
  if (!number(rates) || !length(rates)) {
    stop_input("`rates` must be one or more finite numbers (block rates on the log(1 + rate) ",
               "scale).", call = call)
  }
  d <- length(rates) - 1L
  if (!number(slopes) || length(slopes) != d || any(slopes <= 0)) {
    stop_input("`slopes` must be ", d, " positive number", if (d != 1) "s",
               " (one fewer than `rates`), not ", describe_value(slopes), ".", call = call)
  }
  if (!number(points) || length(points) != d || is.unsorted(points, strictly = TRUE) ||
      any(points <= 0.5 | points >= bins + 0.5)) {
    stop_input("`points` must be ", d, " increasing number", if (d != 1) "s",
               " inside the axis (0.5, ", bins + 0.5, "), not ", describe_value(points), ".",
               call = call)
  }
}

#' Teaching figure: how an animal's random effects bend its curve
#'
#' * `model = "nb"` (the count model, model vignette §7.2): the population
#'   curve (black) and the curves of animals whose point, rate or slope
#'   random effect is `-u` (blue) or `+u` (orange), one panel per effect:
#'   \eqn{R'_k = R_k e^{u_{rate}}},
#'   \eqn{s'_k = S_{max}\,\sigma(\mathrm{logit}(s_k / S_{max}) + u_{slope})}
#'   with \eqn{S_{max} = 8}, and
#'   \eqn{p'_k = L + k g + (B - (d + 1) g)\,\sigma(\mathrm{logit}(q_k) + u_{point})}
#'   with \eqn{L = 0.5}, \eqn{q_k = (p_k - L - k g) / (B - (d + 1) g)} and
#'   the gap \eqn{g = \lceil B / 20 \rceil} (the default `buffer_factor`).
#' * `model = "original"` (model vignette §7.1): the original's warp
#'   function \eqn{\omega(z; b, w)} against \eqn{z} for each warping factor
#'   in `w`, with bound `bound`:
#'   \eqn{z + (1 - e^{-w^2 z / b})(b - z)} for \eqn{w > 0} (towards
#'   \eqn{b}), \eqn{z - (1 - e^{-w^2 (b - z) / b}) z} for \eqn{w < 0}
#'   (towards 0), and \eqn{z} for \eqn{w = 0}. Arrows show where the
#'   largest positive and negative factors move the values 60 and 40 % of
#'   the way up (the original demo's `point_pos` and `point_neg`).
#'
#' @inheritParams wisp_demo_polysigmoid
#' @param model `"nb"` (the count model's random effects) or `"original"`
#'   (the original's warp function).
#' @param u For `"nb"`: the size of the random effects drawn (positive).
#' @param w For `"original"`: the warping factors to draw.
#' @param bound For `"original"`: the bound \eqn{b} of the warp (the
#'   original uses the number of bins for points).
#' @return A ggplot object; its data (`$data`) hold the curves (`"nb"`:
#'   `x`, `psi`, `effect`, `u`; `"original"`: `z`, `omega`, `w`).
#' @seealso [wisp_demo_polysigmoid()]
#' @export
#' @examples
#' wisp_demo_warp()
#' wisp_demo_warp("original")
wisp_demo_warp <- function(model = c("nb", "original"), u = 0.5, rates = c(1, 3, 0.5),
                           slopes = c(0.8, 0.4), points = c(12, 28), bins = 40,
                           w = c(-2, -1, -0.5, 0.5, 1, 2), bound = 100) {
  call <- sys.call()
  model <- match_choice(model, "model", c("nb", "original"))
  if (model == "original") {
    if (!is.numeric(w) || !length(w) || anyNA(w) || !all(is.finite(w))) {
      stop_input("`w` must be finite numbers (warping factors), not ", describe_value(w), ".",
                 call = call)
    }
    if (!is.numeric(bound) || length(bound) != 1L || !is.finite(bound) || bound <= 0) {
      stop_input("`bound` must be one positive number, not ", describe_value(bound), ".",
                 call = call)
    }
    return(demo_original_warp(w, bound))
  }
  if (!is.numeric(u) || length(u) != 1L || !is.finite(u) || u <= 0) {
    stop_input("`u` must be one positive number, not ", describe_value(u), ".", call = call)
  }
  check_demo_curve(rates, slopes, points, bins, call = call)
  gap <- simulation_point_gap(bins)
  d <- length(slopes)
  if (d && (any(points - (0.5 + seq_len(d) * gap) <= 0) ||
            any(bins - (d + 1) * gap - (points - 0.5 - seq_len(d) * gap) <= 0) ||
            any(slopes >= simulation_constants()$slope_max))) {
    stop_input("the count model needs slopes below ", simulation_constants()$slope_max,
               " and points at least ", gap,
               " bins apart and from the ends of the axis (model vignette, section 11.2).", call = call)
  }
  x <- seq(0.5, bins + 0.5, length.out = 301)
  effects <- c("point", "rate", "slope")
  curves <- do.call(rbind, lapply(effects, function(effect) {
    do.call(rbind, lapply(c(-u, 0, u), function(value) {
      warped <- demo_nb_warp(rates, slopes, points, bins, gap,
                             u = stats::setNames(value * (effects == effect), effects))
      data.frame(x = x, psi = demo_psi(x, warped$rates, warped$slopes, warped$points),
                 effect = effect, u = value)
    }))
  }))
  curves$effect <- factor(paste(curves$effect, "effect"), levels = paste(effects, "effect"))
  curves$animal <- factor(ifelse(curves$u == 0, "population (u = 0)",
                                 ifelse(curves$u < 0, sprintf("u = %s", format(-u)),
                                        sprintf("u = +%s", format(u)))),
                          levels = c(sprintf("u = %s", format(-u)), "population (u = 0)",
                                     sprintf("u = +%s", format(u))))
  ggplot2::ggplot(curves, ggplot2::aes(x = .data$x, y = .data$psi, colour = .data$animal,
                                       linetype = .data$animal)) +
    ggplot2::geom_line(linewidth = 0.8) +
    ggplot2::scale_colour_manual(values = c("#0072B2", "black", "#D55E00")) +
    ggplot2::scale_linetype_manual(values = c("dashed", "solid", "dashed")) +
    ggplot2::facet_wrap(ggplot2::vars(.data$effect), nrow = 1) +
    ggplot2::labs(x = "bin position x", y = expression(Psi(x) == log(1 + rate)),
                  colour = NULL, linetype = NULL,
                  title = "An animal's random effects bend its curve",
                  subtitle = "count model: one effect at a time, the others at 0") +
    ggplot2::theme_bw(base_size = 11) +
    ggplot2::theme(legend.position = "bottom",
                   strip.background = ggplot2::element_rect(fill = "grey95"))
}

# The animal's rates, slopes and points under random effects `u` (named
# point, rate, slope; model vignette §7.2).
demo_nb_warp <- function(rates, slopes, points, bins, gap, u) {
  slope_max <- simulation_constants()$slope_max
  d <- length(slopes)
  k <- seq_len(d)
  free <- bins - (d + 1) * gap
  q <- (points - 0.5 - k * gap) / free
  list(rates = rates * exp(u[["rate"]]),
       slopes = slope_max * stats::plogis(stats::qlogis(slopes / slope_max) + u[["slope"]]),
       points = 0.5 + k * gap + free * stats::plogis(stats::qlogis(q) + u[["point"]]))
}

# The original's warp omega(z; b, w) (model vignette §7.1).
demo_omega <- function(z, bound, w) {
  if (w > 0) {
    z + (1 - exp(-w^2 * z / bound)) * (bound - z)
  } else if (w < 0) {
    z - (1 - exp(-w^2 * (bound - z) / bound)) * z
  } else {
    z
  }
}

demo_original_warp <- function(w, bound) {
  w <- sort(unique(w))
  z <- seq(0, bound, length.out = 201)
  curves <- do.call(rbind, lapply(w, function(value) {
    data.frame(z = z, omega = demo_omega(z, bound, value), w = value)
  }))
  arrows <- NULL
  for (value in c(max(w[w > 0], -Inf), min(w[w < 0], Inf))) {
    if (!is.finite(value)) next
    start <- if (value > 0) 0.6 * bound else 0.4 * bound
    arrows <- rbind(arrows, data.frame(z = start, omega = start,
                                       end = demo_omega(start, bound, value), w = value))
  }
  limit <- max(abs(w))
  plot <- ggplot2::ggplot(curves, ggplot2::aes(x = .data$z, y = .data$omega,
                                               colour = .data$w, group = .data$w)) +
    ggplot2::geom_line(linewidth = 0.8) +
    ggplot2::geom_abline(intercept = 0, slope = 1, colour = "grey40", linetype = "dashed")
  if (!is.null(arrows)) {
    plot <- plot +
      ggplot2::geom_segment(data = arrows, ggplot2::aes(x = .data$z, xend = .data$z,
                                                        y = .data$omega, yend = .data$end),
                            arrow = ggplot2::arrow(length = ggplot2::unit(0.15, "cm")),
                            linewidth = 0.6)
  }
  plot +
    ggplot2::scale_colour_gradient2(low = "#0072B2", mid = "grey80", high = "#D55E00",
                                    midpoint = 0, limits = c(-limit, limit)) +
    ggplot2::coord_equal() +
    ggplot2::labs(x = "population value z", y = expression(omega(z * ";" ~ b, w)),
                  colour = "warping\nfactor w", title = "The original's warp function",
                  subtitle = sprintf("bound b = %s; dashed: no warp (w = 0)", format(bound))) +
    ggplot2::theme_bw(base_size = 11)
}
