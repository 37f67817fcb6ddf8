//! The count model's table (model vignette §4 and §10):
//! one row per observed cell key (animal, context, treatment, bin) and
//! species, holding the species' summed count there (0 when the species had
//! no token in the key) and the exposure behind it.
//!
//! A cell key with no token of any species is missing: it has no rows. So a
//! gene that was measured and not seen counts 0, and a bin nobody measured
//! says nothing.

use crate::data::TableShape;

/// What the exposure E of a row counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Exposure {
    /// Distinct cell ids in the cell key (all species share it).
    Cells,
    /// Tokens of the species in the cell key: the data list every cell × gene
    /// pair, zeros included.
    Tokens,
    /// E = 1: a rate per bin.
    Unit,
    /// The exposures the data give per row, summed over the rows of a cell
    /// key: a binned table's exposure column (its cells per bin, or their
    /// summed sizes, from `wisp_bin()`).
    Given,
}

impl Exposure {
    pub fn name(self) -> &'static str {
        match self {
            Exposure::Cells => "cells",
            Exposure::Tokens => "tokens",
            Exposure::Unit => "none",
            Exposure::Given => "given",
        }
    }
}

/// Token columns coded from 0 (bins from 1); `cell` is empty when the data
/// have no cell ids, `exposure` when they give no exposure per token.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CountTokens<'a> {
    pub count: &'a [f64],
    pub bin: &'a [i32],
    pub context: &'a [usize],
    pub species: &'a [usize],
    pub ran: &'a [usize],
    pub treatment: &'a [usize],
    pub cell: &'a [usize],
    pub exposure: &'a [f64],
}

/// The exposure a request resolves to, and why.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ExposureChoice {
    pub exposure: Exposure,
    pub reason: String,
}

/// What a table keeps of its tokens besides their rows and counts: the cell
/// id of each (cell exposure only) and the exposure of each (given exposure
/// only); empty otherwise.
#[derive(Clone, Debug, Default)]
pub(crate) struct TokenExtras {
    pub cells: Vec<usize>,
    pub exposures: Vec<f64>,
}

/// Counts and exposures, species-major: row (s, key) sits at s·K + key with
/// key = ((r·C + c)·T + t)·B + (b − 1).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CountTable {
    shape: TableShape,
    exposure_kind: Exposure,
    observed: Vec<bool>,
    count: Vec<f64>,
    exposure: Vec<f64>,
    /// Tokens of row (s, key): `pool_tokens[pool_starts[i]..pool_starts[i + 1]]`.
    pool_starts: Vec<usize>,
    pool_tokens: Vec<usize>,
    token_counts: Vec<f64>,
    /// The row of every token (`None`: NA count or a bin outside 1..B).
    token_rows: Vec<Option<usize>>,
    /// The cell id of every token (cell exposure only; empty otherwise).
    token_cells: Vec<usize>,
    /// The exposure of every token (given exposure only; empty otherwise).
    token_exposures: Vec<f64>,
}

