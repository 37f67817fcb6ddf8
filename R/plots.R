# ggplot2 figures of "wisp" fits and "wisp_bootstrap" results. The S3
# methods plot.wisp() and plot.wisp_bootstrap() are the exported entry
# points; the builders below are internal.

utils::globalVariables(".data")

#' Plot a wisp fit
#'
#' Figures of a fit, as [ggplot2][ggplot2::ggplot] objects that can be
#' printed, modified with `+` and saved with [ggplot2::ggsave()].
#'
#' * `"ratecount"`: per context (columns) and gene (rows), the rate (the
#'   expected count) over the bins: the observed counts of the random
#'   levels, jittered and faint; the fitted curve of each random level,
#'   dashed, under the treatments it was observed in (with animals nested in
#'   a between-animal factor, an animal has curves under its own levels
#'   only); the population curve (random level `"none"`) per treatment,
#'   solid; the detected change points, dotted; and, when the fit was
#'   bootstrapped, the 95 % bootstrap band of the population curve. Under
#'   the count likelihood everything is per unit of exposure (per cell, or
#'   per bin with `exposure = "none"`): counts and random-level curves are
#'   divided by their cell key's exposure.
#' * `"parameters"`: the fixed-effect parameters (baseline and treatment
#'   effects, or the roles chosen with `roles`) with their bootstrap
#'   intervals, by role and component.
#' * `"effects"`: the treatment effects with their intervals, coloured by
#'   significance and marked `*`, `**` or `***` (adjusted p-value below
#'   alpha, alpha / 5, alpha / 50), by component.
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
#' Intervals in `"parameters"` and `"effects"` are those of `fit$stats`
#' (see [summary.wisp()]): tested effects at their multiplicity-adjusted
#' level. Without a bootstrap only the estimates are drawn.
#'
#' @param x A `"wisp"` object from [wisp()].
#' @param type The figure: `"ratecount"`, `"parameters"`, `"residuals"` or
#'   `"effects"`.
#' @param species,contexts Genes and contexts to show (default: all).
#' @param log.scale Draw the rate-count plot on the log(count + 1) scale
#'   (default: `plot.settings$log.scale` of the fit).
#' @param counts,samples,ci,change.points Whether the rate-count plot shows
#'   the observed counts, the per-random-level curves, the bootstrap band
#'   (when there is one) and the change points.
#' @param roles For `type = "parameters"`: the parameter roles to show, any
#'   of `"baseline"`, `"beta"` and `"warp"`.
#' @param ... Nothing: an argument `plot()` does not take (e.g. `main`) is an
#'   error; add titles and themes to the returned plot with `+`.
#' @return A ggplot object.
#' @seealso [plot.wisp_bootstrap()]
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 2, n.bins = 40)
#' fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
#' plot(fit)
#' plot(fit, species = "gene1", log.scale = TRUE)
#' plot(fit, type = "residuals")
#' \donttest{
#' booted <- suppressWarnings(wisp(counts, model.settings = list(LRO_cost = "none"),
#'                                 bootstraps.num = 20, ran.seed = 1, verbose = FALSE))
#' plot(booted, type = "effects")
#' }
plot.wisp <- function(x, type = c("ratecount", "parameters", "residuals", "effects"),
                      species = NULL, contexts = NULL, log.scale = NULL, counts = TRUE,
                      samples = TRUE, ci = TRUE, change.points = TRUE,
                      roles = c("baseline", "beta"), ...) {
  check_unused_arguments(..., .method = "plot.wisp")
  check_wisp_object(x, call = sys.call())
  type <- match_choice(type, "type", c("ratecount", "parameters", "residuals", "effects"))
  species <- check_plot_levels(species, x$grouping.variables$species.lvls, "species")
  contexts <- check_plot_levels(contexts, x$grouping.variables$context.lvls, "contexts")
  for (flag in c("counts", "samples", "ci", "change.points")) {
    check_flag(get(flag), flag, call = sys.call())
  }
  if (is.null(log.scale)) log.scale <- isTRUE(x$plot.settings$log.scale)
  check_flag(log.scale, "log.scale", call = sys.call())
  switch(type,
    ratecount = ratecount_plot(x, species, contexts, log.scale, counts, samples, ci,
                               change.points),
    parameters = parameter_plot(x, species, contexts, roles, effects_only = FALSE),
    effects = parameter_plot(x, species, contexts, "beta", effects_only = TRUE),
    residuals = residual_plot(x, species, contexts)
  )
}

# The y axis of the rate-count plot on the linear scale.
rate_label <- function(fit) {
  if (fit_likelihood(fit) != "nb") return("rate (expected count)")
  per <- if (identical(fit$exposure$rule, "none")) "bin" else "cell"
  sprintf("rate (expected count per %s)", per)
}

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

