//! Linear algebra for a bordered block-diagonal symmetric matrix (model
//! vignette §13.2): the Hessian of one species'
//! objective is block-diagonal over its contexts (all the treatments' curves
//! of one context in a block), bordered by the parameters that every curve
//! touches (dispersions and the animals' random effects).
//!
//! With H = [A C; Cᵀ B], A = diag(A_1, …, A_K), the border is reduced to the
//! Schur complement S = B − Σ_k C_kᵀ A_k⁻¹ C_k, so factorising costs
//! Σ_k n_k³ + m³ instead of (Σ_k n_k + m)³.

/// In-place Cholesky factorisation (lower triangle, full n×n storage) of a
/// symmetric matrix; `None` unless it is positive definite.
fn cholesky(matrix: &mut [f64], n: usize) -> Option<()> {
    for j in 0..n {
        let mut diagonal = matrix[j * n + j];
        for k in 0..j {
            diagonal -= matrix[j * n + k] * matrix[j * n + k];
        }
        // A NaN pivot fails too.
        if diagonal.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) || !diagonal.is_finite()
        {
            return None;
        }
        let pivot = diagonal.sqrt();
        matrix[j * n + j] = pivot;
        for i in j + 1..n {
            let mut value = matrix[i * n + j];
            for k in 0..j {
                value -= matrix[i * n + k] * matrix[j * n + k];
            }
            matrix[i * n + j] = value / pivot;
        }
        for i in 0..j {
            matrix[i * n + j] = 0.0;
        }
    }
    Some(())
}

/// Solves L Lᵀ x = b in place for a factor from [`cholesky`].
fn cholesky_solve(factor: &[f64], n: usize, rhs: &mut [f64]) {
    for i in 0..n {
        let mut value = rhs[i];
        for k in 0..i {
            value -= factor[i * n + k] * rhs[k];
        }
        rhs[i] = value / factor[i * n + i];
    }
    for i in (0..n).rev() {
        let mut value = rhs[i];
        for k in i + 1..n {
            value -= factor[k * n + i] * rhs[k];
        }
        rhs[i] = value / factor[i * n + i];
    }
}

fn cholesky_log_det(factor: &[f64], n: usize) -> f64 {
    (0..n).map(|i| 2.0 * factor[i * n + i].ln()).sum()
}

/// The full inverse of L Lᵀ (n×n).
fn cholesky_inverse(factor: &[f64], n: usize) -> Vec<f64> {
    let mut inverse = vec![0.0; n * n];
    let mut column = vec![0.0; n];
    for j in 0..n {
        column.fill(0.0);
        column[j] = 1.0;
        cholesky_solve(factor, n, &mut column);
        for i in 0..n {
            inverse[i * n + j] = column[i];
        }
    }
    inverse
}

/// A symmetric matrix with K dense diagonal blocks and a dense border of
/// size m. Unknowns are ordered block 1, …, block K, border.
#[derive(Clone, Debug)]
pub(crate) struct BorderedMatrix {
    sizes: Vec<usize>,
    offsets: Vec<usize>,
    border: usize,
    /// A_k, full storage.
    pub blocks: Vec<Vec<f64>>,
    /// C_k, n_k × m row-major.
    pub couplings: Vec<Vec<f64>>,
    /// B, full storage.
    pub border_block: Vec<f64>,
}

impl BorderedMatrix {
    pub fn new(sizes: Vec<usize>, border: usize) -> Self {
        let mut offsets = Vec::with_capacity(sizes.len());
        let mut next = 0;
        for &n in &sizes {
            offsets.push(next);
            next += n;
        }
        BorderedMatrix {
            blocks: sizes.iter().map(|&n| vec![0.0; n * n]).collect(),
            couplings: sizes.iter().map(|&n| vec![0.0; n * border]).collect(),
            border_block: vec![0.0; border * border],
            sizes,
            offsets,
            border,
        }
    }

    pub fn dimension(&self) -> usize {
        self.offsets
            .last()
            .map_or(0, |&o| o + self.sizes[self.sizes.len() - 1])
            + self.border
    }

    pub fn block_count(&self) -> usize {
        self.sizes.len()
    }

    pub fn block_size(&self, block: usize) -> usize {
        self.sizes[block]
    }

    pub fn block_offset(&self, block: usize) -> usize {
        self.offsets[block]
    }

    pub fn border_size(&self) -> usize {
        self.border
    }

    /// Index of the first border unknown.
    pub fn border_offset(&self) -> usize {
        self.dimension() - self.border
    }

    pub fn clear(&mut self) {
        self.blocks.iter_mut().for_each(|b| b.fill(0.0));
        self.couplings.iter_mut().for_each(|c| c.fill(0.0));
        self.border_block.fill(0.0);
    }

    /// Diagonal entry of unknown `index`.
    pub fn diagonal(&self, index: usize) -> f64 {
        let border_offset = self.border_offset();
        if index >= border_offset {
            let i = index - border_offset;
            return self.border_block[i * self.border + i];
        }
        let block = self.block_of(index);
        let i = index - self.offsets[block];
        self.blocks[block][i * self.sizes[block] + i]
    }

