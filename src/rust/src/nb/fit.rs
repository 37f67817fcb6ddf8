//! The whole count-model fit (model vignette §13.2):
//! per species, damped Newton for the curves, dispersions and random
//! effects at fixed variances, alternated with Laplace-EM updates of the
//! variances σ² ← (Σ_r û_r² + Σ_r [H⁻¹]_rr) / R until they settle; then the
//! reported vector (β, random effects, standard deviations, dispersions).

use super::curve::{CurveValues, SLOPE_MAX};
use super::linalg::BorderedMatrix;
use super::objective::{Sigma, SpeciesProblem};
use super::settings::{bounds_for, CountFitSettings, NEAR_FIXED_POINT, SIGMA_START, SIGMA_ZERO};
use super::solver::{
    counted, newton, Bounds, NewtonIteration, NewtonSettings, FLAT_CURVATURE, FLAT_SLOPE,
};
use super::start::starting_state_with;
use super::unknowns::SpeciesState;
use super::variances::{variance_update, VarianceSecant};
use super::CountModel;
use crate::changepoint::DetectedChangePoints;
use crate::numeric::linalg::FullPivotLu;
use crate::outcome::Termination;

/// One species' fit.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct SpeciesFit {
    pub species: usize,
    pub state: SpeciesState,
    /// Standard deviations of the random effects (0: none or estimated 0).
    pub sigma: Sigma,
    /// J at the estimate.
    pub objective: f64,
    /// −(marginal log-likelihood), Laplace over the random effects.
    pub negative_log_likelihood: f64,
    /// Newton iterations over all variance updates.
    pub iterations: usize,
    pub evaluations: usize,
    pub variance_updates: usize,
    pub converged: bool,
    pub scaled_gradient: f64,
    /// Estimates at a bound: box bounds, slopes above 0.99·S_MAX, point gaps
    /// below 0.1 % of the axis.
    pub on_bound: usize,
    /// Per curve and θ coordinate: whether the data inform it (a curve
    /// without observed rows, or the transitions of a curve whose rates are
    /// all 0, are not informed; their β are reported as NaN).
    pub curve_informed: Vec<Vec<bool>>,
    pub rho_informed: Vec<bool>,
    pub stop: Option<String>,
    /// With [`NewtonSettings::trace`]: every Newton run's rows, each with the
    /// number of the run (0, 1, …: one run per variance update, plus the
    /// final one). Not saved with a plan.
    pub trace: Vec<(usize, NewtonIteration)>,
}

impl SpeciesFit {
    /// Species `species` of `model` whose fit failed (`reason`), kept in the
    /// fit so that the other species go on: its unknowns at 0 and not
    /// informed (reported as NaN), no random-effect variances, −ℓ 0 (it adds
    /// nothing to the fit's sums), not converged, its `stop` saying why.
    pub(crate) fn failed(model: &CountModel, species: usize, reason: &str) -> SpeciesFit {
        let shape = model.table().shape();
        let theta: Vec<Vec<f64>> = (0..shape.contexts * shape.treatments)
            .map(|curve| {
                let degree = model.structure().degree(curve / shape.treatments, species);
                vec![0.0; super::curve::curve_len(degree)]
            })
            .collect();
        SpeciesFit {
            species,
            curve_informed: theta.iter().map(|t| vec![false; t.len()]).collect(),
            rho_informed: vec![false; shape.contexts],
            state: SpeciesState {
                theta,
                rho: vec![0.0; shape.contexts],
                u: vec![[0.0; 3]; shape.ran_levels],
            },
            sigma: [0.0; 3],
            objective: 0.0,
            negative_log_likelihood: 0.0,
            iterations: 0,
            evaluations: 0,
            variance_updates: 0,
            converged: false,
            scaled_gradient: f64::NAN,
            on_bound: 0,
            stop: Some(Termination::Failed(reason.to_string()).to_string()),
            trace: Vec::new(),
        }
    }

    /// Whether this is a species whose fit failed ([`Self::failed`]) and
    /// that has no estimates. A Newton fit that stopped with "failed: ..."
    /// keeps its estimates; it evaluated its objective at least once, a
    /// failed species never (saved plans keep both, so this is the mark).
    pub(crate) fn has_failed(&self) -> bool {
        self.evaluations == 0
            && self
                .stop
                .as_deref()
                .is_some_and(|s| s.starts_with(Termination::FAILED))
    }

