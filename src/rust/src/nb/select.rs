//! Each curve's number of transitions chosen by the count likelihood (model
//! vignette §12.6).
//!
//! For one (context, species) curve, candidate degrees d = 0, 1, 2, … are
//! fitted one after another, each with the count likelihood and the full
//! treatment design, and scored by BIC; the search stops once two degrees
//! in a row have not improved on the best score. Candidate transition
//! positions come from exact segmentations of the curve's pooled counts:
//! breaks shared by the treatments, and each treatment's own; the better
//! fit of the two starts is the candidate. The winner's next lower degree
//! is refitted from the winner's points less one (see [`refine_downwards`]).
//! The random effects are held fixed while selecting — at 0 in the first
//! pass, at a pooled fit's in the second (see
//! [`super::degrees::select_structure`]) — so curves are independent of
//! each other and the selection of a curve depends on its own rows (and
//! the held warps) only, the same for any worker count.

use super::curve::CurveValues;
use super::fit::fit_species_held;
use super::settings::CountFitSettings;
use super::unknowns::SpeciesState;
use super::CountModel;
use crate::changepoint::DetectedChangePoints;
use serde::{Deserialize, Serialize};

/// The most transitions a curve is given as a candidate (the same limit
/// as `degrees =` in R).
pub(crate) const MAX_CANDIDATE_DEGREE: usize = 20;

/// Degrees fitted past the best one before the search stops.
pub(crate) const PATIENCE: usize = 2;

/// One candidate degree of a curve and its fit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Candidate {
    pub degree: usize,
    /// −log-likelihood at the candidate's estimate (priors left out).
    pub negative_log_likelihood: f64,
    /// Estimated parameters: every coordinate of the curves with observed
    /// rows, and the dispersion.
    pub parameters: usize,
    /// BIC = 2 nll + parameters · ln(observations); +∞ for a failed fit.
    pub criterion: f64,
    pub converged: bool,
    /// Per treatment, the fitted transition points (bins).
    pub points: Vec<Vec<f64>>,
    /// Why the fit failed, if it did.
    pub failure: Option<String>,
}

/// The selection of one curve: every candidate fitted, and the winner.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct CurveSelection {
    pub context: usize,
    pub species: usize,
    /// Observed rows of the curve (the n of BIC).
    pub observations: usize,
    pub candidates: Vec<Candidate>,
    /// Index of the winner in `candidates`.
    pub chosen: usize,
    /// Whether the user fixed the degree (`degrees =`): then the one
    /// candidate is that degree, fitted for its change points only.
    pub fixed: bool,
}

impl CurveSelection {
    pub fn degree(&self) -> usize {
        self.candidates[self.chosen].degree
    }

    /// How much worse the runner-up scored than the winner (+∞ when no
    /// other candidate has a finite score).
    pub fn margin(&self) -> f64 {
        let best = self.candidates[self.chosen].criterion;
        self.candidates
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != self.chosen)
            .map(|(_, c)| c.criterion - best)
            .fold(f64::INFINITY, f64::min)
    }
}

/// The pooled counts of one curve per treatment, on the bins some animal
/// measured: summed counts and exposures over the animals.
struct PooledCounts {
    /// The measured bins (0-based), in order.
    kept: Vec<usize>,
    /// Per treatment, prefix sums over the kept bins of counts and exposures.
    count_sums: Vec<Vec<f64>>,
    exposure_sums: Vec<Vec<f64>>,
}

impl PooledCounts {
    fn new(model: &CountModel, context: usize, species: usize) -> Self {
        let table = model.table();
        let shape = table.shape();
        let (counts, exposures, observed) = (
            table.counts(species),
            table.exposures(species),
            table.observed(),
        );
        let mut count = vec![vec![0.0; shape.bins]; shape.treatments];
        let mut exposure = vec![vec![0.0; shape.bins]; shape.treatments];
        for r in 0..shape.ran_levels {
            for t in 0..shape.treatments {
                let first = table.block_key(r, context, t);
                for b in 0..shape.bins {
                    if observed[first + b] {
                        count[t][b] += counts[first + b];
                        exposure[t][b] += exposures[first + b];
                    }
                }
            }
        }
        let kept: Vec<usize> = (0..shape.bins)
            .filter(|&b| exposure.iter().any(|e| e[b] > 0.0))
            .collect();
        let prefix = |series: &[f64]| {
            let mut sums = Vec::with_capacity(kept.len() + 1);
            sums.push(0.0);
            for &b in &kept {
                sums.push(sums.last().copied().unwrap_or(0.0) + series[b]);
            }
            sums
        };
        PooledCounts {
            count_sums: count.iter().map(|c| prefix(c)).collect(),
            exposure_sums: exposure.iter().map(|e| prefix(e)).collect(),
            kept,
        }
    }

