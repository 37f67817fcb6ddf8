# The count likelihood (likelihood = "nb", the default): the fit from the
# prepared tokens and its "wisp" object. The model is described in the model
# vignette, §9.2 (the count likelihood) to §13.2 (its fit).

# Levels and 0-based codes of the token columns, as the Rust core takes them.
coded_tokens <- function(tokens, fixed_effects) {
  contexts <- sorted_levels(tokens$context)
  species <- sorted_levels(tokens$species)
  ran_levels <- sorted_levels(tokens$ran)
  factor_levels <- lapply(fixed_effects, function(f) sorted_levels(tokens[[f]]))
  names(factor_levels) <- fixed_effects
  code <- function(x, levels) match(as.character(x), levels) - 1L
  list(
    contexts = contexts, species = species, ran_levels = ran_levels,
    factor_levels = factor_levels,
    context = code(tokens$context, contexts), species_code = code(tokens$species, species),
    ran = code(tokens$ran, ran_levels),
    factor_codes = unlist(lapply(fixed_effects, function(f) code(tokens[[f]], factor_levels[[f]])),
                          use.names = FALSE)
  )
}

# Degrees fixed by the user, as the core takes them: one double per curve,
# context-major, NA where the structure step chooses; NULL when nothing is
# fixed. `degrees` is NULL, one number for every curve, a context x gene
# matrix (dimnames by label, or in level order; NA entries are chosen), or a
# list named by context whose elements are one number (every gene of the
# context) or a vector named by gene (genes left out are chosen).
degree_vector <- function(degrees, contexts, species, call = sys.call(-1)) {
  if (is.null(degrees)) return(NULL)
  fail <- function(why = "") {
    stop_input("`degrees` must be NULL (choose the transitions), one whole number for every ",
               "curve, a context x gene matrix (", length(contexts), " x ", length(species),
               ", NA where they are chosen), or a list named by context of numbers named by ",
               "gene; numbers are whole, between 0 and 20", why, ".", call = call)
  }
  whole <- function(x) {
    is.numeric(x) && all(is.na(x) | (is.finite(x) & x >= 0 & x <= 20 & x == round(x)))
  }
  if (is.list(degrees) && !is.data.frame(degrees)) {
    if (!length(degrees)) return(NULL)
    if (is.null(names(degrees)) || anyNA(names(degrees)) || any(names(degrees) == "") ||
        anyDuplicated(names(degrees))) fail(" (the list needs unique context names)")
    unknown <- setdiff(names(degrees), contexts)
    if (length(unknown)) fail(paste0(" (no context ", paste(unknown, collapse = ", "), ")"))
    out <- matrix(NA_real_, length(contexts), length(species), dimnames = list(contexts, species))
    for (context in names(degrees)) {
      d <- degrees[[context]]
      if (!whole(d) || !length(d)) fail(paste0(" (context ", context, ")"))
      if (is.null(names(d))) {
        if (length(d) != 1L) fail(paste0(" (context ", context, ": name the genes)"))
        out[context, ] <- d
      } else {
        unknown <- setdiff(names(d), species)
        if (length(unknown) || anyDuplicated(names(d))) {
          fail(paste0(" (context ", context, ": unknown or repeated gene ",
                      paste(c(unknown, names(d)[duplicated(names(d))]), collapse = ", "), ")"))
        }
        out[context, names(d)] <- d
      }
    }
    degrees <- out
  }
  if (!whole(degrees) || (is.matrix(degrees) && !is.numeric(degrees))) fail()
  if (length(degrees) == 1L && !is.matrix(degrees)) {
    if (is.na(degrees)) return(NULL)
    return(rep(as.double(degrees), length(contexts) * length(species)))
  }
  if (!is.matrix(degrees) || !identical(dim(degrees), c(length(contexts), length(species)))) fail()
  if (!is.null(rownames(degrees)) && !is.null(colnames(degrees))) {
    if (!setequal(rownames(degrees), contexts) || !setequal(colnames(degrees), species)) fail()
    degrees <- degrees[contexts, species, drop = FALSE]
  }
  if (all(is.na(degrees))) return(NULL)
  as.double(t(degrees)) # context-major
}

# What to do when a count fit needs more memory than the process can get.
fit_memory_advice <- paste0(
  "fit fewer genes at once (subsets of `count.data`), give a binned table (wisp_bin()), whose ",
  "rows are far fewer than one token per cell and gene, or fit the genes on a cluster ",
  "(backend = \"future\" with a future.batchtools plan)")