impl CountTable {
    /// Sums the tokens. `exposure` is `None` for the automatic choice: cells
    /// when there are cell ids, else tokens when every cell key lists every
    /// species equally often and some count is 0, else a unit exposure.
    pub fn new(
        shape: TableShape,
        tokens: CountTokens<'_>,
        exposure: Option<Exposure>,
    ) -> Result<(Self, ExposureChoice), String> {
        let keys = key_count_of(shape)?;
        let TableShape {
            bins,
            contexts,
            species,
            ran_levels,
            treatments,
        } = shape;
        let n = tokens.count.len();
        for (name, len) in [
            ("bin", tokens.bin.len()),
            ("context", tokens.context.len()),
            ("species", tokens.species.len()),
            ("ran", tokens.ran.len()),
            ("treatment", tokens.treatment.len()),
        ] {
            if len != n {
                return Err(format!(
                    "token column {name} has {len} entries, count has {n}"
                ));
            }
        }
        if !tokens.cell.is_empty() && tokens.cell.len() != n {
            return Err(format!(
                "token column cell has {} entries, count has {n}",
                tokens.cell.len()
            ));
        }
        if !tokens.exposure.is_empty() && tokens.exposure.len() != n {
            return Err(format!(
                "token column exposure has {} entries, count has {n}",
                tokens.exposure.len()
            ));
        }
        let mut token_rows = vec![None; n];
        for token in 0..n {
            let count = tokens.count[token];
            if count.is_nan() {
                continue;
            }
            if !(count >= 0.0 && count.is_finite()) {
                return Err(format!(
                    "token {}: count {count} must be finite and >= 0",
                    token + 1
                ));
            }
            let indices = [
                ("context", tokens.context[token], contexts),
                ("species", tokens.species[token], species),
                ("ran", tokens.ran[token], ran_levels),
                ("treatment", tokens.treatment[token], treatments),
            ];
            for (name, value, limit) in indices {
                if value >= limit {
                    return Err(format!(
                        "token {}: {name} index {value} is out of range (there are {limit})",
                        token + 1
                    ));
                }
            }
            let bin = tokens.bin[token];
            if bin < 1 || bin as usize > bins {
                continue;
            }
            let key = ((tokens.ran[token] * contexts + tokens.context[token]) * treatments
                + tokens.treatment[token])
                * bins
                + (bin as usize - 1);
            token_rows[token] = Some(tokens.species[token] * keys + key);
        }
        let choice = choose_exposure(exposure, &tokens, &token_rows, keys, species)?;
        let cells = if choice.exposure == Exposure::Cells {
            tokens.cell.to_vec()
        } else {
            Vec::new()
        };
        let exposures = if choice.exposure == Exposure::Given {
            tokens.exposure.to_vec()
        } else {
            Vec::new()
        };
        let table = Self::from_token_rows(
            shape,
            choice.exposure,
            token_rows,
            tokens.count.to_vec(),
            TokenExtras { cells, exposures },
        )?;
        Ok((table, choice))
    }

    /// The table of tokens already placed in rows (what a saved fit stores);
    /// every index, count and exposure is checked.
    pub fn from_token_rows(
        shape: TableShape,
        exposure_kind: Exposure,
        token_rows: Vec<Option<usize>>,
        token_counts: Vec<f64>,
        extras: TokenExtras,
    ) -> Result<Self, String> {
        let TokenExtras {
            cells: token_cells,
            exposures: token_exposures,
        } = extras;
        let keys = key_count_of(shape)?;
        let rows = keys * shape.species;
        let n = token_counts.len();
        if token_rows.len() != n {
            return Err(format!(
                "{} token rows for {n} token counts",
                token_rows.len()
            ));
        }
        let needs_cells = exposure_kind == Exposure::Cells;
        if needs_cells == token_cells.is_empty() || (needs_cells && token_cells.len() != n) {
            return Err(
                "cell ids must be given for every token exactly when exposure counts cells".into(),
            );
        }
        let given = exposure_kind == Exposure::Given;
        if given == token_exposures.is_empty() || (given && token_exposures.len() != n) {
            return Err(
                "exposures must be given for every token exactly when the exposure is given".into(),
            );
        }
        if let Some(bad) = token_exposures
            .iter()
            .position(|e| !(e.is_finite() && *e > 0.0))
        {
            return Err(format!(
                "token {}: exposure {} must be finite and positive",
                bad + 1,
                token_exposures[bad]
            ));
        }
        let mut observed = vec![false; keys];
        let mut pool_starts = vec![0usize; rows + 1];
        for (token, row) in token_rows.iter().enumerate() {
            let Some(row) = *row else { continue };
            if row >= rows {
                return Err(format!(
                    "token {token} is in row {row}, but the table has {rows} rows"
                ));
            }
            let count = token_counts[token];
            if !(count.is_finite() && count >= 0.0) {
                return Err(format!(
                    "token {token}: count {count} must be finite and non-negative"
                ));
            }
            observed[row % keys] = true;
            pool_starts[row + 1] += 1;
        }
        for row in 0..rows {
            pool_starts[row + 1] += pool_starts[row];
        }
        let mut next = pool_starts.clone();
        let mut pool_tokens = vec![0usize; pool_starts[rows]];
        for (token, row) in token_rows.iter().enumerate() {
            if let Some(row) = *row {
                pool_tokens[next[row]] = token;
                next[row] += 1;
            }
        }
        let mut table = CountTable {
            shape,
            exposure_kind,
            observed,
            count: vec![0.0; rows],
            exposure: vec![1.0; rows],
            pool_starts,
            pool_tokens,
            token_counts,
            token_rows,
            token_cells,
            token_exposures,
        };
        table.fill_exposure();
        let counts = table.token_counts.clone();
        table.sum_pools(&counts);
        Ok(table)
    }

