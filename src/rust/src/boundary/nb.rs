//! R entry points for the count likelihood (`likelihood = "nb"`): the fit
//! from token columns, the description of a fitted plan, predictions and
//! bands, the Wald covariance, and the objective (for tests).

use super::convert::{
    bins_option, design_from_r, number, numbers, optional_number, strings, text, tokens_from_r,
    whole_setting,
};
use super::{
    fit_pool_options, index_column, outcome_columns, user_interrupt_pending, RResult, Relay,
};
use crate::bootstrap::Plan;
use crate::changepoint::grid::{best_point, GridCost, GridPoint, StructureMethod};
use crate::changepoint::DetectionMethod;
use crate::changepoint::DetectionSettings;
use crate::error::Error;
use crate::nb::build::{build_count_model, PerToken};
use crate::nb::panel::{self, SpeciesRecord, SpeciesTask, SpeciesWork};
use crate::nb::pipeline::CountPlan;
use crate::nb::select::CurveSelection;
use crate::nb::settings::CountFitSettings;
use crate::nb::table::Exposure;
use crate::nb::{degrees, pipeline};
use crate::saved;
use extendr_api::prelude::*;

fn exposure_of(name: &str) -> RResult<Option<Exposure>> {
    match name {
        "auto" => Ok(None),
        "cells" => Ok(Some(Exposure::Cells)),
        "tokens" => Ok(Some(Exposure::Tokens)),
        "none" => Ok(Some(Exposure::Unit)),
        "given" => Ok(Some(Exposure::Given)),
        other => Err(Error::input(format!(
            "exposure must be \"auto\", \"cells\", \"tokens\", \"given\" or \"none\", not \"{other}\""
        ))),
    }
}

fn fit_settings(settings: &List) -> RResult<CountFitSettings> {
    let fixed = numbers(settings, "fixed_sd")?;
    let mut fit = CountFitSettings {
        fixed_sigma: match fixed.len() {
            0 => None,
            3 => Some([fixed[0], fixed[1], fixed[2]]),
            n => {
                return Err(Error::input(format!(
                    "fixed_sd needs 3 values (point, rate, slope), not {n}"
                )))
            }
        },
        rise_threshold_factor: number(settings, "rise_threshold_factor")?,
        slope_prior_sd: number(settings, "slope_prior_sd")?,
        step_prior_sd: number(settings, "step_prior_sd")?,
        effect_prior_sd: number(settings, "effect_prior_sd")?,
        fixed_dispersion: match numbers(settings, "fixed_dispersion")?.as_slice() {
            [] => None,
            [phi] => Some(*phi),
            more => {
                return Err(Error::input(format!(
                    "fixed_dispersion needs 1 value, not {}",
                    more.len()
                )))
            }
        },
        ..CountFitSettings::default()
    };
    // The Newton fit's limits (wisp_control()); an absent entry keeps the default.
    if let Some(value) = optional_number(settings, "newton_max_iterations")? {
        fit.newton.max_iterations = whole_setting("newton_max_iterations", value)?;
    }
    if let Some(value) = optional_number(settings, "newton_gradient_tolerance")? {
        fit.newton.gradient_tolerance = value;
    }
    if let Some(value) = optional_number(settings, "newton_decrement_tolerance")? {
        fit.newton.decrement_tolerance = value;
    }
    if let Some(value) = optional_number(settings, "max_variance_updates")? {
        fit.max_variance_updates = whole_setting("max_variance_updates", value)?;
    }
    if let Some(value) = optional_number(settings, "variance_tolerance")? {
        fit.variance_tolerance = value;
    }
    if let Some((_, value)) = settings.iter().find(|(key, _)| *key == "trace") {
        fit.newton.trace = value
            .as_bool()
            .ok_or_else(|| Error::input("setting `trace` must be TRUE or FALSE"))?;
    }
    fit.validate().map_err(Error::input)?;
    Ok(fit)
}

fn detection_settings(settings: &List, window: f64, cutoff: f64) -> RResult<DetectionSettings> {
    let method = text(settings, "method")?;
    let detection = DetectionSettings {
        buffer_factor: number(settings, "buffer_factor")?,
        lro_cutoff: cutoff,
        lro_window_factor: window,
        method: DetectionMethod::from_name(&method)
            .ok_or_else(|| Error::input(format!("unknown LRO_method \"{method}\"")))?,
    };
    detection.validate().map_err(Error::input)?;
    Ok(detection)
}

