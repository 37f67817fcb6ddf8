//! Binning per-cell counts into the binned table of `wisp_bin()`: one row
//! per (group, bin) slot that holds a cell, and per gene the summed count
//! there, with the slot's exposure (its cells, or their summed sizes).
//!
//! The count model needs only these sums (model vignette §4), so a panel of
//! 10⁶ cells × 500 genes becomes slots × genes numbers; nothing of size
//! cells × genes is allocated. The counts are read where they lie: the
//! slots of a sparse column-compressed matrix (`@i`, `@p`, `@x` of a
//! `dgCMatrix`) or a dense column-major matrix, cells in its columns
//! (genes × cells, as Seurat and SingleCellExperiment keep them) or in its
//! rows.

/// The values of a count matrix as R holds them.
#[derive(Clone, Copy, Debug)]
pub(crate) enum MatrixValues<'a> {
    Real(&'a [f64]),
    Integer(&'a [i32]),
}

impl MatrixValues<'_> {
    fn len(&self) -> usize {
        match self {
            MatrixValues::Real(x) => x.len(),
            MatrixValues::Integer(x) => x.len(),
        }
    }

    /// The value at `k`, checked to be a count (`None`: it is not).
    fn count(&self, k: usize) -> Option<f64> {
        let value = match self {
            MatrixValues::Real(x) => x[k],
            MatrixValues::Integer(x) if x[k] == i32::MIN => return None, // R's NA
            MatrixValues::Integer(x) => x[k] as f64,
        };
        (value.is_finite() && value >= 0.0 && value == value.trunc() && value <= MAX_EXACT)
            .then_some(value)
    }

    fn describe(&self, k: usize) -> String {
        match self {
            MatrixValues::Real(x) if x[k].is_nan() => "NA".to_string(),
            MatrixValues::Real(x) => format!("{}", x[k]),
            MatrixValues::Integer(x) if x[k] == i32::MIN => "NA".to_string(),
            MatrixValues::Integer(x) => format!("{}", x[k]),
        }
    }
}

/// Sums of whole numbers stay exact below 2⁵³.
const MAX_EXACT: f64 = 9_007_199_254_740_992.0;

/// How the count matrix is stored.
#[derive(Clone, Copy, Debug)]
pub(crate) enum MatrixLayout<'a> {
    /// Column-compressed: the non-zeros of column j are `x[p[j]..p[j+1]]`,
    /// in rows `i[p[j]..p[j+1]]`.
    Sparse { i: &'a [i32], p: &'a [i32] },
    /// Column-major, every entry stored.
    Dense,
}

/// A count matrix: `rows` × `columns`, cells in the columns or the rows.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CountMatrix<'a> {
    pub layout: MatrixLayout<'a>,
    pub values: MatrixValues<'a>,
    pub rows: usize,
    pub columns: usize,
    pub cells_in_columns: bool,
}

