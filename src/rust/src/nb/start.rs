//! Change points and starting values for the count model (model vignette
//! §12.1 and §12.4).
//!
//! The change-point detectors of [`crate::changepoint`] read one series per
//! (treatment, animal): here log(1 + Y/E) per bin, the rate per unit of
//! exposure on the curve's scale, with unmeasured bins NaN. The original's
//! population rows are replaced by one pooled series per treatment: the mean
//! over the animals that were measured in a bin, with gaps filled by linear
//! interpolation. Starting block rates, slopes and points per treatment
//! come from that pooled series as in the original (block means and run
//! lengths), random effects start at 0.

use super::curve::{Axis, CurveValues};
use super::objective::SpeciesProblem;
use super::unknowns::SpeciesState;
use super::CountModel;
use crate::changepoint::blocks::{block_rates_and_runs, initial_slope};
use crate::changepoint::lro::SeriesMatrix;
use crate::changepoint::{detect_curve, DetectedChangePoints, DetectionSettings};
use crate::design::Structure;

/// Smallest spacing of starting points, as a fraction of the axis.
const START_GAP: f64 = 0.01;

/// log(1 + Y/E) of one (animal, context, species, treatment) over the bins;
/// NaN where the cell key was not measured.
fn animal_series(
    model: &CountModel,
    animal: usize,
    context: usize,
    species: usize,
    treatment: usize,
) -> Vec<f64> {
    let table = model.table();
    let first = table.block_key(animal, context, treatment);
    let bins = table.shape().bins;
    let (counts, exposures, observed) = (
        table.counts(species),
        table.exposures(species),
        table.observed(),
    );
    (first..first + bins)
        .map(|key| {
            if observed[key] && exposures[key] > 0.0 {
                (counts[key] / exposures[key]).ln_1p()
            } else {
                f64::NAN
            }
        })
        .collect()
}

/// Fills NaN entries by linear interpolation between the nearest measured
/// bins (constant beyond the ends); all-NaN stays all-NaN.
fn interpolate_gaps(series: &mut [f64]) {
    let known: Vec<usize> = (0..series.len())
        .filter(|&i| series[i].is_finite())
        .collect();
    let (Some(&first), Some(&last)) = (known.first(), known.last()) else {
        return;
    };
    for i in 0..first {
        series[i] = series[first];
    }
    for i in last + 1..series.len() {
        series[i] = series[last];
    }
    for pair in known.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        for i in a + 1..b {
            let weight = (i - a) as f64 / (b - a) as f64;
            series[i] = series[a] + weight * (series[b] - series[a]);
        }
    }
}

/// The pooled series of each treatment of one curve, NaN at bins no animal
/// measured.
fn pooled_raw(model: &CountModel, context: usize, species: usize) -> Vec<Vec<f64>> {
    let shape = model.table().shape();
    (0..shape.treatments)
        .map(|t| {
            let mut sum = vec![0.0; shape.bins];
            let mut measured = vec![0usize; shape.bins];
            for r in 0..shape.ran_levels {
                for (b, value) in animal_series(model, r, context, species, t)
                    .into_iter()
                    .enumerate()
                {
                    if value.is_finite() {
                        sum[b] += value;
                        measured[b] += 1;
                    }
                }
            }
            sum.iter()
                .zip(&measured)
                .map(|(&s, &n)| if n > 0 { s / n as f64 } else { f64::NAN })
                .collect()
        })
        .collect()
}

/// The pooled series of each treatment of one curve, gaps interpolated.
pub(crate) fn pooled_series(model: &CountModel, context: usize, species: usize) -> Vec<Vec<f64>> {
    let mut pooled = pooled_raw(model, context, species);
    pooled
        .iter_mut()
        .for_each(|series| interpolate_gaps(series));
    pooled
}

