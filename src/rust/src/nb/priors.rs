//! The curves' weak priors and the held effects' penalty of one species'
//! objective (model vignette §11.3, §15.4): their values, gradients and
//! Hessian terms, added to the likelihood pass of [`super::objective`].

use super::curve::{curve_len, U_RATE, U_SLOPE};
use super::linalg::BorderedMatrix;
use super::objective::{curve_block, SpeciesProblem};
use super::unknowns::{SpeciesLayout, SpeciesState};

/// Precision of the quadratic penalty that holds a reduced model's effects
/// at 0 (model vignette §15.4): at the optimum a held effect is the
/// likelihood's slope in it divided by this, of order 1e-6 for the count data
/// this package sees, while the Hessian stays well within what a Cholesky
/// factorisation in double precision resolves.
pub(crate) const HELD_PRECISION: f64 = 1e8;

/// Adds `scale` × row `a` of the T × T matrix `matrix` to the Hessian
/// entries that couple unknown `i` of treatment a's curve in context `c`
/// with unknown `i` of every estimated curve of that context (the effect
/// prior's and the held penalty's curvature).
fn add_across_treatments(
    layout: &SpeciesLayout,
    hessian: &mut BorderedMatrix,
    c: usize,
    a: usize,
    i: usize,
    scale: f64,
    matrix: &[f64],
) {
    let treatments = layout.treatments;
    let (block, start_a) = curve_block(layout, c * treatments + a);
    let size = layout.block_sizes[block];
    for b in 0..treatments {
        if layout.curve_offsets[c * treatments + b].is_none() {
            continue;
        }
        let (_, start_b) = curve_block(layout, c * treatments + b);
        hessian.blocks[block][(start_a + i) * size + start_b + i] +=
            scale * matrix[a * treatments + b];
    }
}

/// Σ_{j in held} w_j w_jᵀ, w_j row j of W⁻¹ (row-major, T × T).
pub(super) fn effect_gram(
    inverse_weights: &[f64],
    treatments: usize,
    effects: &[usize],
) -> Vec<f64> {
    let mut gram = vec![0.0; treatments * treatments];
    for &j in effects {
        let row = &inverse_weights[j * treatments..(j + 1) * treatments];
        for a in 0..treatments {
            for b in 0..treatments {
                gram[a * treatments + b] += row[a] * row[b];
            }
        }
    }
    gram
}

/// The weak priors of a count fit (model vignette §11.3); an SD of 0
/// leaves that prior out.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Priors {
    /// Each transition slope on its logit scale, centred at 1 per bin.
    pub slope_sd: f64,
    /// Each step R_{k+1} - R_k of a curve's block rates, centred at 0.
    pub step_sd: f64,
    /// Each treatment effect (β of a non-reference treatment) of every
    /// curve unknown on its unconstrained scale θ, centred at 0.
    pub effect_sd: f64,
}

/// Centre of the slopes' prior: a slope of 1 per bin, logit(1/S_MAX).
pub(crate) fn slope_prior_centre() -> f64 {
    (1.0 / (super::curve::SLOPE_MAX - 1.0)).ln()
}

