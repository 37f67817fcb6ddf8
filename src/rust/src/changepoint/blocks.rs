//! What the starting values of both likelihoods read from the data (model
//! vignette §12.4): the bin-wise mean log counts of a curve, and per
//! treatment the block means and transition runs between its change points.

use crate::data::SummedTable;

/// Floor of the initial transition slopes (model vignette §12.4).
pub(crate) const MIN_INITIAL_SLOPE: f64 = 0.25;

/// The bin-wise mean log counts of one (context, species), the series the
/// starting values are read from (model vignette §12.4): a B×T matrix whose
/// entry (b, t) is the mean of count_log over the ran blocks ("none" included) at
/// bin b for treatment t, NA rows skipped; NaN when no row is observed.
///
/// Entry b is bin b's mean: the original's version 2.4 passes b − 1 to its
/// row finder, so its entry 0 averages every bin and the rest are shifted one
/// bin right (model vignette §16, "Structure").
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CountLogAverage {
    bins: usize,
    treatments: usize,
    /// Column-major: treatment t occupies `values[t·B .. (t+1)·B]`.
    values: Vec<f64>,
}

impl CountLogAverage {
    pub(crate) fn bins(&self) -> usize {
        self.bins
    }

    /// The series of treatment t over bins 1..=B (index b − 1).
    pub(crate) fn column(&self, treatment: usize) -> &[f64] {
        &self.values[treatment * self.bins..(treatment + 1) * self.bins]
    }

    /// Entry at bin b (1-based) and treatment t; `None` when out of range.
    #[cfg(test)]
    pub(crate) fn at(&self, bin: usize, treatment: usize) -> Option<f64> {
        ((1..=self.bins).contains(&bin) && treatment < self.treatments)
            .then(|| self.values[treatment * self.bins + bin - 1])
    }
}

/// Builds the bin-wise mean log counts of one (context, species).
pub(crate) fn count_log_average(
    table: &SummedTable,
    context: usize,
    species: usize,
) -> Result<CountLogAverage, String> {
    let shape = table.shape();
    if context >= shape.contexts || species >= shape.species {
        return Err(format!(
            "context {context} / species {species} out of range ({} × {})",
            shape.contexts, shape.species
        ));
    }
    let (bins, treatments) = (shape.bins, shape.treatments);
    let count_log = table.count_log();
    let observed = table.observed();
    let mut values = vec![f64::NAN; bins * treatments];
    for treatment in 0..treatments {
        for bin in 0..bins {
            let (mut sum, mut count) = (0.0, 0usize);
            for block in 0..table.ran_blocks().count() {
                let row = table.block_start_row(block, context, species, treatment) + bin;
                if observed[row] && !count_log[row].is_nan() {
                    sum += count_log[row];
                    count += 1;
                }
            }
            if count > 0 {
                values[treatment * bins + bin] = sum / count as f64;
            }
        }
    }
    Ok(CountLogAverage {
        bins,
        treatments,
        values,
    })
}
/// Mean of x[start..end] skipping NaN; an empty range gives x[start]
/// (clamped into the series), as the original does.
fn mean_range(series: &[f64], start: usize, end: usize) -> f64 {
    if series.is_empty() {
        return f64::NAN;
    }
    let end = end.min(series.len());
    if start >= end {
        return series[start.min(series.len() - 1)];
    }
    let (sum, count) = series[start..end]
        .iter()
        .filter(|v| !v.is_nan())
        .fold((0.0, 0usize), |(s, c), v| (s + v, c + 1));
    sum / count as f64
}

/// Mean skipping NaN; NaN when nothing is left.
pub(crate) fn mean_skipping_nan(series: &[f64]) -> f64 {
    mean_range(series, 0, series.len().max(1))
}

