//! From a model without structure to a fitted model: change-point detection,
//! initial values, feasibility repair and the L-BFGS fit (model vignette §12
//! and §13.1), and the LRO grid search over detection settings (§12.3).

use crate::changepoint::grid::{distinct_detections_by, lro_grid, GridPoint};
use crate::changepoint::{detect_structure, DetectedChangePoints, DetectionSettings};
use crate::design::Structure;
use crate::engine::{self, PoolOptions};
use crate::error::Error;
use crate::original::fit::{fit, FitSettings};
use crate::original::repair::{repair_feasibility, RepairOutcome};
use crate::original::Model;
use crate::original::{initial_parameters, StartSettings};
use crate::outcome::{FitSummary, Outcome, ProcessStats};
use crate::streams::FULL_FIT_WARP_STREAM;

/// What the steps after detection need: how to start and how to fit.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct PipelineSettings {
    pub(crate) start: StartSettings,
    pub(crate) fit: FitSettings,
}

impl PipelineSettings {
    pub(crate) fn validate(&self) -> Result<(), String> {
        self.start.validate()?;
        self.fit.validate()
    }
}

/// The model with a structure, where it started and how the fit went.
#[derive(Clone, Debug)]
pub(crate) struct StructuredFit {
    pub(crate) model: Model,
    pub(crate) detected: DetectedChangePoints,
    pub(crate) start: Vec<f64>,
    pub(crate) repair: RepairOutcome,
    pub(crate) fit: FitSummary,
}

/// The same data and design with other degrees.
pub(crate) fn with_structure(base: &Model, structure: Structure) -> Result<Model, String> {
    Model::new(
        base.table().clone(),
        base.design().clone(),
        structure,
        *base.settings(),
    )
}

/// Initial values (with warps from `warp_stream`), feasibility repair and fit
/// for a model whose structure was already detected.
pub(crate) fn fit_structure(
    model: &Model,
    detected: &DetectedChangePoints,
    settings: &PipelineSettings,
    seed: u64,
    warp_stream: u64,
) -> Result<(Vec<f64>, RepairOutcome, FitSummary), String> {
    let mut start = initial_parameters(model, detected, &settings.start, seed, warp_stream)?;
    let repair = repair_feasibility(model, &mut start, &settings.fit)?;
    if !repair.feasible {
        return Err(format!(
            "no feasible starting point after {} repair attempts (smallest boundary distance {:.3e})",
            repair.attempts, repair.min_distance
        ));
    }
    let result = fit(model, &start, &settings.fit)?;
    Ok((start, repair, result))
}

/// Detects the structure of `base`'s data and fits it.
pub(crate) fn detect_and_fit(
    base: &Model,
    detection: &DetectionSettings,
    settings: &PipelineSettings,
    seed: u64,
    degrees: Option<&[usize]>,
) -> Result<StructuredFit, String> {
    let mut detected = detect_structure(base.table(), base.design(), detection)?;
    if let Some(degrees) = degrees {
        let bins = base.table().bins() as f64;
        detected = crate::changepoint::with_degrees(detected, degrees, |d| {
            (1..=d)
                .map(|k| bins * k as f64 / (d as f64 + 1.0))
                .collect()
        })?;
    }
    let model = with_structure(base, detected.structure.clone())?;
    let (start, repair, fit) =
        fit_structure(&model, &detected, settings, seed, FULL_FIT_WARP_STREAM)?;
    Ok(StructuredFit {
        model,
        detected,
        start,
        repair,
        fit,
    })
}

/// [`detect_and_fit`] in this process, with what it cost: the full-data fit
/// as an [`Outcome`] (replicate 0) beside the structured fit.
pub(crate) fn detect_and_fit_here(
    base: &Model,
    detection: &DetectionSettings,
    settings: &PipelineSettings,
    seed: u64,
    degrees: Option<&[usize]>,
) -> Result<(StructuredFit, Outcome), String> {
    let started = std::time::Instant::now();
    let fitted = detect_and_fit(base, detection, settings, seed, degrees)?;
    let seconds = started.elapsed().as_secs_f64();
    let memory = crate::engine::procmem::snapshot_self();
    let outcome = Outcome {
        replicate: 0,
        fit: Ok(fitted.fit.clone()),
        process: ProcessStats {
            seconds: Some(seconds),
            pid: i32::try_from(std::process::id()).ok(),
            peak_rss_mb: memory.peak_rss_mb,
            pss_mb: memory.pss_mb,
            private_dirty_mb: memory.private_dirty_mb,
        },
    };
    Ok((fitted, outcome))
}

