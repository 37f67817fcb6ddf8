//! The model and its objective: the negative log-likelihood (model vignette §9.1),
//! the boundary-distance barrier penalty (§11.1) and the exact analytic gradient.

use crate::curve::{BlockCurve, WarpBounds, WarpFactors};
use crate::data::summed::SummedTable;
use crate::design::{
    boundary_distances_per_block, components_per_block, Component, Design, ParameterLayout,
    Structure, WarpKind,
};
use crate::numeric::special::{ln_gamma, ln_gamma_ratio, ln_gamma_ratio_and_digamma_difference};

/// The objective's stand-in for +∞ (model vignette §9.1).
pub(crate) const PSEUDO_INFINITY: f64 = 1e100;

/// Predicted log rates below this make the likelihood infinite (model
/// vignette §9.1).
pub(crate) const RATE_LOWER_BOUND: f64 = -0.01;

/// a_i·x_i is clamped below at this value, so one penalty term is at most 1e60.
pub(crate) const PENALTY_DISTANCE_FLOOR: f64 = 1e-30;

/// A position on the curve of one (ran block, context, species, treatment),
/// for [`Objective::curves_at`]; `x` is on the bin axis (bins are 1, 2, …).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct CurvePoint {
    pub(crate) block: usize,
    pub(crate) context: usize,
    pub(crate) species: usize,
    pub(crate) treatment: usize,
    pub(crate) x: f64,
}

/// Numeric settings of the objective.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Settings {
    /// Sets the pseudo-infinite warp bound of Rt and tslope: warp_precision / ε.
    pub(crate) warp_precision: f64,
    /// tpoint_buffer = ceil(B · buffer_factor).
    pub(crate) buffer_factor: f64,
    /// At the start point the penalty is this fraction of the nll.
    pub(crate) max_penalty_at_distance_factor: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            warp_precision: crate::rules::DEFAULT_WARP_PRECISION,
            buffer_factor: crate::rules::DEFAULT_BUFFER_FACTOR,
            max_penalty_at_distance_factor: crate::rules::DEFAULT_MAX_PENALTY_AT_DISTANCE_FACTOR,
        }
    }
}

impl Settings {
    /// Warp bound of Rt and tslope (≈ 4.5e8 with the default precision).
    pub(crate) fn inf_warp(&self) -> f64 {
        self.warp_precision / f64::EPSILON
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        if !(self.warp_precision.is_finite() && self.warp_precision > 0.0) {
            return Err(format!(
                "warp_precision must be positive and finite, got {}",
                self.warp_precision
            ));
        }
        crate::rules::check_buffer_factor(self.buffer_factor)?;
        if !(self.max_penalty_at_distance_factor.is_finite()
            && self.max_penalty_at_distance_factor > 0.0)
        {
            return Err(format!(
                "max_penalty_at_distance_factor must be positive and finite, got {}",
                self.max_penalty_at_distance_factor
            ));
        }
        Ok(())
    }
}

/// Everything the objective needs: data, design, degrees and settings.
#[derive(Clone, Debug)]
pub(crate) struct Model {
    table: SummedTable,
    design: Design,
    structure: Structure,
    settings: Settings,
    layout: ParameterLayout,
}

impl Model {
    /// Checks that the table, design and structure describe the same sizes,
    /// and that no curve has more transitions than bins.
    pub(crate) fn new(
        table: SummedTable,
        design: Design,
        structure: Structure,
        settings: Settings,
    ) -> Result<Self, String> {
        settings.validate()?;
        let shape = table.shape();
        let expected = [
            ("contexts", shape.contexts, design.contexts().len()),
            ("species", shape.species, design.species().len()),
            (
                "random-effect levels",
                shape.ran_levels,
                design.ran_levels().len(),
            ),
            ("treatments", shape.treatments, design.treatment_count()),
        ];
        for (what, in_table, in_design) in expected {
            if in_table != in_design {
                return Err(format!(
                    "the table has {in_table} {what}, the design has {in_design}"
                ));
            }
        }
        if let Some(&degree) = structure.degrees().iter().find(|&&d| d > shape.bins) {
            return Err(format!(
                "a curve has {degree} transitions, more than the {} bins",
                shape.bins
            ));
        }
        let layout = ParameterLayout::new(&design, &structure)?;
        Ok(Self {
            table,
            design,
            structure,
            settings,
            layout,
        })
    }

