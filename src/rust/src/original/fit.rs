//! L-BFGS fitting of the model (model vignette §13.1) and the feasibility
//! repair of a parameter vector (model vignette §12.5).
//!
//! Both minimise with argmin 0.11's [`LBFGS`] and [`MoreThuenteLineSearch`],
//! wrapped so that the stopping rules are the original package's, not
//! argmin's:
//! - the fit stops when the objective's relative change between successive
//!   iterations is at most `ctol` (the original's relative-change rule, model
//!   vignette §13.1), or when `max_evals` distinct points have been evaluated
//!   (its evaluation limit);
//! - argmin's own gradient and cost tolerances are set to 0, which its
//!   strict `<` tests never satisfy, and its iteration limit is left unset.
//!
//! What the wrapper adds, and why:
//! - **One evaluation per point.** argmin asks for the cost and the gradient
//!   separately; both come from one [`Objective::value_and_gradient`] pass,
//!   cached for the last point and for the best one (More–Thuente returns
//!   to its best trial step when rounding stops it).
//! - **Best point kept aside.** More–Thuente can end on its last trial
//!   point rather than its best, and argmin loses its state when a run
//!   errors, so the lowest objective evaluated is recorded here and is what
//!   a fit returns.
//! - **No errors from the objective.** An error from a cost function aborts
//!   argmin's run; non-finite values are reported as the objective's cap
//!   ([`PSEUDO_INFINITY`]) with a zero gradient instead, which the line
//!   search treats as "too far" and backs off from.
//! - **A hard stop inside line searches.** Once the evaluation budget is
//!   spent, every new point gets a sentinel value (`f64::MIN`, zero
//!   gradient) that passes More–Thuente's sufficient-decrease and curvature
//!   tests at once, so the line search returns immediately and the run
//!   stops. The sentinel never becomes the result. The same happens after
//!   20·max_evals + 100 cost and gradient calls, in case a line search
//!   keeps asking about cached points, which use no budget.
//! - **Restarts.** When a line search fails (argmin reports it as a solver
//!   exit) or returns a point no better than the last iterate, L-BFGS is
//!   restarted from the best point with its memory cleared (a steepest
//!   descent step). A run that stalls without improving the best point
//!   ends the fit as [`FitCode::Failed`]. The original (NLopt's L-BFGS) does
//!   not restart (model vignette §16).

use crate::design::{Component, WarpKind};
use crate::original::objective::PSEUDO_INFINITY;
use crate::original::{Model, Objective};
use crate::outcome::FitSummary;
use argmin::core::{
    CostFunction, Error as ArgminError, Executor, Gradient, IterState, Problem, Solver, State,
    TerminationReason, TerminationStatus, KV,
};
use argmin::solver::linesearch::MoreThuenteLineSearch;
use argmin::solver::quasinewton::LBFGS;
use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Instant;

/// Largest accepted L-BFGS history; each entry holds two parameter-length vectors.
pub(crate) const MAX_MEMORY: usize = 1000;

/// Restarts from the best point allowed in one minimisation. Each restart
/// follows a run that improved the best point, so this only bounds
/// pathological zig-zagging; the evaluation budget bounds the rest.
pub(crate) const MAX_RESTARTS: usize = 50;

/// Value handed to the line search once a run must stop (see the module docs).
const STOP_SENTINEL: f64 = f64::MIN;

/// Settings of [`fit`] and [`repair_feasibility`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct FitSettings {
    /// Stop when |f_prev − f| ≤ ctol·|f| between successive iterations.
    pub(crate) ctol: f64,
    /// Most distinct points at which the objective is evaluated.
    pub(crate) max_evals: usize,
    /// L-BFGS history length (pairs of steps and gradient changes kept).
    pub(crate) memory: usize,
}

impl Default for FitSettings {
    fn default() -> Self {
        Self {
            ctol: crate::rules::DEFAULT_CTOL,
            max_evals: crate::rules::DEFAULT_MAX_EVALS,
            memory: 10,
        }
    }
}

impl FitSettings {
    pub(crate) fn validate(&self) -> Result<(), String> {
        if !(self.ctol.is_finite() && self.ctol > 0.0 && self.ctol < 1.0) {
            return Err(format!("ctol must be in (0, 1), got {}", self.ctol));
        }
        if self.max_evals == 0 {
            return Err("max_evals must be at least 1".to_string());
        }
        if !(1..=MAX_MEMORY).contains(&self.memory) {
            return Err(format!(
                "memory (the L-BFGS history) must be in 1..={MAX_MEMORY}, got {}",
                self.memory
            ));
        }
        Ok(())
    }
}

/// How a fit ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FitCode {
    /// The relative change of the objective fell to `ctol` or below
    /// (`success.code` 3 in `diagnostics.bs`).
    Converged,
    /// `max_evals` evaluations were used first (`success.code` 5 in
    /// `diagnostics.bs`).
    EvaluationLimit,
    /// The optimiser could not continue; the best point evaluated is returned.
    Failed(String),
}

impl FitCode {
    /// "converged", "evaluation limit" or "failed: <reason>".
    pub(crate) fn as_str(&self) -> Cow<'_, str> {
        match self {
            FitCode::Converged => Cow::Borrowed("converged"),
            FitCode::EvaluationLimit => Cow::Borrowed("evaluation limit"),
            FitCode::Failed(reason) => Cow::Owned(format!("failed: {reason}")),
        }
    }

    /// Only [`FitCode::Converged`] counts as converged (as the original counts
    /// only its relative-change stop).
    pub(crate) fn is_converged(&self) -> bool {
        matches!(self, FitCode::Converged)
    }
}

impl fmt::Display for FitCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_str())
    }
}

