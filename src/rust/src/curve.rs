//! The curve of one block: warping (model vignette §7.1), the poly-sigmoid Ψ
//! (§5) and the block's boundary distances (§11.1), each with exact derivatives.
//!
//! A [`BlockCurve`] holds the warped components of one (ran, context,
//! species, treatment) block. They are computed once per block and then used
//! for every bin of it; adjoints flow back the same way.

use crate::design::{boundary_distances_per_block, components_per_block};

/// Offset of the rate boundary distances from −0.01 (the lower bound on predicted log rates).
pub(crate) const RATE_DISTANCE_OFFSET: f64 = 0.01;

/// ω and its partial derivatives.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Warped {
    pub(crate) value: f64,
    /// ∂ω/∂z.
    pub(crate) d_unwarped: f64,
    /// ∂ω/∂w.
    pub(crate) d_factor: f64,
}

/// ω(z; b, w): pulls z toward b for w > 0 and toward 0 for w < 0; w = 0 is the identity.
///
/// 1 − exp(−x) is evaluated as −expm1(−x): with the pseudo-infinite bound x
/// is about 1e-9, where the plain form keeps only seven digits.
pub(crate) fn warp(unwarped: f64, bound: f64, factor: f64) -> Warped {
    if factor == 0.0 {
        return Warped {
            value: unwarped,
            d_unwarped: 1.0,
            d_factor: 0.0,
        };
    }
    let squared = factor * factor;
    if factor > 0.0 {
        let exponent = squared * unwarped / bound;
        let decay = (-exponent).exp();
        let ratio = -(-exponent).exp_m1();
        let magnitude = bound - unwarped;
        Warped {
            value: unwarped + ratio * magnitude,
            d_unwarped: 1.0 - ratio + squared / bound * decay * magnitude,
            d_factor: 2.0 * factor * unwarped / bound * decay * magnitude,
        }
    } else {
        let distance_to_bound = bound - unwarped;
        let exponent = squared * distance_to_bound / bound;
        let decay = (-exponent).exp();
        let ratio = -(-exponent).exp_m1();
        Warped {
            value: unwarped - ratio * unwarped,
            d_unwarped: 1.0 - ratio + unwarped * squared / bound * decay,
            d_factor: -unwarped * 2.0 * factor * distance_to_bound / bound * decay,
        }
    }
}

/// 1/(1+e^{−u}) without overflow for either sign of u.
pub(crate) fn sigmoid(u: f64) -> f64 {
    // Beyond ±SATURATED the formulas below round to exactly 1 (e^{-u} is
    // under half an ulp of 1) or 0 (e^u underflows); returning those values
    // directly gives the same bits without libm's slow underflow path,
    // which the count family's rows hit for every positive rate.
    if u > 0.0 {
        if u > SATURATED {
            return 1.0;
        }
        1.0 / (1.0 + (-u).exp())
    } else {
        if u < -UNDERFLOW {
            return 0.0;
        }
        let e = u.exp();
        e / (1.0 + e)
    }
}

/// Above this, 1 / (1 + e^{-u}) and u + ln(1 + e^{-u}) equal 1 and u in
/// double precision (e^{-40} ≈ 4e-18 is under half an ulp of 1).
pub(crate) const SATURATED: f64 = 40.0;

/// Below −UNDERFLOW, e^u is exactly 0 in double precision.
pub(crate) const UNDERFLOW: f64 = 746.0;

/// The warping factors that apply to one block (all 0 for population rows).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct WarpFactors {
    pub(crate) point: f64,
    pub(crate) rate: f64,
    pub(crate) slope: f64,
}

/// Upper bounds of the warp per component (model vignette §7.1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct WarpBounds {
    pub(crate) rate: f64,
    pub(crate) slope: f64,
    pub(crate) point: f64,
}