    /// The row of every token, for saving.
    pub fn token_rows(&self) -> &[Option<usize>] {
        &self.token_rows
    }

    pub fn token_counts(&self) -> &[f64] {
        &self.token_counts
    }

    pub fn token_cells(&self) -> &[usize] {
        &self.token_cells
    }

    pub fn token_exposures(&self) -> &[f64] {
        &self.token_exposures
    }

    fn fill_exposure(&mut self) {
        let keys = self.key_count();
        let species = self.shape.species;
        match self.exposure_kind {
            Exposure::Unit => self.exposure.fill(1.0),
            Exposure::Given => {
                for row in 0..keys * species {
                    self.exposure[row] = self.pool_tokens
                        [self.pool_starts[row]..self.pool_starts[row + 1]]
                        .iter()
                        .map(|&t| self.token_exposures[t])
                        .sum();
                }
            }
            Exposure::Tokens => {
                for row in 0..keys * species {
                    self.exposure[row] = (self.pool_starts[row + 1] - self.pool_starts[row]) as f64;
                }
            }
            Exposure::Cells => {
                let mut pairs: Vec<(usize, usize)> = self
                    .token_rows
                    .iter()
                    .zip(&self.token_cells)
                    .filter_map(|(row, &cell)| row.map(|row| (row % keys, cell)))
                    .collect();
                pairs.sort_unstable();
                pairs.dedup();
                let mut cells = vec![0usize; keys];
                for (key, _) in pairs {
                    cells[key] += 1;
                }
                for s in 0..species {
                    for key in 0..keys {
                        self.exposure[s * keys + key] = cells[key] as f64;
                    }
                }
            }
        }
    }

    fn sum_pools(&mut self, token_counts: &[f64]) {
        for row in 0..self.count.len() {
            self.count[row] = self.pool_tokens[self.pool_starts[row]..self.pool_starts[row + 1]]
                .iter()
                .map(|&t| token_counts[t])
                .sum();
        }
    }

    pub fn shape(&self) -> TableShape {
        self.shape
    }

    pub fn exposure_kind(&self) -> Exposure {
        self.exposure_kind
    }

    /// K = R·C·T·B cell keys.
    pub fn key_count(&self) -> usize {
        let s = self.shape;
        s.ran_levels * s.contexts * s.treatments * s.bins
    }

    /// First key of the (animal, context, treatment) block; bins follow.
    pub fn block_key(&self, ran: usize, context: usize, treatment: usize) -> usize {
        let s = self.shape;
        ((ran * s.contexts + context) * s.treatments + treatment) * s.bins
    }

    pub fn observed(&self) -> &[bool] {
        &self.observed
    }

    /// Counts of one species over all keys.
    pub fn counts(&self, species: usize) -> &[f64] {
        let keys = self.key_count();
        &self.count[species * keys..(species + 1) * keys]
    }

    /// Counts of one species, to be replaced (parametric bootstrap).
    pub fn counts_mut(&mut self, species: usize) -> &mut [f64] {
        let keys = self.key_count();
        &mut self.count[species * keys..(species + 1) * keys]
    }

    /// Fills animal slot r with the data of animal `mapping[r]` of `source`
    /// (a table of the same shape): its observed keys, counts, exposures and
    /// token pools, for every species.
    pub fn copy_animals(&mut self, source: &CountTable, mapping: &[usize]) {
        let shape = self.shape;
        let per_animal = shape.contexts * shape.treatments * shape.bins;
        let keys = self.key_count();
        let mut pool_starts = vec![0usize; self.pool_starts.len()];
        let mut pool_tokens = Vec::with_capacity(self.pool_tokens.len());
        for s in 0..shape.species {
            for (slot, &animal) in mapping.iter().enumerate() {
                for offset in 0..per_animal {
                    let (to, from) = (slot * per_animal + offset, animal * per_animal + offset);
                    if s == 0 {
                        self.observed[to] = source.observed[from];
                    }
                    let (row_to, row_from) = (s * keys + to, s * keys + from);
                    self.count[row_to] = source.count[row_from];
                    self.exposure[row_to] = source.exposure[row_from];
                    pool_tokens.extend_from_slice(
                        &source.pool_tokens
                            [source.pool_starts[row_from]..source.pool_starts[row_from + 1]],
                    );
                    pool_starts[row_to + 1] = pool_tokens.len();
                }
            }
        }
        // Rows were written in key order within each species, so the starts
        // are already cumulative; make the empty rows' starts carry over.
        for row in 1..pool_starts.len() {
            pool_starts[row] = pool_starts[row].max(pool_starts[row - 1]);
        }
        self.pool_starts = pool_starts;
        self.pool_tokens = pool_tokens;
    }

