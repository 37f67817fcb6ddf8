//! wispack's Rust core and its R boundary.
//!
//! The default model first:
//! - [`nb`]: the count model, wispack's default likelihood (`"nb"`): its
//!   table with exposure, objective, Newton fit, structure selection,
//!   replicates and predictions;
//! - [`design`]: treatments, W, degrees and the parameter layout, shared by
//!   both likelihoods; [`data`]: coded tokens, the treatment rule and the
//!   summed table; [`curve`]: warping and the poly-sigmoid Ψ;
//! - [`changepoint`]: change-point detection, the LRO grid and what starting
//!   values read between change points;
//! - [`original`]: the original likelihood (`"original"`): its objective,
//!   starting values, L-BFGS fit and feasibility repair, and pipeline.
//!
//! Around them:
//! - [`boundary`]: the R entry points, conversions and error mapping only;
//! - [`bootstrap`], [`resample`], [`outcome`], [`checkpoint`]: replicates,
//!   the resampling schemes, a replicate's record and the files that make
//!   runs resumable;
//! - [`saved`], [`codec`]: versioned, checksummed saved state;
//! - [`engine`]: the fork engine (threads where there is no fork), which
//!   knows nothing about the model; [`platform`]: what differs between
//!   operating systems; [`streams`]: random streams per task;
//! - [`numeric`]: special functions, a small LU, quantiles;
//! - [`rules`]: defaults and limits R asks for (a leaf: it imports nothing
//!   of the crate); [`error`]: error kinds.
//!
//! Test-only code (fault injection, synthetic engine tasks, timing loops) is
//! compiled with the `test-hooks` feature only.

mod nb;

mod changepoint;
mod curve;
mod data;
mod design;
mod original;

#[cfg(feature = "test-hooks")]
mod benchmark;
mod bootstrap;
mod boundary;
mod checkpoint;
mod codec;
mod engine;
mod error;
#[cfg(feature = "test-hooks")]
mod faults;
mod numeric;
mod outcome;
mod platform;
mod resample;
mod rules;
mod saved;
#[cfg(feature = "test-hooks")]
mod selftest;
mod streams;
#[cfg(test)]
mod test_rng;

use extendr_api::prelude::*;

extendr_module! {
    mod wispack;
    use boundary;
}
