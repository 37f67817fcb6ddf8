//! The reported vector of a count fit: β, random effects, standard
//! deviations and dispersions, from the species' fits (model vignette §8).

use super::curve::CurveValues;
use super::fit::{inverse_weights, SpeciesFit};
use super::layout::CountLayout;
use super::CountModel;
use crate::design::{Component, WarpKind};

/// The reported vector (see [`CountLayout`]) of a fit, one entry per
/// species in `fits`. β that involve a curve that could not be estimated
/// (no observed row) are NaN.
pub(crate) fn reported_parameters(
    model: &CountModel,
    fits: &[SpeciesFit],
) -> Result<Vec<f64>, String> {
    let design = model.design();
    let layout = CountLayout::new(design, model.structure())?;
    let shape = model.table().shape();
    let treatments = shape.treatments;
    let inverse = inverse_weights(model)?;
    let mut out = vec![f64::NAN; layout.len()];
    for fit in fits {
        let s = fit.species;
        for c in 0..shape.contexts {
            let degree = model.structure().degree(c, s);
            let axis = model.axis();
            let curve_values: Vec<CurveValues> = (0..treatments)
                .map(|t| {
                    CurveValues::from_theta(&fit.state.theta[c * treatments + t], degree, axis)
                })
                .collect();
            for component in Component::ALL {
                for k in 0..component.count(degree) {
                    let value_of = |values: &CurveValues| match component {
                        Component::Rate => values.rates[k],
                        Component::Slope => values.slopes[k],
                        Component::Point => values.points[k],
                    };
                    let position = component.position(degree, k);
                    let per_treatment: Vec<Option<f64>> = (0..treatments)
                        .map(|t| {
                            let informed = fit.curve_informed[c * treatments + t][position];
                            informed.then(|| value_of(&curve_values[t]))
                        })
                        .collect();
                    for i in 0..treatments {
                        let mut beta = 0.0;
                        for (t, value) in per_treatment.iter().enumerate() {
                            let weight = inverse[i * treatments + t];
                            if weight == 0.0 {
                                continue;
                            }
                            beta += weight * value.unwrap_or(f64::NAN);
                        }
                        if let Some(index) = layout.original.beta_index(component, c, s, k, i) {
                            out[index] = beta;
                        }
                    }
                }
            }
            if let Some(index) = layout.dispersion_index(c, s) {
                out[index] = if fit.rho_informed[c] {
                    fit.state.rho[c].exp()
                } else {
                    f64::NAN
                };
            }
        }
        // A failed species' warps and standard deviations were not estimated.
        let estimated = |value: f64| if fit.has_failed() { f64::NAN } else { value };
        for (r, u) in fit.state.u.iter().enumerate() {
            for kind in WarpKind::ALL {
                if let Some(index) = layout.original.warp_index(kind, s, r) {
                    out[index] = estimated(u[warp_slot(kind)]);
                }
            }
        }
        for kind in WarpKind::ALL {
            if let Some(index) = layout.deviation_index(kind, s) {
                out[index] = estimated(fit.sigma[warp_slot(kind)]);
            }
        }
    }
    Ok(out)
}

/// Position of a warp kind among an animal's three random effects.
pub(crate) fn warp_slot(kind: WarpKind) -> usize {
    match kind {
        WarpKind::Point => super::curve::U_POINT,
        WarpKind::Rate => super::curve::U_RATE,
        WarpKind::Slope => super::curve::U_SLOPE,
    }
}
