//! Curves of a count fit: Ψ of every animal and population row, at any
//! (fractional) bin, and the population curves' gradients (for predictions
//! and their delta-method intervals).

use super::curve::{BinDerivatives, CurveValues, WarpedCurve};
use super::layout::CountLayout;
use super::CountModel;
use crate::design::{Component, WarpKind};

/// Ψ of every (animal, context, species, treatment, bin) row — the animal's
/// warped curve — and of every (context, species, treatment, bin) — the
/// population curve (no warp). Species-major, then (animal,) context,
/// treatment, bin, as the table's keys.
pub(crate) struct Predictions {
    pub animal: Vec<f64>,
    pub population: Vec<f64>,
}

/// θ of the population curve of every (context, treatment) of species `s`
/// at a reported vector (see [`CountLayout`]), context-major: the fixed
/// effects give each treatment's values through W. A curve whose slopes or
/// points are NaN (not informed) is flat when its rates are all equal (its
/// transitions then get placeholder values that do not change it), and
/// `None` otherwise.
fn population_thetas(
    model: &CountModel,
    layout: &CountLayout,
    reported: &[f64],
    s: usize,
) -> Vec<Option<Vec<f64>>> {
    let design = model.design();
    let shape = model.table().shape();
    let axis = model.axis();
    let treatments = shape.treatments;
    let mut thetas: Vec<Option<Vec<f64>>> = Vec::with_capacity(shape.contexts * treatments);
    for c in 0..shape.contexts {
        let degree = model.structure().degree(c, s);
        for t in 0..treatments {
            let weights = design.weight_row(t);
            let value = |component: Component, k: usize| -> f64 {
                let mut total = 0.0;
                for (i, &w) in weights.iter().enumerate() {
                    if w != 0.0 {
                        let index = layout
                            .original
                            .beta_index(component, c, s, k, i)
                            .unwrap_or(usize::MAX);
                        total += w * reported.get(index).copied().unwrap_or(f64::NAN);
                    }
                }
                total
            };
            let mut values = CurveValues {
                rates: (0..=degree).map(|k| value(Component::Rate, k)).collect(),
                slopes: (0..degree).map(|k| value(Component::Slope, k)).collect(),
                points: (0..degree).map(|k| value(Component::Point, k)).collect(),
            };
            let flat = values
                .rates
                .iter()
                .all(|r| r.is_finite() && *r == values.rates[0]);
            let transitions_known = values
                .slopes
                .iter()
                .chain(&values.points)
                .all(|v| v.is_finite());
            thetas.push(
                if values.rates.iter().all(|r| r.is_finite()) && (transitions_known || flat) {
                    if !transitions_known {
                        values.slopes = vec![1.0; degree];
                        values.points = axis.even_points(degree);
                    }
                    Some(values.to_theta(axis, 1e-9))
                } else {
                    None
                },
            );
        }
    }
    thetas
}

/// The random effects (point, rate, slope) of animal `r` for species `s`;
/// 0 for those the layout does not have.
fn animal_effects(layout: &CountLayout, reported: &[f64], s: usize, r: usize) -> [f64; 3] {
    let mut u = [0.0; 3];
    for kind in WarpKind::ALL {
        if let Some(index) = layout.original.warp_index(kind, s, r) {
            u[super::report::warp_slot(kind)] = reported[index];
        }
    }
    u
}

/// The layout of `model`'s reported vector, checked against `reported`.
fn checked_layout(model: &CountModel, reported: &[f64]) -> Result<CountLayout, String> {
    let layout = CountLayout::new(model.design(), model.structure())?;
    if reported.len() != layout.len() {
        return Err(format!(
            "expected {} parameters, got {}",
            layout.len(),
            reported.len()
        ));
    }
    Ok(layout)
}