impl CountMatrix<'_> {
    fn cell_count(&self) -> usize {
        if self.cells_in_columns {
            self.columns
        } else {
            self.rows
        }
    }

    fn gene_count(&self) -> usize {
        if self.cells_in_columns {
            self.rows
        } else {
            self.columns
        }
    }

    /// Calls `visit(cell, gene, k)` for every stored entry k (sparse: the
    /// non-zeros; dense: all), after checking the sparse structure.
    fn for_each_entry(
        &self,
        mut visit: impl FnMut(usize, usize, usize) -> Result<(), String>,
    ) -> Result<(), String> {
        let (rows, columns) = (self.rows, self.columns);
        let place = |row: usize, column: usize| {
            if self.cells_in_columns {
                (column, row)
            } else {
                (row, column)
            }
        };
        match self.layout {
            MatrixLayout::Dense => {
                if rows.checked_mul(columns) != Some(self.values.len()) {
                    return Err(format!(
                        "the dense matrix has {} values for {rows} x {columns}",
                        self.values.len()
                    ));
                }
                for column in 0..columns {
                    for row in 0..rows {
                        let (cell, gene) = place(row, column);
                        visit(cell, gene, column * rows + row)?;
                    }
                }
            }
            MatrixLayout::Sparse { i, p } => {
                let stored = self.values.len();
                let well_formed = p.len() == columns + 1
                    && p[0] == 0
                    && p.windows(2).all(|w| w[0] <= w[1])
                    && p[columns] as usize == stored
                    && i.len() == stored;
                if !well_formed {
                    return Err("the sparse matrix's column pointers (@p) and row indices \
                                (@i) do not describe its values (@x)"
                        .into());
                }
                for column in 0..columns {
                    let start = p[column] as usize;
                    let end = p[column + 1] as usize;
                    for (k, &row) in (start..end).zip(&i[start..end]) {
                        if row < 0 || row as usize >= rows {
                            return Err(format!(
                                "the sparse matrix has row index {row} outside 0..{rows}"
                            ));
                        }
                        let (cell, gene) = place(row as usize, column);
                        visit(cell, gene, k)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Where each cell goes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CellPlacement<'a> {
    /// Per cell of the metadata: its slot (group · bins + bin − 1), or −1
    /// for a cell left out (an NA position).
    pub slot: &'a [i32],
    /// Per cell of the metadata: its size (summed into the exposure), or
    /// empty for 1 per cell.
    pub size: &'a [f64],
    /// Per cell of the matrix: its row in the metadata.
    pub metadata_row: &'a [i32],
    /// Number of slots (groups × bins).
    pub slots: usize,
}

/// The binned counts: the slots that hold a cell, in increasing order, and
/// per slot its cells, its exposure and (slot-major) each gene's sum.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct BinnedCounts {
    pub slots: Vec<usize>,
    pub cells: Vec<f64>,
    pub exposure: Vec<f64>,
    /// `counts[row * genes + gene]` for row r of `slots`.
    pub counts: Vec<f64>,
    pub genes: usize,
}

/// A problem with a value of the matrix, with its place (1-based).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct BadCount {
    pub cell: usize,
    pub gene: usize,
    pub value: String,
}

/// Why binning failed.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum BinningError {
    /// A value that is not a non-negative whole number below 2⁵³.
    BadCount(BadCount),
    /// The inputs do not fit together (a bug of the caller, or damage).
    Invalid(String),
    /// The sums would need more memory (bytes) than the process can get.
    Memory(u64),
}

impl From<String> for BinningError {
    fn from(message: String) -> Self {
        BinningError::Invalid(message)
    }
}

/// Sums the counts of every slot. Every cell of the metadata with a slot
/// counts in its slot's exposure, whether or not the matrix has counts for
/// it (a cell of the metadata absent from the matrix has zero counts).
pub(crate) fn bin_counts(
    matrix: CountMatrix<'_>,
    placement: CellPlacement<'_>,
) -> Result<BinnedCounts, BinningError> {
    let cells = placement.slot.len();
    if !placement.size.is_empty() && placement.size.len() != cells {
        return Err(format!("{} cell sizes for {cells} cells", placement.size.len()).into());
    }
    if placement.metadata_row.len() != matrix.cell_count() {
        return Err(format!(
            "{} metadata rows for the matrix's {} cells",
            placement.metadata_row.len(),
            matrix.cell_count()
        )
        .into());
    }
    let genes = matrix.gene_count();
    let mut cell_count = vec![0.0f64; placement.slots];
    let mut exposure = vec![0.0f64; placement.slots];
    for (cell, &slot) in placement.slot.iter().enumerate() {
        if slot < 0 {
            continue;
        }
        let slot = slot as usize;
        if slot >= placement.slots {
            return Err(format!("cell {} has slot {slot} of {}", cell + 1, placement.slots).into());
        }
        let size = placement.size.get(cell).copied().unwrap_or(1.0);
        if !(size.is_finite() && size > 0.0) {
            return Err(format!("cell {} has size {size}", cell + 1).into());
        }
        cell_count[slot] += 1.0;
        exposure[slot] += size;
    }
    // Only occupied slots get rows: a compact index, so the sums take
    // occupied slots × genes numbers however many slots are possible.
    let occupied: Vec<usize> = (0..placement.slots)
        .filter(|&s| cell_count[s] > 0.0)
        .collect();
    let mut row_of_slot = vec![usize::MAX; placement.slots];
    for (row, &slot) in occupied.iter().enumerate() {
        row_of_slot[slot] = row;
    }
    let mut row_of_matrix_cell = Vec::with_capacity(placement.metadata_row.len());
    for (cell, &meta) in placement.metadata_row.iter().enumerate() {
        if meta < 0 || meta as usize >= cells {
            return Err(format!(
                "matrix cell {} has metadata row {meta} of {cells}",
                cell + 1
            )
            .into());
        }
        let slot = placement.slot[meta as usize];
        row_of_matrix_cell.push(if slot < 0 {
            usize::MAX
        } else {
            row_of_slot[slot as usize]
        });
    }
    let entries = occupied
        .len()
        .checked_mul(genes)
        .ok_or_else(|| "the binned table would have too many rows".to_string())?;
    let mut counts = Vec::new();
    counts
        .try_reserve_exact(entries)
        .map_err(|_| BinningError::Memory(entries as u64 * 8))?;
    counts.resize(entries, 0.0);
    let values = matrix.values;
    let mut bad = None;
    matrix
        .for_each_entry(|cell, gene, k| {
            let row = row_of_matrix_cell[cell];
            if row == usize::MAX {
                return Ok(()); // a cell left out (NA position)
            }
            match values.count(k) {
                Some(value) => counts[row * genes + gene] += value,
                None => {
                    bad = Some(BadCount {
                        cell: cell + 1,
                        gene: gene + 1,
                        value: values.describe(k),
                    });
                    return Err(String::new());
                }
            }
            Ok(())
        })
        .map_err(|message| match bad.take() {
            Some(bad) => BinningError::BadCount(bad),
            None => BinningError::Invalid(message),
        })?;
    Ok(BinnedCounts {
        cells: occupied.iter().map(|&s| cell_count[s]).collect(),
        exposure: occupied.iter().map(|&s| exposure[s]).collect(),
        slots: occupied,
        counts,
        genes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Four cells × three genes, by hand:
    ///
    /// ```text
    ///          g1 g2 g3   slot
    /// cell 1    1  0  2    0
    /// cell 2    0  0  3    0
    /// cell 3    4  0  0    2
    /// cell 4    0  5  0   -1 (left out)
    /// ```
    /// and a fifth metadata cell (slot 2) that the matrix lacks.
    const DENSE_CELLS_IN_ROWS: [f64; 12] = [1., 0., 4., 0., 0., 0., 0., 5., 2., 3., 0., 0.];
    const SLOT: [i32; 5] = [0, 0, 2, -1, 2];
    const META: [i32; 4] = [0, 1, 2, 3];

    fn expected() -> BinnedCounts {
        BinnedCounts {
            slots: vec![0, 2],
            cells: vec![2.0, 2.0],
            exposure: vec![2.0, 2.0],
            counts: vec![1.0, 0.0, 5.0, 4.0, 0.0, 0.0],
            genes: 3,
        }
    }

    /// The dense 4 cells x 3 genes matrix, cells in its rows.
    fn dense(values: &[f64]) -> CountMatrix<'_> {
        CountMatrix {
            layout: MatrixLayout::Dense,
            values: MatrixValues::Real(values),
            rows: 4,
            columns: 3,
            cells_in_columns: false,
        }
    }

    fn placement<'a>(size: &'a [f64]) -> CellPlacement<'a> {
        CellPlacement {
            slot: &SLOT,
            size,
            metadata_row: &META,
            slots: 3,
        }
    }

    #[test]
    fn dense_cells_in_rows_sums_by_hand() {
        let matrix = dense(&DENSE_CELLS_IN_ROWS);
        assert_eq!(bin_counts(matrix, placement(&[])).unwrap(), expected());
    }

    #[test]
    fn sparse_genes_by_cells_gives_the_same_sums() {
        // The transpose (3 genes × 4 cells), column-compressed by cell.
        let p = [0, 2, 3, 4, 5];
        let i = [0, 2, 2, 0, 1];
        let x = [1.0, 2.0, 3.0, 4.0, 5.0];
        let matrix = CountMatrix {
            layout: MatrixLayout::Sparse { i: &i, p: &p },
            values: MatrixValues::Real(&x),
            rows: 3,
            columns: 4,
            cells_in_columns: true,
        };
        assert_eq!(bin_counts(matrix, placement(&[])).unwrap(), expected());
        let xi = [1, 2, 3, 4, 5];
        let integer = CountMatrix {
            values: MatrixValues::Integer(&xi),
            ..matrix
        };
        assert_eq!(bin_counts(integer, placement(&[])).unwrap(), expected());
    }

    #[test]
    fn sizes_sum_into_the_exposure() {
        let matrix = dense(&DENSE_CELLS_IN_ROWS);
        let sizes = [0.5, 1.5, 2.0, 9.0, 0.25];
        let binned = bin_counts(matrix, placement(&sizes)).unwrap();
        assert_eq!(binned.exposure, vec![2.0, 2.25]);
        assert_eq!(binned.cells, vec![2.0, 2.0]);
        assert!(bin_counts(matrix, placement(&[1.0, 0.0, 1.0, 1.0, 1.0])).is_err());
    }

    #[test]
    fn a_bad_count_is_reported_with_its_place() {
        let mut values = DENSE_CELLS_IN_ROWS;
        values[5] = 1.5; // cell 2, gene 2
        let matrix = dense(&values);
        let Err(BinningError::BadCount(bad)) = bin_counts(matrix, placement(&[])) else {
            panic!("a fractional count must be refused");
        };
        assert_eq!((bad.cell, bad.gene, bad.value.as_str()), (2, 2, "1.5"));
        let na = [1, i32::MIN, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let matrix = CountMatrix {
            values: MatrixValues::Integer(&na),
            ..matrix
        };
        let Err(BinningError::BadCount(bad)) = bin_counts(matrix, placement(&[])) else {
            panic!("an NA count must be refused");
        };
        assert_eq!((bad.cell, bad.gene, bad.value.as_str()), (2, 1, "NA"));
    }

    #[test]
    fn damaged_structures_are_errors_not_panics() {
        let x = [1.0, 2.0];
        for (i, p) in [
            (&[0, 5][..], &[0, 1, 2, 2, 2][..]), // row index out of range
            (&[0, 1][..], &[0, 2, 1, 2, 2][..]), // pointers decrease
            (&[0, 1][..], &[0, 1, 2][..]),       // too few pointers
        ] {
            let matrix = CountMatrix {
                layout: MatrixLayout::Sparse { i, p },
                values: MatrixValues::Real(&x),
                rows: 3,
                columns: 4,
                cells_in_columns: true,
            };
            assert!(matches!(
                bin_counts(matrix, placement(&[])),
                Err(BinningError::Invalid(_))
            ));
        }
        let bad_meta = CellPlacement {
            metadata_row: &[0, 1, 2, 7],
            ..placement(&[])
        };
        let matrix = dense(&DENSE_CELLS_IN_ROWS);
        assert!(bin_counts(matrix, bad_meta).is_err());
    }
}
