//! Damped Newton minimisation of one species' objective at fixed variances
//! (model vignette §13.2).
//!
//! Each iteration solves (H + λD)δ = −g with the exact bordered Hessian H
//! and D its diagonal (Levenberg–Marquardt damping); λ shrinks when the
//! quadratic model predicts the decrease well and grows when it does not,
//! so steps are Newton steps near the optimum (quadratic convergence) and
//! shortened, safe steps away from it. A coordinate held at a box bound
//! (see [`Bounds`]) while the gradient pushes outwards is fixed for the
//! iteration.
//!
//! The fit has converged when, at the last point, H is positive definite,
//! every free coordinate's gradient times its standard error
//! (|g_i|·sqrt([H⁻¹]_ii)) is at most `gradient_tolerance`, and the Newton
//! decrement gᵀH⁻¹g/2 — the objective's predicted distance to the optimum —
//! is at most `decrement_tolerance`·max(1, |J|).
//!
//! The iteration is an argmin [`Solver`] ([`DampedNewton`], one iteration
//! per [`Solver::next_iter`]) run by argmin's [`Executor`] on any
//! [`NewtonObjective`]; [`newton`] runs it on one species' objective. With
//! [`NewtonSettings::trace`] an observer records one [`NewtonIteration`] per
//! iteration.

use super::linalg::{BorderedFactor, BorderedMatrix};
use super::objective::{Sigma, SpeciesProblem};
use super::unknowns::SpeciesState;
use crate::outcome::Termination;
use argmin::core::observers::{Observe, ObserverMode};
use argmin::core::{
    ArgminError, Error, Executor, IterState, Problem, Solver, State, TerminationReason,
    TerminationStatus, KV,
};
use argmin::kv;
use std::cell::RefCell;
use std::rc::Rc;

/// A coordinate with less curvature and slope than these is not informed by
/// the data (the objective is a sum of log-likelihoods, so an informed
/// coordinate has curvature of order one per observation).
pub(crate) const FLAT_CURVATURE: f64 = 1e-10;
pub(crate) const FLAT_SLOPE: f64 = 1e-8;

/// Settings of [`newton`].
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct NewtonSettings {
    pub max_iterations: usize,
    pub gradient_tolerance: f64,
    pub decrement_tolerance: f64,
    /// Record a per-iteration trace in [`NewtonOutcome::trace`]. Not part
    /// of any serialised form (engine messages, saved plans): decoded as
    /// false, so those stay as they were.
    #[serde(skip)]
    pub trace: bool,
}

impl Default for NewtonSettings {
    fn default() -> Self {
        NewtonSettings {
            max_iterations: crate::rules::NEWTON_MAX_ITERATIONS,
            gradient_tolerance: crate::rules::NEWTON_GRADIENT_TOLERANCE,
            decrement_tolerance: crate::rules::NEWTON_DECREMENT_TOLERANCE,
            trace: false,
        }
    }
}

/// Lower and upper box bounds per free coordinate (±∞ for none).
#[derive(Clone, Debug)]
pub(crate) struct Bounds {
    pub lower: Vec<f64>,
    pub upper: Vec<f64>,
}

impl Bounds {
    fn project(&self, x: &mut [f64]) {
        for ((v, &lo), &hi) in x.iter_mut().zip(&self.lower).zip(&self.upper) {
            *v = v.clamp(lo, hi);
        }
    }

    /// Coordinates at a bound whose descent direction points outwards.
    fn pinned(&self, x: &[f64], gradient: &[f64]) -> Vec<bool> {
        x.iter()
            .zip(gradient)
            .zip(self.lower.iter().zip(&self.upper))
            .map(|((&v, &g), (&lo, &hi))| (v <= lo && g >= 0.0) || (v >= hi && g <= 0.0))
            .collect()
    }

    /// Coordinates at a bound.
    pub fn at_bound(&self, x: &[f64]) -> usize {
        x.iter()
            .zip(self.lower.iter().zip(&self.upper))
            .filter(|(&v, (&lo, &hi))| v <= lo || v >= hi)
            .count()
    }
}

/// How a Newton run ended, with the evidence.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct NewtonOutcome {
    pub value: f64,
    pub iterations: usize,
    pub evaluations: usize,
    pub converged: bool,
    /// max_i |g_i|·sqrt([H⁻¹]_ii) at the last point (NaN when H is not
    /// positive definite there).
    pub scaled_gradient: f64,
    pub decrement: f64,
    pub positive_definite: bool,
    /// Why the run stopped when it did not converge, as a
    /// [`Termination`] note ("iteration limit: 200 Newton iterations",
    /// "failed: no step lowered the objective").
    pub stop: Option<String>,
    /// diag(H⁻¹) at the last point, when H is positive definite.
    pub inverse_diagonal: Option<Vec<f64>>,
    /// One row per iteration when [`NewtonSettings::trace`] is on (the
    /// start and the point after each step), empty otherwise.
    pub trace: Vec<NewtonIteration>,
}

