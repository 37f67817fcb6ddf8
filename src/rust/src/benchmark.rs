//! Timing loops for the benchmarks (`test-hooks` feature only).

use crate::original::{Model, Objective};

/// Seconds of each of `repeats` value-and-gradient evaluations at `x`, with
/// the penalty anchored at `x`, timed inside Rust.
pub(crate) fn time_evaluations(
    model: &Model,
    x: &[f64],
    repeats: usize,
) -> Result<Vec<f64>, String> {
    let mut objective = Objective::new(model);
    objective.set_penalty_coefficients(x)?;
    let mut gradient = vec![0.0; x.len()];
    let mut seconds = Vec::with_capacity(repeats);
    for _ in 0..repeats.max(1) {
        let started = std::time::Instant::now();
        objective.value_and_gradient(x, &mut gradient)?;
        seconds.push(started.elapsed().as_secs_f64());
    }
    Ok(seconds)
}
