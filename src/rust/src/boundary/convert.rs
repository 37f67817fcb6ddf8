//! Conversions shared by the boundary's entry points: named R settings
//! lists, coded token columns, the design from its labels, and the design's
//! fields as R columns.

use super::index_option;
use super::{index_column, RResult};
use crate::data::CodedTokens;
use crate::design::{Design, Factor};
use crate::error::Error;
use crate::rules;
use extendr_api::prelude::*;

/// A named entry of an R settings list.
pub(super) fn entry(settings: &List, name: &str) -> RResult<Robj> {
    settings
        .iter()
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
        .ok_or_else(|| Error::input(format!("internal: setting `{name}` is missing")))
}

pub(super) fn number(settings: &List, name: &str) -> RResult<f64> {
    entry(settings, name)?
        .as_real()
        .or_else(|| entry(settings, name).ok()?.as_integer().map(f64::from))
        .ok_or_else(|| Error::input(format!("setting `{name}` must be a number")))
}

pub(super) fn text(settings: &List, name: &str) -> RResult<String> {
    entry(settings, name)?
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| Error::input(format!("setting `{name}` must be a string")))
}

/// A character setting; NULL gives none.
pub(super) fn strings(settings: &List, name: &str) -> RResult<Vec<String>> {
    let value = entry(settings, name)?;
    if value.is_null() {
        return Ok(Vec::new());
    }
    value
        .as_string_vector()
        .ok_or_else(|| Error::input(format!("setting `{name}` must be strings")))
}

pub(super) fn numbers(settings: &List, name: &str) -> RResult<Vec<f64>> {
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
pub(super) fn optional_number(settings: &List, name: &str) -> RResult<Option<f64>> {
    match settings.iter().find(|(key, _)| *key == name) {
        None => Ok(None),
        Some((_, value)) if value.is_null() => Ok(None),
        Some(_) => number(settings, name).map(Some),
    }
}

/// A count setting: a whole number of at least 1.
pub(super) fn whole_setting(name: &str, value: f64) -> RResult<usize> {
    if value.is_finite() && value >= 1.0 && value.fract() == 0.0 && value <= 1e9 {
        Ok(value as usize)
    } else {
        Err(Error::input(format!(
            "{name} must be a whole number of at least 1, got {value}"
        )))
    }
}

/// Token columns coded from 0 (bins from 1); `factor_codes` holds one
/// column per factor, column-major.
pub(super) fn tokens_from_r(
    count: Vec<f64>,
    bin: Vec<i32>,
    context: Vec<i32>,
    species: Vec<i32>,
    ran: Vec<i32>,
    factor_codes: Vec<i32>,
    factor_count: usize,
) -> RResult<CodedTokens> {
    let n = count.len();
    if factor_count.checked_mul(n) != Some(factor_codes.len()) {
        return Err(Error::input("fixed-effect codes do not match the factors"));
    }
    Ok(CodedTokens {
        count,
        bin,
        context: index_column(context, "context")?,
        species: index_column(species, "species")?,
        ran: index_column(ran, "ran")?,
        factor_levels: factor_codes
            .chunks(n.max(1))
            .take(factor_count)
            .map(|column| index_column(column.to_vec(), "fixed effects"))
            .collect::<RResult<_>>()?,
    })
}

/// The design from R's labels; `time_series` is the 0-based factor index or -1.
pub(super) fn design_from_r(
    context_levels: Vec<String>,
    species_levels: Vec<String>,
    ran_levels: Vec<String>,
    factor_names: &[String],
    factor_levels: List,
    time_series: i32,
) -> RResult<Design> {
    if factor_levels.len() != factor_names.len() {
        return Err(Error::input("fixed-effect codes do not match the factors"));
    }
    let mut factors = Vec::with_capacity(factor_names.len());
    for (f, (name, levels)) in factor_names.iter().zip(factor_levels.values()).enumerate() {
        let levels: Vec<String> = levels
            .as_string_vector()
            .ok_or_else(|| Error::input(format!("levels of factor `{name}` must be strings")))?;
        factors.push(if f as i32 == time_series {
            Factor::time_series(name.clone(), levels)
        } else {
            Factor::new(name.clone(), levels)
        });
    }
    Design::new(context_levels, species_levels, ran_levels, factors).map_err(Error::input)
}

/// The number of bins, checked against the limit.
pub(super) fn bins_option(bins: i32) -> RResult<usize> {
    let bins = index_option(bins, "bins")?;
    if bins == 0 || bins > rules::MAX_BINS {
        return Err(Error::input(format!(
            "a model has between 1 and {} bins, not {bins}",
            rules::MAX_BINS
        )));
    }
    Ok(bins)
}

/// What R needs to know about a design: treatments with their levels, the
/// factors, W, and the labels.
pub(super) fn design_fields(design: &Design) -> Vec<(&'static str, Robj)> {
    let treatment_levels =
        List::from_values(design.factors().iter().enumerate().map(|(f, factor)| {
            design
                .treatments()
                .iter()
                .map(|t| factor.levels[t.levels[f]].clone())
                .collect::<Vec<String>>()
        }));
    let weights = List::from_values(
        (0..design.treatment_count()).map(|predicted| design.weight_row(predicted).to_vec()),
    );
    let time_series: Vec<String> = design
        .factors()
        .iter()
        .filter(|f| f.is_time_series)
        .map(|f| f.name.clone())
        .collect();
    vec![
        ("treatments", r!(design.treatment_names())),
        (
            "factor_names",
            r!(design
                .factors()
                .iter()
                .map(|f| f.name.clone())
                .collect::<Vec<String>>()),
        ),
        (
            "factor_levels",
            List::from_values(design.factors().iter().map(|f| f.levels.clone())).into(),
        ),
        ("time_series", r!(time_series)),
        ("treatment_levels", treatment_levels.into()),
        ("weights", weights.into()),
        ("contexts", r!(design.contexts().to_vec())),
        ("species", r!(design.species().to_vec())),
    ]
}