/// The bins (0-based) of a curve that some animal measured in some treatment.
fn measured_bins(pooled: &[Vec<f64>], bins: usize) -> Vec<usize> {
    (0..bins)
        .filter(|&b| pooled.iter().any(|series| series[b].is_finite()))
        .collect()
}

/// The detectors' input for one curve, on the bins that were measured (the
/// detectors look at neighbouring bins, and an unmeasured stretch is no
/// information, not a flat run): the pooled series of each treatment (as
/// the population column, isolated gaps interpolated) and every animal
/// series complete on those bins. Returns the matrix and the measured bins.
pub(crate) fn series_matrix(
    model: &CountModel,
    context: usize,
    species: usize,
) -> (SeriesMatrix, Vec<usize>) {
    let shape = model.table().shape();
    let raw = pooled_raw(model, context, species);
    let kept = measured_bins(&raw, shape.bins);
    let compress = |series: &[f64]| kept.iter().map(|&b| series[b]).collect::<Vec<f64>>();
    let mut columns = Vec::new();
    let mut keys = Vec::new();
    for (t, series) in raw.iter().enumerate() {
        let mut pooled = compress(series);
        interpolate_gaps(&mut pooled);
        if pooled.iter().all(|v| v.is_finite()) {
            columns.push(pooled);
            keys.push((t, 0));
        }
        if shape.ran_levels < 2 {
            continue;
        }
        for r in 0..shape.ran_levels {
            let series = compress(&animal_series(model, r, context, species, t));
            if series.iter().all(|v| v.is_finite()) {
                columns.push(series);
                keys.push((t, r + 1));
            }
        }
    }
    let matrix = SeriesMatrix {
        bins: kept.len(),
        columns,
        keys,
    };
    (matrix, kept)
}

/// A change point on the measured bins' axis (1-based, possibly between two
/// of them) back on the full bin axis.
fn full_axis_point(point: f64, kept: &[usize]) -> f64 {
    if kept.is_empty() {
        return point;
    }
    let position = (point - 1.0).clamp(0.0, (kept.len() - 1) as f64);
    let below = position.floor() as usize;
    let above = (below + 1).min(kept.len() - 1);
    let weight = position - below as f64;
    (kept[below] as f64 + weight * (kept[above] as f64 - kept[below] as f64)) + 1.0
}

/// Degrees and change points of every curve.
pub(crate) fn detect_structure(
    model: &CountModel,
    settings: &DetectionSettings,
) -> Result<DetectedChangePoints, String> {
    let shape = model.table().shape();
    let mut degrees = Vec::with_capacity(shape.contexts * shape.species);
    let mut change_points = Vec::with_capacity(shape.contexts * shape.species);
    for c in 0..shape.contexts {
        for s in 0..shape.species {
            let (series, kept) = series_matrix(model, c, s);
            if series.bins < 2 {
                degrees.push(0);
                change_points.push(vec![Vec::new(); shape.treatments]);
                continue;
            }
            let detection = detect_curve(&series, shape.treatments, settings)?;
            degrees.push(detection.degree());
            change_points.push(
                detection
                    .treatment_points
                    .into_iter()
                    .map(|points| {
                        points
                            .into_iter()
                            .map(|p| full_axis_point(p, &kept))
                            .collect()
                    })
                    .collect(),
            );
        }
    }
    Ok(DetectedChangePoints {
        structure: Structure::new(shape.contexts, shape.species, degrees)?,
        change_points,
    })
}