    fn len(&self) -> usize {
        self.kept.len()
    }

    /// The same measured bins, counts of treatment `t` only.
    fn of_treatment(&self, t: usize) -> PooledCounts {
        PooledCounts {
            kept: self.kept.clone(),
            count_sums: vec![self.count_sums[t].clone()],
            exposure_sums: vec![self.exposure_sums[t].clone()],
        }
    }

    fn treatments(&self) -> usize {
        self.count_sums.len()
    }

    /// −Poisson log-likelihood (up to a constant) of kept bins [i, j) with
    /// one rate per treatment at its maximum: Σ_t Y − Y ln(Y/E).
    fn cost(&self, i: usize, j: usize) -> f64 {
        self.count_sums
            .iter()
            .zip(&self.exposure_sums)
            .map(|(y, e)| {
                let (y, e) = (y[j] - y[i], e[j] - e[i]);
                if y > 0.0 && e > 0.0 {
                    y - y * (y / e).ln()
                } else {
                    0.0
                }
            })
            .sum()
    }

    /// The point between kept bins `index − 1` and `index` on the 1-based
    /// bin axis (a segment starting at 0-based bin i begins at i + 0.5).
    fn point_before(&self, index: usize) -> f64 {
        0.5 * (self.kept[index - 1] + self.kept[index]) as f64 + 1.0
    }
}

/// Exact segmentation of a curve's pooled counts into piecewise constant
/// rates, the change points shared by the treatments, each segment at least
/// `min_size` measured bins (optimal partitioning by dynamic programming:
/// O(B²·T) per degree, computed one degree at a time as the search asks).
struct Segmentation {
    pooled: PooledCounts,
    min_size: usize,
    /// best[k][j]: the cost of kept bins [0, j) in k + 1 segments; from[k][j]
    /// the start of the last segment.
    best: Vec<Vec<f64>>,
    from: Vec<Vec<usize>>,
}

impl Segmentation {
    fn new(pooled: PooledCounts, min_size: usize) -> Self {
        let n = pooled.len();
        let mut first = vec![f64::INFINITY; n + 1];
        for j in min_size..=n {
            first[j] = pooled.cost(0, j);
        }
        Segmentation {
            pooled,
            min_size,
            best: vec![first],
            from: vec![vec![0; n + 1]],
        }
    }

    /// The most segments' boundaries the measured bins have room for.
    fn max_degree(&self) -> usize {
        (self.pooled.len() / self.min_size).saturating_sub(1)
    }

    /// The d change points of the best segmentation into d + 1 segments
    /// (d ≤ [`Self::max_degree`]).
    fn points(&mut self, degree: usize) -> Vec<f64> {
        let n = self.pooled.len();
        let size = self.min_size;
        while self.best.len() <= degree {
            let k = self.best.len();
            let previous = &self.best[k - 1];
            let mut best = vec![f64::INFINITY; n + 1];
            let mut from = vec![0; n + 1];
            for j in (k + 1) * size..=n {
                for i in k * size..=j - size {
                    let value = previous[i] + self.pooled.cost(i, j);
                    if value < best[j] {
                        best[j] = value;
                        from[j] = i;
                    }
                }
            }
            self.best.push(best);
            self.from.push(from);
        }
        let mut starts = Vec::with_capacity(degree);
        let mut end = n;
        for k in (1..=degree).rev() {
            let start = self.from[k][end];
            starts.push(start);
            end = start;
        }
        starts.reverse();
        starts
            .into_iter()
            .map(|i| self.pooled.point_before(i))
            .collect()
    }
}