/// Fixes coordinate `index`: its row and column become those of the identity.
pub(crate) fn pin(hessian: &mut BorderedMatrix, index: usize) {
    let border_offset = hessian.border_offset();
    let m = hessian.border_size();
    if index >= border_offset {
        let i = index - border_offset;
        for j in 0..m {
            hessian.border_block[i * m + j] = 0.0;
            hessian.border_block[j * m + i] = 0.0;
        }
        hessian.border_block[i * m + i] = 1.0;
        for k in 0..hessian.block_count() {
            let n = hessian.block_size(k);
            for row in 0..n {
                hessian.couplings[k][row * m + i] = 0.0;
            }
        }
        return;
    }
    for k in 0..hessian.block_count() {
        let (offset, n) = (hessian.block_offset(k), hessian.block_size(k));
        if index < offset || index >= offset + n {
            continue;
        }
        let i = index - offset;
        for j in 0..n {
            hessian.blocks[k][i * n + j] = 0.0;
            hessian.blocks[k][j * n + i] = 0.0;
        }
        hessian.blocks[k][i * n + i] = 1.0;
        for j in 0..m {
            hessian.couplings[k][i * m + j] = 0.0;
        }
        return;
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The convergence evidence at a point whose Hessian factors. The scaled
/// gradient needs diag(H⁻¹), which costs more than the Newton step; it is
/// computed only once the Newton decrement is within `decrement_limit`
/// (far from the optimum it would not pass anyway) and is then infinite.
struct Evidence {
    scaled_gradient: f64,
    decrement: f64,
    factor: BorderedFactor,
    inverse_diagonal: Option<Vec<f64>>,
}

fn evidence(
    hessian: &BorderedMatrix,
    gradient: &[f64],
    pinned: &[bool],
    decrement_limit: f64,
) -> Option<Evidence> {
    // A Hessian that is singular only by rounding (a coordinate the data
    // inform very weakly) gets a ridge far below any informed curvature;
    // one with negative curvature still does not factor.
    let n = gradient.len();
    let largest = (0..n)
        .map(|i| hessian.diagonal(i).abs())
        .fold(0.0, f64::max);
    let factor = hessian
        .factor(&vec![0.0; n])
        .or_else(|| hessian.factor(&vec![1e-10 * largest.max(1.0); n]))?;
    let newton = factor.solve(gradient);
    let decrement = dot(gradient, &newton).max(0.0);
    let (scaled_gradient, inverse_diagonal) = if decrement <= decrement_limit {
        let inverse = factor.inverse_diagonal();
        let scaled = gradient
            .iter()
            .zip(&inverse)
            .zip(pinned)
            .filter(|(_, &p)| !p)
            .map(|((g, v), _)| g.abs() * v.max(0.0).sqrt())
            .fold(0.0, f64::max);
        (scaled, Some(inverse))
    } else {
        (f64::INFINITY, None)
    };
    Some(Evidence {
        scaled_gradient,
        decrement,
        factor,
        inverse_diagonal,
    })
}

/// What [`run_newton`] minimises: a smooth function of the free coordinates
/// with its exact gradient and bordered Hessian.
pub(crate) trait NewtonObjective {
    /// An all-zero Hessian of the objective's block shape.
    fn hessian_shape(&self) -> BorderedMatrix;

    /// Per coordinate, the share of the Hessian's diagonal that the damping
    /// does not scale with (see [`SpeciesProblem::held_diagonal`]).
    fn held_diagonal(&self) -> Vec<f64>;

    /// The value at `x`, with the gradient and Hessian written (every entry).
    fn evaluate(&self, x: &[f64], gradient: &mut [f64], hessian: &mut BorderedMatrix) -> f64;

    /// The value at `x` alone.
    fn value(&self, x: &[f64]) -> f64;
}

/// One species' objective at fixed `sigma` as a function of its free
/// unknowns: the fixed ones are those of the state it starts from, which
/// [`SpeciesState::set_vector`] leaves as they are.
struct SpeciesObjective<'p, 'm> {
    problem: &'p SpeciesProblem<'m>,
    sigma: Sigma,
    scratch: RefCell<SpeciesState>,
}

impl SpeciesObjective<'_, '_> {
    fn at(&self, x: &[f64]) -> std::cell::RefMut<'_, SpeciesState> {
        let mut state = self.scratch.borrow_mut();
        state.set_vector(&self.problem.layout, x);
        state
    }
}

impl NewtonObjective for SpeciesObjective<'_, '_> {
    fn hessian_shape(&self) -> BorderedMatrix {
        self.problem.hessian_shape()
    }

    fn held_diagonal(&self) -> Vec<f64> {
        self.problem.held_diagonal()
    }

    fn evaluate(&self, x: &[f64], gradient: &mut [f64], hessian: &mut BorderedMatrix) -> f64 {
        let state = self.at(x);
        self.problem.evaluate(&state, self.sigma, gradient, hessian)
    }

    fn value(&self, x: &[f64]) -> f64 {
        let state = self.at(x);
        self.problem.value(&state, self.sigma)
    }
}

/// One row of a Newton run's trace ([`NewtonSettings::trace`]): the point
/// after `iteration` steps.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct NewtonIteration {
    pub iteration: usize,
    /// The objective there.
    pub value: f64,
    /// λ of the step taken from there (NaN where none was: the last row).
    pub lambda: f64,
    /// gᵀH⁻¹g there, as [`NewtonOutcome::decrement`] (NaN where H does not
    /// factor or the objective is not finite).
    pub decrement: f64,
    /// max_i |g_i|·sqrt([H⁻¹]_ii) there, as
    /// [`NewtonOutcome::scaled_gradient`]; NaN where not computed (H does
    /// not factor, or the decrement is still far above its tolerance).
    pub scaled_gradient: f64,
    /// Objective evaluations so far, this iteration's included.
    pub evaluations: usize,
}

