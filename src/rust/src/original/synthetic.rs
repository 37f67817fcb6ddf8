//! End-to-end checks of the objective on synthetic data: random designs,
//! tokens drawn from known curves, and the analytic gradient against central
//! finite differences.

use super::objective::{
    row_log_likelihood, CurvePoint, Model, Objective, Settings, PSEUDO_INFINITY,
};
use crate::curve::{BlockCurve, WarpFactors};
use crate::data::summed::{SummedTable, TableShape, TokenColumns};
use crate::design::{
    components_per_block, Component, Design, Factor, ParameterLayout, Structure, WarpKind,
};
use crate::numeric::special::ln_gamma;
pub(crate) use crate::test_rng::SplitMix;

#[derive(Clone, Copy, Debug)]
pub(crate) enum Factors {
    Binary,
    TimeSeries,
    BinaryAndTimeSeries,
}

pub(crate) fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(|v| v.to_string()).collect()
}

pub(crate) fn labels(prefix: &str, count: usize) -> Vec<String> {
    (1..=count).map(|i| format!("{prefix}{i}")).collect()
}

pub(crate) struct Case {
    pub(crate) model: Model,
    pub(crate) truth: Vec<f64>,
}

pub(crate) const BINS: usize = 30;

/// Predicted log rate of one block straight from the parameter vector, by a
/// route independent of the objective's workspace.
pub(crate) fn reference_curve(
    design: &Design,
    layout: &ParameterLayout,
    x: &[f64],
    (context, species, treatment): (usize, usize, usize),
    warped_ran: Option<usize>,
) -> BlockCurve {
    let degree = layout.degree(context, species);
    let mut unwarped = vec![0.0; components_per_block(degree)];
    for component in Component::ALL {
        for k in 0..component.count(degree) {
            let mut z = 0.0;
            for (i, w) in design.weight_row(treatment).iter().enumerate() {
                z += w * x[layout
                    .beta_index(component, context, species, k, i)
                    .unwrap()];
            }
            unwarped[component.position(degree, k)] = z;
        }
    }
    let factors = match warped_ran {
        Some(r) => WarpFactors {
            point: x[layout.warp_index(WarpKind::Point, species, r).unwrap()],
            rate: x[layout.warp_index(WarpKind::Rate, species, r).unwrap()],
            slope: x[layout.warp_index(WarpKind::Slope, species, r).unwrap()],
        },
        None => WarpFactors::default(),
    };
    let inf_warp = Settings::default().inf_warp();
    let bounds = crate::curve::WarpBounds {
        rate: inf_warp,
        slope: inf_warp,
        point: BINS as f64,
    };
    let mut curve = BlockCurve::with_capacity(degree);
    curve.set(degree, &unwarped, factors, bounds);
    curve
}

/// A random design (1–3 contexts, 1–4 species, degrees 0–3), true
/// parameters with rates of about 1–50 counts, and tokens drawn around them.
pub(crate) fn build_case(seed: u64, factors: Factors, ran_levels: usize) -> Case {
    let mut rng = SplitMix(seed);
    let contexts = 1 + rng.below(3);
    let species = 1 + rng.below(4);
    let factor_list = match factors {
        Factors::Binary => vec![Factor::new("side", strings(&["left", "right"]))],
        Factors::TimeSeries => vec![Factor::time_series("age", strings(&["7", "12", "18"]))],
        Factors::BinaryAndTimeSeries => vec![
            Factor::new("side", strings(&["left", "right"])),
            Factor::time_series("age", strings(&["7", "12", "18"])),
        ],
    };
    let degrees: Vec<usize> = (0..contexts * species).map(|_| rng.below(4)).collect();
    build_case_from(
        &mut rng,
        contexts,
        species,
        degrees,
        factor_list,
        ran_levels,
    )
}

