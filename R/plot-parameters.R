# Figures of the parameters: the effects (a forest plot per gene), the
# parameters of one group (baseline, a treatment's effects, the random
# effects) with violins of the bootstrap replicates, and the block rates
# across a time series.

# Names of the components in the figures: the readable names of labels.R
# (component_names) on two lines, and the warps of each.
component_labels <- c(
  sub(" ", "\n", component_names[c("Rt", "tslope", "tpoint")], fixed = TRUE),
  point = "warp of\npoints", rate = "warp of\nrates", slope = "warp of\nslopes"
)

# How an effect is named in a legend: by the levels it compares.
effect_labels <- function(fit, treatments) {
  ref <- fit$fix$ref.lvl
  levels <- treatment_levels(fit)
  vapply(treatments, function(treatment) {
    row <- levels[levels$treatment == treatment, , drop = FALSE]
    if (!nrow(row)) return(treatment)
    factors <- names(ref)
    changed <- factors[unname(unlist(row[factors])) != ref[factors]]
    if (length(changed) == 1L) {
      sprintf("%s vs %s", row[[changed]], ref[[changed]])
    } else if (length(changed) > 1L) {
      sprintf("%s (interaction)", treatment)
    } else {
      treatment
    }
  }, "", USE.NAMES = FALSE)
}

# Dodged x positions, computed once for every layer of a figure: the point,
# the interval and the star of one parameter share its x. (position_dodge()
# dodges each layer by the groups present in that layer's own data, so a
# layer of the significant effects only, or a point layer grouped also by
# significance, put stars and intervals beside the wrong points.) `at` is
# the undodged position, `member` what is dodged within it (a factor, in its
# level order), `within` what else keys a set of dodged things (the panel);
# the positions are those of position_dodge(width) over the members present.
dodged_x <- function(at, member, within, width) {
  key <- paste(within, at, sep = "\r")
  rank <- stats::ave(as.integer(member), key, FUN = function(m) match(m, sort(unique(m))))
  n <- stats::ave(as.integer(member), key, FUN = function(m) length(unique(m)))
  at + ifelse(n > 1, width * ((rank - 0.5) / n - 0.5), 0)
}

# Breaks of a position axis at whole numbers (blocks, genes).
whole_breaks <- function(limits) {
  if (any(!is.finite(limits))) return(numeric(0))
  seq(ceiling(limits[1] - 1e-9), floor(limits[2] + 1e-9))
}

# How a treatment is named in a figure: by all its levels, in the order of
# the fixed effects ("left, P12", "right, P12", ...), so that no treatment
# reads as an effect (its name, "right" or "right:P18", leaves out its
# reference levels). Named by treatment.
treatment_labels <- function(fit) {
  levels <- treatment_levels(fit)
  factors <- fit$fix$names
  labels <- if (length(factors)) {
    do.call(paste, c(unname(as.list(levels[factors])), sep = ", "))
  } else levels$treatment
  stats::setNames(labels, levels$treatment)
}

# The parameters of the fixed effects or random effects with their
# estimates and the intervals and significance of fit$stats.
parameter_rows <- function(fit, species, contexts, keep) {
  p <- fit$parameters
  p <- p[keep(p) & p$species %in% species & (is.na(p$context) | p$context %in% contexts), ,
         drop = FALSE]
  table <- data.frame(parameter = p$name, role = p$role, component = p$component,
                      context = p$context, species = p$species, block = p$block,
                      treatment = p$treatment, ran = p$ran,
                      estimate = unname(fit$fitted.parameters[p$name]),
                      stringsAsFactors = FALSE)
  stats <- fit$stats$parameters
  at <- if (is.null(stats)) rep(NA_integer_, nrow(table)) else match(table$parameter, stats$parameter)
  table$CI.low <- if (is.null(stats)) NA_real_ else stats$CI.low[at]
  table$CI.high <- if (is.null(stats)) NA_real_ else stats$CI.high[at]
  significance <- if (is.null(stats)) rep("", nrow(table)) else stats$significance[at]
  significance[is.na(significance)] <- ""
  table$significance <- significance
  table$significant <- significance %in% c("*", "**", "***")
  table$component.label <- factor(component_labels[table$component],
                                  levels = unique(component_labels[intersect(
                                    names(component_labels), table$component)]))
  table
}