/// argmin's state of a Newton run: the point x (param), the objective
/// there (cost), the iteration counter and how the run ended.
type NewtonState = IterState<Vec<f64>, (), (), (), (), f64>;

const STOP_NOT_FINITE: &str = "the objective is not finite";
const STOP_NO_DECREASE: &str = "no step lowered the objective";

/// The damped Newton of the module docs as an argmin [`Solver`]: each
/// [`Solver::next_iter`] evaluates the objective at the current point, pins
/// the coordinates held at a bound or not informed, checks the convergence
/// evidence and, unless the run stops there, takes one damped step. The run
/// stops inside `next_iter`, which sets the state's termination reason:
/// [`TerminationReason::SolverConverged`], [`TerminationReason::MaxItersReached`]
/// (at iteration `max_iterations`, after its convergence check, without a
/// step), or [`TerminationReason::SolverExit`] with [`STOP_NOT_FINITE`] or
/// [`STOP_NO_DECREASE`]. argmin's own limits (iterations, target cost) are
/// not used.
///
/// argmin's state keeps the point, its value and the iteration count; the
/// solver keeps what the Newton iteration carries over besides (λ and the
/// evaluation count), its work space (gradient and bordered Hessian, which
/// are the crate's own types, not argmin-math ones) and, once the run has
/// stopped, the convergence evidence at the last point.
pub(crate) struct DampedNewton<'b> {
    bounds: &'b Bounds,
    settings: NewtonSettings,
    lambda: f64,
    evaluations: usize,
    gradient: Vec<f64>,
    hessian: BorderedMatrix,
    held_diagonal: Vec<f64>,
    /// The evidence at the last point (`None` where H did not factor or
    /// the objective was not finite), set when the run stops.
    last: Option<Evidence>,
}

impl<'b> DampedNewton<'b> {
    fn new(
        objective: &impl NewtonObjective,
        n: usize,
        bounds: &'b Bounds,
        settings: &NewtonSettings,
    ) -> Self {
        DampedNewton {
            bounds,
            settings: *settings,
            lambda: 0.0,
            evaluations: 0,
            gradient: vec![0.0; n],
            hessian: objective.hessian_shape(),
            held_diagonal: objective.held_diagonal(),
            last: None,
        }
    }

    /// The trace row of the iteration that just ran (see [`TraceObserver`]).
    fn trace_kv(&self, lambda: f64, evidence: Option<&Evidence>) -> Option<KV> {
        if !self.settings.trace {
            return None;
        }
        let (decrement, scaled_gradient) = evidence.map_or((f64::NAN, f64::NAN), |e| {
            (e.decrement, finite_or_nan(e.scaled_gradient))
        });
        Some(kv!(
            "lambda" => lambda;
            "decrement" => decrement;
            "scaled_gradient" => scaled_gradient;
            "evaluations" => self.evaluations as u64;
        ))
    }

    fn stop(
        &mut self,
        state: NewtonState,
        reason: TerminationReason,
        evidence: Option<Evidence>,
    ) -> (NewtonState, Option<KV>) {
        let kv = self.trace_kv(f64::NAN, evidence.as_ref());
        self.last = evidence;
        (state.terminate_with(reason), kv)
    }
}

