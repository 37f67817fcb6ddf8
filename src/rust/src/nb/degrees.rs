//! How many transitions each curve of the count model has (model vignette
//! §12): the detector's structure (with the user's fixed degrees), the LRO
//! grid search, or each curve's degree chosen by count-likelihood fits.

use super::fit::SpeciesFit;
use super::pipeline::{fit_all, fit_species_on, summarise};
use super::select::{select_curve_from, selected_structure, CurveSelection, FittedDegrees};
use super::settings::CountFitSettings;
use super::start::{detect_structure, pooled_series, segmentation_points};
use super::CountModel;
use crate::changepoint::grid::{distinct_detections_by, lro_grid, GridPoint};
use crate::changepoint::DetectedChangePoints;
use crate::changepoint::DetectionSettings;
use crate::design::Structure;
use crate::engine::{self, Failure, PoolOptions};
use crate::error::Error;
use crate::outcome::FitSummary;

/// Detected (or given) structure of a count model: with `degrees` (per
/// curve, context-major: a fixed degree, or None to keep the detected one),
/// those degrees and, where detection found as many transitions, its change
/// points (the best step function's otherwise).
pub(crate) fn structure_of(
    base: &CountModel,
    detection: &DetectionSettings,
    degrees: Option<&[Option<usize>]>,
) -> Result<DetectedChangePoints, String> {
    let detected = detect_structure(base, detection)?;
    let Some(fixed) = degrees else {
        return Ok(detected);
    };
    let shape = base.table().shape();
    if fixed.len() != shape.contexts * shape.species {
        return Err(format!(
            "degrees needs {} entries, one per (context, species), not {}",
            shape.contexts * shape.species,
            fixed.len()
        ));
    }
    // Curves the user left open (None) keep the detected degree.
    let degrees: Vec<usize> = fixed
        .iter()
        .zip(detected.structure.degrees())
        .map(|(f, &d)| f.unwrap_or(d))
        .collect();
    let structure = Structure::new(shape.contexts, shape.species, degrees.clone())?;
    // Where detection found another number of transitions, the best step
    // function with the wanted number starts the points.
    let change_points = detected
        .change_points
        .into_iter()
        .enumerate()
        .map(|(curve, per_treatment)| {
            let (c, s) = (curve / shape.species, curve % shape.species);
            let degree = degrees[curve];
            if per_treatment.iter().all(|p| p.len() == degree) {
                return per_treatment;
            }
            let min_size = (base.point_gap().ceil() as usize).max(1);
            pooled_series(base, c, s)
                .iter()
                .map(|series| segmentation_points(series, degree, min_size, base.axis()))
                .collect()
        })
        .collect();
    Ok(DetectedChangePoints {
        structure,
        change_points,
    })
}

/// The structure step's result under the count likelihood.
#[derive(Clone, Debug)]
pub(crate) struct StructureChoice {
    pub detected: DetectedChangePoints,
    /// Every curve's selection, context-major.
    pub selections: Vec<CurveSelection>,
    /// Per species, its fit with the random effects estimated where the
    /// selection already made it with the final structure and change
    /// points (the pooled fit of the first pass, when the second pass kept
    /// that species' degrees): the full fit has nothing left to do there.
    pub fitted: Vec<Option<SpeciesFit>>,
}

