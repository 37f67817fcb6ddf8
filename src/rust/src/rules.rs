//! The model's rules that R also needs, in one place: the defaults of the
//! settings R passes in and the limits both sides check. R reads them with
//! `model_rules_rust()` (R/settings.R) instead of keeping its own copies.

//!
//! A leaf: it imports nothing of the crate. The settings' `Default`s read
//! their values from here, so a default is written once.

/// The label of the population pseudo-level of the random effect (the
/// "none" rows of the summed table); no real level may have it.
pub(crate) const POPULATION_LEVEL: &str = "none";

/// Largest accepted bin number (the summed table has a row per bin).
pub(crate) const MAX_BINS: usize = 100_000;

/// `buffer_factor` must be below this: the tpoint buffer ceil(B·factor) is
/// kept from both ends of the bin axis, so at 0.5 no transition fits.
pub(crate) const BUFFER_FACTOR_LIMIT: f64 = 0.5;

/// Default seed of the full-data fit's starting warping factors
/// (`model.settings$rng_seed`).
pub(crate) const DEFAULT_SEED: u64 = 42;

/// The likelihood `wisp()` fits unless told otherwise.
pub(crate) const DEFAULT_LIKELIHOOD: &str = "nb";

/// Whether summed "none" counts are rounded by default (`round_none`).
pub(crate) const DEFAULT_ROUND_NONE: bool = true;

/// Defaults of the settings shared by both likelihoods (`model.settings`).
pub(crate) const DEFAULT_BUFFER_FACTOR: f64 = 0.05;
pub(crate) const DEFAULT_LRO_CUTOFF: f64 = 2.0;
pub(crate) const DEFAULT_LRO_WINDOW_FACTOR: f64 = 1.25;
/// The R name of the default change-point method
/// (`changepoint::DetectionMethod::default()`, whose name a test compares).
pub(crate) const DEFAULT_LRO_METHOD: &str = "improved";

/// Defaults of the original likelihood's settings: its warp precision and
/// barrier (`original::Settings`) and its L-BFGS fit (`FitSettings`).
pub(crate) const DEFAULT_WARP_PRECISION: f64 = 1e-7;
pub(crate) const DEFAULT_MAX_PENALTY_AT_DISTANCE_FACTOR: f64 = 0.01;
pub(crate) const DEFAULT_CTOL: f64 = 1e-6;
pub(crate) const DEFAULT_MAX_EVALS: usize = 1000;

/// Default SD of the slopes' prior on the logit scale (count model): slopes
/// from 0.02 to 7 per bin lie within two SDs of its centre (1 per bin).
pub(crate) const SLOPE_PRIOR_SD: f64 = 2.0;

/// Default SD of the block-rate steps' prior: a step of 4 (a 55-fold change
/// of the rate) is two SDs out.
pub(crate) const STEP_PRIOR_SD: f64 = 2.0;

/// Default SD of the treatment effects' prior on the unconstrained scale
/// (log rate; logits of slopes and of the points' stick-breaking fractions).
pub(crate) const EFFECT_PRIOR_SD: f64 = 1.0;

/// Default and upper limit of `rise_threshold_factor`, the fraction of a
/// block's rise that sets the initial slopes; both likelihoods take (0, 1].
pub(crate) const DEFAULT_RISE_THRESHOLD_FACTOR: f64 = 0.8;
pub(crate) const RISE_THRESHOLD_FACTOR_LIMIT: f64 = 1.0;

/// Defaults of the count model's Newton fit and of its variance updates
/// (`wisp_control()`).
pub(crate) const NEWTON_MAX_ITERATIONS: usize = 200;
pub(crate) const NEWTON_GRADIENT_TOLERANCE: f64 = 1e-4;
pub(crate) const NEWTON_DECREMENT_TOLERANCE: f64 = 1e-10;
pub(crate) const MAX_VARIANCE_UPDATES: usize = 200;
pub(crate) const VARIANCE_TOLERANCE: f64 = 1e-4;

