//! Wald covariance of a count fit's reported values (model vignette
//! §15.1): the inverse of the observed information H at the
//! estimate, carried from the optimiser's coordinates θ to the reported
//! fixed effects β = W⁻¹ v(θ) and dispersions φ = e^ρ by the delta method.
//!
//! Species are independent, so the covariance is block-diagonal by species;
//! each block is dense. Coordinates held at a bound or not informed by the
//! data have no variance: every value that depends on them gets NaN.

use super::curve::{curve_len, Axis, SLOPE_MAX};
use super::fit::{data_informed, SpeciesFit};
use super::layout::CountLayout;
use super::objective::SpeciesProblem;
use super::settings::{bounds_for, CountFitSettings};
use super::CountModel;
use crate::curve::sigmoid;
use crate::design::Component;

/// The covariance of one species' reported values.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SpeciesCovariance {
    /// Positions in the reported vector (β of the species, then its dispersions).
    pub indices: Vec<usize>,
    /// Row-major, indices.len()².
    pub matrix: Vec<f64>,
    /// The covariance with the random effects held at their estimates
    /// (row-major, like `matrix`): the part of `matrix` that is not due to
    /// the animals' spread, the within-animal share that the Satterthwaite
    /// degrees of freedom of the Wald tests (its diagonal) and of the
    /// gene-level tests (its blocks) need (model vignette §15.1).
    pub conditional: Vec<f64>,
}

/// ∂v/∂θ of one curve's population values (rows: values, columns: θ; both
/// curve_len long, in the order rates, slopes, points).
fn value_jacobian(theta: &[f64], degree: usize, axis: Axis) -> Vec<f64> {
    let m = curve_len(degree);
    let mut jacobian = vec![0.0; m * m];
    for k in 0..=degree {
        jacobian[k * m + k] = 1.0;
    }
    for k in 0..degree {
        let i = degree + 1 + k;
        let logistic = sigmoid(theta[i]);
        jacobian[i * m + i] = SLOPE_MAX * logistic * (1.0 - logistic);
    }
    // q_k = 1 − Π_{j≤k} σ(−θ_j): ∂q_k/∂θ_j = σ(θ_j)(1 − q_k) for j ≤ k.
    let first = 2 * degree + 1;
    let mut rest = 1.0;
    for k in 0..degree {
        rest *= sigmoid(-theta[first + k]);
        for j in 0..=k {
            jacobian[(first + k) * m + first + j] =
                axis.free_width(degree) * sigmoid(theta[first + j]) * rest;
        }
    }
    jacobian
}

/// The Wald covariance of every species' reported values; `None` for a
/// species whose Hessian at the estimate is not positive definite.
pub(crate) fn covariance(
    model: &CountModel,
    fits: &[SpeciesFit],
    settings: &CountFitSettings,
) -> Result<Vec<Option<SpeciesCovariance>>, String> {
    let layout = CountLayout::new(model.design(), model.structure())?;
    let inverse_weights = super::fit::inverse_weights(model)?;
    fits.iter()
        .map(|fit| species_covariance(model, &layout, &inverse_weights, fit, settings))
        .collect()
}

