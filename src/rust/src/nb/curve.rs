//! One curve of the count model (model vignette §11.2 and §7.2): the map from
//! the optimiser's unconstrained coordinates θ and an animal's random effects u
//! to the warped curve values, and Ψ at a bin with its first and second
//! derivatives.
//!
//! Local coordinates of one (curve, animal) pair, in this order:
//! `[θR_1..θR_{d+1}, θs_1..θs_d, θp_1..θp_d, u_point, u_rate, u_slope]`.
//! Warped values v, in this order: `[R'_1..R'_{d+1}, s'_1..s'_d, p'_1..p'_d]`.

use crate::curve::sigmoid;

/// Largest transition slope (per bin): a slope of 8 rises from 2 % to 98 %
/// within one bin, a step at the data's resolution.
pub(crate) const SLOPE_MAX: f64 = 8.0;

/// Index of each random effect among the three of an animal.
pub(crate) const U_POINT: usize = 0;
pub(crate) const U_RATE: usize = 1;
pub(crate) const U_SLOPE: usize = 2;

/// Number of θ coordinates (and of warped values) of a curve of degree d.
pub(crate) fn curve_len(degree: usize) -> usize {
    3 * degree + 1
}

/// Number of local coordinates: the curve's θ and the animal's three u.
pub(crate) fn local_len(degree: usize) -> usize {
    curve_len(degree) + 3
}

/// Where transition points live: inside (lower, lower + width), the edges of
/// the binned axis (bins 1..B are centred on whole numbers), at least `gap`
/// bins from each other and from the edges, so that every block of a curve
/// covers some bins and its rate is estimable.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Axis {
    pub lower: f64,
    pub width: f64,
    pub gap: f64,
}

impl Axis {
    pub fn new(bins: usize, gap: f64) -> Self {
        Axis {
            lower: 0.5,
            width: bins as f64,
            gap,
        }
    }

    /// The room the points of a degree-d curve share beyond their gaps.
    pub fn free_width(&self, degree: usize) -> f64 {
        self.width - (degree as f64 + 1.0) * self.gap
    }

    /// Point k (from 0) of a degree-d curve at normalised position q in (0, 1).
    pub fn point(&self, k: usize, degree: usize, q: f64) -> f64 {
        self.lower + (k as f64 + 1.0) * self.gap + self.free_width(degree) * q
    }

    /// The normalised position of point k at p (inverse of [`Axis::point`]).
    pub fn normalised(&self, k: usize, degree: usize, p: f64) -> f64 {
        (p - self.lower - (k as f64 + 1.0) * self.gap) / self.free_width(degree)
    }

    /// Evenly spaced points of a degree-d curve.
    pub fn even_points(&self, degree: usize) -> Vec<f64> {
        (0..degree)
            .map(|k| self.point(k, degree, (k as f64 + 1.0) / (degree as f64 + 1.0)))
            .collect()
    }
}

fn logit(p: f64) -> f64 {
    (p / (1.0 - p)).ln()
}

/// The population (fixed-effect) values of a curve: block rates, slopes and
/// ordered points.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CurveValues {
    pub rates: Vec<f64>,
    pub slopes: Vec<f64>,
    pub points: Vec<f64>,
}

/// Normalised stick-breaking positions q_1 < … < q_d in (0, 1) from θp.
fn stick_positions(theta_points: &[f64]) -> Vec<f64> {
    // 1 − q_k = Π_{j≤k} σ(−θ_j): accumulate the logarithm so that q near 0
    // and near 1 both keep their digits.
    let mut log_rest = 0.0;
    theta_points
        .iter()
        .map(|&t| {
            log_rest += ln_sigmoid(-t);
            -f64::exp_m1(log_rest)
        })
        .collect()
}

/// ln σ(v) without overflow.
fn ln_sigmoid(v: f64) -> f64 {
    if v > 0.0 {
        -(-v).exp().ln_1p()
    } else {
        v - v.exp().ln_1p()
    }
}

impl CurveValues {
    /// Values at θ (`theta` has 3d + 1 entries).
    pub fn from_theta(theta: &[f64], degree: usize, axis: Axis) -> Self {
        let d = degree;
        let rates = theta[..=d].to_vec();
        let slopes = theta[d + 1..2 * d + 1]
            .iter()
            .map(|&t| SLOPE_MAX * sigmoid(t))
            .collect();
        let points = stick_positions(&theta[2 * d + 1..3 * d + 1])
            .into_iter()
            .enumerate()
            .map(|(k, q)| axis.point(k, d, q))
            .collect();
        CurveValues {
            rates,
            slopes,
            points,
        }
    }