/// How the optimiser used the objective; for tests and diagnostics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct EvaluationDiagnostics {
    /// Calls of argmin's cost function.
    pub(crate) cost_calls: usize,
    /// Calls of argmin's gradient.
    pub(crate) gradient_calls: usize,
    /// Evaluations whose value was at or above the cap (a line search overshoot).
    pub(crate) capped_evaluations: usize,
    /// Evaluations of a point evaluated before (detected by a hash of its bits); 0 when the cache works.
    pub(crate) repeated_evaluations: usize,
    /// L-BFGS restarts from the best point.
    pub(crate) restarts: usize,
}

/// Fits the model from `start` by minimising nll + barrier penalty.
///
/// The barrier coefficients are set from `start` (model vignette §11.1),
/// which must be strictly inside the boundaries with a finite nll. The
/// returned point is the lowest objective evaluated; `nll` there costs one
/// more pass, not counted in `evaluations`. `max_gradient` is the largest
/// |gradient| of the penalised objective at that point; no estimate sits on
/// a bound (the barrier keeps them inside), so `on_bound` is 0.
pub(crate) fn fit(
    model: &Model,
    start: &[f64],
    settings: &FitSettings,
) -> Result<FitSummary, String> {
    fit_with_diagnostics(model, start, settings).map(|(result, _)| result)
}

/// [`fit`], also reporting how the objective was used.
pub(crate) fn fit_with_diagnostics(
    model: &Model,
    start: &[f64],
    settings: &FitSettings,
) -> Result<(FitSummary, EvaluationDiagnostics), String> {
    let clock = Instant::now();
    settings.validate()?;
    check_point(model, start, "start")?;
    let mut objective = Objective::new(model);
    objective
        .set_penalty_coefficients(start)
        .map_err(|reason| format!("cannot start the fit: {reason}"))?;
    let tracker = RefCell::new(Tracker::new(
        PenalizedNll { objective },
        start,
        settings.max_evals,
    ));
    let stop = minimise(&tracker, settings)?;
    let mut tracker = tracker.into_inner();
    let code = match stop {
        RunStop::Converged => FitCode::Converged,
        RunStop::Budget => FitCode::EvaluationLimit,
        // The fit's objective has no target; kept total for the type's sake.
        RunStop::Target => FitCode::Converged,
        RunStop::Stalled(reason) => FitCode::Failed(reason),
    };
    let best = tracker.best.clone();
    let nll = tracker.objective.objective.nll(&best.x)?;
    let diagnostics = tracker.diagnostics();
    let max_gradient = best
        .gradient
        .iter()
        .fold(0.0, |max: f64, g| max.max(g.abs()));
    let result = FitSummary {
        parameters: best.x,
        objective: best.value,
        nll,
        code: code.to_string(),
        converged: code.is_converged(),
        iterations: tracker.iterations,
        evaluations: tracker.evaluations,
        max_gradient,
        on_bound: 0,
        seconds: clock.elapsed().as_secs_f64(),
    };
    Ok((result, diagnostics))
}

fn check_point(model: &Model, x: &[f64], what: &str) -> Result<(), String> {
    if x.len() != model.parameter_count() {
        return Err(format!(
            "the {what} point has {} values, the model has {} parameters",
            x.len(),
            model.parameter_count()
        ));
    }
    if let Some(index) = x.iter().position(|v| !v.is_finite()) {
        let names = model.parameter_names();
        return Err(format!(
            "the {what} point is not finite at {} ({})",
            names[index], x[index]
        ));
    }
    Ok(())
}

/// What the guarded L-BFGS minimises.
trait SmoothObjective {
    /// Value at x, with the gradient written to `gradient`. Non-finite
    /// output is allowed and is capped by the caller.
    fn evaluate(&mut self, x: &[f64], gradient: &mut [f64]) -> f64;

    /// Whether the point of the last [`SmoothObjective::evaluate`] is good
    /// enough to stop at once.
    fn reached_target(&self) -> bool {
        false
    }
}

/// The fit's objective: nll + barrier penalty.
struct PenalizedNll<'m> {
    objective: Objective<'m>,
}

impl SmoothObjective for PenalizedNll<'_> {
    fn evaluate(&mut self, x: &[f64], gradient: &mut [f64]) -> f64 {
        // Lengths are checked before the fit starts, so this cannot fail;
        // NaN becomes the cap if it ever did.
        self.objective
            .value_and_gradient(x, gradient)
            .unwrap_or(f64::NAN)
    }
}

/// A point with its value and gradient.
#[derive(Clone, Debug)]
struct Evaluated {
    x: Vec<f64>,
    value: f64,
    gradient: Vec<f64>,
}

/// Shared between argmin's problem, the solver wrapper and the driver: the
/// objective, the one-point cache, the best point and the budget.
struct Tracker<S> {
    objective: S,
    /// The point argmin asked about last (possibly a sentinel).
    last: Evaluated,
    best: Evaluated,
    /// The first evaluated point for which the objective reached its target.
    target: Option<Evaluated>,
    max_evals: usize,
    /// Guards against a line search that keeps asking about the same
    /// (cached) point, which would not consume the evaluation budget.
    max_calls: usize,
    evaluations: usize,
    /// L-BFGS iterations, over all restarts.
    iterations: usize,
    cost_calls: usize,
    gradient_calls: usize,
    capped_evaluations: usize,
    restarts: usize,
    /// A sentinel was handed out: the budget (or call guard) ran out.
    budget_exhausted: bool,
    /// Why the current argmin run stopped, set by [`GuardedLbfgs`].
    run_stop: Option<RunStop>,
    seen: HashSet<u64>,
    repeated_evaluations: usize,
}

