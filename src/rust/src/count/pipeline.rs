//! From data to a reported count fit, and one bootstrap replicate of it
//! (model vignette, "Fitting the count model" and "The bootstrap").

use super::curve::{Axis, BinDerivatives, WarpedCurve};
use super::family::rate;
use super::fit::{fit_species, reported_parameters, CountFitSettings, SpeciesFit};
use super::layout::{CountLayout, CountRole};
use super::resample::{redraw, Resampling};
use super::CountModel;
use crate::streams::TaskStream;
use crate::structure::DetectedStructure;
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
            CountRole::Original(crate::model::ParameterRole::Beta { .. }) => value.is_finite(),
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

/// Random stream of replicate r's redraws (replicates count from 1).
pub(crate) fn resampling_stream(replicate: usize) -> u64 {
    2 * replicate as u64
}

/// Replicate `replicate` of the bootstrap seeded with `seed`: the data
/// redrawn by `scheme`, the structure kept, the fit started from the
/// full-data estimate.
pub(crate) fn run_replicate(
    plan: &CountPlan,
    scheme: Resampling,
    seed: u64,
    replicate: usize,
) -> Result<CountSummary, String> {
    if replicate == 0 {
        return Err("replicates are numbered from 1".into());
    }
    let mut model = plan.model.clone();
    let mut stream = TaskStream::new(seed, resampling_stream(replicate));
    redraw(&mut model, &plan.estimate, scheme, &mut stream);
    let estimate = fit_all(
        &model,
        Some(&plan.detected),
        Some(&plan.estimate),
        &plan.settings,
    )?;
    summarise(&model, &estimate)
}

/// Ψ of every (animal, context, species, treatment, bin) row — the animal's
/// warped curve — and of every (context, species, treatment, bin) — the
/// population curve (no warp). Species-major, then (animal,) context,
/// treatment, bin, as the table's keys.
pub(crate) struct Predictions {
    pub animal: Vec<f64>,
    pub population: Vec<f64>,
}

pub(crate) fn predictions(model: &CountModel, estimate: &CountEstimate) -> Predictions {
    let shape = model.table().shape();
    let axis = Axis::for_bins(shape.bins);
    let mut animal = Vec::with_capacity(shape.species * model.table().key_count());
    let mut population =
        Vec::with_capacity(shape.species * shape.contexts * shape.treatments * shape.bins);
    for fit in &estimate.species {
        let s = fit.species;
        let curve_values = |r: Option<usize>, c: usize, t: usize, out: &mut Vec<f64>| {
            let degree = model.structure().degree(c, s);
            let mut curve = WarpedCurve::new(degree);
            let u = r.map_or([0.0; 3], |r| fit.state.u[r]);
            curve.set(&fit.state.theta[c * shape.treatments + t], u, axis);
            let mut bin = BinDerivatives::new(degree);
            for b in 1..=shape.bins {
                out.push(bin.evaluate(curve.values(), b as f64));
            }
        };
        for r in 0..shape.ran_levels {
            for c in 0..shape.contexts {
                for t in 0..shape.treatments {
                    curve_values(Some(r), c, t, &mut animal);
                }
            }
        }
        for c in 0..shape.contexts {
            for t in 0..shape.treatments {
                curve_values(None, c, t, &mut population);
            }
        }
    }
    Predictions { animal, population }
}

/// The rate per unit of exposure at a curve value.
pub(crate) fn rate_of(psi: f64) -> f64 {
    rate(psi).value
}

#[cfg(test)]
mod tests {
    use super::super::start::detect_structure;
    use super::super::tests_support::{simulate, Simulation};
    use super::*;
    use crate::structure::DetectionSettings;

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
        assert_eq!(a, b);
        assert_ne!(a.parameters, c.parameters);
        assert_ne!(a.parameters, full.parameters);
        assert!(a.converged && c.converged);
        assert!(run_replicate(&plan, Resampling::Cells, 42, 0).is_err());
    }

    #[test]
    fn population_predictions_have_no_warp_and_animal_ones_do() {
        let plan = plan(6);
        let predicted = predictions(&plan.model, &plan.estimate);
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
