//! From data to a reported count fit, and one bootstrap replicate of it
//! (model vignette §13.2 and §14).

use super::curve::{BinDerivatives, CurveValues, WarpedCurve};
use super::fit::{fit_species, reported_parameters, CountFitSettings, SpeciesFit};
use super::layout::{CountLayout, CountRole};
use super::redraw::redraw;
use super::select::{select_curve, selected_structure, CurveSelection};
use super::start::{detect_structure, pooled_series, segmentation_points};
use super::CountModel;
use crate::changepoint::grid::{distinct_detections_by, lro_grid, GridPoint};
use crate::changepoint::DetectedStructure;
use crate::changepoint::DetectionSettings;
use crate::design::Structure;
use crate::design::{Component, ParameterRole, WarpKind};
use crate::engine::{self, Failure, PoolOptions};
use crate::error::Error;
use crate::outcome::FitSummary;
use crate::outcome::{Outcome, ProcessStats};
use crate::resample::{ReplicatePlan, Resampling};
use crate::streams::{replicate_redraw_stream, TaskStream};
use serde::{Deserialize, Serialize};

/// The fits of every species.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct CountEstimate {
    pub species: Vec<SpeciesFit>,
}

/// What a count fit reports: the reported vector and the evidence of how
/// the fit ended.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CountSummary {
    pub parameters: Vec<f64>,
    /// Σ_species J at the estimate.
    pub objective: f64,
    /// −(marginal log-likelihood), summed over species.
    pub nll: f64,
    pub converged: bool,
    /// "converged", or why not.
    pub code: String,
    pub iterations: usize,
    pub evaluations: usize,
    /// The largest |g_i|·sqrt([H⁻¹]_ii) over species.
    pub max_gradient: f64,
    pub on_bound: usize,
    /// Estimated parameters: β that the data inform, standard deviations,
    /// dispersions (the degrees of freedom of AIC and likelihood-ratio tests).
    pub degrees_of_freedom: usize,
}

/// Fits every species (one after another) from the data, or warm-started
/// from `start`.
pub(crate) fn fit_all(
    model: &CountModel,
    detected: Option<&DetectedStructure>,
    start: Option<&CountEstimate>,
    settings: &CountFitSettings,
) -> Result<CountEstimate, String> {
    let species = model.table().shape().species;
    let fits = (0..species)
        .map(|s| fit_one(model, s, detected, start, settings))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(CountEstimate { species: fits })
}

/// Fits species `s` (the unit of parallel work).
pub(crate) fn fit_one(
    model: &CountModel,
    species: usize,
    detected: Option<&DetectedStructure>,
    start: Option<&CountEstimate>,
    settings: &CountFitSettings,
) -> Result<SpeciesFit, String> {
    let warm = start
        .and_then(|e| e.species.get(species))
        .map(|f| (&f.state, f.sigma));
    fit_species(model, species, detected, warm, settings)
}

/// The reported vector and diagnostics of an estimate.
pub(crate) fn summarise(
    model: &CountModel,
    estimate: &CountEstimate,
) -> Result<CountSummary, String> {
    let parameters = reported_parameters(model, &estimate.species)?;
    let layout = CountLayout::new(model.design(), model.structure())?;
    let fits = &estimate.species;
    let converged = fits.iter().all(|f| f.converged);
    let code = if converged {
        "converged".to_string()
    } else {
        let reasons: Vec<String> = fits
            .iter()
            .filter(|f| !f.converged)
            .map(|f| {
                format!(
                    "{}: {}",
                    model.design().species()[f.species],
                    f.stop.as_deref().unwrap_or("not converged")
                )
            })
            .collect();
        format!("not converged ({})", reasons.join("; "))
    };
    let degrees_of_freedom = layout
        .roles()
        .iter()
        .zip(&parameters)
        .filter(|(role, value)| match role {
            CountRole::Original(crate::design::ParameterRole::Beta { .. }) => value.is_finite(),
            CountRole::Original(_) => false,
            CountRole::Deviation { kind, species } => fits
                .iter()
                .find(|f| f.species == *species)
                .is_some_and(|f| f.sigma[super::fit::warp_slot(*kind)] > 0.0 || value.is_finite()),
            CountRole::Dispersion { .. } => value.is_finite(),
        })
        .count();
    Ok(CountSummary {
        parameters,
        objective: fits.iter().map(|f| f.objective).sum(),
        nll: fits.iter().map(|f| f.negative_log_likelihood).sum(),
        converged,
        code,
        iterations: fits.iter().map(|f| f.iterations).sum(),
        evaluations: fits.iter().map(|f| f.evaluations).sum(),
        max_gradient: fits.iter().map(|f| f.scaled_gradient).fold(0.0, f64::max),
        on_bound: fits.iter().map(|f| f.on_bound).sum(),
        degrees_of_freedom,
    })
}