fn species_covariance(
    model: &CountModel,
    layout: &CountLayout,
    inverse_weights: &[f64],
    fit: &SpeciesFit,
    settings: &CountFitSettings,
) -> Result<Option<SpeciesCovariance>, String> {
    if fit.has_failed() {
        return Ok(None);
    }
    let s = fit.species;
    let free = fit.sigma.map(|v| v > 0.0);
    let problem = SpeciesProblem::new(model, s, free).with_settings(settings);
    let informed = data_informed(
        &SpeciesProblem::new(model, s, free)
            .without_dispersion(settings.fixed_dispersion.is_some()),
        &fit.state,
        fit.sigma,
    );
    let species_layout = &problem.layout;
    let n = species_layout.len;
    let mut gradient = vec![0.0; n];
    let mut hessian = problem.hessian_shape();
    problem.evaluate(&fit.state, fit.sigma, &mut gradient, &mut hessian);
    // Coordinates without variance: at a bound, or not informed.
    let bounds = bounds_for(&problem);
    let x = fit.state.to_vector(species_layout);
    let mut fixed = vec![false; n];
    for i in 0..n {
        let at_bound = x[i] <= bounds.lower[i] || x[i] >= bounds.upper[i];
        if at_bound || !informed[i] {
            fixed[i] = true;
            super::solver::pin(&mut hessian, i);
        }
    }
    let mut conditional_hessian = hessian.clone();
    for index in species_layout.u_index.iter().flatten().flatten() {
        super::solver::pin(&mut conditional_hessian, *index);
    }
    let Some(factor) = hessian.factor(&vec![0.0; n]) else {
        return Ok(None);
    };
    let Some(conditional_factor) = conditional_hessian.factor(&vec![0.0; n]) else {
        return Ok(None);
    };
    // Columns of H⁻¹ for the θ and ρ coordinates we need.
    let shape = model.table().shape();
    let treatments = shape.treatments;
    let axis = model.axis();
    // Reported values of the species and their gradients in x.
    let mut indices = Vec::new();
    let mut gradients: Vec<Vec<(usize, f64)>> = Vec::new();
    for c in 0..shape.contexts {
        let degree = model.structure().degree(c, s);
        let jacobians: Vec<Option<Vec<f64>>> = (0..treatments)
            .map(|t| {
                let curve = c * treatments + t;
                species_layout.curve_offsets[curve]
                    .map(|_| value_jacobian(&fit.state.theta[curve], degree, axis))
            })
            .collect();
        let m = curve_len(degree);
        for component in Component::ALL {
            for k in 0..component.count(degree) {
                let position = component.position(degree, k);
                for i in 0..treatments {
                    let Some(index) = layout.original.beta_index(component, c, s, k, i) else {
                        continue;
                    };
                    let mut entries = Vec::new();
                    let mut defined = true;
                    for t in 0..treatments {
                        let weight = inverse_weights[i * treatments + t];
                        if weight == 0.0 {
                            continue;
                        }
                        let curve = c * treatments + t;
                        match (&jacobians[t], species_layout.curve_offsets[curve]) {
                            (Some(jacobian), Some(offset)) => {
                                for j in 0..m {
                                    let d = jacobian[position * m + j];
                                    if d != 0.0 {
                                        if fixed[offset + j] {
                                            defined = false;
                                        }
                                        entries.push((offset + j, weight * d));
                                    }
                                }
                            }
                            _ => defined = false,
                        }
                    }
                    indices.push(index);
                    gradients.push(if defined { entries } else { Vec::new() });
                }
            }
        }
        if let (Some(index), Some(rho)) =
            (layout.dispersion_index(c, s), species_layout.rho_index[c])
        {
            indices.push(index);
            let phi = fit.state.rho[c].exp();
            gradients.push(if fixed[rho] {
                Vec::new()
            } else {
                vec![(rho, phi)]
            });
        }
    }
    // Cov = G H⁻¹ Gᵀ, with H⁻¹ applied column by column to Gᵀ's columns.
    let count = indices.len();
    let mut solved: Vec<Option<(Vec<f64>, Vec<f64>)>> = Vec::with_capacity(count);
    for entries in &gradients {
        if entries.is_empty() {
            solved.push(None);
            continue;
        }
        let mut rhs = vec![0.0; n];
        for &(j, d) in entries {
            rhs[j] += d;
        }
        solved.push(Some((factor.solve(&rhs), conditional_factor.solve(&rhs))));
    }
    let mut matrix = vec![f64::NAN; count * count];
    let mut conditional = vec![f64::NAN; count * count];
    for a in 0..count {
        let Some((column, within)) = &solved[a] else {
            continue;
        };
        for b in 0..count {
            if gradients[b].is_empty() {
                continue;
            }
            matrix[a * count + b] = gradients[b].iter().map(|&(j, d)| d * column[j]).sum();
            conditional[a * count + b] = gradients[b].iter().map(|&(j, d)| d * within[j]).sum();
        }
    }
    Ok(Some(SpeciesCovariance {
        indices,
        matrix,
        conditional,
    }))
}

#[cfg(test)]
mod tests {
    use super::super::curve::CurveValues;
    use super::super::fit::fit_species;
    use super::super::tests_support::{simulate, Simulation};
    use super::*;

    #[test]
    fn the_value_jacobian_matches_finite_differences() {
        let axis = Axis {
            lower: 0.5,
            width: 50.0,
            gap: 1.5,
        };
        let degree = 3;
        let theta = vec![1.0, 2.0, 1.5, 0.7, -0.4, 0.2, 0.9, -0.3, 0.5, 1.1];
        let jacobian = value_jacobian(&theta, degree, axis);
        let m = curve_len(degree);
        let flat = |t: &[f64]| {
            let v = CurveValues::from_theta(t, degree, axis);
            [v.rates, v.slopes, v.points].concat()
        };
        for j in 0..m {
            let h = 1e-6;
            let (mut up, mut down) = (theta.clone(), theta.clone());
            up[j] += h;
            down[j] -= h;
            let (a, b) = (flat(&up), flat(&down));
            for i in 0..m {
                let numeric = (a[i] - b[i]) / (2.0 * h);
                assert!((jacobian[i * m + j] - numeric).abs() < 1e-6 * numeric.abs().max(1.0));
            }
        }
    }

