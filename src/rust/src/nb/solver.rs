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

use super::linalg::{BorderedFactor, BorderedMatrix};
use super::objective::{Sigma, SpeciesProblem};
use super::unknowns::SpeciesState;

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
}

impl Default for NewtonSettings {
    fn default() -> Self {
        NewtonSettings {
            max_iterations: crate::rules::NEWTON_MAX_ITERATIONS,
            gradient_tolerance: crate::rules::NEWTON_GRADIENT_TOLERANCE,
            decrement_tolerance: crate::rules::NEWTON_DECREMENT_TOLERANCE,
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
    /// Why the run stopped when it did not converge.
    pub stop: Option<String>,
    /// diag(H⁻¹) at the last point, when H is positive definite.
    pub inverse_diagonal: Option<Vec<f64>>,
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
    let n = layout.len;
    let mut x = state.to_vector(layout);
    bounds.project(&mut x);
    state.set_vector(layout, &x);
    let mut gradient = vec![0.0; n];
    let mut hessian = problem.hessian_shape();
    let mut lambda = 0.0_f64;
    let mut evaluations = 0;
    let held_diagonal = problem.held_diagonal();
    let outcome = |value,
                   iterations,
                   evaluations,
                   converged,
                   stop: Option<String>,
                   evidence: Option<Evidence>| {
        let (scaled_gradient, decrement, inverse_diagonal) = match evidence {
            Some(e) => {
                let inverse = e
                    .inverse_diagonal
                    .unwrap_or_else(|| e.factor.inverse_diagonal());
                let scaled = if e.scaled_gradient.is_finite() {
                    e.scaled_gradient
                } else {
                    f64::NAN
                };
                (scaled, e.decrement, Some(inverse))
            }
            None => (f64::NAN, f64::NAN, None),
        };
        NewtonOutcome {
            value,
            iterations,
            evaluations,
            converged,
            scaled_gradient,
            decrement,
            positive_definite: inverse_diagonal.is_some(),
            stop,
            inverse_diagonal,
        }
    };
    for iteration in 0..=settings.max_iterations {
        let value = problem.evaluate(state, sigma, &mut gradient, &mut hessian);
        evaluations += 1;
        if !value.is_finite() {
            return outcome(
                value,
                iteration,
                evaluations,
                false,
                Some("the objective is not finite".into()),
                None,
            );
        }
        let mut pinned = bounds.pinned(&x, &gradient);
        // A coordinate the data do not inform (no curvature, no slope: e.g.
        // the transition of a curve whose rates are all 0) is held where it is.
        for (i, p) in pinned.iter_mut().enumerate() {
            if hessian.diagonal(i).abs() <= FLAT_CURVATURE && gradient[i].abs() <= FLAT_SLOPE {
                *p = true;
            }
        }
        for (i, &p) in pinned.iter().enumerate() {
            if p {
                pin(&mut hessian, i);
                gradient[i] = 0.0;
            }
        }
        let tolerance = settings.decrement_tolerance * value.abs().max(1.0);
        let current = evidence(&hessian, &gradient, &pinned, 200.0 * tolerance);
        if let Some(e) = &current {
            if e.scaled_gradient <= settings.gradient_tolerance && 0.5 * e.decrement <= tolerance {
                return outcome(value, iteration, evaluations, true, None, current);
            }
        }
        if iteration == settings.max_iterations {
            return outcome(
                value,
                iteration,
                evaluations,
                false,
                Some(format!("{} Newton iterations", settings.max_iterations)),
                current,
            );
        }
        let diagonal_scale: Vec<f64> = {
            let own: Vec<f64> = (0..n)
                .map(|i| (hessian.diagonal(i) - held_diagonal[i]).abs())
                .collect();
            let largest = own.iter().copied().fold(0.0, f64::max);
            own.iter()
                .map(|d| d.max(1e-6 * largest).max(1e-12))
                .collect()
        };
        let mut accepted = false;
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
            let mut step = factor.solve(&gradient);
            step.iter_mut().for_each(|s| *s = -*s);
            let mut trial = x.clone();
            for (t, s) in trial.iter_mut().zip(&step) {
                *t += s;
            }
            bounds.project(&mut trial);
            let actual_step: Vec<f64> = trial.iter().zip(&x).map(|(t, v)| t - v).collect();
            let predicted = -(dot(&gradient, &actual_step)
                + 0.5 * dot(&actual_step, &hessian.multiply(&actual_step)));
            let mut trial_state = state.clone();
            trial_state.set_vector(layout, &trial);
            let trial_value = problem.value(&trial_state, sigma);
            evaluations += 1;
            let decrease = value - trial_value;
            if trial_value.is_finite() && decrease >= 0.0 && (decrease > 0.0 || predicted <= 0.0) {
                let ratio = if predicted > 0.0 {
                    decrease / predicted
                } else {
                    1.0
                };
                if ratio > 0.75 {
                    lambda = if lambda < 1e-6 { 0.0 } else { lambda / 5.0 };
                } else if ratio < 0.25 {
                    lambda = (lambda * 4.0).max(1e-4);
                }
                x = trial;
                *state = trial_state;
                accepted = true;
                break;
            }
            lambda = if lambda == 0.0 { 1e-3 } else { lambda * 8.0 };
        }
        if !accepted {
            return outcome(
                value,
                iteration,
                evaluations,
                false,
                Some("no step lowered the objective".into()),
                current,
            );
        }
    }
    unreachable!("the loop returns at its last iteration")
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