/// "1 Newton iteration", "200 Newton iterations".
pub(crate) fn counted(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

fn finite_or_nan(v: f64) -> f64 {
    if v.is_finite() {
        v
    } else {
        f64::NAN
    }
}

impl<O: NewtonObjective> Solver<O, NewtonState> for DampedNewton<'_> {
    fn name(&self) -> &str {
        "damped Newton"
    }

    fn init(
        &mut self,
        _problem: &mut Problem<O>,
        mut state: NewtonState,
    ) -> Result<(NewtonState, Option<KV>), Error> {
        let mut x = state
            .take_param()
            .ok_or_else(|| ArgminError::NotInitialized {
                text: "the damped Newton needs a starting point".into(),
            })?;
        self.bounds.project(&mut x);
        Ok((state.param(x), None))
    }

    fn next_iter(
        &mut self,
        problem: &mut Problem<O>,
        mut state: NewtonState,
    ) -> Result<(NewtonState, Option<KV>), Error> {
        let iteration = state.get_iter() as usize;
        let x = state
            .take_param()
            .ok_or_else(|| ArgminError::NotInitialized {
                text: "the damped Newton lost its point".into(),
            })?;
        let n = x.len();
        let (gradient, hessian) = (&mut self.gradient, &mut self.hessian);
        let value = problem.problem("evaluate_count", |p| Ok(p.evaluate(&x, gradient, hessian)))?;
        self.evaluations += 1;
        let state = state.param(x).cost(value);
        if !value.is_finite() {
            return Ok(self.stop(
                state,
                TerminationReason::SolverExit(STOP_NOT_FINITE.into()),
                None,
            ));
        }
        let x = state.get_param().expect("set above");
        let (gradient, hessian) = (&mut self.gradient, &mut self.hessian);
        let mut pinned = self.bounds.pinned(x, gradient);
        // A coordinate the data do not inform (no curvature, no slope: e.g.
        // the transition of a curve whose rates are all 0) is held where it is.
        for (i, p) in pinned.iter_mut().enumerate() {
            if hessian.diagonal(i).abs() <= FLAT_CURVATURE && gradient[i].abs() <= FLAT_SLOPE {
                *p = true;
            }
        }
        for (i, &p) in pinned.iter().enumerate() {
            if p {
                pin(hessian, i);
                gradient[i] = 0.0;
            }
        }
        let settings = &self.settings;
        let tolerance = settings.decrement_tolerance * value.abs().max(1.0);
        let current = evidence(hessian, gradient, &pinned, 200.0 * tolerance);
        if let Some(e) = &current {
            if e.scaled_gradient <= settings.gradient_tolerance && 0.5 * e.decrement <= tolerance {
                return Ok(self.stop(state, TerminationReason::SolverConverged, current));
            }
        }
        if iteration == settings.max_iterations {
            return Ok(self.stop(state, TerminationReason::MaxItersReached, current));
        }
        let diagonal_scale: Vec<f64> = {
            let own: Vec<f64> = (0..n)
                .map(|i| (hessian.diagonal(i) - self.held_diagonal[i]).abs())
                .collect();
            let largest = own.iter().copied().fold(0.0, f64::max);
            own.iter()
                .map(|d| d.max(1e-6 * largest).max(1e-12))
                .collect()
        };
        let mut accepted = None;
        let mut lambda = self.lambda;
        for _attempt in 0..60 {
            let shift: Vec<f64> = diagonal_scale.iter().map(|d| lambda * d).collect();
            let factor = match (&current, lambda == 0.0) {
                (Some(e), true) => Some(e.factor.clone()),
                _ => hessian.factor(&shift),
            };
            let Some(factor) = factor else {
                lambda = if lambda == 0.0 { 1e-3 } else { lambda * 10.0 };
                continue;
            };
            let mut step = factor.solve(gradient);
            step.iter_mut().for_each(|s| *s = -*s);
            let mut trial = x.clone();
            for (t, s) in trial.iter_mut().zip(&step) {
                *t += s;
            }
            self.bounds.project(&mut trial);
            let actual_step: Vec<f64> = trial.iter().zip(x).map(|(t, v)| t - v).collect();
            let predicted = -(dot(gradient, &actual_step)
                + 0.5 * dot(&actual_step, &hessian.multiply(&actual_step)));
            let trial_value = problem.problem("value_count", |p| Ok(p.value(&trial)))?;
            self.evaluations += 1;
            let decrease = value - trial_value;
            if trial_value.is_finite() && decrease >= 0.0 && (decrease > 0.0 || predicted <= 0.0) {
                let ratio = if predicted > 0.0 {
                    decrease / predicted
                } else {
                    1.0
                };
                let step_lambda = lambda;
                if ratio > 0.75 {
                    lambda = if lambda < 1e-6 { 0.0 } else { lambda / 5.0 };
                } else if ratio < 0.25 {
                    lambda = (lambda * 4.0).max(1e-4);
                }
                accepted = Some((trial, step_lambda));
                break;
            }
            lambda = if lambda == 0.0 { 1e-3 } else { lambda * 8.0 };
        }
        self.lambda = lambda;
        let Some((trial, step_lambda)) = accepted else {
            return Ok(self.stop(
                state,
                TerminationReason::SolverExit(STOP_NO_DECREASE.into()),
                current,
            ));
        };
        let kv = self.trace_kv(step_lambda, current.as_ref());
        Ok((state.param(trial), kv))
    }

    /// Only the solver stops a run (inside [`Solver::next_iter`]): argmin's
    /// iteration limit and target cost are not used.
    fn terminate_internal(&mut self, _state: &NewtonState) -> TerminationStatus {
        TerminationStatus::NotTerminated
    }
}

/// Records the trace of a run, one row per [`Solver::next_iter`], from the
/// state (iteration, value) and the key-value pairs the solver returns.
/// Added to the executor only when the trace is asked for.
struct TraceObserver {
    rows: Rc<RefCell<Vec<NewtonIteration>>>,
}

impl Observe<NewtonState> for TraceObserver {
    fn observe_iter(&mut self, state: &NewtonState, kv: &KV) -> Result<(), Error> {
        let float = |key: &str| kv.get(key).and_then(|v| v.get_float()).unwrap_or(f64::NAN);
        let evaluations = kv
            .get("evaluations")
            .and_then(|v| v.get_uint())
            .unwrap_or(0) as usize;
        self.rows.borrow_mut().push(NewtonIteration {
            iteration: state.get_iter() as usize,
            value: state.get_cost(),
            lambda: float("lambda"),
            decrement: float("decrement"),
            scaled_gradient: float("scaled_gradient"),
            evaluations,
        });
        Ok(())
    }
}