/// The grid search's table, one row per grid point (both likelihoods).
pub(super) fn grid_columns(points: &[GridPoint], observations: usize) -> List {
    let column = |f: &dyn Fn(&GridPoint) -> f64| points.iter().map(f).collect::<Vec<_>>();
    list!(
        LROwindow_factor = column(&|p| p.window_factor),
        LROcutoff = column(&|p| p.cutoff),
        neg_loglik = column(&|p| p.nll()),
        penalized_neg_loglik = column(&|p| p.fit.as_ref().map_or(f64::NAN, |f| f.objective)),
        code = points
            .iter()
            .map(|p| match &p.fit {
                Ok(fit) => fit.code.clone(),
                Err(reason) => reason.clone(),
            })
            .collect::<Vec<_>>(),
        converged = points
            .iter()
            .map(|p| p.fit.as_ref().is_ok_and(|f| f.converged))
            .collect::<Vec<_>>(),
        n_params = points
            .iter()
            .map(|p| p.parameter_count() as i32)
            .collect::<Vec<_>>(),
        AIC = column(&|p| p.aic()),
        BIC = column(&|p| p.bic(observations)),
        structure = points
            .iter()
            .map(|p| p.structure as i32 + 1)
            .collect::<Vec<_>>()
    )
}

/// Fit the count model to coded token columns. `factor_codes` holds one
/// column per factor, column-major; `cell` a cell id per token (coded from 0)
/// or nothing; `exposure` an exposure per token (a binned table's) or
/// nothing; `settings` a named list: `exposure`, `degrees` (one per
/// (context, species), context-major, or NULL to detect), `lro_cost`
/// ("none", "AIC", "BIC", "NLL"), `structure` ("likelihood": each curve's
/// degree chosen by the count likelihood, model vignette §12.6; "lro": the
/// change-point detector, with the grid search unless `lro_cost` is "none"),
/// `window`, `cutoff`, `method`,
/// `buffer_factor`, `rise_threshold_factor`, `slope_prior_sd`, `step_prior_sd`,
/// `effect_prior_sd`, `fixed_sd`
/// (NULL or point, rate, slope), `fixed_dispersion` (NULL or φ, 0: Poisson), `workers`. `progress(stage, done, total)`
/// (an R function, or NULL) is told, through a [`Relay`], the number of
/// curves of the structure selection (stages "structure" and "reselect",
/// with "warps", the species of the pooled fit between them), of distinct
/// structures of the grid search (stage "grid") and of species (stage
/// "fit") before the first fit of each stage (done = 0), and each fit as it
/// ends; a jump out of it stops the fit and is handed back to R.
/// @keywords internal
/// @noRd
#[extendr]
#[allow(clippy::too_many_arguments)]
fn count_fit_rust(
    count: Vec<f64>,
    bin: Vec<i32>,
    context: Vec<i32>,
    species: Vec<i32>,
    ran: Vec<i32>,
    factor_codes: Vec<i32>,
    cell: Vec<i32>,
    exposure: Vec<f64>,
    context_levels: Vec<String>,
    species_levels: Vec<String>,
    ran_levels: Vec<String>,
    factor_names: Vec<String>,
    factor_levels: List,
    time_series: i32,
    bins: i32,
    settings: List,
    progress: Robj,
) -> RResult<List> {
    let relay = Relay::new(progress);
    let result = count_fit(
        &relay,
        (
            count,
            bin,
            context,
            species,
            ran,
            factor_codes,
            cell,
            exposure,
        ),
        (
            context_levels,
            species_levels,
            ran_levels,
            factor_names,
            factor_levels,
        ),
        time_series,
        bins,
        settings,
    );
    relay.result(result)
}

/// Token columns of [`count_fit_rust`]: count, bin, context, species, ran,
/// factor codes, cell, exposure.
type TokenArguments = (
    Vec<f64>,
    Vec<i32>,
    Vec<i32>,
    Vec<i32>,
    Vec<i32>,
    Vec<i32>,
    Vec<i32>,
    Vec<f64>,
);

