# The original likelihood (likelihood = "original"): its fit with progress
# messages, the grid search over change-point settings and its "wisp" object.

# The original likelihood's fit (likelihood = "original").
wisp_original <- function(prepared, settings, plot.settings, variables, call, max.fork, say,
                          started, degrees = NULL, progress = NULL) {
  base <- model_build(
    prepared$tokens, prepared$fixed_effects, prepared$time_series, degrees = 0L,
    settings = settings[c("buffer_factor", "warp_precision", "max_penalty_at_distance_factor",
                          "round_none")],
    bins = if (settings$max_bin > 0) settings$max_bin else NULL
  )
  say(sprintf("Summed %s into %s (%s, %s, %s, %s) in %.1f s.",
              count_noun(nrow(prepared$tokens), "cell x gene row"), count_noun(nrow(base$summed), "row"),
              count_noun(length(base$contexts), "context"), count_noun(length(base$species), "gene"),
              animal_count_text(sum(base$ran_levels != "none"), variables),
              count_noun(length(base$treatments), "treatment"), proc.time()[["elapsed"]] - started))

  grid <- NULL
  window <- settings$LROwindow_factor
  cutoff <- settings$LROcutoff
  fixed <- degree_vector(degrees, base$contexts, base$species)
  if (anyNA(fixed)) {
    stop_input("under likelihood = \"original\", `degrees` fixes every curve or none ",
               "(NA entries, or genes left out of a list, need likelihood = \"nb\").", call = call)
  }
  if (!is.null(fixed)) fixed <- as.integer(fixed)
  if (settings$LRO_cost != "none" && is.null(fixed)) {
    t0 <- proc.time()[["elapsed"]]
    searched <- lro_grid_search(base, settings, max.fork, progress)
    grid <- searched$grid
    # The core chooses the point of least cost, as it does under "nb".
    best <- searched$best
    window <- grid$LROwindow_factor[best]
    cutoff <- grid$LROcutoff[best]
    say(sprintf("Grid search over %s (%s, %s): best %s at window factor %.2f, cutoff %.2f (%.1f s).",
                count_noun(nrow(grid), "change-point setting"),
                count_noun(length(unique(grid$structure)), "distinct structure"),
                count_noun(max.fork, "worker"),
                settings$LRO_cost, window, cutoff, proc.time()[["elapsed"]] - t0))
  }

  # The original's objective couples every gene: one fit, one step.
  say("Fit: all genes at once (the original's objective).")
  if (!is.null(progress)) progress("joint", 0L, 1L)
  fitted <- wisp_fit_rust(base$bytes, window, cutoff, settings$LRO_method, settings$ctol,
                          settings$max_evals, settings$rise_threshold_factor, settings$rng_seed,
                          if (is.null(fixed)) integer() else fixed)
  if (!is.null(progress)) progress("joint", 1L, 1L)
  result <- wisp_result(fitted, settings, plot.settings, grid, variables, call)
  diagnostics <- result$fit.diagnostics
  say(sprintf("Fitted %s (%s): %s.",
              count_noun(diagnostics$n.params, "parameter"), count_noun(sum(result$degrees), "transition"),
              fit_course_text(diagnostics, "original")))
  if (!diagnostics$converged) {
    warning("the fit did not converge (", diagnostics$code, "); consider raising ",
            "model.settings$max_evals.", call. = FALSE)
  }
  result$likelihood <- "original"
  result
}

# The grid search: `grid`, a data.frame with the original's columns plus
# `converged`, `code` and `structure` (grid points with the same number share
# one detected structure and one fit), and `best`, the row the core chose.
lro_grid_search <- function(base, settings, workers, progress = NULL) {
  searched <- continue_jump(wisp_grid_search_rust(
    base$bytes, settings$LRO_cost, settings$LRO_method, settings$ctol, settings$max_evals,
    settings$rise_threshold_factor, settings$rng_seed, as.integer(workers), progress
  ))
  grid <- as.data.frame(searched$points, stringsAsFactors = FALSE)
  grid$NLL <- grid$neg_loglik
  list(grid = grid, best = searched$best)
}

# Assembles the "wisp" object from the Rust fit (class c("wisp_original", "wisp")).
wisp_result <- function(fitted, settings, plot.settings, grid, variables, call) {
  model <- model_from_bytes(fitted$plan, settings)
  settings$inf_warp <- model$inf_warp
  parameters <- fitted$parameters
  names(parameters) <- model$parameter_names
  pred_log <- model_predict(model, parameters)
  summed <- model$summed
  count <- ifelse(summed$observed, summed$count, NA_real_)
  count.data.summed <- data.frame(
    bin = summed$bin, count = count, pred = rate_at(pred_log, "original"),
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
    treatment = treatment_description(model),
    weight.matrix = model$weights,
    grouping.variables = list(context.lvls = model$contexts, species.lvls = model$species,
                              ran.lvls = model$ran_levels),
    param.idx0 = parameter_indices(model),
    settings = settings,
    plot.settings = plot.settings,
    variables = variables,
    fit.diagnostics = fit_diagnostics(fitted$diagnostics, length(parameters)),
    degrees = model$degrees,
    change.points = with_treatment_names(as.data.frame(fitted$change_points,
                                                       stringsAsFactors = FALSE), model),
    parameters = model$parameters,
    start = stats::setNames(fitted$start, model$parameter_names),
    plan = fitted$plan,
    call = call
  ), class = c("wisp_original", "wisp"))
}