/// Predictions at a reported vector (see [`CountLayout`]): the fixed
/// effects give each treatment's curve through W, the random effects warp
/// it. A curve whose slopes or points are NaN (not informed) is flat when
/// its rates are all equal, and NaN otherwise.
pub(crate) fn predictions_at(model: &CountModel, reported: &[f64]) -> Result<Predictions, String> {
    let layout = checked_layout(model, reported)?;
    let shape = model.table().shape();
    let axis = model.axis();
    let treatments = shape.treatments;
    let mut animal = Vec::with_capacity(shape.species * model.table().key_count());
    let mut population =
        Vec::with_capacity(shape.species * shape.contexts * treatments * shape.bins);
    for s in 0..shape.species {
        // Per (context, treatment): θ of the population curve, or None.
        let thetas = population_thetas(model, &layout, reported, s);
        let push_curve = |theta: &Option<Vec<f64>>,
                          degree: usize,
                          u: [f64; 3],
                          out: &mut Vec<f64>| match theta {
            Some(theta) if u.iter().all(|v| v.is_finite()) => {
                let mut curve = WarpedCurve::new(degree);
                curve.set(theta, u, axis);
                let mut bin = BinDerivatives::new(degree);
                for b in 1..=shape.bins {
                    out.push(bin.evaluate(curve.values(), b as f64));
                }
            }
            _ => out.extend(std::iter::repeat_n(f64::NAN, shape.bins)),
        };
        for r in 0..shape.ran_levels {
            let u = animal_effects(&layout, reported, s, r);
            for c in 0..shape.contexts {
                let degree = model.structure().degree(c, s);
                for t in 0..treatments {
                    push_curve(&thetas[c * treatments + t], degree, u, &mut animal);
                }
            }
        }
        for c in 0..shape.contexts {
            let degree = model.structure().degree(c, s);
            for t in 0..treatments {
                push_curve(
                    &thetas[c * treatments + t],
                    degree,
                    [0.0; 3],
                    &mut population,
                );
            }
        }
    }
    Ok(Predictions { animal, population })
}

/// One row of a fit's summed table (R's `count.data.summed`): an observed
/// (animal, context, species, treatment, bin) row with its summed count and
/// exposure, or a population row (no animal, nothing observed), with Ψ of
/// its curve.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SummedRow {
    /// The animal; `None` on a population row.
    pub ran: Option<usize>,
    pub context: usize,
    pub species: usize,
    pub treatment: usize,
    /// 1-based, as R numbers bins.
    pub bin: usize,
    /// Summed count and exposure of an observed row (`None`: population).
    pub observed: Option<(f64, f64)>,
    pub psi: f64,
}

impl SummedRow {
    /// The expected count: exposure × rate on an observed row, the rate per
    /// unit of exposure on a population row.
    pub fn expected(&self) -> f64 {
        let rate = super::family::rate(self.psi).value;
        match self.observed {
            Some((_, exposure)) => exposure * rate,
            None => rate,
        }
    }

    /// The observed counterpart of Ψ, log(1 + count / exposure) (`None` on
    /// a population row).
    pub fn observed_psi(&self) -> Option<f64> {
        self.observed
            .map(|(count, exposure)| (count / exposure).ln_1p())
    }
}

/// How many rows [`visit_summed_rows`] visits: every observed row, then
/// every population row.
pub(crate) fn summed_row_count(model: &CountModel) -> usize {
    let table = model.table();
    let shape = table.shape();
    let observed = table.observed().iter().filter(|&&o| o).count();
    shape.species * (observed + shape.contexts * shape.treatments * shape.bins)
}

/// Visits the rows of a fit's summed table in its order, with each row's
/// position: the observed rows (species, then the table's key order:
/// animal, context, treatment, bin), then the population rows (species,
/// context, treatment, bin). `predictions` are [`predictions_at`] of the
/// fit. One row at a time, so that a panel's table of millions of rows is
/// written once, where the caller keeps it.
pub(crate) fn visit_summed_rows(
    model: &CountModel,
    predictions: &Predictions,
    mut visit: impl FnMut(usize, SummedRow),
) {
    let table = model.table();
    let shape = table.shape();
    let keys = table.key_count();
    let observed = table.observed();
    let mut position = 0;
    for s in 0..shape.species {
        let (counts, exposures) = (table.counts(s), table.exposures(s));
        for r in 0..shape.ran_levels {
            for c in 0..shape.contexts {
                for t in 0..shape.treatments {
                    let first = table.block_key(r, c, t);
                    for b in 0..shape.bins {
                        let key = first + b;
                        if !observed[key] {
                            continue;
                        }
                        visit(
                            position,
                            SummedRow {
                                ran: Some(r),
                                context: c,
                                species: s,
                                treatment: t,
                                bin: b + 1,
                                observed: Some((counts[key], exposures[key])),
                                psi: predictions.animal[s * keys + key],
                            },
                        );
                        position += 1;
                    }
                }
            }
        }
    }
    let mut population = predictions.population.iter();
    for s in 0..shape.species {
        for c in 0..shape.contexts {
            for t in 0..shape.treatments {
                for b in 0..shape.bins {
                    let psi = population.next().copied().unwrap_or(f64::NAN);
                    visit(
                        position,
                        SummedRow {
                            ran: None,
                            context: c,
                            species: s,
                            treatment: t,
                            bin: b + 1,
                            observed: None,
                            psi,
                        },
                    );
                    position += 1;
                }
            }
        }
    }
}