    /// How this species' fit ended.
    pub(crate) fn termination(&self) -> Termination {
        self.stop
            .as_deref()
            .map_or(Termination::Converged, Termination::of_note)
    }
}

pub(crate) fn free_warps_of(sigma: Sigma) -> [bool; 3] {
    sigma.map(|s| s > 0.0)
}

/// What the final Hessian says about a species' estimate: ln det of its
/// random effects' block (for the Laplace marginal) and which θ and ρ
/// coordinates the data inform at all (see [`FLAT_CURVATURE`]).
struct FinalCurvature {
    random_effect_log_det: f64,
    curve_informed: Vec<Vec<bool>>,
    rho_informed: Vec<bool>,
}

/// Which of a species' free coordinates the data inform at `state`: those
/// with curvature or slope in the likelihood itself (`problem` must carry
/// no slope prior, which would inform every slope).
pub(crate) fn data_informed(
    problem: &SpeciesProblem,
    state: &SpeciesState,
    sigma: Sigma,
) -> Vec<bool> {
    let mut gradient = vec![0.0; problem.layout.len];
    let mut hessian = problem.hessian_shape();
    problem.evaluate(state, sigma, &mut gradient, &mut hessian);
    (0..problem.layout.len)
        .map(|i| !(hessian.diagonal(i).abs() <= FLAT_CURVATURE && gradient[i].abs() <= FLAT_SLOPE))
        .collect()
}

fn final_curvature(
    problem: &SpeciesProblem,
    data_only: &SpeciesProblem,
    state: &SpeciesState,
    sigma: Sigma,
) -> FinalCurvature {
    let layout = &problem.layout;
    let mut gradient = vec![0.0; layout.len];
    let mut hessian = problem.hessian_shape();
    problem.evaluate(state, sigma, &mut gradient, &mut hessian);
    let informed_flags = data_informed(data_only, state, sigma);
    let informed = |i: usize| informed_flags[i];
    let curve_informed = layout
        .curve_offsets
        .iter()
        .zip(&state.theta)
        .map(|(offset, theta)| match offset {
            Some(offset) => (0..theta.len()).map(|i| informed(offset + i)).collect(),
            None => vec![false; theta.len()],
        })
        .collect();
    let rho_informed = layout
        .rho_index
        .iter()
        .map(|i| i.is_some_and(informed))
        .collect();
    let border_start = layout.border_start();
    let indices: Vec<usize> = layout
        .u_index
        .iter()
        .flat_map(|u| u.iter().flatten().map(|&i| i - border_start))
        .collect();
    let (k, m) = (indices.len(), layout.border);
    let random_effect_log_det = if k == 0 {
        0.0
    } else {
        let mut block = BorderedMatrix::new(vec![], k);
        for (a, &ia) in indices.iter().enumerate() {
            for (b, &ib) in indices.iter().enumerate() {
                block.border_block[a * k + b] = hessian.border_block[ia * m + ib];
            }
        }
        block
            .factor(&vec![0.0; k])
            .map_or(f64::NAN, |factor| factor.log_det())
    };
    FinalCurvature {
        random_effect_log_det,
        curve_informed,
        rho_informed,
    }
}

/// Counts estimates at a bound (see [`SpeciesFit::on_bound`]).
fn count_on_bound(problem: &SpeciesProblem, state: &SpeciesState, bounds: &Bounds) -> usize {
    let layout = &problem.layout;
    let x = state.to_vector(layout);
    let mut count = bounds.at_bound(&x);
    for (curve, offset) in layout.curve_offsets.iter().enumerate() {
        if offset.is_none() {
            continue;
        }
        let degree = layout.degrees[curve / layout.treatments];
        let values = CurveValues::from_theta(&state.theta[curve], degree, problem.axis());
        count += values
            .slopes
            .iter()
            .filter(|&&s| s > 0.99 * SLOPE_MAX)
            .count();
        let axis = problem.axis();
        let mut previous = axis.lower;
        let slack = axis.gap + 1e-3 * axis.width;
        for &p in values
            .points
            .iter()
            .chain(std::iter::once(&(axis.lower + axis.width)))
        {
            if p - previous < slack {
                count += 1;
            }
            previous = p;
        }
    }
    count
}

