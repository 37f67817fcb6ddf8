//! What the count model's statistics need from the core: the Wald
//! covariance, the nesting check and replicates of a likelihood-ratio test,
//! and the objective at a point (for tests of the optimum).

use super::nb::count_plan;
use super::RResult;
use crate::error::Error;
use crate::nb::covariance::covariance;
use crate::nb::objective::SpeciesProblem;
use crate::nb::replicate;
use extendr_api::prelude::*;

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
    mod nb_inference;
    fn count_vcov_rust;
    fn count_check_nested_rust;
    fn count_lr_replicate_rust;
    fn count_objective_rust;
}