/// The change points of the best step function with `degree` steps through
/// `series` (least squares, every segment at least `min_size` bins, by
/// dynamic programming: O(degree · B²)), as points between bins; evenly
/// spaced points when the series is too short or not finite.
pub(crate) fn segmentation_points(
    series: &[f64],
    degree: usize,
    min_size: usize,
    axis: Axis,
) -> Vec<f64> {
    let n = series.len();
    if degree == 0 {
        return Vec::new();
    }
    if series.iter().any(|v| !v.is_finite()) || n < (degree + 1) * min_size {
        return axis.even_points(degree);
    }
    let (mut sum, mut squares) = (vec![0.0; n + 1], vec![0.0; n + 1]);
    for (i, &v) in series.iter().enumerate() {
        sum[i + 1] = sum[i] + v;
        squares[i + 1] = squares[i] + v * v;
    }
    // Sum of squared deviations from the mean of series[i..j).
    let cost = |i: usize, j: usize| {
        let (s, q, m) = (sum[j] - sum[i], squares[j] - squares[i], (j - i) as f64);
        q - s * s / m
    };
    // best[k][j]: the cost of series[0..j) in k + 1 segments; from[k][j] the
    // start of its last segment.
    let mut best = vec![vec![f64::INFINITY; n + 1]; degree + 1];
    let mut from = vec![vec![0usize; n + 1]; degree + 1];
    for j in min_size..=n {
        best[0][j] = cost(0, j);
    }
    for k in 1..=degree {
        for j in (k + 1) * min_size..=n {
            for i in k * min_size..=j - min_size {
                let value = best[k - 1][i] + cost(i, j);
                if value < best[k][j] {
                    best[k][j] = value;
                    from[k][j] = i;
                }
            }
        }
    }
    let mut starts = Vec::with_capacity(degree);
    let mut end = n;
    for k in (1..=degree).rev() {
        let start = from[k][end];
        starts.push(start);
        end = start;
    }
    starts.reverse();
    // A segment starting at index i (bin i + 1) begins between bins i and i + 1.
    starts.into_iter().map(|i| i as f64 + 0.5).collect()
}

/// Starting values of one curve and treatment from its pooled series.
fn curve_start(
    series: &[f64],
    points: &[f64],
    rise_threshold_factor: f64,
    axis: Axis,
) -> Result<CurveValues, String> {
    let degree = points.len();
    let bins = series.len();
    if series.iter().any(|v| !v.is_finite()) {
        // No data for this treatment: a flat curve (it is not estimated).
        return Ok(CurveValues {
            rates: vec![0.0; degree + 1],
            slopes: vec![1.0; degree],
            points: axis.even_points(degree),
        });
    }
    let mut rounded: Vec<usize> = points
        .iter()
        .map(|&p| (p.round().max(1.0) as usize).min(bins))
        .collect();
    rounded.sort_unstable();
    let estimates = block_rates_and_runs(series, &rounded, rise_threshold_factor)?;
    Ok(CurveValues {
        rates: estimates.rates,
        slopes: estimates
            .runs
            .iter()
            .map(|&run| initial_slope(run))
            .collect(),
        points: points.to_vec(),
    })
}

/// Dispersion per context by moments around the pooled curves:
/// Var(Y) = μ + φ μ²/E, so φ ≈ Σ ((Y − μ)² − μ) / Σ μ²/E, kept in [1e-3, 10].
fn moment_dispersion(
    model: &CountModel,
    context: usize,
    species: usize,
    pooled: &[Vec<f64>],
) -> f64 {
    let table = model.table();
    let shape = table.shape();
    let (counts, exposures, observed) = (
        table.counts(species),
        table.exposures(species),
        table.observed(),
    );
    let (mut numerator, mut denominator) = (0.0, 0.0);
    for r in 0..shape.ran_levels {
        for (t, series) in pooled.iter().enumerate() {
            let first = table.block_key(r, context, t);
            for b in 0..shape.bins {
                let key = first + b;
                if !observed[key] || !series[b].is_finite() || exposures[key] <= 0.0 {
                    continue;
                }
                let mean = exposures[key] * series[b].exp_m1().max(1e-3);
                numerator += (counts[key] - mean).powi(2) - mean;
                denominator += mean * mean / exposures[key];
            }
        }
    }
    if denominator > 0.0 {
        (numerator / denominator).clamp(1e-3, 10.0)
    } else {
        0.1
    }
}

