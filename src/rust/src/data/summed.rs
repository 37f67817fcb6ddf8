//! The summed-count table (model vignette §4): one row per (ran block, context,
//! species, treatment, bin), built from token columns in O(tokens + rows).

use crate::design::{Design, RanBlocks};

/// Sizes of the table's nesting levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TableShape {
    /// B: bins run 1..=B.
    pub(crate) bins: usize,
    pub(crate) contexts: usize,
    pub(crate) species: usize,
    /// Real random-effect levels (the "none" pseudo-level is not counted).
    pub(crate) ran_levels: usize,
    pub(crate) treatments: usize,
}

impl TableShape {
    /// The shape of a table of `design`'s data over `bins` bins (either
    /// likelihood's).
    pub(crate) fn of_design(design: &Design, bins: usize) -> Self {
        TableShape {
            bins,
            contexts: design.contexts().len(),
            species: design.species().len(),
            ran_levels: design.ran_levels().len(),
            treatments: design.treatment_count(),
        }
    }
}

/// Integer-coded token columns, one entry per token. Indices are 0-based;
/// `ran` indexes the real levels.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TokenColumns<'a> {
    pub(crate) count: &'a [f64],
    pub(crate) bin: &'a [i32],
    pub(crate) context: &'a [usize],
    pub(crate) species: &'a [usize],
    pub(crate) ran: &'a [usize],
    pub(crate) treatment: &'a [usize],
}

/// Where a row sits: indices from 0, the bin from 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RowKey {
    /// Ran block (see [`RanBlocks`]).
    pub(crate) block: usize,
    pub(crate) context: usize,
    pub(crate) species: usize,
    pub(crate) treatment: usize,
    pub(crate) bin: usize,
}

/// Rows are ordered ran block (population "none" first when there are two or
/// more real levels), context, species, treatment, bin (innermost).
#[derive(Clone, Debug)]
pub(crate) struct SummedTable {
    shape: TableShape,
    ran_blocks: RanBlocks,
    round_population_counts: bool,
    /// NaN on unobserved (NA) rows.
    count: Vec<f64>,
    count_log: Vec<f64>,
    observed: Vec<bool>,
    /// Token pool of row r: `pool_tokens[pool_starts[r]..pool_starts[r + 1]]`.
    pool_starts: Vec<usize>,
    pool_tokens: Vec<usize>,
    /// The input count column, kept so the bootstrap can resample pools.
    token_counts: Vec<f64>,
    /// φ per (context, species), context-major.
    dispersion: Vec<f64>,
}

fn check_index(column: &str, position: usize, value: usize, limit: usize) -> Result<(), String> {
    if value >= limit {
        Err(format!(
            "token {position}: {column} index {value} is out of range (there are {limit})"
        ))
    } else {
        Ok(())
    }
}

impl SummedTable {
    /// Sums the tokens into cells. Tokens with a NaN count, or a bin outside
    /// 1..=B, are skipped; negative or infinite counts and out-of-range
    /// indices are errors. `round_population_counts` rounds the extrapolated
    /// "none" counts (`model.settings$round_none`, model vignette §4).
    pub(crate) fn new(
        shape: TableShape,
        tokens: TokenColumns<'_>,
        round_population_counts: bool,
    ) -> Result<Self, String> {
        let ran_blocks = RanBlocks::new(shape.ran_levels);
        let rows_per_block = Self::check_shape(shape)?;
        let token_count = tokens.count.len();
        let lengths = [
            ("bin", tokens.bin.len()),
            ("context", tokens.context.len()),
            ("species", tokens.species.len()),
            ("ran", tokens.ran.len()),
            ("treatment", tokens.treatment.len()),
        ];
        for (column, length) in lengths {
            if length != token_count {
                return Err(format!(
                    "token column {column} has {length} entries, count has {token_count}"
                ));
            }
        }
        let mut token_rows = vec![None; token_count];
        for (position, token_row) in token_rows.iter_mut().enumerate() {
            let count = tokens.count[position];
            if count.is_nan() {
                continue;
            }
            if count < 0.0 || count.is_infinite() {
                return Err(format!(
                    "token {position}: count {count} must be finite and non-negative"
                ));
            }
            check_index(
                "context",
                position,
                tokens.context[position],
                shape.contexts,
            )?;
            check_index("species", position, tokens.species[position], shape.species)?;
            check_index("ran", position, tokens.ran[position], shape.ran_levels)?;
            check_index(
                "treatment",
                position,
                tokens.treatment[position],
                shape.treatments,
            )?;
            let bin = tokens.bin[position];
            if bin < 1 || bin as usize > shape.bins {
                continue;
            }
            let block = ran_blocks.block_of_real(tokens.ran[position]);
            let cell = ((tokens.context[position] * shape.species + tokens.species[position])
                * shape.treatments
                + tokens.treatment[position])
                * shape.bins;
            *token_row = Some(block * rows_per_block + cell + (bin as usize - 1));
        }
        Self::from_token_rows(
            shape,
            round_population_counts,
            &token_rows,
            tokens.count.to_vec(),
        )
    }