/// `rise_threshold_factor` in (0, [`RISE_THRESHOLD_FACTOR_LIMIT`]].
pub(crate) fn check_rise_threshold_factor(value: f64) -> Result<(), String> {
    if value > 0.0 && value <= RISE_THRESHOLD_FACTOR_LIMIT {
        Ok(())
    } else {
        Err(format!(
            "rise_threshold_factor must be above 0 and at most {RISE_THRESHOLD_FACTOR_LIMIT} \
             (a fraction of a block's rise), got {value}"
        ))
    }
}

/// `buffer_factor` in (0, [`BUFFER_FACTOR_LIMIT`]).
pub(crate) fn check_buffer_factor(value: f64) -> Result<(), String> {
    if value > 0.0 && value < BUFFER_FACTOR_LIMIT {
        Ok(())
    } else {
        Err(format!(
            "buffer_factor must be above 0 and below {BUFFER_FACTOR_LIMIT} (the buffer is a \
             fraction of the bins), got {value}"
        ))
    }
}

/// One default of `model.settings`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Default {
    Number(f64),
    Whole(u64),
    Flag(bool),
    Text(&'static str),
}

/// The defaults of the model settings the core uses, by their R names.
pub(crate) fn defaults() -> Vec<(&'static str, Default)> {
    vec![
        ("buffer_factor", Default::Number(DEFAULT_BUFFER_FACTOR)),
        ("ctol", Default::Number(DEFAULT_CTOL)),
        (
            "max_penalty_at_distance_factor",
            Default::Number(DEFAULT_MAX_PENALTY_AT_DISTANCE_FACTOR),
        ),
        ("LROcutoff", Default::Number(DEFAULT_LRO_CUTOFF)),
        (
            "LROwindow_factor",
            Default::Number(DEFAULT_LRO_WINDOW_FACTOR),
        ),
        (
            "rise_threshold_factor",
            Default::Number(DEFAULT_RISE_THRESHOLD_FACTOR),
        ),
        ("max_evals", Default::Whole(DEFAULT_MAX_EVALS as u64)),
        ("rng_seed", Default::Whole(DEFAULT_SEED)),
        ("warp_precision", Default::Number(DEFAULT_WARP_PRECISION)),
        ("round_none", Default::Flag(DEFAULT_ROUND_NONE)),
        ("LRO_method", Default::Text(DEFAULT_LRO_METHOD)),
        ("likelihood", Default::Text(DEFAULT_LIKELIHOOD)),
        ("exposure", Default::Text("auto")),
        ("slope_prior_sd", Default::Number(SLOPE_PRIOR_SD)),
        ("step_prior_sd", Default::Number(STEP_PRIOR_SD)),
        ("effect_prior_sd", Default::Number(EFFECT_PRIOR_SD)),
    ]
}

/// The defaults of `wisp_control()`, by their R names.
pub(crate) fn control_defaults() -> Vec<(&'static str, Default)> {
    vec![
        (
            "newton_max_iterations",
            Default::Whole(NEWTON_MAX_ITERATIONS as u64),
        ),
        (
            "newton_gradient_tolerance",
            Default::Number(NEWTON_GRADIENT_TOLERANCE),
        ),
        (
            "newton_decrement_tolerance",
            Default::Number(NEWTON_DECREMENT_TOLERANCE),
        ),
        (
            "max_variance_updates",
            Default::Whole(MAX_VARIANCE_UPDATES as u64),
        ),
        ("variance_tolerance", Default::Number(VARIANCE_TOLERANCE)),
        ("trace", Default::Flag(false)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_buffer_factor_is_checked_on_an_open_interval() {
        for good in [1e-9, 0.05, 0.499] {
            assert!(check_buffer_factor(good).is_ok(), "{good}");
        }
        for bad in [0.0, -0.1, 0.5, 0.7, f64::NAN, f64::INFINITY] {
            assert!(check_buffer_factor(bad).is_err(), "{bad}");
        }
        assert!(check_buffer_factor(DEFAULT_BUFFER_FACTOR).is_ok());
    }
}