/// Brings a fit from its rough start near the optimum block by block, each
/// small problem with its own damping, so that one hard curve does not slow
/// every other: the curves one by one (random effects at their start), the
/// dispersions, the random effects, and the curves again. Returns the
/// objective evaluations used.
fn warm_up(
    model: &CountModel,
    species: usize,
    state: &mut SpeciesState,
    sigma: Sigma,
    settings: &CountFitSettings,
) -> usize {
    let loose = NewtonSettings {
        gradient_tolerance: 1e-2,
        decrement_tolerance: 1e-7,
        max_iterations: 50,
        trace: false,
    };
    let curves = model.table().shape().contexts * model.table().shape().treatments;
    let free_warps = free_warps_of(sigma);
    let mut evaluations = 0;
    let mut run = |problem: SpeciesProblem, state: &mut SpeciesState, sigma: Sigma| {
        let problem = problem.with_settings(settings);
        if problem.layout.len == 0 {
            return;
        }
        let bounds = bounds_for(&problem);
        evaluations += newton(&problem, state, sigma, &bounds, &loose).evaluations;
    };
    let each_curve =
        |state: &mut SpeciesState,
         run: &mut dyn FnMut(SpeciesProblem, &mut SpeciesState, Sigma)| {
            for curve in 0..curves {
                let mut only = vec![false; curves];
                only[curve] = true;
                run(
                    SpeciesProblem::restricted(model, species, &only, false, [false; 3]),
                    state,
                    sigma,
                );
            }
        };
    each_curve(state, &mut run);
    let none = vec![false; curves];
    run(
        SpeciesProblem::restricted(model, species, &none, true, [false; 3]),
        state,
        sigma,
    );
    run(
        SpeciesProblem::restricted(model, species, &none, false, free_warps),
        state,
        sigma,
    );
    each_curve(state, &mut run);
    evaluations
}

/// Fits one species from `start` (or from the data), with `sigma` as the
/// starting (or, with `settings.fixed_sigma`, fixed) standard deviations.
pub(crate) fn fit_species(
    model: &CountModel,
    species: usize,
    detected: Option<&DetectedChangePoints>,
    start: Option<(&SpeciesState, Sigma)>,
    settings: &CountFitSettings,
) -> Result<SpeciesFit, String> {
    fit_species_held(model, species, detected, start, settings, None)
}

/// [`fit_species`] with the random effects held at `held` (per animal; the
/// warps of every fixed standard deviation of 0, `settings.fixed_sigma`
/// must then be all 0): the curves and dispersions are fitted given those
/// warps, which stay as they are.
pub(crate) fn fit_species_held(
    model: &CountModel,
    species: usize,
    detected: Option<&DetectedChangePoints>,
    start: Option<(&SpeciesState, Sigma)>,
    settings: &CountFitSettings,
    held: Option<&[[f64; 3]]>,
) -> Result<SpeciesFit, String> {
    fit_species_with(model, species, detected, start, settings, held, None)
}

/// [`fit_species`] from `start` with one effect held at a value (`pin`, see
/// [`super::pin`]): the start moved onto the constraint, then fits with the
/// constraint linearised at the last fit's estimate (moved onto it again),
/// until the effect is at its value. Iterations and evaluations are summed
/// over the rounds.
pub(crate) fn fit_species_pinned(
    model: &CountModel,
    species: usize,
    start: (&SpeciesState, Sigma),
    settings: &CountFitSettings,
    pin: &super::pin::EffectPin,
) -> Result<PinnedFit, String> {
    let degree = model.structure().degree(pin.context, species);
    let axis = model.axis();
    let layout = super::unknowns::SpeciesLayout::new(model, species, [false; 3]);
    if !super::pin::pin_is_estimable(&layout, pin) {
        return Err("the held effect involves a curve that is not estimated".into());
    }
    let (mut state, mut sigma) = (start.0.clone(), start.1);
    let (mut iterations, mut evaluations) = (0, 0);
    for round in 1..=PIN_ROUNDS {
        pin.project(&mut state, degree, axis);
        let linear = pin.linearised_at(&state, degree, axis);
        let run = newton_phase(
            model,
            species,
            None,
            Some((&state, sigma)),
            settings,
            None,
            Some(&linear),
        )?;
        iterations += run.iterations;
        evaluations += run.evaluations;
        let residual = pin.effect(&run.state, degree, axis) - pin.value;
        let held = residual.abs() <= PIN_TOLERANCE * (1.0 + pin.value.abs());
        // Only the round that ends the fit needs the final curvature (the
        // Laplace term of its likelihood, the informed coordinates): the
        // others only move the linearisation.
        if held || round == PIN_ROUNDS {
            let multiplier = super::pin::LinearPin::multiplier(
                linear.residual(&run.state, model.table().shape().treatments),
            );
            let mut fit = run.finish(settings);
            fit.iterations = iterations;
            fit.evaluations = evaluations;
            return Ok(PinnedFit { fit, multiplier });
        }
        (state, sigma) = (run.state, run.sigma);
    }
    unreachable!("the last round returns")
}

