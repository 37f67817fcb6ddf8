//! Profile likelihoods of single effects (model vignette §15.5), for the
//! effects whose Wald statistics the curvature at the optimum misjudges: a
//! transition point that a small rate step barely places can sit on a
//! likelihood that is sharp near the estimate and flat beyond it.
//!
//! The profile deviance of an effect at v is D(v) = 2 (M(v) − M̂), M the
//! species' negative Laplace marginal log-likelihood plus the curves' priors
//! (what the fit minimises, and what the Wald covariance is the curvature
//! of), M(v) its minimum with the effect held at v ([`super::pin`]) and
//! every other unknown, the random-effect variances included, refitted from
//! a warm start. Each effect is checked by three such fits: at 0 and at the
//! ends of its Wald interval, where a quadratic likelihood gives signed roots
//! z (the Wald statistic) and ±q. Where a root differs from that by more
//! than the tolerance, or the two tests disagree about significance, the
//! effect is flagged, and its interval is the profile's, {v : D(v) < q²},
//! its ends found by a secant search on √D (not a grid).

use super::curve::SLOPE_MAX;
use super::fit::{fit_species_pinned, free_warps_of, inverse_weights, PinnedFit, SpeciesFit};
use super::layout::CountLayout;
use super::objective::SpeciesProblem;
use super::pin::EffectPin;
use super::pipeline::CountPlan;
use super::settings::CountFitSettings;
use crate::design::Component;
use crate::engine::{self, Failure, PoolOptions};
use crate::error::Error;

/// Fits per interval end at most, beyond the Wald end's.
const SEARCH_FITS: usize = 8;
/// An end is found when √D is within this of q.
const ROOT_TOLERANCE: f64 = 0.05;
/// A held fit whose effect misses its value by more than this (relative)
/// could not be held there (the value is outside what the curves allow).
const HOLD_TOLERANCE: f64 = 1e-3;
/// D below −this: a fit with the effect held is better than the fit (a
/// local optimum), beyond the Newton tolerance's noise.
const BETTER_FIT: f64 = 0.01;

/// One effect to check: its position (from 0) in the reported vector, its
/// Wald standard error and its Wald interval's quantile q.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ProfileRequest {
    pub index: usize,
    pub standard_error: f64,
    pub quantile: f64,
}

/// What the check and, when flagged, the profile found.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct EffectProfile {
    pub index: usize,
    pub estimate: f64,
    /// D at 0, and at the Wald interval's lower and upper ends.
    pub deviance_zero: f64,
    pub deviance_lower: f64,
    pub deviance_upper: f64,
    pub flagged: bool,
    /// The profile interval (NaN when not flagged, or where a held fit
    /// failed); an end that reached the effect's range without D reaching
    /// q² is open (`*_open`), the interval there is the range's end.
    pub lower: f64,
    pub upper: f64,
    pub lower_open: bool,
    pub upper_open: bool,
    /// Held fits made.
    pub fits: usize,
    pub note: String,
}

/// Where each effect of `indices` (positions in the reported vector) sits:
/// its species, and the pin (held at 0) that holds it. One pass over the
/// layout for all of them.
fn locate_all(plan: &CountPlan, indices: &[usize]) -> Result<Vec<(usize, EffectPin)>, String> {
    let model = &plan.model;
    let layout = CountLayout::new(model.design(), model.structure())?;
    let shape = model.table().shape();
    let inverse = inverse_weights(model)?;
    let treatments = shape.treatments;
    let mut found: Vec<Option<(usize, EffectPin)>> = vec![None; indices.len()];
    for s in 0..shape.species {
        for c in 0..shape.contexts {
            let degree = model.structure().degree(c, s);
            for component in Component::ALL {
                for k in 0..component.count(degree) {
                    for j in 1..treatments {
                        let Some(index) = layout.original.beta_index(component, c, s, k, j) else {
                            continue;
                        };
                        for (slot, _) in indices.iter().enumerate().filter(|(_, &i)| i == index) {
                            found[slot] = Some((
                                s,
                                EffectPin {
                                    context: c,
                                    component,
                                    block: k,
                                    weights: inverse[j * treatments..(j + 1) * treatments].to_vec(),
                                    value: 0.0,
                                },
                            ));
                        }
                    }
                }
            }
        }
    }
    found
        .into_iter()
        .zip(indices)
        .map(|(pin, &index)| {
            pin.ok_or_else(|| {
                format!(
                    "parameter {} is not a treatment effect of a curve",
                    index + 1
                )
            })
        })
        .collect()
}