    pub(crate) fn table(&self) -> &SummedTable {
        &self.table
    }

    /// For refilling or resampling counts; the table's shape cannot change.
    pub(crate) fn table_mut(&mut self) -> &mut SummedTable {
        &mut self.table
    }

    pub(crate) fn design(&self) -> &Design {
        &self.design
    }

    pub(crate) fn structure(&self) -> &Structure {
        &self.structure
    }

    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }

    pub(crate) fn layout(&self) -> &ParameterLayout {
        &self.layout
    }

    pub(crate) fn parameter_count(&self) -> usize {
        self.layout.len()
    }

    pub(crate) fn parameter_names(&self) -> Vec<String> {
        self.layout.names(&self.design)
    }

    pub(crate) fn warp_bounds(&self) -> WarpBounds {
        let inf_warp = self.settings.inf_warp();
        WarpBounds {
            rate: inf_warp,
            slope: inf_warp,
            point: self.table.bins() as f64,
        }
    }

    /// Minimum spacing of transition points from each other and from 0 and B.
    pub(crate) fn tpoint_buffer(&self) -> f64 {
        (self.table.bins() as f64 * self.settings.buffer_factor).ceil()
    }
}

/// One row's log-likelihood and its derivative with respect to μ.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct RowTerm {
    pub(crate) log_likelihood: f64,
    pub(crate) d_mu: f64,
}

/// Log-likelihood of one observed row (model vignette §9.1): y = ln(1+count),
/// μ = Ψ.
///
/// The caller has already capped μ that are non-finite or below
/// [`RATE_LOWER_BOUND`]. λ and v come from the unclamped μ; μ in (−0.01, 0)
/// is then clamped to 0. Branches, kept as the original has them:
/// - v = 0 (λ = 0): Poisson log pmf y·ln μ − μ − ln Γ(y+1), with 0·ln 0 = 0.
///   Its derivative is reported as 0 because on both sides of μ = 0 the row
///   contributes nothing.
/// - y > 0 and μ > 0: the negative-binomial form with shape σ = μ²/v and rate
///   ρ = σ/μ. The original exponentiates it and takes the log again; that
///   round trip only adds underflow, so it is not repeated here (model
///   vignette §16).
/// - otherwise the row contributes nothing.
pub(crate) fn row_log_likelihood(
    y: f64,
    mu: f64,
    dispersion: f64,
    ln_gamma_y_plus_one: f64,
) -> RowTerm {
    row_term::<true>(y, mu, dispersion, ln_gamma_y_plus_one)
}

/// [`row_log_likelihood`] without the derivative (it costs two digammas).
pub(crate) fn row_log_likelihood_value(
    y: f64,
    mu: f64,
    dispersion: f64,
    ln_gamma_y_plus_one: f64,
) -> f64 {
    row_term::<false>(y, mu, dispersion, ln_gamma_y_plus_one).log_likelihood
}

fn row_term<const WITH_DERIVATIVE: bool>(
    y: f64,
    mu: f64,
    dispersion: f64,
    ln_gamma_y_plus_one: f64,
) -> RowTerm {
    const NOTHING: RowTerm = RowTerm {
        log_likelihood: 0.0,
        d_mu: 0.0,
    };
    let rate = mu.exp_m1();
    let scale = rate + 1.0;
    let variance = (rate + dispersion * rate * rate) / (scale * scale);
    let mu = mu.max(0.0);
    if variance == 0.0 {
        let log_term = if y == 0.0 { 0.0 } else { y * mu.ln() };
        let d_mu = if mu > 0.0 { y / mu - 1.0 } else { 0.0 };
        return RowTerm {
            log_likelihood: log_term - mu - ln_gamma_y_plus_one,
            d_mu,
        };
    }
    if !(y > 0.0 && mu > 0.0) {
        return NOTHING;
    }
    // σ·ln ρ − (y+σ)·ln(ρ+1) regrouped as −σ·ln(1+1/ρ) − y·ln(1+ρ), and
    // ln Γ(y+σ) − ln Γ(σ) taken as one difference: σ reaches 1e6 and more
    // when φ = 0, where the plain form cancels away most digits.
    let rho = mu / variance;
    let shape = mu * rho;
    let log_rate_term = (1.0 / rho).ln_1p();
    let (gamma_ratio, digamma_difference) = if WITH_DERIVATIVE {
        ln_gamma_ratio_and_digamma_difference(y, shape)
    } else {
        (ln_gamma_ratio(y, shape), 0.0)
    };
    let log_likelihood =
        -shape * log_rate_term - y * rho.ln_1p() + gamma_ratio - ln_gamma_y_plus_one;
    if !WITH_DERIVATIVE {
        return RowTerm {
            log_likelihood,
            d_mu: 0.0,
        };
    }
    let d_variance = (1.0 - rate + 2.0 * dispersion * rate) / (scale * scale);
    let d_rho = (1.0 - rho * d_variance) / variance;
    let d_shape = rho * (2.0 - rho * d_variance);
    let by_shape = -log_rate_term + digamma_difference;
    let by_rho = shape / rho - (y + shape) / (rho + 1.0);
    RowTerm {
        log_likelihood,
        d_mu: by_shape * d_shape + by_rho * d_rho,
    }
}

