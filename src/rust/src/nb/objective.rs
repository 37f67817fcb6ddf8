//! One species' objective under the count likelihood (model vignette
//! §13.2): J = −Σ ℓ + Σ u²/(2σ²) + P(θ) over the species' curves (θ),
//! dispersions (ρ = ln φ) and random effects (u), P being the curves' priors
//! (§11.3), with its gradient and exact Hessian in bordered block-diagonal
//! form.
//!
//! No term couples two species, so every species is a problem of its own.
//! Within a species, the curves of one context are coupled by the treatment
//! effects' prior, so they share a diagonal block of the Hessian; curves of
//! different contexts touch each other only through the random effects of
//! the animals, which with the dispersions form the Hessian's border.

use super::curve::{curve_len, local_len, Axis, BinDerivatives, WarpedCurve};
use super::family::{rate, row_term_at, row_value_at, RowTerm};
use super::linalg::BorderedMatrix;
use super::priors::effect_gram;
use super::unknowns::{SpeciesLayout, SpeciesState};
use super::CountModel;
use crate::numeric::special::ln_gamma;

/// The data of one species, with ln Γ(y + 1) cached per row.
pub(crate) struct SpeciesProblem<'m> {
    pub(super) model: &'m CountModel,
    pub layout: SpeciesLayout,
    pub(super) axis: Axis,
    pub(super) ln_gamma_count: Vec<f64>,
    /// Per (animal, context, treatment) block: whether it has an observed row.
    pub(super) active_blocks: Vec<bool>,
    /// Standard deviation of the slopes' normal prior on the logit scale
    /// (`None`: no prior).
    pub(super) slope_prior_sd: Option<f64>,
    /// Standard deviation of the normal prior on each curve's steps
    /// R_{k+1} - R_k (`None`: no prior).
    pub(super) step_prior_sd: Option<f64>,
    /// The treatment effects' prior: its standard deviation and the T × T
    /// matrix A = Σ_{j ≥ 1} w_j w_jᵀ (w_j row j of W⁻¹), so that the sum of
    /// squared effects of one unknown across the treatments' curves, v, is
    /// vᵀ A v (`None`: no prior).
    pub(super) effect_prior: Option<(f64, Vec<f64>)>,
    /// The model's held effects as the T × T matrix Σ_{j held} w_j w_jᵀ,
    /// penalised with [`super::priors::HELD_PRECISION`] (`None`: nothing held, or a
    /// warm-up problem, whose start is projected afterwards instead).
    pub(super) held: Option<Vec<f64>>,
    /// One effect held at a value, for a profile likelihood (`None`: none).
    pub(super) pin: Option<super::pin::LinearPin>,
}

/// Scratch space of one evaluation, sized for the largest degree.
struct Workspace {
    curves: Vec<WarpedCurve>,
    bins: Vec<BinDerivatives>,
    value_gradient: Vec<f64>,
    value_hessian: Vec<f64>,
    value_rho: Vec<f64>,
    local_gradient: Vec<f64>,
    local_hessian: Vec<f64>,
    local_rho: Vec<f64>,
}

impl Workspace {
    fn new(max_degree: usize) -> Self {
        let m = curve_len(max_degree);
        let n = local_len(max_degree);
        Workspace {
            curves: (0..=max_degree).map(WarpedCurve::new).collect(),
            bins: (0..=max_degree).map(BinDerivatives::new).collect(),
            value_gradient: vec![0.0; m],
            value_hessian: vec![0.0; m * m],
            value_rho: vec![0.0; m],
            local_gradient: vec![0.0; n],
            local_hessian: vec![0.0; n * n],
            local_rho: vec![0.0; n],
        }
    }
}

/// σ per warp (point, rate, slope); 0 fixes that warp's u at 0.
pub(crate) type Sigma = [f64; 3];