impl<'m> SpeciesProblem<'m> {
    /// Adds the curves' weak priors (model vignette §11.3).
    ///
    /// The slope prior keeps weakly identified slopes (a small rate change,
    /// few counts) from running to S_MAX. The step prior pins a ridge: two
    /// transitions pulled together with shallow slopes let the block between
    /// them run off to any height at almost the same likelihood (the curve
    /// shows only a bump). The effect prior shrinks a treatment's curve
    /// towards the others where the counts do not tell them apart (e.g. the
    /// point of a transition whose step is tiny), instead of leaving it
    /// anywhere on a flat ridge. All three are negligible where the counts
    /// inform the unknown.
    ///
    /// A reduced model whose held effects tie its T treatments' curves into
    /// T − h distinct ones (a whole factor held) would count each distinct
    /// curve's slope and step priors several times, and so be pulled harder
    /// than the same model written as data without the factor: its
    /// likelihood-ratio statistic would be inflated. Those priors' precision
    /// is scaled by (T − h) / T, which makes the two the same model.
    pub fn with_priors(mut self, priors: Priors) -> Self {
        let used = |sd: f64| (sd.is_finite() && sd > 0.0).then_some(sd);
        let treatments = self.layout.treatments.max(1);
        let held = self.model.held_effects().len().min(treatments - 1);
        let curve_share = (treatments - held) as f64 / treatments as f64;
        let per_distinct_curve = |sd: Option<f64>| sd.map(|sd| sd / curve_share.sqrt());
        self.slope_prior_sd = per_distinct_curve(used(priors.slope_sd));
        self.step_prior_sd = per_distinct_curve(used(priors.step_sd));
        self.effect_prior = used(priors.effect_sd).and_then(|sd| {
            let treatments = self.layout.treatments;
            if treatments < 2 {
                return None;
            }
            // W was checked to be invertible when the model was built.
            let inverse = super::fit::inverse_weights(self.model).ok()?;
            let effects: Vec<usize> = (1..treatments).collect();
            Some((sd, effect_gram(&inverse, treatments, &effects)))
        });
        self
    }

    /// The priors' contribution to J at `state` (0 without priors).
    pub fn prior_penalty(&self, state: &SpeciesState) -> f64 {
        self.curve_priors(state, None)
            + self.held_penalty(state, None)
            + self.pin_penalty(state, None)
    }

    /// Per free coordinate, the held-effects penalty's share of the
    /// Hessian's diagonal (0 without held effects). The solver's damping
    /// scales with the diagonal without it: the penalty's stiffness lies
    /// across the constraint, and scaling by it would freeze the moves along
    /// the constraint too.
    pub fn held_diagonal(&self) -> Vec<f64> {
        let layout = &self.layout;
        let mut diagonal = vec![0.0; layout.len];
        self.add_pin_diagonal(&mut diagonal);
        let Some(gram) = &self.held else {
            return diagonal;
        };
        let treatments = layout.treatments;
        for (curve, offset) in layout.curve_offsets.iter().enumerate() {
            let Some(offset) = *offset else { continue };
            let t = curve % treatments;
            for i in 0..curve_len(layout.degrees[curve / treatments]) {
                diagonal[offset + i] += HELD_PRECISION * gram[t * treatments + t];
            }
        }
        diagonal
    }

    /// The penalty holding the held effects at 0: ½ p Σ_unknowns vᵀ A v over
    /// the treatments' curves (A from [`effect_gram`], p
    /// [`HELD_PRECISION`]), with its gradient and Hessian when asked.
    pub(super) fn held_penalty(
        &self,
        state: &SpeciesState,
        mut derivatives: Option<(&mut [f64], &mut BorderedMatrix)>,
    ) -> f64 {
        let Some(gram) = &self.held else {
            return 0.0;
        };
        let layout = &self.layout;
        let treatments = layout.treatments;
        let mut total = 0.0;
        let mut values = vec![0.0; treatments];
        for c in 0..layout.contexts {
            let curves = c * treatments..(c + 1) * treatments;
            if layout.curve_offsets[curves].iter().all(|o| o.is_none()) {
                continue;
            }
            for i in 0..curve_len(layout.degrees[c]) {
                for (t, value) in values.iter_mut().enumerate() {
                    *value = state.theta[c * treatments + t][i];
                }
                for a in 0..treatments {
                    let pulled: f64 = (0..treatments)
                        .map(|b| gram[a * treatments + b] * values[b])
                        .sum();
                    total += 0.5 * HELD_PRECISION * values[a] * pulled;
                    let (Some((gradient, hessian)), Some(offset)) = (
                        derivatives.as_mut(),
                        layout.curve_offsets[c * treatments + a],
                    ) else {
                        continue;
                    };
                    gradient[offset + i] += HELD_PRECISION * pulled;
                    add_across_treatments(layout, hessian, c, a, i, HELD_PRECISION, gram);
                }
            }
        }
        total
    }