# What the intervals of fit$stats are, for subtitles.
interval_note <- function(fit) {
  stats <- fit$stats
  if (is.null(stats$parameters)) return("estimates only: bootstrap the fit for intervals")
  level <- round(100 * statistics_level(stats))
  if (identical(statistics_method(stats), "wald")) {
    sprintf("bars: %d %% Wald intervals", level)
  } else if (identical(statistics_method(stats), "profile")) {
    sprintf("bars: %d %% Wald intervals (profile likelihood where flagged)", level)
  } else {
    sprintf("bars: %d %% bootstrap percentile intervals (%d replicates)", level,
            as.integer(stats$replicates.used))
  }
}

# The effects of every non-reference treatment: one column of panels per
# gene (and context), one row per component.
effect_plot <- function(fit, pages, contexts, opts) {
  table <- parameter_rows(fit, pages$species, contexts, function(p) p$role == "beta")
  multi <- length(contexts) > 1
  # Narrow columns: the context under the gene.
  table$panel <- factor(panel_labels(table$species, table$context, multi, sep = "\n"),
                        levels = unique(panel_labels(rep(pages$species, each = length(contexts)),
                                                     rep(contexts, length(pages$species)), multi,
                                                     sep = "\n")))
  treatments <- setdiff(fit$treatment$names, fit$treatment$names[1])
  labels <- stats::setNames(effect_labels(fit, treatments), treatments)
  table$treatment <- factor(table$treatment, levels = treatments)
  colours <- treatment_colours(fit, opts)[treatments]
  has_ci <- any(!is.na(table$CI.low))
  # One x per effect for its point, interval and star: the block, dodged by
  # treatment within the panel and component.
  table$x <- dodged_x(table$block, table$treatment,
                      paste(table$panel, table$component.label), width = 0.7)
  g <- ggplot2::ggplot(table, ggplot2::aes(x = .data$x, y = .data$estimate,
                                           colour = .data$treatment, group = .data$treatment)) +
    wisp_theme(fit, opts) +
    ggplot2::geom_hline(yintercept = 0, colour = "grey60", linewidth = 0.3)
  if (has_ci) {
    g <- g + ggplot2::geom_linerange(ggplot2::aes(ymin = .data$CI.low, ymax = .data$CI.high),
                                     linewidth = 0.5)
  }
  g <- g + ggplot2::geom_point(ggplot2::aes(shape = .data$significant),
                               size = 1.8, fill = "white") +
    ggplot2::scale_shape_manual(values = c(`TRUE` = 16, `FALSE` = 21),
                                labels = c(`TRUE` = "significant", `FALSE` = "not significant"),
                                breaks = c("TRUE", "FALSE"), name = NULL, drop = FALSE) +
    ggplot2::scale_colour_manual(values = colours, labels = labels[treatments],
                                 breaks = treatments, name = "effect") +
    ggplot2::scale_y_continuous(expand = ggplot2::expansion(mult = c(0.08, 0.18))) +
    ggplot2::scale_x_continuous(breaks = whole_breaks, minor_breaks = NULL,
                                expand = ggplot2::expansion(add = 0.35))
  marks <- table[table$significant, , drop = FALSE]
  if (nrow(marks)) {
    marks$y <- ifelse(is.na(marks$CI.high), marks$estimate, marks$CI.high)
    g <- g + ggplot2::geom_text(
      data = marks, ggplot2::aes(y = .data$y, label = .data$significance),
      vjust = -0.1, size = opts$label_size, show.legend = FALSE
    )
  }
  g + ggplot2::facet_grid(rows = ggplot2::vars(.data$component.label),
                          cols = ggplot2::vars(.data$panel), scales = "free") +
    ggplot2::labs(
      x = "block (rates) or transition (slopes, points)", y = "effect (vs the reference)",
      title = "Treatment effects",
      subtitle = plot_subtitle(
        interval_note(fit),
        if (!is.null(fit$stats$parameters)) "stars: adjusted significance",
        "rates on the log(1 + rate) scale, points in bins", page_note(pages))
    ) +
    # A legend of many or long effect names in two rows, to fit 7 inches.
    ggplot2::guides(colour = ggplot2::guide_legend(
                      order = 1, nrow = if (sum(nchar(labels) + 6) > 90) 2L else NULL),
                    shape = ggplot2::guide_legend(order = 2)) +
    ggplot2::theme(legend.box = "vertical", legend.spacing.y = ggplot2::unit(0, "pt"))
}

