//! The summed-count table (spec §1.4): one row per (ran block, context,
//! species, treatment, bin), built from token columns in O(tokens + rows).

use super::design::RanBlocks;
use serde::{Deserialize, Serialize};

/// Sizes of the table's nesting levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableShape {
    /// B: bins run 1..=B.
    pub bins: usize,
    pub contexts: usize,
    pub species: usize,
    /// Real random-effect levels (the "none" pseudo-level is not counted).
    pub ran_levels: usize,
    pub treatments: usize,
}

/// Integer-coded token columns, one entry per token. Indices are 0-based;
/// `ran` indexes the real levels.
#[derive(Clone, Copy, Debug)]
pub struct TokenColumns<'a> {
    pub count: &'a [f64],
    pub bin: &'a [i32],
    pub context: &'a [usize],
    pub species: &'a [usize],
    pub ran: &'a [usize],
    pub treatment: &'a [usize],
}

/// Rows are ordered ran block (population "none" first when there are two or
/// more real levels), context, species, treatment, bin (innermost).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SummedTable {
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
    /// "none" counts (upstream `round_none`).
    pub fn new(
        shape: TableShape,
        tokens: TokenColumns<'_>,
        round_population_counts: bool,
    ) -> Result<Self, String> {
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
        let ran_blocks = RanBlocks::new(shape.ran_levels);
        let row_count = [
            shape.contexts,
            shape.species,
            shape.treatments,
            ran_blocks.count(),
        ]
        .iter()
        .try_fold(shape.bins, |acc, &n| acc.checked_mul(n))
        .filter(|&rows| rows < usize::MAX / 2)
        .ok_or("the summed table would have too many rows")?;

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

        let mut table = Self {
            shape,
            ran_blocks,
            round_population_counts,
            count: vec![0.0; row_count],
            count_log: vec![0.0; row_count],
            observed: vec![false; row_count],
            pool_starts: vec![0; row_count + 1],
            pool_tokens: Vec::new(),
            token_counts: tokens.count.to_vec(),
            dispersion: vec![0.0; shape.contexts * shape.species],
        };

        // Counting sort of tokens by row: one pass to size the pools, one to fill them.
        let mut row_of_token = vec![usize::MAX; token_count];
        for (position, token_row) in row_of_token.iter_mut().enumerate() {
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
            let row = table.block_start_row(
                ran_blocks.block_of_real(tokens.ran[position]),
                tokens.context[position],
                tokens.species[position],
                tokens.treatment[position],
            ) + (bin as usize - 1);
            *token_row = row;
            table.pool_starts[row + 1] += 1;
        }
        for row in 0..row_count {
            table.pool_starts[row + 1] += table.pool_starts[row];
        }
        let mut next_slot = table.pool_starts.clone();
        table.pool_tokens = vec![0; table.pool_starts[row_count]];
        for (position, &row) in row_of_token.iter().enumerate() {
            if row != usize::MAX {
                table.pool_tokens[next_slot[row]] = position;
                next_slot[row] += 1;
            }
        }

        for row in 0..row_count {
            let block = row / table.rows_per_ran_block();
            table.observed[row] = match ran_blocks.real_of_block(block) {
                None => true,
                Some(_) => table.pool_starts[row + 1] > table.pool_starts[row],
            };
        }
        let original = std::mem::take(&mut table.token_counts);
        table.sum_pools(&original);
        table.token_counts = original;
        table.refresh_derived();
        Ok(table)
    }

    pub fn shape(&self) -> TableShape {
        self.shape
    }

    pub fn ran_blocks(&self) -> RanBlocks {
        self.ran_blocks
    }

    pub fn bins(&self) -> usize {
        self.shape.bins
    }

    pub fn round_population_counts(&self) -> bool {
        self.round_population_counts
    }

    /// N = B·C·S·T·(R+1), or B·C·S·T with a single ran level.
    pub fn row_count(&self) -> usize {
        self.count.len()
    }

    fn rows_per_ran_block(&self) -> usize {
        self.shape.bins * self.shape.contexts * self.shape.species * self.shape.treatments
    }

    /// Row of bin 1 of a (ran block, context, species, treatment) block. The
    /// indices must be in range; see [`SummedTable::row_index`] for a checked form.
    pub fn block_start_row(
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
    pub fn row_index(
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
    pub fn count(&self) -> &[f64] {
        &self.count
    }

    /// ln(count + 1); NaN on unobserved rows.
    pub fn count_log(&self) -> &[f64] {
        &self.count_log
    }

    /// Whether a row enters the likelihood (false = NA).
    pub fn observed(&self) -> &[bool] {
        &self.observed
    }

    pub fn observed_row_count(&self) -> usize {
        self.observed.iter().filter(|&&o| o).count()
    }

    /// Token indices (positions in the input columns) summed into a row.
    pub fn pool(&self, row: usize) -> &[usize] {
        match (self.pool_starts.get(row), self.pool_starts.get(row + 1)) {
            (Some(&start), Some(&end)) => &self.pool_tokens[start..end],
            _ => &[],
        }
    }

    /// The input count column.
    pub fn token_counts(&self) -> &[f64] {
        &self.token_counts
    }

    /// φ of a (context, species) pair.
    pub fn dispersion(&self, context: usize, species: usize) -> f64 {
        self.dispersion[context * self.shape.species + species]
    }

    /// φ for every (context, species), context-major.
    pub fn dispersions(&self) -> &[f64] {
        &self.dispersion
    }

    /// Re-sums every observed real row from the given per-token counts (same
    /// positions as the input columns), then refreshes the "none" rows,
    /// count_log and φ. The pools and the NA pattern do not change.
    pub fn refill_from_token_counts(&mut self, token_counts: &[f64]) -> Result<(), String> {
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
    pub fn restore_original_counts(&mut self) {
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
    pub fn resample_pools<F: FnMut(usize) -> usize>(&mut self, mut pick: F) -> Result<(), String> {
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