wisp_theme <- function(fit) {
  ggplot2::theme_bw() +
    ggplot2::theme(
      plot.title = ggplot2::element_text(size = plot_setting(fit, "title_size", 20) * 0.7),
      axis.title = ggplot2::element_text(size = plot_setting(fit, "axis_size", 12)),
      legend.text = ggplot2::element_text(size = plot_setting(fit, "legend_size", 10)),
      strip.background = ggplot2::element_rect(fill = "grey95")
    )
}

# The rate-count plot: one panel per (gene, context).
ratecount_plot <- function(fit, species, contexts, log.scale, counts, samples, ci,
                           change.points) {
  d <- fit$count.data.summed
  # Only animals under the treatments they were observed in (the original's
  # summed table has every animal x treatment combination).
  d <- d[observed_rows(fit) & d$species %in% species & d$context %in% contexts, , drop = FALSE]
  treatments <- fit$treatment$names
  d$treatment <- factor(d$treatment, levels = treatments)
  d$species <- factor(d$species, levels = species)
  d$context <- factor(d$context, levels = contexts)
  # Counts and the curves of random levels are per cell key (exposure x
  # rate under the count likelihood); the population curve is a rate per
  # unit of exposure. Draw all of them per unit of exposure, as the log
  # scale (log(1 + count / exposure), psi) does.
  exposure <- if (is.null(d$exposure)) 1 else ifelse(is.na(d$exposure), 1, d$exposure)
  d$y.count <- if (log.scale) d$count.log else d$count / exposure
  d$y.pred <- if (log.scale) d$pred.log else d$pred / exposure
  # With a single random level there is no "none" row: that level is the
  # population.
  population <- if (any(d$ran == "none")) d$ran == "none" else rep(TRUE, nrow(d))
  pop <- d[population, , drop = FALSE]
  per_ran <- d[!population | !any(d$ran == "none"), , drop = FALSE]

  p <- ggplot2::ggplot(pop, ggplot2::aes(x = .data$bin)) + wisp_theme(fit)
  has_band <- ci && !is.null(pop$pred.low) && !is.null(pop$pred.high)
  if (has_band) {
    rate <- if (fit_likelihood(fit) == "nb") count_rate else function(x) exp(x) - 1
    pop$y.low <- if (log.scale) pop$pred.low else rate(pop$pred.low)
    pop$y.high <- if (log.scale) pop$pred.high else rate(pop$pred.high)
    p <- p + ggplot2::geom_ribbon(
      data = pop,
      ggplot2::aes(ymin = .data$y.low, ymax = .data$y.high, fill = .data$treatment,
                   group = .data$treatment),
      alpha = 0.2, colour = NA
    )
  }
  if (counts) {
    observed <- per_ran[!is.na(per_ran$y.count), , drop = FALSE]
    jitter <- plot_setting(fit, "count_jitter", 0.5)
    p <- p + ggplot2::geom_point(
      data = observed, ggplot2::aes(y = .data$y.count, colour = .data$treatment),
      alpha = plot_setting(fit, "count.alpha.ran", 0.25),
      size = plot_setting(fit, "count_size", 1.5),
      position = ggplot2::position_jitter(width = jitter, height = 0, seed = 1L)
    )
  }
  if (samples && any(d$ran == "none")) {
    curves <- per_ran
    curves$curve <- paste(curves$ran, curves$treatment, sep = " / ")
    p <- p + ggplot2::geom_line(
      data = curves,
      ggplot2::aes(y = .data$y.pred, colour = .data$treatment, group = .data$curve),
      linetype = "dashed", linewidth = 0.4, alpha = plot_setting(fit, "pred.alpha.ran", 0.9)
    )
  }
  p <- p + ggplot2::geom_line(
    data = pop, ggplot2::aes(y = .data$y.pred, colour = .data$treatment, group = .data$treatment),
    linewidth = 1, alpha = plot_setting(fit, "pred.alpha.none", 1)
  )
  cp <- fit$change.points
  if (change.points && !is.null(cp) && nrow(cp)) {
    cp <- cp[cp$species %in% species & cp$context %in% contexts, , drop = FALSE]
    if (nrow(cp)) {
      cp$treatment <- factor(cp$treatment, levels = treatments)
      cp$species <- factor(cp$species, levels = species)
      cp$context <- factor(cp$context, levels = contexts)
      p <- p + ggplot2::geom_vline(
        data = cp, ggplot2::aes(xintercept = .data$bin, colour = .data$treatment),
        linetype = "dotted", linewidth = 0.5
      )
    }
  }
  p + ggplot2::facet_grid(rows = ggplot2::vars(.data$species),
                          cols = ggplot2::vars(.data$context), scales = "free_y") +
    ggplot2::labs(
      x = "bin", y = if (log.scale) "log(rate + 1)" else rate_label(fit),
      colour = "treatment", fill = "treatment",
      title = "Rates and counts",
      subtitle = paste0("solid: population curve", if (samples && any(d$ran == "none"))
        "; dashed: random levels", if (counts) "; points: observed counts",
        if (has_band) "; band: 95 % bootstrap interval", "")
    )
}

