//! The negative-binomial count family with exposure (model vignette §9.2): one
//! table row's log-likelihood and its first and second derivatives in the curve
//! value Ψ and the log dispersion ρ.
//!
//! A row holds the summed count y of E cells. With rate r(Ψ) per cell and
//! dispersion φ = e^ρ per cell, y ~ NB(mean μ = E·r(Ψ), size k = E/φ), so
//! Var(y) = μ + φ·μ²/E: the sum of E cells that are each NB with dispersion φ.

use crate::numeric::special::{ln_gamma_ratio_and_digamma_difference, trigamma_difference};

/// Width of the smooth floor of the rate at 0 (in counts per unit of exposure).
pub(crate) const RATE_FLOOR_WIDTH: f64 = 1e-3;

/// The smallest rate: a positive count is never impossible.
pub(crate) const RATE_FLOOR: f64 = 1e-8;

/// Rate per unit of exposure and its first two derivatives in Ψ.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Rate {
    pub value: f64,
    pub d1: f64,
    pub d2: f64,
}

/// r(Ψ) = ε + τ·ln(1 + exp((e^Ψ − 1)/τ)): e^Ψ − 1 (the original's scale, Ψ =
/// log(1 + rate)) above a few τ, floored smoothly at ε below 0.
pub(crate) fn rate(psi: f64) -> Rate {
    let tau = RATE_FLOOR_WIDTH;
    let growth = psi.exp();
    let scaled = psi.exp_m1() / tau;
    // softplus(x) = max(x, 0) + ln(1 + e^{−|x|}); σ(x) its derivative. Far
    // from 0 the correction is below the last bit (see `sigmoid`): skip its
    // exponential, which would underflow on libm's slow path.
    let softplus = if scaled > crate::curve::SATURATED {
        scaled
    } else if scaled < -crate::curve::UNDERFLOW {
        0.0
    } else {
        scaled.max(0.0) + (-scaled.abs()).exp().ln_1p()
    };
    let logistic = crate::curve::sigmoid(scaled);
    Rate {
        value: RATE_FLOOR + tau * softplus,
        d1: logistic * growth,
        d2: logistic * (1.0 - logistic) * growth * growth / tau + logistic * growth,
    }
}

/// One row's log-likelihood and its derivatives in Ψ and ρ = ln φ.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct RowTerm {
    pub value: f64,
    pub d_psi: f64,
    pub d_psi_psi: f64,
    pub d_rho: f64,
    pub d_rho_rho: f64,
    pub d_psi_rho: f64,
}

impl RowTerm {
    /// Adds another row's terms (rows that share Ψ and ρ).
    pub(crate) fn add(&mut self, other: &RowTerm) {
        self.value += other.value;
        self.d_psi += other.d_psi;
        self.d_psi_psi += other.d_psi_psi;
        self.d_rho += other.d_rho;
        self.d_rho_rho += other.d_rho_rho;
        self.d_psi_rho += other.d_psi_rho;
    }
}

/// Derivatives of ℓ(y; μ, k) in μ and k.
struct MeanSizeTerm {
    value: f64,
    d_mu: f64,
    d_mu_mu: f64,
    d_k: f64,
    d_k_k: f64,
    d_mu_k: f64,
}

/// ℓ = ln Γ(y+k) − ln Γ(k) − ln Γ(y+1) − k·ln(1+μ/k) + y·ln μ − y·ln(k+μ),
/// the negative-binomial log-pmf written so that it stays accurate as
/// k → ∞ (the Poisson limit).
fn mean_size_term(y: f64, mu: f64, k: f64, ln_gamma_y_plus_one: f64) -> MeanSizeTerm {
    let (gamma_ratio, digamma_difference) = ln_gamma_ratio_and_digamma_difference(y, k);
    let log_mean_ratio = (mu / k).ln_1p();
    let sum = k + mu;
    let value = if y == 0.0 {
        -k * log_mean_ratio
    } else {
        gamma_ratio - ln_gamma_y_plus_one - k * log_mean_ratio + y * mu.ln() - y * sum.ln()
    };
    let residual = y - mu;
    MeanSizeTerm {
        value,
        d_mu: y / mu - (y + k) / sum,
        d_mu_mu: -y / (mu * mu) + (y + k) / (sum * sum),
        // ln(k/(k+μ)) + 1 − (k+y)/(k+μ) = −ln(1+μ/k) + (μ−y)/(k+μ)
        d_k: digamma_difference - log_mean_ratio - residual / sum,
        // 1/k − 1/(k+μ) = μ/(k(k+μ)), written without the cancellation
        d_k_k: trigamma_difference(y, k) + mu / (k * sum) + residual / (sum * sum),
        d_mu_k: residual / (sum * sum),
    }
}