/// A design with the given degrees (context-major), true parameters with
/// rates of about 1–50 counts, and tokens drawn around them.
pub(crate) fn build_case_from(
    rng: &mut SplitMix,
    contexts: usize,
    species: usize,
    degrees: Vec<usize>,
    factors: Vec<Factor>,
    ran_levels: usize,
) -> Case {
    let design = Design::new(
        labels("ctx", contexts),
        labels("gene", species),
        labels("mouse", ran_levels),
        factors,
    )
    .unwrap();
    let structure = Structure::new(contexts, species, degrees).unwrap();
    let layout = ParameterLayout::new(&design, &structure).unwrap();
    let treatments = design.treatment_count();

    let mut truth = vec![0.0; layout.len()];
    for c in 0..contexts {
        for s in 0..species {
            let degree = layout.degree(c, s);
            for k in 0..=degree {
                for i in 0..treatments {
                    let index = layout.beta_index(Component::Rate, c, s, k, i).unwrap();
                    truth[index] = if i == 0 {
                        rng.between(1.0, 3.5)
                    } else {
                        rng.between(-0.15, 0.15)
                    };
                }
            }
            for k in 0..degree {
                for i in 0..treatments {
                    let slope = layout.beta_index(Component::Slope, c, s, k, i).unwrap();
                    truth[slope] = if i == 0 {
                        rng.between(0.3, 0.9)
                    } else {
                        rng.between(-0.05, 0.05)
                    };
                    let point = layout.beta_index(Component::Point, c, s, k, i).unwrap();
                    let spacing = BINS as f64 / (degree + 1) as f64;
                    truth[point] = if i == 0 {
                        spacing * (k + 1) as f64 + rng.between(-0.5, 0.5)
                    } else {
                        rng.between(-0.3, 0.3)
                    };
                }
            }
        }
    }
    for s in 0..species {
        for r in 0..design.ran_blocks().warped_levels() {
            for kind in WarpKind::ALL {
                truth[layout.warp_index(kind, s, r).unwrap()] = rng.between(-0.1, 0.1);
            }
        }
    }

    let mut count = Vec::new();
    let mut bin = Vec::new();
    let mut context = Vec::new();
    let mut species_column = Vec::new();
    let mut ran = Vec::new();
    let mut treatment = Vec::new();
    let ran_blocks = design.ran_blocks();
    for r in 0..ran_levels {
        let warped = ran_blocks.warped_of_block(ran_blocks.block_of_real(r));
        for c in 0..contexts {
            for s in 0..species {
                for t in 0..treatments {
                    let mut curve = reference_curve(&design, &layout, &truth, (c, s, t), warped);
                    for b in 1..=BINS {
                        if rng.uniform() < 0.05 {
                            continue; // an empty (NA) cell
                        }
                        let rate = curve.evaluate(b as f64).exp_m1();
                        let tokens = 1 + rng.below(3);
                        for _ in 0..tokens {
                            let noise = rng.between(-0.4, 0.4).exp();
                            count.push(rng.poisson(rate * noise / tokens as f64));
                            bin.push(b as i32);
                            context.push(c);
                            species_column.push(s);
                            ran.push(r);
                            treatment.push(t);
                        }
                    }
                }
            }
        }
    }
    let shape = TableShape {
        bins: BINS,
        contexts,
        species,
        ran_levels,
        treatments,
    };
    let columns = TokenColumns {
        count: &count,
        bin: &bin,
        context: &context,
        species: &species_column,
        ran: &ran,
        treatment: &treatment,
    };
    let table = SummedTable::new(shape, columns, true).unwrap();
    let model = Model::new(table, design, structure, Settings::default()).unwrap();
    Case { model, truth }
}

/// A feasible point near the truth, so the penalty terms differ from their start values.
pub(crate) fn perturbed(truth: &[f64], seed: u64) -> Vec<f64> {
    let mut rng = SplitMix(seed ^ 0xD1B5_4A32_D192_ED03);
    truth
        .iter()
        .map(|&v| v + rng.between(-0.02, 0.02) * v.abs().max(0.1))
        .collect()
}

fn norm(v: &[f64]) -> f64 {
    v.iter().map(|a| a * a).sum::<f64>().sqrt()
}

