//! SplitMix64 for the tests' synthetic data: tiny, deterministic, and the
//! same stream on every platform, so fixed seeds give fixed data.

pub(crate) struct SplitMix(pub(crate) u64);

impl SplitMix {
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1): never 0, so its logarithm is finite.
    pub(crate) fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    pub(crate) fn between(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.uniform()
    }

    /// Uniform on 0..n (modulo bias is negligible for the small n used).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Standard normal (Box–Muller).
    pub(crate) fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }

    /// Poisson: Knuth's method for small means, a rounded normal above 200.
    pub(crate) fn poisson(&mut self, mean: f64) -> f64 {
        if mean > 200.0 {
            return (mean + mean.sqrt() * self.normal()).round().max(0.0);
        }
        let limit = (-mean).exp();
        let mut product = self.uniform();
        let mut draws = 0.0;
        while product > limit {
            product *= self.uniform();
            draws += 1.0;
        }
        draws
    }
}

#[cfg(test)]
mod tests {
    use super::SplitMix;

    #[test]
    fn uniforms_have_the_moments_of_u01_and_poissons_their_mean() {
        let mut rng = SplitMix(2024);
        let n = 200_000;
        let draws: Vec<f64> = (0..n).map(|_| rng.uniform()).collect();
        assert!(draws.iter().all(|&u| u > 0.0 && u < 1.0));
        let mean = draws.iter().sum::<f64>() / n as f64;
        let variance = draws.iter().map(|u| (u - mean).powi(2)).sum::<f64>() / n as f64;
        // Standard errors: 0.00065 for the mean, 0.0002 for the variance.
        assert!((mean - 0.5).abs() < 0.003, "{mean}");
        assert!((variance - 1.0 / 12.0).abs() < 0.001, "{variance}");
        for target in [0.7, 12.0, 450.0] {
            let average = (0..20_000).map(|_| rng.poisson(target)).sum::<f64>() / 20_000.0;
            // Five standard errors of the mean of 20,000 draws.
            assert!(
                (average - target).abs() < 5.0 * (target / 20_000.0).sqrt(),
                "{target}: {average}"
            );
        }
    }
}
