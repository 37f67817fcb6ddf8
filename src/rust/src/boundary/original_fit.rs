//! R entry points for fitting: the full fit and the LRO grid search.

use super::{count_option, outcome_columns, seed_value, user_interrupt_pending, RResult, Relay};
use crate::bootstrap::{Plan, WarpedSigmoidPlan};
use crate::changepoint::grid::{best_point, GridCost};
use crate::changepoint::DetectionMethod;
use crate::changepoint::DetectionSettings;
use crate::engine::PoolOptions;
use crate::error::Error;
use crate::original::fit::FitSettings;
use crate::original::pipeline;
use crate::original::pipeline::PipelineSettings;
use crate::original::Model;
use crate::original::StartSettings;
use crate::saved;
use extendr_api::prelude::*;

fn pipeline_settings(
    ctol: f64,
    max_evals: i32,
    rise_threshold_factor: f64,
) -> RResult<PipelineSettings> {
    let settings = PipelineSettings {
        start: StartSettings {
            rise_threshold_factor,
        },
        fit: FitSettings {
            ctol,
            max_evals: count_option(max_evals, "max_evals")?,
            ..FitSettings::default()
        },
    };
    settings.validate().map_err(Error::input)?;
    Ok(settings)
}

/// Detection settings; the buffer factor is the model's.
fn detection_settings(
    model: &Model,
    window: f64,
    cutoff: f64,
    method: &str,
) -> RResult<DetectionSettings> {
    let settings = DetectionSettings {
        buffer_factor: model.settings().buffer_factor,
        lro_cutoff: cutoff,
        lro_window_factor: window,
        method: DetectionMethod::from_name(method)
            .ok_or_else(|| Error::input(format!("unknown LRO_method \"{method}\"")))?,
    };
    settings.validate().map_err(Error::input)?;
    Ok(settings)
}