impl<'m> SpeciesProblem<'m> {
    pub fn new(model: &'m CountModel, species: usize, free_warps: [bool; 3]) -> Self {
        let layout = SpeciesLayout::new(model, species, free_warps);
        let table = model.table();
        let ln_gamma_count = table
            .counts(species)
            .iter()
            .map(|&y| ln_gamma(y + 1.0))
            .collect();
        let (animals, contexts, treatments, bins) = (
            layout.animals,
            layout.contexts,
            layout.treatments,
            layout.bins,
        );
        let observed = table.observed();
        let mut active_blocks = Vec::with_capacity(animals * contexts * treatments);
        for r in 0..animals {
            for c in 0..contexts {
                for t in 0..treatments {
                    let first = table.block_key(r, c, t);
                    active_blocks.push(observed[first..first + bins].iter().any(|&o| o));
                }
            }
        }
        SpeciesProblem {
            model,
            layout,
            axis: model.axis(),
            ln_gamma_count,
            active_blocks,
            slope_prior_sd: None,
            step_prior_sd: None,
            effect_prior: None,
            held: None,
            pin: None,
        }
        .with_held_effects()
    }

    /// Adds the penalty that holds the model's held effects at 0.
    fn with_held_effects(mut self) -> Self {
        let held = self.model.held_effects();
        let treatments = self.layout.treatments;
        if held.is_empty() || treatments < 2 {
            return self;
        }
        // W was checked to be invertible when the model was built.
        if let Ok(inverse) = super::fit::inverse_weights(self.model) {
            self.held = Some(effect_gram(&inverse, treatments, held));
        }
        self
    }

    /// The problem with only some unknowns free (see
    /// [`SpeciesLayout::restricted`]). With neither dispersions nor random
    /// effects free, only the free curves' rows are evaluated (the objective
    /// then differs from the species' by a constant).
    pub fn restricted(
        model: &'m CountModel,
        species: usize,
        curves: &[bool],
        rho: bool,
        warps: [bool; 3],
    ) -> Self {
        let mut problem = SpeciesProblem::new(model, species, warps);
        problem.layout = SpeciesLayout::restricted(model, species, curves, rho, warps);
        // A warm-up moves one curve at a time: held at its neighbours' values
        // it could not move at all. The fit projects its result instead.
        problem.held = None;
        if !rho && warps == [false; 3] {
            let (contexts, treatments) = (problem.layout.contexts, problem.layout.treatments);
            let mut block = 0;
            for _ in 0..problem.layout.animals {
                for c in 0..contexts {
                    for t in 0..treatments {
                        if !curves[c * treatments + t] {
                            problem.active_blocks[block] = false;
                        }
                        block += 1;
                    }
                }
            }
        }
        problem
    }

    /// With `fixed`, the dispersions are held at the state's values
    /// instead of estimated.
    pub fn without_dispersion(mut self, fixed: bool) -> Self {
        if fixed {
            self.layout = self.layout.without_dispersion();
        }
        self
    }

    /// The problem as a fit with `settings` solves it: their priors, and
    /// the dispersions held when they are fixed.
    pub fn with_settings(self, settings: &super::settings::CountFitSettings) -> Self {
        self.with_priors(settings.priors())
            .without_dispersion(settings.fixed_dispersion.is_some())
    }

