//! Synthetic count data with a known truth, drawn from the count model
//! itself (one factor, animals crossed with its levels), for the tests.

use super::curve::{Axis, BinDerivatives, CurveValues, WarpedCurve};
use super::family::rate;
use super::pipeline::{fit_all, CountPlan};
use super::settings::CountFitSettings;
use super::start::detect_structure;
use super::table::{CountTable, CountTokens};
use super::CountModel;
use crate::changepoint::DetectionSettings;
use crate::data::TableShape;
use crate::design::{Design, Factor, Structure};
use crate::test_rng::SplitMix;

/// What to simulate.
#[derive(Clone, Debug)]
pub(crate) struct Simulation {
    pub bins: usize,
    pub contexts: usize,
    pub species: usize,
    pub animals: usize,
    pub levels: usize,
    /// Degree per (context, species), context-major.
    pub degrees: Vec<usize>,
    pub cells_per_key: usize,
    pub sigma: [f64; 3],
    pub dispersion: f64,
    /// Fraction of cell keys left unmeasured.
    pub missing: f64,
    /// Species whose every count is 0 (measured, never seen).
    pub silent_species: Vec<usize>,
    /// When set, the counts are drawn from this seed after the truth is
    /// drawn from the main one: one truth, fresh counts.
    pub count_seed: Option<u64>,
}

impl Default for Simulation {
    fn default() -> Self {
        Simulation {
            bins: 30,
            contexts: 1,
            species: 2,
            animals: 4,
            levels: 2,
            degrees: vec![1, 2],
            cells_per_key: 3,
            sigma: [0.1, 0.08, 0.15],
            dispersion: 0.1,
            missing: 0.05,
            silent_species: Vec::new(),
            count_seed: None,
        }
    }
}

/// The true values behind a simulated model.
#[derive(Clone, Debug)]
pub(crate) struct Truth {
    /// Population curve values per species, per curve (c·T + t).
    pub curves: Vec<Vec<CurveValues>>,
}

/// Gamma(shape, 1) by Marsaglia and Tsang's method.
fn gamma(rng: &mut SplitMix, shape: f64) -> f64 {
    if shape < 1.0 {
        return gamma(rng, shape + 1.0) * rng.uniform().powf(1.0 / shape);
    }
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = rng.normal();
        let v = (1.0 + c * x).powi(3);
        if v > 0.0 && rng.uniform().ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v;
        }
    }
}

/// The default smallest distance of transition points: 5 % of the bins.
pub(crate) fn point_gap(bins: usize) -> f64 {
    super::point_gap_of(bins, 0.05)
}

fn labels(prefix: &str, n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("{prefix}{i}")).collect()
}

