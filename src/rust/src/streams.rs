//! Per-task random streams.
//!
//! Task i draws from ChaCha20 keyed by the master seed with stream number i,
//! so what a task draws depends only on (seed, i): never on how many workers
//! run, how tasks are grouped into children, or the order they finish in.
//! The conversion from raw 64-bit words to doubles is ours, so the values are
//! fixed by the ChaCha20 algorithm itself, not by a crate's sampling code.

use rand_chacha::rand_core::{Rng, SeedableRng};

/// The streams of a fit and its bootstrap, for both likelihoods: the
/// full-data fit draws its starting warping factors from stream 0; replicate
/// r (numbered from 1) redraws its data from stream 2r and its starting
/// warping factors from stream 2r + 1, so no two collide.
pub(crate) const FULL_FIT_WARP_STREAM: u64 = 0;

/// Replicates are numbered from 1 (stream 0 is the full-data fit's).
pub(crate) fn check_replicate_number(replicate: usize) -> Result<(), String> {
    if replicate == 0 {
        Err("replicates are numbered from 1".into())
    } else {
        Ok(())
    }
}

/// The stream replicate `replicate` (from 1) redraws its data from.
pub(crate) fn replicate_redraw_stream(replicate: usize) -> u64 {
    2 * replicate as u64
}

/// The stream of replicate `replicate`'s starting warping factors.
pub(crate) fn replicate_warp_stream(replicate: usize) -> u64 {
    2 * replicate as u64 + 1
}
use rand_chacha::ChaCha20Rng;

/// An independent random stream for one task.
pub(crate) struct TaskStream {
    generator: ChaCha20Rng,
}

impl TaskStream {
    pub(crate) fn new(master_seed: u64, stream: u64) -> Self {
        let mut generator = ChaCha20Rng::from_seed(expand_seed(master_seed));
        generator.set_stream(stream);
        TaskStream { generator }
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.generator.next_u64()
    }

    /// A uniform double in [0, 1) with 53 random bits.
    pub(crate) fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform integer in 0..n (n > 0), without modulo bias (Lemire's method).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "below(0) has no values");
        let threshold = n.wrapping_neg() % n;
        loop {
            let product = u128::from(self.next_u64()) * u128::from(n);
            if (product as u64) >= threshold {
                return (product >> 64) as u64;
            }
        }
    }
}

/// Spreads a 64-bit seed over ChaCha's 256-bit key with SplitMix64, so nearby
/// seeds give unrelated keys.
fn expand_seed(seed: u64) -> [u8; 32] {
    let mut state = seed;
    let mut key = [0u8; 32];
    for word in key.chunks_mut(8) {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        word.copy_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_matches_its_published_first_output() {
        // SplitMix64 seeded with 0 starts 0xE220A8397B1DCDAF (Vigna's reference code).
        let key = expand_seed(0);
        assert_eq!(
            u64::from_le_bytes(key[..8].try_into().unwrap()),
            0xE220_A839_7B1D_CDAF
        );
    }

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let draw = |seed, stream| {
            let mut s = TaskStream::new(seed, stream);
            (0..4).map(|_| s.next_u64()).collect::<Vec<_>>()
        };
        assert_eq!(draw(1, 7), draw(1, 7));
        assert_ne!(draw(1, 7), draw(1, 8));
        assert_ne!(draw(1, 7), draw(2, 7));
    }

    #[test]
    fn uniform_and_below_stay_in_range_with_plausible_moments() {
        let mut s = TaskStream::new(42, 1);
        let n = 200_000;
        let draws: Vec<f64> = (0..n).map(|_| s.uniform()).collect();
        assert!(draws.iter().all(|&u| (0.0..1.0).contains(&u)));
        let mean = draws.iter().sum::<f64>() / n as f64;
        assert!((mean - 0.5).abs() < 0.005, "mean {mean}");
        let mut counts = [0usize; 3];
        for _ in 0..30_000 {
            counts[s.below(3) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (9_400..10_600).contains(&c)),
            "{counts:?}"
        );
    }
}
