//! What the count model's statistics need from the core: the Wald
//! covariance, the nesting check and replicates of a likelihood-ratio test,
//! and the objective at a point (for tests of the optimum).

use super::nb::count_plan;
use super::{fit_pool_options, user_interrupt_pending, RResult, Relay};
use crate::bootstrap::Plan;
use crate::error::Error;
use crate::nb::covariance::covariance;
use crate::nb::objective::SpeciesProblem;
use crate::nb::panel::TermTask;
use crate::nb::pipeline::summarise;
use crate::nb::profile::{profile_effects, ProfileRequest};
use crate::nb::replicate;
use crate::nb::terms;
use crate::saved;
use extendr_api::prelude::*;

/// The Wald covariance of the reported fixed effects and dispersions, one
/// block per species: positions (from 1) in the reported vector, the block
/// and its within-animal share (`conditional`), both row-major; NULL for a
/// species whose Hessian is not positive definite.
/// @keywords internal
/// @noRd
#[extendr]
fn count_vcov_rust(plan: Raw) -> RResult<List> {
    let plan = count_plan(&plan)?;
    let blocks =
        covariance(&plan.model, &plan.estimate.species, &plan.settings).map_err(Error::input)?;
    Ok(List::from_values(blocks.into_iter().map(
        |block| match block {
            Some(b) => r!(list!(
            index = b.indices.iter().map(|&i| i as i32 + 1).collect::<Vec<i32>>(),
            matrix = b.matrix,
            conditional = b.conditional
        )),
            None => r!(NULL),
        },
    )))
}

/// Checks that `reduced` is `full` with more effects held at 0 (the same
/// data, design, structure and settings); an error says what differs.
/// @keywords internal
/// @noRd
#[extendr]
fn count_check_nested_rust(reduced: Raw, full: Raw) -> RResult<bool> {
    replicate::check_nested(&count_plan(&reduced)?, &count_plan(&full)?).map_err(Error::input)?;
    Ok(true)
}

/// Replicate `replicate` of the parametric bootstrap of the likelihood-ratio
/// test of `reduced` against `full`: per species −ℓ of the reduced fit, then
/// per species −ℓ of the full fit (2 S values).
/// @keywords internal
/// @noRd
#[extendr]
fn count_lr_replicate_rust(
    reduced: Raw,
    full: Raw,
    seed: f64,
    replicate: i32,
) -> RResult<Vec<f64>> {
    let replicate =
        usize::try_from(replicate).map_err(|_| Error::input("replicates are numbered from 1"))?;
    let (reduced, full) = (count_plan(&reduced)?, count_plan(&full)?);
    let (r, f) =
        replicate::likelihood_ratio_replicate(&reduced, &full, super::seed_value(seed)?, replicate)
            .map_err(Error::input)?;
    Ok(r.into_iter().chain(f).collect())
}

/// The reduced fit of a gene-level test: `plan` refitted with the effects
/// `effects` (names of W's columns) held at 0, species on `workers`
/// processes, each started from its full fit. Returns per species −ℓ of the
/// `reduced` and the `full` fit, whether the reduced fit `converged`,
/// `failure` ("" where it did not fail; a failed species keeps NA) and
/// `stop`; with `keep_plan` also the reduced `plan` and its reported
/// `parameters` (what a parametric bootstrap of the test draws from; NULL
/// otherwise, since a panel's plan holds its whole summed table).
/// `progress(done, total)` is told each species as it ends.
/// @keywords internal
/// @noRd
#[extendr]
fn count_term_fit_rust(
    plan: Raw,
    effects: Vec<String>,
    workers: i32,
    keep_plan: bool,
    progress: Robj,
) -> RResult<List> {
    let relay = Relay::new(progress);
    let result = term_fit(&relay, &plan, &effects, workers, keep_plan);
    relay.result(result)
}