/// The log-likelihood of count `y` from `exposure` cells at curve value `psi`
/// with log dispersion `rho`, and its derivatives.
#[cfg(test)]
pub(crate) fn row_term(
    y: f64,
    exposure: f64,
    psi: f64,
    rho: f64,
    ln_gamma_y_plus_one: f64,
) -> RowTerm {
    row_term_at(y, exposure, &rate(psi), rho, ln_gamma_y_plus_one)
}

/// [`row_term`] with the rate already computed (rows that share Ψ share it).
pub(crate) fn row_term_at(
    y: f64,
    exposure: f64,
    rate: &Rate,
    rho: f64,
    ln_gamma_y_plus_one: f64,
) -> RowTerm {
    let mu = exposure * rate.value;
    let k = exposure * (-rho).exp();
    let term = mean_size_term(y, mu, k, ln_gamma_y_plus_one);
    let (mu_1, mu_2) = (exposure * rate.d1, exposure * rate.d2);
    RowTerm {
        value: term.value,
        d_psi: term.d_mu * mu_1,
        d_psi_psi: term.d_mu_mu * mu_1 * mu_1 + term.d_mu * mu_2,
        // ∂k/∂ρ = −k
        d_rho: -k * term.d_k,
        d_rho_rho: k * k * term.d_k_k + k * term.d_k,
        d_psi_rho: -k * term.d_mu_k * mu_1,
    }
}

/// The row's log-likelihood alone (for trial points of the optimiser).
#[cfg(test)]
pub(crate) fn row_value(
    y: f64,
    exposure: f64,
    psi: f64,
    rho: f64,
    ln_gamma_y_plus_one: f64,
) -> f64 {
    row_value_at(y, exposure, rate(psi).value, rho, ln_gamma_y_plus_one)
}