/// Labels of [`count_fit_rust`]: contexts, species, random levels, factor
/// names, factor levels.
type LabelArguments = (Vec<String>, Vec<String>, Vec<String>, Vec<String>, List);

/// The model a count fit starts from (before any structure is chosen), and
/// the exposure it uses.
fn base_model(
    (count, bin, context, species, ran, factor_codes, cell, exposures): TokenArguments,
    (context_levels, species_levels, ran_levels, factor_names, factor_levels): LabelArguments,
    time_series: i32,
    bins: i32,
    settings: &List,
) -> RResult<(crate::nb::CountModel, crate::nb::table::ExposureChoice)> {
    let tokens = tokens_from_r(
        count,
        bin,
        context,
        species,
        ran,
        factor_codes,
        factor_names.len(),
    )?;
    let cells = index_column(cell, "cell")?;
    let design = design_from_r(
        context_levels,
        species_levels,
        ran_levels,
        &factor_names,
        factor_levels,
        time_series,
    )?;
    let curves = design.contexts().len() * design.species().len();
    let bins = bins_option(bins)?;
    let (base, exposure) = build_count_model(
        design,
        bins,
        vec![0; curves],
        exposure_of(&text(settings, "exposure")?)?,
        crate::nb::point_gap_of(bins, number(settings, "buffer_factor")?),
        &tokens,
        PerToken {
            cells: &cells,
            exposures: &exposures,
        },
    )
    .map_err(Error::input)?;
    let held = base
        .design()
        .effects_named(&strings(settings, "held_effects")?)
        .map_err(Error::input)?;
    let base = base.with_held_effects(held).map_err(Error::input)?;
    Ok((base, exposure))
}

fn count_fit(
    relay: &Relay,
    tokens: TokenArguments,
    labels: LabelArguments,
    time_series: i32,
    bins: i32,
    settings: List,
) -> RResult<List> {
    let interrupted = || relay.jumped() || user_interrupt_pending();
    let (base, exposure) = base_model(tokens, labels, time_series, bins, &settings)?;
    let curves = base.design().contexts().len() * base.design().species().len();
    let fit = fit_settings(&settings)?;
    let workers = number(&settings, "workers")?;
    let options = fit_pool_options(workers as i32)?;
    let cost = GridCost::from_name(&text(&settings, "lro_cost")?).map_err(Error::input)?;
    let method =
        StructureMethod::resolve(&text(&settings, "structure")?, "nb").map_err(Error::input)?;
    let (mut window, mut cutoff) = (number(&settings, "window")?, number(&settings, "cutoff")?);
    let fixed = fixed_degrees(&numbers(&settings, "degrees")?, curves)?;
    let structure_started = std::time::Instant::now();
    let works = species_works(&settings)?;
    let (detected, grid, selection, fitted) = if let Some(works) = works {
        // Every species was fitted on its own (a checkpoint or a future
        // plan; `count_species_fit_rust`): put the fits together.
        if method != StructureMethod::Likelihood {
            return Err(Error::input(
                "species fitted on their own need structure = \"likelihood\"",
            ));
        }
        let choice = panel::assemble(&base, works).map_err(Error::input)?;
        let columns = selection_columns(&base, &choice.selections);
        (choice.detected, None, Some(columns), choice.fitted)
    } else if method == StructureMethod::Likelihood {
        let choice = degrees::select_structure(
            &base,
            &fixed,
            &fit,
            &options,
            interrupted,
            |stage, done, total| relay.call(pairlist!(stage, done as f64, total as f64)),
        )?;
        let columns = selection_columns(&base, &choice.selections);
        (choice.detected, None, Some(columns), choice.fitted)
    } else {
        let mut grid = None;
        if let (true, Some(cost)) = (fixed.is_empty(), cost) {
            let template = detection_settings(&settings, 1.0, 1.0)?;
            let points = degrees::grid_search(
                &base,
                &template,
                &fit,
                &options,
                interrupted,
                |done, total| relay.call(pairlist!("grid", done as f64, total as f64)),
            )?;
            let observations = base.table().observed_row_count();
            let best = &points[best_point(&points, cost, observations).map_err(Error::input)?];
            (window, cutoff) = (best.window_factor, best.cutoff);
            grid = Some(grid_columns(&points, observations));
        }
        let detection = detection_settings(&settings, window, cutoff)?;
        let fixed_degrees = (!fixed.is_empty()).then_some(fixed.as_slice());
        let detected =
            degrees::structure_of(&base, &detection, fixed_degrees).map_err(Error::input)?;
        (detected, grid, None, Vec::new())
    };
    let structure_seconds = structure_started.elapsed().as_secs_f64();
    let (plan, outcome) = pipeline::fit_count(
        structure_started,
        &base,
        detected,
        &fitted,
        &fit,
        &options,
        interrupted,
        |done, total| relay.call(pairlist!("fit", done as f64, total as f64)),
    )?;
    fit_result(
        plan,
        outcome,
        exposure,
        window,
        cutoff,
        grid,
        selection,
        structure_seconds,
    )
}