fn assert_gradient_matches_finite_differences(case: &Case, seed: u64) {
    let mut objective = Objective::new(&case.model);
    objective.set_penalty_coefficients(&case.truth).unwrap();
    let x = perturbed(&case.truth, seed);
    let mut gradient = vec![0.0; x.len()];
    let value = objective.value_and_gradient(&x, &mut gradient).unwrap();
    assert!(
        value < PSEUDO_INFINITY,
        "seed {seed}: the test point is capped"
    );
    assert!(objective
        .boundary_distances(&x)
        .unwrap()
        .iter()
        .all(|&d| d > 0.0));
    assert_eq!(objective.value(&x).unwrap(), value);

    let mut finite_differences = vec![0.0; x.len()];
    let mut moved = x.clone();
    for i in 0..x.len() {
        let h = 1e-6 * x[i].abs().max(1.0);
        moved[i] = x[i] + h;
        let up = objective.value(&moved).unwrap();
        moved[i] = x[i] - h;
        let down = objective.value(&moved).unwrap();
        moved[i] = x[i];
        finite_differences[i] = (up - down) / (2.0 * h);
    }
    let difference: Vec<f64> = gradient
        .iter()
        .zip(&finite_differences)
        .map(|(g, f)| g - f)
        .collect();
    let fd_norm = norm(&finite_differences);
    assert!(
        norm(&difference) <= 1e-6 * fd_norm.max(1.0),
        "seed {seed}: ‖g − fd‖ = {:e}, ‖fd‖ = {fd_norm:e}",
        norm(&difference)
    );
    let names = case.model.parameter_names();
    for i in 0..x.len() {
        let fd = finite_differences[i];
        assert!(
            (gradient[i] - fd).abs() <= 1e-5 * fd.abs().max(1.0),
            "seed {seed}, {}: analytic {:e}, finite difference {fd:e}",
            names[i],
            gradient[i]
        );
    }
}

#[test]
fn gradient_matches_finite_differences_on_random_designs() {
    let factor_sets = [
        Factors::Binary,
        Factors::TimeSeries,
        Factors::BinaryAndTimeSeries,
    ];
    for seed in 0..12u64 {
        let factors = factor_sets[seed as usize % 3];
        let ran_levels = if (seed / 3) % 2 == 0 { 4 } else { 1 };
        let case = build_case(seed, factors, ran_levels);
        assert_gradient_matches_finite_differences(&case, seed);
    }
}

#[test]
fn predictions_and_nll_agree_with_a_direct_computation() {
    for (seed, ran_levels) in [(21u64, 4usize), (22, 1)] {
        let case = build_case(seed, Factors::BinaryAndTimeSeries, ran_levels);
        let model = &case.model;
        let table = model.table();
        let shape = table.shape();
        let x = perturbed(&case.truth, seed);
        let mut objective = Objective::new(model);
        let mut predictions = vec![0.0; table.row_count()];
        objective.predict_log(&x, &mut predictions).unwrap();

        let mut expected_nll = 0.0;
        let ran_blocks = table.ran_blocks();
        for block in 0..ran_blocks.count() {
            for c in 0..shape.contexts {
                for s in 0..shape.species {
                    for t in 0..shape.treatments {
                        let warped = ran_blocks.warped_of_block(block);
                        let mut curve =
                            reference_curve(model.design(), model.layout(), &x, (c, s, t), warped);
                        for b in 1..=shape.bins {
                            let row = table.row_index(block, c, s, t, b).unwrap();
                            let mu = curve.evaluate(b as f64);
                            assert!((predictions[row] - mu).abs() <= 1e-12 * mu.abs().max(1.0));
                            if table.observed()[row] {
                                let y = table.count_log()[row];
                                let term = row_log_likelihood(
                                    y,
                                    mu,
                                    table.dispersion(c, s),
                                    ln_gamma(y + 1.0),
                                );
                                expected_nll -= term.log_likelihood;
                            }
                        }
                    }
                }
            }
        }
        let nll = objective.nll(&x).unwrap();
        assert!((nll - expected_nll).abs() <= 1e-10 * expected_nll.abs());
        assert!(nll > 0.0);
        let mut feasibility_buffer = vec![0.0; table.row_count()];
        assert!(objective.is_feasible(&x, &mut feasibility_buffer).unwrap());
    }
}

