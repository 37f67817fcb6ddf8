//! R entry points for models: build, describe, predict, bands, rules.

use super::convert::{bins_option, design_fields, design_from_r, tokens_from_r};
use super::{index_column, RResult};
use crate::design::ParameterRole;
use crate::error::Error;
use crate::original;
use crate::original::objective::CurvePoint;
use crate::original::{Model, Objective, Settings};
use crate::rules;
use crate::saved;
use extendr_api::prelude::*;

fn decode_model(bytes: &Raw) -> RResult<Model> {
    saved::decode_model(bytes.as_slice())
}

/// Build a model from coded token columns and return its saved state.
/// Levels are coded from 0; `factor_codes` holds one column per factor,
/// column-major; `time_series` is the 0-based factor index or -1;
/// `degrees` holds one degree per (context, species), context-major.
/// @keywords internal
/// @noRd
#[extendr]
#[allow(clippy::too_many_arguments)]
fn model_build_rust(
    count: Vec<f64>,
    bin: Vec<i32>,
    context: Vec<i32>,
    species: Vec<i32>,
    ran: Vec<i32>,
    factor_codes: Vec<i32>,
    context_levels: Vec<String>,
    species_levels: Vec<String>,
    ran_levels: Vec<String>,
    factor_names: Vec<String>,
    factor_levels: List,
    time_series: i32,
    bins: i32,
    degrees: Vec<i32>,
    warp_precision: f64,
    buffer_factor: f64,
    max_penalty_at_distance_factor: f64,
    round_none: bool,
) -> RResult<Raw> {
    let tokens = tokens_from_r(
        count,
        bin,
        context,
        species,
        ran,
        factor_codes,
        factor_names.len(),
    )?;
    let design = design_from_r(
        context_levels,
        species_levels,
        ran_levels,
        &factor_names,
        factor_levels,
        time_series,
    )?;
    let settings = Settings {
        warp_precision,
        buffer_factor,
        max_penalty_at_distance_factor,
    };
    let bins = bins_option(bins)?;
    let degrees = index_column(degrees, "degrees")?;
    let model = original::build_model(design, bins, degrees, settings, round_none, &tokens)
        .map_err(Error::input)?;
    Ok(Raw::from_bytes(&saved::encode_model(&model)?))
}

