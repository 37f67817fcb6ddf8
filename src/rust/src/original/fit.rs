//! The original likelihood's fit (model vignette §13.1): its settings and
//! ending codes, and the penalised nll minimised by the guarded L-BFGS of
//! [`super::lbfgs`] under the original's stopping rules.

use super::lbfgs::{minimise, RunStop, SmoothObjective, Tracker, MAX_MEMORY};
use crate::original::{Model, Objective};
use crate::outcome::{FitSummary, Termination};
use std::cell::RefCell;
use std::time::Instant;

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
    // `ctol` is the original's relative-change stop (its `success.code`
    // 3), `max_evals` its evaluation limit (5).
    let code = match stop {
        RunStop::Converged => Termination::Converged,
        RunStop::Budget => Termination::EvaluationLimit,
        // The fit's objective has no target; kept total for the type's sake.
        RunStop::Target => Termination::Converged,
        RunStop::Stalled(reason) => Termination::Failed(reason),
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

pub(super) fn check_point(model: &Model, x: &[f64], what: &str) -> Result<(), String> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::design::{Component, Factor, WarpKind};
    use crate::original::lbfgs::same_bits;
    use crate::original::objective::PSEUDO_INFINITY;
    use crate::original::repair::{
        halve_point_effects, repair_feasibility, separate_baseline_points, REPAIR_ATTEMPTS,
    };
    use std::collections::HashSet;

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
            assert_eq!(
                result.code,
                Termination::Converged.to_string(),
                "seed {seed}"
            );
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
                Termination::EvaluationLimit.to_string(),
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