    /// The curves' priors (slopes, steps, effects), adding their gradient
    /// and Hessian when asked.
    ///
    /// The priors see each curve as the animals' average warp makes it: the
    /// rate priors the rates times e^ū (ū the mean of the animals' rate
    /// warps), the slope prior the slopes' logits plus the mean slope warp.
    /// The likelihood cannot tell a population curve from the same curve
    /// rescaled with every animal's warp shifted back; a prior on the
    /// population curve alone would choose the rescaling that shrinks its
    /// steps, and the animals' warps and their standard deviation would
    /// run off to absorb it (model vignette §11.3). Seen this way the priors
    /// are unchanged by that move, the random effects' prior alone places
    /// the population curve (at ū = 0), and the value at the optimum is the
    /// plain prior's.
    pub(super) fn curve_priors(
        &self,
        state: &SpeciesState,
        mut derivatives: Option<(&mut [f64], &mut BorderedMatrix)>,
    ) -> f64 {
        let layout = &self.layout;
        let animals = layout.animals;
        let mean_warp = |w: usize| {
            if animals == 0 {
                0.0
            } else {
                state.u.iter().map(|u| u[w]).sum::<f64>() / animals as f64
            }
        };
        let rate_scale = (2.0 * mean_warp(U_RATE)).exp();
        let slope_shift = mean_warp(U_SLOPE);
        let border_start = layout.border_start();
        let border = layout.border;
        // The rate priors' value and gradient before scaling: the random
        // effects' derivatives are built from them.
        let mut rate_value = 0.0;
        let mut rate_gradient = derivatives.as_ref().map(|_| vec![0.0; layout.len]);
        let mut total = 0.0;
        // Σ over slopes of the slope prior's derivative and curvature in ū.
        let (mut slope_first, mut slope_second) = (0.0, 0.0);

        if let Some(sd) = self.slope_prior_sd {
            let centre = slope_prior_centre();
            let precision = 1.0 / (sd * sd);
            for (curve, offset) in layout.curve_offsets.iter().enumerate() {
                let Some(offset) = *offset else { continue };
                let degree = layout.degrees[curve / layout.treatments];
                for k in 0..degree {
                    let i = degree + 1 + k;
                    let deviation = state.theta[curve][i] + slope_shift - centre;
                    total += 0.5 * precision * deviation * deviation;
                    slope_first += precision * deviation;
                    slope_second += precision;
                    if let Some((gradient, hessian)) = derivatives.as_mut() {
                        gradient[offset + i] += precision * deviation;
                        let (block, start) = curve_block(layout, curve);
                        let size = layout.block_sizes[block];
                        hessian.blocks[block][(start + i) * size + start + i] += precision;
                        for u in &layout.u_index {
                            if let Some(ub) = u[U_SLOPE] {
                                hessian.couplings[block]
                                    [(start + i) * border + ub - border_start] +=
                                    precision / animals as f64;
                            }
                        }
                    }
                }
            }
        }
        if let Some(sd) = self.step_prior_sd {
            let precision = 1.0 / (sd * sd);
            for (curve, offset) in layout.curve_offsets.iter().enumerate() {
                let Some(offset) = *offset else { continue };
                let degree = layout.degrees[curve / layout.treatments];
                for k in 0..degree {
                    let step = state.theta[curve][k + 1] - state.theta[curve][k];
                    rate_value += 0.5 * precision * step * step;
                    if let (Some((_, hessian)), Some(raw)) =
                        (derivatives.as_mut(), rate_gradient.as_mut())
                    {
                        raw[offset + k + 1] += precision * step;
                        raw[offset + k] -= precision * step;
                        let (block, start) = curve_block(layout, curve);
                        let size = layout.block_sizes[block];
                        let (a, b) = (start + k, start + k + 1);
                        let curvature = rate_scale * precision;
                        let matrix = &mut hessian.blocks[block];
                        matrix[b * size + b] += curvature;
                        matrix[a * size + a] += curvature;
                        matrix[a * size + b] -= curvature;
                        matrix[b * size + a] -= curvature;
                    }
                }
            }
        }
        let (effect_rates, effect_others) = self.effect_penalty(
            state,
            rate_scale,
            derivatives.as_mut().map(|(g, h)| (&mut **g, &mut **h)),
            rate_gradient.as_deref_mut(),
        );
        rate_value += effect_rates;
        total += effect_others + rate_scale * rate_value;

        let Some((gradient, hessian)) = derivatives.as_mut() else {
            return total;
        };
        let n = animals as f64;
        let rate_border: Vec<usize> = layout
            .u_index
            .iter()
            .filter_map(|u| u[U_RATE].map(|i| i - border_start))
            .collect();
        let slope_border: Vec<usize> = layout
            .u_index
            .iter()
            .filter_map(|u| u[U_SLOPE].map(|i| i - border_start))
            .collect();
        if let Some(raw) = &rate_gradient {
            for (curve, offset) in layout.curve_offsets.iter().enumerate() {
                let Some(offset) = *offset else { continue };
                let degree = layout.degrees[curve / layout.treatments];
                let (block, start) = curve_block(layout, curve);
                for i in 0..=degree {
                    let g = raw[offset + i];
                    gradient[offset + i] += rate_scale * g;
                    for &ub in &rate_border {
                        hessian.couplings[block][(start + i) * border + ub] +=
                            2.0 * rate_scale * g / n;
                    }
                }
            }
        }
        for &ub in &rate_border {
            gradient[border_start + ub] += 2.0 * rate_scale * rate_value / n;
            for &ub2 in &rate_border {
                hessian.border_block[ub * border + ub2] += 4.0 * rate_scale * rate_value / (n * n);
            }
        }
        for &ub in &slope_border {
            gradient[border_start + ub] += slope_first / n;
            for &ub2 in &slope_border {
                hessian.border_block[ub * border + ub2] += slope_second / (n * n);
            }
        }
        total
    }