# Classes of genes: a factor of the class of each gene, in the order of the
# classes given; genes not in a class are "other".
gene_class_factor <- function(gene.classes, species, call) {
  if (is.null(gene.classes)) return(factor(rep("all genes", length(species))))
  if (is.list(gene.classes)) {
    if (is.null(names(gene.classes)) || any(!nzchar(names(gene.classes))) ||
        !all(vapply(gene.classes, is.character, TRUE))) {
      stop_input("`gene.classes` as a list must be named by class, each element the genes ",
                 "of that class.", call = call)
    }
    classes <- names(gene.classes)
    gene.classes <- stats::setNames(rep(classes, lengths(gene.classes)),
                                    unlist(gene.classes, use.names = FALSE))
  } else {
    if (!is.character(gene.classes) || is.null(names(gene.classes)) || anyNA(gene.classes)) {
      stop_input("`gene.classes` must be a character vector of classes named by gene, or a ",
                 "list of genes named by class.", call = call)
    }
    classes <- unique(gene.classes)
  }
  unknown <- setdiff(names(gene.classes), species)
  if (length(unknown) == length(gene.classes)) {
    stop_input("`gene.classes` names none of the genes shown (e.g. \"", unknown[1], "\").",
               call = call)
  }
  class <- unname(gene.classes[species])
  class[is.na(class)] <- "other"
  factor(class, levels = unique(c(classes, "other"))[unique(c(classes, "other")) %in% class])
}

# Bootstrap replicates of some parameters, long: parameter, value (at most
# `n` replicates each).
replicate_values <- function(fit, parameters, n = 200L) {
  boot <- fit$bootstrap
  use <- which(bootstrap_used_replicates(boot, fit$stats$replicates.used))
  if (length(use) > n) use <- use[round(seq(1, length(use), length.out = n))]
  columns <- match(parameters, names(fit$fitted.parameters))
  values <- boot$t[use, columns, drop = FALSE]
  data.frame(parameter = rep(parameters, each = length(use)), value = as.vector(values),
             stringsAsFactors = FALSE)
}

