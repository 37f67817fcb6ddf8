# Settings lists of wisp(): defaults and validation (documented in ?wisp).

# The model's rules from the Rust core (src/rust/src/rules.rs): defaults of
# the settings it uses, limits, reserved names. Asked once per session.
model_rules <- local({
  rules <- NULL
  function() {
    if (is.null(rules)) rules <<- model_rules_rust()
    rules
  }
})

# Defaults of model.settings: the core's, plus the ones only R uses
# (structure, LRO_cost, trtKO, max_bin), in the documented order.
wisp_default_model_settings <- function() {
  core <- model_rules()$defaults
  list(
    buffer_factor = core$buffer_factor, ctol = core$ctol,
    max_penalty_at_distance_factor = core$max_penalty_at_distance_factor,
    structure = "auto", LRO_cost = "AIC", LROcutoff = core$LROcutoff, LROwindow_factor = core$LROwindow_factor,
    rise_threshold_factor = core$rise_threshold_factor,
    max_evals = as.integer(core$max_evals), rng_seed = as.integer(core$rng_seed),
    warp_precision = core$warp_precision, round_none = core$round_none, trtKO = "none",
    max_bin = 0, LRO_method = core$LRO_method,
    likelihood = core$likelihood, exposure = core$exposure,
    slope_prior_sd = core$slope_prior_sd, step_prior_sd = core$step_prior_sd,
    effect_prior_sd = core$effect_prior_sd, random_sd = NA, dispersion = NA
  )
}

wisp_default_mcmc_settings <- function() {
  list(MCMC.burnin = 0, MCMC.steps = 0, MCMC.step.size = 0.5, MCMC.prior = 1.0,
       MCMC.neighbor.filter = 1)
}

wisp_default_plot_settings <- function() {
  list(print.plots = interactive(), dim.bounds = c(), log.scale = FALSE, splitting_factor = c(),
       CI_style = TRUE, splitting_factor_colors = c(120, 240), label_size = 3,
       title_size = 20, axis_size = 12, legend_size = 10, count_size = 1.5,
       count_jitter = 0.5, count.alpha.ran = 0.25, count.alpha.none = 0.25,
       pred.alpha.ran = 0.9, pred.alpha.none = 1.0, y.lim = c())
}

# Whether a setting has its default value (1L and 1 are the same).
same_value <- function(value, default) {
  identical(value, default) || isTRUE(all.equal(value, default, check.attributes = FALSE))
}

check_settings_names <- function(settings, defaults, what, call) {
  if (!is.list(settings) || (length(settings) && is.null(names(settings)))) {
    stop_input("`", what, "` must be a named list.", call = call)
  }
  unknown <- setdiff(names(settings), names(defaults))
  if (length(unknown)) {
    stop_input("`", what, "` has unknown setting", if (length(unknown) > 1) "s", " ",
               paste0("'", unknown, "'", collapse = ", "), "; known settings are ",
               paste(names(defaults), collapse = ", "), ".", call = call)
  }
}