/// The range an effect can take: each treatment's value within its
/// component's range (points between the axis' edges, slopes in (0, S_MAX));
/// rates are unbounded above.
fn effect_range(pin: &EffectPin, degree: usize, axis: super::curve::Axis) -> (f64, f64) {
    let (low, high) = match pin.component {
        Component::Point => (
            axis.point(pin.block, degree, 0.0),
            axis.point(pin.block, degree, 1.0),
        ),
        Component::Slope => (0.0, SLOPE_MAX),
        Component::Rate => (0.0, f64::INFINITY),
    };
    let mut range = (0.0, 0.0);
    for &w in &pin.weights {
        if w > 0.0 {
            range.0 += w * low;
            range.1 += w * high;
        } else if w < 0.0 {
            range.0 += w * high;
            range.1 += w * low;
        }
    }
    range
}

/// One species' checks: the fit and what a held fit needs.
struct SpeciesProfiles<'p> {
    plan: &'p CountPlan,
    species: usize,
    full: &'p SpeciesFit,
    /// The species' problem for its priors (every held fit keeps the fit's
    /// random-effect SDs, so one problem serves them all).
    priors: SpeciesProblem<'p>,
    full_value: f64,
}

impl<'p> SpeciesProfiles<'p> {
    fn new(plan: &'p CountPlan, species: usize) -> Self {
        let full = &plan.estimate.species[species];
        let priors = SpeciesProblem::new(&plan.model, species, free_warps_of(full.sigma))
            .with_settings(&plan.settings);
        let mut profiles = SpeciesProfiles {
            plan,
            species,
            full,
            priors,
            full_value: 0.0,
        };
        profiles.full_value = profiles.penalised(full);
        profiles
    }

    /// M of a fit: −(Laplace marginal) plus the curves' priors.
    fn penalised(&self, fit: &SpeciesFit) -> f64 {
        fit.negative_log_likelihood + self.priors.prior_penalty(&fit.state)
    }

    fn degree(&self, pin: &EffectPin) -> usize {
        self.plan
            .model
            .structure()
            .degree(pin.context, self.species)
    }

    /// D at `value`, fitted from `start`, with its slope and the held fit.
    fn deviance_at(
        &self,
        pin: &EffectPin,
        value: f64,
        start: &SpeciesFit,
    ) -> Result<HeldPoint, String> {
        let held = EffectPin {
            value,
            ..pin.clone()
        };
        // The random-effect SDs stay at the fit's: each held fit is then one
        // Newton run, and D carries no noise from the variance updates'
        // tolerance.
        let settings = CountFitSettings {
            fixed_sigma: Some(self.full.sigma),
            ..self.plan.settings
        };
        let PinnedFit { fit, multiplier } = fit_species_pinned(
            &self.plan.model,
            self.species,
            (&start.state, start.sigma),
            &settings,
            &held,
        )?;
        if !fit.converged {
            return Err(format!(
                "the fit with the effect held at {value:.4} did not converge ({})",
                fit.stop.as_deref().unwrap_or("stopped")
            ));
        }
        let achieved = held.effect(&fit.state, self.degree(pin), self.plan.model.axis());
        if (achieved - value).abs() > HOLD_TOLERANCE * (1.0 + value.abs()) {
            return Err(format!("the effect cannot be held at {value:.4}"));
        }
        // The fit holds the effect to 1e-4 (relative); the first-order
        // term carries its minimum from there to `value` (M(v) ≈ M(b) +
        // λ (v − b)), so D is accurate to that tolerance squared.
        let at_value = self.penalised(&fit) + multiplier * (value - achieved);
        Ok(HeldPoint {
            value,
            deviance: 2.0 * (at_value - self.full_value),
            slope: 2.0 * multiplier,
            fit,
        })
    }

