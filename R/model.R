# Internal entry points to the Rust model core. wisp() builds on these; the
# tests and benchmarks use them directly.

#' Level order of a column of labels
#'
#' One rule, so that the reference level of a fixed effect (its first level),
#' the order of a time series and the order of contexts, genes and random
#' levels in tables and plots never depend on the user's locale:
#' * a factor: its levels, in order (levels without data are dropped);
#' * numbers: numeric order;
#' * text: all numbers ("7", "12", "18") in numeric order; all one shared
#'   non-numeric prefix followed by a number ("P7", "P12", "gene10",
#'   "E14.5") in the order of the number (ties in byte order); anything else
#'   in C-locale byte order ("KO" before "WT").
#' @keywords internal
#' @noRd
sorted_levels <- function(x) {
  # The levels with data, by their codes: no copy of a long column.
  if (is.factor(x)) return(levels(x)[tabulate(x, nbins = nlevels(x)) > 0L])
  x <- x[!is.na(x)]
  if (is.numeric(x)) return(as.character(sort(unique(x))))
  values <- sort(unique(as.character(x)), method = "radix")
  numbers <- level_numbers(values)
  if (is.null(numbers)) values else values[order(numbers, method = "radix")]
}

#' The levels of a time series, in time order
#'
#' A factor, numbers, or text that [sorted_levels()] orders by a number; any
#' other text has no known order and is an error that asks for a factor.
#' @keywords internal
#' @noRd
time_series_levels <- function(x, name, fail = function(...) stop_input(..., call = NULL)) {
  levels <- sorted_levels(x)
  if (is.factor(x) || is.numeric(x)) return(levels)
  numbers <- level_numbers(levels)
  if (is.null(numbers)) {
    shown <- paste0("\"", utils::head(levels, 6), "\"", collapse = ", ")
    if (length(levels) > 6) shown <- paste0(shown, ", ...")
    fail("the time series '", name, "' has levels whose order is unknown (", shown, "): they ",
         "are neither numbers nor one prefix followed by a number (like P7, P12, P18). Make it ",
         "a factor with its levels in time order: count.data$", name, " <- factor(count.data$",
         name, ", levels = c(...)), listing ", shown, " from first to last.")
  }
  same <- numbers %in% numbers[duplicated(numbers)]
  if (any(same)) {
    fail("the time series '", name, "' has levels that stand for the same time (",
         paste(levels[same], collapse = ", "), "); make them one level, or make the column a ",
         "factor with its levels in time order.")
  }
  levels
}

# The numbers that order `values` (distinct strings): all numbers, or all
# one shared non-numeric prefix followed by an unsigned number; else NULL.
level_numbers <- function(values) {
  if (!length(values)) return(NULL)
  number <- "^[+-]?([0-9]+([.][0-9]*)?|[.][0-9]+)([eE][+-]?[0-9]+)?$"
  if (all(grepl(number, values, useBytes = TRUE))) return(as.numeric(values))
  # bytes: text that is not valid in its encoding is refused later, by name
  pattern <- "^(.*[^0-9.])([0-9]+([.][0-9]+)?)$"
  if (!all(grepl(pattern, values, useBytes = TRUE))) return(NULL)
  prefix <- sub(pattern, "\\1", values, useBytes = TRUE)
  if (length(unique(prefix)) != 1L) return(NULL)
  as.numeric(sub(pattern, "\\2", values, useBytes = TRUE))
}

# The settings a model is built with, defaults from the Rust core.
default_model_settings <- function() {
  wisp_default_model_settings()[c("buffer_factor", "warp_precision",
                                  "max_penalty_at_distance_factor", "round_none")]
}