/// Block rates and transition runs of one treatment (model vignette §12.4).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct BlockEstimates {
    /// d + 1 block means.
    pub(crate) rates: Vec<f64>,
    /// d run lengths (bins needed to complete each transition's rise), ≥ 1.
    pub(crate) runs: Vec<f64>,
}

/// Splits `series` (bins 1..=B at index b − 1) at the rounded change points
/// (1-based bins) and estimates block means and run lengths.
///
/// Block k covers the bins b with p_{k−1} ≤ b < p_k (p_{−1} = 1,
/// p_d = B + 1): every bin belongs to exactly one block and the bin at a
/// transition opens the next block. The original (0-based cp) uses [0, cp₀),
/// [cp_{k−1} − 1, cp_k) and [cp_{d−1} − 1, B − 1): its middle blocks
/// overlap the previous one by a bin and its last block drops the final
/// bin (model vignette §12.4; §16). An empty range yields the value at its start.
///
/// Run of transition k: starting from bb = bf = 0, while the signed rise
/// mean[s, s+bf) − mean[s−bb, s) (s = first index of block k) is below
/// `rise_threshold_factor`·(R_k − R_{k−1}) and a block has room, grow bf
/// and bb in turn (forward first), each only while below its block's size;
/// run = bb + bf, at least 1.
///
/// A block mean that is NaN (no observed bin) falls back to the series mean,
/// then to 0, so the β solve never sees NaN.
pub(crate) fn block_rates_and_runs(
    series: &[f64],
    change_points: &[usize],
    rise_threshold_factor: f64,
) -> Result<BlockEstimates, String> {
    let bins = series.len();
    if bins == 0 {
        return Err("an empty series has no blocks".into());
    }
    if change_points.windows(2).any(|w| w[1] < w[0])
        || change_points.iter().any(|&p| p == 0 || p > bins)
    {
        return Err(format!(
            "change points {change_points:?} must be ordered bins in 1..={bins}"
        ));
    }
    let degree = change_points.len();
    // Index ranges [start, end) of the blocks.
    let bounds: Vec<(usize, usize)> = (0..=degree)
        .map(|k| {
            let start = if k == 0 { 0 } else { change_points[k - 1] - 1 };
            let end = if k == degree {
                bins
            } else {
                change_points[k] - 1
            };
            (start, end)
        })
        .collect();
    let fallback = {
        let mean = mean_skipping_nan(series);
        if mean.is_nan() {
            0.0
        } else {
            mean
        }
    };
    let rates: Vec<f64> = bounds
        .iter()
        .map(|&(start, end)| {
            let mean = mean_range(series, start, end);
            if mean.is_nan() {
                fallback
            } else {
                mean
            }
        })
        .collect();
    let sizes: Vec<usize> = bounds.iter().map(|&(start, end)| end - start).collect();
    let runs = (1..=degree)
        .map(|k| {
            let start = bounds[k].0;
            let target = rise_threshold_factor * (rates[k] - rates[k - 1]);
            let sign = if target < 0.0 { -1.0 } else { 1.0 };
            let (mut back, mut forward) = (0usize, 0usize);
            let mut rise = 0.0;
            let mut go_forward = true;
            while rise * sign < target * sign && (back < sizes[k - 1] || forward < sizes[k]) {
                rise = mean_range(series, start, start + forward)
                    - mean_range(series, start - back, start);
                if go_forward {
                    if forward < sizes[k] {
                        forward += 1;
                    }
                } else if back < sizes[k - 1] {
                    back += 1;
                }
                go_forward = !go_forward;
            }
            (back + forward).max(1) as f64
        })
        .collect();
    Ok(BlockEstimates { rates, runs })
}

/// Initial slope of a transition completed over `run` bins: 4/run (the
/// slope of Ψ at the tpoint is ≈ tslope·ΔR/4), floored at [`MIN_INITIAL_SLOPE`].
pub(crate) fn initial_slope(run: f64) -> f64 {
    (4.0 / run).max(MIN_INITIAL_SLOPE)
}
