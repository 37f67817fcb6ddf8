//! Assembles a [`Model`] from coded token columns: the one place where token
//! levels become treatments, so callers never reimplement the treatment rule.

use super::design::{Design, Structure};
use super::objective::{Model, Settings};
use super::table::{SummedTable, TableShape, TokenColumns};

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
    let shape = TableShape {
        bins,
        contexts: design.contexts().len(),
        species: design.species().len(),
        ran_levels: design.ran_levels().len(),
        treatments: design.treatment_count(),
    };
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
    use crate::model::design::Factor;

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
