//! Log-gamma, digamma and trigamma on the positive reals.
//!
//! Both use the asymptotic (Stirling) series once the argument is at least
//! [`ASYMPTOTIC_FROM`], and the recurrence Γ(x+1) = x·Γ(x) to get there. With
//! eight series terms the truncation error at 10 is below 1e-16, so the result
//! is as good as the final subtraction allows (about 1e-15 absolute near the
//! zeros of ln Γ at 1 and 2, ~1e-15 relative elsewhere).

/// ln(2π)/2.
const HALF_LN_TWO_PI: f64 = 0.918_938_533_204_672_8;

/// Arguments below this are shifted up by the recurrence before the series is used.
const ASYMPTOTIC_FROM: f64 = 10.0;

/// B_{2k} / (2k(2k−1)) for k = 1..8: the Stirling series of ln Γ.
const LN_GAMMA_SERIES: [f64; 8] = [
    1.0 / 12.0,
    -1.0 / 360.0,
    1.0 / 1260.0,
    -1.0 / 1680.0,
    1.0 / 1188.0,
    -691.0 / 360_360.0,
    1.0 / 156.0,
    -3617.0 / 122_400.0,
];

/// B_{2k} / (2k) for k = 1..8: the asymptotic series of ψ.
const DIGAMMA_SERIES: [f64; 8] = [
    1.0 / 12.0,
    -1.0 / 120.0,
    1.0 / 252.0,
    -1.0 / 240.0,
    1.0 / 132.0,
    -691.0 / 32_760.0,
    1.0 / 12.0,
    -3617.0 / 8160.0,
];

/// From this argument on, four series terms are as accurate as eight (the
/// fifth term is below 1e-19 there).
const SHORT_SERIES_FROM: f64 = 60.0;

/// Series terms needed at `z` ≥ [`ASYMPTOTIC_FROM`].
fn series_terms(z: f64) -> usize {
    if z >= SHORT_SERIES_FROM {
        4
    } else {
        8
    }
}

/// Σ_k c_k / z^(2k−1) (Horner in 1/z²).
fn ln_gamma_correction(z: f64) -> f64 {
    let inverse_square = 1.0 / (z * z);
    let sum = LN_GAMMA_SERIES[..series_terms(z)]
        .iter()
        .rev()
        .fold(0.0, |acc, &coefficient| acc * inverse_square + coefficient);
    sum / z
}

/// Σ_k D_k / z^(2k), the series part of ψ(z) = ln z − 1/(2z) − Σ.
fn digamma_correction(z: f64) -> f64 {
    let inverse_square = 1.0 / (z * z);
    DIGAMMA_SERIES[..series_terms(z)]
        .iter()
        .rev()
        .fold(0.0, |acc, &coefficient| acc * inverse_square + coefficient)
        * inverse_square
}

/// ln Γ(z) for z ≥ [`ASYMPTOTIC_FROM`].
fn ln_gamma_asymptotic(z: f64) -> f64 {
    (z - 0.5) * z.ln() - z + HALF_LN_TWO_PI + ln_gamma_correction(z)
}

/// ln Γ(x) for x > 0. Returns NaN for x ≤ 0 or NaN, and +∞ for x = +∞.
pub(crate) fn ln_gamma(x: f64) -> f64 {
    if x.is_nan() || x <= 0.0 {
        return f64::NAN;
    }
    if x.is_infinite() {
        return f64::INFINITY;
    }
    if x >= ASYMPTOTIC_FROM {
        return ln_gamma_asymptotic(x);
    }
    // One logarithm of the product keeps the rounding to a single step.
    let mut shifted = x;
    let mut product = 1.0;
    while shifted < ASYMPTOTIC_FROM {
        product *= shifted;
        shifted += 1.0;
    }
    ln_gamma_asymptotic(shifted) - product.ln()
}

