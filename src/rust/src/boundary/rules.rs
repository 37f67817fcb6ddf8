//! The rules R asks the core for instead of keeping copies: the settings'
//! defaults and limits, and the rate at curve values under each likelihood.

use super::RResult;
use crate::design;
use crate::error::Error;
use crate::outcome::Termination;
use crate::rules;
use extendr_api::prelude::*;

/// The model's rules: defaults of the model settings, limits, reserved
/// names, and the words of how a fit ends.
/// @keywords internal
/// @noRd
#[extendr]
fn model_rules_rust() -> List {
    let defaults = List::from_pairs(rules::defaults().into_iter().map(|(name, value)| {
        let value: Robj = match value {
            rules::Default::Number(v) => r!(v),
            rules::Default::Whole(v) => r!(v as f64),
            rules::Default::Flag(v) => r!(v),
            rules::Default::Text(v) => r!(v),
        };
        (name, value)
    }));
    let control = List::from_pairs(rules::control_defaults().into_iter().map(|(name, value)| {
        let value: Robj = match value {
            rules::Default::Number(v) => r!(v),
            rules::Default::Whole(v) => r!(v as f64),
            rules::Default::Flag(v) => r!(v),
            rules::Default::Text(v) => r!(v),
        };
        (name, value)
    }));
    let limits = list!(
        buffer_factor = rules::BUFFER_FACTOR_LIMIT,
        rise_threshold_factor = rules::RISE_THRESHOLD_FACTOR_LIMIT,
        max_bins = rules::MAX_BINS as f64,
        max_treatments = design::MAX_TREATMENTS as f64,
        max_degree = design::MAX_DEGREE as f64
    );
    let count_model = list!(
        slope_max = crate::nb::curve::SLOPE_MAX,
        rate_floor_width = crate::nb::family::RATE_FLOOR_WIDTH,
        rate_floor = crate::nb::family::RATE_FLOOR
    );
    // How fits end, in the one vocabulary of both likelihoods' `code`s.
    let termination = list!(
        converged = Termination::CONVERGED,
        limits = Termination::LIMITS.to_vec(),
        failed = Termination::FAILED
    );
    list!(
        defaults = defaults,
        count_model = count_model,
        termination = termination,
        control = control,
        limits = limits,
        reference_treatment = design::REFERENCE_TREATMENT,
        population_level = rules::POPULATION_LEVEL
    )
}

/// The rate at curve values `psi` (log(1 + rate) scale) under a likelihood:
/// the count model's smooth floor for `"nb"`, e^Ψ − 1 for `"original"`. R
/// asks for it (predictions, plots, the simulator) rather than keeping its
/// own copy of the floor.
/// @keywords internal
/// @noRd
#[extendr]
fn curve_rate_rust(psi: Vec<f64>, likelihood: &str) -> RResult<Vec<f64>> {
    match likelihood {
        "nb" => Ok(psi
            .iter()
            .map(|&v| crate::nb::family::rate(v).value)
            .collect()),
        // e^Ψ − 1 as the original package and R compute it (not exp_m1,
        // which differs in the last bit and below |Ψ| ≈ 1e-16).
        "original" => Ok(psi.iter().map(|&v| v.exp() - 1.0).collect()),
        other => Err(Error::input(format!("unknown likelihood \"{other}\""))),
    }
}

/// dr/dΨ of the rate function at each Ψ (see `curve_rate_rust`), for the
/// delta method of sums of rates.
/// @keywords internal
/// @noRd
#[extendr]
fn curve_rate_slope_rust(psi: Vec<f64>, likelihood: &str) -> RResult<Vec<f64>> {
    match likelihood {
        "nb" => Ok(psi.iter().map(|&v| crate::nb::family::rate(v).d1).collect()),
        "original" => Ok(psi.iter().map(|&v| v.exp()).collect()),
        other => Err(Error::input(format!("unknown likelihood \"{other}\""))),
    }
}

extendr_module! {
    mod rules;
    fn model_rules_rust;
    fn curve_rate_rust;
    fn curve_rate_slope_rust;
}