#' Validated model settings with defaults filled in
#' @keywords internal
#' @noRd
wisp_model_settings <- function(settings = list(), call = sys.call(-1)) {
  defaults <- wisp_default_model_settings()
  check_settings_names(settings, defaults, "model.settings", call)
  settings <- utils::modifyList(defaults, settings)
  fail <- function(...) stop_input("model.settings$", ..., call = call)
  positive <- c("buffer_factor", "ctol", "max_penalty_at_distance_factor", "LROcutoff",
                "LROwindow_factor", "rise_threshold_factor", "max_evals", "warp_precision")
  for (name in positive) {
    value <- settings[[name]]
    if (!is.numeric(value) || length(value) != 1L || is.na(value) || !is.finite(value) || value <= 0) {
      fail(name, " must be one positive number, not ", describe_value(value), ".")
    }
  }
  limits <- model_rules()$limits
  if (settings$buffer_factor >= limits$buffer_factor) {
    fail("buffer_factor must be below ", limits$buffer_factor, " (the buffer is a fraction of ",
         "the bins), not ", settings$buffer_factor, ".")
  }
  # One range for both likelihoods: the rise is a fraction of the step.
  if (settings$rise_threshold_factor > limits$rise_threshold_factor) {
    fail("rise_threshold_factor must be above 0 and at most ", limits$rise_threshold_factor,
         " (the rise is a fraction of the step between block rates), not ",
         settings$rise_threshold_factor, ".")
  }
  for (name in c("ctol", "max_penalty_at_distance_factor", "warp_precision")) {
    if (settings[[name]] > 1) {
      warning(sprintf("model.settings$%s = %g is larger than 1; is that intended?", name,
                      settings[[name]]), call. = FALSE)
    }
  }
  if (settings$max_evals != round(settings$max_evals) ||
      settings$max_evals > .Machine$integer.max) {
    fail("max_evals must be a whole number up to ", .Machine$integer.max, ".")
  }
  settings$max_evals <- as.integer(settings$max_evals)
  seed <- settings$rng_seed
  if (!is.numeric(seed) || length(seed) != 1L || is.na(seed) || !is.finite(seed) ||
      seed != round(seed) || abs(seed) > .Machine$integer.max) {
    fail("rng_seed must be one whole number between -", .Machine$integer.max, " and ",
         .Machine$integer.max, ", not ", describe_value(seed), ".")
  }
  settings$rng_seed <- as.integer(seed)
  if (!is.logical(settings$round_none) || length(settings$round_none) != 1L || is.na(settings$round_none)) {
    fail("round_none must be TRUE or FALSE.")
  }
  structure <- settings$structure
  if (!is.character(structure) || length(structure) != 1L ||
      !structure %in% c("auto", "lro", "likelihood")) {
    fail("structure must be \"auto\", \"lro\" or \"likelihood\", not ", describe_value(structure),
         ".")
  }
  cost <- settings$LRO_cost
  if (!is.character(cost) || length(cost) != 1L || !cost %in% c("AIC", "BIC", "NLL", "none")) {
    fail("LRO_cost must be \"AIC\", \"BIC\", \"NLL\" or \"none\", not ", describe_value(cost), ".")
  }
  method <- settings$LRO_method
  if (!is.character(method) || length(method) != 1L || !method %in% c("improved", "original")) {
    fail("LRO_method must be \"improved\" or \"original\", not ", describe_value(method), ".")
  }
  likelihood <- settings$likelihood
  if (!is.character(likelihood) || length(likelihood) != 1L || !likelihood %in% c("nb", "original")) {
    fail("likelihood must be \"nb\" (the count likelihood) or \"original\" (the original ",
         "package's objective), not ", describe_value(likelihood), ".")
  }
  held <- settings$trtKO
  if (!is.character(held) || length(held) == 0L || anyNA(held) || any(!nzchar(held))) {
    fail("trtKO must be \"none\" or the names of effects or factors to hold at 0, not ",
         describe_value(held), ".")
  }
  if (!identical(held, "none") && likelihood != "nb") {
    fail("trtKO (effects held at 0) needs the count likelihood (likelihood = \"nb\"); the ",
         "original's trtKO dropped the treatments' rows, which this package does not do: ",
         "remove them from count.data instead.")
  }
  exposure <- settings$exposure
  if (!is.character(exposure) || length(exposure) != 1L ||
      !exposure %in% c("auto", "cells", "tokens", "given", "none")) {
    fail("exposure must be \"auto\", \"cells\", \"tokens\", \"given\" or \"none\", not ",
         describe_value(exposure), ".")
  }
  defaults <- wisp_default_model_settings()
  priors <- c("slope_prior_sd", "step_prior_sd", "effect_prior_sd")
  for (name in priors) {
    prior <- settings[[name]]
    if (!is.numeric(prior) || length(prior) != 1L || is.na(prior) || !is.finite(prior) ||
        prior < 0) {
      fail(name, " must be one number >= 0 (0: no prior), not ", describe_value(prior), ".")
    }
  }
  sd <- settings$random_sd
  if (!(length(sd) == 1L && is.na(sd))) {
    ok <- is.numeric(sd) && length(sd) %in% c(1L, 3L) && !anyNA(sd) && all(is.finite(sd)) &&
      all(sd >= 0)
    if (!ok) {
      fail("random_sd must be NA (estimate the random effects' standard deviations) or one or ",
           "three numbers >= 0 (point, rate, slope), not ", describe_value(sd), ".")
    }
    settings$random_sd <- rep_len(as.double(sd), 3L)
  }
  dispersion <- settings$dispersion
  if (!(length(dispersion) == 1L && is.na(dispersion))) {
    if (!is.numeric(dispersion) || length(dispersion) != 1L || !is.finite(dispersion) ||
        dispersion < 0 || dispersion > 990) {
      fail("dispersion must be NA (estimate the dispersions) or one number from 0 (Poisson) ",
           "to 990, not ", describe_value(dispersion), ".")
    }
    settings$dispersion <- as.double(dispersion)
  }
  if (likelihood == "original" && structure == "likelihood") {
    fail("structure = \"likelihood\" applies to likelihood = \"nb\" only; the original ",
         "likelihood detects change points (structure = \"lro\").")
  }
  if (likelihood == "original") {
    changed <- c("exposure", priors, "random_sd", "dispersion")[c(
      exposure != "auto",
      vapply(priors, function(name) !same_value(settings[[name]], defaults[[name]]), TRUE),
      !(length(sd) == 1L && is.na(sd)), !(length(dispersion) == 1L && is.na(dispersion)))]
    if (length(changed)) {
      fail(paste(changed, collapse = ", "), " apply to likelihood = \"nb\" only.")
    }
  }
  max_bin <- settings$max_bin
  if (!is.numeric(max_bin) || length(max_bin) != 1L || is.na(max_bin) || max_bin < 0 ||
      max_bin != round(max_bin) || max_bin > limits$max_bins) {
    fail("max_bin must be 0 (use the largest bin) or a positive whole number up to ",
         format(limits$max_bins, big.mark = ","), ".")
  }
  settings
}