# Fits the count model. Returns what wisp_count_result() assembles.
# `progress` is NULL or function(stage, done, total), called as each fit of
# the grid search ("grid") and each gene ("fit") ends (see stage_progress()).
# `control` holds the Newton fit's limits (wisp_control_settings(); absent
# entries keep the core's defaults). `apart` (NULL, or a list of `backend`,
# `checkpoint`, `chunk.size`, `resources`) fits every gene on its own first,
# resumably or on futures (fit_genes_apart()).
count_fit <- function(prepared, settings, workers, degrees = NULL, bins = NULL,
                      progress = NULL, control = list(), apart = NULL, call = sys.call(-1)) {
  codes <- coded_tokens(prepared$tokens, prepared$fixed_effects)
  time_series_index <- if (is.null(prepared$time_series)) -1L else
    match(prepared$time_series, prepared$fixed_effects) - 1L
  if (is.null(bins)) bins <- max(prepared$tokens$bin)
  core <- list(
    exposure = settings$exposure,
    degrees = degree_vector(degrees, codes$contexts, codes$species),
    structure = settings$structure,
    lro_cost = if (is.null(degrees)) settings$LRO_cost else "none",
    window = settings$LROwindow_factor, cutoff = settings$LROcutoff,
    method = settings$LRO_method, buffer_factor = settings$buffer_factor,
    rise_threshold_factor = settings$rise_threshold_factor,
    slope_prior_sd = settings$slope_prior_sd, step_prior_sd = settings$step_prior_sd,
    effect_prior_sd = settings$effect_prior_sd,
    fixed_sd = if (length(settings$random_sd) == 3L) settings$random_sd else NULL,
    held_effects = if (identical(settings$trtKO, "none")) NULL else as.character(settings$trtKO),
    fixed_dispersion = if (dispersion_fixed(settings)) settings$dispersion else NULL,
    workers = as.double(workers)
  )
  core[names(control)] <- control
  rows <- as.double(length(codes$contexts)) * length(codes$species) * length(codes$ran_levels) *
    prod(lengths(codes$factor_levels)) * bins
  forecast <- count_memory_rust(as.double(nrow(prepared$tokens)),
                                as.double(length(prepared$fixed_effects)), rows)
  if (!is.null(apart)) {
    # The genes' task besides: each row's count and exposure, encoded, in R's
    # copy, and in the chunks cut from it.
    bytes <- forecast$bytes + 48 * rows
    forecast <- list(bytes = bytes, available = memory_available_rust(bytes))
  }
  check_memory(forecast, "the count fit", fit_memory_advice)
  data <- list(
    as.double(prepared$tokens$count), as.integer(prepared$tokens$bin),
    codes$context, codes$species_code, codes$ran, as.integer(codes$factor_codes),
    if (is.null(prepared$cells)) integer() else as.integer(prepared$cells),
    if (is.null(prepared$exposure)) double() else prepared$exposure,
    codes$contexts, codes$species, codes$ran_levels, as.character(prepared$fixed_effects),
    unname(codes$factor_levels), as.integer(time_series_index), as.integer(bins)
  )
  apart_seconds <- NULL
  if (!is.null(apart)) {
    started <- proc.time()[["elapsed"]]
    core$species_works <- fit_genes_apart(data, core, apart, workers, progress, call)
    apart_seconds <- proc.time()[["elapsed"]] - started
  }
  fitted <- with_context(continue_jump(do.call(count_fit_rust, c(data, list(core, progress)))),
                         "cannot fit the model: ")
  if (!is.null(apart_seconds)) {
    # The genes' structure steps and fits took place apart, before this
    # call put them together: their time is the stage's.
    fitted$structure_seconds <- apart_seconds
    for (column in c("fit.seconds", "seconds")) {
      fitted$diagnostics[[column]] <- fitted$diagnostics[[column]] + apart_seconds
    }
  }
  if (!is.null(fitted$grid)) {
    fitted$grid <- as.data.frame(fitted$grid, stringsAsFactors = FALSE)
    fitted$grid$NLL <- fitted$grid$neg_loglik
  }
  if (!is.null(fitted$selection)) fitted$selection <- selection_table(fitted$selection)
  fitted
}

# A BIC margin below this makes a curve's choice of transitions close: the
# runner-up is nearly as good (BIC differences under 2 are "not worth more
# than a bare mention", Kass & Raftery 1995).
close_margin <- 2