/// Fits curve (context, species) of `model` with `degree` transitions
/// started at `points` (per treatment), random effects at 0 or held at
/// `held` (per animal). Returns the candidate, the curve's observed rows
/// and the fit's state.
fn fit_candidate(
    model: &CountModel,
    context: usize,
    species: usize,
    degree: usize,
    start: CandidateStart,
    settings: &CountFitSettings,
    held: Option<&[[f64; 3]]>,
) -> Result<(Candidate, usize, SpeciesState), String> {
    let curve = model.curve_model(context, species, degree)?;
    // The random effects couple a species' curves; held fixed (at 0, or at
    // the pooled fit's) every curve is a problem of its own (model vignette
    // §12.6).
    let settings = CountFitSettings {
        fixed_sigma: Some([0.0; 3]),
        ..*settings
    };
    let held = held.filter(|_| curve.has_random_effects());
    let fit = match start {
        CandidateStart::Points(points) => {
            let start = DetectedChangePoints {
                structure: curve.structure().clone(),
                change_points: vec![points.to_vec()],
            };
            fit_species_held(&curve, 0, Some(&start), None, &settings, held)?
        }
        CandidateStart::Fitted(state) => {
            fit_species_held(&curve, 0, None, Some((state, [0.0; 3])), &settings, held)?
        }
    };
    let observations = curve.table().observed_row_count();
    let estimated_curves = fit
        .curve_informed
        .iter()
        .filter(|informed| informed.iter().any(|&i| i))
        .count();
    let parameters = estimated_curves * super::curve::curve_len(degree)
        + fit.rho_informed.iter().filter(|&&i| i).count();
    let nll = fit.negative_log_likelihood;
    let criterion = if nll.is_finite() {
        2.0 * nll + parameters as f64 * (observations.max(1) as f64).ln()
    } else {
        f64::INFINITY
    };
    let axis = curve.axis();
    let points = fit
        .state
        .theta
        .iter()
        .map(|theta| CurveValues::from_theta(theta, degree, axis).points)
        .collect();
    Ok((
        Candidate {
            degree,
            negative_log_likelihood: nll,
            parameters,
            criterion,
            converged: fit.converged,
            points,
            failure: None,
        },
        observations,
        fit.state,
    ))
}