/// Warped components of one block, with the derivatives needed to take
/// adjoints back to the unwarped values and the warping factors.
///
/// Every per-block vector is laid out `[Rt_1..Rt_{d+1}, tslope_1..tslope_d,
/// tpoint_1..tpoint_d]` (see [`crate::design::Component::position`]).
#[derive(Clone, Debug)]
pub(crate) struct BlockCurve {
    degree: usize,
    values: Vec<f64>,
    d_unwarped: Vec<f64>,
    d_factor: Vec<f64>,
    adjoint: Vec<f64>,
    /// σ of every transition at `last_x`, kept for the backward pass.
    sigmoids: Vec<f64>,
    last_x: f64,
    /// σ_k(b) for every transition k and bin b = 1..=bins, laid out k·bins + b − 1
    /// (see [`BlockCurve::tabulate_bins`]).
    bin_sigmoids: Vec<f64>,
    tabulated_bins: usize,
}

impl BlockCurve {
    /// Workspace for curves up to `max_degree`; larger degrees grow it once.
    pub(crate) fn with_capacity(max_degree: usize) -> Self {
        let length = components_per_block(max_degree);
        Self {
            degree: 0,
            values: vec![0.0; length],
            d_unwarped: vec![0.0; length],
            d_factor: vec![0.0; length],
            adjoint: vec![0.0; length],
            sigmoids: vec![0.0; max_degree],
            last_x: f64::NAN,
            bin_sigmoids: Vec::new(),
            tabulated_bins: 0,
        }
    }

    /// Warps the unwarped components of a block and clears the adjoints.
    /// `unwarped` must hold at least 3·degree+1 values.
    pub(crate) fn set(
        &mut self,
        degree: usize,
        unwarped: &[f64],
        factors: WarpFactors,
        bounds: WarpBounds,
    ) {
        let length = components_per_block(degree);
        if self.values.len() < length {
            self.values.resize(length, 0.0);
            self.d_unwarped.resize(length, 0.0);
            self.d_factor.resize(length, 0.0);
            self.adjoint.resize(length, 0.0);
            self.sigmoids.resize(degree, 0.0);
        }
        self.degree = degree;
        self.last_x = f64::NAN;
        for (j, &z) in unwarped[..length].iter().enumerate() {
            let (bound, factor) = if j <= degree {
                (bounds.rate, factors.rate)
            } else if j <= 2 * degree {
                (bounds.slope, factors.slope)
            } else {
                (bounds.point, factors.point)
            };
            let warped = warp(z, bound, factor);
            self.values[j] = warped.value;
            self.d_unwarped[j] = warped.d_unwarped;
            self.d_factor[j] = warped.d_factor;
        }
        self.adjoint[..length].fill(0.0);
    }

    /// All warped components of the block.
    #[cfg(test)]
    pub(crate) fn values(&self) -> &[f64] {
        &self.values[..components_per_block(self.degree)]
    }

    /// Warped Rt_1..Rt_{d+1}.
    pub(crate) fn rates(&self) -> &[f64] {
        &self.values[..=self.degree]
    }

    /// Warped tslope_1..tslope_d.
    pub(crate) fn slopes(&self) -> &[f64] {
        &self.values[self.degree + 1..2 * self.degree + 1]
    }

    /// Warped tpoint_1..tpoint_d.
    pub(crate) fn points(&self) -> &[f64] {
        &self.values[2 * self.degree + 1..3 * self.degree + 1]
    }

