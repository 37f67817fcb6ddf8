//! One bootstrap replicate (spec section 5): resample tokens within cells,
//! recompute the "none" rows, dispersion and initial values with the
//! structure kept fixed, and fit. The fork engine, mclapply, the serial loop
//! and future workers all run this same function, so a replicate's result
//! depends only on (plan, seed, replicate number).

use crate::fit::{FitResult, FitSettings};
use crate::model::Model;
use crate::pipeline::fit_structure;
use crate::streams::TaskStream;
use crate::structure::DetectedStructure;
use serde::{Deserialize, Serialize};

/// Everything a replicate needs; it travels to workers as bytes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BootstrapPlan {
    /// The full-data model, its structure included.
    pub model: Model,
    /// Degrees and change points of the full-data fit, kept for every replicate.
    pub detected: DetectedStructure,
    pub fit: FitSettings,
}

impl BootstrapPlan {
    pub fn to_bytes(&self) -> Result<Vec<u8>, String> {
        bincode::serde::encode_to_vec(self, bincode::config::standard())
            .map_err(|e| format!("cannot serialise the bootstrap plan: {e}"))
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        crate::codec::decode_exact(bytes, "the bootstrap plan")
    }
}

/// Random streams of replicate `r` (numbered from 1): tokens are redrawn
/// from stream 2r and the starting warping factors from stream 2r + 1, so
/// neither collides with the other nor with the full-data fit (stream 0).
pub fn resampling_stream(replicate: usize) -> u64 {
    2 * replicate as u64
}

pub fn warp_stream(replicate: usize) -> u64 {
    2 * replicate as u64 + 1
}

/// Runs replicate `replicate` (from 1) of the bootstrap seeded with `seed`.
pub fn run_replicate(
    plan: &BootstrapPlan,
    seed: u64,
    replicate: usize,
) -> Result<FitResult, String> {
    if replicate == 0 {
        return Err("replicates are numbered from 1".into());
    }
    let mut model = plan.model.clone();
    let mut stream = TaskStream::new(seed, resampling_stream(replicate));
    model
        .table_mut()
        .resample_pools(|n| stream.below(n as u64) as usize)?;
    let (_, _, result) = fit_structure(
        &model,
        &plan.detected,
        &plan.fit,
        seed,
        warp_stream(replicate),
    )?;
    Ok(result)
}
