//! Numerics shared by both likelihoods, with no model in them: ln Γ and ψ
//! ([`special`]), a small dense LU ([`linalg`]) and R's type-7 quantile.

pub(crate) mod linalg;
pub(crate) mod special;

/// Type-7 quantile (R's default) of sorted, non-empty values.
pub(crate) fn sorted_quantile(sorted: &[f64], probability: f64) -> f64 {
    let position = (sorted.len() - 1) as f64 * probability;
    let below = position.floor() as usize;
    let above = (below + 1).min(sorted.len() - 1);
    sorted[below] + (position - below as f64) * (sorted[above] - sorted[below])
}
