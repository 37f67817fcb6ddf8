//! The WSPmm model core: summed table, design, curve and objective.
//!
//! Pure numerics: nothing here knows about R or processes.
//! - [`design`]: treatments, the weight matrix W, degrees, parameter layout and names;
//! - [`table`]: tokens summed into the (ran, context, species, treatment, bin) table;
//! - [`curve`]: warping, the poly-sigmoid Ψ and boundary distances of one block;
//! - [`objective`]: the [`Model`] and its nll, penalty and analytic gradient;
//! - [`bands`]: prediction bands over parameter samples;
//! - [`special`]: ln Γ and ψ.

pub(crate) mod bands;
pub(crate) mod build;
pub(crate) mod curve;
pub(crate) mod design;
pub(crate) mod objective;
pub(crate) mod special;
pub(crate) mod table;

pub(crate) use build::{build_model, CodedTokens};
pub(crate) use design::{Component, Design, Factor, ParameterRole, Structure, WarpKind};
pub(crate) use objective::{Model, Objective, Settings};
pub(crate) use table::{SummedTable, TableShape};

#[cfg(test)]
pub(crate) mod synthetic;