/// Chooses every curve's number of transitions by the count likelihood
/// (model vignette §12.6), in two passes when the animals carry random
/// effects: every curve with the random effects at 0; the whole model
/// fitted once with the structure so chosen and the random effects
/// estimated (the pooled fit); every curve again with the random effects
/// held at the pooled fit's. Curves are independent within a pass, so they
/// run in parallel on the fork engine when `options` allows more than one
/// worker (in this process otherwise); each step depends on the rows (and
/// the pooled fit) only, so the result is the same for any number of
/// workers. `fixed` holds, per curve (context-major), the degree the user
/// fixed or None (choose it); empty: choose every curve's.
/// `progress(stage, done, total)` hears each stage ("structure": the first
/// pass, "warps": the pooled fit, "reselect": the second pass) as in
/// [`engine::map_tasks`].
pub(crate) fn select_structure(
    base: &CountModel,
    fixed: &[Option<usize>],
    settings: &CountFitSettings,
    options: &PoolOptions,
    interrupted: impl FnMut() -> bool,
    progress: impl FnMut(&'static str, usize, usize),
) -> Result<StructureChoice, Error> {
    let second_pass = has_second_pass(base, fixed);
    select_structure_passes(
        base,
        fixed,
        settings,
        options,
        second_pass,
        interrupted,
        progress,
    )
}

/// Whether the selection of `base` with `fixed` degrees (as
/// [`select_structure`] takes them) makes its second pass: when the animals
/// carry random effects and some curve's degree is to be chosen.
pub(crate) fn has_second_pass(base: &CountModel, fixed: &[Option<usize>]) -> bool {
    let shape = base.table().shape();
    let all_fixed = (0..shape.contexts * shape.species)
        .all(|curve| fixed.get(curve).copied().flatten().is_some());
    base.has_random_effects() && !all_fixed
}

/// [`select_structure`] with its second pass made or not as `second_pass`
/// says: a panel's species fitted on their own make it when the whole
/// panel's selection would ([`has_second_pass`] of the whole panel), so that
/// each gives what it gives in the panel.
pub(crate) fn select_structure_passes(
    base: &CountModel,
    fixed: &[Option<usize>],
    settings: &CountFitSettings,
    options: &PoolOptions,
    second_pass: bool,
    interrupted: impl FnMut() -> bool,
    progress: impl FnMut(&'static str, usize, usize),
) -> Result<StructureChoice, Error> {
    let shape = base.table().shape();
    let curves = shape.contexts * shape.species;
    if !fixed.is_empty() && fixed.len() != curves {
        return Err(Error::input(format!(
            "degrees needs {curves} entries, one per (context, species), not {}",
            fixed.len()
        )));
    }
    let fixed_of = |curve: usize| fixed.get(curve).copied().flatten();
    // A fixed degree the bins have no room for is the user's error, found
    // before any work (and the same for any worker count).
    for curve in 0..curves {
        if let Some(degree) = fixed_of(curve) {
            base.curve_model(curve / shape.species, curve % shape.species, degree)
                .map_err(|e| {
                    Error::input(format!(
                        "degrees: {degree} transitions for {} in {}: {e}",
                        base.design().species()[curve % shape.species],
                        base.design().contexts()[curve / shape.species]
                    ))
                })?;
        }
    }
    // One long-lived worker per slot, fed one curve at a time: a fork
    // costs more than a small curve's selection (the more so from a large
    // session), and feeding balances the load.
    let batched = PoolOptions {
        tasks_per_child: crate::engine::TasksPerChild::Fed,
        ..options.clone()
    };
    let mut interrupted = interrupted;
    let mut progress = progress;
    // The second pass (with warps held) starts each degree from the first
    // pass's fit of it.
    let pass = |held: Option<&[Vec<[f64; 3]>]>,
                earlier: Option<&[FittedDegrees]>,
                interrupted: &mut dyn FnMut() -> bool,
                progress: &mut dyn FnMut(usize, usize)| {
        engine::map_tasks(
            curves,
            &batched,
            |task| {
                let curve = task - 1;
                let species = curve % shape.species;
                select_curve_from(
                    base,
                    curve / shape.species,
                    species,
                    fixed_of(curve),
                    settings,
                    held.map(|h| h[species].as_slice()),
                    earlier.map(|e| &e[curve]),
                )
            },
            interrupted,
            progress,
        )?
        .into_iter()
        .enumerate()
        .map(|(curve, outcome)| match outcome {
            Ok(selection) => Ok(selection),
            Err(Failure::Task(message)) => Err(Error::input(message)),
            Err(failure) => Err(Error::system(format!(
                "the structure selection of {} in {} failed: {failure}",
                base.design().species()[curve % shape.species],
                base.design().contexts()[curve / shape.species]
            ))),
        })
        .collect::<Result<Vec<(CurveSelection, FittedDegrees)>, Error>>()
    };
    let (first, first_fits): (Vec<CurveSelection>, Vec<FittedDegrees>) =
        pass(None, None, &mut interrupted, &mut |done, total| {
            progress("structure", done, total)
        })?
        .into_iter()
        .unzip();
    let first_detected = selected_structure(base, &first).map_err(Error::input)?;
    if !second_pass {
        return Ok(StructureChoice {
            detected: first_detected,
            selections: first,
            fitted: vec![None; shape.species],
        });
    }
    // The random effects couple a species' curves through its animals'
    // warps: estimated once with the first choice, then held while every
    // curve is chosen again (model vignette §12.6).
    let model = base
        .with_structure(first_detected.structure.clone())
        .map_err(Error::input)?;
    let none_done = vec![None; shape.species];
    let pooled = fit_species_on(
        &model,
        &first_detected,
        &none_done,
        settings,
        options,
        &mut interrupted,
        |done, total| progress("warps", done, total),
    )?;
    let held: Vec<Vec<[f64; 3]>> = pooled.species.iter().map(|f| f.state.u.clone()).collect();
    let selections: Vec<CurveSelection> = pass(
        Some(&held),
        Some(&first_fits),
        &mut interrupted,
        &mut |done, total| progress("reselect", done, total),
    )?
    .into_iter()
    .map(|(selection, _)| selection)
    .collect();
    let mut detected = selected_structure(base, &selections).map_err(Error::input)?;
    // A species whose degrees the second pass kept is fitted already: the
    // full fit of that species from the first pass's change points is the
    // pooled fit.
    let mut fitted = vec![None; shape.species];
    for (s, fit) in pooled.species.into_iter().enumerate() {
        let kept = (0..shape.contexts)
            .all(|c| detected.structure.degree(c, s) == first_detected.structure.degree(c, s));
        if kept {
            for c in 0..shape.contexts {
                let curve = c * shape.species + s;
                detected.change_points[curve] = first_detected.change_points[curve].clone();
            }
            fitted[s] = Some(fit);
        }
    }
    Ok(StructureChoice {
        detected,
        selections,
        fitted,
    })
}

/// The LRO grid search under the count likelihood: each distinct structure
/// the grid's detection settings give is fitted once (in a forked child);
/// AIC and BIC count the estimated parameters (β the data inform, standard
/// deviations, dispersions). `progress(done, total)` is told the number of
/// distinct structures before the first fit (done = 0) and after each fit
/// ends; `interrupted` is polled between fits in this process (and by the
/// engine otherwise).
pub(crate) fn grid_search(
    base: &CountModel,
    template: &DetectionSettings,
    settings: &CountFitSettings,
    options: &PoolOptions,
    interrupted: impl FnMut() -> bool,
    progress: impl FnMut(usize, usize),
) -> Result<Vec<GridPoint>, Error> {
    let grid = lro_grid();
    let (distinct, index_of_point) =
        distinct_detections_by(&grid, template, |d| detect_structure(base, d))
            .map_err(Error::input)?;
    let fit_structure = |detected: &DetectedChangePoints| -> Result<(FitSummary, usize), String> {
        let model = base.with_structure(detected.structure.clone())?;
        let started = std::time::Instant::now();
        let estimate = fit_all(&model, Some(detected), None, settings)?;
        let summary = summarise(&model, &estimate)?;
        let parameters = summary.degrees_of_freedom;
        Ok((
            summary.into_fit_summary(started.elapsed().as_secs_f64()),
            parameters,
        ))
    };
    let fits: Vec<Result<(FitSummary, usize), String>> = engine::map_tasks(
        distinct.len(),
        options,
        |task| fit_structure(&distinct[task - 1]),
        interrupted,
        progress,
    )?
    .into_iter()
    .map(|outcome| {
        outcome.map_err(|failure| match failure {
            Failure::Task(reason) => format!("failed: {reason}"),
            other => format!("failed: {other}"),
        })
    })
    .collect();
    Ok(grid
        .iter()
        .zip(&index_of_point)
        .map(|(&(window_factor, cutoff), &structure)| GridPoint {
            window_factor,
            cutoff,
            structure,
            parameters: fits[structure].as_ref().map_or(0, |f| f.1),
            fit: fits[structure].clone().map(|f| f.0),
        })
        .collect())
}