# The parameters of one group: the baseline, one treatment's effects, or
# the random effects; x = gene, grouped into columns by class.
parameter_plot <- function(fit, pages, contexts, opts, group, violin, gene.classes, call) {
  treatments <- fit$treatment$names
  groups <- c("baseline", treatments[-1], "random")
  if (!is.character(group) || length(group) != 1L || !group %in% groups) {
    stop_input("`group` must be one of ", paste0("\"", groups, "\"", collapse = ", "),
               " (the baseline, a treatment's effects, or the random effects), not ",
               describe_value(group), ".", call = call)
  }
  has_replicates <- inherits(fit$bootstrap, "wisp_bootstrap")
  if (is.null(violin)) violin <- has_replicates
  check_flag(violin, "violin", call = call)
  if (violin && !has_replicates) {
    stop_input("`violin = TRUE` needs bootstrap replicates: bootstrap the fit ",
               "(wisp(..., bootstraps.num = ) or wisp_statistics(fit, boot = bs_batch(fit, ...))).",
               call = call)
  }
  random <- group == "random"
  keep <- if (random) function(p) p$role == "warp" else if (group == "baseline")
    function(p) p$role == "baseline" else function(p) p$role == "beta" & p$treatment %in% group
  table <- parameter_rows(fit, pages$species, contexts, keep)
  if (!nrow(table)) {
    stop_input("the fit has no ", if (random) "random effects" else "parameters of that group",
               " for these genes.", call = call)
  }
  multi <- length(contexts) > 1 && !random
  classes <- gene_class_factor(gene.classes, pages$species, call)
  table$class <- classes[match(table$species, pages$species)]
  order <- order(as.integer(classes), seq_along(pages$species))
  gene_levels <- pages$species[order]
  table$gene <- if (multi) {
    factor(panel_labels(table$species, table$context, TRUE),
           levels = panel_labels(rep(gene_levels, each = length(contexts)),
                                 rep(contexts, length(gene_levels)), TRUE))
  } else {
    factor(table$species, levels = gene_levels)
  }
  table$gene <- droplevels(table$gene)
  table$index <- if (random) factor(table$ran, levels = setdiff(
    fit$grouping.variables$ran.lvls, "none")) else factor(table$block)
  table$index <- droplevels(table$index)
  dodge <- ggplot2::position_dodge(width = 0.8)
  g <- ggplot2::ggplot(table, ggplot2::aes(x = .data$gene, colour = .data$index,
                                           group = interaction(.data$gene, .data$index))) +
    wisp_theme(fit, opts)
  if (!group %in% "baseline") g <- g + ggplot2::geom_hline(yintercept = 0, colour = "grey60",
                                                           linewidth = 0.3)
  if (violin) {
    values <- replicate_values(fit, table$parameter)
    at <- match(values$parameter, table$parameter)
    values <- cbind(values, table[at, c("gene", "index", "class", "component.label")])
    g <- g + ggplot2::geom_violin(
      data = values,
      ggplot2::aes(y = .data$value, fill = .data$index),
      position = dodge, scale = "width", alpha = 0.35, colour = NA, width = 0.75
    )
  }
  has_ci <- any(!is.na(table$CI.low))
  if (has_ci) {
    g <- g + ggplot2::geom_errorbar(ggplot2::aes(ymin = .data$CI.low, ymax = .data$CI.high),
                                    position = dodge, width = 0.3, linewidth = 0.4)
  }
  g <- g + ggplot2::geom_point(ggplot2::aes(y = .data$estimate), position = dodge, size = 1.6)
  marks <- table[table$significant, , drop = FALSE]
  if (nrow(marks)) {
    # The stars' layer has a row (an empty label) for every parameter:
    # position_dodge() dodges by the groups present in a layer's data, so a
    # layer of the significant ones only would put its stars beside the
    # wrong points.
    stars <- table
    stars$significance[!stars$significant] <- ""
    stars$y <- ifelse(is.na(stars$CI.high), stars$estimate, stars$CI.high)
    if (violin) {
      top <- tapply(values$value, values$parameter, max)
      stars$y <- pmax(stars$y, top[stars$parameter], na.rm = TRUE)
    }
    g <- g + ggplot2::geom_text(data = stars, ggplot2::aes(y = .data$y, label = .data$significance),
                                position = dodge, vjust = -0.1, size = opts$label_size,
                                show.legend = FALSE)
  }
  n_index <- nlevels(table$index)
  palette <- if (random && n_index > length(okabe_ito)) {
    grDevices::hcl.colors(n_index, "Dark 3")
  } else plot_palette(n_index)
  index_name <- if (random) "animal" else "block or\ntransition"
  title <- if (random) "Random effects (warps)" else if (group == "baseline") {
    sprintf("Baseline (%s)", treatment_labels(fit)[[treatments[1]]])
  } else {
    sprintf("Effects of %s", effect_labels(fit, group))
  }
  rotate <- nlevels(table$gene) > 6 || max(nchar(levels(table$gene))) * nlevels(table$gene) > 60
  g + ggplot2::scale_colour_manual(values = palette, name = index_name,
                                   aesthetics = c("colour", "fill")) +
    ggplot2::scale_y_continuous(expand = ggplot2::expansion(mult = c(0.06, 0.15))) +
    ggplot2::facet_grid(rows = ggplot2::vars(.data$component.label),
                        cols = ggplot2::vars(.data$class), scales = "free", space = "free_x") +
    (if (rotate) ggplot2::theme(axis.text.x = ggplot2::element_text(angle = 90, hjust = 1,
                                                                    vjust = 0.5))) +
    (if (is.null(gene.classes)) ggplot2::theme(strip.text.x = ggplot2::element_blank(),
                                               strip.background.x = ggplot2::element_blank())) +
    ggplot2::labs(
      x = "gene", y = if (random) "random effect (warp factor)" else if (group == "baseline")
        "value" else "effect",
      title = title,
      subtitle = plot_subtitle(
        if (violin) sprintf("violins: %d bootstrap replicates per parameter",
                            nrow(values) %/% nrow(table)),
        if (!random) interval_note(fit) else "points: estimates per animal",
        if (group == "baseline") "rates on the log(1 + rate) scale, points in bins",
        if (nrow(marks)) "stars: adjusted significance", page_note(pages))
    )
}