/// A fit with one effect held at a value, and the constraint's multiplier
/// there: dJ/dv of the fit's penalised objective J (curves, dispersions and
/// random effects at their joint optimum, the random-effect SDs fixed), the
/// slope of the profile beside the Laplace term's, which the multiplier
/// leaves out (it changes slowly along a profile).
pub(crate) struct PinnedFit {
    pub fit: SpeciesFit,
    pub multiplier: f64,
}

/// Rounds of linearisation at most, and how close to its value a pinned
/// effect must come (relative to 1 + |value|): the profile carries the held
/// minimum the rest of the way by the multiplier (to first order, an error
/// of the order of this tolerance squared), which saves a round in most
/// held fits.
const PIN_ROUNDS: usize = 8;
const PIN_TOLERANCE: f64 = 1e-4;

fn fit_species_with(
    model: &CountModel,
    species: usize,
    detected: Option<&DetectedChangePoints>,
    start: Option<(&SpeciesState, Sigma)>,
    settings: &CountFitSettings,
    held: Option<&[[f64; 3]]>,
    pin: Option<&super::pin::LinearPin>,
) -> Result<SpeciesFit, String> {
    let run = newton_phase(model, species, detected, start, settings, held, pin)?;
    Ok(run.finish(settings))
}

/// A species' fit after its Newton runs and variance updates, before the
/// final curvature and the reported likelihood ([`NewtonPhase::finish`]).
struct NewtonPhase<'m> {
    problem: SpeciesProblem<'m>,
    state: SpeciesState,
    sigma: Sigma,
    outcome: super::solver::NewtonOutcome,
    estimate_variances: bool,
    iterations: usize,
    evaluations: usize,
    updates: usize,
    trace: Vec<(usize, NewtonIteration)>,
}