    /// Rows of one ran block, after checking that every dimension is
    /// positive and the whole table's row count fits in memory arithmetic.
    fn check_shape(shape: TableShape) -> Result<usize, String> {
        if shape.bins == 0
            || shape.contexts == 0
            || shape.species == 0
            || shape.ran_levels == 0
            || shape.treatments == 0
        {
            return Err(format!(
                "every table dimension must be positive, got {shape:?}"
            ));
        }
        let blocks = RanBlocks::new(shape.ran_levels).count();
        let rows_per_block = [shape.contexts, shape.species, shape.treatments]
            .iter()
            .try_fold(shape.bins, |acc, &n| acc.checked_mul(n));
        rows_per_block
            .filter(|rows| {
                rows.checked_mul(blocks)
                    .is_some_and(|all| all < usize::MAX / 2)
            })
            .ok_or_else(|| "the summed table would have too many rows".to_string())
    }

    /// The table whose row `r` pools the tokens `t` with `token_rows[t] ==
    /// Some(r)`, from the count of every token (the input count column).
    ///
    /// This is how a saved table is rebuilt, so it checks every invariant
    /// the rest of the model relies on: a row for each pooled token, no
    /// token in a population ("none") row, and finite non-negative counts
    /// for the pooled tokens. Pools list their tokens in input order, as
    /// [`SummedTable::new`] makes them.
    pub(crate) fn from_token_rows(
        shape: TableShape,
        round_population_counts: bool,
        token_rows: &[Option<usize>],
        token_counts: Vec<f64>,
    ) -> Result<Self, String> {
        let rows_per_block = Self::check_shape(shape)?;
        let ran_blocks = RanBlocks::new(shape.ran_levels);
        let row_count = rows_per_block * ran_blocks.count();
        if token_rows.len() != token_counts.len() {
            return Err(format!(
                "{} token rows for {} token counts",
                token_rows.len(),
                token_counts.len()
            ));
        }
        let mut pool_starts = vec![0usize; row_count + 1];
        for (token, row) in token_rows.iter().enumerate() {
            let Some(row) = *row else { continue };
            if row >= row_count {
                return Err(format!(
                    "token {token} is in row {row}, but the table has {row_count} rows"
                ));
            }
            if ran_blocks.real_of_block(row / rows_per_block).is_none() {
                return Err(format!(
                    "token {token} is in population row {row}, which holds no tokens"
                ));
            }
            let count = token_counts[token];
            if !(count.is_finite() && count >= 0.0) {
                return Err(format!(
                    "token {token}: count {count} must be finite and non-negative"
                ));
            }
            pool_starts[row + 1] += 1;
        }
        for row in 0..row_count {
            pool_starts[row + 1] += pool_starts[row];
        }
        let mut next_slot = pool_starts.clone();
        let mut pool_tokens = vec![0; pool_starts[row_count]];
        for (token, row) in token_rows.iter().enumerate() {
            if let Some(row) = *row {
                pool_tokens[next_slot[row]] = token;
                next_slot[row] += 1;
            }
        }
        let observed = (0..row_count)
            .map(|row| match ran_blocks.real_of_block(row / rows_per_block) {
                None => true,
                Some(_) => pool_starts[row + 1] > pool_starts[row],
            })
            .collect();
        let mut table = Self {
            shape,
            ran_blocks,
            round_population_counts,
            count: vec![0.0; row_count],
            count_log: vec![0.0; row_count],
            observed,
            pool_starts,
            pool_tokens,
            token_counts: Vec::new(),
            dispersion: vec![0.0; shape.contexts * shape.species],
        };
        table.sum_pools(&token_counts);
        table.token_counts = token_counts;
        table.refresh_derived();
        Ok(table)
    }

