//! One treatment effect of one species held at a value, on the scale the fit
//! reports it (model vignette §15.5): the constraint a profile likelihood
//! needs. An effect is β = Σ_t w_t f(θ_t), w the effect's row of W⁻¹ and
//! f the component's value of treatment t's curve (a block rate, a slope
//! S_MAX σ(θ), or a point of the stick-breaking positions), so that holding a
//! transition point's effect at 3 bins is a nonlinear constraint on θ.
//!
//! A quadratic penalty on a nonlinear constraint is stiff in its third
//! derivatives too (P times the constraint's curvature), which leaves
//! Newton's steps almost no room along the curved constraint. So the fit
//! holds the constraint linearised at its start, β(θ₀) + ∇β(θ₀)·(θ − θ₀) = v,
//! by the held effects' quadratic penalty (a linear constraint: its penalty
//! is exactly quadratic), and linearises again at that fit until β(θ) = v
//! ([`super::fit::fit_species_pinned`]): a few warm-started refits, each a
//! well-conditioned Newton problem.

use super::curve::{curve_len, Axis, CurveValues, SLOPE_MAX};
use super::linalg::BorderedMatrix;
use super::objective::{curve_block, SpeciesProblem};
use super::priors::HELD_PRECISION;
use super::unknowns::{SpeciesLayout, SpeciesState};
use crate::curve::sigmoid;
use crate::design::Component;

/// A reported effect held at `value`: component `component`, value `block`
/// (from 0) of the curves of `context`, with per-treatment weights `weights`
/// (its row of W⁻¹).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct EffectPin {
    pub context: usize,
    pub component: Component,
    pub block: usize,
    pub weights: Vec<f64>,
    pub value: f64,
}

/// The constraint linearised: constant + Σ coefficient · θ[treatment][i] =
/// value, over the curves of `context`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LinearPin {
    pub context: usize,
    pub terms: Vec<(usize, usize, f64)>,
    pub constant: f64,
    pub value: f64,
}

impl EffectPin {
    /// One curve's component value and its gradient in that curve's θ
    /// (sparse: (i, ∂f/∂θ_i)).
    fn local(&self, theta: &[f64], degree: usize, axis: Axis) -> (f64, Vec<(usize, f64)>) {
        let k = self.block;
        let position = self.component.position(degree, k);
        match self.component {
            Component::Rate => (theta[position], vec![(position, 1.0)]),
            Component::Slope => {
                let s = sigmoid(theta[position]);
                (SLOPE_MAX * s, vec![(position, SLOPE_MAX * s * (1.0 - s))])
            }
            Component::Point => {
                // p_k = lower + (k + 1) gap + F (1 − R), R = Π_{j ≤ k} σ(−θ_j):
                // ∂p/∂θ_j = F R σ(θ_j).
                let first = 2 * degree + 1;
                let value = CurveValues::from_theta(theta, degree, axis).points[k];
                let s: Vec<f64> = (0..=k).map(|j| sigmoid(theta[first + j])).collect();
                let rest: f64 = s.iter().map(|&sj| 1.0 - sj).product();
                let scale = axis.free_width(degree) * rest;
                (value, (0..=k).map(|j| (first + j, scale * s[j])).collect())
            }
        }
    }