    fn block_of(&self, index: usize) -> usize {
        match self.offsets.binary_search(&index) {
            Ok(mut block) => {
                // Skip empty blocks that share the offset.
                while self.sizes[block] == 0 {
                    block += 1;
                }
                block
            }
            Err(block) => block - 1,
        }
    }

    /// H·x.
    pub fn multiply(&self, x: &[f64]) -> Vec<f64> {
        let m = self.border;
        let border_offset = self.border_offset();
        let xb = &x[border_offset..];
        let mut out = vec![0.0; x.len()];
        for (k, (&n, &offset)) in self.sizes.iter().zip(&self.offsets).enumerate() {
            let (a, c) = (&self.blocks[k], &self.couplings[k]);
            for i in 0..n {
                let mut value = 0.0;
                for j in 0..n {
                    value += a[i * n + j] * x[offset + j];
                }
                for j in 0..m {
                    value += c[i * m + j] * xb[j];
                }
                out[offset + i] = value;
                for j in 0..m {
                    out[border_offset + j] += c[i * m + j] * x[offset + i];
                }
            }
        }
        for i in 0..m {
            for j in 0..m {
                out[border_offset + i] += self.border_block[i * m + j] * xb[j];
            }
        }
        out
    }

    /// Factorises H + diag(`shift`); `None` unless that is positive definite.
    pub fn factor(&self, shift: &[f64]) -> Option<BorderedFactor> {
        let m = self.border;
        let border_offset = self.border_offset();
        let mut schur = self.border_block.clone();
        for i in 0..m {
            schur[i * m + i] += shift[border_offset + i];
        }
        let mut block_factors = Vec::with_capacity(self.sizes.len());
        let mut solved_couplings = Vec::with_capacity(self.sizes.len());
        for (k, (&n, &offset)) in self.sizes.iter().zip(&self.offsets).enumerate() {
            let mut factor = self.blocks[k].clone();
            for i in 0..n {
                factor[i * n + i] += shift[offset + i];
            }
            cholesky(&mut factor, n)?;
            // M_k = A_k⁻¹ C_k, column by column; S −= C_kᵀ M_k.
            let c = &self.couplings[k];
            let mut solved = vec![0.0; n * m];
            let mut column = vec![0.0; n];
            for j in 0..m {
                for i in 0..n {
                    column[i] = c[i * m + j];
                }
                cholesky_solve(&factor, n, &mut column);
                for i in 0..n {
                    solved[i * m + j] = column[i];
                }
            }
            for a in 0..m {
                for b in 0..m {
                    let mut value = 0.0;
                    for i in 0..n {
                        value += c[i * m + a] * solved[i * m + b];
                    }
                    schur[a * m + b] -= value;
                }
            }
            block_factors.push(factor);
            solved_couplings.push(solved);
        }
        // Symmetrise against rounding before factorising.
        for a in 0..m {
            for b in a + 1..m {
                let mean = 0.5 * (schur[a * m + b] + schur[b * m + a]);
                schur[a * m + b] = mean;
                schur[b * m + a] = mean;
            }
        }
        cholesky(&mut schur, m)?;
        Some(BorderedFactor {
            sizes: self.sizes.clone(),
            offsets: self.offsets.clone(),
            border: m,
            block_factors,
            solved_couplings,
            couplings: self.couplings.clone(),
            schur,
        })
    }
}

/// A factorised [`BorderedMatrix`].
#[derive(Clone, Debug)]
pub(crate) struct BorderedFactor {
    sizes: Vec<usize>,
    offsets: Vec<usize>,
    border: usize,
    block_factors: Vec<Vec<f64>>,
    /// A_k⁻¹ C_k.
    solved_couplings: Vec<Vec<f64>>,
    couplings: Vec<Vec<f64>>,
    /// Cholesky factor of the Schur complement.
    schur: Vec<f64>,
}

impl BorderedFactor {
    fn border_offset(&self) -> usize {
        self.offsets
            .last()
            .map_or(0, |&o| o + self.sizes[self.sizes.len() - 1])
    }

    /// x with H x = rhs.
    pub fn solve(&self, rhs: &[f64]) -> Vec<f64> {
        let m = self.border;
        let border_offset = self.border_offset();
        let mut x = rhs.to_vec();
        let mut reduced = rhs[border_offset..].to_vec();
        for (k, (&n, &offset)) in self.sizes.iter().zip(&self.offsets).enumerate() {
            let part = &mut x[offset..offset + n];
            cholesky_solve(&self.block_factors[k], n, part);
            let c = &self.couplings[k];
            for i in 0..n {
                for j in 0..m {
                    reduced[j] -= c[i * m + j] * part[i];
                }
            }
        }
        cholesky_solve(&self.schur, m, &mut reduced);
        for (k, (&n, &offset)) in self.sizes.iter().zip(&self.offsets).enumerate() {
            let solved = &self.solved_couplings[k];
            for i in 0..n {
                let mut value = 0.0;
                for j in 0..m {
                    value += solved[i * m + j] * reduced[j];
                }
                x[offset + i] -= value;
            }
        }
        x[border_offset..].copy_from_slice(&reduced);
        x
    }