    /// Tabulates every transition's sigmoid at the bins 1..=`bins`, for
    /// [`BlockCurve::evaluate_bin`]. Along the bins, e^{−slope·(b − point)}
    /// is a geometric sequence, so one exponential per transition replaces
    /// one per bin: the sequence starts at the bin nearest the point (where
    /// it is near 1) and is multiplied or divided by e^{−slope} outwards, so
    /// it can only underflow to 0 or overflow to ∞ where σ is 1 or 0 anyway.
    /// Transitions where that cannot work (non-finite values, or an
    /// exponential that is 0 or ∞ at the start) use the direct formula.
    pub(crate) fn tabulate_bins(&mut self, bins: usize) {
        let d = self.degree;
        self.tabulated_bins = bins;
        self.bin_sigmoids.resize(d * bins, 0.0);
        for k in 0..d {
            let slope = self.values[d + 1 + k];
            let point = self.values[2 * d + 1 + k];
            let row = &mut self.bin_sigmoids[k * bins..(k + 1) * bins];
            let ratio = (-slope).exp();
            let start = point.round().clamp(1.0, bins.max(1) as f64);
            let first = (-slope * (start - point)).exp();
            let usable = ratio.is_finite() && ratio > 0.0 && first.is_finite() && first > 0.0;
            if !usable {
                for (b, sigma) in row.iter_mut().enumerate() {
                    *sigma = sigmoid(slope * ((b + 1) as f64 - point));
                }
                continue;
            }
            let start = start as usize;
            let mut term = first;
            for sigma in row[start - 1..].iter_mut() {
                *sigma = 1.0 / (1.0 + term);
                term *= ratio;
            }
            let mut term = first / ratio;
            for sigma in row[..start - 1].iter_mut().rev() {
                *sigma = 1.0 / (1.0 + term);
                term /= ratio;
            }
        }
    }

    /// Ψ at bin `bin` (1-based) from the table of [`BlockCurve::tabulate_bins`];
    /// like [`BlockCurve::evaluate`] otherwise, the backward pass included.
    pub(crate) fn evaluate_bin(&mut self, bin: usize) -> f64 {
        let d = self.degree;
        let bins = self.tabulated_bins;
        self.last_x = bin as f64;
        let mut psi = self.values[0];
        for k in 0..d {
            let upper = self.values[k + 1];
            if upper.is_infinite() {
                return upper;
            }
            let s = self.bin_sigmoids[k * bins + bin - 1];
            self.sigmoids[k] = s;
            psi += (upper - self.values[k]) * s;
        }
        psi
    }

    /// Ψ(x). Remembers x and the sigmoids for [`BlockCurve::add_value_adjoint`].
    pub(crate) fn evaluate(&mut self, x: f64) -> f64 {
        let d = self.degree;
        self.last_x = x;
        let mut psi = self.values[0];
        for k in 0..d {
            let upper = self.values[k + 1];
            if upper.is_infinite() {
                return upper;
            }
            let slope = self.values[d + 1 + k];
            let point = self.values[2 * d + 1 + k];
            let s = sigmoid(slope * (x - point));
            self.sigmoids[k] = s;
            psi += (upper - self.values[k]) * s;
        }
        psi
    }

    /// Adds `adjoint · ∂Ψ/∂(warped components)` at the x of the last
    /// [`BlockCurve::evaluate`].
    pub(crate) fn add_value_adjoint(&mut self, adjoint: f64) {
        let d = self.degree;
        let x = self.last_x;
        // ∂Ψ/∂Rt_j = σ_{j−1} − σ_j with σ_0 = 1 and σ_{d+1} = 0 (1-based transitions).
        self.adjoint[0] += adjoint;
        for k in 0..d {
            let s = self.sigmoids[k];
            self.adjoint[k] -= adjoint * s;
            self.adjoint[k + 1] += adjoint * s;
            let rise = self.values[k + 1] - self.values[k];
            let slope = self.values[d + 1 + k];
            let point = self.values[2 * d + 1 + k];
            let scaled = adjoint * rise * s * (1.0 - s);
            self.adjoint[d + 1 + k] += scaled * (x - point);
            self.adjoint[2 * d + 1 + k] -= scaled * slope;
        }
    }