#' Validated MCMC settings: MCMC is not offered; the bootstrap is the route.
#' Only the defaults are accepted (steps and burn-in 0).
#' @keywords internal
#' @noRd
wisp_mcmc_settings <- function(settings = list(), call = sys.call(-1)) {
  defaults <- wisp_default_mcmc_settings()
  check_settings_names(settings, defaults, "MCMC.settings", call)
  settings <- utils::modifyList(defaults, settings)
  for (name in names(settings)) {
    value <- settings[[name]]
    if (!is.numeric(value) || length(value) != 1L || is.na(value) || value < 0) {
      stop_input("MCMC.settings$", name, " must be one number >= 0.", call = call)
    }
  }
  if (settings$MCMC.steps > 0 || settings$MCMC.burnin > 0) {
    stop_input("MCMC is not offered by this wispack: its chains mix poorly (the original's ",
               "documentation advises against them). Use the bootstrap instead: ",
               "wisp(..., bootstraps.num = 1000).", call = call)
  }
  # Without MCMC the other settings have no effect: only their defaults are accepted.
  changed <- Filter(function(name) !same_value(settings[[name]], defaults[[name]]),
                    setdiff(names(defaults), c("MCMC.steps", "MCMC.burnin")))
  if (length(changed)) {
    stop_input("MCMC.settings$", changed[1], " has no effect: MCMC is not offered by this ",
               "wispack; leave it out and use the bootstrap: wisp(..., bootstraps.num = 1000).",
               call = call)
  }
  settings
}

#' Validated plot settings with defaults filled in
#'
#' Also validates the arguments of plot.wisp() that override them
#' (`what = "argument"`: messages name the argument, not the setting).
#' @keywords internal
#' @noRd
wisp_plot_settings <- function(settings = list(), call = sys.call(-1), what = "plot.settings") {
  defaults <- wisp_default_plot_settings()
  check_settings_names(settings, defaults, "plot.settings", call)
  label <- function(name) if (what == "argument") paste0("`", name, "`") else
    paste0("plot.settings$", name)
  fail <- function(name, ...) stop_input(label(name), ..., call = call)
  for (name in intersect(names(settings), names(plot_setting_ranges))) {
    range <- plot_setting_ranges[[name]]
    value <- settings[[name]]
    if (!is.numeric(value) || length(value) != 1L || is.na(value) || value < range[1] ||
        value > range[2]) {
      fail(name, " must be one number between ", range[1], " and ", range[2], ", not ",
           describe_value(value), ".")
    }
  }
  for (name in intersect(names(settings), c("log.scale", "CI_style", "print.plots"))) {
    check_flag(settings[[name]], label(name), call = call)
  }
  bounds <- settings[["dim.bounds"]]
  if (length(bounds) && (!is.numeric(bounds) || anyNA(bounds) || !all(is.finite(bounds)))) {
    fail("dim.bounds", " must be numbers (bins; named to label them), not ",
         describe_value(bounds), ".")
  }
  limits <- settings[["y.lim"]]
  if (length(limits) && (!is.numeric(limits) || length(limits) != 2L || anyNA(limits) ||
                         !all(is.finite(limits)) || limits[1] >= limits[2])) {
    fail("y.lim", " must be two numbers, low < high, not ", describe_value(limits), ".")
  }
  split <- settings[["splitting_factor"]] # not $: it would match splitting_factor_colors
  if (length(split) && (!is.character(split) || length(split) != 1L || is.na(split))) {
    fail("splitting_factor", " must be the name of one fixed effect, not ",
         describe_value(split), ".")
  }
  hues <- settings[["splitting_factor_colors"]]
  if ("splitting_factor_colors" %in% names(settings) &&
      (!is.numeric(hues) || !length(hues) || anyNA(hues) || any(hues < 0 | hues > 360))) {
    fail("splitting_factor_colors", " must be HCL hues, numbers between 0 and 360, not ",
         describe_value(hues), ".")
  }
  # An empty value (c(), NULL) keeps its place in the list.
  result <- defaults
  for (name in names(settings)) result[name] <- list(settings[[name]])
  result
}

# The numeric plot settings with their valid ranges.
plot_setting_ranges <- list(
  title_size = c(1, 100), axis_size = c(1, 100), legend_size = c(1, 100),
  label_size = c(0.5, 30), count_size = c(0, 20), count_jitter = c(0, 10),
  count.alpha.ran = c(0, 1), count.alpha.none = c(0, 1), pred.alpha.ran = c(0, 1),
  pred.alpha.none = c(0, 1)
)