/// ψ(x) = d/dx ln Γ(x) for x > 0. Returns NaN for x ≤ 0 or NaN, and +∞ for x = +∞.
pub(crate) fn digamma(x: f64) -> f64 {
    if x.is_nan() || x <= 0.0 {
        return f64::NAN;
    }
    if x.is_infinite() {
        return f64::INFINITY;
    }
    let mut shifted = x;
    let mut recurrence = 0.0;
    while shifted < ASYMPTOTIC_FROM {
        recurrence -= 1.0 / shifted;
        shifted += 1.0;
    }
    recurrence + shifted.ln() - 0.5 / shifted - digamma_correction(shifted)
}

/// ln Γ(s + y) − ln Γ(s) and ψ(s + y) − ψ(s) together, for s > 0 and y ≥ 0.
///
/// The negative-binomial row term needs both for every observed row. For
/// s ≥ [`ASYMPTOTIC_FROM`] they share ln(1 + y/s) and ln s, which halves the
/// logarithms per row and avoids cancelling two large digammas.
pub(crate) fn ln_gamma_ratio_and_digamma_difference(y: f64, s: f64) -> (f64, f64) {
    if s < ASYMPTOTIC_FROM || s.is_infinite() || s.is_nan() || y.is_nan() || y < 0.0 {
        return (ln_gamma_ratio(y, s), digamma(s + y) - digamma(s));
    }
    if y == 0.0 {
        return (0.0, 0.0);
    }
    let sum = s + y;
    let log_ratio = (y / s).ln_1p();
    let ln_gamma_difference = asymptotic_ln_gamma_ratio(y, s, log_ratio);
    let digamma_difference =
        log_ratio - 0.5 / sum + 0.5 / s - (digamma_correction(sum) - digamma_correction(s));
    (ln_gamma_difference, digamma_difference)
}

/// ln Γ(s + y) − ln Γ(s) for s > 0, y ≥ 0, without the cancellation that the
/// plain difference suffers when s is large (the negative-binomial shape can be
/// 1e6 and more while y is a few units).
pub(crate) fn ln_gamma_ratio(y: f64, s: f64) -> f64 {
    if s.is_nan() || y.is_nan() || s <= 0.0 || y < 0.0 {
        return f64::NAN;
    }
    if y == 0.0 {
        return 0.0;
    }
    if s < ASYMPTOTIC_FROM || s.is_infinite() {
        return ln_gamma(s + y) - ln_gamma(s);
    }
    asymptotic_ln_gamma_ratio(y, s, (y / s).ln_1p())
}

/// ln Γ(s + y) − ln Γ(s) for s ≥ [`ASYMPTOTIC_FROM`], given ln(1 + y/s);
/// one expression for both callers, so they agree to the last bit.
fn asymptotic_ln_gamma_ratio(y: f64, s: f64, log_ratio: f64) -> f64 {
    let ln_sum = s.ln() + log_ratio;
    (s - 0.5) * log_ratio + y * ln_sum - y + ln_gamma_correction(s + y) - ln_gamma_correction(s)
}

/// B_{2k} for k = 1..7: the asymptotic series of the trigamma function,
/// ψ₁(z) = 1/z + 1/(2z²) + Σ_k B_{2k} / z^(2k+1).
const TRIGAMMA_SERIES: [f64; 7] = [
    1.0 / 6.0,
    -1.0 / 30.0,
    1.0 / 42.0,
    -1.0 / 30.0,
    5.0 / 66.0,
    -691.0 / 2730.0,
    7.0 / 6.0,
];

/// Σ_k B_{2k} / z^(2k+1) for z ≥ [`ASYMPTOTIC_FROM`].
fn trigamma_correction(z: f64) -> f64 {
    let inverse_square = 1.0 / (z * z);
    TRIGAMMA_SERIES
        .iter()
        .rev()
        .fold(0.0, |acc, &coefficient| acc * inverse_square + coefficient)
        * inverse_square
        / z
}

/// ψ₁(x) = d²/dx² ln Γ(x) for x > 0. NaN for x ≤ 0 or NaN; 0 for x = +∞.
pub fn trigamma(x: f64) -> f64 {
    if x.is_nan() || x <= 0.0 {
        return f64::NAN;
    }
    if x.is_infinite() {
        return 0.0;
    }
    let mut shifted = x;
    let mut recurrence = 0.0;
    while shifted < ASYMPTOTIC_FROM {
        recurrence += 1.0 / (shifted * shifted);
        shifted += 1.0;
    }
    recurrence + 1.0 / shifted + 0.5 / (shifted * shifted) + trigamma_correction(shifted)
}