    pub fn model(&self) -> &'m CountModel {
        self.model
    }

    pub fn axis(&self) -> Axis {
        self.axis
    }

    /// A Hessian of this species' shape, to be filled by [`Self::evaluate`].
    pub fn hessian_shape(&self) -> BorderedMatrix {
        BorderedMatrix::new(self.layout.block_sizes.clone(), self.layout.border)
    }

    /// J at `state`; +∞ when some term is not finite.
    pub fn value(&self, state: &SpeciesState, sigma: Sigma) -> f64 {
        self.pass(state, sigma, None)
    }

    /// J, its gradient (in x's layout) and its Hessian.
    pub fn evaluate(
        &self,
        state: &SpeciesState,
        sigma: Sigma,
        gradient: &mut [f64],
        hessian: &mut BorderedMatrix,
    ) -> f64 {
        self.pass(state, sigma, Some((gradient, hessian)))
    }

    /// −Σ ℓ alone (no random-effect penalty) at `state`.
    #[cfg(test)]
    pub fn negative_log_likelihood(&self, state: &SpeciesState) -> f64 {
        self.pass(state, [0.0; 3], None)
    }

    fn pass(
        &self,
        state: &SpeciesState,
        sigma: Sigma,
        mut derivatives: Option<(&mut [f64], &mut BorderedMatrix)>,
    ) -> f64 {
        let layout = &self.layout;
        let table = self.model.table();
        let (counts, exposures) = (
            table.counts(layout.species),
            table.exposures(layout.species),
        );
        let observed = table.observed();
        let max_degree = layout.degrees.iter().copied().max().unwrap_or(0);
        let mut work = Workspace::new(max_degree);
        if let Some((gradient, hessian)) = derivatives.as_mut() {
            gradient.fill(0.0);
            hessian.clear();
        }
        let border_start = layout.border_start();
        // With every animal's warps at 0 and none of them estimated (the
        // structure selection's first pass), the animals of a treatment share
        // one curve: it and each bin's derivatives are computed once, for the
        // rows of all of them.
        let shared = self.animals_share_curves(state);
        let leading_animals = if shared { 1 } else { layout.animals };
        let mut members: Vec<usize> = Vec::with_capacity(layout.animals);
        let mut total = 0.0;
        for r in 0..leading_animals {
            let u = state.u[r];
            for c in 0..layout.contexts {
                let degree = layout.degrees[c];
                let (m, n) = (curve_len(degree), local_len(degree));
                let rho = state.rho[c];
                for t in 0..layout.treatments {
                    // The first key of each animal's block that this curve's rows are in.
                    members.clear();
                    let sharing = if shared { 0..layout.animals } else { r..r + 1 };
                    for animal in sharing {
                        let block = (animal * layout.contexts + c) * layout.treatments + t;
                        if self.active_blocks[block] {
                            members.push(table.block_key(animal, c, t));
                        }
                    }
                    if members.is_empty() {
                        continue;
                    }
                    let curve_index = c * layout.treatments + t;
                    let curve = &mut work.curves[degree];
                    curve.set(&state.theta[curve_index], u, self.axis);
                    let bin = &mut work.bins[degree];
                    let want = derivatives.is_some();
                    if want {
                        work.value_gradient[..m].fill(0.0);
                        work.value_hessian[..m * m].fill(0.0);
                        work.value_rho[..m].fill(0.0);
                    }
                    let (mut rho_gradient, mut rho_hessian) = (0.0, 0.0);
                    for b in 0..layout.bins {
                        // The rows of this bin, summed over the animals that share
                        // the curve (one animal's row where they do not).
                        let mut sum = RowTerm::default();
                        let mut rows = 0;
                        let mut rate_here = None;
                        for &first_key in &members {
                            let key = first_key + b;
                            if !observed[key] {
                                continue;
                            }
                            let rate_here = *rate_here.get_or_insert_with(|| {
                                rate(bin.evaluate(curve.values(), (b + 1) as f64))
                            });
                            let (y, exposure, lg) =
                                (counts[key], exposures[key], self.ln_gamma_count[key]);
                            rows += 1;
                            if !want {
                                sum.value += row_value_at(y, exposure, rate_here.value, rho, lg);
                                continue;
                            }
                            let term = row_term_at(y, exposure, &rate_here, rho, lg);
                            if rows == 1 {
                                sum = term;
                            } else {
                                sum.add(&term);
                            }
                        }
                        if rows == 0 {
                            continue;
                        }
                        total -= sum.value;
                        if want {
                            rho_gradient -= sum.d_rho;
                            rho_hessian -= sum.d_rho_rho;
                            add_bin_derivatives(
                                &mut work.value_gradient[..m],
                                &mut work.value_hessian[..m * m],
                                &mut work.value_rho[..m],
                                bin,
                                curve.values(),
                                &sum,
                            );
                        }
                    }
                    let Some((gradient, hessian)) = derivatives.as_mut() else {
                        continue;
                    };
                    let local_gradient = &mut work.local_gradient[..n];
                    let local_hessian = &mut work.local_hessian[..n * n];
                    let local_rho = &mut work.local_rho[..n];
                    local_gradient.fill(0.0);
                    local_hessian.fill(0.0);
                    local_rho.fill(0.0);
                    curve.add_local_gradient(&work.value_gradient[..m], local_gradient);
                    curve.add_local_hessian(
                        &work.value_gradient[..m],
                        &work.value_hessian[..m * m],
                        local_hessian,
                    );
                    curve.add_local_gradient(&work.value_rho[..m], local_rho);
                    // Shared curves have no warps to estimate, so any animal's
                    // (none) border positions serve.
                    self.scatter(
                        c,
                        curve_index,
                        r,
                        (m, n),
                        (local_gradient, local_hessian, local_rho),
                        (rho_gradient, rho_hessian),
                        gradient,
                        hessian,
                        border_start,
                    );
                }
            }
        }
        total += self.curve_priors(
            state,
            derivatives.as_mut().map(|(g, h)| (&mut **g, &mut **h)),
        );
        total += self.held_penalty(
            state,
            derivatives.as_mut().map(|(g, h)| (&mut **g, &mut **h)),
        );
        total += self.pin_penalty(
            state,
            derivatives.as_mut().map(|(g, h)| (&mut **g, &mut **h)),
        );
        // The random effects' normal prior.
        for r in 0..layout.animals {
            for w in 0..3 {
                if sigma[w] > 0.0 {
                    let precision = 1.0 / (sigma[w] * sigma[w]);
                    let u = state.u[r][w];
                    total += 0.5 * precision * u * u;
                    if let (Some((gradient, hessian)), Some(i)) =
                        (derivatives.as_mut(), layout.u_index[r][w])
                    {
                        gradient[i] += precision * u;
                        let b = i - border_start;
                        let m = layout.border;
                        hessian.border_block[b * m + b] += precision;
                    }
                }
            }
        }
        if total.is_finite() {
            total
        } else {
            f64::INFINITY
        }
    }

    /// Whether every animal's curves are the population's: no warp is
    /// estimated and every animal's warps are 0.
    fn animals_share_curves(&self, state: &SpeciesState) -> bool {
        self.layout
            .u_index
            .iter()
            .all(|indices| indices.iter().all(Option::is_none))
            && state.u.iter().all(|u| u.iter().all(|&w| w == 0.0))
    }

    /// Adds one (animal, curve) block's local derivatives into the species'
    /// gradient and bordered Hessian.
    #[allow(clippy::too_many_arguments)]
    fn scatter(
        &self,
        context: usize,
        curve_index: usize,
        animal: usize,
        (m, n): (usize, usize),
        (local_gradient, local_hessian, local_rho): (&[f64], &[f64], &[f64]),
        (rho_gradient, rho_hessian): (f64, f64),
        gradient: &mut [f64],
        hessian: &mut BorderedMatrix,
        border_start: usize,
    ) {
        let layout = &self.layout;
        let border = layout.border;
        // Border positions of this block's local u and ρ.
        let u_border: [Option<usize>; 3] =
            layout.u_index[animal].map(|i| i.map(|i| i - border_start));
        let rho_border = layout.rho_index[context].map(|i| i - border_start);
        // A curve held fixed (a restricted problem) still informs the border.
        let curve = layout.curve_offsets[curve_index]
            .map(|offset| (offset, curve_block(layout, curve_index)));
        for i in 0..m {
            let Some((offset, (block, start))) = curve else {
                break;
            };
            gradient[offset + i] += local_gradient[i];
            let size = layout.block_sizes[block];
            let a = &mut hessian.blocks[block];
            for j in 0..m {
                a[(start + i) * size + start + j] += local_hessian[i * n + j];
            }
            let coupling = &mut hessian.couplings[block];
            let row = start + i;
            for (w, ub) in u_border.iter().enumerate() {
                if let Some(ub) = ub {
                    coupling[row * border + ub] += local_hessian[i * n + m + w];
                }
            }
            if let Some(rb) = rho_border {
                coupling[row * border + rb] += local_rho[i];
            }
        }
        for (w, ub) in u_border.iter().enumerate() {
            let Some(ub) = *ub else { continue };
            gradient[border_start + ub] += local_gradient[m + w];
            for (w2, ub2) in u_border.iter().enumerate() {
                if let Some(ub2) = ub2 {
                    hessian.border_block[ub * border + ub2] += local_hessian[(m + w) * n + m + w2];
                }
            }
            if let Some(rb) = rho_border {
                hessian.border_block[ub * border + rb] += local_rho[m + w];
                hessian.border_block[rb * border + ub] += local_rho[m + w];
            }
        }
        if let Some(rb) = rho_border {
            gradient[border_start + rb] += rho_gradient;
            hessian.border_block[rb * border + rb] += rho_hessian;
        }
    }
}