/// Everything a count bootstrap replicate needs; it travels as a saved
/// state (see [`crate::saved`]).
#[derive(Clone, Debug)]
pub(crate) struct CountPlan {
    pub model: CountModel,
    pub detected: DetectedStructure,
    pub settings: CountFitSettings,
    /// The full-data estimate every replicate starts from.
    pub estimate: CountEstimate,
}

/// Detected (or given) structure of a count model: with `degrees` (per
/// curve, context-major: a fixed degree, or None to keep the detected one),
/// those degrees and, where detection found as many transitions, its change
/// points (the best step function's otherwise).
pub(crate) fn structure_of(
    base: &CountModel,
    detection: &DetectionSettings,
    degrees: Option<&[Option<usize>]>,
) -> Result<DetectedStructure, String> {
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
    Ok(DetectedStructure {
        structure,
        change_points,
    })
}

/// Fits every species of a model with a known structure, species in
/// parallel on the fork engine when `options` allows more than one worker
/// (one after another in this process otherwise: the results are the same).
/// A species with a fit in `done` (indexed by species; empty: none) keeps
/// it. `progress(done, total)` is told the number of species to fit before
/// the first fit (done = 0) and after each fit ends; `interrupted` is
/// polled between species in this process (and by the engine otherwise).
pub(crate) fn fit_species_on(
    model: &CountModel,
    detected: &DetectedStructure,
    done: &[Option<SpeciesFit>],
    settings: &CountFitSettings,
    options: &PoolOptions,
    interrupted: impl FnMut() -> bool,
    progress: impl FnMut(usize, usize),
) -> Result<CountEstimate, Error> {
    let species = model.table().shape().species;
    let done_of = |s: usize| done.get(s).and_then(Option::as_ref);
    let to_fit: Vec<usize> = (0..species).filter(|&s| done_of(s).is_none()).collect();
    let mut new_fits = engine::map_tasks(
        to_fit.len(),
        options,
        |task| fit_one(model, to_fit[task - 1], Some(detected), None, settings),
        interrupted,
        progress,
    )?
    .into_iter()
    .zip(&to_fit)
    .map(|(outcome, &s)| match outcome {
        Ok(fit) => Ok(fit),
        Err(Failure::Task(message)) => Err(Error::input(message)),
        Err(failure) => Err(Error::system(format!(
            "the fit of species {} failed: {failure}",
            model.design().species()[s]
        ))),
    })
    .collect::<Result<Vec<_>, Error>>()?
    .into_iter();
    let fits = (0..species)
        .map(|s| match done_of(s) {
            Some(fit) => Ok(fit.clone()),
            None => new_fits
                .next()
                .ok_or_else(|| Error::system("internal: a species fit is missing")),
        })
        .collect::<Result<Vec<_>, Error>>()?;
    Ok(CountEstimate { species: fits })
}