    /// θ of these values. Slopes are clamped into [1e-3, 0.999]·SLOPE_MAX and
    /// points sorted and kept at least `min_gap` (a fraction of the axis) apart
    /// and from its edges, so any starting guess maps to a valid θ.
    pub fn to_theta(&self, axis: Axis, min_gap: f64) -> Vec<f64> {
        let d = self.slopes.len();
        let mut theta = Vec::with_capacity(curve_len(d));
        theta.extend_from_slice(&self.rates);
        theta.extend(
            self.slopes
                .iter()
                .map(|&s| logit((s / SLOPE_MAX).clamp(1e-3, 0.999))),
        );
        let mut sorted = self.points.clone();
        sorted.sort_by(f64::total_cmp);
        let mut q: Vec<f64> = sorted
            .iter()
            .enumerate()
            .map(|(k, &p)| axis.normalised(k, d, p))
            .collect();
        let gap = min_gap.clamp(1e-6, 0.5 / (d as f64 + 1.0));
        for k in 0..d {
            let floor = if k == 0 { gap } else { q[k - 1] + gap };
            let ceiling = 1.0 - gap * (d - k) as f64;
            q[k] = q[k].clamp(floor, ceiling.max(floor));
        }
        let mut previous = 0.0;
        for &qk in &q {
            theta.push(logit((qk - previous) / (1.0 - previous)));
            previous = qk;
        }
        theta
    }
}

/// A second-derivative entry ∂²v_i/∂q_a∂q_b (a ≤ b).
#[derive(Clone, Copy, Debug)]
struct Curvature {
    value_index: usize,
    a: usize,
    b: usize,
    second: f64,
}

/// The warped values of one (curve, animal) pair with their Jacobian and
/// curvature in the local coordinates. Allocated once per curve degree and
/// refilled for every block.
#[derive(Clone, Debug)]
pub(crate) struct WarpedCurve {
    degree: usize,
    /// v: rates, slopes, points.
    values: Vec<f64>,
    /// ∂v_i/∂q_j, row-major (curve_len × local_len).
    jacobian: Vec<f64>,
    curvature: Vec<Curvature>,
}