/// Adds one bin's row terms into a curve block's derivatives in the curve
/// values: the chain rule through the bin's curve value Ψ(b), whose
/// gradient `bin` holds.
#[inline(always)]
fn add_bin_derivatives(
    value_gradient: &mut [f64],
    value_hessian: &mut [f64],
    value_rho: &mut [f64],
    bin: &BinDerivatives,
    values: &[f64],
    sum: &RowTerm,
) {
    let m = value_gradient.len();
    let g = &bin.gradient;
    for i in 0..m {
        value_gradient[i] -= sum.d_psi * g[i];
        value_rho[i] -= sum.d_psi_rho * g[i];
        let row = &mut value_hessian[i * m..(i + 1) * m];
        let scaled = -sum.d_psi_psi * g[i];
        for (h, &gj) in row.iter_mut().zip(g.iter()) {
            *h += scaled * gj;
        }
    }
    bin.add_hessian(values, -sum.d_psi, value_hessian);
}

/// The Hessian block of an estimable curve and where its θ starts in it.
pub(super) fn curve_block(layout: &SpeciesLayout, curve_index: usize) -> (usize, usize) {
    layout.curve_blocks[curve_index].expect("an estimable curve has a Hessian block")
}

#[cfg(test)]
mod tests {
    use super::super::tests_support::small_model;
    use super::*;
    use crate::nb::priors::{Priors, HELD_PRECISION};