    /// The summed rows of one (context, species) curve as a table of their
    /// own (one context, one species; the same animals, treatments and bins),
    /// for fitting that curve alone (the structure selection, model vignette
    /// §12.6). It keeps the counts, exposures and observed keys but no
    /// tokens: it can be fitted, not resampled.
    pub fn curve_rows(&self, context: usize, species: usize) -> Result<CountTable, String> {
        let shape = self.shape;
        if context >= shape.contexts || species >= shape.species {
            return Err(format!(
                "there is no curve ({context}, {species}) in a table of {} contexts and {} species",
                shape.contexts, shape.species
            ));
        }
        let curve_shape = TableShape {
            contexts: 1,
            species: 1,
            ..shape
        };
        let rows = key_count_of(curve_shape)?;
        let (mut observed, mut count, mut exposure) = (
            Vec::with_capacity(rows),
            Vec::with_capacity(rows),
            Vec::with_capacity(rows),
        );
        let (counts, exposures) = (self.counts(species), self.exposures(species));
        for r in 0..shape.ran_levels {
            for t in 0..shape.treatments {
                let first = self.block_key(r, context, t);
                let keys = first..first + shape.bins;
                observed.extend_from_slice(&self.observed[keys.clone()]);
                count.extend_from_slice(&counts[keys.clone()]);
                exposure.extend_from_slice(&exposures[keys]);
            }
        }
        Ok(CountTable {
            shape: curve_shape,
            exposure_kind: self.exposure_kind,
            observed,
            count,
            exposure,
            pool_starts: vec![0; rows + 1],
            pool_tokens: Vec::new(),
            token_counts: Vec::new(),
            token_rows: Vec::new(),
            token_cells: Vec::new(),
            token_exposures: Vec::new(),
        })
    }

    /// The rows of some species (in the order given) as a table of their
    /// own: every context, animal, treatment and bin, their counts,
    /// exposures and observed keys, but no tokens. It can be fitted, not
    /// resampled (a panel fitted species by species, [`super::panel`]).
    pub fn species_rows(&self, species: &[usize]) -> Result<CountTable, String> {
        let shape = self.shape;
        if let Some(&bad) = species.iter().find(|&&s| s >= shape.species) {
            return Err(format!(
                "there is no species {bad} in a table of {} species",
                shape.species
            ));
        }
        let (mut count, mut exposure) = (Vec::new(), Vec::new());
        let rows = species.len() * self.key_count();
        count.try_reserve_exact(rows).map_err(|e| e.to_string())?;
        exposure
            .try_reserve_exact(rows)
            .map_err(|e| e.to_string())?;
        for &s in species {
            count.extend_from_slice(self.counts(s));
            exposure.extend_from_slice(self.exposures(s));
        }
        CountTable::from_sums(
            TableShape {
                species: species.len(),
                ..shape
            },
            self.exposure_kind,
            self.observed.clone(),
            count,
            exposure,
        )
    }

    /// A table without tokens from its summed rows (species-major, as
    /// [`Self::counts`] gives them), checked.
    pub fn from_sums(
        shape: TableShape,
        exposure_kind: Exposure,
        observed: Vec<bool>,
        count: Vec<f64>,
        exposure: Vec<f64>,
    ) -> Result<CountTable, String> {
        let rows = key_count_of(shape)?
            .checked_mul(shape.species)
            .ok_or("the table is too large")?;
        let table = CountTable {
            shape,
            exposure_kind,
            observed,
            count,
            exposure,
            pool_starts: vec![0; rows + 1],
            pool_tokens: Vec::new(),
            token_counts: Vec::new(),
            token_rows: Vec::new(),
            token_cells: Vec::new(),
            token_exposures: Vec::new(),
        };
        table.validate()?;
        Ok(table)
    }