    fn check(
        &self,
        request: ProfileRequest,
        pin: &EffectPin,
        tolerance: f64,
    ) -> Result<EffectProfile, String> {
        let pin = pin.clone();
        let degree = self.degree(&pin);
        let axis = self.plan.model.axis();
        let estimate = pin.effect(&self.full.state, degree, axis);
        let (se, q) = (request.standard_error, request.quantile);
        if !(se.is_finite() && se > 0.0 && q.is_finite() && q > 0.0) {
            return Err("the effect has no Wald standard error to check".into());
        }
        let mut result = EffectProfile {
            index: request.index,
            estimate,
            deviance_zero: f64::NAN,
            deviance_lower: f64::NAN,
            deviance_upper: f64::NAN,
            flagged: false,
            lower: f64::NAN,
            upper: f64::NAN,
            lower_open: false,
            upper_open: false,
            fits: 0,
            note: String::new(),
        };
        let mut notes: Vec<String> = Vec::new();
        let range = effect_range(&pin, degree, axis);
        let inside = |v: f64| v.clamp(range.0, range.1);
        // The three checks, each from the fit.
        let mut evaluated = vec![HeldPoint {
            value: estimate,
            deviance: 0.0,
            slope: 0.0,
            fit: self.full.clone(),
        }];
        let mut check_at = |value: f64, result: &mut EffectProfile, notes: &mut Vec<String>| {
            result.fits += 1;
            match self.deviance_at(&pin, value, self.full) {
                Ok(point) => {
                    let deviance = point.deviance;
                    evaluated.push(point);
                    deviance
                }
                Err(message) => {
                    notes.push(message);
                    f64::NAN
                }
            }
        };
        result.deviance_zero = check_at(0.0, &mut result, &mut notes);
        result.deviance_lower = check_at(inside(estimate - q * se), &mut result, &mut notes);
        result.deviance_upper = check_at(inside(estimate + q * se), &mut result, &mut notes);
        let root = |d: f64| d.max(0.0).sqrt();
        let z = estimate / se;
        let signed_zero = estimate.signum() * root(result.deviance_zero);
        let checks = [
            result.deviance_zero,
            result.deviance_lower,
            result.deviance_upper,
        ];
        let better = checks.iter().any(|&d| d < -BETTER_FIT);
        if better {
            notes
                .push("a fit with the effect held is better than the fit (a local optimum)".into());
        }
        result.flagged = checks.iter().any(|d| d.is_nan())
            || better
            || (signed_zero - z).abs() > tolerance
            || (root(result.deviance_lower) - q).abs() > tolerance
            || (root(result.deviance_upper) - q).abs() > tolerance
            || ((z.abs() > q) != (result.deviance_zero > q * q));
        if result.flagged {
            for (direction, limit) in [(-1.0, range.0), (1.0, range.1)] {
                let end = self.interval_end(&pin, estimate, direction, limit, q, &mut evaluated);
                result.fits += end.fits;
                if let Some(message) = end.note {
                    notes.push(message);
                }
                if direction < 0.0 {
                    (result.lower, result.lower_open) = (end.value, end.open);
                } else {
                    (result.upper, result.upper_open) = (end.value, end.open);
                }
            }
        }
        notes.dedup();
        result.note = notes.join("; ");
        Ok(result)
    }