    /// A state with every curve at a plausible θ and non-zero random effects.
    fn state_for(problem: &SpeciesProblem) -> SpeciesState {
        let layout = &problem.layout;
        let theta = (0..layout.contexts * layout.treatments)
            .map(|curve| {
                let degree = layout.degrees[curve / layout.treatments];
                let mut theta: Vec<f64> = (0..=degree).map(|k| 1.5 + 0.4 * k as f64).collect();
                theta.extend((0..degree).map(|k| -1.2 + 0.1 * (k + curve) as f64));
                theta.extend((0..degree).map(|k| -0.7 + 0.3 * k as f64));
                theta
            })
            .collect();
        SpeciesState {
            theta,
            rho: (0..layout.contexts)
                .map(|c| -1.5 + 0.2 * c as f64)
                .collect(),
            u: (0..layout.animals)
                .map(|r| {
                    [
                        0.1 * r as f64 - 0.1,
                        0.05 - 0.04 * r as f64,
                        0.2 - 0.1 * r as f64,
                    ]
                })
                .collect(),
        }
    }

    fn none() -> Priors {
        Priors {
            slope_sd: 0.0,
            step_sd: 0.0,
            effect_sd: 0.0,
        }
    }

    fn some() -> Priors {
        Priors {
            slope_sd: 2.0,
            step_sd: 1.5,
            effect_sd: 0.7,
        }
    }

    /// Solves W β = v by Gauss-Jordan elimination with partial pivoting.
    fn solve_by_hand(weights: &[f64], values: &[f64]) -> Vec<f64> {
        let n = values.len();
        let mut a: Vec<Vec<f64>> = (0..n)
            .map(|i| {
                let mut row = weights[i * n..(i + 1) * n].to_vec();
                row.push(values[i]);
                row
            })
            .collect();
        for col in 0..n {
            let pivot = (col..n)
                .max_by(|&x, &y| a[x][col].abs().total_cmp(&a[y][col].abs()))
                .unwrap();
            a.swap(col, pivot);
            for row in 0..n {
                if row != col {
                    let factor = a[row][col] / a[col][col];
                    for k in col..=n {
                        a[row][k] -= factor * a[col][k];
                    }
                }
            }
        }
        (0..n).map(|i| a[i][n] / a[i][i]).collect()
    }