/// Starting state of a species: per curve and treatment, values from the
/// pooled series and the detected change points (evenly spaced points where
/// none are given), ρ from moments, u = 0.
pub(crate) fn starting_state_with(
    problem: &SpeciesProblem,
    detected: Option<&DetectedChangePoints>,
    rise_threshold_factor: f64,
) -> Result<SpeciesState, String> {
    let layout = &problem.layout;
    let model = problem.model();
    let axis = problem.axis();
    let species_count = model.table().shape().species;
    let mut theta = Vec::with_capacity(layout.contexts * layout.treatments);
    let mut rho = Vec::with_capacity(layout.contexts);
    for c in 0..layout.contexts {
        let degree = layout.degrees[c];
        let pooled = pooled_series(model, c, layout.species);
        for (t, series) in pooled.iter().enumerate() {
            let points = match detected {
                Some(d) => {
                    let points = &d.change_points[c * species_count + layout.species];
                    match points.get(t) {
                        Some(p) if p.len() == degree => p.clone(),
                        _ => axis.even_points(degree),
                    }
                }
                None => axis.even_points(degree),
            };
            let values = curve_start(series, &points, rise_threshold_factor, axis)?;
            theta.push(values.to_theta(axis, START_GAP));
        }
        rho.push(moment_dispersion(model, c, layout.species, &pooled).ln());
    }
    Ok(SpeciesState {
        theta,
        rho,
        u: vec![[0.0; 3]; layout.animals],
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests_support::{simulate, Simulation};
    use super::*;
    use crate::changepoint::DetectionSettings;

    #[test]
    fn points_on_the_measured_bins_map_back_to_the_full_axis() {
        let kept = vec![0, 4, 8, 12];
        assert_eq!(full_axis_point(1.0, &kept), 1.0);
        assert_eq!(full_axis_point(2.0, &kept), 5.0);
        assert_eq!(full_axis_point(2.5, &kept), 7.0);
        assert_eq!(full_axis_point(4.0, &kept), 13.0);
    }

    #[test]
    fn segmentation_finds_the_steps_of_a_step_function() {
        let mut series = vec![1.0; 10];
        series.extend(vec![3.0; 8]);
        series.extend(vec![2.0; 12]);
        let axis = Axis::new(30, 1.0);
        assert_eq!(segmentation_points(&series, 2, 2, axis), vec![10.5, 18.5]);
        assert_eq!(segmentation_points(&series, 1, 2, axis), vec![10.5]);
        assert!(segmentation_points(&series, 0, 2, axis).is_empty());
        // Too short for the segments asked for: evenly spaced.
        assert_eq!(
            segmentation_points(&series[..3], 2, 2, axis),
            axis.even_points(2)
        );
    }

    #[test]
    fn gaps_are_filled_linearly_and_ends_held() {
        let mut series = vec![f64::NAN, 1.0, f64::NAN, f64::NAN, 4.0, f64::NAN];
        interpolate_gaps(&mut series);
        assert_eq!(series, vec![1.0, 1.0, 2.0, 3.0, 4.0, 4.0]);
    }

    #[test]
    fn clearly_separated_transitions_are_detected_on_simulated_counts() {
        let spec = Simulation {
            bins: 60,
            species: 2,
            degrees: vec![1, 2],
            cells_per_key: 6,
            ..Simulation::default()
        };
        let (model, truth) = simulate(&spec, 5);
        let detected = detect_structure(&model, &DetectionSettings::default()).unwrap();
        assert_eq!(detected.structure.degrees(), &[1, 2]);
        for s in 0..2 {
            let found = &detected.change_points[s][0];
            for (f, t) in found.iter().zip(&truth.curves[s][0].points) {
                assert!(
                    (f - t).abs() < 4.0,
                    "species {s}: {found:?} vs {:?}",
                    truth.curves[s][0].points
                );
            }
        }
    }
}
