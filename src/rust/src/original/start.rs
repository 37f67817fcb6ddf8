//! The original likelihood's initial parameter values (model vignette
//! §12.4): block rates, transition slopes and points per treatment from the
//! bin-wise mean log counts and the detected change points, turned into β by
//! solving W·β = v, plus small random warps.

use crate::changepoint::blocks::{
    block_rates_and_runs, count_log_average, initial_slope, mean_skipping_nan,
};
use crate::changepoint::DetectedChangePoints;
use crate::design::{Component, WarpKind};
use crate::numeric::linalg::FullPivotLu;
use crate::original::Model;
use crate::streams::TaskStream;

/// Initial warping factors are drawn from U(−WARP_HALF_WIDTH, WARP_HALF_WIDTH).
pub(crate) const WARP_HALF_WIDTH: f64 = 0.1;

/// Settings of the starting values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct StartSettings {
    /// Target rise of a transition's run, as a fraction of the block-rate
    /// step (see [`block_rates_and_runs`]).
    pub(crate) rise_threshold_factor: f64,
}

impl Default for StartSettings {
    fn default() -> Self {
        Self {
            rise_threshold_factor: crate::rules::DEFAULT_RISE_THRESHOLD_FACTOR,
        }
    }
}

impl StartSettings {
    pub(crate) fn validate(&self) -> Result<(), String> {
        crate::rules::check_rise_threshold_factor(self.rise_threshold_factor)
    }
}

