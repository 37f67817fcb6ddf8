//! The feasibility repair of the original likelihood (model vignette
//! §12.5): a starting vector whose transition points crowd each other or the
//! ends of the axis is moved, step by step, until every boundary distance is
//! positive, the last step maximising the smallest distance by L-BFGS.

use super::fit::{check_point, FitSettings};
use super::lbfgs::{minimise, SmoothObjective, Tracker};
use crate::design::{Component, WarpKind};
use crate::original::{Model, Objective};
use std::cell::RefCell;

/// What [`repair_feasibility`] did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct RepairOutcome {
    /// Whether the point was feasible before any change (then it is untouched).
    pub(crate) feasible_at_start: bool,
    /// Repair attempts made (0 when feasible at start; at most [`REPAIR_ATTEMPTS`]).
    pub(crate) attempts: usize,
    /// Whether the returned point is feasible.
    pub(crate) feasible: bool,
    /// Smallest boundary distance at the returned point.
    pub(crate) min_distance: f64,
}

/// Attempts made by [`repair_feasibility`], as the original (model vignette
/// §12.5).
pub(crate) const REPAIR_ATTEMPTS: usize = 6;

/// The distance maximisation stops once every boundary distance is at least
/// this (the original's target, model vignette §12.5).
pub(crate) const REPAIR_TARGET_DISTANCE: f64 = 0.01;

/// Soft-min temperature rounds per distance maximisation (see [`repair_feasibility`]).
const SOFT_MIN_ROUNDS: usize = 4;

/// Makes `x` feasible if it is not: every boundary distance > 0, every
/// predicted log rate finite and ≥ −0.01 ([`Objective::is_feasible`]).
///
/// A feasible `x` is left untouched. Otherwise up to [`REPAIR_ATTEMPTS`]
/// attempts are made, each of the following steps in turn, with feasibility
/// checked after every step:
/// 1. halve every tpoint effect β (treatment index > 0) and every point warp;
/// 2. within each (context, species), move consecutive baseline tpoints
///    closer than the tpoint buffer apart by buffer/4 each;
/// 3. maximise the smallest boundary distance by L-BFGS, stopping once it
///    is at least [`REPAIR_TARGET_DISTANCE`] (or by `ctol` / `max_evals`).
///
/// Deviations from the original (model vignette §12.5 and §16):
/// - step 2 works within each (context, species); the original walked the flat
///   list of all baseline tpoints and so also nudged the last tpoint of one
///   curve against the first of the next, unrelated one;
/// - feasibility is checked after every step, not only after a whole
///   attempt, so a point fixed by an early step is not moved further;
/// - step 3 maximises a smooth soft-min, −t·ln Σ exp(−d_i/t), instead of the
///   non-smooth minimum (whose gradient L-BFGS cannot use reliably). The
///   temperature t is max(target − min d, target)/(1 + ln n), so the smallest
///   distances dominate the weights; it is recomputed from the current point
///   for up to 4 rounds, which share the `max_evals` budget. The stop test
///   uses the true minimum;
/// - when every attempt fails, `x` keeps its last values, as in the original,
///   and `feasible` is false; the original raised an R warning, here the
///   caller decides (the pipeline stops with an error).
///
/// Errors only on a wrong length, non-finite values or invalid settings.
/// `x` is taken as a slice (`&mut vec` coerces to it): its length never changes.
pub(crate) fn repair_feasibility(
    model: &Model,
    x: &mut [f64],
    settings: &FitSettings,
) -> Result<RepairOutcome, String> {
    settings.validate()?;
    check_point(model, x, "repaired")?;
    let mut checker = FeasibilityChecker::new(model);
    let (feasible_at_start, min_distance) = checker.check(x)?;
    let mut outcome = RepairOutcome {
        feasible_at_start,
        attempts: 0,
        feasible: feasible_at_start,
        min_distance,
    };
    while !outcome.feasible && outcome.attempts < REPAIR_ATTEMPTS {
        outcome.attempts += 1;
        halve_point_effects(model, x);
        (outcome.feasible, outcome.min_distance) = checker.check(x)?;
        if outcome.feasible {
            break;
        }
        separate_baseline_points(model, x);
        (outcome.feasible, outcome.min_distance) = checker.check(x)?;
        if outcome.feasible {
            break;
        }
        maximise_min_distance(model, x, settings)?;
        (outcome.feasible, outcome.min_distance) = checker.check(x)?;
    }
    Ok(outcome)
}

/// [`Objective::is_feasible`] with its prediction buffer kept between calls.
struct FeasibilityChecker<'m> {
    objective: Objective<'m>,
    predictions: Vec<f64>,
}

impl<'m> FeasibilityChecker<'m> {
    fn new(model: &'m Model) -> Self {
        Self {
            objective: Objective::new(model),
            predictions: vec![0.0; model.table().row_count()],
        }
    }