#[test]
fn curves_at_fractional_bins_follow_the_reference_curve_and_match_predictions_at_whole_bins() {
    let case = build_case(23, Factors::BinaryAndTimeSeries, 3);
    let model = &case.model;
    let table = model.table();
    let shape = table.shape();
    let x = perturbed(&case.truth, 23);
    let mut objective = Objective::new(model);
    let mut predictions = vec![0.0; table.row_count()];
    objective.predict_log(&x, &mut predictions).unwrap();
    let ran_blocks = table.ran_blocks();
    let mut points = Vec::new();
    let mut expected = Vec::new();
    for block in 0..ran_blocks.count() {
        for c in 0..shape.contexts {
            for s in 0..shape.species {
                for t in 0..shape.treatments {
                    let warped = ran_blocks.warped_of_block(block);
                    let mut curve =
                        reference_curve(model.design(), model.layout(), &x, (c, s, t), warped);
                    for position in [1.0, 2.5, 7.25, shape.bins as f64 - 0.5, shape.bins as f64] {
                        points.push(CurvePoint {
                            block,
                            context: c,
                            species: s,
                            treatment: t,
                            x: position,
                        });
                        expected.push(curve.evaluate(position));
                    }
                    let whole = CurvePoint {
                        block,
                        context: c,
                        species: s,
                        treatment: t,
                        x: 3.0,
                    };
                    let at = objective.curves_at(&x, &[whole]).unwrap();
                    let row = table.row_index(block, c, s, t, 3).unwrap();
                    assert_eq!(at[0], predictions[row]);
                }
            }
        }
    }
    let values = objective.curves_at(&x, &points).unwrap();
    for (value, wanted) in values.iter().zip(&expected) {
        assert!((value - wanted).abs() <= 1e-12 * wanted.abs().max(1.0));
    }
    let outside = CurvePoint {
        x: shape.bins as f64 + 1.0,
        ..points[0]
    };
    assert!(objective.curves_at(&x, &[outside]).is_err());
    let unknown = CurvePoint {
        treatment: shape.treatments,
        ..points[0]
    };
    assert!(objective.curves_at(&x, &[unknown]).is_err());
}

#[test]
fn penalty_starts_at_the_configured_fraction_of_the_nll() {
    let case = build_case(31, Factors::TimeSeries, 4);
    let mut objective = Objective::new(&case.model);
    assert_eq!(objective.penalty(&case.truth).unwrap(), 0.0);
    objective.set_penalty_coefficients(&case.truth).unwrap();
    let nll = objective.nll(&case.truth).unwrap();
    let penalty = objective.penalty(&case.truth).unwrap();
    assert!((penalty - 0.01 * nll).abs() <= 1e-12 * nll);
    let coefficients = objective.penalty_coefficients().unwrap().to_vec();
    assert_eq!(
        coefficients.len(),
        case.model.layout().boundary_distance_count()
    );
    // Every term, the last one included, equals Pmax / n at the start.
    let distances = objective.boundary_distances(&case.truth).unwrap().to_vec();
    let each = 0.01 * nll / distances.len() as f64;
    for (a, d) in coefficients.iter().zip(&distances) {
        assert!((1.0 / (a * d).powi(2) - each).abs() <= 1e-12 * each);
    }
}

#[test]
fn infeasible_start_points_cannot_scale_the_penalty() {
    let case = build_case(32, Factors::Binary, 1);
    let mut objective = Objective::new(&case.model);
    let mut start = case.truth.clone();
    // Transition slopes are boundary distances; a negative one is outside.
    let layout = case.model.layout();
    let degrees = case.model.structure().degrees();
    let position = degrees.iter().position(|&d| d > 0);
    if let Some(cs) = position {
        let species = case.model.design().species().len();
        let index = layout
            .beta_index(Component::Slope, cs / species, cs % species, 0, 0)
            .unwrap();
        start[index] = -1.0;
        assert!(objective.set_penalty_coefficients(&start).is_err());
    }
    assert!(objective.set_penalty_coefficients(&start[1..]).is_err());
}

