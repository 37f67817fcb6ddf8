//! The WSPmm model core: summed table, design, curve and objective.
//!
//! Pure numerics: nothing here knows about R or processes.
//! - [`design`]: treatments, the weight matrix W, degrees, parameter layout and names;
//! - [`table`]: tokens summed into the (ran, context, species, treatment, bin) table;
//! - [`curve`]: warping, the poly-sigmoid Ψ and boundary distances of one block;
//! - [`objective`]: the [`Model`] and its nll, penalty and analytic gradient;
//! - [`special`]: ln Γ and ψ.

pub mod build;
pub mod curve;
pub mod design;
pub mod objective;
pub mod special;
pub mod table;

pub use build::{build_model, CodedTokens};
pub use design::{Component, Design, Factor, ParameterLayout, ParameterRole, Structure, WarpKind};
pub use objective::{Model, Objective, Settings};
pub use table::{SummedTable, TableShape, TokenColumns};

#[cfg(test)]
pub(crate) mod synthetic;