    /// The row of every token (`None` for tokens in no row): with
    /// [`SummedTable::token_counts`], what [`SummedTable::from_token_rows`]
    /// rebuilds the table from.
    pub(crate) fn token_rows(&self) -> Vec<Option<usize>> {
        let mut rows = vec![None; self.token_counts.len()];
        for row in 0..self.row_count() {
            for &token in self.pool(row) {
                rows[token] = Some(row);
            }
        }
        rows
    }

    /// Which ran block, context, species, treatment and bin a row holds.
    pub(crate) fn row_key(&self, row: usize) -> RowKey {
        let shape = &self.shape;
        let bin = row % shape.bins;
        let rest = row / shape.bins;
        let treatment = rest % shape.treatments;
        let rest = rest / shape.treatments;
        let species = rest % shape.species;
        let rest = rest / shape.species;
        RowKey {
            block: rest / shape.contexts,
            context: rest % shape.contexts,
            species,
            treatment,
            bin: bin + 1,
        }
    }

    pub(crate) fn shape(&self) -> TableShape {
        self.shape
    }

    pub(crate) fn ran_blocks(&self) -> RanBlocks {
        self.ran_blocks
    }

    pub(crate) fn bins(&self) -> usize {
        self.shape.bins
    }

    pub(crate) fn round_population_counts(&self) -> bool {
        self.round_population_counts
    }

    /// N = B·C·S·T·(R+1), or B·C·S·T with a single ran level.
    pub(crate) fn row_count(&self) -> usize {
        self.count.len()
    }

    fn rows_per_ran_block(&self) -> usize {
        self.shape.bins * self.shape.contexts * self.shape.species * self.shape.treatments
    }

    /// Row of bin 1 of a (ran block, context, species, treatment) block. The
    /// indices must be in range; see [`SummedTable::row_index`] for a checked form.
    pub(crate) fn block_start_row(
        &self,
        block: usize,
        context: usize,
        species: usize,
        treatment: usize,
    ) -> usize {
        let shape = &self.shape;
        (((block * shape.contexts + context) * shape.species + species) * shape.treatments
            + treatment)
            * shape.bins
    }

    /// Row of (ran block, context, species, treatment, bin in 1..=B).
    #[cfg(test)]
    pub(crate) fn row_index(
        &self,
        block: usize,
        context: usize,
        species: usize,
        treatment: usize,
        bin: usize,
    ) -> Option<usize> {
        let shape = &self.shape;
        let in_range = block < self.ran_blocks.count()
            && context < shape.contexts
            && species < shape.species
            && treatment < shape.treatments
            && (1..=shape.bins).contains(&bin);
        in_range.then(|| self.block_start_row(block, context, species, treatment) + bin - 1)
    }

    /// Summed counts; NaN on unobserved rows.
    pub(crate) fn count(&self) -> &[f64] {
        &self.count
    }

    /// ln(count + 1); NaN on unobserved rows.
    pub(crate) fn count_log(&self) -> &[f64] {
        &self.count_log
    }

    /// Whether a row enters the likelihood (false = NA).
    pub(crate) fn observed(&self) -> &[bool] {
        &self.observed
    }

    pub(crate) fn observed_row_count(&self) -> usize {
        self.observed.iter().filter(|&&o| o).count()
    }

    /// Token indices (positions in the input columns) summed into a row.
    pub(crate) fn pool(&self, row: usize) -> &[usize] {
        match (self.pool_starts.get(row), self.pool_starts.get(row + 1)) {
            (Some(&start), Some(&end)) => &self.pool_tokens[start..end],
            _ => &[],
        }
    }

    /// The input count column.
    pub(crate) fn token_counts(&self) -> &[f64] {
        &self.token_counts
    }

    /// φ of a (context, species) pair.
    pub(crate) fn dispersion(&self, context: usize, species: usize) -> f64 {
        self.dispersion[context * self.shape.species + species]
    }

    /// φ for every (context, species), context-major.
    #[cfg(test)]
    pub(crate) fn dispersions(&self) -> &[f64] {
        &self.dispersion
    }