    /// The block's boundary distances in the original's order (model vignette
    /// §11.1): d slopes, d+1 gaps
    /// on [0, tpoint_1..tpoint_d, B] less the buffer, d+1 rates + 0.01; a
    /// single rate distance for d = 0. NaN distances become 0.
    /// `out` must hold [`boundary_distances_per_block`] values.
    pub(crate) fn boundary_distances(&self, bins: f64, buffer: f64, out: &mut [f64]) {
        let d = self.degree;
        let out = &mut out[..boundary_distances_per_block(d)];
        if d == 0 {
            out[0] = self.values[0] + RATE_DISTANCE_OFFSET;
        } else {
            let points = self.points();
            out[..d].copy_from_slice(self.slopes());
            for gap in 0..=d {
                let lower = if gap == 0 { 0.0 } else { points[gap - 1] };
                let upper = if gap == d { bins } else { points[gap] };
                out[d + gap] = upper - lower - buffer;
            }
            for (distance, &rate) in out[2 * d + 1..].iter_mut().zip(self.rates()) {
                *distance = rate + RATE_DISTANCE_OFFSET;
            }
        }
        for distance in out.iter_mut() {
            if distance.is_nan() {
                *distance = 0.0;
            }
        }
    }

    /// Adds `Σ_i adjoints[i] · ∂distance_i/∂(warped components)`, in the order
    /// of [`BlockCurve::boundary_distances`].
    pub(crate) fn add_boundary_adjoint(&mut self, adjoints: &[f64]) {
        let d = self.degree;
        if d == 0 {
            self.adjoint[0] += adjoints[0];
            return;
        }
        for (slope_adjoint, &a) in self.adjoint[d + 1..2 * d + 1].iter_mut().zip(adjoints) {
            *slope_adjoint += a;
        }
        for gap in 0..=d {
            let a = adjoints[d + gap];
            if gap < d {
                self.adjoint[2 * d + 1 + gap] += a;
            }
            if gap > 0 {
                self.adjoint[2 * d + gap] -= a;
            }
        }
        for (rate_adjoint, &a) in self.adjoint[..=d].iter_mut().zip(&adjoints[2 * d + 1..]) {
            *rate_adjoint += a;
        }
    }

