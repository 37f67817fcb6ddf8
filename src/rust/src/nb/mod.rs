//! The count model, wispack's default likelihood (model vignette §9.2): summed
//! counts of observed cells are negative binomial with exposure, each animal's
//! curves are warped by normal random effects, and each species is fitted on
//! its own by damped Newton steps with the exact Hessian, the random-effect
//! variances by a REML-type Laplace criterion.
//!
//! The fit's numerics know nothing about R; the orchestration
//! ([`pipeline`], [`degrees`], [`replicate`]) runs species and structure
//! candidates as tasks on [`crate::engine`].
//! - [`table`]: observed cell keys, counts and exposures; [`build`]: the
//!   model from coded tokens;
//! - [`family`]: the negative-binomial row term and its derivatives;
//! - [`curve`]: θ → curve values, the warps, Ψ and its derivatives;
//! - [`unknowns`]: where a species' unknowns sit, and their state;
//! - [`objective`]: one species' likelihood pass, gradient and bordered
//!   Hessian; [`priors`]: the curves' priors and the held effects' penalty;
//! - [`linalg`]: the bordered block-diagonal factorisation;
//! - [`solver`]: damped Newton for one species at fixed variances;
//! - [`settings`]: the fit's settings and the unknowns' bounds; [`start`]:
//!   starting values; [`fit`]: a species' fit; [`variances`]: the
//!   random-effect variances' updates; [`report`]: the reported vector;
//! - [`covariance`]: the Wald covariance;
//! - [`pipeline`]: every species of a model fitted, and the plan a fit keeps;
//!   [`panel`]: one species' whole selection and fit as a task of its own;
//!   [`degrees`] with [`select`]: how many transitions each curve has;
//! - [`replicate`] with [`redraw`]: bootstrap and likelihood-ratio
//!   replicates; [`predict`]: curves at any bin; [`terms`]: the reduced
//!   fits of gene-level tests; [`pin`]: one effect held at a value, and
//!   [`profile`]: the profile likelihoods of effects the curvature misjudges.
//!
//! Loops here run over indices on purpose: they follow the sums of the model
//! vignette, index several arrays with the same subscript, and often use the
//! index itself in arithmetic.
#![allow(clippy::needless_range_loop)]

pub(crate) mod build;
pub(crate) mod covariance;
pub(crate) mod curve;
pub(crate) mod degrees;
pub(crate) mod family;
pub(crate) mod fit;
pub(crate) mod layout;
pub(crate) mod linalg;
pub(crate) mod objective;
pub(crate) mod panel;
pub(crate) mod pin;
pub(crate) mod pipeline;
pub(crate) mod predict;
pub(crate) mod priors;
pub(crate) mod profile;
pub(crate) mod redraw;
pub(crate) mod replicate;
pub(crate) mod report;
pub(crate) mod select;
pub(crate) mod settings;
pub(crate) mod solver;
pub(crate) mod start;
pub(crate) mod table;
pub(crate) mod terms;
pub(crate) mod unknowns;
pub(crate) mod variances;

#[cfg(test)]
pub(crate) mod tests_support;

use crate::design::{Design, Structure};
use curve::Axis;
use table::CountTable;

/// Data, design and structure of a count-likelihood fit.
#[derive(Clone, Debug)]
pub(crate) struct CountModel {
    table: CountTable,
    design: Design,
    structure: Structure,
    /// Smallest distance of transition points from each other and from the
    /// edges of the bin axis, in bins.
    point_gap: f64,
    /// Treatments (columns of W, from 1) whose effects are held at 0 on
    /// every curve unknown: a reduced model for a likelihood-ratio test
    /// (model vignette §15.4). Empty for the full model.
    held_effects: Vec<usize>,
}

/// The points' smallest distance for B bins and a buffer factor: the
/// original's tpoint buffer, ceil(B · factor) bins.
pub(crate) fn point_gap_of(bins: usize, buffer_factor: f64) -> f64 {
    (bins as f64 * buffer_factor).ceil()
}

