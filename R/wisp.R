#' Fit a warped-sigmoid Poisson-process mixed-effects model
#'
#' Fits a WSPmm to long-format spatial count data: per context and gene, a
#' poly-sigmoid curve over the spatial bins whose block rates, transition
#' slopes and transition points depend on the fixed effects, warped per
#' random level (e.g. per mouse). The number of transitions of each curve is
#' detected from the data first (likelihood-ratio change points, optionally
#' tuned by a grid search). With `bootstraps.num > 0`, the fit is
#' bootstrapped and the fixed effects are tested.
#'
#' The signature and argument order are those of the original `wispack`
#' (v2.4), so existing calls keep working. MCMC is not offered: use the
#' bootstrap.
#'
#' @param count.data A data.frame with one row per token (e.g. one gene in
#'   one cell): a count, a spatial bin (1, 2, ...), and columns for context,
#'   species (gene), random level and fixed effects.
#' @param variables Named list mapping roles to column names: `count`, `bin`,
#'   `context`, `species`, `ran`, `timeseries`, `fixedeffects`. Unmapped
#'   roles use the column of the same name. A missing `context`, `species`
#'   or `ran` column becomes a constant column (named by the value given
#'   here, or by the role). Without `fixedeffects`, every column not used by
#'   another role is a fixed effect.
#' @param fit_only Only fit; no bootstrap or statistics.
#' @param use.median Report the medians of the bootstrap replicates as the
#'   estimates instead of the full-data fit.
#' @param bootstraps.num Number of bootstrap replicates (0: none).
#' @param converged.resamples.only Use only converged replicates for the
#'   statistics.
#' @param max.fork Number of worker processes for the grid search and the
#'   bootstrap (on Windows, which has no fork: threads for the grid search,
#'   and the bootstrap on [bs_batch()]'s default backend there).
#' @param verbose Print progress messages.
#' @param model.settings Named list of model settings; see Details.
#' @param MCMC.settings Accepted for compatibility, at the original's
#'   defaults only (MCMC is not offered): asking for MCMC steps, or any other
#'   value of an MCMC setting, is an error that points to the bootstrap.
#' @param plot.settings Named list of settings of [plot.wisp()]: `log.scale`
#'   (FALSE), `title_size` (20), `axis_size` (12), `legend_size` (10),
#'   `count_size` (1.5), `count_jitter` (0.5), `count.alpha.ran` (0.25),
#'   `pred.alpha.ran` (0.9), `pred.alpha.none` (1). The original's other
#'   names (`print.plots`, `dim.bounds`, `splitting_factor`, `CI_style`,
#'   `splitting_factor_colors`, `label_size`, `count.alpha.none`) have no
#'   effect here: they are accepted at their defaults only, and any other
#'   value is an error.
#' @param ran.seed Seed of the bootstrap (`NULL`: drawn from R's random
#'   number generator). R's own random stream is not changed.
#'
#' @details `model.settings` (defaults in parentheses; the package's Rust
#'   core holds them, see `wispack:::wisp_default_model_settings()`):
#'   `buffer_factor` (0.05) minimum spacing of transitions as a fraction of
#'   the bins, above 0 and below 0.5; `ctol` (1e-6)
#'   relative change of the objective that ends a fit; `max_evals` (1000)
#'   objective evaluations allowed per fit; `max_penalty_at_distance_factor`
#'   (0.01) size of the boundary penalty at the start, relative to the
#'   negative log-likelihood; `LRO_cost` ("AIC") criterion of the grid search
#'   over change-point settings: "AIC", "BIC", "NLL" or "none" (no search);
#'   `LROcutoff` (2) and `LROwindow_factor` (1.25) change-point settings used
#'   without a search; `LRO_method` ("improved") change-point detection,
#'   "improved" (fewer spurious transitions) or "original";
#'   `rise_threshold_factor` (0.8) the rise, as a fraction of the step
#'   between block rates, that a transition must reach within its run of
#'   bins; it sets the starting slopes (a larger factor, longer runs,
#'   gentler slopes); `rng_seed` (42) seed of the starting warping factors;
#'   `warp_precision` (1e-7); `round_none` (TRUE) round the extrapolated
#'   population counts; `max_bin` (0) number of bins (0: the largest bin;
#'   at most 100,000); `trtKO` ("none") not supported.
#'
#' @return An object of class `"wisp"`: a list with the original's fields
#'   (`count.data.summed`, `fitted.parameters`, `param.names`,
#'   `gamma.dispersion`, `fix`, `treatment`, `weight.matrix`,
#'   `grouping.variables`, `param.idx0`, `settings`,
#'   `LRO.grid.search.results`, `variables`), `fit.diagnostics` (the columns
#'   of [bs_batch()]'s `diagnostics` for the full-data fit, without `ok` and
#'   `reason`: `pen.neg.value`, `neg.loglik`, `converged`, `code`,
#'   `num.evals`, `iterations`, `max.gradient`, `on.bound`, `fit.seconds`,
#'   `seconds` (detection, start and fit), `pid`, `peak_rss_mb`, `pss_mb`,
#'   `private_dirty_mb`; and `n.params`), `degrees`, `change.points`, and
#'   `plan`, the saved state of the fitted model (versioned and
#'   checksummed), so a fit saved with [saveRDS()] can be bootstrapped and
#'   predicted later, also by later versions of wispack. With bootstraps,
#'   also `bootstrap`, `sample.params.bs`, `diagnostics.bs` and `stats`.
#'   Errors are classed conditions: see [wisp_conditions].
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 2, n.bins = 40, seed = 3)
#' fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
#' fit$fit.diagnostics$converged
wisp <- function(count.data, variables = list(), fit_only = FALSE, use.median = FALSE,
                 bootstraps.num = 0, converged.resamples.only = TRUE, max.fork = 1,
                 verbose = TRUE, model.settings = list(), MCMC.settings = list(),
                 plot.settings = list(), ran.seed = 1234) {
  call <- match.call()
  check_flag(fit_only, "fit_only")
  check_flag(use.median, "use.median")
  check_whole_number(bootstraps.num, "bootstraps.num", upper = 1e7)
  check_flag(converged.resamples.only, "converged.resamples.only")
  check_whole_number(max.fork, "max.fork", lower = 1, upper = 4096)
  check_worker_limit(max.fork, "max.fork")
  check_flag(verbose, "verbose")
  settings <- wisp_model_settings(model.settings)
  wisp_mcmc_settings(MCMC.settings)
  plot.settings <- wisp_plot_settings(plot.settings)
  if (!is.null(ran.seed)) check_whole_number(ran.seed, "ran.seed", lower = -.Machine$integer.max)
  say <- function(...) if (verbose) message(...)

  started <- proc.time()[["elapsed"]]
  prepared <- prepare_count_data(count.data, variables, settings$max_bin)
  base <- model_build(
    prepared$tokens, prepared$fixed_effects, prepared$time_series, degrees = 0L,
    settings = settings[c("buffer_factor", "warp_precision", "max_penalty_at_distance_factor",
                          "round_none")],
    bins = if (settings$max_bin > 0) settings$max_bin else NULL
  )
  say(sprintf("Summed %d tokens into %d rows (%d contexts, %d genes, %d random levels, %d treatments) in %.1f s.",
              nrow(prepared$tokens), nrow(base$summed), length(base$contexts), length(base$species),
              sum(base$ran_levels != "none"), length(base$treatments),
              proc.time()[["elapsed"]] - started))

  grid <- NULL
  window <- settings$LROwindow_factor
  cutoff <- settings$LROcutoff
  if (settings$LRO_cost != "none") {
    t0 <- proc.time()[["elapsed"]]
    grid <- lro_grid_search(base, settings, max.fork)
    best <- which.min(grid[[settings$LRO_cost]])
    if (!length(best)) stop("every fit of the LRO grid search failed; set model.settings$LRO_cost = \"none\"",
                            call. = FALSE)
    window <- grid$LROwindow_factor[best]
    cutoff <- grid$LROcutoff[best]
    say(sprintf("Grid search over %d change-point settings (%d distinct structures, %d worker%s): best %s at window factor %.2f, cutoff %.2f (%.1f s).",
                nrow(grid), length(unique(grid$structure)), max.fork, if (max.fork > 1) "s" else "",
                settings$LRO_cost, window, cutoff, proc.time()[["elapsed"]] - t0))
  }

  t0 <- proc.time()[["elapsed"]]
  fitted <- wisp_fit_rust(base$bytes, window, cutoff, settings$LRO_method, settings$ctol,
                          settings$max_evals, settings$rise_threshold_factor, settings$rng_seed)
  result <- wisp_result(fitted, settings, plot.settings, grid, variables, call)
  diagnostics <- result$fit.diagnostics
  say(sprintf("Fitted %d parameters (%d transitions): %s after %d evaluations (%.1f s).",
              diagnostics$n.params, sum(result$degrees), diagnostics$code, diagnostics$num.evals,
              proc.time()[["elapsed"]] - t0))
  if (!diagnostics$converged) {
    warning("the fit did not converge (", diagnostics$code, "); consider raising ",
            "model.settings$max_evals.", call. = FALSE)
  }

  if (!fit_only && bootstraps.num > 0) {
    result <- wisp_bootstrap_statistics(result, bootstraps.num, max.fork, use.median,
                                        converged.resamples.only, ran.seed, verbose)
  } else if (!fit_only) {
    say("Statistics need a bootstrap: call wisp(..., bootstraps.num = 1000) or bs_batch() on this fit.")
  }
  result
}

