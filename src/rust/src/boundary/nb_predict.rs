//! Predictions of a fitted count plan for R: per-row predictions, curves at
//! any bin with their gradients, and bootstrap bands.

use super::nb::count_plan;
use super::{index_column, RResult};
use crate::error::Error;
use crate::nb::pipeline::CountPlan;
use crate::nb::predict;
use crate::resample::ReplicatePlan;
use extendr_api::prelude::*;

/// Ψ of the observed rows (in the summed table's order, as
/// `count_summed_table_rust` writes it) and of the
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
/// vector as sparse triplets (`point`, `index`, 1-based; `value`; repeated
/// pairs add), for the delta method on panels, where a dense points ×
/// parameters matrix would not fit.
/// @keywords internal
/// @noRd
#[extendr]
fn count_curve_gradient_entries_rust(
    plan: Raw,
    parameters: Vec<f64>,
    context: Vec<i32>,
    species: Vec<i32>,
    treatment: Vec<i32>,
    x: Vec<f64>,
) -> RResult<List> {
    let plan = count_plan(&plan)?;
    let points = curve_points(vec![-1; x.len()], context, species, treatment, x)?;
    let (values, entries) = predict::population_gradient_entries(&plan.model, &parameters, &points)
        .map_err(Error::input)?;
    let one_based = |i: usize| i32::try_from(i + 1).map_err(|_| Error::input("too many points"));
    let point = entries
        .iter()
        .map(|e| one_based(e.point))
        .collect::<RResult<Vec<_>>>()?;
    let index = entries
        .iter()
        .map(|e| one_based(e.index))
        .collect::<RResult<Vec<_>>>()?;
    let value: Vec<f64> = entries.iter().map(|e| e.value).collect();
    Ok(list!(
        psi = values,
        point = point,
        index = index,
        value = value
    ))
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

extendr_module! {
    mod nb_predict;
    fn count_predict_rust;
    fn count_curves_rust;
    fn count_curve_gradient_entries_rust;
    fn count_bands_rust;
}