/// `settings$species_works`: the works of `count_species_fit_rust` (a list
/// of raw vectors) that replace the structure step, or None.
fn species_works(settings: &List) -> RResult<Option<Vec<SpeciesWork>>> {
    let Some((_, value)) = settings.iter().find(|(key, _)| *key == "species_works") else {
        return Ok(None);
    };
    if value.is_null() {
        return Ok(None);
    }
    let list = value
        .as_list()
        .ok_or_else(|| Error::input("species_works must be a list of raw vectors"))?;
    list.values()
        .map(|value| {
            let raw = Raw::try_from(value)
                .map_err(|_| Error::input("species_works must be a list of raw vectors"))?;
            decode_work(raw.as_slice())
        })
        .collect::<RResult<Vec<_>>>()
        .map(Some)
}

const WORK_MAGIC: &[u8; 4] = b"WSPW";

fn encode_work(work: &SpeciesWork) -> RResult<Raw> {
    Ok(Raw::from_bytes(&panel::framed(
        WORK_MAGIC,
        work,
        "a species fit",
    )?))
}

fn decode_work(bytes: &[u8]) -> RResult<SpeciesWork> {
    panel::unframed(WORK_MAGIC, bytes, "a species fit")
}

/// The task of fitting every species of the data on its own (the arguments
/// of [`count_fit_rust`]; `settings$structure` must resolve to
/// "likelihood"): `task` (raw, checksummed), `key` (its fingerprint, in
/// hex: a checkpoint's key) and `species` (labels, in task order).
/// @keywords internal
/// @noRd
#[extendr]
#[allow(clippy::too_many_arguments)]
fn count_species_task_rust(
    count: Vec<f64>,
    bin: Vec<i32>,
    context: Vec<i32>,
    species: Vec<i32>,
    ran: Vec<i32>,
    factor_codes: Vec<i32>,
    cell: Vec<i32>,
    exposure: Vec<f64>,
    context_levels: Vec<String>,
    species_levels: Vec<String>,
    ran_levels: Vec<String>,
    factor_names: Vec<String>,
    factor_levels: List,
    time_series: i32,
    bins: i32,
    settings: List,
) -> RResult<List> {
    let method =
        StructureMethod::resolve(&text(&settings, "structure")?, "nb").map_err(Error::input)?;
    if method != StructureMethod::Likelihood {
        return Err(Error::input(
            "fitting species on their own (a checkpoint, or backend = \"future\") needs \
             model.settings$structure = \"likelihood\" (the default)",
        ));
    }
    let (base, _) = base_model(
        (
            count,
            bin,
            context,
            species,
            ran,
            factor_codes,
            cell,
            exposure,
        ),
        (
            context_levels,
            species_levels,
            ran_levels,
            factor_names,
            factor_levels,
        ),
        time_series,
        bins,
        &settings,
    )?;
    let curves = base.design().contexts().len() * base.design().species().len();
    let fixed = fixed_degrees(&numbers(&settings, "degrees")?, curves)?;
    let fit = fit_settings(&settings)?;
    let task = SpeciesTask::new(&base, &fixed, &fit).map_err(Error::input)?;
    let bytes = task.encode()?;
    Ok(list!(
        key = format!("{:016x}", SpeciesTask::fingerprint(&bytes)),
        species = task.species().to_vec(),
        task = Raw::from_bytes(&bytes)
    ))
}