fn term_fit(
    relay: &Relay,
    plan: &Raw,
    effects: &[String],
    workers: i32,
    keep_plan: bool,
) -> RResult<List> {
    let full = count_plan(plan)?;
    let held = full
        .model
        .design()
        .effects_named(effects)
        .map_err(Error::input)?;
    let options = fit_pool_options(workers)?;
    let interrupted = || relay.jumped() || user_interrupt_pending();
    let term = terms::fit_with_held(&full, &held, &options, interrupted, |done, total| {
        relay.call(pairlist!(done as f64, total as f64))
    })?;
    let failed = |s: usize| term.failures[s].is_some();
    let reduced_nll: Vec<f64> = term
        .plan
        .estimate
        .species
        .iter()
        .enumerate()
        .map(|(s, f)| {
            if failed(s) {
                f64::NAN
            } else {
                f.negative_log_likelihood
            }
        })
        .collect();
    let full_nll: Vec<f64> = full
        .estimate
        .species
        .iter()
        .map(|f| f.negative_log_likelihood)
        .collect();
    let converged: Vec<bool> = term
        .plan
        .estimate
        .species
        .iter()
        .enumerate()
        .map(|(s, f)| !failed(s) && f.converged)
        .collect();
    let failure: Vec<String> = term
        .failures
        .iter()
        .map(|f| f.clone().unwrap_or_default())
        .collect();
    let stop: Vec<String> = term
        .plan
        .estimate
        .species
        .iter()
        .map(|f| f.stop.clone().unwrap_or_default())
        .collect();
    let (reduced_plan, parameters) = if keep_plan {
        let summary = summarise(&term.plan.model, &term.plan.estimate).map_err(Error::input)?;
        (
            Raw::from_bytes(&saved::encode_plan(&Plan::Count(term.plan))?).into(),
            r!(summary.parameters),
        )
    } else {
        (Robj::from(()), Robj::from(()))
    };
    Ok(list!(
        plan = reduced_plan,
        parameters = parameters,
        reduced = reduced_nll,
        full = full_nll,
        converged = converged,
        failure = failure,
        stop = stop
    ))
}

/// The reduced fits of species `species` (0-based indices) of the fit
/// `plan` as a task of their own (raw, checksummed): what one future of
/// `wisp_gene_tests(backend = "future")` receives.
/// @keywords internal
/// @noRd
#[extendr]
fn count_term_subtask_rust(plan: Raw, species: Vec<i32>) -> RResult<Raw> {
    let full = count_plan(&plan)?;
    let indices = super::nb::species_indices(&species, full.model.design().species().len())?;
    let task = TermTask::from_plan(&full, &indices).map_err(Error::input)?;
    Ok(Raw::from_bytes(&task.encode()?))
}

/// For each term (`effects`: a list of vectors of names of W's columns),
/// the reduced fits of every species of a term task, in this process: a list
/// per term of, per species, −ℓ of the `reduced` and the `full` fit,
/// whether the reduced fit `converged`, `failure` ("" where it did not fail)
/// and `stop`, as `count_term_fit_rust` reports them.
/// @keywords internal
/// @noRd
#[extendr]
fn count_term_species_rust(task: Raw, effects: List) -> RResult<List> {
    let task = TermTask::decode(task.as_slice())?;
    let terms = effects
        .values()
        .map(|names| {
            let names: Vec<String> = names
                .as_str_vector()
                .ok_or_else(|| Error::input("effects must be a list of character vectors"))?
                .into_iter()
                .map(str::to_string)
                .collect();
            task.model()
                .design()
                .effects_named(&names)
                .map_err(Error::input)
        })
        .collect::<RResult<Vec<_>>>()?;
    let fits = task.fit_terms(&terms).map_err(Error::input)?;
    Ok(List::from_values(fits.iter().map(|per_species| {
        list!(
            reduced = per_species
                .iter()
                .map(|f| f.negative_log_likelihood)
                .collect::<Vec<_>>(),
            full = per_species
                .iter()
                .map(|f| f.full_negative_log_likelihood)
                .collect::<Vec<_>>(),
            converged = per_species.iter().map(|f| f.converged).collect::<Vec<_>>(),
            failure = per_species
                .iter()
                .map(|f| f.failure.clone())
                .collect::<Vec<_>>(),
            stop = per_species
                .iter()
                .map(|f| f.stop.clone())
                .collect::<Vec<_>>()
        )
    })))
}

/// One species' objective J (at the fitted standard deviations) and its
/// gradient at `x` in the optimiser's coordinates (NULL: the estimate),
/// with the coordinates' names (for tests of the optimum).
/// @keywords internal
/// @noRd
#[extendr]
fn count_objective_rust(plan: Raw, species: i32, x: Nullable<Vec<f64>>) -> RResult<List> {
    let plan = count_plan(&plan)?;
    let s = super::index_option(species, "species")?;
    let fit = plan
        .estimate
        .species
        .get(s)
        .ok_or_else(|| Error::input(format!("there is no species {s}")))?;
    let problem = SpeciesProblem::new(&plan.model, s, fit.sigma.map(|v| v > 0.0))
        .with_settings(&plan.settings);
    let layout = &problem.layout;
    let mut state = fit.state.clone();
    let x = match x {
        Nullable::NotNull(x) => {
            if x.len() != layout.len {
                return Err(Error::input(format!("x needs {} values", layout.len)));
            }
            state.set_vector(layout, &x);
            x
        }
        Nullable::Null => state.to_vector(layout),
    };
    let mut gradient = vec![0.0; layout.len];
    let mut hessian = problem.hessian_shape();
    let value = problem.evaluate(&state, fit.sigma, &mut gradient, &mut hessian);
    let mut names = vec![String::new(); layout.len];
    for (curve, offset) in layout.curve_offsets.iter().enumerate() {
        if let Some(offset) = offset {
            for i in 0..state.theta[curve].len() {
                names[offset + i] = format!("theta[{curve},{i}]");
            }
        }
    }
    for (c, index) in layout.rho_index.iter().enumerate() {
        if let Some(i) = index {
            names[*i] = format!("rho[{c}]");
        }
    }
    for (r, indices) in layout.u_index.iter().enumerate() {
        for (w, index) in indices.iter().enumerate() {
            if let Some(i) = index {
                names[*i] = format!("u[{r},{}]", ["point", "rate", "slope"][w]);
            }
        }
    }
    Ok(list!(
        x = x,
        names = names,
        value = value,
        gradient = gradient
    ))
}