# The chosen rows of the curves whose choice was close (see close_margin);
# curves fixed by `degrees =` have no choice.
close_structure_choices <- function(selection) {
  chosen <- selection[selection$chosen & !selection$fixed, , drop = FALSE]
  chosen[chosen$margin < close_margin, , drop = FALSE]
}

# The structure selection's candidates (model vignette §12.6) as a
# data.frame, one row per (curve, candidate degree) fitted: `context`,
# `species`, `degree`, `BIC`, `delta.BIC` (the candidate's BIC minus the
# curve's best), `neg.loglik`, `n.params`, `n.obs`, `converged`, `chosen`,
# `margin` (the curve's runner-up's BIC minus the winner's: how clear the
# choice was; Inf without a runner-up), `fixed` (the degree was set by
# `degrees =`, so it is the only candidate) and `failure` (why a fit
# failed, else "").
selection_table <- function(columns) {
  table <- as.data.frame(columns, stringsAsFactors = FALSE)
  best <- stats::ave(table$BIC, table$context, table$species, FUN = function(v) min(v))
  data.frame(context = table$context, species = table$species, degree = table$degree,
             BIC = table$BIC, delta.BIC = table$BIC - best, neg.loglik = table$neg_loglik,
             n.params = table$n_params, n.obs = table$n_obs, converged = table$converged,
             chosen = table$chosen, margin = table$margin, fixed = table$fixed,
             failure = table$failure,
             stringsAsFactors = FALSE)
}

# The R description of a count fit's plan (labels of every parameter; the
# summed table's rows come from count_summed_table()), in the fields the
# original's description has where they mean the same.
count_description <- function(plan) {
  d <- count_describe_rust(plan)
  n_treatments <- length(d$treatments)
  curves <- as.data.frame(d$curves, stringsAsFactors = FALSE)
  # The reference treatment is named by its levels here, not "ref".
  reference <- reference_treatment_name(vapply(d$factor_levels, `[`, "", 1L), d$treatments[-1])
  d$treatments <- as_treatment_names(d$treatments, reference)
  d$parameters$treatment <- as_treatment_names(d$parameters$treatment, reference)
  structure(list(
    likelihood = "nb",
    parameters = as.data.frame(d$parameters, stringsAsFactors = FALSE),
    parameter_names = d$parameters$name,
    treatments = d$treatments,
    fixed_levels = stats::setNames(d$factor_levels, d$factor_names),
    time_series = if (length(d$time_series)) d$time_series else NULL,
    treatment_levels = stats::setNames(d$treatment_levels, d$factor_names),
    weights = matrix(unlist(d$weights), n_treatments, n_treatments, byrow = TRUE,
                     dimnames = list(d$treatments, d$treatments)),
    contexts = d$contexts, species = d$species,
    ran_levels = d$ran_levels,
    bins = d$bins,
    # Curves come context-major (every gene of a context, then the next context).
    degrees = matrix(curves$degree, length(d$contexts), length(d$species), byrow = TRUE,
                     dimnames = list(d$contexts, d$species)),
    dispersion = matrix(curves$dispersion, length(d$species), length(d$contexts),
                        dimnames = list(d$species, d$contexts)),
    random.sd = matrix(c(d$sd$point, d$sd$rate, d$sd$slope), length(d$species), 3L,
                       dimnames = list(d$species, c("point", "rate", "slope"))),
    exposure = d$exposure,
    between = stats::setNames(d$between, d$factor_names),
    groups = stats::setNames(d$groups, d$ran_levels),
    held_effects = as.character(d$held_effects),
    species_fits = d$species_fits
  ), class = "wisp_count_model")
}

# The summed table of a count fit at `parameters`: observed rows (one per
# measured animal x context x gene x treatment x bin), then the population
# rows (ran "none", the fixed-effect curves). The core writes each column
# once into an R vector (a panel has millions of rows); the labels come as
# codes into their levels. `treatments` are the treatment names in the
# core's order, as the fit reports them.
count_summed_table <- function(plan, parameters, treatments) {
  t <- count_summed_table_rust(plan, as.double(parameters))
  columns <- list(
    bin = t$bin, count = t$count, exposure = t$exposure, pred = t$pred,
    count.log = t$count_log, pred.log = t$pred_log,
    context = t$context_levels[t$context], species = t$species_levels[t$species],
    ran = c(model_rules()$population_level, t$ran_levels)[t$ran],
    treatment = treatments[t$treatment]
  )
  structure(columns, class = "data.frame", row.names = .set_row_names(length(t$bin)))
}