impl WarpedCurve {
    pub fn new(degree: usize) -> Self {
        WarpedCurve {
            degree,
            values: vec![0.0; curve_len(degree)],
            jacobian: vec![0.0; curve_len(degree) * local_len(degree)],
            curvature: Vec::new(),
        }
    }

    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// Warped values of the curve at `theta` for an animal with random
    /// effects `u` (zeros for the population curve).
    pub fn set(&mut self, theta: &[f64], u: [f64; 3], axis: Axis) {
        let d = self.degree;
        let n = local_len(d);
        let (u_point, u_rate, u_slope) =
            (3 * d + 1 + U_POINT, 3 * d + 1 + U_RATE, 3 * d + 1 + U_SLOPE);
        self.jacobian.fill(0.0);
        self.curvature.clear();
        let push = |curvature: &mut Vec<Curvature>, i: usize, a: usize, b: usize, second: f64| {
            let (a, b) = if a <= b { (a, b) } else { (b, a) };
            curvature.push(Curvature {
                value_index: i,
                a,
                b,
                second,
            });
        };

        // Rates: R'_k = θR_k · e^{u_rate}
        let scale = u[U_RATE].exp();
        for k in 0..=d {
            let theta_rate = theta[k];
            self.values[k] = theta_rate * scale;
            self.jacobian[k * n + k] = scale;
            self.jacobian[k * n + u_rate] = theta_rate * scale;
            push(&mut self.curvature, k, k, u_rate, scale);
            push(&mut self.curvature, k, u_rate, u_rate, theta_rate * scale);
        }

        // Slopes: s'_k = S·σ(θs_k + u_slope)
        for k in 0..d {
            let i = d + 1 + k;
            let at = i; // θs_k sits at the same local index as s'_k
            let logistic = sigmoid(theta[at] + u[U_SLOPE]);
            let first = SLOPE_MAX * logistic * (1.0 - logistic);
            let second = first * (1.0 - 2.0 * logistic);
            self.values[i] = SLOPE_MAX * logistic;
            self.jacobian[i * n + at] = first;
            self.jacobian[i * n + u_slope] = first;
            push(&mut self.curvature, i, at, at, second);
            push(&mut self.curvature, i, at, u_slope, second);
            push(&mut self.curvature, i, u_slope, u_slope, second);
        }

        // Points: q_k by stick-breaking of θp_1..θp_k, p'_k = L + W·σ(logit q_k + u_point)
        let first_point = 2 * d + 1;
        let positions = stick_positions(&theta[first_point..first_point + d]);
        let breaks: Vec<f64> = theta[first_point..first_point + d]
            .iter()
            .map(|&t| sigmoid(t))
            .collect();
        for k in 0..d {
            let i = first_point + k;
            let q = positions[k];
            let shifted = logit(q) + u[U_POINT];
            let logistic = sigmoid(shifted);
            let first = axis.free_width(d) * logistic * (1.0 - logistic);
            let second = first * (1.0 - 2.0 * logistic);
            self.values[i] = axis.point(k, d, logistic);
            // ∂ logit(q_k)/∂θp_j = σ_j / q_k (j ≤ k);
            // ∂² logit(q_k)/∂θp_i∂θp_j = −(1 − q_k)/q_k² σ_i σ_j + δ_ij σ_j (1 − σ_j)/q_k
            let d_logit: Vec<f64> = breaks[..=k].iter().map(|&b| b / q).collect();
            for j in 0..=k {
                let at_j = first_point + j;
                self.jacobian[i * n + at_j] = first * d_logit[j];
                for l in j..=k {
                    let at_l = first_point + l;
                    let mut logit_second = -(1.0 - q) / (q * q) * breaks[j] * breaks[l];
                    if l == j {
                        logit_second += breaks[j] * (1.0 - breaks[j]) / q;
                    }
                    let value = second * d_logit[j] * d_logit[l] + first * logit_second;
                    push(&mut self.curvature, i, at_j, at_l, value);
                }
                push(&mut self.curvature, i, at_j, u_point, second * d_logit[j]);
            }
            self.jacobian[i * n + u_point] = first;
            push(&mut self.curvature, i, u_point, u_point, second);
        }
    }

    /// g_q += Jᵀ g_v.
    pub fn add_local_gradient(&self, value_gradient: &[f64], local_gradient: &mut [f64]) {
        let n = local_len(self.degree);
        for (i, &gv) in value_gradient.iter().enumerate() {
            if gv == 0.0 {
                continue;
            }
            for (g, &jac) in local_gradient
                .iter_mut()
                .zip(&self.jacobian[i * n..(i + 1) * n])
            {
                *g += gv * jac;
            }
        }
    }

    /// H_q += Jᵀ H_v J + Σ_i g_v[i] ∇²v_i, with H_v symmetric (full storage,
    /// curve_len²) and H_q full storage (local_len²).
    pub fn add_local_hessian(
        &self,
        value_gradient: &[f64],
        value_hessian: &[f64],
        local: &mut [f64],
    ) {
        let m = curve_len(self.degree);
        let n = local_len(self.degree);
        // T = H_v · J (m × n), then Jᵀ T.
        let mut product = vec![0.0; m * n];
        for i in 0..m {
            for k in 0..m {
                let h = value_hessian[i * m + k];
                if h == 0.0 {
                    continue;
                }
                let row = &self.jacobian[k * n..(k + 1) * n];
                for (p, &jac) in product[i * n..(i + 1) * n].iter_mut().zip(row) {
                    *p += h * jac;
                }
            }
        }
        for i in 0..m {
            let jac_row = &self.jacobian[i * n..(i + 1) * n];
            let product_row = &product[i * n..(i + 1) * n];
            for (a, &ja) in jac_row.iter().enumerate() {
                if ja == 0.0 {
                    continue;
                }
                for (b, &pb) in product_row.iter().enumerate() {
                    local[a * n + b] += ja * pb;
                }
            }
        }
        for entry in &self.curvature {
            let weight = value_gradient[entry.value_index] * entry.second;
            local[entry.a * n + entry.b] += weight;
            if entry.a != entry.b {
                local[entry.b * n + entry.a] += weight;
            }
        }
    }
}