    /// One end of the profile interval: where √D crosses q on the side
    /// `direction` of the estimate, up to `limit`. `evaluated` holds the
    /// held fits so far; each new fit starts from the one nearest its value.
    /// The next value is a Newton step on √D from the fit nearest the
    /// crossing (each held fit knows its slope, see [`PinnedFit`]), kept
    /// inside the bracket once there is one (the secant otherwise), the
    /// Venzon–Moolgavkar idea without its second derivatives.
    fn interval_end(
        &self,
        pin: &EffectPin,
        estimate: f64,
        direction: f64,
        limit: f64,
        q: f64,
        evaluated: &mut Vec<HeldPoint>,
    ) -> IntervalEnd {
        let mut fits = 0;
        let side = |v: f64| (v - estimate) * direction;
        let mut limit = limit;
        // A Newton step inside the bracket that did not settle the end is
        // followed by a secant step: a profile with a kink (held fits that
        // change optimum) defeats tangents, not brackets.
        let mut newton_last = false;
        loop {
            // The farthest point below q and the nearest at or above it, on
            // this side (the estimate itself is at D = 0).
            let mut below: Option<&HeldPoint> = None;
            let mut above: Option<&HeldPoint> = None;
            for point in evaluated.iter() {
                if side(point.value) < 0.0 || point.deviance.is_nan() {
                    continue;
                }
                if point.root() < q {
                    if below.is_none_or(|b| side(point.value) > side(b.value)) {
                        below = Some(point);
                    }
                } else if above.is_none_or(|a| side(point.value) < side(a.value)) {
                    above = Some(point);
                }
            }
            let (below_v, below_r) = below.map_or((estimate, 0.0), |b| (b.value, b.root()));
            let next = match above {
                Some(above) => {
                    let (above_v, above_r) = (above.value, above.root());
                    if (above_r - q).abs() < ROOT_TOLERANCE {
                        return IntervalEnd::found(above_v, fits);
                    }
                    if (below_r - q).abs() < ROOT_TOLERANCE {
                        return IntervalEnd::found(below_v, fits);
                    }
                    let secant =
                        below_v + (q - below_r) * (above_v - below_v) / (above_r - below_r);
                    let nearer = match below {
                        Some(b) if (below_r - q).abs() < (above_r - q).abs() => b,
                        _ => above,
                    };
                    // Strictly inside the bracket, or the secant.
                    let (low, high) = (side(below_v), side(above_v));
                    let margin = 0.01 * (high - low);
                    let newton = nearer
                        .newton_towards(q, direction)
                        .filter(|&v| side(v) > low + margin && side(v) < high - margin)
                        .filter(|_| !newton_last);
                    newton_last = newton.is_some();
                    newton.unwrap_or(secant)
                }
                None => {
                    if below.is_some() && (q - below_r) < ROOT_TOLERANCE {
                        return IntervalEnd::found(below_v, fits);
                    }
                    if side(below_v) >= side(limit) - 1e-9 {
                        return IntervalEnd {
                            value: limit,
                            open: true,
                            fits,
                            note: None,
                        };
                    }
                    let reach = side(below_v).max(1e-6);
                    // Newton from the farthest fit below q when √D rises
                    // there; otherwise (the estimate, or a profile that
                    // turns) half again as far.
                    let step = below
                        .and_then(|b| b.newton_towards(q, direction))
                        .map(|v| side(v) - side(below_v))
                        .filter(|&step| step > 0.0)
                        .unwrap_or(0.5 * reach);
                    let target = below_v + direction * step;
                    if side(target) > side(limit) {
                        limit
                    } else {
                        target
                    }
                }
            };
            if fits >= SEARCH_FITS {
                // Out of fits: bracketed, the secant's value; otherwise the
                // farthest value held, as an open end.
                let end = if above.is_some() { next } else { below_v };
                return IntervalEnd {
                    value: end,
                    open: above.is_none(),
                    fits,
                    note: Some(format!(
                        "the profile's {} end was not settled in {SEARCH_FITS} fits",
                        if direction < 0.0 { "lower" } else { "upper" }
                    )),
                };
            }
            let start = evaluated
                .iter()
                .filter(|point| !point.deviance.is_nan())
                .min_by(|a, b| (a.value - next).abs().total_cmp(&(b.value - next).abs()))
                .map(|point| point.fit.clone())
                .unwrap_or_else(|| self.full.clone());
            fits += 1;
            match self.deviance_at(pin, next, &start) {
                Ok(point) => evaluated.push(point),
                Err(message) => {
                    if side(next) > side(below_v) + 1e-9 && side(next) <= side(limit) {
                        // Cannot be held there: the range ends before it.
                        if (next - limit).abs() < 1e-9 || side(next) - side(below_v) < 1e-3 {
                            return IntervalEnd {
                                value: below_v,
                                open: true,
                                fits,
                                note: Some(message),
                            };
                        }
                        limit = below_v + 0.5 * (next - below_v);
                        continue;
                    }
                    return IntervalEnd {
                        value: f64::NAN,
                        open: false,
                        fits,
                        note: Some(message),
                    };
                }
            }
        }
    }
}

