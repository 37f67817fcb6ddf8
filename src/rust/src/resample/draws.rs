//! Draws from the distributions the parametric bootstrap needs, built on a
//! [`TaskStream`]'s uniforms so that a draw depends only on (seed, stream),
//! like every other random number in the package.

use crate::numeric::special::ln_gamma;
use crate::streams::TaskStream;

/// A uniform in (0, 1): never 0, so its logarithm is finite.
fn open_uniform(stream: &mut TaskStream) -> f64 {
    loop {
        let u = stream.uniform();
        if u > 0.0 {
            return u;
        }
    }
}

/// Standard normal (Box–Muller, one of the pair).
pub(crate) fn normal(stream: &mut TaskStream) -> f64 {
    let (u, v) = (open_uniform(stream), stream.uniform());
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

/// Gamma(shape, scale 1) by Marsaglia and Tsang's method (shape < 1 through
/// Gamma(shape + 1)·U^(1/shape)).
pub(crate) fn gamma(stream: &mut TaskStream, shape: f64) -> f64 {
    if shape < 1.0 {
        let boost = open_uniform(stream).powf(1.0 / shape);
        return gamma(stream, shape + 1.0) * boost;
    }
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = normal(stream);
        let v = (1.0 + c * x).powi(3);
        if v <= 0.0 {
            continue;
        }
        let u = open_uniform(stream);
        if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v;
        }
    }
}

/// Poisson(mean): inversion for small means, Hörmann's transformed rejection
/// (PTRS) from a mean of 10 on.
pub(crate) fn poisson(stream: &mut TaskStream, mean: f64) -> f64 {
    // A mean that is 0, negative or NaN draws 0.
    if mean.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return 0.0;
    }
    if mean < 10.0 {
        let mut k = 0.0;
        let mut probability = (-mean).exp();
        let mut cumulative = probability;
        let u = stream.uniform();
        while u > cumulative && probability > 0.0 {
            k += 1.0;
            probability *= mean / k;
            cumulative += probability;
        }
        return k;
    }
    let root = mean.sqrt();
    let log_mean = mean.ln();
    let b = 0.931 + 2.53 * root;
    let a = -0.059 + 0.024_83 * b;
    let inverse_alpha = 1.1239 + 1.1328 / (b - 3.4);
    let vr = 0.9277 - 3.6224 / (b - 2.0);
    loop {
        let u = stream.uniform() - 0.5;
        let v = open_uniform(stream);
        let us = 0.5 - u.abs();
        let k = ((2.0 * a / us + b) * u + mean + 0.43).floor();
        if us >= 0.07 && v <= vr {
            return k;
        }
        if k < 0.0 || (us < 0.013 && v > us) {
            continue;
        }
        if v.ln() + inverse_alpha.ln() - (a / (us * us) + b).ln()
            <= -mean + k * log_mean - ln_gamma(k + 1.0)
        {
            return k;
        }
    }
}

/// Negative binomial with mean `mean` and size `size` (variance mean +
/// mean²/size), as a gamma mixture of Poissons; Poisson for an infinite size.
pub(crate) fn negative_binomial(stream: &mut TaskStream, mean: f64, size: f64) -> f64 {
    if mean.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return 0.0;
    }
    if !size.is_finite() || size > 1e12 {
        return poisson(stream, mean);
    }
    let lambda = mean * gamma(stream, size) / size;
    poisson(stream, lambda)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moments(draws: &[f64]) -> (f64, f64) {
        let n = draws.len() as f64;
        let mean = draws.iter().sum::<f64>() / n;
        let variance = draws.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (mean, variance)
    }

    /// |sample mean − μ| within 5 standard errors, sample variance within 10 %.
    fn check(draws: &[f64], mean: f64, variance: f64) {
        let (m, v) = moments(draws);
        let n = draws.len() as f64;
        assert!(
            (m - mean).abs() < 5.0 * (variance / n).sqrt(),
            "mean {m} vs {mean}"
        );
        assert!(
            (v / variance - 1.0).abs() < 0.1,
            "variance {v} vs {variance}"
        );
    }

    #[test]
    fn draws_have_their_distributions_moments() {
        let mut stream = TaskStream::new(7, 1);
        let n = 40_000;
        let normals: Vec<f64> = (0..n).map(|_| normal(&mut stream)).collect();
        check(&normals, 0.0, 1.0);
        for shape in [0.4, 2.5, 80.0] {
            let draws: Vec<f64> = (0..n).map(|_| gamma(&mut stream, shape)).collect();
            check(&draws, shape, shape);
        }
        for mean in [0.3, 6.0, 12.0, 450.0] {
            let draws: Vec<f64> = (0..n).map(|_| poisson(&mut stream, mean)).collect();
            check(&draws, mean, mean);
            assert!(draws.iter().all(|&k| k >= 0.0 && k == k.round()));
        }
        for (mean, size) in [(3.0, 2.0), (40.0, 10.0)] {
            let draws: Vec<f64> = (0..n)
                .map(|_| negative_binomial(&mut stream, mean, size))
                .collect();
            check(&draws, mean, mean + mean * mean / size);
        }
    }

    #[test]
    fn small_poisson_probabilities_match_the_pmf() {
        let mut stream = TaskStream::new(3, 2);
        let n = 100_000;
        let mean = 2.2_f64;
        let mut counts = [0usize; 6];
        for _ in 0..n {
            let k = poisson(&mut stream, mean) as usize;
            if k < 6 {
                counts[k] += 1;
            }
        }
        for (k, &c) in counts.iter().enumerate() {
            let p = (-mean + k as f64 * mean.ln() - ln_gamma(k as f64 + 1.0)).exp();
            let se = (p * (1.0 - p) / n as f64).sqrt();
            assert!((c as f64 / n as f64 - p).abs() < 5.0 * se, "k = {k}");
        }
    }
}