impl CountModel {
    /// Checks that the table, design and structure describe the same sizes.
    pub fn new(
        table: CountTable,
        design: Design,
        structure: Structure,
        point_gap: f64,
    ) -> Result<Self, String> {
        table.validate()?;
        let shape = table.shape();
        let checks = [
            ("contexts", shape.contexts, design.contexts().len()),
            ("species", shape.species, design.species().len()),
            (
                "random-effect levels",
                shape.ran_levels,
                design.ran_levels().len(),
            ),
            ("treatments", shape.treatments, design.treatment_count()),
            (
                "contexts of the structure",
                shape.contexts,
                structure.contexts(),
            ),
            (
                "species of the structure",
                shape.species,
                structure.species(),
            ),
        ];
        for (what, in_table, expected) in checks {
            if in_table != expected {
                return Err(format!(
                    "the count table has {in_table} {what}, expected {expected}"
                ));
            }
        }
        let bins = shape.bins as f64;
        let degree = structure.max_degree();
        // Curves without transitions have no points to space: any number of bins will do.
        let spaced = degree == 0 || (degree as f64 + 1.0) * point_gap < bins;
        if !(point_gap.is_finite() && point_gap >= 0.0 && spaced) {
            return Err(format!(
                "curves of {} transitions need more than {} bins with transitions at least {point_gap} bins apart",
                structure.max_degree(),
                shape.bins
            ));
        }
        Ok(CountModel {
            table,
            design,
            structure,
            point_gap,
            held_effects: Vec::new(),
        })
    }

    /// The same model with the effects of `treatments` (columns of W other
    /// than the reference's 0) held at 0.
    pub fn with_held_effects(mut self, mut treatments: Vec<usize>) -> Result<Self, String> {
        treatments.sort_unstable();
        treatments.dedup();
        let count = self.design.treatment_count();
        if let Some(&bad) = treatments.iter().find(|&&t| t == 0 || t >= count) {
            return Err(format!(
                "effect {bad} cannot be held at 0: the effects are numbered 1 to {}",
                count.saturating_sub(1)
            ));
        }
        self.held_effects = treatments;
        Ok(self)
    }

    /// Treatments whose effects are held at 0 (see [`Self::with_held_effects`]).
    pub fn held_effects(&self) -> &[usize] {
        &self.held_effects
    }

    pub fn table(&self) -> &CountTable {
        &self.table
    }

    pub fn table_mut(&mut self) -> &mut CountTable {
        &mut self.table
    }

    pub fn design(&self) -> &Design {
        &self.design
    }

    pub fn structure(&self) -> &Structure {
        &self.structure
    }

    /// The same data with other degrees.
    pub fn with_structure(&self, structure: Structure) -> Result<Self, String> {
        CountModel::new(
            self.table.clone(),
            self.design.clone(),
            structure,
            self.point_gap,
        )?
        .with_held_effects(self.held_effects.clone())
    }

    /// One (context, species) curve of this model as a model of its own,
    /// with `degree` transitions: the same animals, treatments, W and point
    /// gap (see [`CountTable::curve_rows`]).
    pub fn curve_model(
        &self,
        context: usize,
        species: usize,
        degree: usize,
    ) -> Result<Self, String> {
        let table = self.table.curve_rows(context, species)?;
        let design = Design::new(
            vec![self.design.contexts()[context].clone()],
            vec![self.design.species()[species].clone()],
            self.design.ran_levels().to_vec(),
            self.design.factors().to_vec(),
        )?;
        CountModel::new(
            table,
            design,
            Structure::new(1, 1, vec![degree])?,
            self.point_gap,
        )
    }

    pub fn point_gap(&self) -> f64 {
        self.point_gap
    }

    /// The bin axis that transition points live on.
    pub fn axis(&self) -> Axis {
        Axis::new(self.table.shape().bins, self.point_gap)
    }

    /// Whether the animals carry random effects (two or more of them).
    pub fn has_random_effects(&self) -> bool {
        self.table.shape().ran_levels >= 2
    }
}
