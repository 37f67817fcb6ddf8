//! R entry points for the count likelihood (`likelihood = "nb"`): the fit
//! from token columns, the description of a fitted plan, predictions and
//! bands, the Wald covariance, and the objective (for tests).

use super::model::{bins_option, design_fields, design_from_r, tokens_from_r};
use super::{index_column, outcome_columns, pool_options, user_interrupt_pending, RResult, Relay};
use crate::bootstrap::Plan;
use crate::changepoint::grid::{best_point, GridCost, GridPoint, StructureMethod};
use crate::changepoint::DetectionMethod;
use crate::changepoint::DetectionSettings;
use crate::design::{ParameterRole, WarpKind};
use crate::error::Error;
use crate::nb::build::build_count_model;
use crate::nb::covariance::covariance;
use crate::nb::fit::{warp_slot, CountFitSettings};
use crate::nb::layout::{CountLayout, CountRole};
use crate::nb::objective::SpeciesProblem;
use crate::nb::pipeline::CountPlan;
use crate::nb::redraw::{animal_groups, between_animal_factors};
use crate::nb::select::CurveSelection;
use crate::nb::table::Exposure;
use crate::nb::{degrees, pipeline, predict, replicate};
use crate::resample::ReplicatePlan;
use crate::saved;
use extendr_api::prelude::*;

/// A named entry of an R settings list.
fn entry(settings: &List, name: &str) -> RResult<Robj> {
    settings
        .iter()
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
        .ok_or_else(|| Error::input(format!("internal: setting `{name}` is missing")))
}

fn number(settings: &List, name: &str) -> RResult<f64> {
    entry(settings, name)?
        .as_real()
        .or_else(|| entry(settings, name).ok()?.as_integer().map(f64::from))
        .ok_or_else(|| Error::input(format!("setting `{name}` must be a number")))
}

fn text(settings: &List, name: &str) -> RResult<String> {
    entry(settings, name)?
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| Error::input(format!("setting `{name}` must be a string")))
}

/// A character setting; NULL gives none.
fn strings(settings: &List, name: &str) -> RResult<Vec<String>> {
    let value = entry(settings, name)?;
    if value.is_null() {
        return Ok(Vec::new());
    }
    value
        .as_string_vector()
        .ok_or_else(|| Error::input(format!("setting `{name}` must be strings")))
}

fn numbers(settings: &List, name: &str) -> RResult<Vec<f64>> {
    let value = entry(settings, name)?;
    if value.is_null() {
        return Ok(Vec::new());
    }
    value
        .as_real_vector()
        .or_else(|| {
            value
                .as_integer_vector()
                .map(|v| v.into_iter().map(f64::from).collect())
        })
        .ok_or_else(|| Error::input(format!("setting `{name}` must be numbers")))
}

/// A number that may be absent from the settings list (or NULL).
fn optional_number(settings: &List, name: &str) -> RResult<Option<f64>> {
    match settings.iter().find(|(key, _)| *key == name) {
        None => Ok(None),
        Some((_, value)) if value.is_null() => Ok(None),
        Some(_) => number(settings, name).map(Some),
    }
}

/// A count setting: a whole number of at least 1.
fn whole_setting(name: &str, value: f64) -> RResult<usize> {
    if value.is_finite() && value >= 1.0 && value.fract() == 0.0 && value <= 1e9 {
        Ok(value as usize)
    } else {
        Err(Error::input(format!(
            "{name} must be a whole number of at least 1, got {value}"
        )))
    }
}