impl<S: SmoothObjective> Tracker<S> {
    /// Evaluates `start` (one evaluation) so that a best point always exists.
    fn new(objective: S, start: &[f64], max_evals: usize) -> Self {
        let empty = Evaluated {
            x: Vec::new(),
            value: f64::INFINITY,
            gradient: Vec::new(),
        };
        let mut tracker = Self {
            objective,
            last: empty.clone(),
            best: empty,
            target: None,
            max_evals,
            max_calls: max_evals.saturating_mul(20).saturating_add(100),
            evaluations: 0,
            iterations: 0,
            cost_calls: 0,
            gradient_calls: 0,
            capped_evaluations: 0,
            restarts: 0,
            budget_exhausted: false,
            run_stop: None,
            seen: HashSet::new(),
            repeated_evaluations: 0,
        };
        tracker.evaluate_into_last(start);
        tracker.best = tracker.last.clone();
        if tracker.objective.reached_target() {
            tracker.target = Some(tracker.last.clone());
        }
        tracker
    }

    fn diagnostics(&self) -> EvaluationDiagnostics {
        EvaluationDiagnostics {
            cost_calls: self.cost_calls,
            gradient_calls: self.gradient_calls,
            capped_evaluations: self.capped_evaluations,
            repeated_evaluations: self.repeated_evaluations,
            restarts: self.restarts,
        }
    }

    fn must_stop(&self) -> bool {
        self.budget_exhausted || self.target.is_some()
    }

    /// Makes `self.last` describe `x`, evaluating only when x is new. Besides
    /// the last point, the best one is remembered: More–Thuente returns to
    /// its best trial step when rounding stops its progress.
    fn ensure(&mut self, x: &[f64]) {
        if same_bits(&self.last.x, x) {
            return;
        }
        if same_bits(&self.best.x, x) {
            self.last.clone_from(&self.best);
            return;
        }
        let calls = self.cost_calls + self.gradient_calls;
        if self.evaluations >= self.max_evals || calls > self.max_calls {
            self.budget_exhausted = true;
        }
        if self.must_stop() {
            self.last.x.clear();
            self.last.x.extend_from_slice(x);
            self.last.value = STOP_SENTINEL;
            self.last.gradient.clear();
            self.last.gradient.resize(x.len(), 0.0);
            return;
        }
        self.evaluate_into_last(x);
        if self.last.value < self.best.value {
            self.best.clone_from(&self.last);
        }
        if self.objective.reached_target() {
            self.target = Some(self.last.clone());
        }
    }

    fn evaluate_into_last(&mut self, x: &[f64]) {
        self.evaluations += 1;
        if !self.seen.insert(bits_hash(x)) {
            self.repeated_evaluations += 1;
        }
        self.last.x.clear();
        self.last.x.extend_from_slice(x);
        self.last.gradient.clear();
        self.last.gradient.resize(x.len(), 0.0);
        let mut value = self.objective.evaluate(x, &mut self.last.gradient);
        // The objective's cap of 1e100 (model vignette §9.1) comes with a zero
        // gradient; do the same for any other unusable output so the line
        // search backs off.
        if !value.is_finite() || self.last.gradient.iter().any(|g| !g.is_finite()) {
            value = if value.is_finite() {
                value.max(PSEUDO_INFINITY)
            } else {
                PSEUDO_INFINITY
            };
            self.last.gradient.fill(0.0);
        }
        if value >= PSEUDO_INFINITY {
            self.capped_evaluations += 1;
        }
        self.last.value = value;
    }
}

fn same_bits(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

fn bits_hash(x: &[f64]) -> u64 {
    let mut hasher = DefaultHasher::new();
    for v in x {
        v.to_bits().hash(&mut hasher);
    }
    hasher.finish()
}

/// argmin's view of the objective: every call goes through the tracker's cache.
struct CachedProblem<'t, S> {
    tracker: &'t RefCell<Tracker<S>>,
}

impl<S: SmoothObjective> CostFunction for CachedProblem<'_, S> {
    type Param = Vec<f64>;
    type Output = f64;

    fn cost(&self, x: &Self::Param) -> Result<Self::Output, ArgminError> {
        let mut tracker = self.tracker.borrow_mut();
        tracker.cost_calls += 1;
        tracker.ensure(x);
        Ok(tracker.last.value)
    }
}

impl<S: SmoothObjective> Gradient for CachedProblem<'_, S> {
    type Param = Vec<f64>;
    type Gradient = Vec<f64>;

    fn gradient(&self, x: &Self::Param) -> Result<Self::Gradient, ArgminError> {
        let mut tracker = self.tracker.borrow_mut();
        tracker.gradient_calls += 1;
        tracker.ensure(x);
        Ok(tracker.last.gradient.clone())
    }
}

/// Why one argmin run ended.
#[derive(Clone, Debug, PartialEq)]
enum RunStop {
    /// Relative change at most ctol.
    Converged,
    /// Evaluation budget (or the call guard) spent.
    Budget,
    /// The objective reported its target reached.
    Target,
    /// Line search failure or no decrease.
    Stalled(String),
}

type InnerLbfgs = LBFGS<MoreThuenteLineSearch<Vec<f64>, Vec<f64>, f64>, Vec<f64>, Vec<f64>, f64>;
type LbfgsState = IterState<Vec<f64>, Vec<f64>, (), (), (), f64>;

/// argmin's L-BFGS with the stopping rules of the module docs.
struct GuardedLbfgs<'t, S> {
    inner: InnerLbfgs,
    tracker: &'t RefCell<Tracker<S>>,
    ctol: f64,
}

impl<'t, S> GuardedLbfgs<'t, S> {
    fn new(tracker: &'t RefCell<Tracker<S>>, settings: &FitSettings) -> Result<Self, String> {
        let inner = LBFGS::new(MoreThuenteLineSearch::new(), settings.memory)
            .with_tolerance_grad(0.0)
            .and_then(|solver| solver.with_tolerance_cost(0.0))
            .map_err(|error| format!("cannot configure L-BFGS: {error}"))?;
        Ok(Self {
            inner,
            tracker,
            ctol: settings.ctol,
        })
    }
}

