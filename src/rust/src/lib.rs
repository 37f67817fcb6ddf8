//! wispack's Rust core and its R boundary.
//!
//! - [`boundary`]: the R entry points, conversions and error mapping only;
//! - [`model`], [`structure`], [`fit`], [`pipeline`]: the model, change-point
//!   detection and start values, the optimiser, and the fit from data;
//! - [`bootstrap`], [`outcome`], [`checkpoint`]: replicates, their record
//!   and the files that make runs resumable;
//! - [`saved`], [`codec`]: versioned, checksummed saved state;
//! - [`count`]: the count likelihood (the default model) and its fit;
//! - [`engine`]: the fork engine (threads where there is no fork), which
//!   knows nothing about the model; [`platform`]: what differs between
//!   operating systems;
//! - [`rules`]: defaults and limits R asks for; [`error`]: error kinds.
//!
//! Test-only code (fault injection, synthetic engine tasks, timing loops) is
//! compiled with the `test-hooks` feature only.

#[cfg(feature = "test-hooks")]
mod benchmark;
mod bootstrap;
mod boundary;
mod checkpoint;
mod codec;
mod count;
mod engine;
mod error;
#[cfg(feature = "test-hooks")]
mod faults;
mod fit;
mod model;
mod outcome;
mod pipeline;
mod platform;
mod resampling;
mod rules;
mod sampling;
mod saved;
#[cfg(feature = "test-hooks")]
mod selftest;
mod streams;
mod structure;
#[cfg(test)]
mod test_rng;

use extendr_api::prelude::*;

extendr_module! {
    mod wispack;
    use boundary;
}