    /// Re-sums every observed real row from the given per-token counts (same
    /// positions as the input columns), then refreshes the "none" rows,
    /// count_log and φ. The pools and the NA pattern do not change.
    #[cfg(test)]
    pub(crate) fn refill_from_token_counts(&mut self, token_counts: &[f64]) -> Result<(), String> {
        if token_counts.len() != self.token_counts.len() {
            return Err(format!(
                "expected {} token counts, got {}",
                self.token_counts.len(),
                token_counts.len()
            ));
        }
        if let Some(&token) = self
            .pool_tokens
            .iter()
            .find(|&&token| !(token_counts[token] >= 0.0 && token_counts[token].is_finite()))
        {
            return Err(format!(
                "token {token}: count {} must be finite and non-negative",
                token_counts[token]
            ));
        }
        self.sum_pools(token_counts);
        self.refresh_derived();
        Ok(())
    }

    /// Puts back the sums of the original token counts.
    pub(crate) fn restore_original_counts(&mut self) {
        let original = std::mem::take(&mut self.token_counts);
        self.sum_pools(&original);
        self.token_counts = original;
        self.refresh_derived();
    }

    /// Stratified bootstrap of tokens within cells: every observed real row
    /// becomes the sum of |pool| draws with replacement from its own pool.
    /// `pick(n)` must return a position in 0..n; rows are visited in table
    /// order, so a seeded `pick` gives a reproducible resample. On an invalid
    /// position the original counts are restored and an error returned.
    pub(crate) fn resample_pools<F: FnMut(usize) -> usize>(
        &mut self,
        mut pick: F,
    ) -> Result<(), String> {
        for row in 0..self.row_count() {
            let block = row / self.rows_per_ran_block();
            if !self.observed[row] || self.ran_blocks.real_of_block(block).is_none() {
                continue;
            }
            let (start, end) = (self.pool_starts[row], self.pool_starts[row + 1]);
            let size = end - start;
            let mut sum = 0.0;
            for _ in 0..size {
                let position = pick(size);
                if position >= size {
                    self.restore_original_counts();
                    return Err(format!(
                        "resampling picked position {position} in a pool of {size} tokens"
                    ));
                }
                sum += self.token_counts[self.pool_tokens[start + position]];
            }
            self.count[row] = sum;
        }
        self.refresh_derived();
        Ok(())
    }

    /// Whether real level `animal` has an observed row in (context, treatment).
    pub(crate) fn animal_has_data(&self, animal: usize, context: usize, treatment: usize) -> bool {
        let block = self.ran_blocks.block_of_real(animal);
        (0..self.shape.species).any(|species| {
            let first = self.block_start_row(block, context, species, treatment);
            self.observed[first..first + self.shape.bins]
                .iter()
                .any(|&o| o)
        })
    }

    /// Fills real level r's rows with those of real level `mapping[r]` (the
    /// animals' bootstrap), then recomputes the population rows and the
    /// dispersion from them.
    pub(crate) fn copy_animals(&mut self, mapping: &[usize]) {
        let per_block = self.rows_per_ran_block();
        let (count, observed) = (self.count.clone(), self.observed.clone());
        for (slot, &animal) in mapping.iter().enumerate() {
            let to = self.ran_blocks.block_of_real(slot) * per_block;
            let from = self.ran_blocks.block_of_real(animal) * per_block;
            self.count[to..to + per_block].copy_from_slice(&count[from..from + per_block]);
            self.observed[to..to + per_block].copy_from_slice(&observed[from..from + per_block]);
        }
        self.refresh_derived();
    }

    /// Sets every real row to the sum of `token_counts` over its pool (NaN when NA).
    fn sum_pools(&mut self, token_counts: &[f64]) {
        let rows_per_block = self.rows_per_ran_block();
        for row in 0..self.row_count() {
            if self
                .ran_blocks
                .real_of_block(row / rows_per_block)
                .is_none()
            {
                continue;
            }
            self.count[row] = if self.observed[row] {
                self.pool(row)
                    .iter()
                    .map(|&token| token_counts[token])
                    .sum()
            } else {
                f64::NAN
            };
        }
    }