/// The task of some species of a task (0-based indices): what one future
/// of `wisp(backend = "future")` receives.
/// @keywords internal
/// @noRd
#[extendr]
fn count_species_subtask_rust(task: Raw, species: Vec<i32>) -> RResult<Raw> {
    let task = SpeciesTask::decode(task.as_slice())?;
    let indices = species_indices(&species, task.species().len())?;
    let part = task.restricted(&indices).map_err(Error::input)?;
    Ok(Raw::from_bytes(&part.encode()?))
}

pub(super) fn species_indices(species: &[i32], count: usize) -> RResult<Vec<usize>> {
    species
        .iter()
        .map(|&s| {
            usize::try_from(s)
                .ok()
                .filter(|&s| s < count)
                .ok_or_else(|| Error::input(format!("no species {s} among {count}")))
        })
        .collect()
}

/// Chooses the structure of species `species` (0-based indices) of `task`
/// and fits them, each on its own, on `workers` forked workers (in this
/// process with one): a list of raw vectors, one species' work each, in the
/// order asked. With a `checkpoint` path (a fit's checkpoint opened by
/// `fit_checkpoint_open_rust`), each species' work is appended to it, under
/// the checkpoint `key`, by the process that made it, as it ends.
/// `progress(stage, done, total)` hears stage "species". A species whose
/// fit fails stops the run with its error (the others in the checkpoint
/// are kept).
/// @keywords internal
/// @noRd
#[extendr]
fn count_species_fit_rust(
    task: Raw,
    species: Vec<i32>,
    workers: i32,
    checkpoint: &str,
    key: &str,
    progress: Robj,
) -> RResult<List> {
    let relay = Relay::new(progress);
    let result = (|| {
        let task = SpeciesTask::decode(task.as_slice())?;
        let indices = species_indices(&species, task.species().len())?;
        let task_hash =
            u64::from_str_radix(key, 16).map_err(|_| Error::input("bad checkpoint key"))?;
        let options = fit_pool_options(workers)?;
        let interrupted = || relay.jumped() || user_interrupt_pending();
        let path = (!checkpoint.is_empty()).then(|| std::path::Path::new(checkpoint));
        let outcomes = crate::engine::map_tasks(
            indices.len(),
            &options,
            |number| {
                let work = task.fit(indices[number - 1]).map_err(|e| e.to_string())?;
                if let Some(path) = path {
                    let record = SpeciesRecord {
                        task: task_hash,
                        work: work.clone(),
                    };
                    crate::checkpoint::Appender::new(path)
                        .and_then(|mut appender| appender.append(&record))
                        .map_err(|e| format!("cannot write the checkpoint: {e}"))?;
                }
                Ok(work)
            },
            interrupted,
            |done, total| relay.call(pairlist!("species", done as f64, total as f64)),
        )?;
        let works = outcomes
            .into_iter()
            .zip(&indices)
            .map(|(outcome, &s)| match outcome {
                Ok(work) => encode_work(&work),
                Err(crate::engine::Failure::Task(message)) => Err(Error::input(message)),
                Err(failure) => Err(Error::system(format!(
                    "the fit of species {} failed: {failure}",
                    task.species()[s]
                ))),
            })
            .collect::<RResult<Vec<Raw>>>()?;
        Ok(List::from_values(works))
    })();
    relay.result(result)
}

/// Opens (creating or repairing) a fit's checkpoint: per species record,
/// `key` (hex), `species` and `work` (raw, as `count_species_fit_rust`
/// gives it), and the damaged byte ranges dropped (`damage_length`).
/// @keywords internal
/// @noRd
#[extendr]
fn fit_checkpoint_open_rust(path: &str) -> RResult<List> {
    if path.is_empty() {
        return Err(Error::input("the checkpoint path is empty"));
    }
    let contents = crate::checkpoint::open_records::<SpeciesRecord>(std::path::Path::new(path))?;
    let works = contents
        .entries
        .iter()
        .map(|e| encode_work(&e.work))
        .collect::<RResult<Vec<Raw>>>()?;
    Ok(list!(
        key = contents
            .entries
            .iter()
            .map(|e| format!("{:016x}", e.task))
            .collect::<Vec<_>>(),
        species = contents
            .entries
            .iter()
            .map(|e| e.work.species.clone())
            .collect::<Vec<_>>(),
        work = List::from_values(works),
        damage_length = contents
            .damage
            .iter()
            .map(|d| d.length as f64)
            .collect::<Vec<_>>(),
        damage_at_end = contents.damage.iter().map(|d| d.at_end).collect::<Vec<_>>()
    ))
}