/// Minimises `objective` over x from `start` (projected into the bounds)
/// with [`DampedNewton`] run by argmin's [`Executor`]. Returns the outcome
/// and the last point.
pub(crate) fn run_newton<O: NewtonObjective>(
    objective: O,
    start: Vec<f64>,
    bounds: &Bounds,
    settings: &NewtonSettings,
) -> (NewtonOutcome, Vec<f64>) {
    let solver = DampedNewton::new(&objective, start.len(), bounds, settings);
    let mut executor = Executor::new(objective, solver)
        .configure(|state| state.param(start))
        .ctrlc(false)
        .timer(false);
    // Without the trace there is no observer (argmin then builds no
    // key-value log either) and the solver returns no key-value pairs.
    let rows = settings.trace.then(|| Rc::new(RefCell::new(Vec::new())));
    if let Some(rows) = &rows {
        executor = executor.add_observer(
            TraceObserver {
                rows: Rc::clone(rows),
            },
            ObserverMode::Always,
        );
    }
    // Neither the solver, nor the objective, nor the observer returns an
    // error, and the run has no checkpoints or Ctrl-C handler.
    let mut result = executor
        .run()
        .expect("the damped Newton's run does not fail");
    let solver = result.solver;
    let state = &mut result.state;
    // The run's last next_iter evaluated the last point and stopped there
    // without a step: the steps taken are one fewer than the calls.
    let iterations = state.get_iter() as usize - 1;
    let value = state.get_cost();
    let x = state.take_param().expect("the run keeps its point");
    let (converged, stop) = match state.get_termination_reason() {
        Some(TerminationReason::SolverConverged) => (true, None),
        Some(TerminationReason::MaxItersReached) => (
            false,
            Some(
                Termination::IterationLimit
                    .with_detail(&counted(settings.max_iterations, "Newton iteration")),
            ),
        ),
        Some(TerminationReason::SolverExit(reason)) => {
            (false, Some(Termination::Failed(reason.clone()).to_string()))
        }
        other => unreachable!("the damped Newton does not stop with {other:?}"),
    };
    let (scaled_gradient, decrement, inverse_diagonal) = match solver.last {
        Some(e) => {
            let inverse = e
                .inverse_diagonal
                .unwrap_or_else(|| e.factor.inverse_diagonal());
            (finite_or_nan(e.scaled_gradient), e.decrement, Some(inverse))
        }
        None => (f64::NAN, f64::NAN, None),
    };
    let outcome = NewtonOutcome {
        value,
        iterations,
        evaluations: solver.evaluations,
        converged,
        scaled_gradient,
        decrement,
        positive_definite: inverse_diagonal.is_some(),
        stop,
        inverse_diagonal,
        trace: rows.map(|rows| rows.take()).unwrap_or_default(),
    };
    (outcome, x)
}

/// Minimises the species' objective over its free unknowns from `state`
/// (updated in place) at fixed `sigma`.
pub(crate) fn newton(
    problem: &SpeciesProblem,
    state: &mut SpeciesState,
    sigma: Sigma,
    bounds: &Bounds,
    settings: &NewtonSettings,
) -> NewtonOutcome {
    let layout = &problem.layout;
    let start = state.to_vector(layout);
    let objective = SpeciesObjective {
        problem,
        sigma,
        scratch: RefCell::new(state.clone()),
    };
    let (outcome, x) = run_newton(objective, start, bounds, settings);
    state.set_vector(layout, &x);
    outcome
}

#[cfg(test)]
mod tests {
    use super::super::objective::SpeciesProblem;
    use super::super::start::starting_state_with;
    use super::super::tests_support::{simulate, Simulation};
    use super::*;

    #[test]
    fn newton_reaches_a_stationary_point_where_no_small_move_helps() {
        let (model, _) = simulate(&Simulation::default(), 11);
        for species in 0..2 {
            let problem = SpeciesProblem::new(&model, species, [true, true, true]);
            let mut state = starting_state_with(&problem, None, 0.8).unwrap();
            let bounds = super::super::settings::bounds_for(&problem);
            let sigma = [0.1, 0.1, 0.1];
            let outcome = newton(
                &problem,
                &mut state,
                sigma,
                &bounds,
                &NewtonSettings::default(),
            );
            assert!(outcome.converged, "{outcome:?}");
            assert!(outcome.iterations < 60, "{outcome:?}");
            // No coordinate move of 1e-4 lowers the objective.
            let x = state.to_vector(&problem.layout);
            for i in 0..x.len() {
                for delta in [-1e-4, 1e-4] {
                    let mut moved = state.clone();
                    let mut y = x.clone();
                    y[i] += delta;
                    moved.set_vector(&problem.layout, &y);
                    assert!(problem.value(&moved, sigma) >= outcome.value - 1e-9);
                }
            }
        }
    }

    /// A function of x with its exact gradient and dense Hessian (n×n,
    /// row-major), stored in a bordered matrix of the given block sizes and
    /// border, for tests of the solver alone.
    struct Dense<F> {
        sizes: Vec<usize>,
        border: usize,
        f: F,
    }

    impl<F: Fn(&[f64]) -> (f64, Vec<f64>, Vec<f64>)> NewtonObjective for Dense<F> {
        fn hessian_shape(&self) -> BorderedMatrix {
            BorderedMatrix::new(self.sizes.clone(), self.border)
        }

        fn held_diagonal(&self) -> Vec<f64> {
            vec![0.0; self.hessian_shape().dimension()]
        }

        fn evaluate(&self, x: &[f64], gradient: &mut [f64], hessian: &mut BorderedMatrix) -> f64 {
            let (value, g, h) = (self.f)(x);
            gradient.copy_from_slice(&g);
            fill(hessian, &h);
            value
        }

        fn value(&self, x: &[f64]) -> f64 {
            (self.f)(x).0
        }
    }