/// A position on one curve, for [`curves_at`]: the curve of animal `ran`
/// (warped by its random effects) or, with `ran` None, the population curve
/// of (context, species, treatment); `x` is on the bin axis (bins are 1, 2,
/// …), fractional positions included.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct CurvePoint {
    pub ran: Option<usize>,
    pub context: usize,
    pub species: usize,
    pub treatment: usize,
    pub x: f64,
}

/// Checks that every point names a curve of `model` and lies within the
/// bins' span [0.5, bins + 0.5].
fn check_points(model: &CountModel, points: &[CurvePoint]) -> Result<(), String> {
    let shape = model.table().shape();
    let bins = shape.bins as f64;
    for (i, point) in points.iter().enumerate() {
        if point.ran.is_some_and(|r| r >= shape.ran_levels)
            || point.context >= shape.contexts
            || point.species >= shape.species
            || point.treatment >= shape.treatments
        {
            return Err(format!("curve point {} is outside the model", i + 1));
        }
        if !(point.x.is_finite() && point.x >= 0.5 && point.x <= bins + 0.5) {
            return Err(format!(
                "curve point {} is at {}, outside the bins' span [0.5, {}]",
                i + 1,
                point.x,
                bins + 0.5
            ));
        }
    }
    Ok(())
}

/// Ψ at each point for each reported vector of `samples` (one vector after
/// another), sample-major: the curves of [`predictions_at`] evaluated at any
/// position. NaN where a curve is not informed.
pub(crate) fn curves_at(
    model: &CountModel,
    samples: &[f64],
    points: &[CurvePoint],
) -> Result<Vec<f64>, String> {
    let layout = CountLayout::new(model.design(), model.structure())?;
    if layout.len() == 0 || samples.len() % layout.len() != 0 {
        return Err("samples must hold whole parameter vectors".into());
    }
    check_points(model, points)?;
    let shape = model.table().shape();
    let axis = model.axis();
    let mut out = Vec::with_capacity(points.len() * samples.len() / layout.len());
    for reported in samples.chunks(layout.len()) {
        let thetas: Vec<Vec<Option<Vec<f64>>>> = (0..shape.species)
            .map(|s| population_thetas(model, &layout, reported, s))
            .collect();
        for point in points {
            let (c, s) = (point.context, point.species);
            let degree = model.structure().degree(c, s);
            let u = point
                .ran
                .map_or([0.0; 3], |r| animal_effects(&layout, reported, s, r));
            out.push(match &thetas[s][c * shape.treatments + point.treatment] {
                Some(theta) if u.iter().all(|v| v.is_finite()) => {
                    let mut curve = WarpedCurve::new(degree);
                    curve.set(theta, u, axis);
                    BinDerivatives::new(degree).evaluate(curve.values(), point.x)
                }
                _ => f64::NAN,
            });
        }
    }
    Ok(out)
}

/// One non-zero term of a population curve's gradient: ∂Ψ(point)/∂(reported
/// parameter `index`) receives `value` (an index can appear more than once
/// for one point; the terms add).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct GradientEntry {
    pub point: usize,
    pub index: usize,
    pub value: f64,
}

