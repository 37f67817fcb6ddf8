//! The guarded L-BFGS that both the original likelihood's fit (model
//! vignette §13.1, [`super::fit`]) and the feasibility repair of a parameter
//! vector (§12.5, [`super::repair`]) run. It knows nothing of the model: it
//! minimises a [`SmoothObjective`].
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
//!   ends the fit as [`Termination::Failed`](crate::outcome::Termination::Failed). The original (NLopt's L-BFGS) does
//!   not restart (model vignette §16).

use super::fit::{EvaluationDiagnostics, FitSettings};
use crate::original::objective::PSEUDO_INFINITY;
use argmin::core::{
    CostFunction, Error as ArgminError, Executor, Gradient, IterState, Problem, Solver, State,
    TerminationReason, TerminationStatus, KV,
};
use argmin::solver::linesearch::MoreThuenteLineSearch;
use argmin::solver::quasinewton::LBFGS;
use std::cell::RefCell;
use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

/// Largest accepted L-BFGS history; each entry holds two parameter-length vectors.
pub(crate) const MAX_MEMORY: usize = 1000;

/// Restarts from the best point allowed in one minimisation. Each restart
/// follows a run that improved the best point, so this only bounds
/// pathological zig-zagging; the evaluation budget bounds the rest.
pub(crate) const MAX_RESTARTS: usize = 50;

/// Value handed to the line search once a run must stop (see the module docs).
const STOP_SENTINEL: f64 = f64::MIN;

/// What the guarded L-BFGS minimises.
pub(super) trait SmoothObjective {
    /// Value at x, with the gradient written to `gradient`. Non-finite
    /// output is allowed and is capped by the caller.
    fn evaluate(&mut self, x: &[f64], gradient: &mut [f64]) -> f64;

    /// Whether the point of the last [`SmoothObjective::evaluate`] is good
    /// enough to stop at once.
    fn reached_target(&self) -> bool {
        false
    }
}

/// A point with its value and gradient.
#[derive(Clone, Debug)]
pub(super) struct Evaluated {
    pub(super) x: Vec<f64>,
    pub(super) value: f64,
    pub(super) gradient: Vec<f64>,
}

/// Shared between argmin's problem, the solver wrapper and the driver: the
/// objective, the one-point cache, the best point and the budget.
pub(super) struct Tracker<S> {
    pub(super) objective: S,
    /// The point argmin asked about last (possibly a sentinel).
    pub(super) last: Evaluated,
    pub(super) best: Evaluated,
    /// The first evaluated point for which the objective reached its target.
    pub(super) target: Option<Evaluated>,
    pub(super) max_evals: usize,
    /// Guards against a line search that keeps asking about the same
    /// (cached) point, which would not consume the evaluation budget.
    pub(super) max_calls: usize,
    pub(super) evaluations: usize,
    /// L-BFGS iterations, over all restarts.
    pub(super) iterations: usize,
    pub(super) cost_calls: usize,
    pub(super) gradient_calls: usize,
    pub(super) capped_evaluations: usize,
    pub(super) restarts: usize,
    /// A sentinel was handed out: the budget (or call guard) ran out.
    pub(super) budget_exhausted: bool,
    /// Why the current argmin run stopped, set by [`GuardedLbfgs`].
    pub(super) run_stop: Option<RunStop>,
    pub(super) seen: HashSet<u64>,
    pub(super) repeated_evaluations: usize,
}

impl<S: SmoothObjective> Tracker<S> {
    /// Evaluates `start` (one evaluation) so that a best point always exists.
    pub(super) fn new(objective: S, start: &[f64], max_evals: usize) -> Self {
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

    pub(super) fn diagnostics(&self) -> EvaluationDiagnostics {
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

pub(super) fn same_bits(a: &[f64], b: &[f64]) -> bool {
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
pub(super) struct CachedProblem<'t, S> {
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
pub(super) enum RunStop {
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
pub(super) struct GuardedLbfgs<'t, S> {
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
pub(super) fn minimise<S: SmoothObjective>(
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