#[test]
fn capped_objective_returns_the_cap_and_a_zero_gradient() {
    let case = build_case(41, Factors::Binary, 4);
    let mut objective = Objective::new(&case.model);
    objective.set_penalty_coefficients(&case.truth).unwrap();
    let mut x = case.truth.clone();
    let first_rate = case
        .model
        .layout()
        .beta_index(Component::Rate, 0, 0, 0, 0)
        .unwrap();
    x[first_rate] = -5.0;
    let mut gradient = vec![1.0; x.len()];
    let value = objective.value_and_gradient(&x, &mut gradient).unwrap();
    assert!(value >= PSEUDO_INFINITY);
    assert!(objective.is_capped(&x).unwrap());
    assert_eq!(objective.nll(&x).unwrap(), PSEUDO_INFINITY);
    assert!(gradient.iter().all(|&g| g == 0.0));
}

#[test]
fn boundary_vector_jacobian_product_matches_finite_differences() {
    let case = build_case(51, Factors::BinaryAndTimeSeries, 4);
    let mut objective = Objective::new(&case.model);
    let x = perturbed(&case.truth, 51);
    let mut rng = SplitMix(99);
    let weights: Vec<f64> = (0..objective.boundary_distance_count())
        .map(|_| rng.between(-1.0, 1.0))
        .collect();
    let mut gradient = vec![0.0; x.len()];
    objective
        .boundary_distances_vjp(&x, &weights, &mut gradient)
        .unwrap();
    let mut weighted = |point: &[f64]| -> f64 {
        let distances = objective.boundary_distances(point).unwrap();
        distances.iter().zip(&weights).map(|(d, w)| d * w).sum()
    };
    let mut moved = x.clone();
    for i in 0..x.len() {
        let h = 1e-6 * x[i].abs().max(1.0);
        moved[i] = x[i] + h;
        let up = weighted(&moved);
        moved[i] = x[i] - h;
        let down = weighted(&moved);
        moved[i] = x[i];
        let fd = (up - down) / (2.0 * h);
        assert!(
            (gradient[i] - fd).abs() <= 1e-6 * fd.abs().max(1.0),
            "parameter {i}"
        );
    }
}

#[test]
fn evaluation_rejects_wrongly_sized_vectors() {
    let case = build_case(71, Factors::Binary, 1);
    let mut objective = Objective::new(&case.model);
    let short = vec![0.0; case.truth.len() - 1];
    assert!(objective.nll(&short).is_err());
    let mut gradient = vec![0.0; 2];
    assert!(objective
        .value_and_gradient(&case.truth, &mut gradient)
        .is_err());
    let mut predictions = vec![0.0; 3];
    assert!(objective
        .predict_log(&case.truth, &mut predictions)
        .is_err());
}

#[test]
fn model_rejects_a_table_that_does_not_fit_the_design() {
    let case = build_case(81, Factors::Binary, 4);
    let design = Design::new(
        labels("ctx", 5),
        labels("gene", 1),
        labels("mouse", 4),
        vec![],
    )
    .unwrap();
    let structure = Structure::new(5, 1, vec![0; 5]).unwrap();
    let table = case.model.table().clone();
    assert!(Model::new(table, design, structure, Settings::default()).is_err());
}

#[test]
fn resampled_tables_change_the_objective_but_not_its_shape() {
    let mut case = build_case(91, Factors::Binary, 4);
    let before = Objective::new(&case.model).nll(&case.truth).unwrap();
    let mut rng = SplitMix(7);
    case.model
        .table_mut()
        .resample_pools(|n| rng.below(n))
        .unwrap();
    let after = Objective::new(&case.model).nll(&case.truth).unwrap();
    assert!(after.is_finite() && after != before);
    case.model.table_mut().restore_original_counts();
    let restored = Objective::new(&case.model).nll(&case.truth).unwrap();
    assert_eq!(restored, before);
}