fn newton_phase<'m>(
    model: &'m CountModel,
    species: usize,
    detected: Option<&DetectedChangePoints>,
    start: Option<(&SpeciesState, Sigma)>,
    settings: &CountFitSettings,
    held: Option<&[[f64; 3]]>,
    pin: Option<&super::pin::LinearPin>,
) -> Result<NewtonPhase<'m>, String> {
    let mut sigma: Sigma = match (settings.fixed_sigma, start) {
        _ if !model.has_random_effects() => [0.0; 3],
        (Some(fixed), _) => fixed,
        (None, Some((_, sigma))) => sigma,
        (None, None) => [SIGMA_START; 3],
    };
    // Point and slope warps move transitions: without any transition they
    // act on nothing and their variance has no estimate.
    let has_transitions =
        (0..model.structure().contexts()).any(|c| model.structure().degree(c, species) > 0);
    if !has_transitions {
        sigma[super::curve::U_POINT] = 0.0;
        sigma[super::curve::U_SLOPE] = 0.0;
    }
    let problem_for = |sigma: Sigma| {
        SpeciesProblem::new(model, species, free_warps_of(sigma))
            .with_settings(settings)
            .with_pin(pin.cloned())
    };
    let mut problem = problem_for(sigma);
    let mut state = match start {
        Some((state, _)) => state.clone(),
        None => starting_state_with(&problem, detected, settings.rise_threshold_factor)?,
    };
    if let Some(rho) = settings.fixed_log_dispersion() {
        state.rho.fill(rho);
    }
    for u in &mut state.u {
        for w in 0..3 {
            if sigma[w] == 0.0 {
                u[w] = 0.0;
            }
        }
    }
    if let Some(held) = held {
        if settings.fixed_sigma != Some([0.0; 3]) || held.len() != state.u.len() {
            return Err(
                "internal: held random effects need one per animal and σ fixed at 0".into(),
            );
        }
        state.u = held.to_vec();
    }
    let (mut iterations, mut evaluations, mut updates) = (0, 0, 0);
    let (mut trace, mut runs) = (Vec::new(), 0);
    if start.is_none() {
        evaluations += warm_up(model, species, &mut state, sigma, settings);
    }
    project_held_effects(model, &mut state)?;
    let estimate_variances = model.has_random_effects() && settings.fixed_sigma.is_none();
    let mut secant = VarianceSecant::default();
    // While the variances move, each inner fit needs only to be close; the
    // fit at the variances' final values is solved to full accuracy.
    let loose = NewtonSettings {
        gradient_tolerance: settings.newton.gradient_tolerance.max(1e-2),
        decrement_tolerance: settings.newton.decrement_tolerance.max(1e-7),
        ..settings.newton
    };
    let mut settling = estimate_variances;
    let outcome = loop {
        let bounds = bounds_for(&problem);
        let newton_settings = if settling { &loose } else { &settings.newton };
        let mut outcome = newton(&problem, &mut state, sigma, &bounds, newton_settings);
        trace.extend(
            std::mem::take(&mut outcome.trace)
                .into_iter()
                .map(|row| (runs, row)),
        );
        runs += 1;
        iterations += outcome.iterations;
        evaluations += outcome.evaluations;
        if !estimate_variances || !outcome.converged || updates >= settings.max_variance_updates {
            if settling && outcome.converged {
                // Out of variance updates: finish the inner fit at these variances.
                settling = false;
                continue;
            }
            break outcome;
        }
        let Some(expectation) = variance_update(&problem, &state, &outcome, sigma) else {
            break outcome;
        };
        updates += 1;
        let mut next = secant.step(sigma, expectation);
        let mut dropped = false;
        for w in 0..3 {
            if sigma[w] > 0.0 && next[w] < SIGMA_ZERO {
                next[w] = 0.0;
                dropped = true;
            }
        }
        let largest_move = expectation
            .iter()
            .zip(&sigma)
            .filter(|(_, &b)| b > 0.0)
            .map(|(&a, &b)| (a / b).ln().abs())
            .fold(0.0, f64::max);
        let settled = largest_move < settings.variance_tolerance;
        // Loose inner fits move the updates by about 1 %: near the fixed
        // point they would hide it (a variance the data barely inform moves
        // by less than that noise), so the updates from there on use inner
        // fits at full accuracy.
        let loose_fit = settling;
        if settling && largest_move < NEAR_FIXED_POINT && !dropped {
            settling = false;
        }
        if settled && !dropped {
            if !loose_fit {
                break outcome;
            }
            // Settled on loose inner fits: one more round at full accuracy.
            settling = false;
            continue;
        }
        sigma = next;
        if dropped {
            for u in &mut state.u {
                for w in 0..3 {
                    if sigma[w] == 0.0 {
                        u[w] = 0.0;
                    }
                }
            }
            problem = problem_for(sigma);
            secant = VarianceSecant::default();
        }
    };
    Ok(NewtonPhase {
        problem,
        state,
        sigma,
        outcome,
        estimate_variances,
        iterations,
        evaluations,
        updates,
        trace,
    })
}

impl NewtonPhase<'_> {
    /// The fit: the final curvature at the estimate, the Laplace marginal
    /// likelihood, how the fit ended.
    fn finish(self, settings: &CountFitSettings) -> SpeciesFit {
        let problem = &self.problem;
        let (model, species) = (problem.model, problem.layout.species);
        let bounds = bounds_for(problem);
        let log_sigma: f64 = self
            .sigma
            .iter()
            .filter(|&&s| s > 0.0)
            .map(|s| s.ln())
            .sum();
        let data_only = SpeciesProblem::new(model, species, free_warps_of(self.sigma))
            .without_dispersion(settings.fixed_dispersion.is_some());
        let mut curvature = final_curvature(problem, &data_only, &self.state, self.sigma);
        if settings.fixed_dispersion.is_some() {
            // A fixed dispersion is reported wherever its context has a curve.
            let layout = &problem.layout;
            curvature.rho_informed = (0..layout.contexts)
                .map(|c| {
                    (0..layout.treatments)
                        .any(|t| layout.curve_offsets[c * layout.treatments + t].is_some())
                })
                .collect();
        }
        let outcome = &self.outcome;
        let negative_log_likelihood = outcome.value - problem.prior_penalty(&self.state)
            + problem.layout.animals as f64 * log_sigma
            + 0.5 * curvature.random_effect_log_det;
        let converged = outcome.converged
            && (!self.estimate_variances || self.updates < settings.max_variance_updates);
        let stop = if converged {
            None
        } else if outcome.converged {
            Some(
                Termination::VarianceUpdateLimit
                    .with_detail(&counted(settings.max_variance_updates, "variance update")),
            )
        } else {
            outcome.stop.clone()
        };
        SpeciesFit {
            species,
            on_bound: count_on_bound(problem, &self.state, &bounds),
            curve_informed: curvature.curve_informed,
            rho_informed: curvature.rho_informed,
            objective: outcome.value,
            negative_log_likelihood,
            scaled_gradient: outcome.scaled_gradient,
            stop,
            state: self.state,
            sigma: self.sigma,
            iterations: self.iterations,
            evaluations: self.evaluations,
            variance_updates: self.updates,
            converged,
            trace: self.trace,
        }
    }
}