    fn involved(&self) -> impl Iterator<Item = (usize, f64)> + '_ {
        self.weights
            .iter()
            .copied()
            .enumerate()
            .filter(|(_, w)| *w != 0.0)
    }

    /// The effect at `state` (β(θ)).
    pub fn effect(&self, state: &SpeciesState, degree: usize, axis: Axis) -> f64 {
        let treatments = self.weights.len();
        self.involved()
            .map(|(t, w)| {
                w * self
                    .local(&state.theta[self.context * treatments + t], degree, axis)
                    .0
            })
            .sum()
    }

    /// The constraint linearised at `state`.
    pub fn linearised_at(&self, state: &SpeciesState, degree: usize, axis: Axis) -> LinearPin {
        let treatments = self.weights.len();
        let mut terms = Vec::new();
        let mut constant = 0.0;
        for (t, w) in self.involved() {
            let theta = &state.theta[self.context * treatments + t];
            let (value, gradient) = self.local(theta, degree, axis);
            constant += w * value;
            for (i, d) in gradient {
                constant -= w * d * theta[i];
                terms.push((t, i, w * d));
            }
        }
        LinearPin {
            context: self.context,
            terms,
            constant,
            value: self.value,
        }
    }

    /// Moves one treatment's curve (the one with the largest weight, the
    /// last of equals: a non-reference treatment) so that the effect is at
    /// its held value, as far as that curve can go.
    pub fn project(&self, state: &mut SpeciesState, degree: usize, axis: Axis) {
        let treatments = self.weights.len();
        let Some((t, w)) = self
            .involved()
            .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()).then(a.0.cmp(&b.0)))
        else {
            return;
        };
        let shift = (self.value - self.effect(state, degree, axis)) / w;
        let theta = &mut state.theta[self.context * treatments + t];
        let mut values = CurveValues::from_theta(theta, degree, axis);
        match self.component {
            Component::Rate => {
                values.rates[self.block] = (values.rates[self.block] + shift).max(0.0)
            }
            Component::Slope => values.slopes[self.block] += shift,
            Component::Point => values.points[self.block] += shift,
        }
        *theta = values.to_theta(axis, 1e-6);
    }
}

impl LinearPin {
    /// constant + a·θ − v at `state` (`treatments` curves per context).
    pub fn residual(&self, state: &SpeciesState, treatments: usize) -> f64 {
        self.constant - self.value
            + self
                .terms
                .iter()
                .map(|&(t, i, a)| a * state.theta[self.context * treatments + t][i])
                .sum::<f64>()
    }

    /// The constraint's Lagrange multiplier at the minimum of a problem
    /// held by this pin's penalty, whose residual there is `residual`: how
    /// fast the held minimum rises as the held value moves (dM/dv). At that
    /// minimum the objective's gradient is −P · residual · a, which is λ a
    /// for the exactly held constraint, so λ = −P · residual.
    pub fn multiplier(residual: f64) -> f64 {
        -HELD_PRECISION * residual
    }
}

impl<'m> SpeciesProblem<'m> {
    /// The problem with `pin`'s linear constraint held.
    pub fn with_pin(mut self, pin: Option<LinearPin>) -> Self {
        self.pin = pin;
        self
    }

    /// ½ P (constant + a·θ − v)² of the held linear constraint, adding its
    /// gradient and Hessian when asked (0 without a pin).
    pub(super) fn pin_penalty(
        &self,
        state: &SpeciesState,
        mut derivatives: Option<(&mut [f64], &mut BorderedMatrix)>,
    ) -> f64 {
        let Some(pin) = &self.pin else {
            return 0.0;
        };
        let layout = &self.layout;
        let treatments = layout.treatments;
        let curve = |t: usize| pin.context * treatments + t;
        let residual = pin.residual(state, treatments);
        if let Some((gradient, hessian)) = derivatives.as_mut() {
            for &(t, i, a) in &pin.terms {
                let Some(offset) = layout.curve_offsets[curve(t)] else {
                    continue;
                };
                gradient[offset + i] += HELD_PRECISION * residual * a;
                let (block, start_a) = curve_block(layout, curve(t));
                let size = layout.block_sizes[block];
                for &(u, j, b) in &pin.terms {
                    if layout.curve_offsets[curve(u)].is_none() {
                        continue;
                    }
                    let (_, start_b) = curve_block(layout, curve(u));
                    hessian.blocks[block][(start_a + i) * size + start_b + j] +=
                        HELD_PRECISION * a * b;
                }
            }
        }
        0.5 * HELD_PRECISION * residual * residual
    }