    /// Summed counts of every row (species-major).
    pub fn all_counts(&self) -> &[f64] {
        &self.count
    }

    /// Exposures of every row (species-major).
    pub fn all_exposures(&self) -> &[f64] {
        &self.exposure
    }

    /// Exposures of one species over all keys.
    pub fn exposures(&self, species: usize) -> &[f64] {
        let keys = self.key_count();
        &self.exposure[species * keys..(species + 1) * keys]
    }

    /// Observed rows (keys × species).
    pub fn observed_row_count(&self) -> usize {
        self.observed.iter().filter(|&&o| o).count() * self.shape.species
    }

    /// Redraws every row's tokens with replacement from its own pool and
    /// re-sums them; `pick(n)` returns a uniform index below n. The
    /// exposures stay as they are (a redraw keeps the number of tokens).
    pub fn resample_pools(&mut self, mut pick: impl FnMut(usize) -> usize) {
        for row in 0..self.count.len() {
            let pool = &self.pool_tokens[self.pool_starts[row]..self.pool_starts[row + 1]];
            let mut sum = 0.0;
            for _ in 0..pool.len() {
                sum += self.token_counts[pool[pick(pool.len())]];
            }
            self.count[row] = sum;
        }
    }

    /// The same data as a binned table: one token per observed (species,
    /// key) row carrying the row's count and exposure (what `wisp_bin()`
    /// makes of the cells of a (group, bin)).
    #[cfg(test)]
    pub(crate) fn as_binned(&self) -> CountTable {
        let shape = self.shape;
        let keys = self.key_count();
        let mut columns = Tokens::default();
        for s in 0..shape.species {
            for key in (0..keys).filter(|&key| self.observed[key]) {
                let (rest, bin) = (key / shape.bins, key % shape.bins);
                let (rest, treatment) = (rest / shape.treatments, rest % shape.treatments);
                let (ran, context) = (rest / shape.contexts, rest % shape.contexts);
                columns.count.push(self.count[s * keys + key]);
                columns.exposure.push(self.exposure[s * keys + key]);
                columns.bin.push(bin as i32 + 1);
                columns.context.push(context);
                columns.species.push(s);
                columns.ran.push(ran);
                columns.treatment.push(treatment);
            }
        }
        let (table, choice) =
            CountTable::new(shape, columns.columns(), None).expect("a binned copy");
        assert_eq!(choice.exposure, Exposure::Given);
        table
    }

    /// Checks the invariants that a decoded table must satisfy.
    pub fn validate(&self) -> Result<(), String> {
        let keys = self.key_count();
        let rows = keys * self.shape.species;
        let consistent = self.observed.len() == keys
            && self.count.len() == rows
            && self.exposure.len() == rows
            && self.pool_starts.len() == rows + 1
            && self.pool_starts.first() == Some(&0)
            && self.pool_starts.windows(2).all(|w| w[0] <= w[1])
            && self.pool_starts.last() == Some(&self.pool_tokens.len())
            && self
                .pool_tokens
                .iter()
                .all(|&t| t < self.token_counts.len())
            && (self.token_exposures.is_empty()
                || self.token_exposures.len() == self.token_counts.len())
            && self.count.iter().all(|c| c.is_finite() && *c >= 0.0)
            && self.exposure.iter().all(|e| e.is_finite() && *e >= 0.0);
        if consistent {
            Ok(())
        } else {
            Err("the count table's arrays are inconsistent".into())
        }
    }
}

/// Bytes the count fit holds at once for `tokens` tokens with `factors`
/// fixed effects and `rows` summed rows (keys × species), with a margin: the
/// coded token columns and their treatments, the table's per-token arrays
/// (row, count, pool, cell or exposure) and per-row arrays, and the saved
/// plan (its bytes and R's copy of them).
pub(crate) fn fit_memory_forecast(tokens: u64, factors: u64, rows: u64) -> u64 {
    let coded = 8 + 4 + 3 * 8 + 8 * factors + 8;
    let table = 16 + 8 + 8 + 8;
    let plan = 2 * (16 + 8 + 8);
    let per_row = 8 * 4 + 8;
    let bytes = tokens
        .saturating_mul(coded + table + plan)
        .saturating_add(rows.saturating_mul(per_row));
    bytes.saturating_add(bytes / 4)
}