check_flag <- function(x, name, call = sys.call(-1)) {
  if (!is.logical(x) || length(x) != 1L || is.na(x)) {
    stop_input("`", name, "` must be TRUE or FALSE, not ", describe_value(x), ".", call = call)
  }
  invisible(x)
}

# The grid search as a data.frame with the original's columns plus
# `converged`, `code` and `structure` (grid points with the same number share
# one detected structure and one fit).
lro_grid_search <- function(base, settings, workers) {
  grid <- wisp_grid_search_rust(
    base$bytes, settings$LRO_method, settings$ctol, settings$max_evals,
    settings$rise_threshold_factor, settings$rng_seed, as.integer(workers)
  )
  grid <- as.data.frame(grid, stringsAsFactors = FALSE)
  grid$NLL <- grid$neg_loglik
  grid
}

# Assembles the "wisp" object from the Rust fit.
wisp_result <- function(fitted, settings, plot.settings, grid, variables, call) {
  model <- model_from_bytes(fitted$plan, settings)
  settings$inf_warp <- model$inf_warp
  parameters <- fitted$parameters
  names(parameters) <- model$parameter_names
  pred_log <- model_predict(model, parameters)
  summed <- model$summed
  count <- ifelse(summed$observed, summed$count, NA_real_)
  count.data.summed <- data.frame(
    bin = summed$bin, count = count, pred = exp(pred_log) - 1,
    count.log = ifelse(summed$observed, summed$count_log, NA_real_), pred.log = pred_log,
    context = summed$context, species = summed$species, ran = summed$ran,
    treatment = summed$treatment, stringsAsFactors = FALSE
  )
  structure(list(
    model.component.list = c("Rt", "tslope", "tpoint"),
    count.data.summed = count.data.summed,
    LRO.grid.search.results = grid,
    fitted.parameters = parameters,
    gamma.dispersion = model$dispersion,
    param.names = model$parameter_names,
    fix = fixed_effect_description(model),
    treatment = list(names = model$treatments,
                     components = lapply(seq_along(model$treatments), function(i) {
                       vapply(model$treatment_levels, function(l) l[i], "")
                     })),
    weight.matrix = model$weights,
    grouping.variables = list(context.lvls = model$contexts, species.lvls = model$species,
                              ran.lvls = model$ran_levels),
    param.idx0 = parameter_indices(model),
    settings = settings,
    plot.settings = plot.settings,
    variables = variables,
    fit.diagnostics = fit_diagnostics(fitted$diagnostics, length(parameters)),
    degrees = model$degrees,
    change.points = as.data.frame(fitted$change_points, stringsAsFactors = FALSE),
    parameters = model$parameters,
    start = stats::setNames(fitted$start, model$parameter_names),
    plan = fitted$plan,
    call = call
  ), class = "wisp")
}

fixed_effect_description <- function(model) {
  levels <- model$fixed_levels
  list(names = names(levels), lvls = levels,
       treat.lvl = lapply(levels, function(l) l[-1]),
       ref.lvl = vapply(levels, function(l) l[1], ""))
}

# The original's 0-based index lists: beta[[component]][[context]][[species]]
# (block-major, treatment-minor) and w.factor[[point|rate|slope]] (species,
# then random level).
parameter_indices <- function(model) {
  p <- model$parameters
  index0 <- seq_len(nrow(p)) - 1L
  beta <- lapply(c(Rt = "Rt", tslope = "tslope", tpoint = "tpoint"), function(component) {
    lapply(stats::setNames(model$contexts, model$contexts), function(context) {
      lapply(stats::setNames(model$species, model$species), function(species) {
        index0[p$role != "warp" & p$component == component &
                 p$context %in% context & p$species %in% species]
      })
    })
  })
  w.factor <- lapply(c(point = "point", rate = "rate", slope = "slope"), function(kind) {
    index0[p$role == "warp" & p$component == kind]
  })
  list(beta = beta, w.factor = w.factor)
}