#' Build a model from token rows
#'
#' @param tokens A data.frame with columns `count`, `bin`, `context`,
#'   `species`, `ran` and the fixed-effect columns.
#' @param fixed_effects Names of the fixed-effect columns, in factor order.
#' @param time_series The fixed effect that is an ordered time series, or NULL.
#' @param degrees Number of transitions per (context, species): an integer
#'   matrix with rows named by context and columns by species, or one integer
#'   for every pair.
#' @param settings A list overriding `buffer_factor`, `warp_precision`,
#'   `max_penalty_at_distance_factor`, `round_none`.
#' @param bins Number of bins B (default: the largest bin).
#' @return An object of class `"wisp_model"`: `bytes` (the saved state of
#'   the Rust model), `parameters` (one row per parameter: `name, role,
#'   component, context, species, block, treatment, ran`), `parameter_names`,
#'   `treatments`, `fixed_levels` (levels per factor), `time_series`,
#'   `treatment_levels` (per factor, the level of each treatment), `weights`
#'   (W), `contexts`, `species`, `ran_levels` (`"none"` first when there are
#'   several real levels), `bins`, `degrees`, `summed` (the summed table),
#'   `dispersion` (species × context) and `inf_warp` (the warp bound of
#'   rates and slopes).
#' @keywords internal
#' @noRd
model_build <- function(tokens, fixed_effects = character(), time_series = NULL,
                        degrees = 0L, settings = list(), bins = NULL) {
  settings <- utils::modifyList(default_model_settings(), settings)
  contexts <- sorted_levels(tokens$context)
  species <- sorted_levels(tokens$species)
  ran_levels <- sorted_levels(tokens$ran)
  factor_levels <- lapply(fixed_effects, function(f) {
    if (identical(f, time_series)) time_series_levels(tokens[[f]], f) else sorted_levels(tokens[[f]])
  })
  names(factor_levels) <- fixed_effects
  code <- function(x, levels) match(as.character(x), levels) - 1L
  factor_codes <- unlist(lapply(fixed_effects, function(f) code(tokens[[f]], factor_levels[[f]])),
                         use.names = FALSE)
  if (is.null(bins)) bins <- max(tokens$bin)
  degrees <- degree_matrix(degrees, contexts, species)
  time_series_index <- if (is.null(time_series)) -1L else match(time_series, fixed_effects) - 1L

  bytes <- with_context(model_build_rust(
    as.double(tokens$count), as.integer(tokens$bin),
    code(tokens$context, contexts), code(tokens$species, species), code(tokens$ran, ran_levels),
    as.integer(factor_codes), contexts, species, ran_levels, as.character(fixed_effects),
    unname(factor_levels), as.integer(time_series_index), as.integer(bins),
    as.integer(t(degrees)), as.double(settings$warp_precision),
    as.double(settings$buffer_factor), as.double(settings$max_penalty_at_distance_factor),
    isTRUE(settings$round_none)
  ), "cannot build the model: ")
  model_from_bytes(bytes, settings)
}

#' The name of the reference treatment
#'
#' The Rust core calls the treatment in which every factor is at its
#' reference level "ref"; users see it named by those levels, joined with
#' ":" as the names of the other treatments join theirs ("WT", "WT:P7").
#' Without fixed effects, or should that name be taken by another treatment,
#' it stays "ref".
#' @keywords internal
#' @noRd
reference_treatment_name <- function(reference_levels, other_treatments) {
  core <- model_rules()$reference_treatment
  if (!length(reference_levels)) return(core)
  name <- paste(reference_levels, collapse = ":")
  if (name %in% other_treatments) core else name
}

# Treatment names from the Rust core (or from a fit saved when the reference
# was still called "ref") with the reference renamed to `reference`.
as_treatment_names <- function(x, reference) {
  x[x %in% model_rules()$reference_treatment] <- reference
  x
}

# `frame` with the reference treatment of its `treatment` column named as
# in `model`.
with_treatment_names <- function(frame, model) {
  if (!is.null(frame$treatment)) frame$treatment <- as_treatment_names(frame$treatment, model$treatments[1])
  frame
}

