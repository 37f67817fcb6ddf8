//! Assembles the original likelihood's [`Model`] from coded token columns
//! (the treatment rule is [`treatment_indices`]).

use super::objective::{Model, Settings};
use crate::data::summed::{SummedTable, TableShape, TokenColumns};
use crate::data::{treatment_indices, CodedTokens};
use crate::design::{Design, Structure};

/// Builds the summed table and the model.
///
/// `degrees` holds one degree per (context, species), indexed c·S + s.
pub(crate) fn build_model(
    design: Design,
    bins: usize,
    degrees: Vec<usize>,
    settings: Settings,
    round_none: bool,
    tokens: &CodedTokens,
) -> Result<Model, String> {
    let treatment = treatment_indices(&design, tokens)?;
    let shape = TableShape::of_design(&design, bins);
    let columns = TokenColumns {
        count: &tokens.count,
        bin: &tokens.bin,
        context: &tokens.context,
        species: &tokens.species,
        ran: &tokens.ran,
        treatment: &treatment,
    };
    let table = SummedTable::new(shape, columns, round_none)?;
    let structure = Structure::new(shape.contexts, shape.species, degrees)?;
    Model::new(table, design, structure, settings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::design::Factor;

    fn strings(values: &[&str]) -> Vec<String> {
        values.iter().map(|v| v.to_string()).collect()
    }

    #[test]
    fn tokens_land_in_the_cell_of_their_treatment() {
        let design = Design::new(
            strings(&["cortex"]),
            strings(&["Gad"]),
            strings(&["m1", "m2"]),
            vec![Factor::new("hemisphere", strings(&["left", "right"]))],
        )
        .unwrap();
        let tokens = CodedTokens {
            count: vec![3.0, 4.0, 5.0],
            bin: vec![1, 1, 2],
            context: vec![0, 0, 0],
            species: vec![0, 0, 0],
            ran: vec![0, 1, 1],
            factor_levels: vec![vec![1, 1, 0]],
        };
        let model = build_model(design, 2, vec![0], Settings::default(), true, &tokens).unwrap();
        let table = model.table();
        // ran block 1 = m1 (block 0 is "none"), treatment 1 = right, bin 1.
        let m1_right_bin1 = table.row_index(1, 0, 0, 1, 1).unwrap();
        assert_eq!(table.count()[m1_right_bin1], 3.0);
        let m2_ref_bin2 = table.row_index(2, 0, 0, 0, 2).unwrap();
        assert_eq!(table.count()[m2_ref_bin2], 5.0);
    }

    #[test]
    fn mismatched_columns_are_errors() {
        let design =
            Design::new(strings(&["c"]), strings(&["g"]), strings(&["m"]), vec![]).unwrap();
        let tokens = CodedTokens {
            count: vec![1.0],
            bin: vec![1],
            context: vec![0],
            species: vec![0],
            ran: vec![0],
            factor_levels: vec![vec![0]],
        };
        assert!(build_model(design, 1, vec![0], Settings::default(), true, &tokens).is_err());
    }
}