    /// Feasibility and the smallest boundary distance at x.
    fn check(&mut self, x: &[f64]) -> Result<(bool, f64), String> {
        let feasible = self.objective.is_feasible(x, &mut self.predictions)?;
        let min_distance = min_of(self.objective.boundary_distances(x)?);
        Ok((feasible, min_distance))
    }
}

fn min_of(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::INFINITY, f64::min)
}

/// Step 1: halve every tpoint effect (treatment > 0) and every point warp.
pub(super) fn halve_point_effects(model: &Model, x: &mut [f64]) {
    let layout = model.layout();
    let design = model.design();
    let treatments = design.treatment_count();
    for c in 0..design.contexts().len() {
        for s in 0..design.species().len() {
            for k in 0..layout.degree(c, s) {
                for i in 1..treatments {
                    if let Some(index) = layout.beta_index(Component::Point, c, s, k, i) {
                        x[index] *= 0.5;
                    }
                }
            }
        }
    }
    for s in 0..design.species().len() {
        for r in 0..design.ran_blocks().warped_levels() {
            if let Some(index) = layout.warp_index(WarpKind::Point, s, r) {
                x[index] *= 0.5;
            }
        }
    }
}

/// Step 2: within each (context, species), consecutive baseline tpoints
/// closer than the buffer move apart by buffer/4 each, walking the list in
/// order as the original does.
pub(super) fn separate_baseline_points(model: &Model, x: &mut [f64]) {
    let layout = model.layout();
    let design = model.design();
    let buffer = model.tpoint_buffer();
    for c in 0..design.contexts().len() {
        for s in 0..design.species().len() {
            let degree = layout.degree(c, s);
            for k in 1..degree {
                let (Some(lower), Some(upper)) = (
                    layout.beta_index(Component::Point, c, s, k - 1, 0),
                    layout.beta_index(Component::Point, c, s, k, 0),
                ) else {
                    continue;
                };
                if x[upper] - x[lower] < buffer {
                    x[lower] -= buffer / 4.0;
                    x[upper] += buffer / 4.0;
                }
            }
        }
    }
}

/// Step 3: minimise t·ln Σ exp(−d_i/t) (minus the soft-min of the boundary
/// distances) until the true minimum reaches the target; see
/// [`repair_feasibility`] for the temperature.
fn maximise_min_distance(
    model: &Model,
    x: &mut [f64],
    settings: &FitSettings,
) -> Result<(), String> {
    let mut objective = Objective::new(model);
    let distance_count = objective.boundary_distance_count();
    if distance_count == 0 {
        return Ok(());
    }
    let log_count = (distance_count as f64).ln();
    let mut evaluations_left = settings.max_evals;
    for _ in 0..SOFT_MIN_ROUNDS {
        let min_distance = min_of(objective.boundary_distances(x)?);
        if min_distance >= REPAIR_TARGET_DISTANCE || evaluations_left == 0 {
            break;
        }
        let shortfall = REPAIR_TARGET_DISTANCE - min_distance;
        let soft_min = SoftMinDistance {
            objective,
            temperature: shortfall.max(REPAIR_TARGET_DISTANCE) / (1.0 + log_count),
            weights: vec![0.0; distance_count],
            last_min: f64::NEG_INFINITY,
        };
        let tracker = RefCell::new(Tracker::new(soft_min, x, evaluations_left));
        minimise(&tracker, settings)?;
        let tracker = tracker.into_inner();
        evaluations_left = evaluations_left.saturating_sub(tracker.evaluations);
        let chosen = tracker.target.as_ref().unwrap_or(&tracker.best);
        x.copy_from_slice(&chosen.x);
        objective = tracker.objective.objective;
    }
    Ok(())
}

/// F(x) = t·ln Σ exp(−d_i/t) = −(soft-min of the distances); F ≥ −min d.
struct SoftMinDistance<'m> {
    objective: Objective<'m>,
    temperature: f64,
    /// Scratch: −softmax weights, the adjoint of F with respect to d.
    weights: Vec<f64>,
    /// True minimum distance at the last evaluated point.
    last_min: f64,
}

impl SmoothObjective for SoftMinDistance<'_> {
    fn evaluate(&mut self, x: &[f64], gradient: &mut [f64]) -> f64 {
        let Ok(distances) = self.objective.boundary_distances(x) else {
            return f64::NAN;
        };
        let min = min_of(distances);
        self.last_min = min;
        let t = self.temperature;
        // Shifted by the minimum so no exponent is positive (no overflow).
        let mut total = 0.0;
        for (weight, &d) in self.weights.iter_mut().zip(distances) {
            *weight = (-(d - min) / t).exp();
            total += *weight;
        }
        for weight in &mut self.weights {
            *weight = -*weight / total;
        }
        if self
            .objective
            .boundary_distances_vjp(x, &self.weights, gradient)
            .is_err()
        {
            return f64::NAN;
        }
        t * total.ln() - min
    }

    fn reached_target(&self) -> bool {
        self.last_min >= REPAIR_TARGET_DISTANCE
    }
}