/// Ψ of the population curve at each point (NaN where the curve is not
/// informed) and its gradient in the reported vector as sparse entries: a
/// curve depends on its own block's few effects, so a panel's gene-level
/// delta method needs neither points × parameters memory nor the other
/// genes' curves (only the species of `points` are evaluated). The
/// population curve's values are W·β, so ∂Ψ/∂β of block k, treatment column
/// i is W[t, i] times ∂Ψ/∂v of that value.
pub(crate) fn population_gradient_entries(
    model: &CountModel,
    reported: &[f64],
    points: &[CurvePoint],
) -> Result<(Vec<f64>, Vec<GradientEntry>), String> {
    let layout = checked_layout(model, reported)?;
    check_points(model, points)?;
    if points.iter().any(|p| p.ran.is_some()) {
        return Err("gradients are of population curves only".into());
    }
    let design = model.design();
    let shape = model.table().shape();
    let axis = model.axis();
    let mut thetas: Vec<Option<Vec<Option<Vec<f64>>>>> = vec![None; shape.species];
    let mut values = Vec::with_capacity(points.len());
    let mut entries = Vec::new();
    for (i, point) in points.iter().enumerate() {
        let (c, s, t) = (point.context, point.species, point.treatment);
        let species_thetas =
            thetas[s].get_or_insert_with(|| population_thetas(model, &layout, reported, s));
        let Some(theta) = &species_thetas[c * shape.treatments + t] else {
            values.push(f64::NAN);
            continue;
        };
        let degree = model.structure().degree(c, s);
        let mut curve = WarpedCurve::new(degree);
        curve.set(theta, [0.0; 3], axis);
        let mut bin = BinDerivatives::new(degree);
        values.push(bin.evaluate(curve.values(), point.x));
        // ∂Ψ/∂v, v = [rates, slopes, points].
        let components = (0..=degree)
            .map(|k| (Component::Rate, k, k))
            .chain((0..degree).map(|k| (Component::Slope, k, degree + 1 + k)))
            .chain((0..degree).map(|k| (Component::Point, k, 2 * degree + 1 + k)));
        for (component, k, v) in components {
            for (column, &w) in design.weight_row(t).iter().enumerate() {
                if w == 0.0 {
                    continue;
                }
                if let Some(index) = layout.original.beta_index(component, c, s, k, column) {
                    entries.push(GradientEntry {
                        point: i,
                        index,
                        value: w * bin.gradient[v],
                    });
                }
            }
        }
    }
    Ok((values, entries))
}

#[cfg(test)]
mod tests {
    use super::super::tests_support::fitted_plan;
    use super::*;
    use crate::nb::layout::CountRole;
    use crate::nb::report::reported_parameters;

    /// Ψ of the population curve at each point (its `ran` must be None) and the
    /// gradient of Ψ in the reported vector, point-major (one full-length row
    /// per point; NaN rows where the curve is not informed), for the delta
    /// method: the sparse entries of [`population_gradient_entries`] laid out
    /// densely, to check them against finite differences.
    fn population_gradients(
        model: &CountModel,
        reported: &[f64],
        points: &[CurvePoint],
    ) -> Result<(Vec<f64>, Vec<f64>), String> {
        let (values, entries) = population_gradient_entries(model, reported, points)?;
        let n = reported.len();
        let mut gradients = vec![0.0; points.len() * n];
        for (i, value) in values.iter().enumerate() {
            if value.is_nan() {
                gradients[i * n..(i + 1) * n].fill(f64::NAN);
            }
        }
        for entry in entries {
            gradients[entry.point * n + entry.index] += entry.value;
        }
        Ok((values, gradients))
    }