/// A held fit of the profile: the value held, D there and its slope dD/dv
/// (twice the constraint's multiplier), and the fit.
struct HeldPoint {
    value: f64,
    deviance: f64,
    slope: f64,
    fit: SpeciesFit,
}

impl HeldPoint {
    /// √D (0 where a held fit was better than the fit).
    fn root(&self) -> f64 {
        self.deviance.max(0.0).sqrt()
    }

    /// Where the tangent of √D here reaches `q` (d√D/dv = D′/(2√D)), when
    /// √D rises away from the estimate (`direction`) here; `None` at D ≤ 0,
    /// or where the profile turns.
    fn newton_towards(&self, q: f64, direction: f64) -> Option<f64> {
        let root = self.root();
        let rise = self.slope / (2.0 * root);
        (root > 0.0 && rise.is_finite() && rise * direction > 0.0)
            .then(|| self.value + (q - root) / rise)
    }
}

struct IntervalEnd {
    value: f64,
    open: bool,
    fits: usize,
    note: Option<String>,
}

impl IntervalEnd {
    fn found(value: f64, fits: usize) -> Self {
        IntervalEnd {
            value,
            open: false,
            fits,
            note: None,
        }
    }
}

/// Checks and, where flagged, profiles the effects `requests` of `plan`,
/// one engine task per species that has any. A request that cannot be
/// checked (no standard error, a failed species, a held fit that failed)
/// is returned flagged with NaN and its reason in `note`.
pub(crate) fn profile_effects(
    plan: &CountPlan,
    requests: &[ProfileRequest],
    tolerance: f64,
    options: &PoolOptions,
    interrupted: impl FnMut() -> bool,
    progress: impl FnMut(usize, usize),
) -> Result<Vec<EffectProfile>, Error> {
    let indices: Vec<usize> = requests.iter().map(|r| r.index).collect();
    let located = locate_all(plan, &indices).map_err(Error::input)?;
    // Per species its requests, each with its position among `requests`
    // (the results come back in the requests' order).
    let mut by_species: Vec<(usize, Vec<Located>)> = Vec::new();
    for (position, (request, (species, pin))) in requests.iter().zip(located).enumerate() {
        match by_species.iter_mut().find(|(s, _)| *s == species) {
            Some((_, list)) => list.push((position, *request, pin)),
            None => by_species.push((species, vec![(position, *request, pin)])),
        }
    }
    let outcomes = engine::map_tasks(
        by_species.len(),
        options,
        |task| {
            let (species, list) = &by_species[task - 1];
            let full = &plan.estimate.species[*species];
            let profiles = SpeciesProfiles::new(plan, *species);
            Ok(list
                .iter()
                .map(|(_, request, pin)| {
                    if full.has_failed() {
                        return unchecked(*request, "the gene's fit failed".into());
                    }
                    profiles
                        .check(*request, pin, tolerance)
                        .unwrap_or_else(|message| unchecked(*request, message))
                })
                .collect::<Vec<EffectProfile>>())
        },
        interrupted,
        progress,
    )?;
    let mut out: Vec<Option<EffectProfile>> = vec![None; requests.len()];
    for ((_, list), outcome) in by_species.iter().zip(outcomes) {
        let profiles: Vec<EffectProfile> = match outcome {
            Ok(profiles) => profiles,
            Err(failure) => {
                let message = match failure {
                    Failure::Task(message) => message,
                    other => other.to_string(),
                };
                list.iter()
                    .map(|(_, r, _)| unchecked(*r, message.clone()))
                    .collect()
            }
        };
        for ((position, _, _), profile) in list.iter().zip(profiles) {
            out[*position] = Some(profile);
        }
    }
    Ok(out.into_iter().flatten().collect())
}