    /// Writes a dense symmetric matrix into a bordered one (entries between
    /// two blocks must be 0).
    fn fill(hessian: &mut BorderedMatrix, dense: &[f64]) {
        hessian.clear();
        let n = hessian.dimension();
        let (m, border) = (hessian.border_size(), hessian.border_offset());
        let block = |i: usize| {
            (0..hessian.block_count())
                .find(|&k| {
                    let offset = hessian.block_offset(k);
                    i >= offset && i < offset + hessian.block_size(k)
                })
                .unwrap()
        };
        let blocks: Vec<usize> = (0..border).map(block).collect();
        for i in 0..n {
            for j in 0..n {
                let v = dense[i * n + j];
                match (i >= border, j >= border) {
                    (true, true) => hessian.border_block[(i - border) * m + j - border] = v,
                    (false, true) => {
                        let k = blocks[i];
                        let row = i - hessian.block_offset(k);
                        hessian.couplings[k][row * m + j - border] = v;
                    }
                    (true, false) => {}
                    (false, false) if blocks[i] == blocks[j] => {
                        let k = blocks[i];
                        let (offset, size) = (hessian.block_offset(k), hessian.block_size(k));
                        hessian.blocks[k][(i - offset) * size + j - offset] = v;
                    }
                    (false, false) => assert_eq!(v, 0.0, "({i}, {j}) lies between two blocks"),
                }
            }
        }
    }

    fn unbounded(n: usize) -> Bounds {
        Bounds {
            lower: vec![f64::NEG_INFINITY; n],
            upper: vec![f64::INFINITY; n],
        }
    }

    fn traced() -> NewtonSettings {
        NewtonSettings {
            trace: true,
            ..NewtonSettings::default()
        }
    }

    /// ½ (x − m)ᵀ A (x − m), with its gradient and Hessian.
    fn quadratic(a: Vec<f64>, m: Vec<f64>) -> impl Fn(&[f64]) -> (f64, Vec<f64>, Vec<f64>) {
        move |x: &[f64]| {
            let n = m.len();
            let d: Vec<f64> = x.iter().zip(&m).map(|(x, m)| x - m).collect();
            let g: Vec<f64> = (0..n)
                .map(|i| (0..n).map(|j| a[i * n + j] * d[j]).sum())
                .collect();
            (0.5 * dot(&d, &g), g, a.clone())
        }
    }

    /// sqrt(1 + x²): convex, minimum 1 at 0, and Newton's step from x lands
    /// at −x³, so from |x| > 1 the full step overshoots.
    fn hyperbola(x: &[f64]) -> (f64, Vec<f64>, Vec<f64>) {
        let r = (1.0 + x[0] * x[0]).sqrt();
        (r, vec![x[0] / r], vec![1.0 / (r * r * r)])
    }

    #[test]
    fn a_convex_quadratic_is_solved_by_one_newton_step_from_anywhere() {
        // Two 1×1 blocks and a border of one, coupled to both.
        let a = vec![4.0, 0.0, 1.0, 0.0, 3.0, 1.0, 1.0, 1.0, 5.0];
        let m = vec![1.0, -2.0, 0.5];
        for start in [
            vec![0.0, 0.0, 0.0],
            vec![10.0, -7.0, 3.0],
            vec![-50.0, 40.0, 100.0],
        ] {
            let objective = Dense {
                sizes: vec![1, 1],
                border: 1,
                f: quadratic(a.clone(), m.clone()),
            };
            let (outcome, x) = run_newton(objective, start.clone(), &unbounded(3), &traced());
            assert!(outcome.converged, "{outcome:?}");
            assert_eq!(outcome.stop, None);
            // One step (λ = 0: the exact Newton step), then the check at m.
            assert_eq!(outcome.iterations, 1, "{outcome:?}");
            assert_eq!(outcome.evaluations, 3, "{outcome:?}");
            for (x, m) in x.iter().zip(&m) {
                assert!((x - m).abs() <= 1e-12, "{x} vs {m}");
            }
            assert!(outcome.value.abs() <= 1e-20, "{outcome:?}");
            // The decrement at the start is gᵀA⁻¹g = (x − m)ᵀA(x − m).
            let expected = 2.0 * quadratic(a.clone(), m.clone())(&start).0;
            let trace = &outcome.trace;
            assert_eq!(trace.len(), 2, "{trace:?}");
            assert_eq!(trace[0].iteration, 0);
            assert_eq!(trace[0].lambda, 0.0);
            assert!((trace[0].decrement - expected).abs() <= 1e-12 * expected);
            assert_eq!(trace[0].evaluations, 2);
            assert_eq!(trace[1].iteration, 1);
            assert!(trace[1].lambda.is_nan());
            assert_eq!(trace[1].evaluations, 3);
            assert_eq!(trace[1].value.to_bits(), outcome.value.to_bits());
            assert_eq!(trace[1].decrement.to_bits(), outcome.decrement.to_bits());
            assert_eq!(
                trace[1].scaled_gradient.to_bits(),
                outcome.scaled_gradient.to_bits()
            );
        }
    }