    /// The effect prior's terms of J, split into the rate coordinates'
    /// (before scaling by `rate_scale`; their gradient goes, unscaled, to
    /// `rate_gradient`) and the others' (gradient into `derivatives`); the
    /// Hessian of both goes into `derivatives`, the rates' scaled.
    pub(super) fn effect_penalty(
        &self,
        state: &SpeciesState,
        rate_scale: f64,
        mut derivatives: Option<(&mut [f64], &mut BorderedMatrix)>,
        mut rate_gradient: Option<&mut [f64]>,
    ) -> (f64, f64) {
        let Some((sd, effects)) = &self.effect_prior else {
            return (0.0, 0.0);
        };
        let precision = 1.0 / (sd * sd);
        let layout = &self.layout;
        let treatments = layout.treatments;
        let (mut rates, mut others) = (0.0, 0.0);
        let mut values = vec![0.0; treatments];
        let mut pulled = vec![0.0; treatments];
        for c in 0..layout.contexts {
            let curves = c * treatments..(c + 1) * treatments;
            if layout.curve_offsets[curves.clone()]
                .iter()
                .all(|o| o.is_none())
            {
                continue;
            }
            let degree = layout.degrees[c];
            for i in 0..curve_len(degree) {
                let is_rate = i <= degree;
                for t in 0..treatments {
                    values[t] = state.theta[c * treatments + t][i];
                }
                for a in 0..treatments {
                    pulled[a] = (0..treatments)
                        .map(|b| effects[a * treatments + b] * values[b])
                        .sum();
                }
                let term =
                    0.5 * precision * values.iter().zip(&pulled).map(|(v, p)| v * p).sum::<f64>();
                if is_rate {
                    rates += term;
                } else {
                    others += term;
                }
                let Some((gradient, hessian)) = derivatives.as_mut() else {
                    continue;
                };
                let curvature = if is_rate {
                    rate_scale * precision
                } else {
                    precision
                };
                for a in 0..treatments {
                    let Some(offset) = layout.curve_offsets[c * treatments + a] else {
                        continue;
                    };
                    if is_rate {
                        if let Some(raw) = rate_gradient.as_mut() {
                            raw[offset + i] += precision * pulled[a];
                        }
                    } else {
                        gradient[offset + i] += precision * pulled[a];
                    }
                    add_across_treatments(layout, hessian, c, a, i, curvature, effects);
                }
            }
        }
        (rates, others)
    }
}
