//! Change-point detection (model vignette §12), shared by both likelihoods:
//! LRO change points of every (context, species) curve, the grid of
//! detection settings, and what starting values read between change points.
//!
//! - [`lro`]: series matrix, rolling log-likelihood ratios, centroid, scan;
//! - [`dtw`]: dynamic time warping and the projection onto each series;
//! - [`buffer`]: buffer enforcement and per-treatment averages;
//! - [`improved`]: the pruning that [`DetectionMethod::Improved`] adds;
//! - [`blocks`]: bin-wise mean log counts, block rates and runs;
//! - [`grid`]: the LRO grid search's points and their grouping.
//!
//! All change-point positions here are on the 1-based bin axis that tpoints
//! use (model vignette §12.1; the original's 0-based positions: §16).

pub(crate) mod blocks;
pub(crate) mod buffer;
pub(crate) mod dtw;
pub(crate) mod grid;
pub(crate) mod improved;
pub(crate) mod lro;

#[cfg(test)]
pub(crate) mod simulate;

use crate::design::{Design, Structure};

use crate::data::SummedTable;
use lro::{PassRatios, SeriesMatrix};

/// How change points are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum DetectionMethod {
    /// The original's change-point procedure (model vignette §12.1), with the
    /// fixes listed in §16.
    Original,
    /// LRO candidates pruned by a step-significance test and a ramp merge
    /// (see [`improved`]) before projection; meant to curb over-detection.
    #[default]
    Improved,
}

impl DetectionMethod {
    /// The name R uses for the method (`LRO_method`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            DetectionMethod::Improved => "improved",
            DetectionMethod::Original => "original",
        }
    }

    /// The method an R name means, if any.
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        [DetectionMethod::Improved, DetectionMethod::Original]
            .into_iter()
            .find(|method| method.name() == name)
    }
}

/// Settings of the structure step (defaults in model vignette §12.1 and ?wisp).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct DetectionSettings {
    /// Buffer = ceil(B · buffer_factor); also scales the LRO window.
    pub(crate) buffer_factor: f64,
    /// A centroid value counts when above mean + cutoff · sd.
    pub(crate) lro_cutoff: f64,
    /// ws = max(2, round(lro_window_factor · B · buffer_factor)).
    pub(crate) lro_window_factor: f64,
    pub(crate) method: DetectionMethod,
}

impl Default for DetectionSettings {
    fn default() -> Self {
        Self {
            buffer_factor: crate::rules::DEFAULT_BUFFER_FACTOR,
            lro_cutoff: crate::rules::DEFAULT_LRO_CUTOFF,
            lro_window_factor: crate::rules::DEFAULT_LRO_WINDOW_FACTOR,
            method: DetectionMethod::default(),
        }
    }
}

impl DetectionSettings {
    pub(crate) fn validate(&self) -> Result<(), String> {
        crate::rules::check_buffer_factor(self.buffer_factor)?;
        if !self.lro_cutoff.is_finite() {
            return Err(format!(
                "lro_cutoff must be finite, got {}",
                self.lro_cutoff
            ));
        }
        if !(self.lro_window_factor.is_finite() && self.lro_window_factor > 0.0) {
            return Err(format!(
                "lro_window_factor must be positive and finite, got {}",
                self.lro_window_factor
            ));
        }
        Ok(())
    }

    /// The base LRO window ws (6 for B = 100 with the defaults). Windows
    /// above B + 1 are cut to B + 1: every window longer than the series
    /// gives zero ratios and leaves no position to scan, so the detection is
    /// the same, and window arithmetic (2ws, 4ws) cannot overflow.
    pub(crate) fn window_size(&self, bins: usize) -> usize {
        let raw = (self.lro_window_factor * bins as f64 * self.buffer_factor).round();
        // The float → int cast saturates.
        (raw as usize).max(2).min(bins.saturating_add(1).max(2))
    }

    /// The tpoint buffer ceil(B · buffer_factor) (5 for B = 100).
    pub(crate) fn tpoint_buffer(&self, bins: usize) -> usize {
        (bins as f64 * self.buffer_factor).ceil() as usize
    }
}

/// What change-point detection found: the degree of every curve and its
/// change points per treatment.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct DetectedChangePoints {
    /// The degree of every curve.
    pub(crate) structure: Structure,
    /// Per curve (index c·S + s), per treatment: the d change points on the
    /// 1-based bin axis (model vignette §12.1, step 7), the initial tpoints.
    pub(crate) change_points: Vec<Vec<Vec<f64>>>,
}