/// Ψ at one bin and its derivatives in the warped values v.
#[derive(Clone, Debug)]
pub(crate) struct BinDerivatives {
    degree: usize,
    /// ∂Ψ/∂v.
    pub gradient: Vec<f64>,
    /// Per transition k: σ', e = x − p', needed for the second derivatives.
    logistic: Vec<f64>,
    logistic_first: Vec<f64>,
    offset: Vec<f64>,
}

impl BinDerivatives {
    pub fn new(degree: usize) -> Self {
        BinDerivatives {
            degree,
            gradient: vec![0.0; curve_len(degree)],
            logistic: vec![0.0; degree],
            logistic_first: vec![0.0; degree],
            offset: vec![0.0; degree],
        }
    }

    /// Ψ(x) = R'_1 + Σ_k (R'_{k+1} − R'_k) σ(s'_k (x − p'_k)); fills the gradient.
    pub fn evaluate(&mut self, values: &[f64], x: f64) -> f64 {
        let d = self.degree;
        let (rates, slopes, points) = (
            &values[..=d],
            &values[d + 1..2 * d + 1],
            &values[2 * d + 1..],
        );
        let mut psi = rates[0];
        for k in 0..d {
            let offset = x - points[k];
            let logistic = sigmoid(slopes[k] * offset);
            let first = logistic * (1.0 - logistic);
            let step = rates[k + 1] - rates[k];
            psi += step * logistic;
            self.logistic[k] = logistic;
            self.logistic_first[k] = first;
            self.offset[k] = offset;
            self.gradient[d + 1 + k] = step * first * offset;
            self.gradient[2 * d + 1 + k] = -step * first * slopes[k];
        }
        for k in 0..=d {
            let below = if k == 0 { 1.0 } else { self.logistic[k - 1] };
            let above = if k == d { 0.0 } else { self.logistic[k] };
            self.gradient[k] = below - above;
        }
        psi
    }