    #[test]
    fn a_minimum_outside_the_box_ends_at_the_bound_with_that_coordinate_pinned() {
        // Unconstrained minimum (3, −1); x₀ ≤ 2. With x₀ at 2 the best x₁ is
        // m₁ − A₀₁/A₁₁·(2 − m₀) = −0.5, where ∂f/∂x₀ = −1.75 still pushes
        // outwards.
        let a = vec![2.0, 0.5, 0.5, 1.0];
        let m = vec![3.0, -1.0];
        let f = quadratic(a, m);
        let bounds = Bounds {
            lower: vec![-1.0, f64::NEG_INFINITY],
            upper: vec![2.0, f64::INFINITY],
        };
        let objective = Dense {
            sizes: vec![2],
            border: 0,
            f: &f,
        };
        let (outcome, x) = run_newton(objective, vec![0.0, 0.0], &bounds, &traced());
        assert!(outcome.converged, "{outcome:?}");
        assert_eq!(x[0], 2.0);
        assert!((x[1] + 0.5).abs() <= 1e-12, "{x:?}");
        assert_eq!(bounds.at_bound(&x), 1);
        let gradient = f(&x).1;
        assert!((gradient[0] + 1.75).abs() <= 1e-12, "{gradient:?}");
        // Converged with that gradient: the pinned coordinate is left out
        // of the evidence, and its row of H is the identity's.
        assert!(outcome.scaled_gradient <= NewtonSettings::default().gradient_tolerance);
        assert_eq!(outcome.inverse_diagonal.as_ref().unwrap()[0], 1.0);
    }

    #[test]
    fn a_step_that_overshoots_is_damped_and_the_minimum_still_reached() {
        // The full Newton step from 3 lands at −27, higher up.
        let (value, g, h) = hyperbola(&[3.0]);
        let newton_point = 3.0 - g[0] / h[0];
        assert!((newton_point + 27.0).abs() < 1e-9);
        assert!(hyperbola(&[newton_point]).0 > value);
        let objective = Dense {
            sizes: vec![1],
            border: 0,
            f: hyperbola,
        };
        let (outcome, x) = run_newton(objective, vec![3.0], &unbounded(1), &traced());
        assert!(outcome.converged, "{outcome:?}");
        // Converged means ½gᵀH⁻¹g = ½x²(1 + x²) ≤ 1e-10 (the decrement
        // tolerance, |J| ≈ 1), so |x| ≤ sqrt(2e-10) and J − 1 ≈ x²/2.
        let tolerance = NewtonSettings::default().decrement_tolerance;
        assert!(x[0].abs() <= (2.0 * tolerance).sqrt(), "{x:?}");
        assert!(
            outcome.value >= 1.0 && outcome.value - 1.0 <= tolerance,
            "{outcome:?}"
        );
        // The first step needed damping: trials were rejected before one
        // with λ > 0 lowered the objective.
        let first = &outcome.trace[0];
        assert!(first.lambda > 0.0, "{first:?}");
        assert!(first.evaluations > 2, "{first:?}");
        assert_eq!(outcome.trace.len(), outcome.iterations + 1);
        for pair in outcome.trace.windows(2) {
            assert!(pair[1].value <= pair[0].value, "{pair:?}");
            assert!(pair[1].evaluations > pair[0].evaluations, "{pair:?}");
        }
        assert_eq!(
            outcome.trace.last().unwrap().evaluations,
            outcome.evaluations
        );
    }

    #[test]
    fn a_run_that_needs_more_iterations_than_allowed_reports_the_limit() {
        let objective = || Dense {
            sizes: vec![1],
            border: 0,
            f: hyperbola,
        };
        let (full, _) = run_newton(objective(), vec![3.0], &unbounded(1), &traced());
        assert!(full.converged && full.iterations > 1, "{full:?}");
        let settings = NewtonSettings {
            max_iterations: 1,
            ..traced()
        };
        let (outcome, x) = run_newton(objective(), vec![3.0], &unbounded(1), &settings);
        assert!(!outcome.converged, "{outcome:?}");
        assert_eq!(outcome.iterations, 1);
        assert_eq!(
            outcome.stop.as_deref(),
            Some("iteration limit: 1 Newton iteration")
        );
        assert_eq!(outcome.trace.len(), 2);
        // It stopped where the full run's first step went.
        assert_eq!(outcome.value.to_bits(), full.trace[1].value.to_bits());
        assert!(x[0].abs() < 3.0);
        let zero = NewtonSettings {
            max_iterations: 0,
            ..NewtonSettings::default()
        };
        let (outcome, x) = run_newton(objective(), vec![3.0], &unbounded(1), &zero);
        assert_eq!(
            (outcome.converged, outcome.iterations, outcome.evaluations),
            (false, 0, 1)
        );
        assert_eq!(
            outcome.stop.as_deref(),
            Some("iteration limit: 0 Newton iterations")
        );
        assert_eq!(x, vec![3.0]);
    }