    /// ln det H.
    pub fn log_det(&self) -> f64 {
        self.block_factors
            .iter()
            .zip(&self.sizes)
            .map(|(f, &n)| cholesky_log_det(f, n))
            .sum::<f64>()
            + cholesky_log_det(&self.schur, self.border)
    }

    /// The diagonal of H⁻¹.
    pub fn inverse_diagonal(&self) -> Vec<f64> {
        let m = self.border;
        let border_offset = self.border_offset();
        let schur_inverse = cholesky_inverse(&self.schur, m);
        let mut diagonal = vec![0.0; border_offset + m];
        for (k, (&n, &offset)) in self.sizes.iter().zip(&self.offsets).enumerate() {
            let block_inverse = cholesky_inverse(&self.block_factors[k], n);
            let solved = &self.solved_couplings[k];
            for i in 0..n {
                let row = &solved[i * m..(i + 1) * m];
                let mut correction = 0.0;
                for a in 0..m {
                    let mut value = 0.0;
                    for b in 0..m {
                        value += schur_inverse[a * m + b] * row[b];
                    }
                    correction += row[a] * value;
                }
                diagonal[offset + i] = block_inverse[i * n + i] + correction;
            }
        }
        for i in 0..m {
            diagonal[border_offset + i] = schur_inverse[i * m + i];
        }
        diagonal
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::SplitMix;

    /// A random positive-definite bordered matrix and its dense copy.
    fn example(sizes: &[usize], border: usize, seed: u64) -> (BorderedMatrix, Vec<f64>) {
        let mut rng = SplitMix(seed);
        let mut matrix = BorderedMatrix::new(sizes.to_vec(), border);
        let n = matrix.dimension();
        // Dense G with the bordered sparsity; H = G Gᵀ-like via diagonal dominance.
        let mut dense = vec![0.0; n * n];
        let border_offset = matrix.border_offset();
        for k in 0..sizes.len() {
            let (offset, size) = (matrix.block_offset(k), sizes[k]);
            for i in 0..size {
                for j in 0..=i {
                    let v = rng.uniform() - 0.5;
                    dense[(offset + i) * n + offset + j] = v;
                    dense[(offset + j) * n + offset + i] = v;
                }
                for j in 0..border {
                    let v = rng.uniform() - 0.5;
                    dense[(offset + i) * n + border_offset + j] = v;
                    dense[(border_offset + j) * n + offset + i] = v;
                }
            }
        }
        for i in 0..border {
            for j in 0..=i {
                let v = rng.uniform() - 0.5;
                dense[(border_offset + i) * n + border_offset + j] = v;
                dense[(border_offset + j) * n + border_offset + i] = v;
            }
        }
        for i in 0..n {
            dense[i * n + i] += n as f64;
        }
        for k in 0..sizes.len() {
            let (offset, size) = (matrix.block_offset(k), sizes[k]);
            for i in 0..size {
                for j in 0..size {
                    matrix.blocks[k][i * size + j] = dense[(offset + i) * n + offset + j];
                }
                for j in 0..border {
                    matrix.couplings[k][i * border + j] =
                        dense[(offset + i) * n + border_offset + j];
                }
            }
        }
        for i in 0..border {
            for j in 0..border {
                matrix.border_block[i * border + j] =
                    dense[(border_offset + i) * n + border_offset + j];
            }
        }
        (matrix, dense)
    }

    #[test]
    fn solve_log_det_and_inverse_diagonal_match_a_dense_cholesky() {
        for (sizes, border, seed) in [
            (vec![3, 4, 2], 5, 1),
            (vec![1], 0, 2),
            (vec![], 3, 3),
            (vec![4, 0, 4], 2, 4),
        ] {
            let (matrix, dense) = example(&sizes, border, seed);
            let n = matrix.dimension();
            let factor = matrix.factor(&vec![0.0; n]).expect("positive definite");
            let mut dense_factor = dense.clone();
            cholesky(&mut dense_factor, n).unwrap();
            let rhs: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin()).collect();
            let x = factor.solve(&rhs);
            let back = matrix.multiply(&x);
            for (a, b) in back.iter().zip(&rhs) {
                assert!((a - b).abs() < 1e-10);
            }
            assert!((factor.log_det() - cholesky_log_det(&dense_factor, n)).abs() < 1e-10);
            let inverse = cholesky_inverse(&dense_factor, n);
            for (i, value) in factor.inverse_diagonal().iter().enumerate() {
                assert!((value - inverse[i * n + i]).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn an_indefinite_matrix_does_not_factor_until_shifted() {
        let (mut matrix, _) = example(&[2, 2], 1, 5);
        matrix.blocks[1][0] = -50.0;
        let n = matrix.dimension();
        assert!(matrix.factor(&vec![0.0; n]).is_none());
        assert!(matrix.factor(&vec![100.0; n]).is_some());
    }
}