/// Where a candidate's fit starts.
#[derive(Clone, Copy)]
enum CandidateStart<'a> {
    /// Transition points per treatment; the fit warms up from them.
    Points(&'a [Vec<f64>]),
    /// A fit of the same degree (the first pass's, under other warps).
    Fitted(&'a SpeciesState),
}

/// Per degree, the state of a curve's best fit of that degree (None for a
/// degree not fitted, or whose fits all failed).
pub(crate) type FittedDegrees = Vec<Option<SpeciesState>>;

/// Chooses the degree of curve (context, species): fits d = 0, 1, … in
/// turn and stops after [`PATIENCE`] degrees in a row that do not improve
/// on the best BIC, or at the most transitions the bins have room for.
/// With `fixed` = Some(d) (the user's `degrees =`) only d is fitted, for
/// its change points; d must fit the bins.
#[cfg(test)]
pub(crate) fn select_curve(
    model: &CountModel,
    context: usize,
    species: usize,
    fixed: Option<usize>,
    settings: &CountFitSettings,
    held: Option<&[[f64; 3]]>,
) -> Result<CurveSelection, String> {
    select_curve_from(model, context, species, fixed, settings, held, None)
        .map(|(selection, _)| selection)
}

/// [`select_curve`], each degree that `fitted` has a fit of started from
/// that fit alone (the second pass starts from the first's: the warps it
/// holds move each optimum a little, and a start at the optimum needs
/// neither a warm-up nor a second start). Returns the selection and the
/// state of each degree's best fit.
pub(crate) fn select_curve_from(
    model: &CountModel,
    context: usize,
    species: usize,
    fixed: Option<usize>,
    settings: &CountFitSettings,
    held: Option<&[[f64; 3]]>,
    fitted: Option<&FittedDegrees>,
) -> Result<(CurveSelection, FittedDegrees), String> {
    let bins = model.table().shape().bins;
    let gap = model.point_gap();
    let min_size = (gap.ceil() as usize).max(1);
    let pooled = PooledCounts::new(model, context, species);
    let treatments = pooled.treatments();
    // Per treatment, its own segmentation: a second start where treatment
    // effects move the points apart (one treatment's points are then far
    // from the shared breaks, and a fit from those can stop at a local
    // optimum that a degree too many escapes).
    let mut own: Vec<Segmentation> = if treatments > 1 {
        (0..treatments)
            .map(|t| Segmentation::new(pooled.of_treatment(t), min_size))
            .collect()
    } else {
        Vec::new()
    };
    let mut segmentation = Segmentation::new(pooled, min_size);
    // A curve of degree d needs (d + 1) gaps within the bins (CountModel::new).
    let room = (0..=MAX_CANDIDATE_DEGREE)
        .take_while(|&d| d == 0 || (d as f64 + 1.0) * gap < bins as f64)
        .last()
        .unwrap_or(0);
    let max_degree = room.min(segmentation.max_degree());
    let degrees = match fixed {
        Some(degree) if degree > MAX_CANDIDATE_DEGREE => {
            return Err(format!(
                "{degree} transitions is more than the {MAX_CANDIDATE_DEGREE} allowed"
            ))
        }
        Some(degree) => degree..=degree,
        None => 0..=max_degree,
    };
    let mut candidates: Vec<Candidate> = Vec::new();
    let mut states: Vec<Option<SpeciesState>> = Vec::new();
    let mut observations = 0;
    let (mut chosen, mut since_best) = (0, 0);
    for degree in degrees {
        // Starts: a degree fitted before (the first pass's) from that fit
        // alone; any other from the shared breaks, and each treatment's own
        // where they differ. A fixed degree beyond what the measured bins
        // can split into gets evenly spaced points (the fit checks the axis).
        let earlier = fitted.and_then(|f| f.get(degree)).and_then(Option::as_ref);
        let mut point_starts: Vec<Vec<Vec<f64>>> = Vec::with_capacity(2);
        if earlier.is_none() && degree <= segmentation.max_degree() {
            point_starts.push(vec![segmentation.points(degree); treatments]);
            if degree > 0 && !own.is_empty() {
                let separate: Vec<Vec<f64>> =
                    own.iter_mut().map(|seg| seg.points(degree)).collect();
                if separate != point_starts[0] {
                    point_starts.push(separate);
                }
            }
        } else if earlier.is_none() {
            point_starts.push(vec![even_points(degree, bins); treatments]);
        }
        let starts: Vec<CandidateStart> = match earlier {
            Some(state) => vec![CandidateStart::Fitted(state)],
            None => point_starts
                .iter()
                .map(|points| CandidateStart::Points(points))
                .collect(),
        };
        // The best fit over the starts (the first on ties, so the result
        // does not depend on anything but the curve's rows).
        let mut best: Option<(Candidate, SpeciesState)> = None;
        let mut first_failure = None;
        for &start in &starts {
            match fit_candidate(model, context, species, degree, start, settings, held) {
                Ok((candidate, n, state)) => {
                    observations = n;
                    let better = best.as_ref().is_none_or(|(b, _)| {
                        candidate.negative_log_likelihood < b.negative_log_likelihood
                            || !b.negative_log_likelihood.is_finite()
                    });
                    if better {
                        best = Some((candidate, state));
                    }
                }
                Err(reason) => {
                    first_failure.get_or_insert(reason);
                }
            }
        }
        let (candidate, state) = match best {
            Some((candidate, state)) => (candidate, Some(state)),
            None => (
                Candidate {
                    degree,
                    negative_log_likelihood: f64::NAN,
                    parameters: 0,
                    criterion: f64::INFINITY,
                    converged: false,
                    points: Vec::new(),
                    failure: first_failure,
                },
                None,
            ),
        };
        candidates.push(candidate);
        states.push(state);
        let last = candidates.len() - 1;
        if candidates[last].criterion < candidates[chosen].criterion {
            chosen = last;
            since_best = 0;
        } else if last > 0 {
            since_best += 1;
            if since_best >= PATIENCE {
                break;
            }
        }
    }
    if fixed.is_none() {
        chosen = refine_downwards(
            model,
            context,
            species,
            settings,
            held,
            (&mut candidates, &mut states),
            chosen,
        );
    }
    let mut by_degree: FittedDegrees = vec![None; candidates.len().max(fixed.map_or(0, |d| d + 1))];
    for (candidate, state) in candidates.iter().zip(states) {
        by_degree[candidate.degree] = state;
    }
    Ok((
        CurveSelection {
            context,
            species,
            observations,
            candidates,
            chosen,
            fixed: fixed.is_some(),
        },
        by_degree,
    ))
}

/// A winner of degree w may beat w − 1 only because the fit of w − 1 stopped
/// at a local optimum (a transition of one treatment missed, say), which the
/// extra transition escapes. So w − 1 is refitted from the winner's points
/// with each transition left out in turn; a better fit replaces the
/// candidate, and when w − 1 then wins, w − 2 is tried the same way.
/// Candidates are in degree order from 0. Returns the index of the winner.
fn refine_downwards(
    model: &CountModel,
    context: usize,
    species: usize,
    settings: &CountFitSettings,
    held: Option<&[[f64; 3]]>,
    (candidates, states): (&mut [Candidate], &mut [Option<SpeciesState>]),
    mut chosen: usize,
) -> usize {
    loop {
        let winner = &candidates[chosen];
        let degree = winner.degree;
        if degree == 0 || winner.points.iter().any(|p| p.len() != degree) {
            return chosen;
        }
        let lower = degree - 1;
        let points = winner.points.clone();
        let mut improved = false;
        for left_out in 0..degree {
            let start: Vec<Vec<f64>> = points
                .iter()
                .map(|p| {
                    p.iter()
                        .enumerate()
                        .filter(|(i, _)| *i != left_out)
                        .map(|(_, &x)| x)
                        .collect()
                })
                .collect();
            if let Ok((candidate, _, state)) = fit_candidate(
                model,
                context,
                species,
                lower,
                CandidateStart::Points(&start),
                settings,
                held,
            ) {
                let current = candidates[lower].negative_log_likelihood;
                if candidate.negative_log_likelihood < current || !current.is_finite() {
                    candidates[lower] = candidate;
                    states[lower] = Some(state);
                    improved = true;
                }
            }
        }
        if !improved || candidates[lower].criterion >= candidates[chosen].criterion {
            return chosen;
        }
        chosen = lower;
    }
}

/// `degree` points spread evenly over bins 1..=`bins` (1-based axis).
fn even_points(degree: usize, bins: usize) -> Vec<f64> {
    let step = bins as f64 / (degree + 1) as f64;
    (1..=degree).map(|k| 0.5 + k as f64 * step).collect()
}

/// The structure of every curve's selection: degrees and, as change points
/// that start the fit, the winners' fitted points.
pub(crate) fn selected_structure(
    model: &CountModel,
    selections: &[CurveSelection],
) -> Result<DetectedChangePoints, String> {
    let shape = model.table().shape();
    let mut ordered: Vec<&CurveSelection> = selections.iter().collect();
    ordered.sort_by_key(|s| (s.context, s.species));
    if ordered.len() != shape.contexts * shape.species
        || ordered
            .iter()
            .enumerate()
            .any(|(i, s)| (s.context, s.species) != (i / shape.species, i % shape.species))
    {
        return Err("internal: the selection does not cover every curve once".into());
    }
    let degrees = ordered.iter().map(|s| s.degree()).collect();
    // A winner whose fit failed (only a fixed degree can win so) has no
    // points: evenly spaced ones start the full fit instead.
    let change_points = ordered
        .iter()
        .map(|s| {
            let (degree, points) = (s.degree(), &s.candidates[s.chosen].points);
            if points.len() == shape.treatments && points.iter().all(|p| p.len() == degree) {
                points.clone()
            } else {
                vec![even_points(degree, shape.bins); shape.treatments]
            }
        })
        .collect();
    Ok(DetectedChangePoints {
        structure: crate::design::Structure::new(shape.contexts, shape.species, degrees)?,
        change_points,
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests_support::{simulate, Simulation};
    use super::*;

    #[test]
    fn the_segmentation_finds_the_steps_of_piecewise_constant_counts() {
        // One animal, one treatment, counts 2 then 10 then 4 per bin at unit
        // exposure: the exact Poisson segmentation splits where the rate steps.
        let spec = Simulation {
            bins: 30,
            animals: 1,
            levels: 1,
            species: 1,
            degrees: vec![0],
            missing: 0.0,
            ..Simulation::default()
        };
        let (mut model, _) = simulate(&spec, 1);
        let values: Vec<f64> = (0..30)
            .map(|b| {
                if b < 10 {
                    2.0
                } else if b < 18 {
                    10.0
                } else {
                    4.0
                }
            })
            .collect();
        let keys = model.table().key_count();
        model.table_mut().counts_mut(0)[..keys].copy_from_slice(&values);
        let exposure = model.table().exposures(0)[0];
        assert!(model.table().exposures(0).iter().all(|&e| e == exposure));
        let mut segmentation = Segmentation::new(PooledCounts::new(&model, 0, 0), 2);
        assert_eq!(segmentation.points(2), vec![10.5, 18.5]);
        assert_eq!(segmentation.points(1), vec![10.5]);
        assert!(segmentation.points(0).is_empty());
    }

    #[test]
    fn unmeasured_bins_are_skipped_and_points_fall_between_measured_ones() {
        let pooled = PooledCounts {
            kept: vec![0, 1, 5, 6],
            count_sums: vec![vec![0.0, 1.0, 2.0, 12.0, 22.0]],
            exposure_sums: vec![vec![0.0, 1.0, 2.0, 3.0, 4.0]],
        };
        let mut segmentation = Segmentation::new(pooled, 1);
        // The step sits between bins 2 and 6 (1-based), whose midpoint is 4.
        assert_eq!(segmentation.points(1), vec![4.0]);
    }

    #[test]
    fn clearly_separated_transitions_are_counted_right_curve_by_curve() {
        for (seed, degrees) in [(3, vec![0, 1]), (4, vec![2, 3])] {
            let spec = Simulation {
                bins: 60,
                species: 2,
                degrees: degrees.clone(),
                cells_per_key: 6,
                ..Simulation::default()
            };
            let (model, truth) = simulate(&spec, seed);
            for s in 0..2 {
                let selection =
                    select_curve(&model, 0, s, None, &CountFitSettings::default(), None).unwrap();
                assert_eq!(selection.degree(), degrees[s], "{selection:?}");
                assert!(selection.margin() > 10.0, "{selection:?}");
                let chosen = &selection.candidates[selection.chosen];
                for (found, true_curve) in chosen.points.iter().zip(&truth.curves[s]) {
                    for (f, t) in found.iter().zip(&true_curve.points) {
                        assert!((f - t).abs() < 2.0, "{found:?} vs {:?}", true_curve.points);
                    }
                }
            }
        }
    }

    #[test]
    fn a_fixed_degree_is_the_only_candidate_and_keeps_its_number() {
        let spec = Simulation {
            bins: 60,
            species: 1,
            degrees: vec![1],
            cells_per_key: 6,
            ..Simulation::default()
        };
        let (model, _) = simulate(&spec, 5);
        // Fixed at 2 where the truth has 1: respected, with 2 points per treatment.
        let selection =
            select_curve(&model, 0, 0, Some(2), &CountFitSettings::default(), None).unwrap();
        assert!(selection.fixed);
        assert_eq!(selection.candidates.len(), 1);
        assert_eq!(selection.degree(), 2);
        assert!(selection.margin().is_infinite());
        let detected = selected_structure(&model, &[selection]).unwrap();
        assert_eq!(detected.structure.degrees(), &[2]);
        assert!(detected.change_points[0].iter().all(|p| p.len() == 2));
        // More transitions than the bins have room for: an error, not a panic.
        assert!(select_curve(&model, 0, 0, Some(21), &CountFitSettings::default(), None).is_err());
    }

    /// Started from its own fits, a selection under the same warps finds
    /// the same optima (each fit already at its optimum), and so the same
    /// degree; started from them under other warps (as the second pass
    /// is), it still finds the simulated degree.
    #[test]
    fn a_selection_started_from_earlier_fits_finds_their_optima() {
        let spec = Simulation {
            bins: 40,
            animals: 4,
            species: 2,
            degrees: vec![2, 1],
            cells_per_key: 6,
            ..Simulation::default()
        };
        let (model, _) = simulate(&spec, 3);
        let settings = CountFitSettings::default();
        for species in 0..2 {
            let (first, fits) =
                select_curve_from(&model, 0, species, None, &settings, None, None).unwrap();
            assert_eq!(first.degree(), spec.degrees[species]);
            assert_eq!(fits.len(), first.candidates.len());
            let (again, _) =
                select_curve_from(&model, 0, species, None, &settings, None, Some(&fits)).unwrap();
            assert_eq!(again.degree(), first.degree());
            for (a, b) in again.candidates.iter().zip(&first.candidates) {
                assert_eq!(a.degree, b.degree);
                assert!(
                    (a.negative_log_likelihood - b.negative_log_likelihood).abs()
                        <= 1e-7 * b.negative_log_likelihood.abs(),
                    "degree {}: {} vs {}",
                    a.degree,
                    a.negative_log_likelihood,
                    b.negative_log_likelihood
                );
            }
            // Warps of a few per cent, as a pooled fit would hold them.
            let held: Vec<[f64; 3]> = (0..spec.animals)
                .map(|r| {
                    let sign = if r % 2 == 0 { 1.0 } else { -1.0 };
                    [0.02 * sign, 0.05 * sign, -0.03 * sign]
                })
                .collect();
            let (warm, _) = select_curve_from(
                &model,
                0,
                species,
                None,
                &settings,
                Some(&held),
                Some(&fits),
            )
            .unwrap();
            assert_eq!(warm.degree(), spec.degrees[species]);
            assert!(warm
                .candidates
                .iter()
                .all(|c| c.negative_log_likelihood.is_finite()));
        }
    }

    #[test]
    fn the_selection_is_the_same_for_any_worker_count() {
        let spec = Simulation {
            bins: 50,
            contexts: 2,
            species: 2,
            degrees: vec![0, 1, 2, 1],
            cells_per_key: 6,
            ..Simulation::default()
        };
        let (model, _) = simulate(&spec, 6);
        let fixed = [None, None, Some(1), None];
        let run = |workers: usize| {
            let options = crate::engine::PoolOptions {
                workers,
                ..crate::engine::PoolOptions::default()
            };
            let mut reports = Vec::new();
            let result = super::super::degrees::select_structure(
                &model,
                &fixed,
                &CountFitSettings::default(),
                &options,
                || false,
                |stage, done, total| reports.push((stage, done, total)),
            )
            .unwrap();
            // Progress: per stage, 0 before any work, then each task as it
            // ends: the 4 curves, the 2 species' pooled fit, the 4 curves again.
            let expected: Vec<(&str, usize, usize)> =
                [("structure", 4), ("warps", 2), ("reselect", 4)]
                    .into_iter()
                    .flat_map(|(stage, total)| (0..=total).map(move |done| (stage, done, total)))
                    .collect();
            assert_eq!(reports, expected);
            result
        };
        let one = run(1);
        let two = run(2);
        assert_eq!(one.selections, two.selections);
        assert_eq!(one.fitted, two.fitted);
        assert_eq!(one.detected.structure, two.detected.structure);
        assert_eq!(one.detected.change_points, two.detected.change_points);
        assert_eq!(one.detected.structure.degrees(), &[0, 1, 1, 1]);
        assert!(one.selections[2].fixed && !one.selections[0].fixed);
        // A species the second pass left as it was keeps the pooled fit,
        // which is the full fit of that species from the change points
        // handed on (the same as fitting it afresh).
        let chosen = model
            .with_structure(one.detected.structure.clone())
            .unwrap();
        let mut kept = 0;
        for (s, fit) in one.fitted.iter().enumerate() {
            if let Some(fit) = fit {
                let fresh = super::super::fit::fit_species(
                    &chosen,
                    s,
                    Some(&one.detected),
                    None,
                    &CountFitSettings::default(),
                )
                .unwrap();
                assert_eq!(fit, &fresh);
                kept += 1;
            }
        }
        assert!(kept > 0);
        // A wrong number of fixed entries is an input error.
        let options = crate::engine::PoolOptions::default();
        let wrong = super::super::degrees::select_structure(
            &model,
            &[None],
            &CountFitSettings::default(),
            &options,
            || false,
            |_, _, _| {},
        );
        assert!(wrong.is_err());
    }
}
