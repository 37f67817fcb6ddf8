//! The data both likelihoods start from: token columns coded as level
//! indices, the treatment rule that maps their fixed-effect levels to
//! treatments (the one place it is written), and the summed table of
//! [`summed`] (change-point detection and the original likelihood read it).

pub(crate) mod binning;
pub(crate) mod summed;

pub(crate) use summed::{SummedTable, TableShape};

use crate::design::Design;

/// Token columns coded as 0-based level indices (bins stay 1-based).
#[derive(Clone, Debug, Default)]
pub(crate) struct CodedTokens {
    pub(crate) count: Vec<f64>,
    pub(crate) bin: Vec<i32>,
    pub(crate) context: Vec<usize>,
    pub(crate) species: Vec<usize>,
    pub(crate) ran: Vec<usize>,
    /// One column per fixed-effect factor of the design, in factor order.
    pub(crate) factor_levels: Vec<Vec<usize>>,
}

/// The treatment of every token, from its factor levels.
pub(crate) fn treatment_indices(
    design: &Design,
    tokens: &CodedTokens,
) -> Result<Vec<usize>, String> {
    let n = tokens.count.len();
    if tokens.factor_levels.len() != design.factors().len() {
        return Err(format!(
            "{} fixed-effect columns were given for {} factors",
            tokens.factor_levels.len(),
            design.factors().len()
        ));
    }
    if let Some(column) = tokens.factor_levels.iter().find(|column| column.len() != n) {
        return Err(format!(
            "a fixed-effect column has {} entries, count has {n}",
            column.len()
        ));
    }
    let mut levels = vec![0usize; design.factors().len()];
    let mut treatment = Vec::with_capacity(n);
    for token in 0..n {
        for (level, column) in levels.iter_mut().zip(&tokens.factor_levels) {
            *level = column[token];
        }
        let index = design.treatment_index(&levels).ok_or_else(|| {
            format!(
                "token {} has fixed-effect levels outside the design",
                token + 1
            )
        })?;
        treatment.push(index);
    }
    Ok(treatment)
}