    #[test]
    fn curves_at_whole_bins_are_the_predictions_and_fractional_bins_lie_between() {
        let plan = fitted_plan(6);
        let reported = reported_parameters(&plan.model, &plan.estimate.species).unwrap();
        let predicted = predictions_at(&plan.model, &reported).unwrap();
        let table = plan.model.table();
        let shape = table.shape();
        let (bins, treatments) = (shape.bins, shape.treatments);
        let mut points = Vec::new();
        let mut expected = Vec::new();
        for s in 0..shape.species {
            for c in 0..shape.contexts {
                for t in 0..treatments {
                    for b in [1, 2, bins] {
                        points.push(CurvePoint {
                            ran: None,
                            context: c,
                            species: s,
                            treatment: t,
                            x: b as f64,
                        });
                        expected.push(
                            predicted.population
                                [((s * shape.contexts + c) * treatments + t) * bins + b - 1],
                        );
                        let r = shape.ran_levels - 1;
                        points.push(CurvePoint {
                            ran: Some(r),
                            x: b as f64,
                            ..points[points.len() - 1]
                        });
                        expected.push(
                            predicted.animal
                                [s * table.key_count() + table.block_key(r, c, t) + b - 1],
                        );
                    }
                }
            }
        }
        let values = curves_at(&plan.model, &reported, &points).unwrap();
        assert_eq!(values.len(), expected.len());
        for (value, wanted) in values.iter().zip(&expected) {
            assert!(value.to_bits() == wanted.to_bits(), "{value} vs {wanted}");
        }
        // Two samples: one result per point and sample, sample-major.
        let twice = [reported.clone(), reported.clone()].concat();
        let both = curves_at(&plan.model, &twice, &points[..2]).unwrap();
        assert_eq!(both, [&values[..2], &values[..2]].concat());
        // Halfway between two bins, a monotone stretch stays between them.
        let half = CurvePoint {
            x: 1.5,
            ..points[0]
        };
        let middle = curves_at(&plan.model, &reported, &[half]).unwrap()[0];
        let (a, b) = (expected[0], expected[2]);
        assert!(middle >= a.min(b) - 1e-12 && middle <= a.max(b) + 1e-12);
        let outside = CurvePoint { x: 0.25, ..half };
        assert!(curves_at(&plan.model, &reported, &[outside]).is_err());
        let unknown = CurvePoint {
            ran: Some(shape.ran_levels),
            ..half
        };
        assert!(curves_at(&plan.model, &reported, &[unknown]).is_err());
    }

    #[test]
    fn summed_rows_are_the_observed_rows_then_the_curves_each_once() {
        let plan = fitted_plan(6);
        let model = &plan.model;
        let reported = reported_parameters(model, &plan.estimate.species).unwrap();
        let predicted = predictions_at(model, &reported).unwrap();
        let table = model.table();
        let shape = table.shape();
        let mut rows = Vec::new();
        visit_summed_rows(model, &predicted, |position, row| {
            assert_eq!(position, rows.len());
            rows.push(row);
        });
        assert_eq!(rows.len(), summed_row_count(model));
        let (observed, population): (Vec<SummedRow>, Vec<SummedRow>) =
            rows.iter().partition(|row| row.ran.is_some());
        // The population rows come last, one per context, species, treatment, bin.
        assert!(rows[observed.len()..].iter().all(|row| row.ran.is_none()));
        assert_eq!(
            population.len(),
            shape.species * shape.contexts * shape.treatments * shape.bins
        );
        // Observed rows: every observed key of every species once, with its
        // count and exposure, and the animal's curve there as curves_at()
        // evaluates it on its own.
        let keys = table.observed().iter().filter(|&&o| o).count();
        assert_eq!(observed.len(), shape.species * keys);
        let total: f64 = (0..shape.species)
            .map(|s| table.counts(s).iter().sum::<f64>())
            .sum();
        let summed: f64 = observed.iter().map(|row| row.observed.unwrap().0).sum();
        assert!((total - summed).abs() <= 1e-9 * total.max(1.0));
        let points: Vec<CurvePoint> = rows
            .iter()
            .map(|row| CurvePoint {
                ran: row.ran,
                context: row.context,
                species: row.species,
                treatment: row.treatment,
                x: row.bin as f64,
            })
            .collect();
        let values = curves_at(model, &reported, &points).unwrap();
        for (row, value) in rows.iter().zip(&values) {
            assert_eq!(row.psi.to_bits(), value.to_bits(), "{row:?}");
            let key =
                table.block_key(row.ran.unwrap_or(0), row.context, row.treatment) + row.bin - 1;
            match row.observed {
                Some((count, exposure)) => {
                    assert!(table.observed()[key]);
                    assert_eq!(count, table.counts(row.species)[key]);
                    assert_eq!(exposure, table.exposures(row.species)[key]);
                    // Away from the rate's smooth floor at 0, the rate is
                    // e^Ψ − 1 (plus the floor's 1e-8).
                    if row.psi > 0.1 {
                        let rate = row.expected() / exposure;
                        assert!((rate - row.psi.exp_m1()).abs() <= 1e-7, "{row:?}");
                    }
                    let by_hand = (1.0 + count / exposure).ln();
                    assert!(
                        (row.observed_psi().unwrap() - by_hand).abs() <= 1e-12 * by_hand.max(1.0)
                    );
                }
                None => assert!(row.observed_psi().is_none()),
            }
        }
    }