/// Checks effects `index` (positions from 1 in the reported vector) of the
/// fit `plan` against their Wald standard errors `se` and quantiles
/// `quantile` by held fits at 0 and at the Wald interval's ends, and
/// profiles those whose signed root deviances differ from the quadratic's
/// by more than `tolerance` (`nb::profile`); species on `workers` processes.
/// Returns per effect `estimate`, the deviances `deviance_zero`,
/// `deviance_lower`, `deviance_upper`, `flagged`, the profile interval
/// `lower`, `upper` with `lower_open`, `upper_open`, the held `fits` and a
/// `note`.
/// @keywords internal
/// @noRd
#[extendr]
fn count_profile_rust(
    plan: Raw,
    index: Vec<i32>,
    se: Vec<f64>,
    quantile: Vec<f64>,
    tolerance: f64,
    workers: i32,
    progress: Robj,
) -> RResult<List> {
    let relay = Relay::new(progress);
    let result = profile(&relay, &plan, &index, &se, &quantile, tolerance, workers);
    relay.result(result)
}

fn profile(
    relay: &Relay,
    plan: &Raw,
    index: &[i32],
    se: &[f64],
    quantile: &[f64],
    tolerance: f64,
    workers: i32,
) -> RResult<List> {
    if se.len() != index.len() || quantile.len() != index.len() {
        return Err(Error::input(
            "index, se and quantile must have one value per effect",
        ));
    }
    if !(tolerance.is_finite() && tolerance > 0.0) {
        return Err(Error::input(
            "the profile tolerance must be a positive number",
        ));
    }
    let plan = count_plan(plan)?;
    let requests = index
        .iter()
        .zip(se.iter().zip(quantile))
        .map(|(&i, (&standard_error, &quantile))| {
            let index = usize::try_from(i - 1)
                .map_err(|_| Error::input("effect positions are numbered from 1"))?;
            Ok(ProfileRequest {
                index,
                standard_error,
                quantile,
            })
        })
        .collect::<RResult<Vec<_>>>()?;
    let options = fit_pool_options(workers)?;
    let interrupted = || relay.jumped() || user_interrupt_pending();
    let profiles = profile_effects(
        &plan,
        &requests,
        tolerance,
        &options,
        interrupted,
        |done, total| relay.call(pairlist!(done as f64, total as f64)),
    )?;
    let column = |f: fn(&crate::nb::profile::EffectProfile) -> f64| -> Vec<f64> {
        profiles.iter().map(f).collect()
    };
    Ok(list!(
        index = profiles
            .iter()
            .map(|p| p.index as i32 + 1)
            .collect::<Vec<i32>>(),
        estimate = column(|p| p.estimate),
        deviance_zero = column(|p| p.deviance_zero),
        deviance_lower = column(|p| p.deviance_lower),
        deviance_upper = column(|p| p.deviance_upper),
        flagged = profiles.iter().map(|p| p.flagged).collect::<Vec<bool>>(),
        lower = column(|p| p.lower),
        upper = column(|p| p.upper),
        lower_open = profiles.iter().map(|p| p.lower_open).collect::<Vec<bool>>(),
        upper_open = profiles.iter().map(|p| p.upper_open).collect::<Vec<bool>>(),
        fits = profiles.iter().map(|p| p.fits as i32).collect::<Vec<i32>>(),
        note = profiles
            .iter()
            .map(|p| p.note.clone())
            .collect::<Vec<String>>()
    ))
}

extendr_module! {
    mod nb_inference;
    fn count_vcov_rust;
    fn count_check_nested_rust;
    fn count_lr_replicate_rust;
    fn count_term_fit_rust;
    fn count_term_subtask_rust;
    fn count_term_species_rust;
    fn count_profile_rust;
    fn count_objective_rust;
}
