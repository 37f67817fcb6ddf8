//! The original likelihood (`likelihood = "original"`, model vignette §9.1):
//! the C++ wispack's Poisson-process objective on the summed table with its
//! boundary barrier, started by [`start`], fitted by L-BFGS with the
//! feasibility repair ([`fit`]), and the detect → start → fit pipeline with
//! its LRO grid search ([`pipeline`]). The default model is [`crate::nb`].
//!
//! - [`objective`]: the [`Model`], its nll, penalty and analytic gradient;
//! - [`build`]: the model from coded tokens;
//! - [`start`]: initial parameters from detected change points;
//! - [`fit`]: the fit's settings, codes and penalised nll;
//! - [`lbfgs`]: the guarded L-BFGS the fit and the repair run;
//! - [`repair`]: the feasibility repair of a starting vector;
//! - [`pipeline`]: detection, start and fit, and the grid search;
//! - [`replicate`]: the bootstrap plan and one replicate;
//! - [`bands`]: prediction bands over parameter samples.

pub(crate) mod bands;
pub(crate) mod build;
pub(crate) mod fit;
pub(crate) mod lbfgs;
pub(crate) mod objective;
pub(crate) mod pipeline;
pub(crate) mod repair;
pub(crate) mod replicate;
pub(crate) mod start;

pub(crate) use build::build_model;
pub(crate) use objective::{Model, Objective, Settings};
pub(crate) use start::{initial_parameters, StartSettings};

#[cfg(test)]
pub(crate) mod synthetic;