/// A request with its position among the requests and its pin.
type Located = (usize, ProfileRequest, EffectPin);

fn unchecked(request: ProfileRequest, note: String) -> EffectProfile {
    EffectProfile {
        index: request.index,
        estimate: f64::NAN,
        deviance_zero: f64::NAN,
        deviance_lower: f64::NAN,
        deviance_upper: f64::NAN,
        flagged: true,
        lower: f64::NAN,
        upper: f64::NAN,
        lower_open: false,
        upper_open: false,
        fits: 0,
        note,
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests_support::fitted_plan;
    use super::*;

    /// Point effects of every species, positions in the reported vector,
    /// the species taken in turn (so that one species' requests are not
    /// contiguous, as a fit of several contexts lays them out).
    fn point_requests(plan: &CountPlan) -> Vec<ProfileRequest> {
        let model = &plan.model;
        let layout = CountLayout::new(model.design(), model.structure()).unwrap();
        let shape = model.table().shape();
        let per_species: Vec<Vec<usize>> = (0..shape.species)
            .map(|s| {
                let mut indices = Vec::new();
                for c in 0..shape.contexts {
                    for k in 0..model.structure().degree(c, s) {
                        for j in 1..shape.treatments {
                            indices.push(
                                layout
                                    .original
                                    .beta_index(Component::Point, c, s, k, j)
                                    .unwrap(),
                            );
                        }
                    }
                }
                indices
            })
            .collect();
        let longest = per_species.iter().map(Vec::len).max().unwrap_or(0);
        (0..longest)
            .flat_map(|i| {
                per_species
                    .iter()
                    .rev()
                    .filter_map(move |list| list.get(i).copied())
            })
            .map(|index| ProfileRequest {
                index,
                standard_error: 0.5,
                quantile: 1.96,
            })
            .collect()
    }

    #[test]
    fn results_come_back_in_the_requests_order_and_alone_equal_together() {
        let plan = fitted_plan(5);
        let requests = point_requests(&plan);
        let species: Vec<usize> =
            locate_all(&plan, &requests.iter().map(|r| r.index).collect::<Vec<_>>())
                .unwrap()
                .into_iter()
                .map(|(s, _)| s)
                .collect();
        assert!(
            species.windows(2).any(|w| w[0] > w[1]),
            "requests must interleave species: {species:?}"
        );
        let serial = PoolOptions::default();
        let together =
            profile_effects(&plan, &requests, 0.25, &serial, || false, |_, _| {}).unwrap();
        assert_eq!(together.len(), requests.len());
        for (request, profile) in requests.iter().zip(&together) {
            assert_eq!(profile.index, request.index);
            let alone =
                profile_effects(&plan, &[*request], 0.25, &serial, || false, |_, _| {}).unwrap();
            // (Debug form: NaN interval ends compare equal there.)
            assert_eq!(format!("{:?}", alone[0]), format!("{profile:?}"));
        }
        // A position that is not a treatment effect of a curve is an error.
        let baseline = ProfileRequest {
            index: 0,
            standard_error: 1.0,
            quantile: 1.96,
        };
        assert!(profile_effects(&plan, &[baseline], 0.25, &serial, || false, |_, _| {}).is_err());
    }
}