fn exposure_of(name: &str) -> RResult<Option<Exposure>> {
    match name {
        "auto" => Ok(None),
        "cells" => Ok(Some(Exposure::Cells)),
        "tokens" => Ok(Some(Exposure::Tokens)),
        "none" => Ok(Some(Exposure::Unit)),
        other => Err(Error::input(format!(
            "exposure must be \"auto\", \"cells\", \"tokens\" or \"none\", not \"{other}\""
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
/// or nothing; `settings` a named list: `exposure`, `degrees` (one per
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
        (count, bin, context, species, ran, factor_codes, cell),
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
/// factor codes, cell.
type TokenArguments = (
    Vec<f64>,
    Vec<i32>,
    Vec<i32>,
    Vec<i32>,
    Vec<i32>,
    Vec<i32>,
    Vec<i32>,
);

/// Labels of [`count_fit_rust`]: contexts, species, random levels, factor
/// names, factor levels.
type LabelArguments = (Vec<String>, Vec<String>, Vec<String>, Vec<String>, List);

fn count_fit(
    relay: &Relay,
    (count, bin, context, species, ran, factor_codes, cell): TokenArguments,
    (context_levels, species_levels, ran_levels, factor_names, factor_levels): LabelArguments,
    time_series: i32,
    bins: i32,
    settings: List,
) -> RResult<List> {
    let interrupted = || relay.jumped() || user_interrupt_pending();
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
        exposure_of(&text(&settings, "exposure")?)?,
        crate::nb::point_gap_of(bins, number(&settings, "buffer_factor")?),
        &tokens,
        &cells,
    )
    .map_err(Error::input)?;
    let held = base
        .design()
        .effects_named(&strings(&settings, "held_effects")?)
        .map_err(Error::input)?;
    let base = base.with_held_effects(held).map_err(Error::input)?;
    let fit = fit_settings(&settings)?;
    let workers = number(&settings, "workers")?;
    let options = pool_options(
        workers as i32,
        1,
        "rolling",
        f64::INFINITY,
        None,
        Some(true),
    )?;
    let cost = GridCost::from_name(&text(&settings, "lro_cost")?).map_err(Error::input)?;
    let method =
        StructureMethod::resolve(&text(&settings, "structure")?, "nb").map_err(Error::input)?;
    let (mut window, mut cutoff) = (number(&settings, "window")?, number(&settings, "cutoff")?);
    let fixed = fixed_degrees(&numbers(&settings, "degrees")?, curves)?;
    let structure_started = std::time::Instant::now();
    let (detected, grid, selection, fitted) = if method == StructureMethod::Likelihood {
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
        structure_seconds = structure_seconds
    ))
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

fn count_plan(bytes: &Raw) -> RResult<CountPlan> {
    match saved::decode_plan(bytes.as_slice())? {
        Plan::Count(plan) => Ok(plan),
        Plan::WarpedSigmoid(_) => Err(Error::input(
            "this fit uses the original likelihood; this needs likelihood = \"nb\"",
        )),
    }
}

/// Describe a count fit: parameters, design, curves, the observed rows and
/// the population rows, the random-effect SDs, the animals' groups. Every
/// row comes with its labels.
/// @keywords internal
/// @noRd
/// A parameter's role, component and labels (context, species, block,
/// treatment, random level), as count_describe_rust() reports them.
type RoleLabels<'a> = (
    &'a str,
    &'a str,
    Option<String>,
    Option<String>,
    Option<i32>,
    Option<String>,
    Option<String>,
);

#[extendr]
fn count_describe_rust(plan: Raw) -> RResult<List> {
    let plan = count_plan(&plan)?;
    let model = &plan.model;
    let design = model.design();
    let table = model.table();
    let shape = table.shape();
    let layout = CountLayout::new(design, model.structure()).map_err(Error::input)?;
    let roles = layout.roles();
    let label = |v: &[String], i: usize| Some(v[i].clone());
    let mut name = layout.names(design);
    let (mut role, mut component, mut context, mut species, mut block, mut treatment, mut ran) =
        (vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
    for r in &roles {
        let (ro, co, cx, sp, bl, tr, ra): RoleLabels = match *r {
            CountRole::Original(ParameterRole::Beta {
                component,
                context,
                species,
                block,
                treatment,
            }) => (
                if treatment == 0 { "baseline" } else { "beta" },
                component.name(),
                label(design.contexts(), context),
                label(design.species(), species),
                Some(block as i32 + 1),
                Some(design.treatments()[treatment].name.clone()),
                None,
            ),
            CountRole::Original(ParameterRole::Warp { kind, species, ran }) => (
                "warp",
                kind.name(),
                None,
                label(design.species(), species),
                None,
                None,
                label(design.ran_levels(), ran),
            ),
            CountRole::Deviation { kind, species } => (
                "sd",
                kind.name(),
                None,
                label(design.species(), species),
                None,
                None,
                None,
            ),
            CountRole::Dispersion { context, species } => (
                "dispersion",
                "dispersion",
                label(design.contexts(), context),
                label(design.species(), species),
                None,
                None,
                None,
            ),
        };
        role.push(ro);
        component.push(co);
        context.push(cx);
        species.push(sp);
        block.push(bl);
        treatment.push(tr);
        ran.push(ra);
    }
    let parameters = list!(
        name = std::mem::take(&mut name),
        role = role,
        component = component,
        context = context,
        species = species,
        block = block,
        treatment = treatment,
        ran = ran
    );
    // Observed rows: species, then the table's key order (animal, context, treatment, bin).
    let treatment_names = design.treatment_names();
    let (
        mut row_ran,
        mut row_context,
        mut row_species,
        mut row_treatment,
        mut row_bin,
        mut row_count,
        mut row_exposure,
    ) = (vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
    let observed = table.observed();
    for s in 0..shape.species {
        let (counts, exposures) = (table.counts(s), table.exposures(s));
        for r in 0..shape.ran_levels {
            for c in 0..shape.contexts {
                for (t, treatment_name) in treatment_names.iter().enumerate() {
                    let first = table.block_key(r, c, t);
                    for b in 0..shape.bins {
                        if !observed[first + b] {
                            continue;
                        }
                        row_ran.push(design.ran_levels()[r].as_str());
                        row_context.push(design.contexts()[c].as_str());
                        row_species.push(design.species()[s].as_str());
                        row_treatment.push(treatment_name.as_str());
                        row_bin.push(b as i32 + 1);
                        row_count.push(counts[first + b]);
                        row_exposure.push(exposures[first + b]);
                    }
                }
            }
        }
    }
    let rows = list!(
        ran = row_ran,
        context = row_context,
        species = row_species,
        treatment = row_treatment,
        bin = row_bin,
        count = row_count,
        exposure = row_exposure
    );
    let (mut pop_context, mut pop_species, mut pop_treatment, mut pop_bin) =
        (vec![], vec![], vec![], vec![]);
    for s in 0..shape.species {
        for c in 0..shape.contexts {
            for treatment_name in &treatment_names {
                for b in 1..=shape.bins {
                    pop_context.push(design.contexts()[c].as_str());
                    pop_species.push(design.species()[s].as_str());
                    pop_treatment.push(treatment_name.as_str());
                    pop_bin.push(b as i32);
                }
            }
        }
    }
    let population = list!(
        context = pop_context,
        species = pop_species,
        treatment = pop_treatment,
        bin = pop_bin
    );
    let (mut curve_context, mut curve_species, mut degree, mut dispersion) =
        (vec![], vec![], vec![], vec![]);
    for (c, context_name) in design.contexts().iter().enumerate() {
        for (s, species_name) in design.species().iter().enumerate() {
            curve_context.push(context_name.as_str());
            curve_species.push(species_name.as_str());
            degree.push(model.structure().degree(c, s) as i32);
            dispersion.push(plan.estimate.species[s].state.rho[c].exp());
        }
    }
    let curves = list!(
        context = curve_context,
        species = curve_species,
        degree = degree,
        dispersion = dispersion
    );
    let sd = List::from_pairs(WarpKind::ALL.iter().map(|&kind| {
        (
            kind.name(),
            r!(plan
                .estimate
                .species
                .iter()
                .map(|f| f.sigma[warp_slot(kind)])
                .collect::<Vec<f64>>()),
        )
    }));
    let mut fields = design_fields(design);
    fields.extend([
        ("parameters", parameters.into()),
        ("ran_levels", r!(design.ran_levels().to_vec())),
        ("bins", r!(shape.bins as i32)),
        ("curves", curves.into()),
        ("rows", rows.into()),
        ("population", population.into()),
        ("sd", sd.into()),
        ("exposure", r!(table.exposure_kind().name())),
        ("between", r!(between_animal_factors(model))),
        (
            "groups",
            r!(animal_groups(model)
                .iter()
                .map(|&g| g as i32 + 1)
                .collect::<Vec<i32>>()),
        ),
        ("likelihood", r!("nb")),
        (
            "held_effects",
            r!(model
                .held_effects()
                .iter()
                .map(|&t| design.treatments()[t].name.clone())
                .collect::<Vec<String>>()),
        ),
    ]);
    Ok(List::from_pairs(fields))
}

/// Ψ of the observed rows (in `count_describe_rust`'s order) and of the
/// population rows at a reported parameter vector.
/// @keywords internal
/// @noRd
#[extendr]
fn count_predict_rust(plan: Raw, parameters: Vec<f64>) -> RResult<List> {
    let plan = count_plan(&plan)?;
    let predictions = predict::predictions_at(&plan.model, &parameters).map_err(Error::input)?;
    Ok(list!(
        rows = observed_only(&plan, &predictions.animal),
        population = predictions.population
    ))
}

/// Curve points from R columns (0-based indices; `ran` -1 for the population
/// curve).
fn curve_points(
    ran: Vec<i32>,
    context: Vec<i32>,
    species: Vec<i32>,
    treatment: Vec<i32>,
    x: Vec<f64>,
) -> RResult<Vec<predict::CurvePoint>> {
    let n = x.len();
    if [ran.len(), context.len(), species.len(), treatment.len()]
        .iter()
        .any(|&len| len != n)
    {
        return Err(Error::input(
            "the columns of the curve points differ in length",
        ));
    }
    let ran = ran
        .into_iter()
        .map(|r| match r {
            -1 => Ok(None),
            r => usize::try_from(r)
                .map(Some)
                .map_err(|_| Error::input("`ran` must hold indices >= 0, or -1")),
        })
        .collect::<RResult<Vec<_>>>()?;
    let (context, species, treatment) = (
        index_column(context, "context")?,
        index_column(species, "species")?,
        index_column(treatment, "treatment")?,
    );
    Ok((0..n)
        .map(|i| predict::CurvePoint {
            ran: ran[i],
            context: context[i],
            species: species[i],
            treatment: treatment[i],
            x: x[i],
        })
        .collect())
}

/// Ψ at curve points (fractional bins allowed) for each reported vector of
/// `samples` (one after another), sample-major. `ran` holds 0-based animal
/// indices, -1 for the population curve.
/// @keywords internal
/// @noRd
#[extendr]
fn count_curves_rust(
    plan: Raw,
    samples: Vec<f64>,
    ran: Vec<i32>,
    context: Vec<i32>,
    species: Vec<i32>,
    treatment: Vec<i32>,
    x: Vec<f64>,
) -> RResult<Vec<f64>> {
    let plan = count_plan(&plan)?;
    let points = curve_points(ran, context, species, treatment, x)?;
    predict::curves_at(&plan.model, &samples, &points).map_err(Error::input)
}

/// Ψ of population curves at points and its gradient in the reported
/// vector (point-major, one full row per point), for the delta method.
/// @keywords internal
/// @noRd
#[extendr]
fn count_curve_gradients_rust(
    plan: Raw,
    parameters: Vec<f64>,
    context: Vec<i32>,
    species: Vec<i32>,
    treatment: Vec<i32>,
    x: Vec<f64>,
) -> RResult<List> {
    let plan = count_plan(&plan)?;
    let points = curve_points(vec![-1; x.len()], context, species, treatment, x)?;
    let (values, gradients) =
        predict::population_gradients(&plan.model, &parameters, &points).map_err(Error::input)?;
    Ok(list!(psi = values, gradient = gradients))
}

/// The entries of a per-key vector (species-major) at observed keys.
fn observed_only(plan: &CountPlan, per_key: &[f64]) -> Vec<f64> {
    let table = plan.model.table();
    let keys = table.key_count();
    let observed = table.observed();
    (0..per_key.len())
        .filter(|&i| observed[i % keys])
        .map(|i| per_key[i])
        .collect()
}

/// Per observed row and per population row, quantiles of Ψ over parameter
/// samples (one reported vector after another).
/// @keywords internal
/// @noRd
/// Picks the animal rows or the population rows of one draw.
type PickDraw = dyn Fn(&(Vec<f64>, Vec<f64>)) -> &Vec<f64>;

#[extendr]
fn count_bands_rust(plan: Raw, samples: Vec<f64>, probabilities: Vec<f64>) -> RResult<List> {
    let plan = count_plan(&plan)?;
    let count = plan.parameter_names().len();
    if count == 0 || samples.len() % count != 0 {
        return Err(Error::input("samples must hold whole parameter vectors"));
    }
    if probabilities.iter().any(|p| !(0.0..=1.0).contains(p)) {
        return Err(Error::input("probabilities must be in [0, 1]"));
    }
    let draws: Vec<(Vec<f64>, Vec<f64>)> = samples
        .chunks(count)
        .map(|x| {
            predict::predictions_at(&plan.model, x)
                .map(|p| (observed_only(&plan, &p.animal), p.population))
                .map_err(Error::input)
        })
        .collect::<RResult<_>>()?;
    let quantiles = |pick: &PickDraw| -> Vec<Vec<f64>> {
        let length = draws.first().map_or(0, |d| pick(d).len());
        let mut out = vec![vec![f64::NAN; length]; probabilities.len()];
        let mut values = Vec::with_capacity(draws.len());
        for row in 0..length {
            values.clear();
            values.extend(draws.iter().map(|d| pick(d)[row]).filter(|v| v.is_finite()));
            if values.is_empty() {
                continue;
            }
            values.sort_by(f64::total_cmp);
            for (band, &p) in out.iter_mut().zip(&probabilities) {
                band[row] = crate::numeric::sorted_quantile(&values, p);
            }
        }
        out
    };
    Ok(list!(
        rows = List::from_values(quantiles(&|d| &d.0)),
        population = List::from_values(quantiles(&|d| &d.1))
    ))
}

/// The Wald covariance of the reported fixed effects and dispersions, one
/// block per species: positions (from 1) in the reported vector and the
/// block, row-major; NULL for a species whose Hessian is not positive
/// definite.
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
/// test of `reduced` against `full`: c(−ℓ reduced, −ℓ full).
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
    Ok(vec![r, f])
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

extendr_module! {
    mod count;
    fn count_fit_rust;
    fn count_describe_rust;
    fn count_predict_rust;
    fn count_curves_rust;
    fn count_curve_gradients_rust;
    fn count_bands_rust;
    fn count_vcov_rust;
    fn count_check_nested_rust;
    fn count_lr_replicate_rust;
    fn count_objective_rust;
}