    /// Recomputes the "none" rows, count_log and φ from the real rows.
    fn refresh_derived(&mut self) {
        let rows_per_block = self.rows_per_ran_block();
        if self.ran_blocks.has_population_block() {
            // Population row = geometric-type mean on the log1p scale of the
            // observed real rows of the same (c, s, t, b); 0 when there are none.
            for population_row in 0..rows_per_block {
                let mut log_sum = 0.0;
                let mut observed = 0usize;
                for block in 1..self.ran_blocks.count() {
                    let row = block * rows_per_block + population_row;
                    if self.observed[row] {
                        log_sum += self.count[row].ln_1p();
                        observed += 1;
                    }
                }
                let extrapolated = if observed == 0 {
                    0.0
                } else {
                    (log_sum / observed as f64).exp_m1()
                };
                self.count[population_row] = if self.round_population_counts {
                    extrapolated.round()
                } else {
                    extrapolated
                };
            }
        }
        for (log, &count) in self.count_log.iter_mut().zip(&self.count) {
            *log = count.ln_1p();
        }
        self.refresh_dispersion();
    }

    /// Method-of-moments φ per (context, species) over all observed rows,
    /// "none" rows included: φ = (v/m − 1)/m when v > m, else 0.
    fn refresh_dispersion(&mut self) {
        let shape = self.shape;
        for c in 0..shape.contexts {
            for s in 0..shape.species {
                let mut n = 0usize;
                let mut sum = 0.0;
                self.for_each_observed_count(c, s, |count| {
                    n += 1;
                    sum += count;
                });
                let mut dispersion = 0.0;
                if n > 0 {
                    let mean = sum / n as f64;
                    let mut squares = 0.0;
                    self.for_each_observed_count(c, s, |count| {
                        squares += (count - mean) * (count - mean);
                    });
                    let variance = squares / n as f64;
                    if variance > mean {
                        dispersion = (variance / mean - 1.0) / mean;
                    }
                }
                self.dispersion[c * shape.species + s] = dispersion;
            }
        }
    }