/// Neumaier-compensated sum: the nll adds thousands of terms, and central
/// differences of it need more than the plain sum's accuracy.
#[derive(Clone, Copy, Debug, Default)]
struct CompensatedSum {
    sum: f64,
    compensation: f64,
}

impl CompensatedSum {
    fn add(&mut self, value: f64) {
        let total = self.sum + value;
        if self.sum.abs() >= value.abs() {
            self.compensation += (self.sum - total) + value;
        } else {
            self.compensation += (value - total) + self.sum;
        }
        self.sum = total;
    }

    fn total(&self) -> f64 {
        self.sum + self.compensation
    }
}

/// What a pass does with the boundary distances.
#[derive(Clone, Copy)]
enum DistanceUse<'a> {
    /// Only compute them.
    Record,
    /// Add the barrier penalty (when coefficients are set).
    Penalty,
    /// Back-propagate these weights (a vector-Jacobian product).
    Weights(&'a [f64]),
}

struct PassOutcome {
    nll: f64,
    #[cfg(test)]
    capped: bool,
    penalty: f64,
}

/// The β parameters of one curve point (component m, context c, species s,
/// index k): one per treatment-design column, stored from `start` on.
struct BetaRun {
    start: usize,
    context: usize,
    species: usize,
    degree: usize,
    /// Where the point sits among its curve's unwarped values.
    position: usize,
}

/// Visits every β run in parameter order; shared by the forward map β → z
/// and its adjoint so both walk the layout the same way.
fn for_each_beta_run(model: &Model, mut visit: impl FnMut(BetaRun)) {
    let design = model.design();
    let layout = model.layout();
    let treatments = design.treatment_count();
    for context in 0..design.contexts().len() {
        for species in 0..design.species().len() {
            let degree = layout.degree(context, species);
            for component in Component::ALL {
                let Some(start) = layout.beta_start(component, context, species) else {
                    continue;
                };
                for k in 0..component.count(degree) {
                    visit(BetaRun {
                        start: start + k * treatments,
                        context,
                        species,
                        degree,
                        position: component.position(degree, k),
                    });
                }
            }
        }
    }
}

/// Evaluation workspace over a borrowed [`Model`]: every buffer is allocated
/// here, so evaluations do not touch the heap.
#[derive(Clone, Debug)]
pub(crate) struct Objective<'m> {
    model: &'m Model,
    bounds: WarpBounds,
    bins: f64,
    buffer: f64,
    /// z = W·β per (c, s, t), component-block layout; (c, s) runs start at `unwarped_starts`.
    unwarped: Vec<f64>,
    unwarped_adjoint: Vec<f64>,
    unwarped_starts: Vec<usize>,
    curve: BlockCurve,
    ln_gamma_count: Vec<f64>,
    distances: Vec<f64>,
    distance_adjoint: Vec<f64>,
    penalty_coefficients: Option<Vec<f64>>,
}