/// K = R·C·T·B, checked against overflow.
fn key_count_of(shape: TableShape) -> Result<usize, String> {
    let TableShape {
        bins,
        contexts,
        species,
        ran_levels,
        treatments,
    } = shape;
    if [bins, contexts, species, ran_levels, treatments].contains(&0) {
        return Err(format!(
            "every table dimension must be positive, got {shape:?}"
        ));
    }
    [ran_levels, contexts, treatments, bins]
        .iter()
        .try_fold(1usize, |acc, &n| acc.checked_mul(n))
        .filter(|&k| {
            k.checked_mul(species)
                .is_some_and(|rows| rows < usize::MAX / 4)
        })
        .ok_or_else(|| "the count table would have too many rows".to_string())
}

fn choose_exposure(
    requested: Option<Exposure>,
    tokens: &CountTokens<'_>,
    token_rows: &[Option<usize>],
    keys: usize,
    species: usize,
) -> Result<ExposureChoice, String> {
    let has_cells = !tokens.cell.is_empty();
    let has_exposure = !tokens.exposure.is_empty();
    let has_zeros = tokens.count.contains(&0.0);
    // Every observed key lists every species equally often.
    let balanced = || {
        let mut sizes = vec![0usize; keys * species];
        for row in token_rows.iter().flatten() {
            sizes[*row] += 1;
        }
        (0..keys).all(|key| {
            let first = sizes[key];
            (1..species).all(|s| sizes[s * keys + key] == first)
        })
    };
    let choice = |exposure, reason: &str| ExposureChoice {
        exposure,
        reason: reason.to_string(),
    };
    match requested {
        Some(Exposure::Given) if !has_exposure => Err(
            "exposure = \"given\" needs an exposure column (the `exposure` role of \
             `variables`, or a binned table from wisp_bin())"
                .into(),
        ),
        Some(Exposure::Given) => Ok(choice(Exposure::Given, "requested")),
        Some(Exposure::Unit) => Ok(choice(Exposure::Unit, "requested")),
        Some(requested) if has_exposure => Err(format!(
            "exposure = \"{}\" counts the exposure from the tokens, but these data give \
             their own exposure column (a binned table from wisp_bin()); use exposure = \
             \"auto\" or \"given\" to use it, or \"none\" for a rate per bin",
            requested.name()
        )),
        None if has_exposure => Ok(choice(
            Exposure::Given,
            "each row's cells, or their summed sizes, from the exposure column",
        )),
        Some(Exposure::Cells) if !has_cells => Err(
            "exposure = \"cells\" needs a cell-id column (the `cell` role of `variables`)".into(),
        ),
        Some(Exposure::Cells) => Ok(choice(Exposure::Cells, "requested")),
        Some(Exposure::Tokens) if !has_zeros => Err(
            "exposure = \"tokens\" counts a row's tokens as its cells, which is right only when \
             the data list every cell x gene pair, zeros included; these data contain no zero \
             counts, so they list only the genes each cell expressed. Use exposure = \"cells\" \
             with a cell-id column, or exposure = \"none\""
                .into(),
        ),
        Some(Exposure::Tokens) if !balanced() => Err(
            "exposure = \"tokens\" needs the data to list every cell x gene pair (zeros \
             included), but some bins list some genes more often than others; use exposure = \
             \"cells\" with a cell-id column, or exposure = \"none\""
                .into(),
        ),
        Some(Exposure::Tokens) => Ok(choice(Exposure::Tokens, "requested")),
        None if has_cells => Ok(choice(Exposure::Cells, "the data have cell ids")),
        None if has_zeros && balanced() => Ok(choice(
            Exposure::Tokens,
            "the data list every cell x gene pair, zeros included",
        )),
        None => Ok(choice(
            Exposure::Unit,
            "the data have no cell ids and do not list every cell x gene pair, so counts are \
             modelled per bin and differences in cell density read as expression",
        )),
    }
}

