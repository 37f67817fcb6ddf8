//! Gene-level likelihood-ratio tests of a fit's terms (model vignette
//! §15.4): the model refitted with a term's effects held at 0, every species
//! warm-started from the full fit. No term of the objective couples two
//! species, so one refit of the whole model gives every gene its reduced
//! fit, and 2 (ℓ_full − ℓ_reduced) of each species is that gene's statistic.

use super::fit::SpeciesFit;
use super::pipeline::{fit_one, CountEstimate, CountPlan};
use crate::engine::{self, Failure, PoolOptions};
use crate::error::Error;

/// The reduced fit of a term: the plan of the model with `held` (effects,
/// columns of W) held at 0 on top of what the full plan holds, and per
/// species its fit or why it failed. A species whose reduced fit failed
/// keeps the full fit in the plan (so that the plan stays whole) and is
/// reported as failed.
pub(crate) struct TermFit {
    pub plan: CountPlan,
    pub failures: Vec<Option<String>>,
}

/// Refits every species of `full` with the effects `held` held at 0, on the
/// engine's workers, each species started from its full fit.
pub(crate) fn fit_with_held(
    full: &CountPlan,
    held: &[usize],
    options: &PoolOptions,
    interrupted: impl FnMut() -> bool,
    progress: impl FnMut(usize, usize),
) -> Result<TermFit, Error> {
    if held.is_empty() {
        return Err(Error::input("a term to test holds at least one effect"));
    }
    let mut treatments = full.model.held_effects().to_vec();
    treatments.extend_from_slice(held);
    let model = full
        .model
        .clone()
        .with_held_effects(treatments)
        .map_err(Error::input)?;
    let species = model.table().shape().species;
    let outcomes = engine::map_tasks(
        species,
        options,
        |task| {
            fit_one(
                &model,
                task - 1,
                Some(&full.detected),
                Some(&full.estimate),
                &full.settings,
            )
        },
        interrupted,
        progress,
    )?;
    let mut fits: Vec<SpeciesFit> = Vec::with_capacity(species);
    let mut failures = Vec::with_capacity(species);
    for (s, outcome) in outcomes.into_iter().enumerate() {
        let own = &full.estimate.species[s];
        if own.has_failed() {
            // No full fit to compare with: the test fails with it.
            failures.push(Some(failed_full_fit(own)));
            fits.push(own.clone());
            continue;
        }
        match outcome {
            Ok(fit) => {
                failures.push(None);
                fits.push(fit);
            }
            Err(failure) => {
                failures.push(Some(match failure {
                    Failure::Task(message) => message,
                    other => other.to_string(),
                }));
                fits.push(full.estimate.species[s].clone());
            }
        }
    }
    Ok(TermFit {
        plan: CountPlan {
            model,
            detected: full.detected.clone(),
            settings: full.settings,
            estimate: CountEstimate { species: fits },
        },
        failures,
    })
}

/// Why a gene whose own fit failed has no reduced fit.
pub(crate) fn failed_full_fit(own: &SpeciesFit) -> String {
    format!("the gene's fit {}", own.stop.as_deref().unwrap_or("failed"))
}

#[cfg(test)]
mod tests {
    use super::super::tests_support::fitted_plan;
    use super::*;

    #[test]
    fn each_species_reduced_fit_is_its_own_fit_of_the_held_model() {
        let full = fitted_plan(8);
        let serial = PoolOptions::default();
        let term = fit_with_held(&full, &[1], &serial, || false, |_, _| {}).unwrap();
        assert!(term.failures.iter().all(Option::is_none));
        assert_eq!(term.plan.model.held_effects(), &[1]);
        let reduced_model = full.model.clone().with_held_effects(vec![1]).unwrap();
        for s in 0..full.estimate.species.len() {
            // One species refitted alone, from the same start, gives the same fit.
            let alone = fit_one(
                &reduced_model,
                s,
                Some(&full.detected),
                Some(&full.estimate),
                &full.settings,
            )
            .unwrap();
            assert_eq!(alone, term.plan.estimate.species[s]);
            assert!(alone.converged);
            // Its feasible set is smaller: its likelihood is no higher (but
            // for the priors, which the marginal likelihood leaves out).
            assert!(
                alone.negative_log_likelihood
                    >= full.estimate.species[s].negative_log_likelihood - 1e-3
            );
        }
        assert!(fit_with_held(&full, &[], &serial, || false, |_, _| {}).is_err());
        assert!(fit_with_held(&full, &[9], &serial, || false, |_, _| {}).is_err());
    }
}
