//! The count fit's settings (Newton limits, variance updates, priors, what
//! is held) and the box bounds of a species' unknowns.

use super::curve::curve_len;
use super::objective::{Sigma, SpeciesProblem};
use super::priors::Priors;
use super::solver::{Bounds, NewtonSettings};

/// Variances start here.
pub(crate) const SIGMA_START: f64 = 0.1;

/// A standard deviation that falls below this is an estimate of 0: the warp
/// is fixed at 0 from then on.
pub(crate) const SIGMA_ZERO: f64 = 1e-3;

/// The largest standard deviation of a random effect (a warp of e^5 in a
/// rate, or a shift of 5 on the logit scale of a point or slope: beyond any
/// plausible animal). The variance updates stop there; it is not counted
/// in `on.bound`.
pub(crate) const SIGMA_MAX: f64 = 5.0;

/// A variance update that moves every σ by less than this (on the log
/// scale) is near its fixed point: inner fits become exact from there on.
pub(super) const NEAR_FIXED_POINT: f64 = 0.05;

/// Box bounds of the unconstrained coordinates: far enough that only a
/// degenerate fit (a step-like transition, a vanishing gap, a Poisson
/// dispersion) reaches them.
/// Block rates are log(1 + rate), so a rate of 0 is the lower bound 0.
const RATE_BOUNDS: (f64, f64) = (0.0, 25.0);

const LOGIT_BOUNDS: (f64, f64) = (-20.0, 20.0);

pub(super) const LOG_DISPERSION_BOUNDS: (f64, f64) = (-18.4, 6.9);

const RANDOM_EFFECT_BOUNDS: (f64, f64) = (-10.0, 10.0);

/// Settings of a count fit.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct CountFitSettings {
    pub newton: NewtonSettings,
    /// Most variance updates per species.
    pub max_variance_updates: usize,
    /// Stop the variance updates when every |Δ ln σ| is below this.
    pub variance_tolerance: f64,
    /// Fixed standard deviations (point, rate, slope) instead of estimates.
    pub fixed_sigma: Option<Sigma>,
    pub rise_threshold_factor: f64,
    /// SD of the slopes' prior on the logit scale (0: none); see
    /// [`SpeciesProblem::with_priors`].
    pub slope_prior_sd: f64,
    /// SD of the prior on the steps of a curve's block rates (0: none); see
    /// [`SpeciesProblem::with_priors`].
    pub step_prior_sd: f64,
    /// SD of the prior on the treatment effects of the curves' unknowns
    /// (0: none); see [`SpeciesProblem::with_priors`].
    pub effect_prior_sd: f64,
    /// A fixed dispersion φ per cell instead of estimates (0: Poisson, held
    /// at the lower bound of ln φ, where the negative binomial is Poisson
    /// to about 1e-8 relative). Saved plans keep it in format 2's extras
    /// (`saved.rs`).
    pub fixed_dispersion: Option<f64>,
}

impl CountFitSettings {
    /// ln φ of a fixed dispersion (0 is held at the lower bound).
    pub(crate) fn fixed_log_dispersion(&self) -> Option<f64> {
        self.fixed_dispersion
            .map(|phi| phi.ln().max(LOG_DISPERSION_BOUNDS.0))
    }

    pub(crate) fn priors(&self) -> Priors {
        Priors {
            slope_sd: self.slope_prior_sd,
            step_sd: self.step_prior_sd,
            effect_sd: self.effect_prior_sd,
        }
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        let positive = |v: f64| v.is_finite() && v > 0.0;
        let n = &self.newton;
        if n.max_iterations == 0
            || !positive(n.gradient_tolerance)
            || !positive(n.decrement_tolerance)
        {
            return Err(
                "the Newton settings need at least one iteration and positive tolerances".into(),
            );
        }
        if !positive(self.variance_tolerance) {
            return Err(format!(
                "variance_tolerance must be positive, got {}",
                self.variance_tolerance
            ));
        }
        if let Some(sigma) = self.fixed_sigma {
            if !sigma.iter().all(|s| s.is_finite() && *s >= 0.0) {
                return Err(format!(
                    "fixed standard deviations must be finite and >= 0, got {sigma:?}"
                ));
            }
        }
        crate::rules::check_rise_threshold_factor(self.rise_threshold_factor)?;
        if !(self.slope_prior_sd.is_finite() && self.slope_prior_sd >= 0.0) {
            return Err(format!(
                "the slope prior's SD must be finite and >= 0, got {}",
                self.slope_prior_sd
            ));
        }
        if let Some(phi) = self.fixed_dispersion {
            let upper = LOG_DISPERSION_BOUNDS.1.exp();
            if !(phi.is_finite() && (0.0..=upper).contains(&phi)) {
                return Err(format!(
                    "a fixed dispersion must be between 0 and {upper:.0}, got {phi}"
                ));
            }
        }
        for (name, sd) in [
            ("step", self.step_prior_sd),
            ("effect", self.effect_prior_sd),
        ] {
            if !(sd.is_finite() && sd >= 0.0) {
                return Err(format!(
                    "the {name} prior's SD must be finite and >= 0, got {sd}"
                ));
            }
        }
        Ok(())
    }
}

impl Default for CountFitSettings {
    fn default() -> Self {
        CountFitSettings {
            newton: NewtonSettings::default(),
            max_variance_updates: crate::rules::MAX_VARIANCE_UPDATES,
            variance_tolerance: crate::rules::VARIANCE_TOLERANCE,
            fixed_sigma: None,
            rise_threshold_factor: crate::rules::DEFAULT_RISE_THRESHOLD_FACTOR,
            slope_prior_sd: crate::rules::SLOPE_PRIOR_SD,
            step_prior_sd: crate::rules::STEP_PRIOR_SD,
            effect_prior_sd: crate::rules::EFFECT_PRIOR_SD,
            fixed_dispersion: None,
        }
    }
}

/// Box bounds of a species' free unknowns.
pub(crate) fn bounds_for(problem: &SpeciesProblem) -> Bounds {
    let layout = &problem.layout;
    let n = layout.len;
    let (mut lower, mut upper) = (vec![f64::NEG_INFINITY; n], vec![f64::INFINITY; n]);
    let mut set = |i: usize, (lo, hi): (f64, f64)| {
        lower[i] = lo;
        upper[i] = hi;
    };
    for (curve, offset) in layout.curve_offsets.iter().enumerate() {
        let Some(offset) = *offset else { continue };
        let degree = layout.degrees[curve / layout.treatments];
        for i in 0..curve_len(degree) {
            set(
                offset + i,
                if i <= degree {
                    RATE_BOUNDS
                } else {
                    LOGIT_BOUNDS
                },
            );
        }
    }
    for index in layout.rho_index.iter().flatten() {
        set(*index, LOG_DISPERSION_BOUNDS);
    }
    for indices in &layout.u_index {
        for index in indices.iter().flatten() {
            set(*index, RANDOM_EFFECT_BOUNDS);
        }
    }
    Bounds { lower, upper }
}