impl<'m> Objective<'m> {
    /// Allocates the workspace. The penalty stays off (0) until
    /// [`Objective::set_penalty_coefficients`] is called.
    pub(crate) fn new(model: &'m Model) -> Self {
        let structure = model.structure();
        let treatments = model.design().treatment_count();
        let mut unwarped_starts = Vec::with_capacity(structure.degrees().len());
        let mut next = 0;
        for &degree in structure.degrees() {
            unwarped_starts.push(next);
            next += treatments * components_per_block(degree);
        }
        let table = model.table();
        let ln_gamma_count = table
            .count_log()
            .iter()
            .zip(table.observed())
            .map(|(&y, &observed)| {
                if observed {
                    ln_gamma(y + 1.0)
                } else {
                    f64::NAN
                }
            })
            .collect();
        let max_degree = structure.max_degree();
        Self {
            model,
            bounds: model.warp_bounds(),
            bins: table.bins() as f64,
            buffer: model.tpoint_buffer(),
            unwarped: vec![0.0; next],
            unwarped_adjoint: vec![0.0; next],
            unwarped_starts,
            curve: BlockCurve::with_capacity(max_degree),
            ln_gamma_count,
            distances: vec![0.0; model.layout().boundary_distance_count()],
            distance_adjoint: vec![0.0; boundary_distances_per_block(max_degree)],
            penalty_coefficients: None,
        }
    }

    pub(crate) fn parameter_count(&self) -> usize {
        self.model.parameter_count()
    }

    pub(crate) fn boundary_distance_count(&self) -> usize {
        self.distances.len()
    }

    fn check_parameters(&self, x: &[f64]) -> Result<(), String> {
        if x.len() != self.parameter_count() {
            return Err(format!(
                "expected {} parameters, got {}",
                self.parameter_count(),
                x.len()
            ));
        }
        Ok(())
    }

    /// Negative log-likelihood; [`PSEUDO_INFINITY`] when a prediction on an
    /// observed row is non-finite or below [`RATE_LOWER_BOUND`], or the sum
    /// is NaN or above it.
    pub(crate) fn nll(&mut self, x: &[f64]) -> Result<f64, String> {
        self.check_parameters(x)?;
        Ok(self.pass(x, true, DistanceUse::Record, None).nll)
    }

    /// The barrier penalty Σ 1/(a_i·d_i)², 0 while no coefficients are set.
    #[cfg(any(test, feature = "test-hooks"))]
    pub(crate) fn penalty(&mut self, x: &[f64]) -> Result<f64, String> {
        self.check_parameters(x)?;
        Ok(self.pass(x, false, DistanceUse::Penalty, None).penalty)
    }

    /// nll + penalty, reported as `pen.neg.value` (model vignette §11.1).
    #[cfg(test)]
    pub(crate) fn value(&mut self, x: &[f64]) -> Result<f64, String> {
        self.check_parameters(x)?;
        let outcome = self.pass(x, true, DistanceUse::Penalty, None);
        Ok(outcome.nll + outcome.penalty)
    }

    /// nll + penalty and its exact gradient. Where the nll is capped at
    /// [`PSEUDO_INFINITY`] the gradient is all zeros: the cap is flat, and a
    /// line search has to back off on the value alone.
    pub(crate) fn value_and_gradient(
        &mut self,
        x: &[f64],
        gradient: &mut [f64],
    ) -> Result<f64, String> {
        self.check_parameters(x)?;
        if gradient.len() != x.len() {
            return Err(format!(
                "the gradient has {} entries, the parameters {}",
                gradient.len(),
                x.len()
            ));
        }
        let outcome = self.pass(x, true, DistanceUse::Penalty, Some(gradient));
        Ok(outcome.nll + outcome.penalty)
    }

    /// Boundary distances (model vignette §11.1) in the original's order: ran
    /// block, context, species, treatment, then within the block.
    pub(crate) fn boundary_distances(&mut self, x: &[f64]) -> Result<&[f64], String> {
        self.check_parameters(x)?;
        self.pass(x, false, DistanceUse::Record, None);
        Ok(&self.distances)
    }

