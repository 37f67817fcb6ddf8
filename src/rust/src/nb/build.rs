//! Assembles a [`CountModel`] from coded token columns, with the same
//! treatment rule as the original model's builder.

use super::table::{CountTable, CountTokens, Exposure, ExposureChoice};
use super::CountModel;
use crate::data::treatment_indices;
use crate::data::{CodedTokens, TableShape};
use crate::design::{Design, Structure};

/// What the data give per token besides its columns, each empty when absent:
/// a cell id, and an exposure (a binned table's exposure column).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PerToken<'a> {
    pub cells: &'a [usize],
    pub exposures: &'a [f64],
}

/// Builds the count table and model; `exposure` is the requested rule
/// (`None`: automatic).
pub(crate) fn build_count_model(
    design: Design,
    bins: usize,
    degrees: Vec<usize>,
    exposure: Option<Exposure>,
    point_gap: f64,
    tokens: &CodedTokens,
    per_token: PerToken<'_>,
) -> Result<(CountModel, ExposureChoice), String> {
    let treatment = treatment_indices(&design, tokens)?;
    let shape = TableShape::of_design(&design, bins);
    let columns = CountTokens {
        count: &tokens.count,
        bin: &tokens.bin,
        context: &tokens.context,
        species: &tokens.species,
        ran: &tokens.ran,
        treatment: &treatment,
        cell: per_token.cells,
        exposure: per_token.exposures,
    };
    let (table, choice) = CountTable::new(shape, columns, exposure)?;
    let structure = Structure::new(shape.contexts, shape.species, degrees)?;
    Ok((
        CountModel::new(table, design, structure, point_gap)?,
        choice,
    ))
}