/// Appends one species' work (raw, from `count_species_fit_rust`) to a
/// fit's checkpoint under `key`, durably.
/// @keywords internal
/// @noRd
#[extendr]
fn fit_checkpoint_append_rust(path: &str, key: &str, work: Raw) -> RResult<()> {
    let record = SpeciesRecord {
        task: u64::from_str_radix(key, 16).map_err(|_| Error::input("bad checkpoint key"))?,
        work: decode_work(work.as_slice())?,
    };
    let mut appender = crate::checkpoint::Appender::new(std::path::Path::new(path))?;
    appender.append(&record)?;
    Ok(())
}

/// The memory a count fit of `tokens` tokens, `factors` fixed effects and
/// `rows` summed rows will hold at once (bytes), and whether this process
/// can have it now; R asks before it hands the tokens over, so that a fit
/// too large for the process is an error, not an abort of R.
/// @keywords internal
/// @noRd
#[extendr]
fn count_memory_rust(tokens: f64, factors: f64, rows: f64) -> List {
    let whole = |x: f64| {
        if x.is_finite() && x > 0.0 {
            x as u64
        } else {
            0
        }
    };
    let bytes = crate::nb::table::fit_memory_forecast(whole(tokens), whole(factors), whole(rows));
    list!(
        bytes = bytes as f64,
        available = crate::platform::can_allocate(bytes)
    )
}

/// Whether `bytes` of memory can be had by this process now (reserved, not
/// touched, and given back).
/// @keywords internal
/// @noRd
#[extendr]
fn memory_available_rust(bytes: f64) -> bool {
    bytes.is_finite() && bytes >= 0.0 && crate::platform::can_allocate(bytes as u64)
}

/// The user's `degrees`: empty (choose every curve's), or one entry per
/// curve, context-major: a whole number 0..=20 fixes the curve's degree,
/// NaN (R's NA) leaves it to be chosen.
fn fixed_degrees(degrees: &[f64], curves: usize) -> RResult<Vec<Option<usize>>> {
    if degrees.is_empty() {
        return Ok(Vec::new());
    }
    if degrees.len() != curves
        || degrees
            .iter()
            .any(|d| !(d.is_nan() || (*d >= 0.0 && *d <= 20.0 && *d == d.trunc())))
    {
        return Err(Error::input(format!(
            "degrees needs {curves} entries, one per (context, species): whole numbers between 0 and 20, or NA to choose"
        )));
    }
    Ok(degrees
        .iter()
        .map(|&d| (!d.is_nan()).then_some(d as usize))
        .collect())
}

/// What count_fit_rust() returns to R.
#[allow(clippy::too_many_arguments)]
fn fit_result(
    plan: CountPlan,
    outcome: crate::outcome::Outcome,
    exposure: crate::nb::table::ExposureChoice,
    window: f64,
    cutoff: f64,
    grid: Option<List>,
    selection: Option<List>,
    structure_seconds: f64,
) -> RResult<List> {
    let parameters = outcome
        .fit
        .as_ref()
        .map(|f| f.parameters.clone())
        .unwrap_or_default();
    let change_points = change_point_columns(&plan);
    let trace = trace_columns(&plan);
    Ok(list!(
        plan = Raw::from_bytes(&saved::encode_plan(&Plan::Count(plan))?),
        parameters = parameters,
        diagnostics = outcome_columns(std::slice::from_ref(&outcome)),
        change_points = change_points,
        exposure = exposure.exposure.name(),
        exposure_reason = exposure.reason,
        window = window,
        cutoff = cutoff,
        grid = grid.map_or(r!(NULL), Robj::from),
        selection = selection.map_or(r!(NULL), Robj::from),
        structure_seconds = structure_seconds,
        trace = trace
    ))
}

