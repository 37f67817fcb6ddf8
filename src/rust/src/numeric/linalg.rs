//! Small dense linear algebra shared by both likelihoods' starting values.

/// LU factorisation with full (row and column) pivoting, PAQ = LU, of a
/// small dense square matrix. Full pivoting keeps the solve stable for any
/// non-singular W and detects singular ones reliably.
#[derive(Clone, Debug)]
pub(crate) struct FullPivotLu {
    size: usize,
    /// L (unit diagonal, below) and U (on and above), row-major.
    factors: Vec<f64>,
    /// Original row at position k.
    row_order: Vec<usize>,
    /// Original column at position k.
    column_order: Vec<usize>,
}

impl FullPivotLu {
    /// Factors a row-major n×n matrix; errors when it is singular (a pivot
    /// below n·ε·max|a|) or not finite.
    pub(crate) fn new(matrix: &[f64], size: usize) -> Result<Self, String> {
        if size == 0 || matrix.len() != size * size {
            return Err(format!(
                "expected a non-empty {size}×{size} matrix, got {} entries",
                matrix.len()
            ));
        }
        if !matrix.iter().all(|v| v.is_finite()) {
            return Err("the matrix has non-finite entries".into());
        }
        let mut a = matrix.to_vec();
        let mut row_order: Vec<usize> = (0..size).collect();
        let mut column_order: Vec<usize> = (0..size).collect();
        let largest = a.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let tolerance = size as f64 * f64::EPSILON * largest;
        for k in 0..size {
            let (mut pivot_row, mut pivot_column, mut pivot) = (k, k, 0.0f64);
            for i in k..size {
                for j in k..size {
                    if a[i * size + j].abs() > pivot {
                        (pivot_row, pivot_column, pivot) = (i, j, a[i * size + j].abs());
                    }
                }
            }
            if pivot <= tolerance {
                return Err(format!("the matrix is singular (rank {k} of {size})"));
            }
            if pivot_row != k {
                for j in 0..size {
                    a.swap(k * size + j, pivot_row * size + j);
                }
                row_order.swap(k, pivot_row);
            }
            if pivot_column != k {
                for i in 0..size {
                    a.swap(i * size + k, i * size + pivot_column);
                }
                column_order.swap(k, pivot_column);
            }
            let diagonal = a[k * size + k];
            for i in k + 1..size {
                let multiplier = a[i * size + k] / diagonal;
                a[i * size + k] = multiplier;
                for j in k + 1..size {
                    a[i * size + j] -= multiplier * a[k * size + j];
                }
            }
        }
        Ok(Self {
            size,
            factors: a,
            row_order,
            column_order,
        })
    }

    /// Solves A·x = b.
    pub(crate) fn solve(&self, rhs: &[f64]) -> Result<Vec<f64>, String> {
        let n = self.size;
        if rhs.len() != n {
            return Err(format!("expected {n} right-hand values, got {}", rhs.len()));
        }
        // L·U·w = P·b, then x = Q·w.
        let mut w: Vec<f64> = self.row_order.iter().map(|&r| rhs[r]).collect();
        for i in 0..n {
            let below: f64 = (0..i).map(|j| self.factors[i * n + j] * w[j]).sum();
            w[i] -= below;
        }
        for i in (0..n).rev() {
            let above: f64 = (i + 1..n).map(|j| self.factors[i * n + j] * w[j]).sum();
            w[i] = (w[i] - above) / self.factors[i * n + i];
        }
        let mut x = vec![0.0; n];
        for (k, &column) in self.column_order.iter().enumerate() {
            x[column] = w[k];
        }
        Ok(x)
    }
}