# Which parameters are effects a reduced model holds at 0 (model.settings$trtKO).
held_rows <- function(parameters) {
  if (is.null(parameters$held)) rep(FALSE, nrow(parameters)) else parameters$held %in% TRUE
}

# Whether model.settings fix the dispersions (`dispersion` a number; NA or
# absent, as in fits saved before the setting existed: estimated).
dispersion_fixed <- function(settings) {
  !is.null(settings$dispersion) && !is.na(settings$dispersion)
}

# Degrees of freedom of a count fit for logLik(), AIC and likelihood-ratio
# tests: the fixed effects the data inform, the estimated random-effect
# standard deviations and the estimated dispersions.
count_degrees_of_freedom <- function(parameters, estimates, random_sd_fixed,
                                     dispersion_fixed = FALSE) {
  role <- parameters$role
  fixed <- role %in% c("baseline", "beta") & is.finite(estimates) & !held_rows(parameters)
  sds <- role %in% "sd" & !random_sd_fixed
  dispersions <- role %in% "dispersion" & is.finite(estimates) & !dispersion_fixed
  sum(fixed) + sum(sds) + sum(dispersions)
}

# Assembles the "wisp" object of a count fit (class c("wisp_nb", "wisp")).
wisp_count_result <- function(fitted, settings, plot.settings, variables, call) {
  model <- count_description(fitted$plan)
  held <- as.character(model$held_effects)
  model$parameters$held <- model$parameters$role %in% "beta" &
    model$parameters$treatment %in% held
  parameters <- stats::setNames(fitted$parameters, model$parameter_names)
  fixed_sd <- length(settings$random_sd) == 3L
  diagnostics <- fit_diagnostics(fitted$diagnostics, length(parameters))
  diagnostics$df <- count_degrees_of_freedom(model$parameters, parameters, fixed_sd,
                                             dispersion_fixed(settings))
  fit <- structure(list(
    model.component.list = c("Rt", "tslope", "tpoint"),
    count.data.summed = count_summed_table(fitted$plan, parameters, model$treatments),
    LRO.grid.search.results = fitted$grid,
    structure.selection = fitted$selection,
    structure.seconds = fitted$structure_seconds,
    fitted.parameters = parameters,
    gamma.dispersion = model$dispersion,
    param.names = model$parameter_names,
    fix = fixed_effect_description(model),
    treatment = treatment_description(model),
    weight.matrix = model$weights,
    grouping.variables = list(context.lvls = model$contexts, species.lvls = model$species,
                              ran.lvls = c("none", model$ran_levels)),
    param.idx0 = parameter_indices(model),
    settings = settings,
    plot.settings = plot.settings,
    variables = variables,
    fit.diagnostics = diagnostics,
    degrees = model$degrees,
    change.points = with_treatment_names(as.data.frame(fitted$change_points,
                                                       stringsAsFactors = FALSE), model),
    parameters = model$parameters,
    likelihood = "nb",
    exposure = list(rule = fitted$exposure, reason = fitted$exposure_reason),
    random.sd = model$random.sd,
    gene.qc = gene_qc_table(model),
    held.effects = held,
    design = list(between = model$between, groups = model$groups),
    plan = fitted$plan,
    call = call
  ), class = c("wisp_nb", "wisp"))
  # wisp_control(trace = TRUE): every Newton iteration of every gene's fit.
  if (!is.null(fitted$trace)) {
    fit$newton.trace <- as.data.frame(fitted$trace, stringsAsFactors = FALSE)
  }
  fit
}


# One row per gene: how its own fit went (a panel's quality control):
# `gene`, `converged`, `iterations` (Newton), `gradient` (the largest scaled
# gradient at the end), `on.bound` (estimates on a bound), `dispersion` (the
# smallest and largest over the contexts), `transitions` (per context, in
# context order), `note` (why the fit stopped, when it did not converge, in
# the words of `fit.diagnostics$code`: "iteration limit: 200 Newton
# iterations", "failed: ..."). `fitted` is FALSE for a gene whose fit failed
# (an error, or its worker's crash): kept without estimates, the other genes
# fitted; a gene whose Newton fit stopped with "failed: ..." keeps its
# estimates. Fits made before the column marked only the former "failed: ".
gene_fitted <- function(qc) {
  if (!is.null(qc$fitted)) return(qc$fitted)
  !startsWith(qc$note, model_rules()$termination$failed)
}