/// [`row_value`] with the rate r(Ψ) already computed.
pub(crate) fn row_value_at(
    y: f64,
    exposure: f64,
    rate: f64,
    rho: f64,
    ln_gamma_y_plus_one: f64,
) -> f64 {
    let mu = exposure * rate;
    let k = exposure * (-rho).exp();
    let gamma_ratio = crate::numeric::special::ln_gamma_ratio(y, k);
    let log_mean_ratio = (mu / k).ln_1p();
    if y == 0.0 {
        -k * log_mean_ratio
    } else {
        gamma_ratio - ln_gamma_y_plus_one - k * log_mean_ratio + y * mu.ln() - y * (k + mu).ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_saturated_shortcuts_give_the_plain_formulas_bits() {
        // The plain formulas, evaluated through libm without shortcuts.
        let plain_sigmoid = |u: f64| {
            if u > 0.0 {
                1.0 / (1.0 + (-u).exp())
            } else {
                u.exp() / (1.0 + u.exp())
            }
        };
        let plain_rate = |psi: f64| {
            let scaled = psi.exp_m1() / RATE_FLOOR_WIDTH;
            RATE_FLOOR + RATE_FLOOR_WIDTH * (scaled.max(0.0) + (-scaled.abs()).exp().ln_1p())
        };
        let mut checked = 0;
        for i in -4000..=4000 {
            let u = i as f64 * 0.25;
            assert_eq!(
                crate::curve::sigmoid(u).to_bits(),
                plain_sigmoid(u).to_bits(),
                "sigmoid({u})"
            );
            let psi = i as f64 * 0.002;
            assert_eq!(
                rate(psi).value.to_bits(),
                plain_rate(psi).to_bits(),
                "rate({psi})"
            );
            checked += 1;
        }
        assert_eq!(checked, 8001);
    }
    use crate::numeric::special::ln_gamma;

    fn central(f: impl Fn(f64) -> f64, x: f64) -> f64 {
        let h = 1e-5 * x.abs().max(1.0);
        (f(x + h) - f(x - h)) / (2.0 * h)
    }

    fn close(actual: f64, expected: f64, tolerance: f64) -> bool {
        (actual - expected).abs() <= tolerance * expected.abs().max(1.0)
    }

    #[test]
    fn the_rate_is_expm1_above_zero_and_floored_below() {
        for &psi in &[0.05, 0.7, 2.3, 6.0] {
            assert!(close(rate(psi).value, psi.exp_m1() + RATE_FLOOR, 1e-12));
        }
        assert!(rate(-3.0).value >= RATE_FLOOR);
        assert!(rate(-3.0).value < 2.0 * RATE_FLOOR);
        for &psi in &[-0.01, 0.0005, 0.3, 3.0] {
            let r = rate(psi);
            assert!(close(r.d1, central(|p| rate(p).value, psi), 1e-6));
            assert!(close(r.d2, central(|p| rate(p).d1, psi), 1e-5));
        }
    }

    /// (y, exposure E, rate r, ρ, ln y!, log-pmf) computed in R 4.2.2,
    /// independently of this crate, at ψ = log1p(r), the rate floor of the
    /// model vignette §9.2 and size k = E/e^ρ:
    ///
    /// ```r
    /// softplus <- function(v) ifelse(v > 30, v + log1p(exp(-v)), log1p(exp(pmin(v, 30))))
    /// rate <- function(psi) 1e-8 + 1e-3 * softplus(expm1(psi) / 1e-3)
    /// mu <- E * rate(log1p(r)); k <- E / exp(rho)
    /// lgamma(y + 1)
    /// stats::dnbinom(y, size = k, mu = mu, log = TRUE)                      # NB rows
    /// stats::dpois(y, mu, log = TRUE) + (y * (y - 1) - 2 * y * mu + mu^2) / (2 * k)  # Poisson limit
    /// ```
    ///
    /// printed with `sprintf("%.17g")` (here in the shortest form that reads
    /// back to the same double). The last three rows (k of 3e8, 1e8
    /// and 1e13: ρ = ln 1e-8, the fixed-Poisson hold -18.4, and -30) use the
    /// Poisson log-pmf with its 1/k correction (error O(y³/k²), below 1e-15
    /// here): R 4.2.2's dnbinom(log = TRUE) is off there by up to 4.6e-10
    /// (e.g. -2.4054650985635888 for row 9), more than this test allows.
    /// The rows cover counts from 0 to 5000, dispersions from 1e-13 to 50,
    /// a rate inside the floor's bend (r = 0.01) and exposures 1 to 20.
    /// (The ρ of row 1, log(0.5), is written as R printed it.)
    #[rustfmt::skip]
    #[allow(clippy::approx_constant)]
    const R_CASES: [(f64, f64, f64, f64, f64, f64); 10] = [
        (0.0, 1.0, 3.0, -0.6931471805599453, 0.0, -1.83258146774831),
        (3.0, 5.0, 0.4, -2.3025850929940455, 1.791759469228055, -1.7319923601842058),
        (17.0, 2.0, 8.0, 0.4054651081081644, 33.50507345013689, -3.7102007892911932),
        (250.0, 8.0, 30.0, -3.506557897319982, 1134.045231790853, -4.118310099906555),
        (5000.0, 20.0, 260.0, -6.214608098422191, 37591.14350887677, -7.955122616375153),
        (1.0, 1.0, 0.01, 3.912023005428146, 0.0, -5.018740939944678),
        (0.0, 6.0, 0.2, 1.3862943611198906, 0.0, -0.8816800306865114),
        (40.0, 3.0, 12.0, -18.420680743952367, 110.3206397147574, -2.979882213179659),
        (4.0, 1.0, 2.0, -18.4, 3.1780538303479458, -2.4054650981081647),
        (12.0, 1.0, 10.0, -30.0, 19.987214495661885, -2.3561933777337116),
    ];

    #[test]
    fn the_value_matches_r_dnbinom_and_the_poisson_limit() {
        for &(y, exposure, r, rho, lg, expected) in &R_CASES {
            let psi = f64::ln_1p(r);
            let term = row_term(y, exposure, psi, rho, lg).value;
            let value = row_value(y, exposure, psi, rho, lg);
            for (name, actual) in [("row_term", term), ("row_value", value)] {
                assert!(
                    close(actual, expected, 1e-12),
                    "{name} at y={y}, E={exposure}, r={r}, rho={rho}: {actual} vs R {expected}"
                );
            }
        }
    }

    #[test]
    fn derivatives_match_finite_differences() {
        for &(y, exposure, psi, rho) in &[
            (0.0, 1.0, 1.2, -1.0),
            (3.0, 5.0, 0.4, -2.0),
            (17.0, 2.0, 2.2, 0.5),
            (1.0, 3.0, 0.02, -0.3),
            (60.0, 12.0, 1.7, -6.0),
            (2.0, 1.0, 0.9, -14.0),
        ] {
            let lg = ln_gamma(y + 1.0);
            let t = row_term(y, exposure, psi, rho, lg);
            let at = |p: f64, r: f64| row_term(y, exposure, p, r, lg);
            let checks = [
                ("d_psi", t.d_psi, central(|p| at(p, rho).value, psi)),
                ("d_psi_psi", t.d_psi_psi, central(|p| at(p, rho).d_psi, psi)),
                ("d_rho", t.d_rho, central(|r| at(psi, r).value, rho)),
                ("d_rho_rho", t.d_rho_rho, central(|r| at(psi, r).d_rho, rho)),
                ("d_psi_rho", t.d_psi_rho, central(|r| at(psi, r).d_psi, rho)),
            ];
            for (name, analytic, numeric) in checks {
                assert!(
                    (analytic - numeric).abs() <= 1e-6 * numeric.abs().max(1e-3),
                    "{name} at y={y}, E={exposure}, psi={psi}, rho={rho}: {analytic} vs {numeric}"
                );
            }
        }
    }
}