impl DetectedChangePoints {
    /// Per treatment, the change points of curve (context, species).
    pub(crate) fn curve_points(&self, context: usize, species: usize) -> &[Vec<f64>] {
        let index = context * self.structure.species() + species;
        self.change_points.get(index).map_or(&[], Vec::as_slice)
    }
}

/// The detected structure with the degrees the user fixed: a curve keeps its
/// detected change points when detection found as many, and gets `even(d)`
/// (evenly spaced points) otherwise.
pub(crate) fn with_degrees(
    detected: DetectedChangePoints,
    degrees: &[usize],
    even: impl Fn(usize) -> Vec<f64>,
) -> Result<DetectedChangePoints, String> {
    let structure = Structure::new(
        detected.structure.contexts(),
        detected.structure.species(),
        degrees.to_vec(),
    )?;
    let change_points = detected
        .change_points
        .into_iter()
        .zip(degrees)
        .map(|(per_treatment, &degree)| {
            per_treatment
                .into_iter()
                .map(|points| {
                    if points.len() == degree {
                        points
                    } else {
                        even(degree)
                    }
                })
                .collect()
        })
        .collect();
    Ok(DetectedChangePoints {
        structure,
        change_points,
    })
}

/// Detection of one curve, with its intermediate results.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CurveDetection {
    /// Change points of the centroid that were projected (1-based), after
    /// pruning when the method prunes.
    pub(crate) centroid_points: Vec<usize>,
    /// Per kept column, its change points after buffer enforcement.
    pub(crate) column_points: Vec<Vec<usize>>,
    /// Per treatment, the mean over its columns (model vignette §12.1, step 7).
    pub(crate) treatment_points: Vec<Vec<f64>>,
}

impl CurveDetection {
    pub(crate) fn degree(&self) -> usize {
        self.treatment_points.first().map_or(0, Vec::len)
    }
}

/// Runs the detection of model vignette §12.1 on one curve's series matrix.
pub(crate) fn detect_curve(
    series: &SeriesMatrix,
    treatments: usize,
    settings: &DetectionSettings,
) -> Result<CurveDetection, String> {
    settings.validate()?;
    let bins = series.bins;
    if series.keys.len() != series.column_count() {
        return Err(format!(
            "{} column keys for {} columns",
            series.keys.len(),
            series.column_count()
        ));
    }
    if let Some(column) = series.columns.iter().position(|c| c.len() != bins) {
        return Err(format!("column {column} does not have {bins} bins"));
    }
    if let Some(&(treatment, _)) = series.keys.iter().find(|&&(t, _)| t >= treatments) {
        return Err(format!("treatment {treatment} out of range ({treatments})"));
    }
    let empty = |treatments| CurveDetection {
        centroid_points: Vec::new(),
        column_points: vec![Vec::new(); series.column_count()],
        treatment_points: vec![Vec::new(); treatments],
    };
    if series.column_count() == 0 {
        return Ok(empty(treatments));
    }
    let window = settings.window_size(bins);
    let ratios: Vec<PassRatios> = series
        .columns
        .iter()
        .map(|column| PassRatios::of_series(column, window))
        .collect();
    let centroid = lro::centroid(&ratios);
    let cutoff = match settings.method {
        DetectionMethod::Original => settings.lro_cutoff,
        DetectionMethod::Improved => settings.lro_cutoff * improved::CANDIDATE_CUTOFF_SCALE,
    };
    let mut candidates = lro::find_change_points(&centroid, window, cutoff);
    if settings.method == DetectionMethod::Improved {
        let consensus = improved::treatment_consensus(series, treatments);
        candidates = improved::prune_change_points(
            &candidates,
            &consensus,
            &improved::PruningSettings::for_window(window),
        );
    }
    if candidates.is_empty() {
        return Ok(empty(treatments));
    }
    let projected = ratios
        .iter()
        .map(|column| dtw::project_change_points(&column.mid, &centroid.mid, &candidates))
        .collect::<Result<Vec<_>, _>>()?;
    let buffered = buffer::enforce_buffer(&projected, bins, settings.tpoint_buffer(bins))?;
    let column_treatments: Vec<usize> = series.keys.iter().map(|&(t, _)| t).collect();
    let treatment_points = buffer::treatment_means(&buffered, &column_treatments, treatments)?;
    Ok(CurveDetection {
        centroid_points: buffered.kept_rows.iter().map(|&k| candidates[k]).collect(),
        column_points: buffered.columns,
        treatment_points,
    })
}

