//! Assembles a [`CountModel`] from coded token columns, with the same
//! treatment rule as the original model's builder.

use super::table::{CountTable, CountTokens, Exposure, ExposureChoice};
use super::CountModel;
use crate::data::treatment_indices;
use crate::data::{CodedTokens, TableShape};
use crate::design::{Design, Structure};

/// Builds the count table and model; `cells` holds a cell id per token (or
/// is empty), `exposure` the requested rule (`None`: automatic).
pub(crate) fn build_count_model(
    design: Design,
    bins: usize,
    degrees: Vec<usize>,
    exposure: Option<Exposure>,
    point_gap: f64,
    tokens: &CodedTokens,
    cells: &[usize],
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
        cell: cells,
    };
    let (table, choice) = CountTable::new(shape, columns, exposure)?;
    let structure = Structure::new(shape.contexts, shape.species, degrees)?;
    Ok((
        CountModel::new(table, design, structure, point_gap)?,
        choice,
    ))
}
