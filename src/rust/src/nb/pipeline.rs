//! From data with a known structure to a reported count fit (model vignette
//! §13.2): every species fitted (on the engine's workers when there are
//! several), the estimate summarised, and the plan a fit keeps.
//! How the structure is found is [`super::degrees`]; replicates are
//! [`super::replicate`]; curves of a fit are [`super::predict`].

use super::fit::{fit_species, SpeciesFit};
use super::layout::{CountLayout, CountRole};
use super::report::reported_parameters;
use super::settings::CountFitSettings;
use super::CountModel;
use crate::changepoint::DetectedChangePoints;
use crate::engine::{self, Failure, PoolOptions};
use crate::error::Error;
use crate::outcome::{FitSummary, Outcome, ProcessStats, Termination};
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
    detected: Option<&DetectedChangePoints>,
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
    detected: Option<&DetectedChangePoints>,
    start: Option<&CountEstimate>,
    settings: &CountFitSettings,
) -> Result<SpeciesFit, String> {
    let start_fit = start.and_then(|e| e.species.get(species));
    // A species whose full fit failed has nothing to start from: it stays
    // failed (in replicates and reduced fits alike).
    if let Some(failed) = start_fit.filter(|f| f.has_failed()) {
        return Ok(failed.clone());
    }
    let warm = start_fit.map(|f| (&f.state, f.sigma));
    fit_species(model, species, detected, warm, settings)
}

/// A count fit's code: its worst species' [`Termination`], and for
/// failures every failed species with its reason ("failed: gene2: killed by
/// signal 9 (SIGKILL); gene5: no step lowered the objective").
fn fit_code(fits: &[SpeciesFit], species_names: &[String]) -> String {
    let worst = fits
        .iter()
        .map(SpeciesFit::termination)
        .max()
        .unwrap_or(Termination::Converged);
    match worst {
        Termination::Failed(_) => {
            let reasons: Vec<String> = fits
                .iter()
                .filter_map(|f| match f.termination() {
                    Termination::Failed(reason) => {
                        Some(format!("{}: {reason}", species_names[f.species]))
                    }
                    _ => None,
                })
                .collect();
            Termination::Failed(reasons.join("; ")).to_string()
        }
        other => other.to_string(),
    }
}

/// The reported vector and diagnostics of an estimate.
pub(crate) fn summarise(
    model: &CountModel,
    estimate: &CountEstimate,
) -> Result<CountSummary, String> {
    let parameters = reported_parameters(model, &estimate.species)?;
    let layout = CountLayout::new(model.design(), model.structure())?;
    let fits = &estimate.species;
    // A species whose fit failed is carried, not fitted (in replicates and
    // reduced fits too): the others decide whether the fit converged. The
    // code is the worst species' termination; a failure names its genes.
    let converged = fits.iter().filter(|f| !f.has_failed()).all(|f| f.converged);
    let code = fit_code(fits, model.design().species());
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
                .is_some_and(|f| {
                    f.sigma[super::report::warp_slot(*kind)] > 0.0 || value.is_finite()
                }),
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
    pub detected: DetectedChangePoints,
    pub settings: CountFitSettings,
    /// The full-data estimate every replicate starts from.
    pub estimate: CountEstimate,
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
    detected: &DetectedChangePoints,
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
    // A panel does not stop for one species: its failure (an error, or its
    // worker's crash) is kept as its fit, with the reason.
    .map(|(outcome, &s)| match outcome {
        Ok(fit) => fit,
        Err(Failure::Task(message)) => SpeciesFit::failed(model, s, &message),
        Err(failure) => SpeciesFit::failed(model, s, &failure.to_string()),
    })
    .collect::<Vec<_>>()
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

/// The full-data fit: structure, fit, and the plan that keeps them. Its
/// seconds count from `started`, when the structure step began: a species
/// fitted by the structure choice (`fitted`) is not fitted again, so its fit
/// took place then.
#[allow(clippy::too_many_arguments)]
pub(crate) fn fit_count(
    started: std::time::Instant,
    base: &CountModel,
    detected: DetectedChangePoints,
    fitted: &[Option<SpeciesFit>],
    settings: &CountFitSettings,
    options: &PoolOptions,
    interrupted: impl FnMut() -> bool,
    progress: impl FnMut(usize, usize),
) -> Result<(CountPlan, Outcome), Error> {
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

#[cfg(test)]
mod tests {
    use super::super::fit::SpeciesFit;
    use super::super::tests_support::fitted_plan;
    use super::*;

    #[test]
    fn the_fit_code_is_the_worst_species_termination() {
        let plan = fitted_plan(8);
        let names = plan.model.design().species().to_vec();
        let mut fits = plan.estimate.species.clone();
        assert_eq!(fit_code(&fits, &names), "converged");
        let stopped = |fit: &mut SpeciesFit, note: &str| {
            fit.converged = false;
            fit.stop = Some(note.to_string());
        };
        stopped(&mut fits[0], "variance update limit: 200 variance updates");
        assert_eq!(fit_code(&fits, &names), "variance update limit");
        stopped(&mut fits[1], "iteration limit: 200 Newton iterations");
        assert_eq!(fit_code(&fits, &names), "iteration limit");
        // A Newton fit that could not go on keeps its estimates: it is not
        // a failed species, but it makes the fit's code a failure.
        stopped(&mut fits[0], "failed: no step lowered the objective");
        assert!(!fits[0].has_failed());
        assert_eq!(
            fit_code(&fits, &names),
            format!("failed: {}: no step lowered the objective", names[0])
        );
        let summary = summarise(&plan.model, &CountEstimate { species: fits }).unwrap();
        assert!(!summary.converged);
    }

    #[test]
    fn a_failed_species_is_carried_without_estimates_and_the_others_decide() {
        let plan = fitted_plan(8);
        let mut estimate = plan.estimate.clone();
        let failed = SpeciesFit::failed(&plan.model, 1, "killed by signal 9 (SIGKILL)");
        assert!(failed.has_failed() && !estimate.species[0].has_failed());
        estimate.species[1] = failed.clone();
        let summary = summarise(&plan.model, &estimate).unwrap();
        let whole = summarise(&plan.model, &plan.estimate).unwrap();
        assert!(summary.converged);
        assert_eq!(
            summary.code,
            format!(
                "failed: {}: killed by signal 9 (SIGKILL)",
                plan.model.design().species()[1]
            )
        );
        // Species 1's reported values are all NaN; species 0's are unchanged.
        let layout = CountLayout::new(plan.model.design(), plan.model.structure()).unwrap();
        for (i, role) in layout.roles().iter().enumerate() {
            let species = match role {
                CountRole::Original(crate::design::ParameterRole::Beta { species, .. }) => *species,
                CountRole::Original(crate::design::ParameterRole::Warp { species, .. }) => *species,
                CountRole::Deviation { species, .. } | CountRole::Dispersion { species, .. } => {
                    *species
                }
            };
            if species == 1 {
                assert!(summary.parameters[i].is_nan(), "parameter {i}");
            } else {
                assert_eq!(
                    summary.parameters[i].to_bits(),
                    whole.parameters[i].to_bits()
                );
            }
        }
        assert!(summary.degrees_of_freedom < whole.degrees_of_freedom);
        // Started from it (a replicate, a reduced fit), it stays failed.
        let again = fit_one(
            &plan.model,
            1,
            Some(&plan.detected),
            Some(&estimate),
            &plan.settings,
        )
        .unwrap();
        // (Debug output: its scaled gradient is NaN, which == refuses.)
        assert_eq!(format!("{again:?}"), format!("{failed:?}"));
    }
}