    #[test]
    fn population_gradients_match_finite_differences() {
        let plan = fitted_plan(6);
        let reported = reported_parameters(&plan.model, &plan.estimate.species).unwrap();
        let shape = plan.model.table().shape();
        let points: Vec<CurvePoint> = (0..shape.treatments)
            .flat_map(|t| {
                [1.0, 7.3, shape.bins as f64 * 0.55].map(|x| CurvePoint {
                    ran: None,
                    context: 0,
                    species: 0,
                    treatment: t,
                    x,
                })
            })
            .collect();
        let (values, gradients) = population_gradients(&plan.model, &reported, &points).unwrap();
        assert_eq!(values, curves_at(&plan.model, &reported, &points).unwrap());
        let n = reported.len();
        let layout = CountLayout::new(plan.model.design(), plan.model.structure()).unwrap();
        let roles = layout.roles();
        for (j, role) in roles.iter().enumerate() {
            let is_beta = matches!(
                role,
                CountRole::Original(crate::design::ParameterRole::Beta { species: 0, .. })
            );
            let step = 1e-6 * reported[j].abs().max(1.0);
            let mut up = reported.clone();
            let mut down = reported.clone();
            up[j] += step;
            down[j] -= step;
            let above = curves_at(&plan.model, &up, &points).unwrap();
            let below = curves_at(&plan.model, &down, &points).unwrap();
            for i in 0..points.len() {
                let numeric = (above[i] - below[i]) / (2.0 * step);
                let analytic = gradients[i * n + j];
                if is_beta {
                    assert!(
                        (analytic - numeric).abs() <= 1e-5 * numeric.abs().max(1.0),
                        "parameter {j}, point {i}: {analytic} vs {numeric}"
                    );
                } else {
                    assert_eq!(analytic, 0.0, "parameter {j} is not a fixed effect");
                }
            }
        }
        let animal = CurvePoint {
            ran: Some(0),
            ..points[0]
        };
        assert!(population_gradients(&plan.model, &reported, &[animal]).is_err());
    }

    #[test]
    fn sparse_gradient_entries_are_the_dense_rows_and_touch_only_their_species() {
        let plan = fitted_plan(6);
        let reported = reported_parameters(&plan.model, &plan.estimate.species).unwrap();
        let n = reported.len();
        let point = |species, x| CurvePoint {
            ran: None,
            context: 0,
            species,
            treatment: 1,
            x,
        };
        let mixed = [point(0, 2.0), point(1, 5.5), point(1, 9.0)];
        let (_, dense) = population_gradients(&plan.model, &reported, &mixed).unwrap();
        // Species 1 alone: its rows are those of the mixed call.
        let alone = &mixed[1..];
        let (values, entries) = population_gradient_entries(&plan.model, &reported, alone).unwrap();
        assert_eq!(values, curves_at(&plan.model, &reported, alone).unwrap());
        let layout = CountLayout::new(plan.model.design(), plan.model.structure()).unwrap();
        let roles = layout.roles();
        let mut rows = vec![0.0; alone.len() * n];
        for entry in &entries {
            assert!(matches!(
                roles[entry.index],
                CountRole::Original(crate::design::ParameterRole::Beta { species: 1, .. })
            ));
            rows[entry.point * n + entry.index] += entry.value;
        }
        assert!(!entries.is_empty());
        assert_eq!(rows, dense[n..]);
    }

    #[test]
    fn population_predictions_have_no_warp_and_animal_ones_do() {
        let plan = fitted_plan(6);
        let reported = reported_parameters(&plan.model, &plan.estimate.species).unwrap();
        let predicted = predictions_at(&plan.model, &reported).unwrap();
        let shape = plan.model.table().shape();
        assert_eq!(
            predicted.animal.len(),
            shape.species * plan.model.table().key_count()
        );
        assert_eq!(
            predicted.population.len(),
            shape.species * shape.contexts * shape.treatments * shape.bins
        );
        assert_ne!(
            &predicted.animal[..shape.bins],
            &predicted.population[..shape.bins]
        );
    }
}