    /// The pin's share of the Hessian's diagonal (see
    /// [`SpeciesProblem::held_diagonal`]), added to `diagonal`.
    pub(super) fn add_pin_diagonal(&self, diagonal: &mut [f64]) {
        let Some(pin) = &self.pin else { return };
        let treatments = self.layout.treatments;
        for &(t, i, a) in &pin.terms {
            if let Some(offset) = self.layout.curve_offsets[pin.context * treatments + t] {
                diagonal[offset + i] += HELD_PRECISION * a * a;
            }
        }
    }
}

/// Whether every curve the effect involves is estimated in this species
/// (an effect of a curve without observed rows is not reported).
pub(crate) fn pin_is_estimable(layout: &SpeciesLayout, pin: &EffectPin) -> bool {
    pin.context < layout.contexts
        && pin.weights.len() == layout.treatments
        && pin.block < pin.component.count(layout.degrees[pin.context])
        && curve_len(layout.degrees[pin.context]) > 0
        && pin
            .involved()
            .all(|(t, _)| layout.curve_offsets[pin.context * layout.treatments + t].is_some())
}

#[cfg(test)]
mod tests {
    use super::super::fit::{fit_species_pinned, inverse_weights};
    use super::super::tests_support::{fitted_plan, small_model};
    use super::*;

    /// Every pin of species `species` (each context, component, value and
    /// non-reference effect), held at `value`.
    fn pins_of(model: &super::super::CountModel, species: usize, value: f64) -> Vec<EffectPin> {
        let shape = model.table().shape();
        let treatments = shape.treatments;
        let inverse = inverse_weights(model).unwrap();
        let mut pins = Vec::new();
        for context in 0..shape.contexts {
            let degree = model.structure().degree(context, species);
            for component in Component::ALL {
                for block in 0..component.count(degree) {
                    for j in 1..treatments {
                        pins.push(EffectPin {
                            context,
                            component,
                            block,
                            weights: inverse[j * treatments..(j + 1) * treatments].to_vec(),
                            value,
                        });
                    }
                }
            }
        }
        pins
    }