/// Describe the model of a saved model or plan: parameters, treatments,
/// weights, curves, summed table. Every row comes with its labels, so R
/// never relies on the order of the core's arrays.
/// @keywords internal
/// @noRd
#[extendr]
fn model_describe_rust(bytes: Raw) -> RResult<List> {
    let model = decode_model(&bytes)?;
    let design = model.design();
    let table = model.table();
    let structure = model.structure();
    let ran_blocks = table.ran_blocks();

    let roles = model.layout().roles();
    let role_column = |f: &dyn Fn(&ParameterRole) -> Option<String>| -> Vec<Option<String>> {
        roles.iter().map(f).collect()
    };
    let parameters = List::from_pairs(vec![
        ("name", r!(model.parameter_names())),
        (
            "role",
            r!(role_column(&|r| Some(match r {
                ParameterRole::Beta { treatment: 0, .. } => "baseline".into(),
                ParameterRole::Beta { .. } => "beta".into(),
                ParameterRole::Warp { .. } => "warp".into(),
            }))),
        ),
        (
            "component",
            r!(role_column(&|r| Some(match r {
                ParameterRole::Beta { component, .. } => component.name().into(),
                ParameterRole::Warp { kind, .. } => kind.name().into(),
            }))),
        ),
        (
            "context",
            r!(role_column(&|r| match r {
                ParameterRole::Beta { context, .. } => Some(design.contexts()[*context].clone()),
                ParameterRole::Warp { .. } => None,
            })),
        ),
        (
            "species",
            r!(role_column(&|r| match r {
                ParameterRole::Beta { species, .. } | ParameterRole::Warp { species, .. } => {
                    Some(design.species()[*species].clone())
                }
            })),
        ),
        (
            "block",
            r!(roles
                .iter()
                .map(|r| match r {
                    ParameterRole::Beta { block, .. } => Some(*block as i32 + 1),
                    ParameterRole::Warp { .. } => None,
                })
                .collect::<Vec<_>>()),
        ),
        (
            "treatment",
            r!(role_column(&|r| match r {
                ParameterRole::Beta { treatment, .. } => {
                    Some(design.treatments()[*treatment].name.clone())
                }
                ParameterRole::Warp { .. } => None,
            })),
        ),
        (
            "ran",
            r!(role_column(&|r| match r {
                ParameterRole::Warp { ran, .. } => Some(design.ran_levels()[*ran].clone()),
                ParameterRole::Beta { .. } => None,
            })),
        ),
    ]);

    let ran_label = |block: usize| {
        ran_blocks
            .real_of_block(block)
            .map_or(rules::POPULATION_LEVEL, |r| design.ran_levels()[r].as_str())
    };
    let treatment_names = design.treatment_names();
    let keys: Vec<_> = (0..table.row_count())
        .map(|row| table.row_key(row))
        .collect();
    let summed = List::from_pairs(vec![
        (
            "ran",
            r!(keys.iter().map(|k| ran_label(k.block)).collect::<Vec<_>>()),
        ),
        (
            "context",
            r!(keys
                .iter()
                .map(|k| design.contexts()[k.context].as_str())
                .collect::<Vec<_>>()),
        ),
        (
            "species",
            r!(keys
                .iter()
                .map(|k| design.species()[k.species].as_str())
                .collect::<Vec<_>>()),
        ),
        (
            "treatment",
            r!(keys
                .iter()
                .map(|k| treatment_names[k.treatment].as_str())
                .collect::<Vec<_>>()),
        ),
        (
            "bin",
            r!(keys.iter().map(|k| k.bin as i32).collect::<Vec<_>>()),
        ),
        ("count", r!(table.count())),
        ("count_log", r!(table.count_log())),
        ("observed", r!(table.observed().to_vec())),
    ]);
    // One row per curve: its labels, degree and dispersion.
    let (mut curve_context, mut curve_species, mut degree, mut dispersion) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (c, context) in design.contexts().iter().enumerate() {
        for (s, species) in design.species().iter().enumerate() {
            curve_context.push(context.as_str());
            curve_species.push(species.as_str());
            degree.push(structure.degree(c, s) as i32);
            dispersion.push(table.dispersion(c, s));
        }
    }
    let curves = List::from_pairs(vec![
        ("context", r!(curve_context)),
        ("species", r!(curve_species)),
        ("degree", r!(degree)),
        ("dispersion", r!(dispersion)),
    ]);
    let ran_levels: Vec<&str> = (0..ran_blocks.count()).map(ran_label).collect();
    // The design's fields as under "nb", after the parameter table.
    let mut fields: Vec<(&'static str, Robj)> = vec![("parameters", parameters.into())];
    fields.extend(design_fields(design));
    fields.extend([
        ("ran_levels", r!(ran_levels)),
        ("bins", r!(table.bins() as i32)),
        ("curves", curves.into()),
        ("summed", summed.into()),
        ("inf_warp", r!(model.settings().inf_warp())),
    ]);
    Ok(List::from_pairs(fields))
}

/// Predicted log rates (`pred.log`) for every summed row.
/// @keywords internal
/// @noRd
#[extendr]
fn model_predict_rust(bytes: Raw, x: Vec<f64>) -> RResult<Vec<f64>> {
    let model = decode_model(&bytes)?;
    let mut predictions = vec![0.0; model.table().row_count()];
    Objective::new(&model)
        .predict_log(&x, &mut predictions)
        .map_err(Error::input)?;
    Ok(predictions)
}

/// Ψ at curve points (fractional bins allowed) for each parameter vector of
/// `samples` (one after another), sample-major. `block` indexes the model's
/// random levels as `model_describe_rust()` lists them (population included).
/// @keywords internal
/// @noRd
#[extendr]
fn model_curves_rust(
    bytes: Raw,
    samples: Vec<f64>,
    block: Vec<i32>,
    context: Vec<i32>,
    species: Vec<i32>,
    treatment: Vec<i32>,
    x: Vec<f64>,
) -> RResult<Vec<f64>> {
    let model = decode_model(&bytes)?;
    let n = x.len();
    if [block.len(), context.len(), species.len(), treatment.len()]
        .iter()
        .any(|&len| len != n)
    {
        return Err(Error::input(
            "the columns of the curve points differ in length",
        ));
    }
    let (block, context, species, treatment) = (
        index_column(block, "block")?,
        index_column(context, "context")?,
        index_column(species, "species")?,
        index_column(treatment, "treatment")?,
    );
    let points: Vec<CurvePoint> = (0..n)
        .map(|i| CurvePoint {
            block: block[i],
            context: context[i],
            species: species[i],
            treatment: treatment[i],
            x: x[i],
        })
        .collect();
    let count = model.parameter_count();
    if count == 0 || samples.len() % count != 0 {
        return Err(Error::input("samples must hold whole parameter vectors"));
    }
    let mut objective = Objective::new(&model);
    let mut out = Vec::with_capacity(n * samples.len() / count);
    for parameters in samples.chunks(count) {
        out.extend(
            objective
                .curves_at(parameters, &points)
                .map_err(Error::input)?,
        );
    }
    Ok(out)
}

/// Whether `x` is feasible: every boundary distance positive and every
/// predicted log rate finite and at least -0.01.
/// @keywords internal
/// @noRd
#[extendr]
fn model_is_feasible_rust(bytes: Raw, x: Vec<f64>) -> RResult<bool> {
    let model = decode_model(&bytes)?;
    let mut predictions = vec![0.0; model.table().row_count()];
    Objective::new(&model)
        .is_feasible(&x, &mut predictions)
        .map_err(Error::input)
}

/// Per summed row, quantiles of the predicted log rate over parameter
/// samples (`samples`: one parameter vector after another).
/// @keywords internal
/// @noRd
#[extendr]
fn model_prediction_bands_rust(
    bytes: Raw,
    samples: Vec<f64>,
    probabilities: Vec<f64>,
) -> RResult<List> {
    let model = decode_model(&bytes)?;
    let bands = original::bands::prediction_quantiles(&model, &samples, &probabilities)
        .map_err(Error::input)?;
    Ok(List::from_values(bands))
}

/// Objective value, parts, gradient and boundary distances at `x`, with the
/// barrier anchored at `start` (test hook).
/// @keywords internal
/// @noRd
#[extendr]
#[cfg_attr(not(feature = "test-hooks"), allow(unused_variables))]
fn model_objective_rust(bytes: Raw, x: Vec<f64>, start: Vec<f64>) -> RResult<List> {
    #[cfg(feature = "test-hooks")]
    return {
        let model = decode_model(&bytes)?;
        let mut objective = Objective::new(&model);
        objective
            .set_penalty_coefficients(&start)
            .map_err(Error::input)?;
        let mut gradient = vec![0.0; x.len()];
        let value = objective
            .value_and_gradient(&x, &mut gradient)
            .map_err(Error::input)?;
        let nll = objective.nll(&x).map_err(Error::input)?;
        let penalty = objective.penalty(&x).map_err(Error::input)?;
        let distances = objective
            .boundary_distances(&x)
            .map_err(Error::input)?
            .to_vec();
        Ok(list!(
            value = value,
            nll = nll,
            penalty = penalty,
            gradient = gradient,
            distances = distances
        ))
    };
    #[cfg(not(feature = "test-hooks"))]
    Err(super::without_test_hooks("model_objective()"))
}

/// Seconds per value-and-gradient evaluation, timed inside Rust over
/// `repeats` calls (benchmark hook).
/// @keywords internal
/// @noRd
#[extendr]
#[cfg_attr(not(feature = "test-hooks"), allow(unused_variables))]
fn model_time_evaluation_rust(bytes: Raw, x: Vec<f64>, repeats: i32) -> RResult<Vec<f64>> {
    #[cfg(feature = "test-hooks")]
    return {
        let model = decode_model(&bytes)?;
        let repeats = super::count_option(repeats, "repeats")?;
        crate::benchmark::time_evaluations(&model, &x, repeats).map_err(Error::input)
    };
    #[cfg(not(feature = "test-hooks"))]
    Err(super::without_test_hooks("model_time_evaluation_rust()"))
}

extendr_module! {
    mod original;
    fn model_build_rust;
    fn model_describe_rust;
    fn model_predict_rust;
    fn model_curves_rust;
    fn model_is_feasible_rust;
    fn model_prediction_bands_rust;
    fn model_objective_rust;
    fn model_time_evaluation_rust;
}