# The time series: the block rates (or transition slopes or points) of
# every treatment against the levels of the time factor.
timeseries_plot <- function(fit, pages, contexts, opts, time.series, component, call) {
  time <- time.series %||% fit$variables$timeseries
  if (is.null(time)) {
    stop_input("the time-series plot needs a time series: name the fixed effect that is ",
               "one, plot(fit, type = \"timeseries\", time.series = \"", fit$fix$names[1],
               "\"), or fit with wisp(..., variables = list(timeseries = ...)).", call = call)
  }
  if (!is.character(time) || length(time) != 1L || !time %in% fit$fix$names) {
    stop_input("`time.series` must name a fixed effect of the fit (",
               paste0("\"", fit$fix$names, "\"", collapse = ", "), "), not ",
               describe_value(time), ".", call = call)
  }
  split <- check_splitting_factor(fit, opts[["splitting_factor"]], call)
  if (identical(split, time)) {
    stop_input("the splitting factor must not be the time series (\"", time, "\").",
               call = call)
  }
  levels_table <- treatment_levels(fit)
  others <- setdiff(fit$fix$names, time)
  levels_table$line <- if (length(others)) {
    do.call(paste, c(unname(as.list(levels_table[others])), sep = ", "))
  } else "all"
  values <- treatment_values(fit, pages$species, contexts, component)
  values$time <- factor(levels_table[[time]][match(values$treatment, levels_table$treatment)],
                        levels = fit$fix$lvls[[time]])
  values$line <- levels_table$line[match(values$treatment, levels_table$treatment)]
  line_levels <- unique(levels_table$line)
  values$line <- factor(values$line, levels = line_levels)
  multi <- length(contexts) > 1
  panel_levels <- unique(panel_labels(rep(pages$species, each = length(contexts)),
                                      rep(contexts, length(pages$species)), multi))
  values$panel <- factor(panel_labels(values$species, values$context, multi),
                         levels = panel_levels)
  rates <- component == "Rt"
  transform <- if (rates && !isTRUE(opts$log.scale)) curve_rate(fit) else identity
  values$y <- transform(values$value)
  values$y.low <- transform(values$low)
  values$y.high <- transform(values$high)
  values$group <- paste(values$line, values$block)
  unit <- if (rates) "block" else "transition"
  values$block.label <- factor(paste(unit, values$block),
                               levels = paste(unit, sort(unique(values$block))))

  # Line colours: by the other factors' combination, hue by the splitting
  # factor when one is set.
  if (is.null(split)) {
    colours <- stats::setNames(plot_palette(length(line_levels)), line_levels)
  } else {
    hues <- rep_len(opts$splitting_factor_colors %||% c(120, 240), length(fit$fix$lvls[[split]]))
    first <- levels_table[match(line_levels, levels_table$line), , drop = FALSE]
    rest <- setdiff(others, split)
    rest_key <- if (length(rest)) do.call(paste, c(unname(as.list(first[rest])), sep = ", ")) else ""
    light <- if (length(unique(rest_key)) > 1) {
      seq(35, 70, length.out = length(unique(rest_key)))[match(rest_key, unique(rest_key))]
    } else 50
    colours <- stats::setNames(grDevices::hcl(hues[match(first[[split]], fit$fix$lvls[[split]])],
                                              c = 75, l = light), line_levels)
  }
  dodge <- ggplot2::position_dodge(width = 0.25)
  g <- ggplot2::ggplot(values, ggplot2::aes(x = .data$time, y = .data$y, colour = .data$line,
                                            group = .data$group)) +
    wisp_theme(fit, opts)
  if (any(!is.na(values$y.low))) {
    g <- g + ggplot2::geom_errorbar(ggplot2::aes(ymin = .data$y.low, ymax = .data$y.high),
                                    width = 0.12, position = dodge, linewidth = 0.4)
  }
  g <- g + ggplot2::geom_line(ggplot2::aes(linetype = .data$block.label), position = dodge,
                              linewidth = 0.6) +
    ggplot2::geom_point(ggplot2::aes(shape = .data$block.label), position = dodge, size = 1.8)
  observed <- NULL
  if (rates) {
    observed <- block_mean_counts(fit, values, opts)
    if (nrow(observed)) {
      observed$time <- factor(levels_table[[time]][match(observed$treatment, levels_table$treatment)],
                              levels = fit$fix$lvls[[time]])
      observed$line <- factor(levels_table$line[match(observed$treatment, levels_table$treatment)],
                              levels = line_levels)
      observed$group <- paste(observed$line, observed$block)
      observed$panel <- factor(panel_labels(observed$species, observed$context, multi),
                               levels = panel_levels)
      g <- g + ggplot2::geom_point(data = observed, ggplot2::aes(y = .data$y), shape = 4,
                                   size = 1.8, alpha = 0.8, position = dodge)
    }
  }
  n_panels <- nlevels(values$panel)
  g + ggplot2::scale_colour_manual(values = colours, name = if (length(others))
    paste(others, collapse = ", ") else NULL) +
    ggplot2::scale_linetype_manual(values = rep_len(c("solid", "22", "42", "12", "4212"),
                                                    nlevels(values$block.label)), name = NULL) +
    ggplot2::scale_shape_manual(values = rep_len(c(16, 17, 15, 18, 8), nlevels(values$block.label)),
                                name = NULL) +
    ggplot2::scale_x_discrete(expand = ggplot2::expansion(add = 0.3)) +
    ggplot2::facet_wrap(ggplot2::vars(.data$panel), scales = "free_y",
                        ncol = min(n_panels, if (n_panels <= 3) n_panels else
                          if (n_panels == 4) 2 else 3)) +
    ggplot2::labs(
      x = time,
      y = switch(component,
                 Rt = if (isTRUE(opts$log.scale)) "block rate, log(rate + 1)" else
                   paste("block", rate_label(fit)),
                 tslope = "transition slope", tpoint = "transition point (bin)"),
      title = switch(component, Rt = "Block rates over time",
                     tslope = "Transition slopes over time",
                     tpoint = "Transition points over time"),
      subtitle = plot_subtitle(
        sprintf("one line per %s%s", unit, if (length(others))
          paste(" and", paste(others, collapse = ", ")) else ""),
        interval_note(fit),
        if (!is.null(observed) && nrow(observed)) "crosses: mean observed count of the block's bins",
        page_note(pages))
    )
}