    #[test]
    fn the_linearised_constraint_has_the_effects_gradient_and_its_penalty_its_derivatives() {
        let model = small_model(3);
        let axis = model.axis();
        let mut checked = 0;
        for species in 0..model.table().shape().species {
            for pin in pins_of(&model, species, 0.7) {
                let degree = model.structure().degree(pin.context, species);
                let problem = SpeciesProblem::new(&model, species, [true; 3]);
                let layout = problem.layout.clone();
                // A state with distinct treatments' curves, points well inside.
                let state = SpeciesState {
                    theta: (0..layout.contexts * layout.treatments)
                        .map(|curve| {
                            let d = layout.degrees[curve / layout.treatments];
                            (0..curve_len(d))
                                .map(|i| (0.3 + 0.11 * i as f64 - 0.17 * curve as f64).sin())
                                .collect()
                        })
                        .collect(),
                    rho: vec![0.0; layout.contexts],
                    u: vec![[0.0; 3]; layout.animals],
                };
                let linear = pin.linearised_at(&state, degree, axis);
                let treatments = layout.treatments;
                // Each coefficient is ∂β/∂θ by central differences; the
                // linear form equals β at the state.
                let h = 1e-6;
                for &(t, i, a) in &linear.terms {
                    let (mut up, mut down) = (state.clone(), state.clone());
                    up.theta[pin.context * treatments + t][i] += h;
                    down.theta[pin.context * treatments + t][i] -= h;
                    let numeric = (pin.effect(&up, degree, axis) - pin.effect(&down, degree, axis))
                        / (2.0 * h);
                    assert!(
                        (a - numeric).abs() <= 1e-6 * numeric.abs().max(1.0),
                        "{pin:?}: {a} vs {numeric}"
                    );
                }
                let at_state: f64 = linear.constant
                    + linear
                        .terms
                        .iter()
                        .map(|&(t, i, a)| a * state.theta[pin.context * treatments + t][i])
                        .sum::<f64>();
                assert!((at_state - pin.effect(&state, degree, axis)).abs() < 1e-12);
                // The penalty's gradient and Hessian, by differences.
                let problem = problem.with_pin(Some(linear));
                let x = state.to_vector(&layout);
                let n = x.len();
                let penalty_at = |x: &[f64]| {
                    let mut s = state.clone();
                    s.set_vector(&layout, x);
                    problem.pin_penalty(&s, None) / HELD_PRECISION
                };
                let mut gradient = vec![0.0; n];
                let mut hessian = problem.hessian_shape();
                problem.pin_penalty(&state, Some((&mut gradient, &mut hessian)));
                let h = 1e-4;
                for i in 0..n {
                    let (mut up, mut down) = (x.clone(), x.clone());
                    up[i] += h;
                    down[i] -= h;
                    let numeric = (penalty_at(&up) - penalty_at(&down)) / (2.0 * h);
                    assert!(
                        (gradient[i] / HELD_PRECISION - numeric).abs()
                            <= 1e-6 * numeric.abs().max(1.0)
                    );
                    let mut unit = vec![0.0; n];
                    unit[i] = 1.0;
                    let column = hessian.multiply(&unit);
                    for j in 0..n {
                        let (mut uu, mut ud, mut du, mut dd) =
                            (x.clone(), x.clone(), x.clone(), x.clone());
                        uu[i] += h;
                        uu[j] += h;
                        ud[i] += h;
                        ud[j] -= h;
                        du[i] -= h;
                        du[j] += h;
                        dd[i] -= h;
                        dd[j] -= h;
                        let numeric = (penalty_at(&uu) - penalty_at(&ud) - penalty_at(&du)
                            + penalty_at(&dd))
                            / (4.0 * h * h);
                        assert!(
                            (column[j] / HELD_PRECISION - numeric).abs()
                                <= 1e-5 * numeric.abs().max(1.0),
                            "{pin:?}: hessian ({i}, {j})"
                        );
                    }
                }
                checked += 1;
            }
        }
        assert!(checked >= 10, "only {checked} pins checked");
    }

    #[test]
    fn the_effect_is_the_reported_one_and_projection_moves_it_to_its_value() {
        let plan = fitted_plan(5);
        let model = &plan.model;
        let reported =
            super::super::report::reported_parameters(model, &plan.estimate.species).unwrap();
        let layout =
            super::super::layout::CountLayout::new(model.design(), model.structure()).unwrap();
        let axis = model.axis();
        let treatments = model.table().shape().treatments;
        for species in 0..model.table().shape().species {
            let state = &plan.estimate.species[species].state;
            for pin in pins_of(model, species, 0.0) {
                let degree = model.structure().degree(pin.context, species);
                let j = (1..treatments)
                    .find(|&j| {
                        inverse_weights(model).unwrap()[j * treatments..(j + 1) * treatments]
                            == pin.weights[..]
                    })
                    .unwrap();
                let index = layout
                    .original
                    .beta_index(pin.component, pin.context, species, pin.block, j)
                    .unwrap();
                let effect = pin.effect(state, degree, axis);
                assert!(
                    (effect - reported[index]).abs() < 1e-12,
                    "{pin:?}: {effect} vs {}",
                    reported[index]
                );
                let target = EffectPin {
                    value: effect + 0.8,
                    ..pin.clone()
                };
                let mut moved = state.clone();
                target.project(&mut moved, degree, axis);
                assert!(
                    (target.effect(&moved, degree, axis) - target.value).abs() < 1e-9,
                    "{pin:?}"
                );
            }
        }
    }