    /// Asserts that the gradient and Hessian of `problem` at `state` match
    /// central differences of its value and gradient.
    fn assert_derivatives_match_finite_differences(
        problem: &SpeciesProblem,
        state: &SpeciesState,
        sigma: Sigma,
        label: &str,
    ) {
        let x = state.to_vector(&problem.layout);
        let n = x.len();
        let mut gradient = vec![0.0; n];
        let mut hessian = problem.hessian_shape();
        problem.evaluate(state, sigma, &mut gradient, &mut hessian);
        let value_at = |x: &[f64]| {
            let mut s = state.clone();
            s.set_vector(&problem.layout, x);
            problem.value(&s, sigma)
        };
        let gradient_at = |x: &[f64]| {
            let mut s = state.clone();
            s.set_vector(&problem.layout, x);
            let mut g = vec![0.0; n];
            let mut h = problem.hessian_shape();
            problem.evaluate(&s, sigma, &mut g, &mut h);
            g
        };
        let h = 1e-6;
        let unit = |i: usize| {
            let mut e = vec![0.0; n];
            e[i] = 1.0;
            e
        };
        for i in 0..n {
            let (mut up, mut down) = (x.clone(), x.clone());
            up[i] += h;
            down[i] -= h;
            let numeric = (value_at(&up) - value_at(&down)) / (2.0 * h);
            assert!(
                (gradient[i] - numeric).abs() <= 1e-5 * numeric.abs().max(1.0),
                "{label}, gradient {i}: {} vs {numeric}",
                gradient[i]
            );
            let column = hessian.multiply(&unit(i));
            let (g_up, g_down) = (gradient_at(&up), gradient_at(&down));
            for j in 0..n {
                let numeric = (g_up[j] - g_down[j]) / (2.0 * h);
                assert!(
                    (column[j] - numeric).abs() <= 1e-4 * numeric.abs().max(1.0),
                    "{label}, hessian ({j}, {i}): {} vs {numeric}",
                    column[j]
                );
            }
        }
    }

    #[test]
    fn gradient_and_hessian_match_finite_differences() {
        let model = small_model(7);
        for (species, priors) in
            (0..model.table().shape().species).flat_map(|s| [(s, none()), (s, some())])
        {
            let problem =
                SpeciesProblem::new(&model, species, [true, true, true]).with_priors(priors);
            let state = state_for(&problem);
            assert_derivatives_match_finite_differences(
                &problem,
                &state,
                [0.3, 0.2, 0.4],
                &format!("species {species}, priors {priors:?}"),
            );
        }
    }

    /// Without warps the animals share each treatment's curve, which the
    /// pass evaluates once for all of them: the value is still the sum of
    /// every observed row's negative-binomial log-pmf (written out here from
    /// ln Γ), and the derivatives still those of the value.
    #[test]
    fn curves_shared_by_the_animals_give_every_rows_likelihood() {
        let model = small_model(11);
        let table = model.table();
        for species in 0..table.shape().species {
            let problem = SpeciesProblem::new(&model, species, [false; 3]);
            let layout = &problem.layout;
            let mut state = state_for(&problem);
            state.u.iter_mut().for_each(|u| *u = [0.0; 3]);
            assert!(problem.animals_share_curves(&state));
            let mut expected = 0.0;
            let mut rows = 0;
            for r in 0..layout.animals {
                for c in 0..layout.contexts {
                    let degree = layout.degrees[c];
                    for t in 0..layout.treatments {
                        let mut curve = WarpedCurve::new(degree);
                        curve.set(
                            &state.theta[c * layout.treatments + t],
                            [0.0; 3],
                            problem.axis,
                        );
                        let mut bin = BinDerivatives::new(degree);
                        let first = table.block_key(r, c, t);
                        for b in 0..layout.bins {
                            let key = first + b;
                            if !table.observed()[key] {
                                continue;
                            }
                            let psi = bin.evaluate(curve.values(), (b + 1) as f64);
                            let y = table.counts(species)[key];
                            let exposure = table.exposures(species)[key];
                            let mu = exposure * rate(psi).value;
                            let k = exposure * (-state.rho[c]).exp();
                            let log_pmf = ln_gamma(y + k) - ln_gamma(k) - ln_gamma(y + 1.0)
                                + k * (k / (k + mu)).ln()
                                + y * (mu / (k + mu)).ln();
                            expected -= log_pmf;
                            rows += 1;
                        }
                    }
                }
            }
            assert!(rows > 0);
            let value = problem.negative_log_likelihood(&state);
            assert!(
                (value - expected).abs() <= 1e-9 * expected.abs(),
                "species {species}: {value} vs {expected} over {rows} rows"
            );
            assert_derivatives_match_finite_differences(
                &problem,
                &state,
                [0.0; 3],
                &format!("shared curves, species {species}"),
            );
        }
    }

