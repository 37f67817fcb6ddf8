//! How a count-model bootstrap replicate redraws the data (model vignette
//! §14):
//! - `Cells`: every row's tokens with replacement from its own pool (the
//!   original's scheme: cell-to-cell noise only);
//! - `Animals`: the animals with replacement within the groups of animals
//!   that share their between-animal factor levels (a hierarchical
//!   bootstrap of the top level), each drawn animal's data kept whole;
//! - `Parametric`: new random effects from their fitted normal distribution
//!   and new counts from the fitted negative binomial at every observed row.

use super::curve::{BinDerivatives, WarpedCurve};
use super::family::rate;
use super::pipeline::CountEstimate;
use super::CountModel;
use crate::resample::draws::{negative_binomial, normal};
use crate::resample::Resampling;
use crate::streams::TaskStream;

/// Whether an animal has an observed row in (context, treatment).
pub(crate) fn animal_has_data(
    model: &CountModel,
    animal: usize,
    context: usize,
    treatment: usize,
) -> bool {
    let table = model.table();
    let first = table.block_key(animal, context, treatment);
    table.observed()[first..first + table.shape().bins]
        .iter()
        .any(|&o| o)
}

/// The animals' bootstrap groups (see [`crate::resample`]).
pub(crate) fn animal_groups(model: &CountModel) -> Vec<usize> {
    crate::resample::animal_groups(
        model.design(),
        model.table().shape().ran_levels,
        |r, c, t| animal_has_data(model, r, c, t),
    )
}

/// Per factor: whether it varies between animals only.
pub(crate) fn between_animal_factors(model: &CountModel) -> Vec<bool> {
    crate::resample::between_animal_factors(
        model.design(),
        model.table().shape().ran_levels,
        |r, c, t| animal_has_data(model, r, c, t),
    )
}

/// Redraws `model`'s data in place for one replicate; `stream` is the
/// replicate's own random stream. `estimate` is the full-data fit (the
/// parametric scheme draws from it).
pub(crate) fn redraw(
    model: &mut CountModel,
    estimate: &CountEstimate,
    scheme: Resampling,
    stream: &mut TaskStream,
) {
    match scheme {
        Resampling::Cells => model
            .table_mut()
            .resample_pools(|n| stream.below(n as u64) as usize),
        Resampling::Animals => {
            let groups = animal_groups(model);
            let mapping: Vec<usize> = groups
                .iter()
                .map(|&g| {
                    let members: Vec<usize> =
                        (0..groups.len()).filter(|&a| groups[a] == g).collect();
                    members[stream.below(members.len() as u64) as usize]
                })
                .collect();
            let source = model.table().clone();
            model.table_mut().copy_animals(&source, &mapping);
        }
        Resampling::Parametric => simulate_counts(model, estimate, stream),
    }
}

/// New random effects u ~ N(0, σ̂²) and counts y ~ NB(E·r(Ψ'), E/φ̂) at every
/// observed row, species by species.
fn simulate_counts(model: &mut CountModel, estimate: &CountEstimate, stream: &mut TaskStream) {
    let shape = model.table().shape();
    let axis = model.axis();
    for fit in &estimate.species {
        let s = fit.species;
        let u: Vec<[f64; 3]> = (0..shape.ran_levels)
            .map(|_| {
                fit.sigma
                    .map(|sd| if sd > 0.0 { sd * normal(stream) } else { 0.0 })
            })
            .collect();
        let mut draws = Vec::new();
        {
            let table = model.table();
            let (exposures, observed) = (table.exposures(s), table.observed());
            for r in 0..shape.ran_levels {
                for c in 0..shape.contexts {
                    let degree = model.structure().degree(c, s);
                    let dispersion = fit.state.rho[c].exp();
                    for t in 0..shape.treatments {
                        let first = table.block_key(r, c, t);
                        if !observed[first..first + shape.bins].iter().any(|&o| o) {
                            continue;
                        }
                        let mut curve = WarpedCurve::new(degree);
                        curve.set(&fit.state.theta[c * shape.treatments + t], u[r], axis);
                        let mut bin = BinDerivatives::new(degree);
                        for b in 0..shape.bins {
                            let key = first + b;
                            if !observed[key] {
                                continue;
                            }
                            let psi = bin.evaluate(curve.values(), (b + 1) as f64);
                            let exposure = exposures[key];
                            let mean = exposure * rate(psi).value;
                            draws.push((
                                key,
                                negative_binomial(stream, mean, exposure / dispersion),
                            ));
                        }
                    }
                }
            }
        }
        let counts = model.table_mut().counts_mut(s);
        for (key, y) in draws {
            counts[key] = y;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::pipeline::fit_all;
    use super::super::settings::CountFitSettings;
    use super::super::tests_support::{simulate, Simulation};
    use super::*;

    #[test]
    fn crossed_animals_form_one_group_and_factors_are_within() {
        let (model, _) = simulate(&Simulation::default(), 1);
        assert_eq!(between_animal_factors(&model), vec![false]);
        assert!(animal_groups(&model).iter().all(|&g| g == 0));
    }

    #[test]
    fn an_animal_draw_copies_whole_animals_within_groups() {
        let (model, _) = simulate(&Simulation::default(), 2);
        let estimate = fit_all(&model, None, None, &CountFitSettings::default()).unwrap();
        let mut replicate = model.clone();
        let mut stream = TaskStream::new(5, 1);
        redraw(&mut replicate, &estimate, Resampling::Animals, &mut stream);
        let shape = model.table().shape();
        let per_animal = shape.contexts * shape.treatments * shape.bins;
        for slot in 0..shape.ran_levels {
            let block = |m: &CountModel, a: usize| {
                m.table().counts(0)[a * per_animal..(a + 1) * per_animal].to_vec()
            };
            let copied = block(&replicate, slot);
            assert!(
                (0..shape.ran_levels).any(|a| block(&model, a) == copied),
                "slot {slot}"
            );
        }
        assert!(replicate.table().validate().is_ok());
    }

    #[test]
    fn parametric_counts_follow_the_fitted_mean() {
        let spec = Simulation {
            cells_per_key: 20,
            ..Simulation::default()
        };
        let (model, _) = simulate(&spec, 3);
        let estimate = fit_all(&model, None, None, &CountFitSettings::default()).unwrap();
        let mut stream = TaskStream::new(9, 4);
        let (mut total_simulated, mut total_observed) = (0.0, 0.0);
        for _ in 0..20 {
            let mut replicate = model.clone();
            redraw(
                &mut replicate,
                &estimate,
                Resampling::Parametric,
                &mut stream,
            );
            total_simulated += replicate.table().counts(0).iter().sum::<f64>();
            total_observed += model.table().counts(0).iter().sum::<f64>();
        }
        // The fitted model reproduces the total count to within a few per cent.
        assert!((total_simulated / total_observed - 1.0).abs() < 0.05);
    }
}