degree_matrix <- function(degrees, contexts, species) {
  if (is.matrix(degrees)) {
    degrees <- degrees[contexts, species, drop = FALSE]
  } else {
    degrees <- matrix(as.integer(degrees), length(contexts), length(species))
  }
  storage.mode(degrees) <- "integer"
  dimnames(degrees) <- list(contexts, species)
  degrees
}

#' Rebuild the R description of a model from its bytes
#'
#' `bytes` is the saved state of a model or a fit's plan. Matrices are
#' filled by the labels Rust returns with every row, not by the order of
#' its arrays.
#' @keywords internal
#' @noRd
model_from_bytes <- function(bytes, settings = default_model_settings()) {
  d <- model_describe_rust(bytes)
  curves <- d$curves
  degrees <- matrix(NA_integer_, length(d$contexts), length(d$species),
                    dimnames = list(d$contexts, d$species))
  degrees[cbind(match(curves$context, d$contexts), match(curves$species, d$species))] <-
    curves$degree
  dispersion <- matrix(NA_real_, length(d$species), length(d$contexts),
                       dimnames = list(d$species, d$contexts))
  dispersion[cbind(match(curves$species, d$species), match(curves$context, d$contexts))] <-
    curves$dispersion
  # The reference treatment is named by its levels here, not "ref".
  reference <- reference_treatment_name(vapply(d$factor_levels, `[`, "", 1L), d$treatments[-1])
  d$treatments <- as_treatment_names(d$treatments, reference)
  d$summed$treatment <- as_treatment_names(d$summed$treatment, reference)
  d$parameters$treatment <- as_treatment_names(d$parameters$treatment, reference)
  weights <- do.call(rbind, d$weights)
  dimnames(weights) <- list(d$treatments, d$treatments)
  structure(list(
    bytes = bytes,
    parameters = as.data.frame(d$parameters, stringsAsFactors = FALSE),
    parameter_names = d$parameters$name,
    treatments = d$treatments,
    fixed_levels = stats::setNames(d$factor_levels, d$factor_names),
    time_series = if (length(d$time_series)) d$time_series else NULL,
    treatment_levels = stats::setNames(d$treatment_levels, d$factor_names),
    weights = weights,
    contexts = d$contexts,
    species = d$species,
    ran_levels = d$ran_levels,
    bins = d$bins,
    degrees = degrees,
    summed = as.data.frame(d$summed, stringsAsFactors = FALSE),
    dispersion = dispersion,
    inf_warp = d$inf_warp,
    settings = settings
  ), class = "wisp_model")
}

#' Objective, its parts and gradient at a parameter vector (a test hook:
#' needs a build with WISPACK_TEST_HOOKS=true)
#'
#' The barrier penalty is anchored at `start` (model vignette §11.1).
#' @return A list with `value` (nll + penalty), `nll`, `penalty`, `gradient`
#'   and the boundary `distances`.
#' @keywords internal
#' @noRd
model_objective <- function(model, x, start = x) {
  model_objective_rust(model$bytes, as.double(x), as.double(start))
}

#' Predicted log rates for every summed row
#' @keywords internal
#' @noRd
model_predict <- function(model, x) {
  model_predict_rust(model$bytes, as.double(x))
}

#' Whether a parameter vector is feasible (model vignette §11.1; repair: §12.5)
#' @keywords internal
#' @noRd
model_is_feasible <- function(model, x) {
  model_is_feasible_rust(model$bytes, as.double(x))
}

#' Fit a model from a given start (a test hook: needs a build with
#' WISPACK_TEST_HOOKS=true)
#'
#' L-BFGS from `start`, with the barrier anchored there (model vignette §13.1).
#' @return A list with `parameters` and `diagnostics` (the columns of
#'   [bs_batch()]'s diagnostics; no process statistics).
#' @keywords internal
#' @noRd
model_fit <- function(model, start, ctol = 1e-6, max_evals = 1000L) {
  fit <- model_fit_rust(model$bytes, as.double(start), as.double(ctol), as.integer(max_evals))
  list(parameters = fit$parameters, diagnostics = new_diagnostics(fit$diagnostics))
}