    fn for_each_observed_count(&self, context: usize, species: usize, mut visit: impl FnMut(f64)) {
        for block in 0..self.ran_blocks.count() {
            for treatment in 0..self.shape.treatments {
                let start = self.block_start_row(block, context, species, treatment);
                for row in start..start + self.shape.bins {
                    if self.observed[row] {
                        visit(self.count[row]);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Tokens {
        count: Vec<f64>,
        bin: Vec<i32>,
        context: Vec<usize>,
        species: Vec<usize>,
        ran: Vec<usize>,
        treatment: Vec<usize>,
    }

    impl Tokens {
        fn new() -> Self {
            Self {
                count: vec![],
                bin: vec![],
                context: vec![],
                species: vec![],
                ran: vec![],
                treatment: vec![],
            }
        }

        /// Adds one token: (count, bin, context, species, ran, treatment).
        fn add(
            &mut self,
            count: f64,
            bin: i32,
            context: usize,
            species: usize,
            ran: usize,
            treatment: usize,
        ) {
            self.count.push(count);
            self.bin.push(bin);
            self.context.push(context);
            self.species.push(species);
            self.ran.push(ran);
            self.treatment.push(treatment);
        }

        fn columns(&self) -> TokenColumns<'_> {
            TokenColumns {
                count: &self.count,
                bin: &self.bin,
                context: &self.context,
                species: &self.species,
                ran: &self.ran,
                treatment: &self.treatment,
            }
        }
    }

    fn shape(
        bins: usize,
        contexts: usize,
        species: usize,
        ran_levels: usize,
        treatments: usize,
    ) -> TableShape {
        TableShape {
            bins,
            contexts,
            species,
            ran_levels,
            treatments,
        }
    }

    /// Two mice, two bins; mouse 0 has no tokens in bin 2.
    #[test]
    fn a_table_rebuilt_from_its_token_rows_is_identical() {
        let tokens = two_mice();
        let table = SummedTable::new(shape(2, 1, 1, 2, 1), tokens.columns(), true).unwrap();
        let rows = table.token_rows();
        assert_eq!(rows[4], None); // NA count
        assert_eq!(rows[5], None); // bin beyond B
        let rebuilt =
            SummedTable::from_token_rows(table.shape(), true, &rows, table.token_counts().to_vec())
                .unwrap();
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(rebuilt.count()), bits(table.count()));
        assert_eq!(bits(rebuilt.count_log()), bits(table.count_log()));
        assert_eq!(bits(rebuilt.dispersions()), bits(table.dispersions()));
        assert_eq!(rebuilt.observed(), table.observed());
        for row in 0..table.row_count() {
            assert_eq!(rebuilt.pool(row), table.pool(row));
        }
    }

    #[test]
    fn token_rows_that_break_the_table_are_refused() {
        let tokens = two_mice();
        let table = SummedTable::new(shape(2, 1, 1, 2, 1), tokens.columns(), true).unwrap();
        let counts = table.token_counts().to_vec();
        let rebuild = |rows: &[Option<usize>], counts: Vec<f64>| {
            SummedTable::from_token_rows(table.shape(), true, rows, counts)
        };
        let mut rows = table.token_rows();
        rows[0] = Some(table.row_count()); // beyond the table
        assert!(rebuild(&rows, counts.clone()).is_err());
        let mut rows = table.token_rows();
        rows[0] = Some(0); // a population ("none") row
        assert!(rebuild(&rows, counts.clone()).is_err());
        let mut rows = table.token_rows();
        rows[4] = Some(2); // the token with an NA count, pooled
        assert!(rebuild(&rows, counts.clone()).is_err());
        let mut negative = counts.clone();
        negative[0] = -1.0;
        assert!(rebuild(&table.token_rows(), negative).is_err());
        assert!(rebuild(&table.token_rows()[1..], counts.clone()).is_err());
        assert!(rebuild(&table.token_rows(), counts).is_ok());
    }

    #[test]
    fn row_keys_invert_the_row_order() {
        let tokens = two_mice();
        let table = SummedTable::new(shape(2, 1, 1, 2, 1), tokens.columns(), true).unwrap();
        for row in 0..table.row_count() {
            let key = table.row_key(row);
            assert_eq!(
                table.row_index(key.block, key.context, key.species, key.treatment, key.bin),
                Some(row)
            );
        }
    }

    fn two_mice() -> Tokens {
        let mut tokens = Tokens::new();
        tokens.add(3.0, 1, 0, 0, 0, 0); // 0
        tokens.add(4.0, 1, 0, 0, 0, 0); // 1
        tokens.add(2.0, 1, 0, 0, 1, 0); // 2
        tokens.add(2.0, 2, 0, 0, 1, 0); // 3
        tokens.add(f64::NAN, 2, 0, 0, 0, 0); // 4: NA count, skipped
        tokens.add(9.0, 3, 0, 0, 0, 0); // 5: bin beyond B, dropped
        tokens.add(9.0, 0, 0, 0, 1, 0); // 6: bin 0, dropped
        tokens
    }

    #[test]
    fn population_rows_extrapolate_from_observed_real_rows() {
        let tokens = two_mice();
        let table = SummedTable::new(shape(2, 1, 1, 2, 1), tokens.columns(), true).unwrap();
        assert_eq!(table.row_count(), 6);
        // Rows: none(b1, b2), mouse0(b1, b2), mouse1(b1, b2).
        // none b1 = round(sqrt((7+1)(2+1)) − 1) = round(3.899) = 4; none b2 = 2 (only mouse 1).
        let count = table.count();
        assert_eq!(&count[..3], &[4.0, 2.0, 7.0]);
        assert!(count[3].is_nan());
        assert_eq!(&count[4..], &[2.0, 2.0]);
        assert_eq!(table.observed(), &[true, true, true, false, true, true]);
        assert_eq!(table.observed_row_count(), 5);
        assert_eq!(table.pool(2), &[0, 1]);
        assert_eq!(table.pool(3), &[] as &[usize]);
        assert_eq!(table.pool(4), &[2]);
        assert_eq!(table.pool(0), &[] as &[usize]);
        assert!((table.count_log()[2] - 8f64.ln()).abs() < 1e-15);
        assert!(table.count_log()[3].is_nan());

        let unrounded = SummedTable::new(shape(2, 1, 1, 2, 1), tokens.columns(), false).unwrap();
        assert!((unrounded.count()[0] - (24f64.sqrt() - 1.0)).abs() < 1e-14);
    }

    #[test]
    fn dispersion_uses_the_moments_of_all_observed_rows() {
        let table = SummedTable::new(shape(2, 1, 1, 2, 1), two_mice().columns(), true).unwrap();
        // Observed counts 4, 2, 7, 2, 2: m = 3.4, v = 3.84.
        let (mean, variance) = (3.4, 3.84);
        let expected = (variance / mean - 1.0) / mean;
        assert!((table.dispersion(0, 0) - expected).abs() < 1e-14);

        let mut tokens = Tokens::new();
        tokens.add(5.0, 1, 0, 0, 0, 0);
        tokens.add(6.0, 2, 0, 0, 0, 0);
        let underdispersed =
            SummedTable::new(shape(2, 1, 1, 1, 1), tokens.columns(), true).unwrap();
        assert_eq!(underdispersed.dispersion(0, 0), 0.0);
    }

    #[test]
    fn a_single_ran_level_has_no_population_rows() {
        let mut tokens = Tokens::new();
        tokens.add(5.0, 2, 0, 0, 0, 0);
        let table = SummedTable::new(shape(3, 1, 1, 1, 1), tokens.columns(), true).unwrap();
        assert_eq!(table.row_count(), 3);
        assert!(table.count()[0].is_nan());
        assert_eq!(table.count()[1], 5.0);
        assert_eq!(table.observed(), &[false, true, false]);
    }

    #[test]
    fn empty_population_pools_give_zero() {
        let mut tokens = Tokens::new();
        tokens.add(5.0, 1, 0, 0, 0, 0);
        let table = SummedTable::new(shape(2, 1, 1, 2, 1), tokens.columns(), true).unwrap();
        assert_eq!(table.count()[1], 0.0);
        assert!(table.observed()[1]);
    }

    #[test]
    fn rows_nest_ran_context_species_treatment_bin() {
        let s = shape(4, 2, 3, 2, 2);
        let mut tokens = Tokens::new();
        tokens.add(11.0, 3, 1, 2, 1, 1);
        let table = SummedTable::new(s, tokens.columns(), true).unwrap();
        assert_eq!(table.row_count(), 4 * 2 * 3 * 3 * 2);
        let expected = ((((2 * 2 + 1) * 3 + 2) * 2 + 1) * 4) + 2;
        assert_eq!(table.row_index(2, 1, 2, 1, 3), Some(expected));
        assert_eq!(table.count()[expected], 11.0);
        assert_eq!(table.pool(expected), &[0]);
        assert_eq!(table.row_index(3, 0, 0, 0, 1), None);
        assert_eq!(table.row_index(0, 0, 0, 0, 0), None);
        let population = table.row_index(0, 1, 2, 1, 3).unwrap();
        assert_eq!(table.count()[population], 11.0);
    }

    #[test]
    fn bad_token_columns_are_rejected() {
        let mut tokens = two_mice();
        tokens.treatment.pop();
        assert!(SummedTable::new(shape(2, 1, 1, 2, 1), tokens.columns(), true).is_err());

        let mut tokens = Tokens::new();
        tokens.add(1.0, 1, 1, 0, 0, 0);
        assert!(SummedTable::new(shape(2, 1, 1, 2, 1), tokens.columns(), true).is_err());

        let mut tokens = Tokens::new();
        tokens.add(-1.0, 1, 0, 0, 0, 0);
        assert!(SummedTable::new(shape(2, 1, 1, 2, 1), tokens.columns(), true).is_err());

        assert!(SummedTable::new(shape(0, 1, 1, 2, 1), Tokens::new().columns(), true).is_err());
    }

    #[test]
    fn refilling_and_resampling_reuse_the_pools() {
        let tokens = two_mice();
        let mut table = SummedTable::new(shape(2, 1, 1, 2, 1), tokens.columns(), false).unwrap();
        let original: Vec<f64> = table.count().to_vec();

        let doubled: Vec<f64> = tokens.count.iter().map(|c| 2.0 * c).collect();
        table.refill_from_token_counts(&doubled).unwrap();
        assert_eq!(table.count()[2], 14.0);
        assert_eq!(table.count()[4], 4.0);
        assert!((table.count()[0] - (15f64 * 5.0).sqrt() + 1.0).abs() < 1e-13);
        assert!(table.count()[3].is_nan());

        // Always drawing the first token of each pool.
        table.resample_pools(|_| 0).unwrap();
        assert_eq!(table.count()[2], 6.0);
        assert_eq!(table.count()[4], 2.0);
        assert_eq!(table.count()[5], 2.0);
        assert!(table.count()[3].is_nan());

        assert!(table.resample_pools(|size| size).is_err());
        let restored = table.count();
        for (a, b) in restored.iter().zip(&original) {
            assert!(a == b || (a.is_nan() && b.is_nan()));
        }
        assert!(table.refill_from_token_counts(&[1.0]).is_err());
        let mut negative = tokens.count.clone();
        negative[0] = -3.0;
        assert!(table.refill_from_token_counts(&negative).is_err());
    }
}