/// W⁻¹, so that β = W⁻¹ v for per-treatment values v.
/// Sets the held effects of every curve unknown to 0 (θ = W β with the
/// held β zeroed), so that a reduced model's fit starts where its penalty
/// is 0 (model vignette §15.4).
pub(crate) fn project_held_effects(
    model: &CountModel,
    state: &mut SpeciesState,
) -> Result<(), String> {
    let held = model.held_effects();
    if held.is_empty() {
        return Ok(());
    }
    let treatments = model.design().treatment_count();
    let weights = model.design().weights();
    let inverse = inverse_weights(model)?;
    for c in 0..model.structure().contexts() {
        let first = c * treatments;
        for i in 0..state.theta[first].len() {
            let values: Vec<f64> = (0..treatments).map(|t| state.theta[first + t][i]).collect();
            let mut effects: Vec<f64> = (0..treatments)
                .map(|j| {
                    (0..treatments)
                        .map(|t| inverse[j * treatments + t] * values[t])
                        .sum()
                })
                .collect();
            for &j in held {
                effects[j] = 0.0;
            }
            for t in 0..treatments {
                state.theta[first + t][i] = (0..treatments)
                    .map(|j| weights[t * treatments + j] * effects[j])
                    .sum();
            }
        }
    }
    Ok(())
}

pub(crate) fn inverse_weights(model: &CountModel) -> Result<Vec<f64>, String> {
    let design = model.design();
    let t = design.treatment_count();
    let lu = FullPivotLu::new(design.weights(), t)?;
    let mut inverse = vec![0.0; t * t];
    for j in 0..t {
        let mut unit = vec![0.0; t];
        unit[j] = 1.0;
        let column = lu.solve(&unit)?;
        for i in 0..t {
            inverse[i * t + j] = column[i];
        }
    }
    Ok(inverse)
}

#[cfg(test)]
mod tests {
    use super::super::tests_support::{simulate, Simulation};
    use super::*;
    use crate::design::{Component, WarpKind};
    use crate::nb::layout::CountLayout;
    use crate::nb::report::reported_parameters;
    use crate::nb::settings::LOG_DISPERSION_BOUNDS;

    #[test]
    fn a_fit_recovers_the_simulated_curves_and_converges() {
        let spec = Simulation {
            bins: 40,
            animals: 6,
            cells_per_key: 5,
            ..Simulation::default()
        };
        let (model, truth) = simulate(&spec, 21);
        for s in 0..spec.species {
            let fit = fit_species(&model, s, None, None, &CountFitSettings::default()).unwrap();
            assert!(fit.converged, "{fit:?}");
            assert!(fit.scaled_gradient <= 1e-4);
            assert_eq!(fit.on_bound, 0, "{fit:?}");
            for t in 0..spec.levels {
                let degree = spec.degrees[s];
                let values = CurveValues::from_theta(&fit.state.theta[t], degree, model.axis());
                let true_values = &truth.curves[s][t];
                for (a, b) in values.rates.iter().zip(&true_values.rates) {
                    assert!((a - b).abs() < 0.2, "rates {values:?} vs {true_values:?}");
                }
                for (a, b) in values.points.iter().zip(&true_values.points) {
                    assert!((a - b).abs() < 2.5, "points {values:?} vs {true_values:?}");
                }
            }
        }
    }