    /// Chains the accumulated adjoints through the warp: adds ∂/∂z to
    /// `unwarped_adjoint` (same layout) and returns ∂/∂w per warping factor.
    pub(crate) fn accumulate_unwarped_adjoint(&self, unwarped_adjoint: &mut [f64]) -> WarpFactors {
        let d = self.degree;
        let mut factors = WarpFactors::default();
        let length = components_per_block(d);
        for (j, target) in unwarped_adjoint[..length].iter_mut().enumerate() {
            let adjoint = self.adjoint[j];
            *target += adjoint * self.d_unwarped[j];
            let by_factor = adjoint * self.d_factor[j];
            if j <= d {
                factors.rate += by_factor;
            } else if j <= 2 * d {
                factors.slope += by_factor;
            } else {
                factors.point += by_factor;
            }
        }
        factors
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tabulated_sigmoids_match_the_direct_formula() {
        let bounds = WarpBounds {
            rate: 4.5e8,
            slope: 4.5e8,
            point: 40.0,
        };
        for &(slope, point) in &[
            (0.5, 12.3),
            (3.0, 1.2),
            (800.0, 20.0),
            (0.01, 39.9),
            (1e-9, 5.0),
            (2.0, 60.0),
            (2.0, -30.0),
            (-0.7, 18.0),
            (5.0, 40.0),
        ] {
            let mut curve = BlockCurve::with_capacity(1);
            curve.set(1, &[1.0, 3.0, slope, point], WarpFactors::default(), bounds);
            curve.tabulate_bins(40);
            for bin in 1..=40 {
                let tabulated = curve.evaluate_bin(bin);
                let direct = curve.evaluate(bin as f64);
                assert!(
                    (tabulated - direct).abs() <= 1e-12 * direct.abs().max(1.0),
                    "slope {slope}, point {point}, bin {bin}: {tabulated} vs {direct}"
                );
            }
        }
    }

    const INF_WARP: f64 = 1e-7 / f64::EPSILON;

    fn bounds() -> WarpBounds {
        WarpBounds {
            rate: INF_WARP,
            slope: INF_WARP,
            point: 50.0,
        }
    }

    fn central<F: Fn(f64) -> f64>(f: F, x: f64) -> f64 {
        let h = 1e-6 * x.abs().max(1.0);
        (f(x + h) - f(x - h)) / (2.0 * h)
    }

    fn close(actual: f64, expected: f64, tolerance: f64) -> bool {
        (actual - expected).abs() <= tolerance * expected.abs().max(1.0)
    }

    #[test]
    fn zero_warp_is_the_identity() {
        let warped = warp(12.5, 50.0, 0.0);
        assert_eq!(
            warped,
            Warped {
                value: 12.5,
                d_unwarped: 1.0,
                d_factor: 0.0
            }
        );
    }

    #[test]
    fn warp_follows_its_formula() {
        let (z, b) = (12.0, 50.0);
        let w: f64 = 0.7;
        let up = z + (1.0 - (-w * w * z / b).exp()) * (b - z);
        assert!(close(warp(z, b, w).value, up, 1e-15));
        let down = z - (1.0 - (-w * w * (b - z) / b).exp()) * z;
        assert!(close(warp(z, b, -w).value, down, 1e-15));
        assert!(warp(z, b, w).value > z && warp(z, b, -w).value < z);
    }

    #[test]
    fn pseudo_infinite_bound_scales_multiplicatively() {
        let z = 2.5;
        let w: f64 = 0.3;
        assert!(close(warp(z, INF_WARP, w).value, z * (1.0 + w * w), 1e-8));
        assert!(close(warp(z, INF_WARP, -w).value, z * (-w * w).exp(), 1e-8));
    }

    #[test]
    fn warp_derivatives_match_finite_differences() {
        for &(z, b) in &[(12.0, 50.0), (0.8, INF_WARP), (3.0, INF_WARP), (45.0, 50.0)] {
            for &w in &[0.35, -0.35, 1.4, -1.4, 0.05] {
                let warped = warp(z, b, w);
                let dz = central(|v| warp(v, b, w).value, z);
                let dw = central(|v| warp(z, b, v).value, w);
                assert!(close(warped.d_unwarped, dz, 1e-8), "z={z} b={b} w={w}");
                assert!(
                    close(warped.d_factor, dw, 1e-7),
                    "z={z} b={b} w={w}: {} vs {dw}",
                    warped.d_factor
                );
            }
        }
    }

    #[test]
    fn sigmoid_is_stable_at_extremes() {
        assert_eq!(sigmoid(0.0), 0.5);
        assert_eq!(sigmoid(800.0), 1.0);
        assert_eq!(sigmoid(-800.0), 0.0);
        assert!(close(sigmoid(2.0), 1.0 / (1.0 + (-2f64).exp()), 1e-16));
        assert!(close(sigmoid(-2.0), 1.0 / (1.0 + 2f64.exp()), 1e-16));
    }

    fn curve(degree: usize, unwarped: &[f64], factors: WarpFactors) -> BlockCurve {
        let mut curve = BlockCurve::with_capacity(1);
        curve.set(degree, unwarped, factors, bounds());
        curve
    }

    #[test]
    fn poly_sigmoid_matches_a_hand_computation() {
        let mut flat = curve(0, &[2.0], WarpFactors::default());
        assert_eq!(flat.evaluate(7.0), 2.0);

        // Rt = (1, 3, 2), tslope = (0.5, 2), tpoint = (10, 30).
        let mut two = curve(
            2,
            &[1.0, 3.0, 2.0, 0.5, 2.0, 10.0, 30.0],
            WarpFactors::default(),
        );
        let x = 14.0;
        let expected = 1.0 + 2.0 * sigmoid(0.5 * (x - 10.0)) - sigmoid(2.0 * (x - 30.0));
        assert!(close(two.evaluate(x), expected, 1e-15));
        assert_eq!(two.rates(), &[1.0, 3.0, 2.0]);
        assert_eq!(two.slopes(), &[0.5, 2.0]);
        assert_eq!(two.points(), &[10.0, 30.0]);

        let mut infinite = curve(1, &[1.0, f64::INFINITY, 0.5, 10.0], WarpFactors::default());
        assert_eq!(infinite.evaluate(3.0), f64::INFINITY);
    }

    /// Scalar test function of the unwarped components and warping factors:
    /// Σ_x c_x Ψ(x) + Σ_i e_i distance_i.
    fn scalar(degree: usize, unwarped: &[f64], factors: WarpFactors) -> f64 {
        let mut block = curve(degree, unwarped, factors);
        let mut total = 0.0;
        for x in [3.0f64, 11.0, 19.0, 27.0, 41.0] {
            total += (0.1 * x).sin() * block.evaluate(x);
        }
        let mut distances = vec![0.0; boundary_distances_per_block(degree)];
        block.boundary_distances(50.0, 3.0, &mut distances);
        for (i, d) in distances.iter().enumerate() {
            total += (1.0 + i as f64).sqrt() * d;
        }
        total
    }

    #[test]
    fn adjoints_chain_to_unwarped_values_and_factors() {
        let unwarped = [1.5, 2.7, 0.9, 2.1, 0.6, 0.4, 1.1, 12.0, 25.0, 37.0];
        let degree = 3;
        let factors = WarpFactors {
            point: 0.4,
            rate: -0.3,
            slope: 0.2,
        };
        let mut block = curve(degree, &unwarped, factors);
        for x in [3.0f64, 11.0, 19.0, 27.0, 41.0] {
            block.evaluate(x);
            block.add_value_adjoint((0.1 * x).sin());
        }
        let count = boundary_distances_per_block(degree);
        let weights: Vec<f64> = (0..count).map(|i| (1.0 + i as f64).sqrt()).collect();
        block.add_boundary_adjoint(&weights);
        let mut gradient = vec![0.0; unwarped.len()];
        let factor_gradient = block.accumulate_unwarped_adjoint(&mut gradient);

        for j in 0..unwarped.len() {
            let fd = central(
                |v| {
                    let mut moved = unwarped;
                    moved[j] = v;
                    scalar(degree, &moved, factors)
                },
                unwarped[j],
            );
            assert!(
                close(gradient[j], fd, 1e-7),
                "component {j}: {} vs {fd}",
                gradient[j]
            );
        }
        let fd_point = central(
            |v| {
                scalar(
                    degree,
                    &unwarped,
                    WarpFactors {
                        point: v,
                        ..factors
                    },
                )
            },
            factors.point,
        );
        let fd_rate = central(
            |v| scalar(degree, &unwarped, WarpFactors { rate: v, ..factors }),
            factors.rate,
        );
        let fd_slope = central(
            |v| {
                scalar(
                    degree,
                    &unwarped,
                    WarpFactors {
                        slope: v,
                        ..factors
                    },
                )
            },
            factors.slope,
        );
        assert!(close(factor_gradient.point, fd_point, 1e-7));
        assert!(close(factor_gradient.rate, fd_rate, 1e-7));
        assert!(close(factor_gradient.slope, fd_slope, 1e-7));
    }

    #[test]
    fn boundary_distances_follow_the_original_order() {
        let block = curve(
            2,
            &[1.0, 3.0, -0.5, 0.5, 2.0, 10.0, 30.0],
            WarpFactors::default(),
        );
        let mut distances = [f64::NAN; 8];
        block.boundary_distances(50.0, 3.0, &mut distances);
        assert_eq!(distances, [0.5, 2.0, 7.0, 17.0, 17.0, 1.01, 3.01, -0.49]);

        let flat = curve(0, &[f64::NAN], WarpFactors::default());
        let mut single = [1.0];
        flat.boundary_distances(50.0, 3.0, &mut single);
        assert_eq!(single, [0.0]);
    }

    #[test]
    fn the_workspace_grows_for_larger_degrees() {
        let mut block = BlockCurve::with_capacity(0);
        block.set(
            2,
            &[1.0, 3.0, 2.0, 0.5, 2.0, 10.0, 30.0],
            WarpFactors::default(),
            bounds(),
        );
        assert_eq!(block.values().len(), 7);
        assert!(block.evaluate(20.0).is_finite());
    }
}