/// Initial parameter vector (model vignette §12.4) in the layout of `model`:
/// - per (context, species) and treatment: block rates (the mean of the
///   bin-wise mean log counts for d = 0), slopes 4/run floored at 0.25 and
///   tpoints = the detected per-treatment change points (1-based bins);
/// - per block or transition, β solves W·β = v (v the per-treatment values),
///   so β₀ is the reference value and the others are effect contrasts;
/// - every warping factor ~ U(−0.1, 0.1) from `TaskStream::new(seed, stream)`,
///   drawn in layout order (species, ran level, point/rate/slope).
///
/// `model.structure()` must equal `detected.structure`.
pub(crate) fn initial_parameters(
    model: &Model,
    detected: &DetectedChangePoints,
    settings: &StartSettings,
    seed: u64,
    stream: u64,
) -> Result<Vec<f64>, String> {
    settings.validate()?;
    if model.structure() != &detected.structure {
        return Err("the model's degrees differ from the detected structure".into());
    }
    let table = model.table();
    let design = model.design();
    let layout = model.layout();
    let structure = model.structure();
    let (contexts, species) = (structure.contexts(), structure.species());
    let treatments = design.treatment_count();
    if detected.change_points.len() != contexts * species {
        return Err(format!(
            "change points for {} curves, the model has {}",
            detected.change_points.len(),
            contexts * species
        ));
    }
    let weights = FullPivotLu::new(design.weights(), treatments)
        .map_err(|e| format!("the weight matrix W: {e}"))?;
    let mut parameters = vec![0.0; layout.len()];
    let mut assign = |component: Component,
                      c: usize,
                      s: usize,
                      per_treatment: &[Vec<f64>]|
     -> Result<(), String> {
        let blocks = per_treatment.first().map_or(0, Vec::len);
        for k in 0..blocks {
            let values: Vec<f64> = per_treatment.iter().map(|v| v[k]).collect();
            let betas = weights.solve(&values)?;
            for (i, beta) in betas.into_iter().enumerate() {
                let index = layout
                    .beta_index(component, c, s, k, i)
                    .ok_or_else(|| format!("no β slot for {component:?} ({c}, {s}, {k}, {i})"))?;
                parameters[index] = beta;
            }
        }
        Ok(())
    };
    for c in 0..contexts {
        for s in 0..species {
            let curve = c * species + s;
            let degree = structure.degree(c, s);
            let points = &detected.change_points[curve];
            if points.len() != treatments || points.iter().any(|p| p.len() != degree) {
                return Err(format!(
                    "curve ({c}, {s}): expected {treatments} treatments × {degree} change points"
                ));
            }
            let average = count_log_average(table, c, s)?;
            let mut rates = Vec::with_capacity(treatments);
            let mut slopes = Vec::with_capacity(treatments);
            for (t, treatment_points) in points.iter().enumerate() {
                let series = average.column(t);
                if degree == 0 {
                    let mean = mean_skipping_nan(series);
                    rates.push(vec![if mean.is_nan() { 0.0 } else { mean }]);
                    slopes.push(Vec::new());
                    continue;
                }
                if !treatment_points.iter().all(|p| p.is_finite()) {
                    return Err(format!("curve ({c}, {s}): non-finite change point"));
                }
                let rounded: Vec<usize> = treatment_points
                    .iter()
                    .map(|p| p.round().clamp(1.0, average.bins() as f64) as usize)
                    .collect();
                let estimates =
                    block_rates_and_runs(series, &rounded, settings.rise_threshold_factor)?;
                slopes.push(estimates.runs.iter().map(|&r| initial_slope(r)).collect());
                rates.push(estimates.rates);
            }
            assign(Component::Rate, c, s, &rates)?;
            if degree > 0 {
                assign(Component::Slope, c, s, &slopes)?;
                assign(Component::Point, c, s, points)?;
            }
        }
    }
    let mut draws = TaskStream::new(seed, stream);
    for s in 0..species {
        for r in 0..design.ran_blocks().warped_levels() {
            for kind in WarpKind::ALL {
                let index = layout
                    .warp_index(kind, s, r)
                    .ok_or_else(|| format!("no warp slot for species {s}, level {r}"))?;
                // u = 0 would give the excluded end point −0.1.
                let u = loop {
                    let u = draws.uniform();
                    if u > 0.0 {
                        break u;
                    }
                };
                parameters[index] = WARP_HALF_WIDTH * (2.0 * u - 1.0);
            }
        }
    }
    Ok(parameters)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::changepoint::blocks::MIN_INITIAL_SLOPE;
    use crate::changepoint::simulate::{poisson_table, Curve};
    use crate::changepoint::{detect_structure, DetectionSettings};
    use crate::data::summed::TokenColumns;
    use crate::data::{SummedTable, TableShape};
    use crate::design::{Design, Factor, Structure};
    use crate::original::Settings;

    fn strings(values: &[&str]) -> Vec<String> {
        values.iter().map(|v| v.to_string()).collect()
    }

    fn multiply(matrix: &[f64], n: usize, x: &[f64]) -> Vec<f64> {
        (0..n)
            .map(|i| (0..n).map(|j| matrix[i * n + j] * x[j]).sum())
            .collect()
    }

    #[test]
    fn lu_recovers_beta_through_the_hemisphere_by_age_weight_matrix() {
        // Model vignette §3: hemisphere {left, right} × age {7, 12, 18} (time
        // series).
        let design = Design::new(
            strings(&["ctx"]),
            strings(&["gene"]),
            strings(&["m1"]),
            vec![
                Factor::new("hemisphere", strings(&["left", "right"])),
                Factor::time_series("age", strings(&["7", "12", "18"])),
            ],
        )
        .unwrap();
        #[rustfmt::skip]
        let w = [
            1.0, 0.0, 0.0, 0.0, 0.0, 0.0,
            1.0, 1.0, 0.0, 0.0, 0.0, 0.0,
            1.0, 0.0, 1.0, 0.0, 0.0, 0.0,
            1.0, 0.0, 1.0, 1.0, 0.0, 0.0,
            1.0, 1.0, 1.0, 0.0, 1.0, 0.0,
            1.0, 1.0, 1.0, 1.0, 1.0, 1.0,
        ];
        assert_eq!(design.weights(), &w[..]);
        let beta = [1.5, -0.3, 0.7, 2.0, -1.1, 0.4];
        let v = multiply(&w, 6, &beta);
        // By hand: ref 1.5, right 1.2, 12 2.2, 18 4.2, right12 0.8, right18 3.2.
        let by_hand = [1.5, 1.2, 2.2, 4.2, 0.8, 3.2];
        for (a, b) in v.iter().zip(by_hand) {
            assert!((a - b).abs() < 1e-12);
        }
        let solved = FullPivotLu::new(&w, 6).unwrap().solve(&v).unwrap();
        for (a, b) in solved.iter().zip(beta) {
            assert!((a - b).abs() < 1e-12, "{solved:?}");
        }
    }

    #[test]
    fn lu_pivots_and_rejects_singular_or_malformed_input() {
        // A zero leading entry needs pivoting.
        let swap = [0.0, 2.0, 3.0, 0.0];
        let x = FullPivotLu::new(&swap, 2)
            .unwrap()
            .solve(&[4.0, 9.0])
            .unwrap();
        assert_eq!(x, vec![3.0, 2.0]);
        let general = [2.0, 1.0, 1.0, 4.0, -6.0, 0.0, -2.0, 7.0, 2.0];
        let truth = [1.0, 2.0, -1.0];
        let rhs = multiply(&general, 3, &truth);
        let x = FullPivotLu::new(&general, 3).unwrap().solve(&rhs).unwrap();
        for (a, b) in x.iter().zip(truth) {
            assert!((a - b).abs() < 1e-12);
        }
        assert!(FullPivotLu::new(&[1.0, 2.0, 2.0, 4.0], 2).is_err());
        assert!(FullPivotLu::new(&[1.0, 2.0, 3.0], 2).is_err());
        assert!(FullPivotLu::new(&[f64::NAN], 1).is_err());
        assert!(FullPivotLu::new(&[1.0], 1)
            .unwrap()
            .solve(&[1.0, 2.0])
            .is_err());
    }

    #[test]
    fn block_means_cover_every_bin_once_and_runs_grow_in_turn() {
        // Bins 1–3 at 1, 4–7 at 5, 8–10 at 2; transitions open bins 4 and 8.
        let series = [1.0, 1.0, 1.0, 5.0, 5.0, 5.0, 5.0, 2.0, 2.0, 2.0];
        let estimates = block_rates_and_runs(&series, &[4, 8], 0.8).unwrap();
        assert_eq!(estimates.rates, vec![1.0, 5.0, 2.0]);
        // Transition 1 (target 3.2): rise 0 (bf → 1), rise 0 (bb → 1),
        // rise 5 − 1 = 4 (bf → 2), stop: run = 1 + 2 = 3. Transition 2 alike.
        assert_eq!(estimates.runs, vec![3.0, 3.0]);
        // The last bin belongs to the last block (the original drops it).
        let mut last = series;
        last[9] = 8.0;
        let estimates = block_rates_and_runs(&last, &[4, 8], 0.8).unwrap();
        assert_eq!(estimates.rates[2], 4.0);
        // An empty first block takes the value at its start; NaN bins are skipped.
        let estimates = block_rates_and_runs(&[3.0, f64::NAN, 1.0], &[1], 0.8).unwrap();
        assert_eq!(estimates.rates, vec![3.0, 2.0]);
        assert!(block_rates_and_runs(&series, &[8, 4], 0.8).is_err());
        assert!(block_rates_and_runs(&series, &[11], 0.8).is_err());
        // No observed bin at all: rates fall back to 0.
        let estimates = block_rates_and_runs(&[f64::NAN; 4], &[3], 0.8).unwrap();
        assert_eq!(estimates.rates, vec![0.0, 0.0]);
    }

    #[test]
    fn slopes_are_four_over_the_run_with_a_floor() {
        assert_eq!(initial_slope(2.0), 2.0);
        assert_eq!(initial_slope(16.0), 0.25);
        assert_eq!(initial_slope(100.0), MIN_INITIAL_SLOPE);
    }

    #[test]
    fn count_log_average_is_not_shifted() {
        // Two mice, B = 3: mouse 1 has no token in bin 3.
        let count = [3.0, 1.0, 1.0, 0.0, 7.0];
        let bin = [1, 2, 1, 2, 3];
        let zeros = [0usize; 5];
        let ran = [0, 0, 1, 1, 1];
        let shape = TableShape {
            bins: 3,
            contexts: 1,
            species: 1,
            ran_levels: 2,
            treatments: 1,
        };
        let tokens = TokenColumns {
            count: &count,
            bin: &bin,
            context: &zeros,
            species: &zeros,
            ran: &ran,
            treatment: &zeros,
        };
        let table = SummedTable::new(shape, tokens, true).unwrap();
        let average = count_log_average(&table, 0, 0).unwrap();
        // "none": bin 1 round(√(4·2) − 1) = 2, bin 2 round(√2 − 1) = 0, bin 3 = 7.
        let ln = f64::ln;
        let expected = [(ln(3.0) + ln(4.0) + ln(2.0)) / 3.0, ln(2.0) / 3.0, ln(8.0)];
        for (b, e) in expected.iter().enumerate() {
            assert!((average.at(b + 1, 0).unwrap() - e).abs() < 1e-12);
        }
        assert_eq!(average.column(0).len(), 3);
        assert_eq!(average.at(0, 0), None);
        assert_eq!(average.at(4, 0), None);
        assert!(count_log_average(&table, 1, 0).is_err());
    }

    fn two_genes() -> Vec<[Curve; 2]> {
        let curve = |levels: &[f64], points: &[f64], slope: f64| Curve {
            levels: levels.to_vec(),
            points: points.to_vec(),
            slopes: vec![slope; points.len()],
        };
        vec![
            [
                curve(&[1.0, 3.0, 1.5], &[30.0, 65.0], 1.0),
                curve(&[1.5, 3.2, 1.0], &[34.0, 62.0], 1.0),
            ],
            [curve(&[2.0], &[], 1.0), curve(&[2.4], &[], 1.0)],
        ]
    }

    fn fixture() -> (Model, DetectedChangePoints) {
        let (table, design) = poisson_table(&two_genes(), 100, 3, 11);
        let detected = detect_structure(&table, &design, &DetectionSettings::default()).unwrap();
        assert_eq!(detected.structure.degrees(), &[2, 0]);
        let model = Model::new(
            table,
            design,
            detected.structure.clone(),
            Settings::default(),
        )
        .unwrap();
        (model, detected)
    }

    /// z(t) = Σ_i W[t, i]·β_i of one block of one component.
    fn unwarped(model: &Model, x: &[f64], m: Component, s: usize, k: usize, t: usize) -> f64 {
        let w = model.design().weight_row(t);
        (0..w.len())
            .map(|i| w[i] * x[model.layout().beta_index(m, 0, s, k, i).unwrap()])
            .sum()
    }

    #[test]
    fn the_rise_threshold_factor_sets_the_initial_slopes() {
        let (model, detected) = fixture();
        let with = |factor: f64| {
            let settings = StartSettings {
                rise_threshold_factor: factor,
            };
            initial_parameters(&model, &detected, &settings, 42, 0).unwrap()
        };
        let slope = model
            .layout()
            .beta_index(Component::Slope, 0, 0, 0, 0)
            .unwrap();
        // Gene 1, transition 1, reference treatment: 4 / run, with the run
        // grown until the rise reaches the factor times the step.
        let average = count_log_average(model.table(), 0, 0).unwrap();
        let points: Vec<usize> = detected.change_points[0][0]
            .iter()
            .map(|p| p.round() as usize)
            .collect();
        for factor in [0.1, 0.8, 0.99] {
            let runs = block_rates_and_runs(average.column(0), &points, factor)
                .unwrap()
                .runs;
            assert!((with(factor)[slope] - initial_slope(runs[0])).abs() < 1e-12);
        }
        assert_ne!(with(0.1)[slope], with(0.99)[slope]);
        assert_eq!(
            with(0.8),
            initial_parameters(&model, &detected, &StartSettings::default(), 42, 0).unwrap()
        );
        // One range for both likelihoods: (0, 1].
        for bad in [0.0, -1.0, 1.5, f64::NAN, f64::INFINITY] {
            let settings = StartSettings {
                rise_threshold_factor: bad,
            };
            assert!(initial_parameters(&model, &detected, &settings, 42, 0).is_err());
        }
    }

    #[test]
    fn initial_parameters_reproduce_the_per_treatment_estimates() {
        let (model, detected) = fixture();
        let x = initial_parameters(&model, &detected, &StartSettings::default(), 42, 0).unwrap();
        assert_eq!(x.len(), model.parameter_count());
        for t in 0..2 {
            // Gene 1 (d = 2): block means, runs and points per treatment.
            let average = count_log_average(model.table(), 0, 0).unwrap();
            let points = &detected.change_points[0][t];
            let rounded: Vec<usize> = points.iter().map(|p| p.round() as usize).collect();
            let expected = block_rates_and_runs(average.column(t), &rounded, 0.8).unwrap();
            for k in 0..3 {
                let z = unwarped(&model, &x, Component::Rate, 0, k, t);
                assert!((z - expected.rates[k]).abs() < 1e-12);
            }
            for (k, (&run, &point)) in expected.runs.iter().zip(points).enumerate() {
                let slope = unwarped(&model, &x, Component::Slope, 0, k, t);
                assert!((slope - initial_slope(run)).abs() < 1e-12);
                assert!(slope >= MIN_INITIAL_SLOPE);
                let tpoint = unwarped(&model, &x, Component::Point, 0, k, t);
                assert!((tpoint - point).abs() < 1e-12);
            }
            // Gene 2 (d = 0): the mean of its bin-wise mean log counts.
            let flat = count_log_average(model.table(), 0, 1).unwrap();
            let mean = flat.column(t).iter().sum::<f64>() / 100.0;
            assert!((unwarped(&model, &x, Component::Rate, 1, 0, t) - mean).abs() < 1e-12);
        }
        // The knock-out raises gene 2 by about 0.4 on the log scale.
        let effect = x[model
            .layout()
            .beta_index(Component::Rate, 0, 1, 0, 1)
            .unwrap()];
        assert!((effect - 0.4).abs() < 0.15, "{effect}");
    }

    #[test]
    fn warps_are_small_uniform_and_reproducible() {
        let (model, detected) = fixture();
        let x = initial_parameters(&model, &detected, &StartSettings::default(), 42, 0).unwrap();
        let warps = &x[model.layout().warp_start()..];
        assert_eq!(warps.len(), 2 * 3 * 3);
        assert!(warps.iter().all(|w| w.abs() < WARP_HALF_WIDTH));
        assert!(warps.windows(2).all(|w| w[0] != w[1]));
        assert_eq!(
            x,
            initial_parameters(&model, &detected, &StartSettings::default(), 42, 0).unwrap()
        );
        let other =
            initial_parameters(&model, &detected, &StartSettings::default(), 43, 0).unwrap();
        assert_ne!(warps, &other[model.layout().warp_start()..]);
        let streamed =
            initial_parameters(&model, &detected, &StartSettings::default(), 42, 5).unwrap();
        assert_ne!(x, streamed);
        // Only the warps depend on the seed.
        let start = model.layout().warp_start();
        assert_eq!(x[..start], other[..start]);
    }

    #[test]
    fn a_mismatched_structure_is_an_error() {
        let (model, mut detected) = fixture();
        detected.structure = Structure::new(1, 2, vec![1, 0]).unwrap();
        assert!(initial_parameters(&model, &detected, &StartSettings::default(), 1, 0).is_err());
        let (model, mut detected) = fixture();
        detected.change_points[0][1].pop();
        assert!(initial_parameters(&model, &detected, &StartSettings::default(), 1, 0).is_err());
    }
}