    #[test]
    fn the_priors_add_their_hand_computed_penalty() {
        let model = small_model(5);
        let plain = SpeciesProblem::new(&model, 0, [true, true, true]);
        let priors = some();
        let (slope_sd, step_sd, effect_sd) = (priors.slope_sd, priors.step_sd, priors.effect_sd);
        let with = SpeciesProblem::new(&model, 0, [true, true, true]).with_priors(priors);
        let state = state_for(&plain);
        let sigma = [0.3, 0.2, 0.4];
        let mut expected = 0.0;
        let centre = (1.0f64 / 7.0).ln();
        // The priors see the curves at the animals' mean warps: rates times
        // e^(mean rate warp), slope logits plus the mean slope warp.
        let animals = state.u.len() as f64;
        let rate_factor = (state.u.iter().map(|u| u[1]).sum::<f64>() / animals).exp();
        let slope_shift = state.u.iter().map(|u| u[2]).sum::<f64>() / animals;
        assert!((rate_factor - 1.0).abs() > 1e-3 && slope_shift.abs() > 1e-3);
        for (curve, theta) in state.theta.iter().enumerate() {
            let degree = plain.layout.degrees[curve / plain.layout.treatments];
            assert_eq!(theta.len(), 3 * degree + 1);
            for k in 0..degree {
                expected += (theta[degree + 1 + k] + slope_shift - centre).powi(2)
                    / (2.0 * slope_sd * slope_sd);
                expected +=
                    (rate_factor * (theta[k + 1] - theta[k])).powi(2) / (2.0 * step_sd * step_sd);
            }
        }
        // The effects: β = W⁻¹ v of every unknown across the treatments,
        // every β but the baseline's (treatment 0).
        let layout = &plain.layout;
        let treatments = layout.treatments;
        assert!(treatments > 1);
        let weights = model.design().weights();
        for c in 0..layout.contexts {
            for i in 0..3 * layout.degrees[c] + 1 {
                let factor = if i <= layout.degrees[c] {
                    rate_factor
                } else {
                    1.0
                };
                let values: Vec<f64> = (0..treatments)
                    .map(|t| factor * state.theta[c * treatments + t][i])
                    .collect();
                let beta = solve_by_hand(weights, &values);
                for b in &beta[1..] {
                    expected += b * b / (2.0 * effect_sd * effect_sd);
                }
            }
        }
        assert!(expected > 0.0);
        let added = with.value(&state, sigma) - plain.value(&state, sigma);
        assert!(
            (added - expected).abs() < 1e-9 * expected,
            "{added} vs {expected}"
        );
        assert!((with.prior_penalty(&state) - expected).abs() < 1e-12 * expected);
        assert_eq!(plain.prior_penalty(&state), 0.0);
    }

