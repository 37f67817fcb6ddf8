//! Deterministic synthetic data for the structure tests.

use super::lro::SeriesMatrix;
use crate::data::summed::TokenColumns;
use crate::data::{SummedTable, TableShape};
use crate::design::{Design, Factor};
pub(crate) use crate::test_rng::SplitMix;

/// A poly-sigmoid on the log1p scale: levels R_1..R_{d+1}, points and slopes.
#[derive(Clone, Debug)]
pub(crate) struct Curve {
    pub(crate) levels: Vec<f64>,
    pub(crate) points: Vec<f64>,
    pub(crate) slopes: Vec<f64>,
}

impl Curve {
    pub(crate) fn at(&self, x: f64) -> f64 {
        let mut value = self.levels[0];
        for k in 0..self.points.len() {
            let u = self.slopes[k] * (x - self.points[k]);
            value += (self.levels[k + 1] - self.levels[k]) / (1.0 + (-u).exp());
        }
        value
    }

    /// Ψ(b) for b = 1..=B.
    pub(crate) fn series(&self, bins: usize) -> Vec<f64> {
        (1..=bins).map(|b| self.at(b as f64)).collect()
    }
}

/// Single-column series matrix: the curve plus N(0, sd) noise.
pub(crate) fn noisy_series(curve: &Curve, bins: usize, sd: f64, seed: u64) -> SeriesMatrix {
    let mut rng = SplitMix(seed);
    let column = curve
        .series(bins)
        .into_iter()
        .map(|v| v + sd * rng.normal())
        .collect();
    SeriesMatrix {
        bins,
        columns: vec![column],
        keys: vec![(0, 0)],
    }
}

fn labels(prefix: &str, count: usize) -> Vec<String> {
    (1..=count).map(|i| format!("{prefix}{i}")).collect()
}

/// A table with one context, `curves.len()` species, `ran_levels` mice and
/// one binary factor (T = 2). `curves[s][t]` is the true log1p-rate curve of
/// species s under treatment t; each mouse's counts are Poisson around it,
/// with a per-mouse log-scale jitter of sd 0.05.
pub(crate) fn poisson_table(
    curves: &[[Curve; 2]],
    bins: usize,
    ran_levels: usize,
    seed: u64,
) -> (SummedTable, Design) {
    let mut rng = SplitMix(seed);
    let design = Design::new(
        labels("ctx", 1),
        labels("gene", curves.len()),
        labels("mouse", ran_levels),
        vec![Factor::new("genotype", vec!["wt".into(), "ko".into()])],
    )
    .expect("valid design");
    let (mut count, mut bin, mut context, mut species, mut ran, mut treatment) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for (s, pair) in curves.iter().enumerate() {
        for r in 0..ran_levels {
            let jitter = 0.05 * rng.normal();
            for (t, curve) in pair.iter().enumerate() {
                for b in 1..=bins {
                    let rate = (curve.at(b as f64) + jitter).exp_m1().max(0.0);
                    count.push(rng.poisson(rate));
                    bin.push(b as i32);
                    context.push(0);
                    species.push(s);
                    ran.push(r);
                    treatment.push(t);
                }
            }
        }
    }
    let shape = TableShape {
        bins,
        contexts: 1,
        species: curves.len(),
        ran_levels,
        treatments: 2,
    };
    let tokens = TokenColumns {
        count: &count,
        bin: &bin,
        context: &context,
        species: &species,
        ran: &ran,
        treatment: &treatment,
    };
    let table = SummedTable::new(shape, tokens, true).expect("valid table");
    (table, design)
}