/// The LRO grid search: every (window factor, cutoff) pair of [`lro_grid`]
/// detected with `template`'s other settings, and each distinct structure
/// fitted once, on the engine's workers (forked children, or threads where
/// there is no fork, as `options.kind` says). An interrupt (polled
/// by `interrupted`) ends it with an [`crate::error::ErrorKind::Interrupted`] error.
/// `progress(done, total)` is told the number of distinct structures before
/// the first fit (done = 0) and after each fit ends.
pub(crate) fn grid_search(
    base: &Model,
    template: &DetectionSettings,
    settings: &PipelineSettings,
    seed: u64,
    options: &PoolOptions,
    interrupted: impl FnMut() -> bool,
    progress: impl FnMut(usize, usize),
) -> Result<Vec<GridPoint>, Error> {
    let grid = lro_grid();
    let (distinct, index_of_point) =
        distinct_detections(base, &grid, template).map_err(Error::input)?;
    let fits: Vec<Result<FitSummary, String>> = engine::map_tasks(
        distinct.len(),
        options,
        |task| {
            let detected = &distinct[task - 1];
            Ok(
                with_structure(base, detected.structure.clone()).and_then(|model| {
                    fit_structure(&model, detected, settings, seed, FULL_FIT_WARP_STREAM)
                        .map(|(_, _, fit)| fit)
                }),
            )
        },
        interrupted,
        progress,
    )?
    .into_iter()
    .map(|outcome| match outcome {
        Ok(fit) => fit.map_err(|reason| format!("failed: {reason}")),
        Err(failure) => Err(format!("failed: {failure}")),
    })
    .collect();
    Ok(grid
        .iter()
        .zip(&index_of_point)
        .map(|(&(window_factor, cutoff), &structure)| GridPoint {
            window_factor,
            cutoff,
            structure,
            parameters: fits[structure].as_ref().map_or(0, |f| f.parameters.len()),
            fit: fits[structure].clone(),
        })
        .collect())
}

fn distinct_detections(
    base: &Model,
    grid: &[(f64, f64)],
    template: &DetectionSettings,
) -> Result<(Vec<DetectedChangePoints>, Vec<usize>), String> {
    distinct_detections_by(grid, template, |settings| {
        detect_structure(base.table(), base.design(), settings)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The grid search's fits do not depend on where they run: forked
    /// children (Unix) or threads (the default where there is no fork).
    #[cfg(unix)]
    #[test]
    fn the_grid_search_fits_the_same_on_threads_as_in_child_processes() {
        use crate::design::Factor;
        use crate::engine::WorkerKind;
        use crate::original::synthetic::{build_case_from, strings, SplitMix};
        let case = build_case_from(
            &mut SplitMix(11),
            1,
            2,
            vec![1, 2],
            vec![Factor::new("side", strings(&["left", "right"]))],
            2,
        );
        let search = |kind: WorkerKind| {
            let options = PoolOptions {
                kind,
                workers: 2,
                ..PoolOptions::default()
            };
            let points = grid_search(
                &case.model,
                &DetectionSettings::default(),
                &PipelineSettings::default(),
                7,
                &options,
                || false,
                |_, _| {},
            )
            .unwrap();
            // Everything but the timing.
            points
                .into_iter()
                .map(|point| {
                    let fit = point
                        .fit
                        .map(|f| (f.parameters, f.nll, f.code, f.evaluations));
                    (point.window_factor, point.cutoff, point.structure, fit)
                })
                .collect::<Vec<_>>()
        };
        let in_processes = search(WorkerKind::Process);
        assert!(in_processes.iter().any(|point| point.3.is_ok()));
        assert_eq!(search(WorkerKind::Thread), in_processes);
    }

    #[test]
    fn the_grid_has_81_pairs_from_1_to_3() {
        let grid = lro_grid();
        assert_eq!(grid.len(), 81);
        assert_eq!(grid[0], (1.0, 1.0));
        assert_eq!(grid[1], (1.0, 1.25));
        assert_eq!(grid[80], (3.0, 3.0));
    }

    #[test]
    fn information_criteria_follow_their_definitions() {
        let point = GridPoint {
            window_factor: 1.0,
            cutoff: 1.0,
            structure: 0,
            parameters: 10,
            fit: Ok(FitSummary {
                parameters: vec![0.0; 10],
                objective: 101.0,
                nll: 100.0,
                code: "converged".into(),
                converged: true,
                iterations: 3,
                evaluations: 5,
                max_gradient: 0.0,
                on_bound: 0,
                seconds: 0.0,
            }),
        };
        assert_eq!(point.aic(), 220.0);
        assert!((point.bic(1000) - (10.0 * 1000f64.ln() + 200.0)).abs() < 1e-12);
        let failed = GridPoint {
            fit: Err("failed: error: x".into()),
            ..point
        };
        assert_eq!(failed.parameter_count(), 0);
        assert!(failed.aic().is_nan());
    }
}