    #[test]
    fn held_effects_add_their_hand_computed_penalty_with_exact_derivatives() {
        let base = small_model(5);
        let treatments = base.design().treatment_count();
        assert!(treatments > 1);
        let held = vec![treatments - 1];
        let model = base
            .clone()
            .with_held_effects(vec![treatments - 1, treatments - 1])
            .unwrap();
        assert_eq!(model.held_effects(), held.as_slice());
        let plain = SpeciesProblem::new(&base, 0, [true, true, true]);
        let with = SpeciesProblem::new(&model, 0, [true, true, true]);
        let state = state_for(&plain);
        let sigma = [0.3, 0.2, 0.4];
        let layout = &plain.layout;
        let weights = base.design().weights();
        let mut expected = 0.0;
        for c in 0..layout.contexts {
            for i in 0..3 * layout.degrees[c] + 1 {
                let values: Vec<f64> = (0..treatments)
                    .map(|t| state.theta[c * treatments + t][i])
                    .collect();
                let beta = solve_by_hand(weights, &values);
                for &j in &held {
                    expected += 0.5 * HELD_PRECISION * beta[j] * beta[j];
                }
            }
        }
        assert!(expected > 0.0);
        let added = with.value(&state, sigma) - plain.value(&state, sigma);
        assert!(
            (added - expected).abs() < 1e-9 * expected,
            "{added} vs {expected}"
        );
        assert!((with.prior_penalty(&state) - expected).abs() < 1e-9 * expected);
        // Gradient and Hessian of the penalty: it is quadratic, so central
        // differences of J's difference are exact but for rounding.
        let x = state.to_vector(&with.layout);
        let n = x.len();
        let evaluate = |problem: &SpeciesProblem, x: &[f64]| {
            let mut s = state.clone();
            s.set_vector(&problem.layout, x);
            let mut g = vec![0.0; n];
            let mut h = problem.hessian_shape();
            problem.evaluate(&s, sigma, &mut g, &mut h);
            (g, h)
        };
        let (g_with, h_with) = evaluate(&with, &x);
        let (g_plain, h_plain) = evaluate(&plain, &x);
        let step = 1e-4;
        for i in 0..n {
            let (mut up, mut down) = (x.clone(), x.clone());
            up[i] += step;
            down[i] -= step;
            let penalty = |x: &[f64]| {
                let mut s = state.clone();
                s.set_vector(&with.layout, x);
                with.prior_penalty(&s)
            };
            let numeric = (penalty(&up) - penalty(&down)) / (2.0 * step);
            let analytic = g_with[i] - g_plain[i];
            assert!(
                (analytic - numeric).abs() <= 1e-6 * numeric.abs().max(1.0),
                "gradient {i}: {analytic} vs {numeric}"
            );
            let mut unit = vec![0.0; n];
            unit[i] = 1.0;
            let (column_with, column_plain) = (h_with.multiply(&unit), h_plain.multiply(&unit));
            let (g_up, _) = evaluate(&with, &up);
            let (g_down, _) = evaluate(&with, &down);
            let (p_up, _) = evaluate(&plain, &up);
            let (p_down, _) = evaluate(&plain, &down);
            for j in 0..n {
                let numeric = ((g_up[j] - p_up[j]) - (g_down[j] - p_down[j])) / (2.0 * step);
                let analytic = column_with[j] - column_plain[j];
                assert!(
                    (analytic - numeric).abs() <= 1e-6 * numeric.abs().max(1.0),
                    "hessian ({j}, {i}): {analytic} vs {numeric}"
                );
            }
        }
        assert!(base.clone().with_held_effects(vec![0]).is_err());
        assert!(base.with_held_effects(vec![treatments]).is_err());
    }

    #[test]
    fn a_fixed_warp_has_no_unknown_and_no_penalty() {
        let model = small_model(3);
        let problem = SpeciesProblem::new(&model, 0, [false, true, false]);
        assert!(problem
            .layout
            .u_index
            .iter()
            .all(|u| u[0].is_none() && u[1].is_some()));
        let mut state = state_for(&problem);
        for u in &mut state.u {
            u[0] = 0.0;
            u[2] = 0.0;
        }
        let with = problem.value(&state, [0.0, 0.5, 0.0]);
        let nll = problem.negative_log_likelihood(&state);
        let prior: f64 = state.u.iter().map(|u| 0.5 * u[1] * u[1] / 0.25).sum();
        assert!((with - nll - prior).abs() < 1e-9 * with.abs());
    }
}