# A readable label of each parameter row.
parameter_labels <- function(p) {
  fixed <- p$role != "warp"
  multi_context <- length(unique(p$context[fixed])) > 1
  label <- ifelse(
    fixed,
    paste0(if (multi_context) paste0(p$context, " | ") else "", p$species,
           " | blk ", p$block,
           ifelse(p$role == "beta", paste0(" | ", p$treatment), "")),
    paste0(p$species, " | ", p$ran)
  )
  label
}

# Estimates (with intervals when bootstrapped) of the parameters of the
# chosen roles.
parameter_plot <- function(fit, species, contexts, roles, effects_only) {
  known <- c("baseline", "beta", "warp")
  if (!is.character(roles) || !length(roles) || !all(roles %in% known)) {
    stop_input("`roles` must hold some of \"baseline\", \"beta\", \"warp\".", call = NULL)
  }
  p <- fit$parameters
  keep <- p$role %in% roles & p$species %in% species & (is.na(p$context) | p$context %in% contexts)
  p <- p[keep, , drop = FALSE]
  table <- data.frame(parameter = p$name, role = factor(p$role, levels = known[known %in% roles]),
                      component = factor(p$component, levels = unique(c(
                        "Rt", "tslope", "tpoint", "point", "rate", "slope", p$component))),
                      label = parameter_labels(p),
                      estimate = unname(fit$fitted.parameters[p$name]), stringsAsFactors = FALSE)
  bootstrapped <- wisp_has_bootstrap(fit)
  if (bootstrapped) {
    stats <- fit$stats$parameters
    at <- match(table$parameter, stats$parameter)
    table$CI.low <- stats$CI.low[at]
    table$CI.high <- stats$CI.high[at]
    table$significance <- stats$significance[at]
  } else {
    table$CI.low <- NA_real_
    table$CI.high <- NA_real_
    table$significance <- ""
  }
  table$label <- factor(table$label, levels = rev(unique(table$label)))
  table$significant <- table$significance %in% c("*", "**", "***")

  g <- ggplot2::ggplot(table, ggplot2::aes(x = .data$estimate, y = .data$label)) + wisp_theme(fit)
  if (effects_only) g <- g + ggplot2::geom_vline(xintercept = 0, colour = "grey50")
  coloured <- effects_only && bootstrapped
  if (bootstrapped) {
    bar <- if (coloured) {
      ggplot2::aes(xmin = .data$CI.low, xmax = .data$CI.high, colour = .data$significant)
    } else {
      ggplot2::aes(xmin = .data$CI.low, xmax = .data$CI.high)
    }
    g <- g + ggplot2::geom_errorbarh(bar, height = 0.3)
  }
  g <- g + ggplot2::geom_point(if (coloured) ggplot2::aes(colour = .data$significant), size = 2)
  if (coloured) {
    marks <- table[table$significant, , drop = FALSE] # "ns" shows as the colour
    # Above the point, so that no mark is clipped at a panel's edge.
    g <- g + ggplot2::geom_text(data = marks, ggplot2::aes(label = .data$significance),
                                vjust = -0.7, size = 3.5) +
      ggplot2::scale_colour_manual(values = c(`FALSE` = "grey40", `TRUE` = "firebrick"),
                                   labels = c(`FALSE` = "not significant",
                                              `TRUE` = "significant"),
                                   name = NULL)
  }
  g <- if (effects_only) {
    g + ggplot2::facet_wrap(ggplot2::vars(.data$component), scales = "free")
  } else {
    g + ggplot2::facet_grid(rows = ggplot2::vars(.data$role), cols = ggplot2::vars(.data$component),
                            scales = "free", space = "free_y")
  }
  g + ggplot2::labs(
    x = "estimate", y = NULL,
    title = if (effects_only) "Treatment effects" else "Parameters",
    subtitle = if (bootstrapped) {
      sprintf("bars: bootstrap percentile intervals (%d replicates)%s",
              as.integer(fit$stats$replicates.used),
              if (effects_only) "; marks: adjusted significance" else "")
    } else {
      "estimates only: bootstrap the fit for intervals"
    }
  )
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
        ggplot2::theme_bw() +
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
  ggplot2::ggplot(long, ggplot2::aes(x = .data$replicate, y = .data$value, colour = .data$code)) +
    ggplot2::geom_point(size = 1.5) +
    ggplot2::facet_wrap(ggplot2::vars(.data$metric), scales = "free_y", ncol = 1) +
    ggplot2::theme_bw() +
    ggplot2::labs(x = "replicate", y = NULL, colour = "code",
                  title = sprintf("Bootstrap replicates: time and memory (%d replicates)",
                                  as.integer(x$R)))
}