/// Owned token columns, for tests.
#[cfg(test)]
#[derive(Default)]
pub(crate) struct Tokens {
    pub count: Vec<f64>,
    pub bin: Vec<i32>,
    pub context: Vec<usize>,
    pub species: Vec<usize>,
    pub ran: Vec<usize>,
    pub treatment: Vec<usize>,
    pub cell: Vec<usize>,
    pub exposure: Vec<f64>,
}

#[cfg(test)]
impl Tokens {
    pub fn columns(&self) -> CountTokens<'_> {
        CountTokens {
            count: &self.count,
            bin: &self.bin,
            context: &self.context,
            species: &self.species,
            ran: &self.ran,
            treatment: &self.treatment,
            cell: &self.cell,
            exposure: &self.exposure,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHAPE: TableShape = TableShape {
        bins: 3,
        contexts: 1,
        species: 2,
        ran_levels: 2,
        treatments: 1,
    };

    /// Two genes in cells 0..5: cells 0–2 in bin 1 of animal 0, cells 3–4 in
    /// bin 2 of animal 0, cell 5 in bin 1 of animal 1; bin 3 never measured.
    fn every_pair() -> Tokens {
        let cells = [(0, 1), (1, 1), (2, 1), (3, 2), (4, 2), (5, 1)];
        let mut t = Tokens {
            count: vec![],
            bin: vec![],
            context: vec![],
            species: vec![],
            ran: vec![],
            treatment: vec![],
            cell: vec![],
            exposure: vec![],
        };
        for (cell, (id, bin)) in cells.iter().enumerate() {
            for gene in 0..2 {
                t.count
                    .push(if gene == 0 { (cell + 1) as f64 } else { 0.0 });
                t.bin.push(*bin);
                t.context.push(0);
                t.species.push(gene);
                t.ran.push(if *id == 5 { 1 } else { 0 });
                t.treatment.push(0);
                t.cell.push(*id);
            }
        }
        t
    }

    #[test]
    fn zeros_count_and_unmeasured_bins_are_missing() {
        let mut tokens = every_pair();
        tokens.cell.clear();
        let (table, choice) = CountTable::new(SHAPE, tokens.columns(), None).unwrap();
        assert_eq!(choice.exposure, Exposure::Tokens);
        let key = |r: usize, b: usize| table.block_key(r, 0, 0) + b - 1;
        assert!(table.observed()[key(0, 1)] && table.observed()[key(0, 2)]);
        assert!(!table.observed()[key(0, 3)]);
        assert_eq!(table.counts(0)[key(0, 1)], 1.0 + 2.0 + 3.0);
        assert_eq!(table.counts(0)[key(0, 2)], 4.0 + 5.0);
        assert_eq!(table.counts(1)[key(0, 1)], 0.0);
        assert_eq!(table.exposures(1)[key(0, 1)], 3.0);
        assert_eq!(table.exposures(0)[key(1, 1)], 1.0);
        assert_eq!(table.observed_row_count(), 3 * 2);
    }

    #[test]
    fn given_exposures_sum_like_the_cells_they_count() {
        // The cells of every_pair() binned by hand: per (animal, bin) and
        // gene, the summed count and the number of cells.
        let binned = Tokens {
            count: vec![6.0, 0.0, 9.0, 0.0, 6.0, 0.0],
            bin: vec![1, 1, 2, 2, 1, 1],
            context: vec![0; 6],
            species: vec![0, 1, 0, 1, 0, 1],
            ran: vec![0, 0, 0, 0, 1, 1],
            treatment: vec![0; 6],
            cell: vec![],
            exposure: vec![3.0, 3.0, 2.0, 2.0, 1.0, 1.0],
        };
        let (given, choice) = CountTable::new(SHAPE, binned.columns(), None).unwrap();
        assert_eq!(choice.exposure, Exposure::Given);
        let (cells, _) = CountTable::new(SHAPE, every_pair().columns(), None).unwrap();
        assert_eq!(given.observed(), cells.observed());
        for s in 0..2 {
            assert_eq!(given.counts(s), cells.counts(s));
            assert_eq!(given.exposures(s), cells.exposures(s));
        }
        // Two rows of one key (e.g. two groups the model does not tell
        // apart) sum their counts and exposures.
        let mut split = binned;
        split.count.push(1.0);
        split.exposure.push(0.5);
        for column in [&mut split.context, &mut split.ran, &mut split.treatment] {
            column.push(0);
        }
        split.species.push(0);
        split.bin.push(1);
        let (summed, _) = CountTable::new(SHAPE, split.columns(), None).unwrap();
        let key = summed.block_key(0, 0, 0);
        assert_eq!(
            (summed.counts(0)[key], summed.exposures(0)[key]),
            (7.0, 3.5)
        );
        assert_eq!(summed.exposures(1)[key], 3.0);
        // Exposures must be positive, and a token rule cannot be asked of them.
        split.exposure[6] = 0.0;
        assert!(CountTable::new(SHAPE, split.columns(), None).is_err());
        split.exposure[6] = 0.5;
        let error = CountTable::new(SHAPE, split.columns(), Some(Exposure::Cells)).unwrap_err();
        assert!(error.contains("own exposure column"), "{error}");
        assert!(CountTable::new(SHAPE, split.columns(), Some(Exposure::Unit)).is_ok());
        let error =
            CountTable::new(SHAPE, every_pair().columns(), Some(Exposure::Given)).unwrap_err();
        assert!(error.contains("needs an exposure column"), "{error}");
    }

    #[test]
    fn cell_ids_give_cell_exposure() {
        let tokens = every_pair();
        let (table, choice) = CountTable::new(SHAPE, tokens.columns(), None).unwrap();
        assert_eq!(choice.exposure, Exposure::Cells);
        let key = table.block_key(0, 0, 0) + 1;
        assert_eq!(table.exposures(0)[key], 2.0);
    }

    #[test]
    fn token_exposure_is_refused_without_zeros_or_balance() {
        let mut tokens = every_pair();
        tokens.cell.clear();
        // Drop the zero tokens of gene 2: the data list only expressed genes.
        let keep: Vec<bool> = tokens.count.iter().map(|&c| c > 0.0).collect();
        let filter = |v: &Vec<f64>| {
            v.iter()
                .zip(&keep)
                .filter(|(_, &k)| k)
                .map(|(x, _)| *x)
                .collect()
        };
        let filter_usize = |v: &Vec<usize>| {
            v.iter()
                .zip(&keep)
                .filter(|(_, &k)| k)
                .map(|(x, _)| *x)
                .collect()
        };
        let sparse = Tokens {
            exposure: vec![],
            count: filter(&tokens.count),
            bin: tokens
                .bin
                .iter()
                .zip(&keep)
                .filter(|(_, &k)| k)
                .map(|(x, _)| *x)
                .collect(),
            context: filter_usize(&tokens.context),
            species: filter_usize(&tokens.species),
            ran: filter_usize(&tokens.ran),
            treatment: filter_usize(&tokens.treatment),
            cell: vec![],
        };
        let error = CountTable::new(SHAPE, sparse.columns(), Some(Exposure::Tokens)).unwrap_err();
        assert!(error.contains("no zero counts"), "{error}");
        let (_, choice) = CountTable::new(SHAPE, sparse.columns(), None).unwrap();
        assert_eq!(choice.exposure, Exposure::Unit);
        tokens.count[0] = 0.0;
        tokens.species.truncate(tokens.count.len());
        let mut unbalanced = tokens;
        unbalanced.species[1] = 0; // cell 0 lists gene 1 twice and gene 2 never
        assert!(
            CountTable::new(SHAPE, unbalanced.columns(), Some(Exposure::Tokens))
                .unwrap_err()
                .contains("more often")
        );
    }

    #[test]
    fn resampling_keeps_exposure_and_draws_from_each_pool() {
        let mut tokens = every_pair();
        tokens.cell.clear();
        let (mut table, _) = CountTable::new(SHAPE, tokens.columns(), None).unwrap();
        let key = table.block_key(0, 0, 0);
        let before = table.exposures(0).to_vec();
        table.resample_pools(|_| 0);
        assert_eq!(table.counts(0)[key], 3.0); // three copies of token 1's count
        assert_eq!(table.exposures(0), before.as_slice());
        assert!(table.validate().is_ok());
    }
}