    #[test]
    fn a_dispersion_fixed_at_its_estimate_gives_the_same_fit_and_zero_is_held_at_the_bound() {
        let spec = Simulation {
            bins: 30,
            animals: 4,
            cells_per_key: 5,
            ..Simulation::default()
        };
        let (model, _) = simulate(&spec, 8);
        let free = fit_species(&model, 0, None, None, &CountFitSettings::default()).unwrap();
        assert!(free.converged, "{free:?}");
        // At the maximum over φ, holding φ there changes nothing else.
        let phi = free.state.rho[0].exp();
        let settings = CountFitSettings {
            fixed_dispersion: Some(phi),
            ..CountFitSettings::default()
        };
        let held = fit_species(&model, 0, None, None, &settings).unwrap();
        assert!(held.converged, "{held:?}");
        assert!((held.state.rho[0] - free.state.rho[0]).abs() < 1e-12);
        assert!(held.rho_informed[0]);
        for (a, b) in held
            .state
            .theta
            .iter()
            .flatten()
            .zip(free.state.theta.iter().flatten())
        {
            assert!((a - b).abs() < 1e-3, "{a} vs {b}");
        }
        // (The variances, and so the marginal likelihood, move a little: with
        // φ free their Laplace-EM updates see its uncertainty too.)
        assert!(
            (held.negative_log_likelihood - free.negative_log_likelihood).abs() < 0.05,
            "{} vs {}",
            held.negative_log_likelihood,
            free.negative_log_likelihood
        );
        // Poisson: held at the lower bound, and a worse fit to NB counts.
        let poisson = CountFitSettings {
            fixed_dispersion: Some(0.0),
            ..CountFitSettings::default()
        };
        let fit = fit_species(&model, 0, None, None, &poisson).unwrap();
        assert!(fit.state.rho.iter().all(|&r| r == LOG_DISPERSION_BOUNDS.0));
        assert_eq!(
            fit.on_bound, 0,
            "a held dispersion is not an estimate on a bound"
        );
        assert!(fit.negative_log_likelihood > free.negative_log_likelihood);
        assert!(CountFitSettings {
            fixed_dispersion: Some(-1.0),
            ..CountFitSettings::default()
        }
        .validate()
        .is_err());
    }

    #[test]
    fn the_animals_mean_rate_and_slope_warps_are_zero_at_the_optimum() {
        // The likelihood and the priors (which see the curves at the
        // animals' mean warps) are unchanged when the population rates are
        // scaled by e^c and every rate warp shifted by -c, or the slope
        // logits shifted by c and the slope warps by -c; the random effects'
        // prior alone is lowest at a mean warp of 0. Many contexts make many
        // steps, whose prior pulled the population rates down (and the rate
        // warps and their SD up) before the priors saw the mean warps.
        let spec = Simulation {
            bins: 40,
            contexts: 8,
            species: 1,
            animals: 5,
            levels: 3,
            degrees: vec![2; 8],
            cells_per_key: 4,
            ..Simulation::default()
        };
        let (model, _) = simulate(&spec, 5);
        let fit = fit_species(&model, 0, None, None, &CountFitSettings::default()).unwrap();
        assert!(fit.converged, "{fit:?}");
        let animals = fit.state.u.len() as f64;
        for w in [super::super::curve::U_RATE, super::super::curve::U_SLOPE] {
            let mean = fit.state.u.iter().map(|u| u[w]).sum::<f64>() / animals;
            assert!(mean.abs() < 1e-5, "warp {w}: mean {mean}, {fit:?}");
        }
        let rate_sd = fit.sigma[super::super::curve::U_RATE];
        assert!(rate_sd < 3.0 * spec.sigma[1], "rate SD {rate_sd}");
    }

    #[test]
    fn a_single_bin_fits_curves_without_transitions() {
        let spec = Simulation {
            bins: 1,
            degrees: vec![0, 0],
            missing: 0.0,
            ..Simulation::default()
        };
        let (model, _) = simulate(&spec, 5);
        for s in 0..spec.species {
            let fit = fit_species(&model, s, None, None, &CountFitSettings::default()).unwrap();
            assert!(fit.converged, "{fit:?}");
        }
        // A transition still needs room: one bin has none for it.
        let structure = crate::design::Structure::new(1, 2, vec![1, 0]).unwrap();
        assert!(model.with_structure(structure).is_err());
    }

    #[test]
    fn a_warm_start_from_the_estimate_stops_at_once() {
        let (model, _) = simulate(&Simulation::default(), 4);
        let settings = CountFitSettings::default();
        let first = fit_species(&model, 0, None, None, &settings).unwrap();
        let again = fit_species(
            &model,
            0,
            None,
            Some((&first.state, first.sigma)),
            &settings,
        )
        .unwrap();
        assert!(again.converged);
        assert!(again.iterations <= 2, "{again:?}");
        assert!((again.objective - first.objective).abs() < 1e-8 * first.objective.abs());
    }