/// The Newton trace of the full-data fit (`wisp_control(trace = TRUE)`), one
/// row per iteration of every Newton run of every gene; NULL without rows.
fn trace_columns(plan: &CountPlan) -> Robj {
    let design = plan.model.design();
    let rows: Vec<_> = plan
        .estimate
        .species
        .iter()
        .flat_map(|fit| {
            fit.trace
                .iter()
                .map(move |(run, row)| (fit.species, *run, row))
        })
        .collect();
    if rows.is_empty() {
        return r!(NULL);
    }
    let column = |f: &dyn Fn(&crate::nb::solver::NewtonIteration) -> f64| {
        rows.iter().map(|(_, _, row)| f(row)).collect::<Vec<f64>>()
    };
    list!(
        species = rows
            .iter()
            .map(|(s, _, _)| design.species()[*s].clone())
            .collect::<Vec<String>>(),
        run = rows
            .iter()
            .map(|(_, run, _)| *run as i32 + 1)
            .collect::<Vec<i32>>(),
        iteration = rows
            .iter()
            .map(|(_, _, row)| row.iteration as i32)
            .collect::<Vec<i32>>(),
        value = column(&|row| row.value),
        lambda = column(&|row| row.lambda),
        decrement = column(&|row| row.decrement),
        scaled_gradient = column(&|row| row.scaled_gradient),
        evaluations = column(&|row| row.evaluations as f64)
    )
    .into()
}

/// Every candidate of the structure selection, one row each: its curve's
/// labels, degree, −log-likelihood, parameters, the curve's observed rows,
/// BIC, whether its fit converged, whether it was chosen, the curve's
/// margin (the runner-up's BIC minus the winner's; +∞ when it had no
/// runner-up), whether the user fixed the degree, and why its fit failed
/// ("" when it did not).
fn selection_columns(model: &crate::nb::CountModel, selections: &[CurveSelection]) -> List {
    let design = model.design();
    let rows = selections
        .iter()
        .flat_map(|s| s.candidates.iter().enumerate().map(move |(i, c)| (s, i, c)));
    let (mut context, mut species, mut degree, mut nll, mut parameters, mut observations) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    let (mut criterion, mut converged, mut chosen, mut margin, mut failure) =
        (vec![], vec![], vec![], vec![], vec![]);
    let mut fixed = vec![];
    for (selection, index, candidate) in rows {
        context.push(design.contexts()[selection.context].as_str());
        species.push(design.species()[selection.species].as_str());
        degree.push(candidate.degree as i32);
        nll.push(candidate.negative_log_likelihood);
        parameters.push(candidate.parameters as i32);
        observations.push(selection.observations as f64);
        criterion.push(candidate.criterion);
        converged.push(candidate.converged);
        chosen.push(index == selection.chosen);
        margin.push(selection.margin());
        failure.push(candidate.failure.clone().unwrap_or_default());
        fixed.push(selection.fixed);
    }
    list!(
        context = context,
        species = species,
        degree = degree,
        neg_loglik = nll,
        n_params = parameters,
        n_obs = observations,
        BIC = criterion,
        converged = converged,
        chosen = chosen,
        margin = margin,
        fixed = fixed,
        failure = failure
    )
}

/// The change points as a long table, one row per point.
fn change_point_columns(plan: &CountPlan) -> List {
    let design = plan.model.design();
    let (mut context, mut species, mut treatment, mut transition, mut bin) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (c, context_name) in design.contexts().iter().enumerate() {
        for (s, species_name) in design.species().iter().enumerate() {
            let curve = c * design.species().len() + s;
            for (t, points) in plan.detected.change_points[curve].iter().enumerate() {
                for (k, &point) in points.iter().enumerate() {
                    context.push(context_name.as_str());
                    species.push(species_name.as_str());
                    treatment.push(design.treatments()[t].name.as_str());
                    transition.push(k as i32 + 1);
                    bin.push(point);
                }
            }
        }
    }
    list!(
        context = context,
        species = species,
        treatment = treatment,
        transition = transition,
        bin = bin
    )
}

pub(super) fn count_plan(bytes: &Raw) -> RResult<CountPlan> {
    match saved::decode_plan(bytes.as_slice())? {
        Plan::Count(plan) => Ok(plan),
        Plan::WarpedSigmoid(_) => Err(Error::input(
            "this fit uses the original likelihood; this needs likelihood = \"nb\"",
        )),
    }
}

extendr_module! {
    mod nb;
    fn count_fit_rust;
    fn count_species_task_rust;
    fn count_species_subtask_rust;
    fn count_species_fit_rust;
    fn fit_checkpoint_open_rust;
    fn fit_checkpoint_append_rust;
    fn count_memory_rust;
    fn memory_available_rust;
}