/// Detect the structure of a model's data (or take `degrees`, one per
/// (context, species), context-major; empty: detect), then fit it. Returns
/// the fit's saved plan, its diagnostics row, start and change points.
/// @keywords internal
/// @noRd
#[extendr]
#[allow(clippy::too_many_arguments)]
fn wisp_fit_rust(
    bytes: Raw,
    window: f64,
    cutoff: f64,
    method: &str,
    ctol: f64,
    max_evals: i32,
    rise_threshold_factor: f64,
    seed: f64,
    degrees: Vec<i32>,
) -> RResult<List> {
    let base = saved::decode_model(bytes.as_slice())?;
    let detection = detection_settings(&base, window, cutoff, method)?;
    let settings = pipeline_settings(ctol, max_evals, rise_threshold_factor)?;
    let degrees = super::index_column(degrees, "degrees")?;
    let fixed = (!degrees.is_empty()).then_some(degrees.as_slice());
    let (fitted, outcome) =
        pipeline::detect_and_fit_here(&base, &detection, &settings, seed_value(seed)?, fixed)
            .map_err(Error::input)?;
    // The change points as a long table, one row per point.
    let design = fitted.model.design();
    let (mut context, mut species, mut treatment, mut transition, mut bin) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (c, context_name) in design.contexts().iter().enumerate() {
        for (s, species_name) in design.species().iter().enumerate() {
            for (t, points) in fitted.detected.curve_points(c, s).iter().enumerate() {
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
    let change_points = List::from_pairs(vec![
        ("context", r!(context)),
        ("species", r!(species)),
        ("treatment", r!(treatment)),
        ("transition", r!(transition)),
        ("bin", r!(bin)),
    ]);
    let parameters = fitted.fit.parameters.clone();
    let plan = Plan::WarpedSigmoid(WarpedSigmoidPlan {
        model: fitted.model,
        detected: fitted.detected,
        settings,
    });
    Ok(list!(
        plan = Raw::from_bytes(&saved::encode_plan(&plan)?),
        parameters = parameters,
        diagnostics = outcome_columns(std::slice::from_ref(&outcome)),
        change_points = change_points,
        start = fitted.start,
        repair_attempts = fitted.repair.attempts as i32
    ))
}

/// The LRO grid search: every (window factor, cutoff) pair detected, each
/// distinct structure fitted once in a forked child. `progress(stage, done,
/// total)` (an R function, or NULL) is told, through a [`Relay`], the number
/// of distinct structures (stage "grid", done = 0) and each fit as it ends;
/// a jump out of it stops the search and is handed back to R. Returns the
/// grid's columns (`points`) and the 1-based row of the point of least
/// `cost` ("NLL", "AIC" or "BIC"; `best`), chosen as under "nb".
/// @keywords internal
/// @noRd
#[extendr]
#[allow(clippy::too_many_arguments)]
fn wisp_grid_search_rust(
    bytes: Raw,
    cost: &str,
    method: &str,
    ctol: f64,
    max_evals: i32,
    rise_threshold_factor: f64,
    seed: f64,
    workers: i32,
    progress: Robj,
) -> RResult<List> {
    let relay = Relay::new(progress);
    let result = grid_search(
        &relay,
        bytes,
        cost,
        method,
        ctol,
        max_evals,
        rise_threshold_factor,
        seed,
        workers,
    );
    relay.result(result)
}

#[allow(clippy::too_many_arguments)]
fn grid_search(
    relay: &Relay,
    bytes: Raw,
    cost: &str,
    method: &str,
    ctol: f64,
    max_evals: i32,
    rise_threshold_factor: f64,
    seed: f64,
    workers: i32,
) -> RResult<List> {
    let base = saved::decode_model(bytes.as_slice())?;
    let cost = GridCost::from_name(cost)
        .map_err(Error::input)?
        .ok_or_else(|| Error::input("the grid search needs an LRO_cost other than \"none\""))?;
    let template = detection_settings(&base, 1.0, 1.0, method)?;
    let settings = pipeline_settings(ctol, max_evals, rise_threshold_factor)?;
    let options = PoolOptions {
        workers: count_option(workers, "max.fork")?,
        ..PoolOptions::default()
    };
    let points = pipeline::grid_search(
        &base,
        &template,
        &settings,
        seed_value(seed)?,
        &options,
        || relay.jumped() || user_interrupt_pending(),
        |done, total| relay.call(pairlist!("grid", done as f64, total as f64)),
    )?;
    let observations = base.table().observed_row_count();
    let best = best_point(&points, cost, observations).map_err(Error::input)?;
    Ok(list!(
        points = super::nb::grid_columns(&points, observations),
        best = best as i32 + 1
    ))
}

/// Fit a model (with its structure) from a given start (benchmark hook).
/// @keywords internal
/// @noRd
#[extendr]
#[cfg_attr(not(feature = "test-hooks"), allow(unused_variables))]
fn model_fit_rust(bytes: Raw, start: Vec<f64>, ctol: f64, max_evals: i32) -> RResult<List> {
    #[cfg(feature = "test-hooks")]
    return {
        let model = saved::decode_model(bytes.as_slice())?;
        let settings = pipeline_settings(
            ctol,
            max_evals,
            StartSettings::default().rise_threshold_factor,
        )?;
        let fit = crate::original::fit::fit(&model, &start, &settings.fit).map_err(Error::input)?;
        let outcome = crate::outcome::Outcome {
            replicate: 0,
            fit: Ok(fit.clone()),
            process: Default::default(),
        };
        Ok(list!(
            parameters = fit.parameters,
            diagnostics = outcome_columns(std::slice::from_ref(&outcome))
        ))
    };
    #[cfg(not(feature = "test-hooks"))]
    Err(super::without_test_hooks("model_fit()"))
}

extendr_module! {
    mod original_fit;
    fn wisp_fit_rust;
    fn wisp_grid_search_rust;
    fn model_fit_rust;
}