impl<'t, S: SmoothObjective> Solver<CachedProblem<'t, S>, LbfgsState> for GuardedLbfgs<'t, S> {
    fn name(&self) -> &str {
        "L-BFGS with relative-change stopping"
    }

    fn init(
        &mut self,
        problem: &mut Problem<CachedProblem<'t, S>>,
        state: LbfgsState,
    ) -> Result<(LbfgsState, Option<KV>), ArgminError> {
        self.inner.init(problem, state)
    }

    fn next_iter(
        &mut self,
        problem: &mut Problem<CachedProblem<'t, S>>,
        state: LbfgsState,
    ) -> Result<(LbfgsState, Option<KV>), ArgminError> {
        let previous_cost = state.get_cost();
        let (state, kv) = self.inner.next_iter(problem, state)?;
        let mut tracker = self.tracker.borrow_mut();
        tracker.iterations += 1;
        let cost = state.get_cost();
        // False for NaN as well.
        let decreased = cost < previous_cost;
        let stop = if tracker.target.is_some() {
            Some(RunStop::Target)
        } else if tracker.budget_exhausted {
            Some(RunStop::Budget)
        } else if let TerminationStatus::Terminated(reason) = state.get_termination_status() {
            // L-BFGS turns a line-search error into a solver exit.
            Some(RunStop::Stalled(reason.text().to_string()))
        } else if !decreased {
            Some(RunStop::Stalled(
                "the line search found no decrease".to_string(),
            ))
        } else if previous_cost - cost <= self.ctol * cost.abs().max(f64::MIN_POSITIVE) {
            Some(RunStop::Converged)
        } else if tracker.evaluations >= tracker.max_evals {
            Some(RunStop::Budget)
        } else {
            None
        };
        tracker.run_stop = stop;
        Ok((state, kv))
    }

    fn terminate(&mut self, _state: &LbfgsState) -> TerminationStatus {
        match &self.tracker.borrow().run_stop {
            Some(stop) => {
                TerminationStatus::Terminated(TerminationReason::SolverExit(format!("{stop:?}")))
            }
            None => TerminationStatus::NotTerminated,
        }
    }
}