/// Detects the degree and change points of every (context, species) curve.
pub(crate) fn detect_structure(
    table: &SummedTable,
    design: &Design,
    settings: &DetectionSettings,
) -> Result<DetectedChangePoints, String> {
    settings.validate()?;
    let shape = table.shape();
    let (contexts, species) = (design.contexts().len(), design.species().len());
    if shape.contexts != contexts
        || shape.species != species
        || shape.treatments != design.treatment_count()
    {
        return Err(format!(
            "the table has {} contexts × {} species × {} treatments, the design {contexts} × {species} × {}",
            shape.contexts,
            shape.species,
            shape.treatments,
            design.treatment_count()
        ));
    }
    let mut degrees = Vec::with_capacity(contexts * species);
    let mut change_points = Vec::with_capacity(contexts * species);
    for c in 0..contexts {
        for s in 0..species {
            let series = lro::series_matrix(table, c, s)?;
            let detection = detect_curve(&series, shape.treatments, settings)?;
            degrees.push(detection.degree());
            change_points.push(detection.treatment_points);
        }
    }
    Ok(DetectedChangePoints {
        structure: Structure::new(contexts, species, degrees)?,
        change_points,
    })
}

#[cfg(test)]
mod tests {
    use super::simulate::{noisy_series, poisson_table, Curve};
    use super::*;

    #[test]
    fn method_names_round_trip_and_the_default_is_the_rules_default() {
        for method in [DetectionMethod::Improved, DetectionMethod::Original] {
            assert_eq!(DetectionMethod::from_name(method.name()), Some(method));
        }
        assert_eq!(DetectionMethod::from_name("best"), None);
        assert_eq!(
            DetectionMethod::default().name(),
            crate::rules::DEFAULT_LRO_METHOD
        );
    }

    fn curve(levels: &[f64], points: &[f64], slope: f64) -> Curve {
        Curve {
            levels: levels.to_vec(),
            points: points.to_vec(),
            slopes: vec![slope; points.len()],
        }
    }

    fn settings(method: DetectionMethod) -> DetectionSettings {
        DetectionSettings {
            method,
            ..DetectionSettings::default()
        }
    }

    /// Found change points of a single noisy series, per seed.
    fn found(curve: &Curve, sd: f64, method: DetectionMethod, seeds: u64) -> Vec<Vec<f64>> {
        (0..seeds)
            .map(|seed| {
                let series = noisy_series(curve, 100, sd, seed);
                let detection = detect_curve(&series, 1, &settings(method)).unwrap();
                detection.treatment_points[0].clone()
            })
            .collect()
    }

    fn within(found: &[f64], truth: &[f64], tolerance: f64) -> bool {
        found.len() == truth.len()
            && found
                .iter()
                .zip(truth)
                .all(|(f, t)| (f - t).abs() <= tolerance)
    }

    #[test]
    fn settings_defaults_window_and_buffer() {
        let s = DetectionSettings::default();
        assert_eq!(s.window_size(100), 6);
        assert_eq!(s.tpoint_buffer(100), 5);
        assert_eq!(s.window_size(10), 2);
        let huge = DetectionSettings {
            lro_window_factor: 1e30,
            ..DetectionSettings::default()
        };
        assert_eq!(huge.window_size(100), 101);
        assert!(s.validate().is_ok());
        let bad = DetectionSettings {
            buffer_factor: 1.0,
            ..s
        };
        assert!(bad.validate().is_err());
        let bad = DetectionSettings {
            lro_window_factor: 0.0,
            ..s
        };
        assert!(bad.validate().is_err());
    }

    #[test]
    fn improved_recovers_clear_steps_within_three_bins() {
        // Sharp steps 1 → 3 → 1.5 → 3.5 at 25, 50, 75 with N(0, 0.2) noise.
        let steps = curve(&[1.0, 3.0, 1.5, 3.5], &[25.0, 50.0, 75.0], 2.0);
        for points in found(&steps, 0.2, DetectionMethod::Improved, 10) {
            assert!(within(&points, &[25.0, 50.0, 75.0], 3.0), "{points:?}");
        }
        let staircase = curve(&[1.0, 2.0, 3.0], &[30.0, 60.0], 1.0);
        for points in found(&staircase, 0.2, DetectionMethod::Improved, 10) {
            assert!(within(&points, &[30.0, 60.0], 3.0), "{points:?}");
        }
        // Four alternating steps under more noise: the count is right.
        let alternating = curve(&[2.0, 1.0, 2.5, 0.5, 2.0], &[20.0, 40.0, 60.0, 80.0], 1.0);
        for points in found(&alternating, 0.3, DetectionMethod::Improved, 10) {
            assert_eq!(points.len(), 4, "{points:?}");
        }
    }