/// Draws a model and its truth.
pub(crate) fn simulate(spec: &Simulation, seed: u64) -> (CountModel, Truth) {
    let mut rng = SplitMix(seed);
    let axis = Axis::new(spec.bins, point_gap(spec.bins));
    let treatments = spec.levels;
    let mut curves = Vec::new();
    for s in 0..spec.species {
        let mut per_species = Vec::new();
        for c in 0..spec.contexts {
            let d = spec.degrees[c * spec.species + s];
            let mut rates: Vec<f64> = vec![rng.between(1.5, 2.5)];
            for k in 0..d {
                let step = rng.between(0.6, 1.2) * if k % 2 == 0 { 1.0 } else { -1.0 };
                rates.push(rates[k] + step);
            }
            let slopes: Vec<f64> = (0..d).map(|_| rng.between(0.5, 1.2)).collect();
            let points: Vec<f64> = (0..d)
                .map(|k| {
                    0.5 + spec.bins as f64 * (k as f64 + 1.0) / (d as f64 + 1.0)
                        + rng.between(-1.0, 1.0)
                })
                .collect();
            for t in 0..treatments {
                let shift = if t == 0 { 0.0 } else { 1.0 };
                per_species.push(CurveValues {
                    rates: rates
                        .iter()
                        .map(|r| r + shift * rng.between(-0.3, 0.3))
                        .collect(),
                    slopes: slopes
                        .iter()
                        .map(|v| v * (1.0 + shift * rng.between(-0.2, 0.2)))
                        .collect(),
                    points: points
                        .iter()
                        .map(|p| p + shift * rng.between(-1.5, 1.5))
                        .collect(),
                });
            }
        }
        curves.push(per_species);
    }
    let u: Vec<Vec<[f64; 3]>> = (0..spec.species)
        .map(|_| {
            (0..spec.animals)
                .map(|_| spec.sigma.map(|sd| sd * rng.normal()))
                .collect()
        })
        .collect();

    if let Some(count_seed) = spec.count_seed {
        rng = SplitMix(count_seed);
    }
    let (mut count, mut bin, mut context, mut species, mut ran, mut treatment) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for r in 0..spec.animals {
        for c in 0..spec.contexts {
            for t in 0..treatments {
                for b in 1..=spec.bins {
                    if rng.uniform() < spec.missing {
                        continue;
                    }
                    for s in 0..spec.species {
                        let d = spec.degrees[c * spec.species + s];
                        let values = &curves[s][c * treatments + t];
                        let theta = values.to_theta(axis, 1e-9);
                        let mut warped = WarpedCurve::new(d);
                        warped.set(&theta, u[s][r], axis);
                        let psi = BinDerivatives::new(d).evaluate(warped.values(), b as f64);
                        let mean = rate(psi).value;
                        for _ in 0..spec.cells_per_key {
                            let shape = 1.0 / spec.dispersion;
                            let lambda = mean * gamma(&mut rng, shape) / shape;
                            let draw = rng.poisson(lambda);
                            count.push(if spec.silent_species.contains(&s) {
                                0.0
                            } else {
                                draw
                            });
                            bin.push(b as i32);
                            context.push(c);
                            species.push(s);
                            ran.push(r);
                            treatment.push(t);
                        }
                    }
                }
            }
        }
    }
    let shape = TableShape {
        bins: spec.bins,
        contexts: spec.contexts,
        species: spec.species,
        ran_levels: spec.animals,
        treatments,
    };
    let tokens = CountTokens {
        count: &count,
        bin: &bin,
        context: &context,
        species: &species,
        ran: &ran,
        treatment: &treatment,
        cell: &[],
        exposure: &[],
    };
    let (table, _) = CountTable::new(shape, tokens, None).expect("simulated table");
    let design = Design::new(
        labels("context", spec.contexts),
        labels("gene", spec.species),
        labels("mouse", spec.animals),
        vec![Factor::new("group", labels("level", spec.levels))],
    )
    .expect("design");
    let structure = Structure::new(spec.contexts, spec.species, spec.degrees.clone()).unwrap();
    let model = CountModel::new(table, design, structure, point_gap(spec.bins)).expect("model");
    (model, Truth { curves })
}

/// A small model with two contexts and degrees 0–2, for derivative checks.
pub(crate) fn small_model(seed: u64) -> CountModel {
    let spec = Simulation {
        bins: 12,
        contexts: 2,
        species: 2,
        animals: 3,
        degrees: vec![1, 0, 2, 1],
        ..Simulation::default()
    };
    simulate(&spec, seed).0
}

/// A fitted count plan of simulated data (structure detected).
pub(crate) fn fitted_plan(seed: u64) -> CountPlan {
    let (model, _) = simulate(&Simulation::default(), seed);
    let detected = detect_structure(&model, &DetectionSettings::default()).unwrap();
    let model = model.with_structure(detected.structure.clone()).unwrap();
    let settings = CountFitSettings::default();
    let estimate = fit_all(&model, Some(&detected), None, &settings).unwrap();
    CountPlan {
        model,
        detected,
        settings,
        estimate,
    }
}