    /// H_v += weight · ∇²Ψ (full storage, curve_len²), after [`Self::evaluate`].
    pub fn add_hessian(&self, values: &[f64], weight: f64, hessian: &mut [f64]) {
        let d = self.degree;
        let m = curve_len(d);
        let mut add = |a: usize, b: usize, value: f64| {
            hessian[a * m + b] += weight * value;
            if a != b {
                hessian[b * m + a] += weight * value;
            }
        };
        for k in 0..d {
            let (below, above, slope, point) = (k, k + 1, d + 1 + k, 2 * d + 1 + k);
            let step = values[above] - values[below];
            let s = values[slope];
            let first = self.logistic_first[k];
            let second = first * (1.0 - 2.0 * self.logistic[k]);
            let e = self.offset[k];
            add(below, slope, -first * e);
            add(above, slope, first * e);
            add(below, point, first * s);
            add(above, point, -first * s);
            add(slope, slope, step * second * e * e);
            add(slope, point, step * (-first - second * s * e));
            add(point, point, step * second * s * s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AXIS: Axis = Axis {
        lower: 0.5,
        width: 40.0,
        gap: 2.0,
    };

    fn theta_example(degree: usize) -> Vec<f64> {
        let mut theta = Vec::new();
        theta.extend((0..=degree).map(|k| 1.0 + 0.7 * k as f64 - 0.3 * (k % 2) as f64 * 3.0));
        theta.extend((0..degree).map(|k| -1.0 + 0.4 * k as f64));
        theta.extend((0..degree).map(|k| -0.8 + 0.5 * k as f64));
        theta
    }

    fn psi_at(theta: &[f64], u: [f64; 3], degree: usize, x: f64) -> f64 {
        let mut curve = WarpedCurve::new(degree);
        curve.set(theta, u, AXIS);
        BinDerivatives::new(degree).evaluate(curve.values(), x)
    }

    /// Ψ as a function of the local coordinates q = (θ, u).
    fn psi_local(q: &[f64], degree: usize, x: f64) -> f64 {
        let m = curve_len(degree);
        psi_at(&q[..m], [q[m], q[m + 1], q[m + 2]], degree, x)
    }

    #[test]
    fn theta_round_trips_through_the_values() {
        for degree in 0..4 {
            let theta = theta_example(degree);
            let values = CurveValues::from_theta(&theta, degree, AXIS);
            assert!(values.points.windows(2).all(|w| w[0] < w[1]));
            assert!(values.points.iter().all(|&p| p > 0.5 && p < 40.5));
            let back = values.to_theta(AXIS, 1e-9);
            for (a, b) in theta.iter().zip(&back) {
                assert!((a - b).abs() < 1e-9, "{theta:?} vs {back:?}");
            }
        }
    }

    #[test]
    fn to_theta_repairs_points_that_are_out_of_order_or_range() {
        let values = CurveValues {
            rates: vec![1.0, 2.0, 1.5],
            slopes: vec![20.0, 0.0],
            points: vec![30.0, -4.0],
        };
        let theta = values.to_theta(AXIS, 0.01);
        let back = CurveValues::from_theta(&theta, 2, AXIS);
        assert!(back.points[0] > 0.5 && back.points[0] < back.points[1]);
        assert!((back.points[1] - 30.0).abs() < 1e-9);
        assert!(back.slopes.iter().all(|&s| s > 0.0 && s < SLOPE_MAX));
    }

    #[test]
    fn the_population_curve_has_no_warp() {
        let theta = theta_example(2);
        let values = CurveValues::from_theta(&theta, 2, AXIS);
        let mut curve = WarpedCurve::new(2);
        curve.set(&theta, [0.0; 3], AXIS);
        let v = curve.values();
        assert_eq!(&v[..3], values.rates.as_slice());
        for (a, b) in v[3..5].iter().zip(&values.slopes) {
            assert!((a - b).abs() < 1e-12);
        }
        for (a, b) in v[5..].iter().zip(&values.points) {
            assert!((a - b).abs() < 1e-9);
        }
    }

    #[test]
    fn every_warp_moves_the_curve_at_zero() {
        // Unlike the original's ω, each random effect has a non-zero
        // derivative at u = 0.
        let theta = theta_example(2);
        let x = 14.0;
        let q: Vec<f64> = theta.iter().copied().chain([0.0; 3]).collect();
        for w in 0..3 {
            let h = 1e-6;
            let mut up = q.clone();
            up[curve_len(2) + w] += h;
            let mut down = q.clone();
            down[curve_len(2) + w] -= h;
            let slope = (psi_local(&up, 2, x) - psi_local(&down, 2, x)) / (2.0 * h);
            assert!(slope.abs() > 1e-4, "warp {w}: {slope}");
        }
    }

    #[test]
    fn local_gradient_and_hessian_match_finite_differences() {
        for degree in 0..4 {
            let m = curve_len(degree);
            let n = local_len(degree);
            let q: Vec<f64> = theta_example(degree)
                .into_iter()
                .chain([0.3, -0.2, 0.25])
                .collect();
            for &x in &[1.0, 9.5, 17.0, 33.0] {
                let mut curve = WarpedCurve::new(degree);
                curve.set(&q[..m], [q[m], q[m + 1], q[m + 2]], AXIS);
                let mut bin = BinDerivatives::new(degree);
                bin.evaluate(curve.values(), x);
                let mut value_hessian = vec![0.0; m * m];
                bin.add_hessian(curve.values(), 1.0, &mut value_hessian);
                let mut gradient = vec![0.0; n];
                curve.add_local_gradient(&bin.gradient, &mut gradient);
                let mut hessian = vec![0.0; n * n];
                curve.add_local_hessian(&bin.gradient, &value_hessian, &mut hessian);

                let h = 1e-5;
                let shifted = |a: usize, da: f64, b: usize, db: f64| {
                    let mut p = q.clone();
                    p[a] += da;
                    p[b] += db;
                    psi_local(&p, degree, x)
                };
                for a in 0..n {
                    let numeric = (shifted(a, h, a, 0.0) - shifted(a, -h, a, 0.0)) / (2.0 * h);
                    assert!(
                        (gradient[a] - numeric).abs() <= 1e-6 * numeric.abs().max(1.0),
                        "degree {degree}, x {x}, gradient {a}: {} vs {numeric}",
                        gradient[a]
                    );
                    for b in 0..n {
                        let numeric =
                            (shifted(a, h, b, h) - shifted(a, h, b, -h) - shifted(a, -h, b, h)
                                + shifted(a, -h, b, -h))
                                / (4.0 * h * h);
                        assert!(
                            (hessian[a * n + b] - numeric).abs() <= 2e-4 * numeric.abs().max(1.0),
                            "degree {degree}, x {x}, hessian ({a}, {b}): {} vs {numeric}",
                            hessian[a * n + b]
                        );
                    }
                }
            }
        }
    }
}