    #[test]
    fn reported_effects_are_differences_of_the_treatment_curves() {
        let (model, _) = simulate(&Simulation::default(), 9);
        let settings = CountFitSettings::default();
        let fits: Vec<SpeciesFit> = (0..2)
            .map(|s| fit_species(&model, s, None, None, &settings).unwrap())
            .collect();
        let reported = reported_parameters(&model, &fits).unwrap();
        let layout = CountLayout::new(model.design(), model.structure()).unwrap();
        let axis = model.axis();
        for s in 0..2 {
            let degree = model.structure().degree(0, s);
            let reference = CurveValues::from_theta(&fits[s].state.theta[0], degree, axis);
            let treated = CurveValues::from_theta(&fits[s].state.theta[1], degree, axis);
            let base = layout
                .original
                .beta_index(Component::Rate, 0, s, 0, 0)
                .unwrap();
            let effect = layout
                .original
                .beta_index(Component::Rate, 0, s, 0, 1)
                .unwrap();
            assert!((reported[base] - reference.rates[0]).abs() < 1e-12);
            assert!((reported[effect] - (treated.rates[0] - reference.rates[0])).abs() < 1e-12);
            let sd = layout.deviation_index(WarpKind::Slope, s).unwrap();
            assert_eq!(reported[sd], fits[s].sigma[2]);
        }
        assert!(reported.iter().all(|v| v.is_finite()));
    }

    #[test]
    fn a_gene_never_seen_has_rate_zero_and_uninformed_transitions() {
        let spec = Simulation {
            silent_species: vec![1],
            ..Simulation::default()
        };
        let (model, _) = simulate(&spec, 2);
        let fit = fit_species(&model, 1, None, None, &CountFitSettings::default()).unwrap();
        assert!(fit.converged, "{fit:?}");
        let degree = spec.degrees[1];
        for (theta, informed) in fit.state.theta.iter().zip(&fit.curve_informed) {
            assert!(theta[..=degree].iter().all(|&r| r == 0.0), "{theta:?}");
            assert!(informed[..=degree].iter().all(|&i| i));
            assert!(informed[degree + 1..].iter().all(|&i| !i));
        }
        let reported = reported_parameters(&model, &[fit]).unwrap();
        let layout = CountLayout::new(model.design(), model.structure()).unwrap();
        let effect = layout
            .original
            .beta_index(Component::Rate, 0, 1, 0, 1)
            .unwrap();
        assert_eq!(reported[effect], 0.0);
        let slope = layout
            .original
            .beta_index(Component::Slope, 0, 1, 0, 1)
            .unwrap();
        assert!(reported[slope].is_nan());
    }

    #[test]
    fn a_reduced_model_converges_to_equal_curves_and_no_better_objective() {
        // Treatment 1's curves differ from the reference's in the truth;
        // holding its effect at 0 must give one curve for both, at an
        // objective no lower than the full model's (its feasible set is
        // smaller), and converge as readily.
        for seed in 0..6 {
            let (full_model, _) = simulate(&Simulation::default(), 40 + seed);
            let reduced_model = full_model.clone().with_held_effects(vec![1]).unwrap();
            let settings = CountFitSettings::default();
            for species in 0..2 {
                let full = fit_species(&full_model, species, None, None, &settings).unwrap();
                let reduced = fit_species(&reduced_model, species, None, None, &settings).unwrap();
                assert!(
                    full.converged && reduced.converged,
                    "seed {seed}: {reduced:?}"
                );
                assert!(
                    reduced.iterations <= 2 * full.iterations + 60,
                    "seed {seed}: {} iterations against {}",
                    reduced.iterations,
                    full.iterations
                );
                let (a, b) = (&reduced.state.theta[0], &reduced.state.theta[1]);
                for (x, y) in a.iter().zip(b) {
                    assert!((x - y).abs() < 1e-5, "seed {seed}: {a:?} against {b:?}");
                }
                let spread = full.state.theta[0]
                    .iter()
                    .zip(&full.state.theta[1])
                    .map(|(x, y)| (x - y).abs())
                    .fold(0.0, f64::max);
                assert!(spread > 1e-3, "seed {seed}: the full fit's curves coincide");
                assert!(
                    reduced.objective >= full.objective - 1e-6,
                    "seed {seed}: {} < {}",
                    reduced.objective,
                    full.objective
                );
            }
        }
    }
}