    #[test]
    fn original_finds_the_steps_but_over_detects() {
        let steps = curve(&[1.0, 3.0, 1.5, 3.5], &[25.0, 50.0, 75.0], 2.0);
        let original = found(&steps, 0.2, DetectionMethod::Original, 10);
        // Seed 5 is one the original gets exactly right.
        assert!(
            within(&original[5], &[25.0, 50.0, 75.0], 3.0),
            "{original:?}"
        );
        let total: usize = original.iter().map(Vec::len).sum();
        assert!(total > 30, "{original:?}");
        // Pure noise: the mean + 2·sd threshold is always exceeded somewhere.
        let flat = curve(&[2.0], &[], 1.0);
        let noise_original = found(&flat, 0.2, DetectionMethod::Original, 10);
        assert!(noise_original.iter().all(|p| !p.is_empty()));
        let noise_improved = found(&flat, 0.2, DetectionMethod::Improved, 10);
        assert!(noise_improved.iter().all(Vec::is_empty));
    }

    /// Six genes with 12 transitions in all; the knock-out raises the levels
    /// by 0.3 and moves every point 3 bins right.
    fn cortex_like() -> Vec<[Curve; 2]> {
        let genes = [
            (vec![0.5, 2.5, 1.0, 3.0], vec![20.0, 45.0, 70.0], 1.0),
            (vec![3.0, 1.0, 2.5], vec![30.0, 65.0], 0.8),
            (vec![1.0, 3.5, 1.5], vec![40.0, 80.0], 1.5),
            (vec![2.0, 0.5], vec![50.0], 0.6),
            (vec![2.0], vec![], 1.0),
            (
                vec![0.5, 2.0, 0.5, 2.5, 1.0],
                vec![15.0, 35.0, 60.0, 85.0],
                1.2,
            ),
        ];
        genes
            .iter()
            .map(|(levels, points, slope)| {
                let wt = curve(levels, points, *slope);
                let ko = Curve {
                    levels: levels.iter().map(|l| l + 0.3).collect(),
                    points: points.iter().map(|p| p + 3.0).collect(),
                    slopes: wt.slopes.clone(),
                };
                [wt, ko]
            })
            .collect()
    }

    #[test]
    fn on_a_poisson_table_improved_counts_the_simulated_transitions() {
        let truth = [3, 2, 2, 1, 0, 4];
        let mut exact = 0;
        for seed in 0..5 {
            let (table, design) = poisson_table(&cortex_like(), 100, 4, seed);
            let original =
                detect_structure(&table, &design, &settings(DetectionMethod::Original)).unwrap();
            let improved =
                detect_structure(&table, &design, &settings(DetectionMethod::Improved)).unwrap();
            let total = |d: &DetectedChangePoints| d.structure.degrees().iter().sum::<usize>();
            assert!(total(&original) > 12, "{:?}", original.structure);
            assert!(
                (12..=13).contains(&total(&improved)),
                "{:?}",
                improved.structure
            );
            if improved.structure.degrees() == truth {
                exact += 1;
            }
            // Shapes: per curve, per treatment, d points inside the buffer.
            for (curve, points) in improved.change_points.iter().enumerate() {
                assert_eq!(points.len(), 2);
                for treatment in points {
                    assert_eq!(treatment.len(), improved.structure.degrees()[curve]);
                    assert!(treatment.iter().all(|&p| (6.0..=94.0).contains(&p)));
                    assert!(treatment.windows(2).all(|w| w[1] - w[0] >= 6.0));
                }
            }
        }
        assert!(exact >= 4, "{exact} of 5 exactly right");
    }

    #[test]
    fn curves_without_complete_series_have_degree_zero() {
        let series = SeriesMatrix {
            bins: 50,
            columns: vec![],
            keys: vec![],
        };
        let detection = detect_curve(&series, 3, &DetectionSettings::default()).unwrap();
        assert_eq!(detection.degree(), 0);
        assert_eq!(detection.treatment_points, vec![Vec::<f64>::new(); 3]);
    }

    #[test]
    fn malformed_series_matrices_are_errors() {
        let good = noisy_series(&curve(&[1.0], &[], 1.0), 30, 0.1, 1);
        let mut short = good.clone();
        short.columns[0].pop();
        assert!(detect_curve(&short, 1, &DetectionSettings::default()).is_err());
        let mut unkeyed = good.clone();
        unkeyed.keys.clear();
        assert!(detect_curve(&unkeyed, 1, &DetectionSettings::default()).is_err());
        assert!(detect_curve(&good, 0, &DetectionSettings::default()).is_err());
    }

    #[test]
    fn mismatched_design_is_an_error() {
        let (table, _) = poisson_table(&cortex_like()[..1], 40, 2, 1);
        let (_, other) = poisson_table(&cortex_like()[..2], 40, 2, 1);
        assert!(detect_structure(&table, &other, &DetectionSettings::default()).is_err());
    }
}