    /// gradient = Σ_i weights_i · ∇distance_i (e.g. a one-hot weight on the
    /// smallest distance for the feasibility search). Returns the distances.
    pub(crate) fn boundary_distances_vjp(
        &mut self,
        x: &[f64],
        weights: &[f64],
        gradient: &mut [f64],
    ) -> Result<&[f64], String> {
        self.check_parameters(x)?;
        if weights.len() != self.distances.len() || gradient.len() != x.len() {
            return Err(format!(
                "expected {} weights and {} gradient entries, got {} and {}",
                self.distances.len(),
                x.len(),
                weights.len(),
                gradient.len()
            ));
        }
        self.pass(x, false, DistanceUse::Weights(weights), Some(gradient));
        Ok(&self.distances)
    }

    /// Predicted log rate Ψ for every table row, unobserved rows included.
    pub(crate) fn predict_log(&mut self, x: &[f64], out: &mut [f64]) -> Result<(), String> {
        self.check_parameters(x)?;
        let table = self.model.table();
        if out.len() != table.row_count() {
            return Err(format!(
                "expected room for {} predictions, got {}",
                table.row_count(),
                out.len()
            ));
        }
        self.compute_unwarped(x);
        let shape = table.shape();
        let ran_blocks = table.ran_blocks();
        for block in 0..ran_blocks.count() {
            for c in 0..shape.contexts {
                for s in 0..shape.species {
                    let degree = self.model.structure().degree(c, s);
                    let factors = self.warp_factors(x, block, s).1;
                    for t in 0..shape.treatments {
                        let start = self.unwarped_start(c, s, t, degree);
                        let unwarped = &self.unwarped[start..start + components_per_block(degree)];
                        self.curve.set(degree, unwarped, factors, self.bounds);
                        let first_row = table.block_start_row(block, c, s, t);
                        for bin in 0..shape.bins {
                            out[first_row + bin] = self.curve.evaluate((bin + 1) as f64);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Ψ at arbitrary positions on the bin axis (fractional bins included) of
    /// the curves of chosen (ran block, context, species, treatment): the
    /// curves of [`Objective::predict_log`], evaluated at `points[i].x`
    /// instead of the whole bins. Positions must be finite and within the
    /// bins' span, [0.5, bins + 0.5].
    pub(crate) fn curves_at(
        &mut self,
        x: &[f64],
        points: &[CurvePoint],
    ) -> Result<Vec<f64>, String> {
        self.check_parameters(x)?;
        let shape = self.model.table().shape();
        let blocks = self.model.table().ran_blocks().count();
        for (i, point) in points.iter().enumerate() {
            if point.block >= blocks
                || point.context >= shape.contexts
                || point.species >= shape.species
                || point.treatment >= shape.treatments
            {
                return Err(format!("curve point {} is outside the model", i + 1));
            }
            if !(point.x.is_finite() && point.x >= 0.5 && point.x <= self.bins + 0.5) {
                return Err(format!(
                    "curve point {} is at {}, outside the bins' span [0.5, {}]",
                    i + 1,
                    point.x,
                    self.bins + 0.5
                ));
            }
        }
        self.compute_unwarped(x);
        let mut out = Vec::with_capacity(points.len());
        for point in points {
            let (c, s, t) = (point.context, point.species, point.treatment);
            let degree = self.model.structure().degree(c, s);
            let factors = self.warp_factors(x, point.block, s).1;
            let start = self.unwarped_start(c, s, t, degree);
            let unwarped = &self.unwarped[start..start + components_per_block(degree)];
            self.curve.set(degree, unwarped, factors, self.bounds);
            out.push(self.curve.evaluate(point.x));
        }
        Ok(out)
    }

    /// Feasible as the original checks it (model vignette §11.1): every boundary
    /// distance > 0 and every predicted log rate finite and ≥ −0.01.
    /// `predictions` needs one slot per row.
    pub(crate) fn is_feasible(
        &mut self,
        x: &[f64],
        predictions: &mut [f64],
    ) -> Result<bool, String> {
        self.predict_log(x, predictions)?;
        let rates_ok = predictions
            .iter()
            .all(|&mu| mu.is_finite() && mu >= RATE_LOWER_BOUND);
        let distances_ok = self.boundary_distances(x)?.iter().all(|&d| d > 0.0);
        Ok(rates_ok && distances_ok)
    }

    /// Sets a_i = κ/x⁰_i with κ = sqrt(n / (nll(x⁰)·factor)), so every term
    /// starts at nll(x⁰)·factor/n. Fails unless x⁰ is strictly feasible and
    /// its nll positive and finite.
    pub(crate) fn set_penalty_coefficients(&mut self, start: &[f64]) -> Result<(), String> {
        let start_nll = self.nll(start)?;
        if !(start_nll > 0.0 && start_nll < PSEUDO_INFINITY) {
            return Err(format!(
                "the nll at the start point must be positive and finite to scale the penalty, got {start_nll}"
            ));
        }
        let factor = self.model.settings().max_penalty_at_distance_factor;
        let distances = self.boundary_distances(start)?;
        if let Some((index, distance)) = distances
            .iter()
            .enumerate()
            .find(|(_, &d)| !(d > 0.0 && d.is_finite()))
        {
            return Err(format!(
                "the start point is outside the boundaries: distance {index} is {distance}"
            ));
        }
        let kappa = (distances.len() as f64 / (start_nll * factor)).sqrt();
        let coefficients = distances.iter().map(|&d| kappa / d).collect();
        self.penalty_coefficients = Some(coefficients);
        Ok(())
    }

    #[cfg(test)]
    pub(crate) fn penalty_coefficients(&self) -> Option<&[f64]> {
        self.penalty_coefficients.as_deref()
    }

    fn unwarped_start(
        &self,
        context: usize,
        species: usize,
        treatment: usize,
        degree: usize,
    ) -> usize {
        let species_count = self.model.design().species().len();
        self.unwarped_starts[context * species_count + species]
            + treatment * components_per_block(degree)
    }

    /// Warping-factor indices and values of a (ran block, species); zeros and
    /// no indices for population rows and single-level models.
    fn warp_factors(
        &self,
        x: &[f64],
        block: usize,
        species: usize,
    ) -> (Option<[usize; 3]>, WarpFactors) {
        let layout = self.model.layout();
        let indices = self
            .model
            .table()
            .ran_blocks()
            .warped_of_block(block)
            .and_then(|ran| {
                Some([
                    layout.warp_index(WarpKind::Point, species, ran)?,
                    layout.warp_index(WarpKind::Rate, species, ran)?,
                    layout.warp_index(WarpKind::Slope, species, ran)?,
                ])
            });
        let factors = match indices {
            Some([point, rate, slope]) => WarpFactors {
                point: x[point],
                rate: x[rate],
                slope: x[slope],
            },
            None => WarpFactors::default(),
        };
        (indices, factors)
    }

    /// z_{m,c,s,k}(t) = Σ_i W[t, i]·β_{m,c,s,k,i} for every (c, s, t).
    fn compute_unwarped(&mut self, x: &[f64]) {
        let model = self.model;
        let design = model.design();
        let treatments = design.treatment_count();
        for_each_beta_run(model, |run| {
            let betas = &x[run.start..run.start + treatments];
            for t in 0..treatments {
                let z: f64 = design
                    .weight_row(t)
                    .iter()
                    .zip(betas)
                    .map(|(w, beta)| w * beta)
                    .sum();
                let at =
                    self.unwarped_start(run.context, run.species, t, run.degree) + run.position;
                self.unwarped[at] = z;
            }
        });
    }

    /// ∂/∂β_{m,c,s,k,i} = Σ_t W[t, i]·∂/∂z_{m,c,s,k}(t).
    fn add_beta_gradient(&self, gradient: &mut [f64]) {
        let model = self.model;
        let design = model.design();
        let treatments = design.treatment_count();
        for_each_beta_run(model, |run| {
            for t in 0..treatments {
                let adjoint = self.unwarped_adjoint
                    [self.unwarped_start(run.context, run.species, t, run.degree) + run.position];
                if adjoint == 0.0 {
                    continue;
                }
                for (g, w) in gradient[run.start..run.start + treatments]
                    .iter_mut()
                    .zip(design.weight_row(t))
                {
                    *g += w * adjoint;
                }
            }
        });
    }

    /// One sweep over all blocks: likelihood (optional), boundary distances,
    /// and, when `gradient` is given, the backward pass into it.
    fn pass(
        &mut self,
        x: &[f64],
        include_data: bool,
        distance_use: DistanceUse<'_>,
        mut gradient: Option<&mut [f64]>,
    ) -> PassOutcome {
        let model = self.model;
        let table = model.table();
        let structure = model.structure();
        let shape = table.shape();
        let ran_blocks = table.ran_blocks();
        let count_log = table.count_log();
        let observed = table.observed();
        let want_gradient = gradient.is_some();

        self.compute_unwarped(x);
        if let Some(g) = gradient.as_deref_mut() {
            g.fill(0.0);
            self.unwarped_adjoint.fill(0.0);
        }

        let mut nll = CompensatedSum::default();
        let mut penalty = CompensatedSum::default();
        let mut capped = false;
        let mut distance_at = 0;
        for block in 0..ran_blocks.count() {
            for c in 0..shape.contexts {
                for s in 0..shape.species {
                    let degree = structure.degree(c, s);
                    let per_block = components_per_block(degree);
                    let distance_count = boundary_distances_per_block(degree);
                    let dispersion = table.dispersion(c, s);
                    let (warp_indices, factors) = self.warp_factors(x, block, s);
                    for t in 0..shape.treatments {
                        let start = self.unwarped_start(c, s, t, degree);
                        self.curve.set(
                            degree,
                            &self.unwarped[start..start + per_block],
                            factors,
                            self.bounds,
                        );

                        if include_data && !capped {
                            self.curve.tabulate_bins(shape.bins);
                            let first_row = table.block_start_row(block, c, s, t);
                            for bin in 0..shape.bins {
                                let row = first_row + bin;
                                if !observed[row] {
                                    continue;
                                }
                                let mu = self.curve.evaluate_bin(bin + 1);
                                if !mu.is_finite() || mu < RATE_LOWER_BOUND {
                                    capped = true;
                                    break;
                                }
                                let (y, ln_gamma_y) = (count_log[row], self.ln_gamma_count[row]);
                                if want_gradient {
                                    let term = row_log_likelihood(y, mu, dispersion, ln_gamma_y);
                                    nll.add(-term.log_likelihood);
                                    if term.d_mu != 0.0 {
                                        self.curve.add_value_adjoint(-term.d_mu);
                                    }
                                } else {
                                    nll.add(-row_log_likelihood_value(
                                        y, mu, dispersion, ln_gamma_y,
                                    ));
                                }
                            }
                        }

                        let distances =
                            &mut self.distances[distance_at..distance_at + distance_count];
                        self.curve
                            .boundary_distances(self.bins, self.buffer, distances);
                        match distance_use {
                            DistanceUse::Record => {}
                            DistanceUse::Penalty => {
                                if let Some(coefficients) = &self.penalty_coefficients {
                                    let coefficients =
                                        &coefficients[distance_at..distance_at + distance_count];
                                    for ((&distance, &a), adjoint) in distances
                                        .iter()
                                        .zip(coefficients)
                                        .zip(self.distance_adjoint.iter_mut())
                                    {
                                        let scaled = a * distance;
                                        if scaled > PENALTY_DISTANCE_FLOOR {
                                            penalty.add(1.0 / (scaled * scaled));
                                            *adjoint = -2.0 * a / (scaled * scaled * scaled);
                                        } else {
                                            let floor = PENALTY_DISTANCE_FLOOR;
                                            penalty.add(1.0 / (floor * floor));
                                            *adjoint = 0.0;
                                        }
                                    }
                                    if want_gradient {
                                        self.curve.add_boundary_adjoint(
                                            &self.distance_adjoint[..distance_count],
                                        );
                                    }
                                }
                            }
                            DistanceUse::Weights(weights) => {
                                if want_gradient {
                                    self.curve.add_boundary_adjoint(
                                        &weights[distance_at..distance_at + distance_count],
                                    );
                                }
                            }
                        }

                        if let Some(g) = gradient.as_deref_mut() {
                            let factor_adjoint = self.curve.accumulate_unwarped_adjoint(
                                &mut self.unwarped_adjoint[start..start + per_block],
                            );
                            if let Some([point, rate, slope]) = warp_indices {
                                g[point] += factor_adjoint.point;
                                g[rate] += factor_adjoint.rate;
                                g[slope] += factor_adjoint.slope;
                            }
                        }
                        distance_at += distance_count;
                    }
                }
            }
        }

        let mut nll_value = nll.total();
        if capped || nll_value.is_nan() || nll_value > PSEUDO_INFINITY {
            nll_value = PSEUDO_INFINITY;
            capped = true;
        }
        if let Some(g) = gradient {
            if include_data && capped {
                g.fill(0.0);
            } else {
                self.add_beta_gradient(g);
            }
        }
        PassOutcome {
            nll: nll_value,
            #[cfg(test)]
            capped,
            penalty: penalty.total(),
        }
    }

    /// Whether the nll at x is capped at [`PSEUDO_INFINITY`].
    #[cfg(test)]
    pub(crate) fn is_capped(&mut self, x: &[f64]) -> Result<bool, String> {
        self.check_parameters(x)?;
        Ok(self.pass(x, true, DistanceUse::Record, None).capped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn central<F: Fn(f64) -> f64>(f: F, x: f64) -> f64 {
        let h = 1e-6 * x.abs().max(1.0);
        (f(x + h) - f(x - h)) / (2.0 * h)
    }

    #[test]
    fn negative_binomial_branch_matches_the_written_formula() {
        let (count, mu, dispersion): (f64, f64, f64) = (6.0, 2.2, 0.15);
        let y = count.ln_1p();
        let lambda = mu.exp() - 1.0;
        let v = (lambda + dispersion * lambda * lambda) / ((lambda + 1.0) * (lambda + 1.0));
        let sigma = mu * mu / v;
        let rho = sigma / mu;
        let expected = sigma * rho.ln() + ln_gamma(y + sigma)
            - ln_gamma(y + 1.0)
            - ln_gamma(sigma)
            - (y + sigma) * (rho + 1.0).ln();
        let term = row_log_likelihood(y, mu, dispersion, ln_gamma(y + 1.0));
        assert!((term.log_likelihood - expected).abs() < 1e-12 * expected.abs().max(1.0));
        let value = row_log_likelihood_value(y, mu, dispersion, ln_gamma(y + 1.0));
        assert_eq!(value, term.log_likelihood);
    }

    #[test]
    fn row_derivative_matches_finite_differences() {
        for &(count, mu, dispersion) in &[
            (6.0, 2.2, 0.15),
            (1.0, 0.05, 0.0),
            (40.0, 3.1, 0.0),
            (3.0, 9.0, 0.0),
            (12.0, 1.3, 2.5),
        ] {
            let y: f64 = f64::ln_1p(count);
            let lg = ln_gamma(y + 1.0);
            let term = row_log_likelihood(y, mu, dispersion, lg);
            let fd = central(
                |m| row_log_likelihood(y, m, dispersion, lg).log_likelihood,
                mu,
            );
            assert!(
                (term.d_mu - fd).abs() <= 1e-6 * fd.abs().max(1.0),
                "count {count}, mu {mu}, phi {dispersion}: {} vs {fd}",
                term.d_mu
            );
        }
    }

    #[test]
    fn rows_without_count_or_rate_contribute_nothing() {
        let lg = ln_gamma(1.0);
        assert_eq!(row_log_likelihood(0.0, 1.5, 0.2, lg).log_likelihood, 0.0);
        let negative = row_log_likelihood(2f64.ln(), -0.005, 0.2, ln_gamma(1.0 + 2f64.ln()));
        assert_eq!(
            negative,
            RowTerm {
                log_likelihood: 0.0,
                d_mu: 0.0
            }
        );
    }

    #[test]
    fn zero_variance_uses_the_poisson_branch() {
        let zero = row_log_likelihood(0.0, 0.0, 0.3, 0.0);
        assert_eq!(
            zero,
            RowTerm {
                log_likelihood: 0.0,
                d_mu: 0.0
            }
        );
        let y = 3f64.ln_1p();
        let positive = row_log_likelihood(y, 0.0, 0.3, ln_gamma(y + 1.0));
        assert_eq!(positive.log_likelihood, f64::NEG_INFINITY);
    }

    #[test]
    fn settings_are_validated() {
        assert!(Settings::default().validate().is_ok());
        assert!((Settings::default().inf_warp() - 4.503_599_627_370_496e8).abs() < 1.0);
        let bad = Settings {
            buffer_factor: 1.0,
            ..Settings::default()
        };
        assert!(bad.validate().is_err());
        let bad = Settings {
            warp_precision: 0.0,
            ..Settings::default()
        };
        assert!(bad.validate().is_err());
    }
}