    #[test]
    fn a_pinned_fit_holds_its_effect_and_fits_no_better_than_the_fit() {
        let plan = fitted_plan(5);
        let model = &plan.model;
        let axis = model.axis();
        let full = &plan.estimate.species[0];
        let pin = pins_of(model, 0, 0.0)
            .into_iter()
            .find(|p| p.component == Component::Point)
            .expect("a point effect");
        let degree = model.structure().degree(pin.context, 0);
        let estimate = pin.effect(&full.state, degree, axis);
        // M: −(Laplace marginal) plus the priors, what the profile compares.
        let penalised = |fit: &super::super::fit::SpeciesFit| {
            let problem =
                SpeciesProblem::new(model, 0, super::super::fit::free_warps_of(fit.sigma))
                    .with_settings(&plan.settings);
            fit.negative_log_likelihood + problem.prior_penalty(&fit.state)
        };
        let at_estimate = penalised(full);
        for value in [estimate, estimate + 1.5, estimate - 1.5] {
            let held = EffectPin {
                value,
                ..pin.clone()
            };
            let fit =
                fit_species_pinned(model, 0, (&full.state, full.sigma), &plan.settings, &held)
                    .unwrap()
                    .fit;
            assert!(fit.converged, "{fit:?}");
            assert!((held.effect(&fit.state, degree, axis) - value).abs() < 1e-4);
            // Within the variance updates' tolerance (their σ settle anew).
            let m = penalised(&fit);
            assert!(m >= at_estimate - 0.02, "{m} < {at_estimate}");
            if value == estimate {
                assert!((m - at_estimate).abs() < 0.02, "{m} vs {at_estimate}");
            } else {
                assert!(m > at_estimate + 0.1, "held {value}: {m} vs {at_estimate}");
            }
        }
    }

    #[test]
    fn a_pinned_fits_multiplier_is_the_slope_of_its_held_minimum() {
        // Against central differences of the held minimum of J (the
        // penalised joint objective, random-effect SDs fixed as the profile
        // fixes them), for every component's first effect, on both sides.
        let plan = fitted_plan(5);
        let model = &plan.model;
        let axis = model.axis();
        let full = &plan.estimate.species[0];
        let settings = super::super::settings::CountFitSettings {
            fixed_sigma: Some(full.sigma),
            ..plan.settings
        };
        let problem = SpeciesProblem::new(model, 0, super::super::fit::free_warps_of(full.sigma))
            .with_settings(&plan.settings);
        let mut checked = 0;
        for component in Component::ALL {
            let Some(pin) = pins_of(model, 0, 0.0)
                .into_iter()
                .find(|p| p.component == component)
            else {
                continue;
            };
            let degree = model.structure().degree(pin.context, 0);
            let estimate = pin.effect(&full.state, degree, axis);
            let step = match component {
                Component::Point => 1.0,
                _ => 0.1,
            };
            for side in [-1.0, 1.0] {
                let value = estimate + side * step;
                let h = 1e-2 * step;
                let held_at = |v: f64| {
                    let held = EffectPin {
                        value: v,
                        ..pin.clone()
                    };
                    fit_species_pinned(model, 0, (&full.state, full.sigma), &settings, &held)
                        .unwrap()
                };
                let centre = held_at(value);
                assert!(centre.fit.converged);
                // Held minima and where the effect came to rest (the fit
                // holds it to its tolerance, not exactly).
                let joint = |v: f64| {
                    let fit = held_at(v).fit;
                    (
                        pin.effect(&fit.state, degree, axis),
                        problem.value(&fit.state, full.sigma),
                    )
                };
                let ((b_low, j_low), (b_high, j_high)) = (joint(value - h), joint(value + h));
                let slope = (j_high - j_low) / (b_high - b_low);
                assert!(
                    (centre.multiplier - slope).abs() <= 1e-3 * slope.abs().max(1.0),
                    "{component:?} at {value} ({estimate}): multiplier {} vs differences {slope}",
                    centre.multiplier
                );
                // Away from the estimate the held minimum rises.
                assert!(
                    centre.multiplier * side > 0.0,
                    "{component:?}: {}",
                    centre.multiplier
                );
                checked += 1;
            }
        }
        assert!(checked >= 4, "{checked}");
    }
}
