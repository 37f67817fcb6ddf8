//! `wisp_bin()`'s summing step: the count matrix read where R holds it
//! (the slots of a `dgCMatrix`, or a dense matrix), never copied.

use super::RResult;
use crate::data::binning::{
    bin_counts, BinningError, CellPlacement, CountMatrix, MatrixLayout, MatrixValues,
};
use crate::error::Error;
use extendr_api::prelude::*;

/// Sums a count matrix into the slots (group · bins + bin − 1) of its
/// cells. `values` is the matrix's values (dense, column-major) or a
/// `dgCMatrix`'s `@x`, with its `@i` and `@p` as `row_index` and
/// `column_pointers` (both `NULL` for a dense matrix); `slot` and `size`
/// are per metadata cell (size empty: 1 per cell), `metadata_row` per
/// matrix cell (0-based). Returns `slots` (0-based), `cells`, `exposure`,
/// `counts` (slot-major, genes within), or `bad` = (cell, gene) (1-based,
/// of the matrix) and `value` for a value that is not a count.
/// @keywords internal
/// @noRd
#[extendr]
#[allow(clippy::too_many_arguments)]
fn bin_counts_rust(
    values: Robj,
    row_index: Robj,
    column_pointers: Robj,
    rows: i32,
    columns: i32,
    cells_in_columns: bool,
    slot: Robj,
    size: Robj,
    metadata_row: Robj,
    slots: f64,
) -> RResult<List> {
    let integers = |robj: &Robj, what: &str| -> RResult<&[i32]> {
        robj.as_integer_slice()
            .ok_or_else(|| Error::input(format!("{what} must be an integer vector")))
    };
    let values = if let Some(x) = values.as_real_slice() {
        MatrixValues::Real(x)
    } else if let Some(x) = values.as_integer_slice() {
        MatrixValues::Integer(x)
    } else {
        return Err(Error::input("the count matrix must hold numbers"));
    };
    let layout = if row_index.is_null() {
        MatrixLayout::Dense
    } else {
        MatrixLayout::Sparse {
            i: integers(&row_index, "the row indices")?,
            p: integers(&column_pointers, "the column pointers")?,
        }
    };
    if rows < 0 || columns < 0 || !(slots >= 0.0 && slots < 2f64.powi(52)) {
        return Err(Error::input(
            "the matrix and slot counts must be non-negative",
        ));
    }
    let size: &[f64] = if size.is_null() {
        &[]
    } else {
        size.as_real_slice()
            .ok_or_else(|| Error::input("the cell sizes must be doubles"))?
    };
    let matrix = CountMatrix {
        layout,
        values,
        rows: rows as usize,
        columns: columns as usize,
        cells_in_columns,
    };
    let placement = CellPlacement {
        slot: integers(&slot, "the cells' slots")?,
        size,
        metadata_row: integers(&metadata_row, "the matrix cells' metadata rows")?,
        slots: slots as usize,
    };
    match bin_counts(matrix, placement) {
        Ok(binned) => Ok(list!(
            slots = binned.slots.iter().map(|&s| s as f64).collect::<Vec<f64>>(),
            cells = binned.cells,
            exposure = binned.exposure,
            counts = binned.counts,
            genes = binned.genes as f64
        )),
        Err(BinningError::BadCount(bad)) => Ok(list!(
            bad = vec![bad.cell as f64, bad.gene as f64],
            value = bad.value
        )),
        Err(BinningError::Invalid(message)) => Err(Error::input(message)),
        Err(BinningError::Memory(bytes)) => Err(Error::system(format!(
            "the binned table's sums need {:.0} MB of memory at once, more than this process \
             can get; keep fewer metadata columns (`keep`: each makes more groups), use fewer \
             bins, or bin the genes in parts (columns of the matrix) and rbind() the tables",
            bytes as f64 / 1e6
        ))),
    }
}

extendr_module! {
    mod binning;
    fn bin_counts_rust;
}