/// ψ₁(s + y) − ψ₁(s) for s > 0 and y ≥ 0, without cancelling two large
/// values when s is large (the negative-binomial size reaches 1e8 near the
/// Poisson limit while y is a few units).
pub fn trigamma_difference(y: f64, s: f64) -> f64 {
    if s.is_nan() || y.is_nan() || s <= 0.0 || y < 0.0 {
        return f64::NAN;
    }
    if y == 0.0 {
        return 0.0;
    }
    if s < ASYMPTOTIC_FROM || s.is_infinite() {
        return trigamma(s + y) - trigamma(s);
    }
    let sum = s + y;
    -y / (s * sum) - y * (s + sum) / (2.0 * s * s * sum * sum) + trigamma_correction(sum)
        - trigamma_correction(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_combined_ratio_and_digamma_difference_match_the_separate_functions() {
        for &s in &[
            0.3, 2.0, 9.99, 10.0, 37.5, 59.9, 60.0, 150.0, 4.2e3, 1e6, 3e8,
        ] {
            for &y in &[0.0, 0.4, 1.0, 2.7, 4.6, 12.0] {
                let (ratio, difference) = ln_gamma_ratio_and_digamma_difference(y, s);
                let expected_ratio = ln_gamma_ratio(y, s);
                assert!(
                    (ratio - expected_ratio).abs() <= 1e-13 * expected_ratio.abs().max(1.0),
                    "ratio at y = {y}, s = {s}: {ratio} vs {expected_ratio}"
                );
                // ψ(s+y) − ψ(s) against a high-accuracy difference quotient of the ratio
                // would be noisy; compare with the plain difference where it is accurate.
                let plain = digamma(s + y) - digamma(s);
                let scale = digamma(s).abs().max(1.0);
                assert!(
                    (difference - plain).abs() <= 1e-13 * scale,
                    "difference at y = {y}, s = {s}: {difference} vs {plain}"
                );
            }
        }
    }

    fn assert_relative(actual: f64, expected: f64, tolerance: f64) {
        let error = (actual - expected).abs() / expected.abs().max(1e-300);
        assert!(
            error <= tolerance,
            "actual {actual:e}, expected {expected:e}, relative error {error:e}"
        );
    }

    #[test]
    fn ln_gamma_matches_reference_values() {
        assert_relative(ln_gamma(0.5), 0.572_364_942_924_700_1, 1e-13);
        assert_relative(ln_gamma(10.0), 12.801_827_480_081_469, 1e-13);
        assert_relative(ln_gamma(1e-3), 6.907_178_885_383_854, 1e-13);
        // ln Γ(1e-8) = −ln(1e-8) − γ·1e-8 + O(1e-16)
        assert_relative(ln_gamma(1e-8), 18.420_680_738_180_21, 1e-13);
        // ln Γ(1e7) from Stirling with three correction terms (exact to double precision)
        let z: f64 = 1e7;
        let stirling = (z - 0.5) * z.ln() - z + HALF_LN_TWO_PI + 1.0 / (12.0 * z);
        assert_relative(ln_gamma(1e7), stirling, 1e-14);
        assert_relative(ln_gamma(3.5), 1.200_973_602_347_074_3, 1e-13);
        assert_relative(ln_gamma(25.0), 54.784_729_398_112_32, 1e-13);
    }

    #[test]
    fn ln_gamma_is_exact_enough_at_its_zeros() {
        assert!(ln_gamma(1.0).abs() < 1e-14);
        assert!(ln_gamma(2.0).abs() < 1e-14);
    }

    #[test]
    fn ln_gamma_satisfies_the_recurrence() {
        for &x in &[1e-6, 0.3, 1.7, 4.2, 9.99, 10.0, 57.5, 1e4] {
            let expected = ln_gamma(x) + f64::ln(x);
            let actual = ln_gamma(x + 1.0);
            assert!((actual - expected).abs() <= 1e-13 * expected.abs().max(1.0));
        }
    }

    #[test]
    fn digamma_matches_reference_values() {
        assert_relative(digamma(1.0), -0.577_215_664_901_532_9, 1e-13);
        assert_relative(digamma(0.5), -1.963_510_026_021_423_5, 1e-13);
        assert_relative(digamma(10.0), 2.251_752_589_066_721, 1e-13);
        assert_relative(digamma(100.0), 4.600_161_852_738_087, 1e-13);
        // ψ(x) = −1/x − γ + O(x) near 0
        assert_relative(digamma(1e-8), -1e8 - 0.577_215_648_452_192_2, 1e-13);
        // ψ(x) ≈ ln x − 1/(2x) for large x
        let z: f64 = 1e7;
        assert_relative(digamma(z), z.ln() - 0.5 / z - 1.0 / (12.0 * z * z), 1e-14);
    }

    #[test]
    fn digamma_is_the_derivative_of_ln_gamma() {
        for &x in &[0.01, 0.8, 3.3, 12.0, 450.0] {
            let step = 1e-5 * x;
            let central = (ln_gamma(x + step) - ln_gamma(x - step)) / (2.0 * step);
            assert!((central - digamma(x)).abs() <= 1e-7 * digamma(x).abs().max(1.0));
        }
    }

    #[test]
    fn ln_gamma_ratio_agrees_with_the_plain_difference() {
        for &(y, s) in &[
            (0.7, 0.2),
            (2.5, 9.0),
            (3.9, 11.0),
            (1.2, 150.0),
            (4.0, 3.0e3),
        ] {
            let plain = ln_gamma(s + y) - ln_gamma(s);
            assert!((ln_gamma_ratio(y, s) - plain).abs() <= 1e-12 * plain.abs().max(1.0));
        }
        assert_eq!(ln_gamma_ratio(0.0, 5.0), 0.0);
        // For huge s the ratio tends to y·ln s.
        let s = 1e12;
        assert_relative(ln_gamma_ratio(2.0, s), 2.0 * f64::ln(s) + 1.0 / s, 1e-14);
    }

    #[test]
    fn invalid_arguments_give_nan() {
        assert!(ln_gamma(0.0).is_nan());
        assert!(ln_gamma(-1.5).is_nan());
        assert!(digamma(f64::NAN).is_nan());
        assert!(ln_gamma_ratio(-1.0, 2.0).is_nan());
    }

    #[test]
    fn trigamma_matches_reference_values_and_is_the_derivative_of_digamma() {
        // ψ₁(1) = π²/6, ψ₁(1/2) = π²/2
        assert_relative(trigamma(1.0), std::f64::consts::PI.powi(2) / 6.0, 1e-13);
        assert_relative(trigamma(0.5), std::f64::consts::PI.powi(2) / 2.0, 1e-13);
        for &x in &[0.02, 0.9, 4.4, 10.0, 37.0, 800.0] {
            let step = 1e-5 * x;
            let central = (digamma(x + step) - digamma(x - step)) / (2.0 * step);
            assert!((central - trigamma(x)).abs() <= 1e-6 * trigamma(x).abs());
        }
    }

    #[test]
    fn trigamma_difference_agrees_with_the_plain_difference_and_the_large_size_limit() {
        for &(y, s) in &[
            (0.5, 0.3),
            (3.0, 9.5),
            (7.0, 10.0),
            (2.0, 250.0),
            (40.0, 1e3),
        ] {
            let plain = trigamma(s + y) - trigamma(s);
            assert!((trigamma_difference(y, s) - plain).abs() <= 1e-11 * plain.abs());
        }
        assert_eq!(trigamma_difference(0.0, 3.0), 0.0);
        // For huge s: ψ₁(s+y) − ψ₁(s) ≈ −y/s² (1 + O(y/s))
        let (y, s) = (3.0, 1e9);
        assert_relative(trigamma_difference(y, s), -y / (s * s), 1e-8);
    }
}