# The value of each block (or transition) of a component under every
# treatment, z = W beta, with its interval: percentile intervals of the
# bootstrap replicates, else Wald intervals from vcov(fit) (none when the
# fit has neither).
treatment_values <- function(fit, species, contexts, component) {
  p <- fit$parameters
  p <- p[p$role %in% c("baseline", "beta") & p$component == component &
           p$species %in% species & p$context %in% contexts, , drop = FALSE]
  W <- fit$weight.matrix
  treatments <- fit$treatment$names
  level <- if (is.null(fit$stats$parameters)) 0.95 else statistics_level(fit$stats)
  has_replicates <- inherits(fit$bootstrap, "wisp_bootstrap")
  V <- if (!has_replicates) tryCatch(stats::vcov(fit), error = function(e) NULL) else NULL
  if (has_replicates) {
    use <- bootstrap_used_replicates(fit$bootstrap, fit$stats$replicates.used)
    replicates <- fit$bootstrap$t[use, , drop = FALSE]
  }
  key <- paste(p$context, p$species, p$block, sep = "\r")
  rows <- lapply(split(seq_len(nrow(p)), factor(key, levels = unique(key))), function(i) {
    at <- i[match(treatments, ifelse(p$role[i] == "baseline", treatments[1], p$treatment[i]))]
    names <- p$name[at]
    beta <- unname(fit$fitted.parameters[names])
    z <- as.vector(W %*% beta)
    low <- high <- rep(NA_real_, length(z))
    if (has_replicates) {
      columns <- match(names, names(fit$fitted.parameters))
      draws <- replicates[, columns, drop = FALSE] %*% t(W)
      a <- (1 - level) / 2
      low <- apply(draws, 2, stats::quantile, probs = a, names = FALSE, na.rm = TRUE)
      high <- apply(draws, 2, stats::quantile, probs = 1 - a, names = FALSE, na.rm = TRUE)
    } else if (!is.null(V) && all(names %in% rownames(V))) {
      se <- sqrt(pmax(rowSums((W %*% V[names, names]) * W), 0))
      q <- stats::qnorm(1 - (1 - level) / 2)
      low <- z - q * se
      high <- z + q * se
    }
    data.frame(context = p$context[at[1]], species = p$species[at[1]], block = p$block[at[1]],
               treatment = treatments, value = z, low = low, high = high,
               stringsAsFactors = FALSE)
  })
  do.call(rbind, rows)
}