    #[test]
    fn a_run_stops_where_the_objective_is_not_finite_or_nothing_lowers_it() {
        let nan_value = Dense {
            sizes: vec![1],
            border: 0,
            f: |x: &[f64]| (x[0].ln(), vec![1.0 / x[0]], vec![-1.0 / (x[0] * x[0])]),
        };
        let (outcome, x) = run_newton(nan_value, vec![-1.0], &unbounded(1), &traced());
        assert!(outcome.value.is_nan());
        assert_eq!(
            (outcome.converged, outcome.iterations, outcome.evaluations),
            (false, 0, 1)
        );
        assert_eq!(
            outcome.stop.as_deref(),
            Some("failed: the objective is not finite")
        );
        assert!(!outcome.positive_definite && outcome.inverse_diagonal.is_none());
        assert_eq!(outcome.trace.len(), 1);
        assert_eq!(x, vec![-1.0]);
        // A curvature that is not a number factors at no damping: no step
        // is tried.
        let nan_curvature = Dense {
            sizes: vec![1],
            border: 0,
            f: |x: &[f64]| (x[0] * x[0], vec![2.0 * x[0]], vec![f64::NAN]),
        };
        let (outcome, x) = run_newton(nan_curvature, vec![1.0], &unbounded(1), &traced());
        assert_eq!(
            (outcome.converged, outcome.iterations, outcome.evaluations),
            (false, 0, 1)
        );
        assert_eq!(
            outcome.stop.as_deref(),
            Some("failed: no step lowered the objective")
        );
        assert_eq!(outcome.value, 1.0);
        assert_eq!(x, vec![1.0]);
    }

    #[test]
    fn the_trace_leaves_the_fit_as_it_is() {
        let (model, _) = simulate(&Simulation::default(), 12);
        for species in 0..2 {
            let problem = SpeciesProblem::new(&model, species, [true, true, true]);
            let start = starting_state_with(&problem, None, 0.8).unwrap();
            let bounds = super::super::settings::bounds_for(&problem);
            let sigma = [0.1, 0.1, 0.1];
            let mut plain_state = start.clone();
            let plain = newton(
                &problem,
                &mut plain_state,
                sigma,
                &bounds,
                &NewtonSettings::default(),
            );
            let mut traced_state = start.clone();
            let mut with_trace = newton(&problem, &mut traced_state, sigma, &bounds, &traced());
            assert!(plain.trace.is_empty());
            let trace = std::mem::take(&mut with_trace.trace);
            assert_eq!(format!("{plain:?}"), format!("{with_trace:?}"));
            assert_eq!(plain_state, traced_state);
            assert_eq!(trace.len(), plain.iterations + 1);
            for (i, row) in trace.iter().enumerate() {
                assert_eq!(row.iteration, i);
            }
            let last = trace.last().unwrap();
            assert_eq!(last.evaluations, plain.evaluations);
            assert_eq!(last.value.to_bits(), plain.value.to_bits());
            assert_eq!(last.decrement.to_bits(), plain.decrement.to_bits());
        }
    }

    #[test]
    fn the_trace_setting_is_not_serialised() {
        #[derive(serde::Serialize, serde::Deserialize)]
        struct Before {
            max_iterations: usize,
            gradient_tolerance: f64,
            decrement_tolerance: f64,
        }
        let settings = NewtonSettings {
            max_iterations: 7,
            gradient_tolerance: 1e-3,
            decrement_tolerance: 1e-9,
            trace: true,
        };
        let before = Before {
            max_iterations: 7,
            gradient_tolerance: 1e-3,
            decrement_tolerance: 1e-9,
        };
        let config = bincode::config::standard();
        let bytes = bincode::serde::encode_to_vec(settings, config).unwrap();
        assert_eq!(
            bytes,
            bincode::serde::encode_to_vec(&before, config).unwrap()
        );
        let (decoded, _): (NewtonSettings, usize) =
            bincode::serde::decode_from_slice(&bytes, config).unwrap();
        assert_eq!(
            decoded,
            NewtonSettings {
                trace: false,
                ..settings
            }
        );
    }

    /// The bit patterns of a few fits, printed for a before/after comparison
    /// of a change that must not move any result:
    /// `cargo test --features test-hooks newton_fingerprint -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn newton_fingerprint() {
        fn bits(v: &[f64]) -> Vec<String> {
            v.iter().map(|x| format!("{:016x}", x.to_bits())).collect()
        }
        fn line(outcome: &NewtonOutcome, x: &[f64]) -> String {
            format!(
                "value {:016x} iterations {} evaluations {} converged {} scaled {:016x} decrement {:016x} pd {} stop {:?} inverse {:?} x {:?}",
                outcome.value.to_bits(),
                outcome.iterations,
                outcome.evaluations,
                outcome.converged,
                outcome.scaled_gradient.to_bits(),
                outcome.decrement.to_bits(),
                outcome.positive_definite,
                outcome.stop,
                outcome.inverse_diagonal.as_deref().map(bits),
                bits(x),
            )
        }
        for seed in [11, 12, 13] {
            let (model, _) = simulate(&Simulation::default(), seed);
            for species in 0..2 {
                for max_iterations in [1, 3, 100] {
                    let problem = SpeciesProblem::new(&model, species, [true, true, true]);
                    let mut state = starting_state_with(&problem, None, 0.8).unwrap();
                    let bounds = super::super::settings::bounds_for(&problem);
                    let settings = NewtonSettings {
                        max_iterations,
                        ..NewtonSettings::default()
                    };
                    let outcome = newton(&problem, &mut state, [0.1, 0.1, 0.1], &bounds, &settings);
                    let x = state.to_vector(&problem.layout);
                    println!(
                        "FP direct {seed} {species} {max_iterations} {}",
                        line(&outcome, &x)
                    );
                }
            }
        }
        for seed in [1, 2, 3, 4] {
            let plan = super::super::tests_support::fitted_plan(seed);
            for fit in &plan.estimate.species {
                println!("FP plan {seed} {fit:?}");
            }
        }
    }
}
