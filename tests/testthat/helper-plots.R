# Small fixed fits for the figures (test-plots.R, test-plot-snapshots.R).
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

# Two factors, one of them a time series (age), for the time-series plot
# and the splitting factor.
plots_fit_time <- once(function() {
  counts <- wisp_simulate(n.genes = 2, n.bins = 30, seed = 2, time.series = "age",
                          fixed.effects = list(hemisphere = c("left", "right"),
                                               age = c("P7", "P14", "P21")))
  wisp(counts, variables = list(timeseries = "age"), verbose = FALSE)
})

layer_geoms <- function(p) vapply(p$layers, function(l) class(l$geom)[1], "")

# Builds the plot (as printing would) and fails on any warning.
expect_builds <- function(p) {
  expect_true(inherits(p, "ggplot"))
  expect_no_warning(built <- ggplot2::ggplot_build(p))
  invisible(built)
}

# The README's example fit (wisp_example, hemisphere x age): in it,
# significant and non-significant effects share blocks.
plots_fit_example <- once(function() {
  without_design_warning(wisp(wisp_example, max.fork = 1, verbose = FALSE))
})

# The ggplots a patchwork is made of (a plain ggplot: itself).
patch_plots <- function(x) {
  if (!inherits(x, "patchwork")) return(list(x))
  own <- x
  own$patches <- NULL
  class(own) <- setdiff(class(own), "patchwork")
  parts <- unlist(lapply(x$patches$plots, patch_plots), recursive = FALSE)
  if (!inherits(own, "plot_filler")) parts <- c(parts, list(own))
  parts
}