    #[test]
    fn wald_standard_errors_match_the_spread_of_estimates_over_simulations() {
        // The Wald variance of a rate effect against the variance of its
        // estimate over data sets drawn from one truth (same curves, fresh
        // counts): a check of the whole chain H⁻¹ → θ → β.
        let spec = Simulation {
            bins: 30,
            species: 1,
            degrees: vec![1],
            animals: 4,
            sigma: [0.0; 3],
            cells_per_key: 4,
            missing: 0.0,
            ..Simulation::default()
        };
        let settings = CountFitSettings {
            fixed_sigma: Some([0.0; 3]),
            ..CountFitSettings::default()
        };
        let mut estimates = Vec::new();
        let mut variances = Vec::new();
        for seed in 0..40 {
            let drawn = Simulation {
                count_seed: Some(1000 + seed),
                ..spec.clone()
            };
            let (model, _) = simulate(&drawn, 77);
            let fit = fit_species(&model, 0, None, None, &settings).unwrap();
            let layout = CountLayout::new(model.design(), model.structure()).unwrap();
            let effect = layout
                .original
                .beta_index(Component::Rate, 0, 0, 0, 1)
                .unwrap();
            let reported =
                super::super::report::reported_parameters(&model, std::slice::from_ref(&fit))
                    .unwrap();
            let cov = covariance(&model, &[fit], &settings)
                .unwrap()
                .remove(0)
                .unwrap();
            let at = cov.indices.iter().position(|&i| i == effect).unwrap();
            estimates.push(reported[effect]);
            variances.push(cov.matrix[at * cov.indices.len() + at]);
        }
        let n = estimates.len() as f64;
        let mean = estimates.iter().sum::<f64>() / n;
        let spread = estimates.iter().map(|e| (e - mean).powi(2)).sum::<f64>() / (n - 1.0);
        let wald = variances.iter().sum::<f64>() / n;
        // With 40 data sets the sample variance is within ±45 % of the truth
        // (2 standard errors of a chi-square with 39 df).
        assert!(
            (spread / wald - 1.0).abs() < 0.45,
            "spread {spread}, wald {wald}"
        );
    }

    #[test]
    fn the_within_animal_share_is_a_part_of_the_covariance() {
        // Holding the random effects at their estimates removes information
        // about nothing and uncertainty about the animals: V − V_within is
        // positive semidefinite (H⁻¹ restricted to the fixed coordinates
        // dominates the inverse of their own block, a Schur complement
        // fact), and both matrices are symmetric. Without random effects the
        // two are equal.
        let (model, _) = simulate(
            &Simulation {
                species: 1,
                degrees: vec![1],
                animals: 6,
                sigma: [0.3, 0.1, 0.2],
                missing: 0.0,
                ..Simulation::default()
            },
            21,
        );
        let settings = CountFitSettings::default();
        let fit = fit_species(&model, 0, None, None, &settings).unwrap();
        assert!(
            fit.sigma.iter().any(|&s| s > 0.0),
            "the fit has random effects"
        );
        let cov = covariance(&model, &[fit], &settings)
            .unwrap()
            .remove(0)
            .unwrap();
        let k = cov.indices.len();
        let defined: Vec<usize> = (0..k)
            .filter(|&a| cov.matrix[a * k + a].is_finite())
            .collect();
        assert!(defined.len() >= 4);
        let between = |a: usize, b: usize| cov.matrix[a * k + b] - cov.conditional[a * k + b];
        for &a in &defined {
            for &b in &defined {
                let scale = (cov.matrix[a * k + a] * cov.matrix[b * k + b]).sqrt();
                assert!(
                    (cov.conditional[a * k + b] - cov.conditional[b * k + a]).abs() < 1e-9 * scale
                );
            }
        }
        let mut rng = crate::test_rng::SplitMix(5);
        let mut some_spread = false;
        for _ in 0..200 {
            let x: Vec<f64> = defined.iter().map(|_| rng.normal()).collect();
            let (mut spread, mut total) = (0.0, 0.0);
            for (i, &a) in defined.iter().enumerate() {
                for (j, &b) in defined.iter().enumerate() {
                    spread += x[i] * x[j] * between(a, b);
                    total += x[i] * x[j] * cov.matrix[a * k + b];
                }
            }
            assert!(spread >= -1e-9 * total, "x'(V - V_within)x = {spread}");
            some_spread |= spread > 1e-3 * total;
        }
        assert!(some_spread, "the animals' spread adds to the variance");

        let settings = CountFitSettings {
            fixed_sigma: Some([0.0; 3]),
            ..CountFitSettings::default()
        };
        let fit = fit_species(&model, 0, None, None, &settings).unwrap();
        let cov = covariance(&model, &[fit], &settings)
            .unwrap()
            .remove(0)
            .unwrap();
        for (v, w) in cov.matrix.iter().zip(&cov.conditional) {
            assert!(v.is_nan() && w.is_nan() || (v - w).abs() <= 1e-12 * v.abs().max(1e-300));
        }
    }
}