/// Runs guarded L-BFGS from the tracker's best point until a stopping rule
/// fires, restarting from the best point after a stalled run that improved it.
fn minimise<S: SmoothObjective>(
    tracker: &RefCell<Tracker<S>>,
    settings: &FitSettings,
) -> Result<RunStop, String> {
    loop {
        let (start, progress_mark) = {
            let mut state = tracker.borrow_mut();
            if state.target.is_some() {
                return Ok(RunStop::Target);
            }
            if state.budget_exhausted || state.evaluations >= state.max_evals {
                return Ok(RunStop::Budget);
            }
            if state.best.gradient.iter().all(|&g| g == 0.0) {
                // A stationary point: no descent direction exists. (A capped
                // best point cannot occur in a fit: its start is never capped.)
                return Ok(if state.best.value < PSEUDO_INFINITY {
                    RunStop::Converged
                } else {
                    RunStop::Stalled("the objective is capped at the best point".to_string())
                });
            }
            state.run_stop = None;
            (state.best.clone(), state.best.value)
        };
        let solver = GuardedLbfgs::new(tracker, settings)?;
        let outcome = Executor::new(CachedProblem { tracker }, solver)
            .configure(|config| {
                config
                    .param(start.x)
                    .cost(start.value)
                    .gradient(start.gradient)
            })
            .ctrlc(false)
            .run();
        let mut state = tracker.borrow_mut();
        let stop = match outcome {
            Ok(_) => state
                .run_stop
                .take()
                .unwrap_or_else(|| RunStop::Stalled("L-BFGS stopped without a reason".to_string())),
            Err(error) => RunStop::Stalled(format!("L-BFGS failed: {error}")),
        };
        match stop {
            RunStop::Stalled(reason) => {
                let improved = state.best.value < progress_mark;
                if improved && state.restarts < MAX_RESTARTS {
                    state.restarts += 1;
                    continue;
                }
                if state.target.is_some() {
                    return Ok(RunStop::Target);
                }
                return Ok(RunStop::Stalled(reason));
            }
            other => return Ok(other),
        }
    }
}

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
fn halve_point_effects(model: &Model, x: &mut [f64]) {
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
fn separate_baseline_points(model: &Model, x: &mut [f64]) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::design::Factor;

    use crate::original::synthetic::{build_case_from, strings, Case, SplitMix};

    fn build_case(
        seed: u64,
        contexts: usize,
        species: usize,
        degrees: Vec<usize>,
        factors: Vec<Factor>,
        ran_levels: usize,
    ) -> Case {
        build_case_from(
            &mut SplitMix(seed),
            contexts,
            species,
            degrees,
            factors,
            ran_levels,
        )
    }

    fn binary_factor() -> Vec<Factor> {
        vec![Factor::new("side", strings(&["left", "right"]))]
    }

    fn time_series_factor() -> Vec<Factor> {
        vec![Factor::time_series("age", strings(&["7", "12", "18"]))]
    }

    /// A feasible point near the truth: every value moved by up to
    /// `fraction`·max(|v|, 0.1).
    fn perturbed(truth: &[f64], seed: u64, fraction: f64) -> Vec<f64> {
        let mut rng = SplitMix(seed ^ 0xD1B5_4A32_D192_ED03);
        truth
            .iter()
            .map(|&v| v + rng.between(-fraction, fraction) * v.abs().max(0.1))
            .collect()
    }

    fn penalized_value(model: &Model, anchor: &[f64], x: &[f64]) -> f64 {
        let mut objective = Objective::new(model);
        objective.set_penalty_coefficients(anchor).unwrap();
        objective.value(x).unwrap()
    }

    /// Predicted log rates of the observed rows.
    fn observed_predictions(model: &Model, x: &[f64]) -> Vec<f64> {
        let table = model.table();
        let mut predictions = vec![0.0; table.row_count()];
        Objective::new(model)
            .predict_log(x, &mut predictions)
            .unwrap();
        predictions
            .iter()
            .zip(table.observed())
            .filter(|(_, &observed)| observed)
            .map(|(&p, _)| p)
            .collect()
    }

    fn observed_log_counts(model: &Model) -> Vec<f64> {
        let table = model.table();
        table
            .count_log()
            .iter()
            .zip(table.observed())
            .filter(|(_, &observed)| observed)
            .map(|(&y, _)| y)
            .collect()
    }

    fn root_mean_square(values: impl Iterator<Item = f64>) -> f64 {
        let (sum, n) = values.fold((0.0, 0usize), |(sum, n), v| (sum + v * v, n + 1));
        (sum / n as f64).sqrt()
    }

    #[test]
    fn fits_from_a_perturbed_truth_converge_and_track_the_true_curves() {
        let cases = [
            (1u64, 1, 2, vec![2, 0], binary_factor(), 3),
            (2, 1, 1, vec![3], time_series_factor(), 1),
            (3, 2, 1, vec![1, 2], binary_factor(), 4),
        ];
        for (seed, contexts, species, degrees, factors, ran_levels) in cases {
            let case = build_case(seed, contexts, species, degrees, factors, ran_levels);
            let model = &case.model;
            let start = perturbed(&case.truth, seed, 0.1);
            let start_value = penalized_value(model, &start, &start);
            let (result, diagnostics) =
                fit_with_diagnostics(model, &start, &FitSettings::default()).unwrap();
            eprintln!(
                "seed {seed}: {} parameters, {} evaluations, {:.3} s, {} → {}, {:?}, {:?}",
                model.parameter_count(),
                result.evaluations,
                result.seconds,
                start_value,
                result.objective,
                result.code,
                diagnostics
            );
            assert_eq!(result.code, FitCode::Converged.to_string(), "seed {seed}");
            assert!(result.converged, "seed {seed}");
            assert!(result.objective < start_value, "seed {seed}");
            assert_eq!(
                result.objective,
                penalized_value(model, &start, &result.parameters)
            );
            assert_eq!(
                result.nll,
                Objective::new(model).nll(&result.parameters).unwrap()
            );

            // The maximum likelihood beats the truth on the data it was drawn from.
            let truth_nll = Objective::new(model).nll(&case.truth).unwrap();
            assert!(
                result.nll <= truth_nll,
                "seed {seed}: fitted nll {} above the truth's {truth_nll}",
                result.nll
            );

            // Fitted and true curves agree far better than the data scatter
            // around the true curve.
            let fitted = observed_predictions(model, &result.parameters);
            let truth = observed_predictions(model, &case.truth);
            let counts = observed_log_counts(model);
            let noise = root_mean_square(counts.iter().zip(&truth).map(|(y, t)| y - t));
            let drift = root_mean_square(fitted.iter().zip(&truth).map(|(f, t)| f - t));
            let worst = fitted
                .iter()
                .zip(&truth)
                .map(|(f, t)| (f - t).abs())
                .fold(0.0, f64::max);
            eprintln!("seed {seed}: noise {noise:.3}, rms drift {drift:.3}, max drift {worst:.3}");
            assert!(drift < 0.6 * noise, "seed {seed}: {drift} vs {noise}");
            assert!(worst < 2.0 * noise, "seed {seed}: {worst} vs {noise}");

            // The ctol rule is per iteration, so it stops short of the
            // optimum where progress is slow (transition slopes drifting to
            // +∞ on a discrete bin axis, quadratic warps near 0): a fit to
            // ctol = 1e-13 from the same start gains only ~1e-4 relative.
            let tight = FitSettings {
                ctol: 1e-13,
                max_evals: 20_000,
                ..FitSettings::default()
            };
            let precise = fit(model, &start, &tight).unwrap();
            eprintln!(
                "seed {seed}: tight fit {} ({}, {} evaluations)",
                precise.objective, precise.code, precise.evaluations
            );
            assert!(precise.objective <= result.objective);
            assert!(
                result.objective - precise.objective <= 1e-3 * precise.objective.abs(),
                "seed {seed}"
            );
        }
    }

    #[test]
    fn a_larger_model_converges_within_the_default_budget() {
        // 4 genes, 6 treatments (binary × 3-level time series), 4 mice:
        // about the size of the original's tutorials (a few hundred parameters).
        let factors = vec![
            Factor::new("side", strings(&["left", "right"])),
            Factor::time_series("age", strings(&["7", "12", "18"])),
        ];
        let case = build_case(91, 1, 4, vec![3, 2, 1, 0], factors, 4);
        let model = &case.model;
        let start = perturbed(&case.truth, 91, 0.1);
        let (result, diagnostics) =
            fit_with_diagnostics(model, &start, &FitSettings::default()).unwrap();
        eprintln!(
            "{} parameters, {} observed rows: {} evaluations, {:.3} s, {}, {:?}",
            model.parameter_count(),
            model.table().observed_row_count(),
            result.evaluations,
            result.seconds,
            result.code,
            diagnostics
        );
        assert!(result.converged, "{}", result.code);
        assert!(result.objective < penalized_value(model, &start, &start));
        assert_eq!(diagnostics.repeated_evaluations, 0);
    }

    /// A start like the starting values of model vignette §12.4: baselines roughly
    /// right, every treatment effect 0, warps small and random.
    fn rough_start(case: &Case, seed: u64) -> Vec<f64> {
        let model = &case.model;
        let layout = model.layout();
        let design = model.design();
        let mut rng = SplitMix(seed);
        let mut x = perturbed(&case.truth, seed, 0.2);
        for component in Component::ALL {
            for c in 0..design.contexts().len() {
                for s in 0..design.species().len() {
                    for k in 0..component.count(layout.degree(c, s)) {
                        for i in 1..design.treatment_count() {
                            x[layout.beta_index(component, c, s, k, i).unwrap()] = 0.0;
                        }
                    }
                }
            }
        }
        for value in &mut x[layout.warp_start()..] {
            *value = rng.between(-0.1, 0.1);
        }
        x
    }

    #[test]
    fn fits_from_rough_starts_converge() {
        for seed in 101..109u64 {
            let factors = if seed % 2 == 0 {
                binary_factor()
            } else {
                time_series_factor()
            };
            let species = 1 + (seed % 3) as usize;
            let degrees = (0..species).map(|s| (seed as usize + s) % 4).collect();
            let case = build_case(seed, 1, species, degrees, factors, 1 + (seed % 4) as usize);
            let model = &case.model;
            let mut start = rough_start(&case, seed);
            let repair = repair_feasibility(model, &mut start, &FitSettings::default()).unwrap();
            assert!(repair.feasible, "seed {seed}: {repair:?}");
            let (result, diagnostics) =
                fit_with_diagnostics(model, &start, &FitSettings::default()).unwrap();
            eprintln!(
                "seed {seed}: {} parameters, {} evaluations, {}, {:?}",
                model.parameter_count(),
                result.evaluations,
                result.code,
                diagnostics
            );
            assert!(result.objective < penalized_value(model, &start, &start));
            assert!(result.converged, "seed {seed}: {}", result.code);
        }
    }

    #[test]
    fn every_point_is_evaluated_once() {
        let case = build_case(11, 1, 2, vec![1, 2], binary_factor(), 3);
        let start = perturbed(&case.truth, 11, 0.1);
        let (result, diagnostics) =
            fit_with_diagnostics(&case.model, &start, &FitSettings::default()).unwrap();
        assert_eq!(diagnostics.repeated_evaluations, 0);
        // The start is evaluated before argmin runs, every other point on
        // argmin's request; each line-search point is asked for its cost
        // and its gradient, so without the cache there would be twice as many.
        assert!(result.evaluations <= diagnostics.cost_calls + 1);
        assert!(
            diagnostics.cost_calls + diagnostics.gradient_calls >= 2 * (result.evaluations - 1)
        );
    }

    /// Rosenbrock's function, counting its own evaluations.
    struct CountingRosenbrock {
        points: Vec<Vec<f64>>,
    }

    impl SmoothObjective for CountingRosenbrock {
        fn evaluate(&mut self, x: &[f64], gradient: &mut [f64]) -> f64 {
            self.points.push(x.to_vec());
            let (a, b) = (x[0], x[1]);
            gradient[0] = -2.0 * (1.0 - a) - 400.0 * a * (b - a * a);
            gradient[1] = 200.0 * (b - a * a);
            (1.0 - a).powi(2) + 100.0 * (b - a * a).powi(2)
        }
    }

    #[test]
    fn the_cache_hands_argmin_each_point_once_and_the_ctol_rule_stops() {
        let settings = FitSettings::default();
        let objective = CountingRosenbrock { points: Vec::new() };
        let tracker = RefCell::new(Tracker::new(objective, &[-1.2, 1.0], 1000));
        let stop = minimise(&tracker, &settings).unwrap();
        let tracker = tracker.into_inner();
        assert_eq!(stop, RunStop::Converged);
        let points = &tracker.objective.points;
        assert_eq!(points.len(), tracker.evaluations);
        let distinct: HashSet<Vec<u64>> = points
            .iter()
            .map(|p| p.iter().map(|v| v.to_bits()).collect())
            .collect();
        assert_eq!(distinct.len(), points.len());
        assert!(tracker.cost_calls + tracker.gradient_calls > tracker.evaluations);
        assert!((tracker.best.x[0] - 1.0).abs() < 1e-2 && (tracker.best.x[1] - 1.0).abs() < 2e-2);
        // The best point is the lowest value ever evaluated.
        let mut scratch = [0.0; 2];
        let mut check = CountingRosenbrock { points: Vec::new() };
        let lowest = points
            .iter()
            .map(|p| check.evaluate(p, &mut scratch))
            .fold(f64::INFINITY, f64::min);
        assert_eq!(tracker.best.value, lowest);
    }

    /// x² with the gradient's sign flipped: every search direction climbs.
    struct MisleadingGradient;

    impl SmoothObjective for MisleadingGradient {
        fn evaluate(&mut self, x: &[f64], gradient: &mut [f64]) -> f64 {
            for (g, v) in gradient.iter_mut().zip(x) {
                *g = -2.0 * v;
            }
            x.iter().map(|v| v * v).sum()
        }
    }

    #[test]
    fn a_line_search_without_decrease_fails_at_the_best_point() {
        let start = [1.0, -2.0];
        let tracker = RefCell::new(Tracker::new(MisleadingGradient, &start, 1000));
        let stop = minimise(&tracker, &FitSettings::default()).unwrap();
        let tracker = tracker.into_inner();
        assert!(matches!(stop, RunStop::Stalled(_)), "{stop:?}");
        assert_eq!(tracker.best.x, start);
        assert_eq!(tracker.best.value, 5.0);
        assert!(tracker.evaluations < 1000);
    }

    /// |x₀| + |x₁ − 1|: kinks that break the line search's assumptions.
    struct Kinked;

    impl SmoothObjective for Kinked {
        fn evaluate(&mut self, x: &[f64], gradient: &mut [f64]) -> f64 {
            gradient[0] = x[0].signum();
            gradient[1] = (x[1] - 1.0).signum();
            x[0].abs() + (x[1] - 1.0).abs()
        }
    }

    #[test]
    fn non_smooth_objectives_end_with_the_best_point_and_within_budget() {
        for max_evals in [10, 100, 1000] {
            let settings = FitSettings {
                max_evals,
                ..FitSettings::default()
            };
            let tracker = RefCell::new(Tracker::new(Kinked, &[3.0, 4.5], max_evals));
            let stop = minimise(&tracker, &settings).unwrap();
            let tracker = tracker.into_inner();
            eprintln!(
                "max_evals {max_evals}: {stop:?}, best {:?} = {}, {:?}",
                tracker.best.x,
                tracker.best.value,
                tracker.diagnostics()
            );
            assert!(tracker.evaluations <= max_evals);
            assert!(tracker.best.value < 6.5);
            let mut gradient = [0.0; 2];
            assert_eq!(
                Kinked.evaluate(&tracker.best.x, &mut gradient),
                tracker.best.value
            );
        }
    }

    #[test]
    fn the_evaluation_limit_is_respected_exactly() {
        let case = build_case(21, 1, 2, vec![2, 1], binary_factor(), 3);
        let start = perturbed(&case.truth, 21, 0.1);
        for max_evals in [1, 2, 5, 17] {
            let settings = FitSettings {
                max_evals,
                ..FitSettings::default()
            };
            let result = fit(&case.model, &start, &settings).unwrap();
            assert_eq!(
                result.code,
                FitCode::EvaluationLimit.to_string(),
                "max_evals {max_evals}"
            );
            assert!(!result.converged);
            // No margin is needed: past the limit the line search is handed
            // a sentinel instead of a new evaluation.
            assert!(result.evaluations <= max_evals, "max_evals {max_evals}");
            assert!(result.objective.is_finite());
            assert!(result.objective <= penalized_value(&case.model, &start, &start));
        }
    }

    #[test]
    fn bad_start_points_and_settings_are_refused() {
        let case = build_case(31, 1, 1, vec![1], binary_factor(), 1);
        let settings = FitSettings::default();
        let short = &case.truth[1..];
        let error = fit(&case.model, short, &settings).unwrap_err();
        assert!(error.contains("parameters"), "{error}");
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let mut start = case.truth.clone();
            start[0] = bad;
            let error = fit(&case.model, &start, &settings).unwrap_err();
            assert!(error.contains("not finite"), "{error}");
            let error = repair_feasibility(&case.model, &mut start, &settings).unwrap_err();
            assert!(error.contains("not finite"), "{error}");
        }
        // Outside the boundaries: a negative transition slope.
        let mut start = case.truth.clone();
        let slope = case
            .model
            .layout()
            .beta_index(Component::Slope, 0, 0, 0, 0)
            .unwrap();
        start[slope] = -0.5;
        let error = fit(&case.model, &start, &settings).unwrap_err();
        assert!(error.contains("cannot start the fit"), "{error}");

        for bad in [
            FitSettings {
                ctol: 0.0,
                ..settings
            },
            FitSettings {
                ctol: f64::NAN,
                ..settings
            },
            FitSettings {
                max_evals: 0,
                ..settings
            },
            FitSettings {
                memory: 0,
                ..settings
            },
        ] {
            assert!(bad.validate().is_err());
            assert!(fit(&case.model, &case.truth, &bad).is_err());
        }
        assert!(settings.validate().is_ok());
    }

    #[test]
    fn the_line_search_backs_off_from_the_capped_region() {
        let case = build_case(41, 1, 2, vec![2, 0], binary_factor(), 3);
        let model = &case.model;
        let mut start = perturbed(&case.truth, 41, 0.1);
        // Bring the degree-0 gene's baseline rate down to just above the
        // −0.01 bound: its data want more, but its treatment effect and
        // warps pull single blocks toward the bound.
        let low_rate = model
            .layout()
            .beta_index(Component::Rate, 0, 1, 0, 0)
            .unwrap();
        start[low_rate] = 0.2;
        let mut objective = Objective::new(model);
        objective.set_penalty_coefficients(&start).unwrap();
        let mut gradient = vec![0.0; start.len()];
        let start_value = objective.value_and_gradient(&start, &mut gradient).unwrap();
        assert!(start_value < PSEUDO_INFINITY);
        // L-BFGS's first trial point is x − g (no curvature information yet):
        // it lies in the capped region.
        let first_trial: Vec<f64> = start.iter().zip(&gradient).map(|(x, g)| x - g).collect();
        assert!(objective.is_capped(&first_trial).unwrap());

        let (result, diagnostics) =
            fit_with_diagnostics(model, &start, &FitSettings::default()).unwrap();
        eprintln!("{:?}, {:?}", result.code, diagnostics);
        assert!(diagnostics.capped_evaluations > 0);
        assert!(result.objective.is_finite() && result.objective < PSEUDO_INFINITY);
        assert!(result.objective < start_value);
        assert!(!objective.is_capped(&result.parameters).unwrap());
        assert!(result.converged, "{}", result.code);
    }

    #[test]
    fn fit_codes_read_as_short_text() {
        assert_eq!(FitCode::Converged.as_str(), "converged");
        assert_eq!(FitCode::EvaluationLimit.as_str(), "evaluation limit");
        let failed = FitCode::Failed("line search".to_string());
        assert_eq!(failed.as_str(), "failed: line search");
        assert_eq!(failed.to_string(), "failed: line search");
        assert!(FitCode::Converged.is_converged());
        assert!(!FitCode::EvaluationLimit.is_converged());
        assert!(!failed.is_converged());
    }

    #[test]
    fn the_summary_reports_iterations_and_the_gradient_at_the_estimate() {
        let case = build_case(13, 1, 2, vec![1, 2], binary_factor(), 3);
        let start = perturbed(&case.truth, 13, 0.1);
        let result = fit(&case.model, &start, &FitSettings::default()).unwrap();
        assert!(result.iterations >= 1 && result.iterations <= result.evaluations);
        assert_eq!(result.on_bound, 0);
        // The gradient criterion, recomputed at the estimate.
        let mut objective = Objective::new(&case.model);
        objective.set_penalty_coefficients(&start).unwrap();
        let mut gradient = vec![0.0; start.len()];
        let value = objective
            .value_and_gradient(&result.parameters, &mut gradient)
            .unwrap();
        assert_eq!(value, result.objective);
        let largest = gradient.iter().fold(0.0, |m: f64, g| m.max(g.abs()));
        assert_eq!(result.max_gradient, largest);
        assert!(result.max_gradient > 0.0 && result.max_gradient.is_finite());
    }

    fn is_feasible(model: &Model, x: &[f64]) -> bool {
        let mut predictions = vec![0.0; model.table().row_count()];
        Objective::new(model)
            .is_feasible(x, &mut predictions)
            .unwrap()
    }

    #[test]
    fn a_feasible_point_is_left_untouched() {
        let case = build_case(51, 1, 2, vec![3, 1], binary_factor(), 3);
        let mut x = perturbed(&case.truth, 51, 0.05);
        let before = x.clone();
        let outcome = repair_feasibility(&case.model, &mut x, &FitSettings::default()).unwrap();
        assert!(outcome.feasible_at_start && outcome.feasible);
        assert_eq!(outcome.attempts, 0);
        assert!(outcome.min_distance > 0.0);
        assert!(same_bits(&x, &before));
    }

    #[test]
    fn infeasible_points_are_repaired() {
        let case = build_case(61, 1, 2, vec![3, 2], binary_factor(), 3);
        let model = &case.model;
        let layout = model.layout();
        let point = |s: usize, k: usize, i: usize| layout.beta_index(Component::Point, 0, s, k, i);

        // Transition points out of order, and one too close to the edge.
        let mut swapped = case.truth.clone();
        swapped.swap(point(0, 0, 0).unwrap(), point(0, 1, 0).unwrap());
        let mut at_edge = case.truth.clone();
        at_edge[point(1, 0, 0).unwrap()] = 0.5;
        // Crowded points: closer than the buffer, with a large effect.
        let mut crowded = case.truth.clone();
        let second = case.truth[point(0, 1, 0).unwrap()];
        crowded[point(0, 0, 0).unwrap()] = second - 0.5;
        crowded[point(0, 1, 1).unwrap()] = -6.0;

        for (what, mut x) in [
            ("swapped", swapped),
            ("at the edge", at_edge),
            ("crowded", crowded),
        ] {
            assert!(!is_feasible(model, &x), "{what}");
            let outcome = repair_feasibility(model, &mut x, &FitSettings::default()).unwrap();
            eprintln!("{what}: {outcome:?}");
            assert!(!outcome.feasible_at_start, "{what}");
            assert!(outcome.feasible, "{what}: {outcome:?}");
            assert!((1..=REPAIR_ATTEMPTS).contains(&outcome.attempts));
            assert!(outcome.min_distance > 0.0);
            assert!(is_feasible(model, &x), "{what}");
            // The repaired point can start a fit.
            let result = fit(model, &x, &FitSettings::default()).unwrap();
            assert!(result.objective < PSEUDO_INFINITY, "{what}");
        }
    }

    #[test]
    fn baseline_points_move_apart_only_within_their_own_curve() {
        // Two genes with one transition each: the original's flat walk would
        // treat gene 1's tpoint (late) and gene 2's (early) as neighbours.
        let case = build_case(71, 1, 2, vec![1, 1], binary_factor(), 1);
        let layout = case.model.layout();
        let first = layout.beta_index(Component::Point, 0, 0, 0, 0).unwrap();
        let second = layout.beta_index(Component::Point, 0, 1, 0, 0).unwrap();
        let mut x = case.truth.clone();
        x[first] = 25.0;
        x[second] = 5.0;
        let before = x.clone();
        separate_baseline_points(&case.model, &mut x);
        assert!(same_bits(&x, &before));

        // Within one curve, crowded neighbours move apart by buffer/4 each.
        let case = build_case(72, 1, 1, vec![2], binary_factor(), 1);
        let layout = case.model.layout();
        let lower = layout.beta_index(Component::Point, 0, 0, 0, 0).unwrap();
        let upper = layout.beta_index(Component::Point, 0, 0, 1, 0).unwrap();
        let mut x = case.truth.clone();
        x[lower] = 14.0;
        x[upper] = 15.0;
        separate_baseline_points(&case.model, &mut x);
        let quarter = case.model.tpoint_buffer() / 4.0;
        assert_eq!(x[lower], 14.0 - quarter);
        assert_eq!(x[upper], 15.0 + quarter);
    }

    #[test]
    fn halving_touches_only_point_effects_and_point_warps() {
        let case = build_case(81, 1, 1, vec![2], binary_factor(), 3);
        let layout = case.model.layout();
        let mut x = case.truth.clone();
        halve_point_effects(&case.model, &mut x);
        let mut halved = HashSet::new();
        for k in 0..2 {
            halved.insert(layout.beta_index(Component::Point, 0, 0, k, 1).unwrap());
        }
        for r in 0..3 {
            halved.insert(layout.warp_index(WarpKind::Point, 0, r).unwrap());
        }
        for (i, (&after, &before)) in x.iter().zip(&case.truth).enumerate() {
            let expected = if halved.contains(&i) {
                0.5 * before
            } else {
                before
            };
            assert_eq!(after, expected, "parameter {i}");
        }
    }
}