/// The structure step's result under the count likelihood.
#[derive(Clone, Debug)]
pub(crate) struct StructureChoice {
    pub detected: DetectedStructure,
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
    // A few curves per child: a fork costs more than a small curve's
    // selection, and four batches per worker still balance the load.
    let batched = PoolOptions {
        tasks_per_child: crate::engine::TasksPerChild::Fixed(
            curves.div_ceil(4 * options.workers.max(1)).max(1),
        ),
        ..options.clone()
    };
    let mut interrupted = interrupted;
    let mut progress = progress;
    let pass = |held: Option<&[Vec<[f64; 3]>]>,
                interrupted: &mut dyn FnMut() -> bool,
                progress: &mut dyn FnMut(usize, usize)| {
        engine::map_tasks(
            curves,
            &batched,
            |task| {
                let curve = task - 1;
                let species = curve % shape.species;
                select_curve(
                    base,
                    curve / shape.species,
                    species,
                    fixed_of(curve),
                    settings,
                    held.map(|h| h[species].as_slice()),
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
        .collect::<Result<Vec<CurveSelection>, Error>>()
    };
    let first = pass(None, &mut interrupted, &mut |done, total| {
        progress("structure", done, total)
    })?;
    let first_detected = selected_structure(base, &first).map_err(Error::input)?;
    let all_fixed = (0..curves).all(|curve| fixed_of(curve).is_some());
    if !base.has_random_effects() || all_fixed {
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
    let selections = pass(Some(&held), &mut interrupted, &mut |done, total| {
        progress("reselect", done, total)
    })?;
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

/// The full-data fit: structure, fit, and the plan that keeps them.
pub(crate) fn fit_count(
    base: &CountModel,
    detected: DetectedStructure,
    fitted: &[Option<SpeciesFit>],
    settings: &CountFitSettings,
    options: &PoolOptions,
    interrupted: impl FnMut() -> bool,
    progress: impl FnMut(usize, usize),
) -> Result<(CountPlan, Outcome), Error> {
    let started = std::time::Instant::now();
    let model = base
        .with_structure(detected.structure.clone())
        .map_err(Error::input)?;
    let estimate = fit_species_on(
        &model,
        &detected,
        fitted,
        settings,
        options,
        interrupted,
        progress,
    )?;
    let summary = summarise(&model, &estimate).map_err(Error::input)?;
    let seconds = started.elapsed().as_secs_f64();
    let memory = crate::engine::procmem::snapshot_self();
    let outcome = Outcome {
        replicate: 0,
        fit: Ok(summary.into_fit_summary(seconds)),
        process: ProcessStats {
            seconds: Some(seconds),
            pid: i32::try_from(std::process::id()).ok(),
            peak_rss_mb: memory.peak_rss_mb,
            pss_mb: memory.pss_mb,
            private_dirty_mb: memory.private_dirty_mb,
        },
    };
    let plan = CountPlan {
        model,
        detected,
        settings: *settings,
        estimate,
    };
    Ok((plan, outcome))
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
    let fit_structure = |detected: &DetectedStructure| -> Result<(FitSummary, usize), String> {
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

/// Replicate `replicate` of the bootstrap seeded with `seed`: the data
/// redrawn by `scheme`, the structure kept, the fit started from the
/// full-data estimate.
pub(crate) fn run_replicate(
    plan: &CountPlan,
    scheme: Resampling,
    seed: u64,
    replicate: usize,
) -> Result<FitSummary, String> {
    crate::streams::check_replicate_number(replicate)?;
    let started = std::time::Instant::now();
    let mut model = plan.model.clone();
    let mut stream = TaskStream::new(seed, replicate_redraw_stream(replicate));
    redraw(&mut model, &plan.estimate, scheme, &mut stream);
    let estimate = fit_all(
        &model,
        Some(&plan.detected),
        Some(&plan.estimate),
        &plan.settings,
    )?;
    Ok(summarise(&model, &estimate)?.into_fit_summary(started.elapsed().as_secs_f64()))
}

/// Replicate `replicate` of the parametric bootstrap of a likelihood-ratio
/// test (model vignette §15.4): counts drawn from the `reduced` fit (its
/// random effects and counts, as the parametric scheme draws them, stream
/// 2r of `seed`), fitted by the reduced model from its estimate and by the
/// `full` model from that replicate's reduced fit (feasible for the full
/// model, so its likelihood is at least as high but for the priors).
/// Returns −ℓ of the reduced and of the full fit.
pub(crate) fn likelihood_ratio_replicate(
    reduced: &CountPlan,
    full: &CountPlan,
    seed: u64,
    replicate: usize,
) -> Result<(f64, f64), String> {
    crate::streams::check_replicate_number(replicate)?;
    check_nested(reduced, full)?;
    let mut model = reduced.model.clone();
    let mut stream = TaskStream::new(seed, replicate_redraw_stream(replicate));
    redraw(
        &mut model,
        &reduced.estimate,
        Resampling::Parametric,
        &mut stream,
    );
    let reduced_fit = fit_all(
        &model,
        Some(&reduced.detected),
        Some(&reduced.estimate),
        &reduced.settings,
    )?;
    let mut full_model = full.model.clone();
    *full_model.table_mut() = model.table().clone();
    let full_fit = fit_all(
        &full_model,
        Some(&full.detected),
        Some(&reduced_fit),
        &full.settings,
    )?;
    let nll = |estimate: &CountEstimate| {
        estimate
            .species
            .iter()
            .map(|f| f.negative_log_likelihood)
            .sum::<f64>()
    };
    Ok((nll(&reduced_fit), nll(&full_fit)))
}

/// Checks that `reduced` is `full` with more effects held at 0: the same
/// data, design, structure and settings.
pub(crate) fn check_nested(reduced: &CountPlan, full: &CountPlan) -> Result<(), String> {
    let (r, f) = (&reduced.model, &full.model);
    if r.table() != f.table() || r.design() != f.design() {
        return Err("the two fits are not of the same data and design".into());
    }
    if r.structure() != f.structure() {
        return Err(
            "the two fits have different numbers of transitions; fit the reduced model \
             with the full model's (degrees = full$degrees)"
                .into(),
        );
    }
    if reduced.settings != full.settings {
        return Err("the two fits were made with different model settings".into());
    }
    let held = r.held_effects();
    if !f.held_effects().iter().all(|e| held.contains(e)) || held.len() <= f.held_effects().len() {
        return Err(
            "the reduced model must hold at 0 every effect the full model holds, and more".into(),
        );
    }
    Ok(())
}

impl CountSummary {
    /// The outcome record's fit part.
    pub(crate) fn into_fit_summary(self, seconds: f64) -> FitSummary {
        FitSummary {
            parameters: self.parameters,
            objective: self.objective,
            nll: self.nll,
            code: self.code,
            converged: self.converged,
            iterations: self.iterations,
            evaluations: self.evaluations,
            max_gradient: self.max_gradient,
            on_bound: self.on_bound,
            seconds,
        }
    }
}

impl ReplicatePlan for CountPlan {
    fn likelihood(&self) -> &'static str {
        "nb"
    }

    /// The names of the reported values (see [`CountLayout`]).
    fn parameter_names(&self) -> Vec<String> {
        CountLayout::new(self.model.design(), self.model.structure())
            .map(|layout| layout.names(self.model.design()))
            .unwrap_or_default()
    }

    fn parameter_roles(&self) -> Result<Vec<ParameterRole>, String> {
        let design = self.model.design();
        Ok(crate::design::ParameterLayout::new(design, self.model.structure())?.roles())
    }

    fn animal_groups(&self) -> Vec<usize> {
        super::redraw::animal_groups(&self.model)
    }

    fn run_replicate(
        &self,
        scheme: Resampling,
        seed: u64,
        replicate: usize,
    ) -> Result<FitSummary, String> {
        run_replicate(self, scheme, seed, replicate)
    }
}

/// Ψ of every (animal, context, species, treatment, bin) row — the animal's
/// warped curve — and of every (context, species, treatment, bin) — the
/// population curve (no warp). Species-major, then (animal,) context,
/// treatment, bin, as the table's keys.
pub(crate) struct Predictions {
    pub animal: Vec<f64>,
    pub population: Vec<f64>,
}

/// θ of the population curve of every (context, treatment) of species `s`
/// at a reported vector (see [`CountLayout`]), context-major: the fixed
/// effects give each treatment's values through W. A curve whose slopes or
/// points are NaN (not informed) is flat when its rates are all equal (its
/// transitions then get placeholder values that do not change it), and
/// `None` otherwise.
fn population_thetas(
    model: &CountModel,
    layout: &CountLayout,
    reported: &[f64],
    s: usize,
) -> Vec<Option<Vec<f64>>> {
    let design = model.design();
    let shape = model.table().shape();
    let axis = model.axis();
    let treatments = shape.treatments;
    let mut thetas: Vec<Option<Vec<f64>>> = Vec::with_capacity(shape.contexts * treatments);
    for c in 0..shape.contexts {
        let degree = model.structure().degree(c, s);
        for t in 0..treatments {
            let weights = design.weight_row(t);
            let value = |component: Component, k: usize| -> f64 {
                let mut total = 0.0;
                for (i, &w) in weights.iter().enumerate() {
                    if w != 0.0 {
                        let index = layout
                            .original
                            .beta_index(component, c, s, k, i)
                            .unwrap_or(usize::MAX);
                        total += w * reported.get(index).copied().unwrap_or(f64::NAN);
                    }
                }
                total
            };
            let mut values = CurveValues {
                rates: (0..=degree).map(|k| value(Component::Rate, k)).collect(),
                slopes: (0..degree).map(|k| value(Component::Slope, k)).collect(),
                points: (0..degree).map(|k| value(Component::Point, k)).collect(),
            };
            let flat = values
                .rates
                .iter()
                .all(|r| r.is_finite() && *r == values.rates[0]);
            let transitions_known = values
                .slopes
                .iter()
                .chain(&values.points)
                .all(|v| v.is_finite());
            thetas.push(
                if values.rates.iter().all(|r| r.is_finite()) && (transitions_known || flat) {
                    if !transitions_known {
                        values.slopes = vec![1.0; degree];
                        values.points = axis.even_points(degree);
                    }
                    Some(values.to_theta(axis, 1e-9))
                } else {
                    None
                },
            );
        }
    }
    thetas
}

/// The random effects (point, rate, slope) of animal `r` for species `s`;
/// 0 for those the layout does not have.
fn animal_effects(layout: &CountLayout, reported: &[f64], s: usize, r: usize) -> [f64; 3] {
    let mut u = [0.0; 3];
    for kind in WarpKind::ALL {
        if let Some(index) = layout.original.warp_index(kind, s, r) {
            u[super::fit::warp_slot(kind)] = reported[index];
        }
    }
    u
}

/// The layout of `model`'s reported vector, checked against `reported`.
fn checked_layout(model: &CountModel, reported: &[f64]) -> Result<CountLayout, String> {
    let layout = CountLayout::new(model.design(), model.structure())?;
    if reported.len() != layout.len() {
        return Err(format!(
            "expected {} parameters, got {}",
            layout.len(),
            reported.len()
        ));
    }
    Ok(layout)
}

/// Predictions at a reported vector (see [`CountLayout`]): the fixed
/// effects give each treatment's curve through W, the random effects warp
/// it. A curve whose slopes or points are NaN (not informed) is flat when
/// its rates are all equal, and NaN otherwise.
pub(crate) fn predictions_at(model: &CountModel, reported: &[f64]) -> Result<Predictions, String> {
    let layout = checked_layout(model, reported)?;
    let shape = model.table().shape();
    let axis = model.axis();
    let treatments = shape.treatments;
    let mut animal = Vec::with_capacity(shape.species * model.table().key_count());
    let mut population =
        Vec::with_capacity(shape.species * shape.contexts * treatments * shape.bins);
    for s in 0..shape.species {
        // Per (context, treatment): θ of the population curve, or None.
        let thetas = population_thetas(model, &layout, reported, s);
        let push_curve = |theta: &Option<Vec<f64>>,
                          degree: usize,
                          u: [f64; 3],
                          out: &mut Vec<f64>| match theta {
            Some(theta) if u.iter().all(|v| v.is_finite()) => {
                let mut curve = WarpedCurve::new(degree);
                curve.set(theta, u, axis);
                let mut bin = BinDerivatives::new(degree);
                for b in 1..=shape.bins {
                    out.push(bin.evaluate(curve.values(), b as f64));
                }
            }
            _ => out.extend(std::iter::repeat_n(f64::NAN, shape.bins)),
        };
        for r in 0..shape.ran_levels {
            let u = animal_effects(&layout, reported, s, r);
            for c in 0..shape.contexts {
                let degree = model.structure().degree(c, s);
                for t in 0..treatments {
                    push_curve(&thetas[c * treatments + t], degree, u, &mut animal);
                }
            }
        }
        for c in 0..shape.contexts {
            let degree = model.structure().degree(c, s);
            for t in 0..treatments {
                push_curve(
                    &thetas[c * treatments + t],
                    degree,
                    [0.0; 3],
                    &mut population,
                );
            }
        }
    }
    Ok(Predictions { animal, population })
}

/// A position on one curve, for [`curves_at`]: the curve of animal `ran`
/// (warped by its random effects) or, with `ran` None, the population curve
/// of (context, species, treatment); `x` is on the bin axis (bins are 1, 2,
/// …), fractional positions included.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct CurvePoint {
    pub ran: Option<usize>,
    pub context: usize,
    pub species: usize,
    pub treatment: usize,
    pub x: f64,
}

/// Checks that every point names a curve of `model` and lies within the
/// bins' span [0.5, bins + 0.5].
fn check_points(model: &CountModel, points: &[CurvePoint]) -> Result<(), String> {
    let shape = model.table().shape();
    let bins = shape.bins as f64;
    for (i, point) in points.iter().enumerate() {
        if point.ran.is_some_and(|r| r >= shape.ran_levels)
            || point.context >= shape.contexts
            || point.species >= shape.species
            || point.treatment >= shape.treatments
        {
            return Err(format!("curve point {} is outside the model", i + 1));
        }
        if !(point.x.is_finite() && point.x >= 0.5 && point.x <= bins + 0.5) {
            return Err(format!(
                "curve point {} is at {}, outside the bins' span [0.5, {}]",
                i + 1,
                point.x,
                bins + 0.5
            ));
        }
    }
    Ok(())
}

/// Ψ at each point for each reported vector of `samples` (one vector after
/// another), sample-major: the curves of [`predictions_at`] evaluated at any
/// position. NaN where a curve is not informed.
pub(crate) fn curves_at(
    model: &CountModel,
    samples: &[f64],
    points: &[CurvePoint],
) -> Result<Vec<f64>, String> {
    let layout = CountLayout::new(model.design(), model.structure())?;
    if layout.len() == 0 || samples.len() % layout.len() != 0 {
        return Err("samples must hold whole parameter vectors".into());
    }
    check_points(model, points)?;
    let shape = model.table().shape();
    let axis = model.axis();
    let mut out = Vec::with_capacity(points.len() * samples.len() / layout.len());
    for reported in samples.chunks(layout.len()) {
        let thetas: Vec<Vec<Option<Vec<f64>>>> = (0..shape.species)
            .map(|s| population_thetas(model, &layout, reported, s))
            .collect();
        for point in points {
            let (c, s) = (point.context, point.species);
            let degree = model.structure().degree(c, s);
            let u = point
                .ran
                .map_or([0.0; 3], |r| animal_effects(&layout, reported, s, r));
            out.push(match &thetas[s][c * shape.treatments + point.treatment] {
                Some(theta) if u.iter().all(|v| v.is_finite()) => {
                    let mut curve = WarpedCurve::new(degree);
                    curve.set(theta, u, axis);
                    BinDerivatives::new(degree).evaluate(curve.values(), point.x)
                }
                _ => f64::NAN,
            });
        }
    }
    Ok(out)
}

/// Ψ of the population curve at each point (its `ran` must be None) and the
/// gradient of Ψ in the reported vector, point-major (one full-length row
/// per point; NaN rows where the curve is not informed), for the delta
/// method. The population curve's values are W·β, so ∂Ψ/∂β of block k,
/// treatment column i is W[t, i] times ∂Ψ/∂v of that value.
pub(crate) fn population_gradients(
    model: &CountModel,
    reported: &[f64],
    points: &[CurvePoint],
) -> Result<(Vec<f64>, Vec<f64>), String> {
    let layout = checked_layout(model, reported)?;
    check_points(model, points)?;
    if points.iter().any(|p| p.ran.is_some()) {
        return Err("gradients are of population curves only".into());
    }
    let design = model.design();
    let shape = model.table().shape();
    let axis = model.axis();
    let n = layout.len();
    let thetas: Vec<Vec<Option<Vec<f64>>>> = (0..shape.species)
        .map(|s| population_thetas(model, &layout, reported, s))
        .collect();
    let mut values = Vec::with_capacity(points.len());
    let mut gradients = vec![0.0; points.len() * n];
    for (i, point) in points.iter().enumerate() {
        let (c, s, t) = (point.context, point.species, point.treatment);
        let row = &mut gradients[i * n..(i + 1) * n];
        let Some(theta) = &thetas[s][c * shape.treatments + t] else {
            values.push(f64::NAN);
            row.fill(f64::NAN);
            continue;
        };
        let degree = model.structure().degree(c, s);
        let mut curve = WarpedCurve::new(degree);
        curve.set(theta, [0.0; 3], axis);
        let mut bin = BinDerivatives::new(degree);
        values.push(bin.evaluate(curve.values(), point.x));
        // ∂Ψ/∂v, v = [rates, slopes, points].
        let components = (0..=degree)
            .map(|k| (Component::Rate, k, k))
            .chain((0..degree).map(|k| (Component::Slope, k, degree + 1 + k)))
            .chain((0..degree).map(|k| (Component::Point, k, 2 * degree + 1 + k)));
        for (component, k, v) in components {
            for (column, &w) in design.weight_row(t).iter().enumerate() {
                if w == 0.0 {
                    continue;
                }
                if let Some(index) = layout.original.beta_index(component, c, s, k, column) {
                    row[index] += w * bin.gradient[v];
                }
            }
        }
    }
    Ok((values, gradients))
}

#[cfg(test)]
mod tests {
    use super::super::start::detect_structure;
    use super::super::tests_support::{simulate, Simulation};
    use super::*;
    use crate::changepoint::DetectionSettings;

    fn plan(seed: u64) -> CountPlan {
        let (model, _) = simulate(&Simulation::default(), seed);
        let detected = detect_structure(&model, &DetectionSettings::default()).unwrap();
        let model = model.with_structure(detected.structure.clone()).unwrap();
        let settings = CountFitSettings::default();
        let estimate = fit_all(&model, Some(&detected), None, &settings).unwrap();
        CountPlan {
            model,
            detected,
            settings,
            estimate,
        }
    }

    #[test]
    fn a_replicate_depends_only_on_seed_and_number_and_differs_from_the_estimate() {
        let plan = plan(8);
        let full = summarise(&plan.model, &plan.estimate).unwrap();
        assert!(full.converged, "{full:?}");
        let a = run_replicate(&plan, Resampling::Cells, 42, 3).unwrap();
        let b = run_replicate(&plan, Resampling::Cells, 42, 3).unwrap();
        let c = run_replicate(&plan, Resampling::Cells, 42, 4).unwrap();
        // Bitwise the same fit (only the timing differs).
        assert_eq!(a.parameters, b.parameters);
        assert_eq!(
            (a.objective, a.nll, a.iterations),
            (b.objective, b.nll, b.iterations)
        );
        assert_ne!(a.parameters, c.parameters);
        assert_ne!(a.parameters, full.parameters);
        assert!(a.converged && c.converged);
        assert!(run_replicate(&plan, Resampling::Cells, 42, 0).is_err());
    }

    #[test]
    fn curves_at_whole_bins_are_the_predictions_and_fractional_bins_lie_between() {
        let plan = plan(6);
        let reported = reported_parameters(&plan.model, &plan.estimate.species).unwrap();
        let predicted = predictions_at(&plan.model, &reported).unwrap();
        let table = plan.model.table();
        let shape = table.shape();
        let (bins, treatments) = (shape.bins, shape.treatments);
        let mut points = Vec::new();
        let mut expected = Vec::new();
        for s in 0..shape.species {
            for c in 0..shape.contexts {
                for t in 0..treatments {
                    for b in [1, 2, bins] {
                        points.push(CurvePoint {
                            ran: None,
                            context: c,
                            species: s,
                            treatment: t,
                            x: b as f64,
                        });
                        expected.push(
                            predicted.population
                                [((s * shape.contexts + c) * treatments + t) * bins + b - 1],
                        );
                        let r = shape.ran_levels - 1;
                        points.push(CurvePoint {
                            ran: Some(r),
                            x: b as f64,
                            ..points[points.len() - 1]
                        });
                        expected.push(
                            predicted.animal
                                [s * table.key_count() + table.block_key(r, c, t) + b - 1],
                        );
                    }
                }
            }
        }
        let values = curves_at(&plan.model, &reported, &points).unwrap();
        assert_eq!(values.len(), expected.len());
        for (value, wanted) in values.iter().zip(&expected) {
            assert!(value.to_bits() == wanted.to_bits(), "{value} vs {wanted}");
        }
        // Two samples: one result per point and sample, sample-major.
        let twice = [reported.clone(), reported.clone()].concat();
        let both = curves_at(&plan.model, &twice, &points[..2]).unwrap();
        assert_eq!(both, [&values[..2], &values[..2]].concat());
        // Halfway between two bins, a monotone stretch stays between them.
        let half = CurvePoint {
            x: 1.5,
            ..points[0]
        };
        let middle = curves_at(&plan.model, &reported, &[half]).unwrap()[0];
        let (a, b) = (expected[0], expected[2]);
        assert!(middle >= a.min(b) - 1e-12 && middle <= a.max(b) + 1e-12);
        let outside = CurvePoint { x: 0.25, ..half };
        assert!(curves_at(&plan.model, &reported, &[outside]).is_err());
        let unknown = CurvePoint {
            ran: Some(shape.ran_levels),
            ..half
        };
        assert!(curves_at(&plan.model, &reported, &[unknown]).is_err());
    }

    #[test]
    fn population_gradients_match_finite_differences() {
        let plan = plan(6);
        let reported = reported_parameters(&plan.model, &plan.estimate.species).unwrap();
        let shape = plan.model.table().shape();
        let points: Vec<CurvePoint> = (0..shape.treatments)
            .flat_map(|t| {
                [1.0, 7.3, shape.bins as f64 * 0.55].map(|x| CurvePoint {
                    ran: None,
                    context: 0,
                    species: 0,
                    treatment: t,
                    x,
                })
            })
            .collect();
        let (values, gradients) = population_gradients(&plan.model, &reported, &points).unwrap();
        assert_eq!(values, curves_at(&plan.model, &reported, &points).unwrap());
        let n = reported.len();
        let layout = CountLayout::new(plan.model.design(), plan.model.structure()).unwrap();
        let roles = layout.roles();
        for (j, role) in roles.iter().enumerate() {
            let is_beta = matches!(
                role,
                CountRole::Original(crate::design::ParameterRole::Beta { species: 0, .. })
            );
            let step = 1e-6 * reported[j].abs().max(1.0);
            let mut up = reported.clone();
            let mut down = reported.clone();
            up[j] += step;
            down[j] -= step;
            let above = curves_at(&plan.model, &up, &points).unwrap();
            let below = curves_at(&plan.model, &down, &points).unwrap();
            for i in 0..points.len() {
                let numeric = (above[i] - below[i]) / (2.0 * step);
                let analytic = gradients[i * n + j];
                if is_beta {
                    assert!(
                        (analytic - numeric).abs() <= 1e-5 * numeric.abs().max(1.0),
                        "parameter {j}, point {i}: {analytic} vs {numeric}"
                    );
                } else {
                    assert_eq!(analytic, 0.0, "parameter {j} is not a fixed effect");
                }
            }
        }
        let animal = CurvePoint {
            ran: Some(0),
            ..points[0]
        };
        assert!(population_gradients(&plan.model, &reported, &[animal]).is_err());
    }

    #[test]
    fn population_predictions_have_no_warp_and_animal_ones_do() {
        let plan = plan(6);
        let reported = reported_parameters(&plan.model, &plan.estimate.species).unwrap();
        let predicted = predictions_at(&plan.model, &reported).unwrap();
        let shape = plan.model.table().shape();
        assert_eq!(
            predicted.animal.len(),
            shape.species * plan.model.table().key_count()
        );
        assert_eq!(
            predicted.population.len(),
            shape.species * shape.contexts * shape.treatments * shape.bins
        );
        assert_ne!(
            &predicted.animal[..shape.bins],
            &predicted.population[..shape.bins]
        );
    }
}