gene_qc_table <- function(model) {
  fits <- model$species_fits
  if (is.null(fits)) return(NULL)
  span <- function(v) paste(unique(formatC(range(v), digits = 2, format = "g")), collapse = "-")
  genes <- fits$species
  note <- fits$stop
  silent <- fits$observed_rows > 0 & fits$observed_count == 0 & !nzchar(note)
  note[silent] <- "no counts: every count of the gene is 0"
  failed <- !fits$fitted
  data.frame(gene = genes, converged = fits$converged, fitted = fits$fitted,
             iterations = as.integer(fits$iterations),
             gradient = fits$scaled_gradient, on.bound = as.integer(fits$on_bound),
             dispersion = ifelse(failed, NA_character_,
                                 vapply(genes, function(g) span(model$dispersion[g, ]), "")),
             transitions = vapply(genes, function(g) paste(model$degrees[, g], collapse = ","), ""),
             molecules = ifelse(fits$observed_rows > 0, fits$observed_count / fits$observed_rows,
                                NA_real_),
             note = note, stringsAsFactors = FALSE, row.names = NULL)
}

# The count likelihood's fit, with progress messages.
wisp_count <- function(prepared, settings, plot.settings, variables, call, workers, say,
                       degrees, progress = NULL, control = list(), apart = NULL) {
  bins <- if (settings$max_bin > 0) settings$max_bin else NULL
  fitted <- count_fit(prepared, settings, workers, degrees, bins, progress, control, apart,
                      call)
  result <- wisp_count_result(fitted, settings, plot.settings, variables, call)
  groups <- result$grouping.variables
  say(sprintf("Data: %s, %s, %s, %s, %s.",
              if (is.null(prepared$exposure)) count_noun(nrow(prepared$tokens), "cell x gene row") else
                count_noun(nrow(prepared$tokens), "binned row"),
              count_noun(length(groups$context.lvls), "context"),
              count_noun(length(groups$species.lvls), "gene"),
              animal_count_text(sum(groups$ran.lvls != "none"), variables),
              count_noun(length(result$treatment$names), "treatment")))
  say(sprintf("Exposure: %s (%s).", result$exposure$rule, result$exposure$reason))
  if (!is.null(fitted$grid)) {
    say(sprintf("Grid search over %s (%s): best %s at window factor %.2f, cutoff %.2f (%.1f s).",
                count_noun(nrow(fitted$grid), "change-point setting"),
                count_noun(length(unique(fitted$grid$structure)), "distinct structure"),
                settings$LRO_cost, fitted$window, fitted$cutoff, fitted$structure_seconds))
  }
  if (!is.null(fitted$selection)) {
    close <- close_structure_choices(fitted$selection)
    say(sprintf("Transitions chosen by BIC curve by curve: %s compared for %s (%.1f s)%s.",
                count_noun(nrow(fitted$selection), "candidate"),
                count_noun(sum(fitted$selection$chosen), "curve"), fitted$structure_seconds,
                if (nrow(close)) sprintf("; %s close (see summary())", count_noun(nrow(close), "choice")) else ""))
  }
  diagnostics <- result$fit.diagnostics
  say(sprintf("Fitted %s (%s, %s): %s.",
              count_noun(length(groups$species.lvls), "gene"),
              count_noun(sum(result$degrees), "transition"),
              count_noun(diagnostics$n.params, "parameter"),
              fit_course_text(diagnostics, "nb")))
  qc <- result$gene.qc
  failed <- if (is.null(qc)) logical() else !gene_fitted(qc)
  if (any(failed)) {
    warning(sprintf(paste0(
      "the fit of %s failed and %s kept without estimates (the reasons are in fit$gene.qc); ",
      "the other genes were fitted: %s."), count_noun(sum(failed), "gene"),
      if (sum(failed) > 1) "they are" else "it is",
      paste(sprintf("%s (%s)", qc$gene[failed],
                    sub(model_rules()$termination$failed, "", qc$note[failed],
                        fixed = TRUE))[seq_len(min(5, sum(failed)))],
            collapse = "; ")), call. = FALSE)
  }
  if (!diagnostics$converged && (is.null(qc) || any(!qc$converged & !failed))) {
    warning("the fit did not converge (", diagnostics$code, ").", call. = FALSE)
  }
  if (diagnostics$on.bound > 0) say(on_bound_text(result))
  result
}