# The mean observed count (per unit of exposure) of the bins of each block,
# per treatment: blocks are bounded by the treatment's change points.
block_mean_counts <- function(fit, values, opts) {
  d <- fit$count.data.summed
  d <- d[observed_rows(fit) & d$ran != "none" & !is.na(d$count) &
           d$species %in% values$species & d$context %in% values$context, , drop = FALSE]
  if (!nrow(d)) return(data.frame())
  exposure <- if (is.null(d$exposure)) 1 else ifelse(is.na(d$exposure), 1, d$exposure)
  d$y <- d$count / exposure
  cp <- fit$change.points
  key <- paste(d$context, d$species, d$treatment, sep = "\r")
  cp_key <- if (is.null(cp)) character(0) else paste(cp$context, cp$species, cp$treatment, sep = "\r")
  d$block <- 1L
  for (k in unique(key)) {
    points <- sort(cp$bin[cp_key == k])
    rows <- key == k
    d$block[rows] <- findInterval(d$bin[rows], points) + 1L
  }
  means <- stats::aggregate(d["y"], by = d[c("context", "species", "treatment", "block")],
                            FUN = mean)
  if (isTRUE(opts$log.scale)) means$y <- log1p(means$y)
  means
}

# Distributions of the effects and warps: histograms, pooled over genes,
# blocks and treatments (effects) or genes and animals (warps), of the
# bootstrap replicates when the fit has them, else of the estimates.
distribution_plot <- function(fit, species, contexts, opts) {
  p <- fit$parameters
  keep <- p$role %in% c("beta", "warp") & p$species %in% species &
    (is.na(p$context) | p$context %in% contexts)
  p <- p[keep, , drop = FALSE]
  has_replicates <- inherits(fit$bootstrap, "wisp_bootstrap")
  values <- if (has_replicates) {
    replicate_values(fit, p$name, n = .Machine$integer.max)
  } else {
    data.frame(parameter = p$name, value = unname(fit$fitted.parameters[p$name]),
               stringsAsFactors = FALSE)
  }
  at <- match(values$parameter, p$name)
  values$kind <- factor(ifelse(p$role[at] == "beta", "treatment effects", "random effects (warps)"),
                        levels = c("treatment effects", "random effects (warps)"))
  names <- c(Rt = "block rate", tslope = "transition slope", tpoint = "transition point",
             point = "warp of points", rate = "warp of rates", slope = "warp of slopes")
  values$component <- factor(names[p$component[at]], levels = unname(names))
  values <- values[is.finite(values$value), , drop = FALSE]
  ggplot2::ggplot(values, ggplot2::aes(x = .data$value, fill = .data$kind)) +
    wisp_theme(fit, opts) +
    ggplot2::geom_histogram(ggplot2::aes(y = ggplot2::after_stat(ndensity)),
                            bins = if (has_replicates) 75 else 30, colour = NA) +
    ggplot2::geom_vline(xintercept = 0, colour = "grey40", linewidth = 0.3) +
    ggplot2::scale_fill_manual(values = unname(okabe_ito[c(1, 2)]), name = NULL, drop = FALSE) +
    ggplot2::facet_wrap(ggplot2::vars(.data$component), scales = "free", nrow = 2, drop = TRUE) +
    ggplot2::labs(
      x = "value", y = "density (peak = 1)",
      title = "Distributions of effects and warps",
      subtitle = plot_subtitle(
        if (has_replicates) sprintf("bootstrap replicates of every effect and warp, pooled (%s)",
                                    "genes, blocks, treatments and animals")
        else "estimates of every effect and warp, pooled; bootstrap the fit for their replicates",
        "rates on the log(1 + rate) scale, points in bins")
    )
}
