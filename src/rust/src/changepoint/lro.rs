//! Likelihood-ratio-outlier (LRO) change points of one (context, species)
//! pair (model vignette §12.1, steps 1–4): the series matrix, the rolling
//! log-likelihood ratio at three window sizes, their centroid and the
//! change-point scan.

use crate::data::SummedTable;

/// The count_log series of one (context, species) pair, one column per
/// (treatment, ran block) with every bin observed (model vignette §12.1, step 1).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SeriesMatrix {
    /// B, the length of every column.
    pub(crate) bins: usize,
    /// Kept (complete) columns, each count_log over bins 1..=B.
    pub(crate) columns: Vec<Vec<f64>>,
    /// (treatment, ran block) of each kept column, in the original's column order
    /// t·(R+1) + r; ran block 0 is "none" when the table has one.
    pub(crate) keys: Vec<(usize, usize)>,
}

impl SeriesMatrix {
    pub(crate) fn column_count(&self) -> usize {
        self.columns.len()
    }
}

/// Builds the series matrix of (context, species). Columns with any NA (or
/// non-finite) bin are left out, as the original does; the "none" columns are
/// always complete.
pub(crate) fn series_matrix(
    table: &SummedTable,
    context: usize,
    species: usize,
) -> Result<SeriesMatrix, String> {
    let shape = table.shape();
    if context >= shape.contexts || species >= shape.species {
        return Err(format!(
            "context {context} / species {species} out of range ({} × {})",
            shape.contexts, shape.species
        ));
    }
    let bins = shape.bins;
    let blocks = table.ran_blocks().count();
    let count_log = table.count_log();
    let observed = table.observed();
    let mut columns = Vec::new();
    let mut keys = Vec::new();
    for treatment in 0..shape.treatments {
        for block in 0..blocks {
            let start = table.block_start_row(block, context, species, treatment);
            let rows = start..start + bins;
            let complete = rows
                .clone()
                .all(|row| observed[row] && count_log[row].is_finite());
            if complete {
                columns.push(count_log[rows].to_vec());
                keys.push((treatment, block));
            }
        }
    }
    Ok(SeriesMatrix {
        bins,
        columns,
        keys,
    })
}

/// Population mean and standard deviation (dividing by n) of a non-empty slice.
pub(crate) fn population_mean_sd(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let variance = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    (mean, variance.sqrt())
}

/// Σ log N(y; mean, sd) over the slice with the slice's own mean and
/// population sd. A zero sd gives NaN (0/0 in the exponent term), which the
/// caller replaces, as the original does.
fn self_fitted_normal_log_likelihood(values: &[f64]) -> f64 {
    let (mean, sd) = population_mean_sd(values);
    let log_norm = -0.5 * (2.0 * std::f64::consts::PI).ln() - sd.ln();
    values
        .iter()
        .map(|y| {
            let z = (y - mean) / sd;
            log_norm - 0.5 * z * z
        })
        .sum()
}

/// The original replaces a NaN window log-likelihood by 1.
fn nan_to_one(value: f64) -> f64 {
    if value.is_nan() {
        1.0
    } else {
        value
    }
}

/// Rolling log-likelihood ratio of one series at window size `window`
/// (model vignette §12.1, step 2).
///
/// For each window start i = 0..=n−w the value at the window centre
/// m = i + ⌊w/2⌋ is alt − null: null is the normal log-likelihood of the
/// whole window with its own mean and population sd, alt the same done on the
/// first ⌊w/2⌋ points and on the rest separately. Each of null and alt is
/// replaced by 1 when NaN. The centres never reached (the first ⌊w/2⌋ and the
/// tail) get the mean of the whole vector, those zero-initialised entries
/// included. With w < 2 or w > n the whole vector is 0.
pub(crate) fn rolling_log_likelihood_ratio(series: &[f64], window: usize) -> Vec<f64> {
    let n = series.len();
    let mut ratio = vec![0.0; n];
    if window < 2 || window > n {
        return ratio;
    }
    let half = window / 2;
    for start in 0..=n - window {
        let values = &series[start..start + window];
        let null = nan_to_one(self_fitted_normal_log_likelihood(values));
        let alt = nan_to_one(
            self_fitted_normal_log_likelihood(&values[..half])
                + self_fitted_normal_log_likelihood(&values[half..]),
        );
        ratio[start + half] = alt - null;
    }
    let mean_with_zero_edges = ratio.iter().sum::<f64>() / n as f64;
    let last_centre = n - window + half;
    let (head, rest) = ratio.split_at_mut(half);
    head.fill(mean_with_zero_edges);
    rest[last_centre + 1 - half..].fill(mean_with_zero_edges);
    ratio
}

/// Window multipliers of the three passes (fixed in the original).
pub(crate) const PASS_MULTIPLIERS: [usize; 3] = [1, 2, 4];

/// The ratio series of one column at the high-, mid- and low-pass windows
/// (ws, 2ws, 4ws).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PassRatios {
    pub(crate) high: Vec<f64>,
    pub(crate) mid: Vec<f64>,
    pub(crate) low: Vec<f64>,
}

impl PassRatios {
    pub(crate) fn of_series(series: &[f64], window: usize) -> Self {
        let at = |multiplier: usize| {
            rolling_log_likelihood_ratio(series, window.saturating_mul(multiplier))
        };
        Self {
            high: at(PASS_MULTIPLIERS[0]),
            mid: at(PASS_MULTIPLIERS[1]),
            low: at(PASS_MULTIPLIERS[2]),
        }
    }

    /// The passes in scan order: high, mid, low.
    pub(crate) fn passes(&self) -> [&[f64]; 3] {
        [&self.high, &self.mid, &self.low]
    }
}

/// Row-wise mean across columns of each pass (model vignette §12.1, step 3).
/// With no columns every pass is empty.
pub(crate) fn centroid(columns: &[PassRatios]) -> PassRatios {
    let Some(first) = columns.first() else {
        return PassRatios {
            high: Vec::new(),
            mid: Vec::new(),
            low: Vec::new(),
        };
    };
    let n = first.high.len();
    let count = columns.len() as f64;
    let mean_of = |pass: fn(&PassRatios) -> &Vec<f64>| -> Vec<f64> {
        (0..n)
            .map(|i| columns.iter().map(|c| pass(c)[i]).sum::<f64>() / count)
            .collect()
    };
    PassRatios {
        high: mean_of(|c| &c.high),
        mid: mean_of(|c| &c.mid),
        low: mean_of(|c| &c.low),
    }
}

/// Change points of the centroid (model vignette §12.1, step 4), 1-based bin
/// positions.
///
/// Per pass, threshold = mean + cutoff · sd (population sd). Positions
/// i = 0..n−1 are scanned trying the passes high, mid, low; a pass qualifies
/// when its value beats its threshold and ⌊ws/2⌋ < i < n − ⌊ws/2⌋ (the base
/// window at all three passes). At the first qualifying pass: if
/// i − last > ⌊ws/2⌋ a new change point is recorded at i; otherwise, if the
/// value beats the one stored for the last change point, that point moves to
/// i; otherwise the next pass is tried. `last` starts at 0.
pub(crate) fn find_change_points(centroid: &PassRatios, window: usize, cutoff: f64) -> Vec<usize> {
    let passes = centroid.passes();
    let n = passes[0].len();
    if n == 0 || passes.iter().any(|p| p.len() != n) {
        return Vec::new();
    }
    let thresholds: Vec<f64> = passes
        .iter()
        .map(|values| {
            let (mean, sd) = population_mean_sd(values);
            mean + cutoff * sd
        })
        .collect();
    let half = window / 2;
    let mut points: Vec<usize> = Vec::new();
    let mut last = 0usize;
    let mut last_value = 0.0;
    for i in 0..n {
        if !(half < i && i + half < n) {
            continue;
        }
        for (values, threshold) in passes.iter().zip(&thresholds) {
            let value = values[i];
            if value <= *threshold || value.is_nan() {
                continue;
            }
            if i - last > half {
                points.push(i);
            } else if value > last_value {
                match points.last_mut() {
                    Some(point) => *point = i,
                    // Unreachable: i > ⌊ws/2⌋ = i − 0 whenever no point exists yet.
                    None => points.push(i),
                }
            } else {
                continue;
            }
            last = i;
            last_value = value;
            break;
        }
    }
    points.into_iter().map(|i| i + 1).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Log density of N(mean, sd) at y, written out independently.
    fn log_normal_density(y: f64, mean: f64, sd: f64) -> f64 {
        let density = (-(y - mean).powi(2) / (2.0 * sd * sd)).exp()
            / (sd * (2.0 * std::f64::consts::PI).sqrt());
        density.ln()
    }

    /// Independent route: explicit mean, explicit sd, densities summed.
    fn window_ll(values: &[f64]) -> f64 {
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let sd = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
        if sd == 0.0 {
            return f64::NAN;
        }
        values
            .iter()
            .map(|&y| log_normal_density(y, mean, sd))
            .sum()
    }

    #[test]
    fn ratio_of_a_tiny_series_matches_a_direct_computation() {
        // n = 6, w = 4: centres 2, 3, 4 are filled; 0, 1 and 5 get the mean.
        let series = [0.0, 1.0, 0.5, 3.0, 3.5, 2.0];
        let window = 4;
        let ratio = rolling_log_likelihood_ratio(&series, window);
        let mut expected = [0.0; 6];
        for start in 0..=2 {
            let w = &series[start..start + 4];
            let null = window_ll(w);
            let alt = window_ll(&w[..2]) + window_ll(&w[2..]);
            let fix = |v: f64| if v.is_nan() { 1.0 } else { v };
            expected[start + 2] = fix(alt) - fix(null);
        }
        let fill = expected.iter().sum::<f64>() / 6.0;
        expected[0] = fill;
        expected[1] = fill;
        expected[5] = fill;
        for (a, b) in ratio.iter().zip(&expected) {
            assert!((a - b).abs() < 1e-12, "{ratio:?} vs {expected:?}");
        }
        // Window [1, 0.5, 3, 3.5]: each half has sd 0.25, the whole window
        // mean 2 and variance (1 + 2.25 + 1 + 2.25)/4 = 1.625. Every fit has
        // Σz² = n, so alt − null = 4·(ln sd_null − ln 0.25).
        let by_hand = 4.0 * (1.625f64.sqrt() / 0.25).ln();
        assert!((ratio[3] - by_hand).abs() < 1e-12);
    }

    #[test]
    fn constant_halves_fall_back_to_one() {
        // Window of 2: each half is one point (sd 0), so alt is NaN → 1.
        let series = [1.0, 2.0, 4.0];
        let ratio = rolling_log_likelihood_ratio(&series, 2);
        let null_first = window_ll(&[1.0, 2.0]);
        let null_second = window_ll(&[2.0, 4.0]);
        assert!((ratio[1] - (1.0 - null_first)).abs() < 1e-12);
        assert!((ratio[2] - (1.0 - null_second)).abs() < 1e-12);
        assert!((ratio[0] - (ratio[1] + ratio[2]) / 3.0).abs() < 1e-12);
        // Fully constant window: null and alt both NaN → 1 − 1 = 0.
        let flat = rolling_log_likelihood_ratio(&[5.0; 4], 4);
        assert!(flat.iter().all(|&v| v == 0.0));
    }

    #[test]
    fn windows_out_of_range_give_zeros() {
        assert_eq!(rolling_log_likelihood_ratio(&[1.0, 2.0], 1), vec![0.0; 2]);
        assert_eq!(rolling_log_likelihood_ratio(&[1.0, 2.0], 3), vec![0.0; 2]);
        assert!(rolling_log_likelihood_ratio(&[], 2).is_empty());
    }

    fn passes(high: Vec<f64>, mid: Vec<f64>, low: Vec<f64>) -> PassRatios {
        PassRatios { high, mid, low }
    }

    #[test]
    fn centroid_is_the_row_mean_per_pass() {
        let a = passes(vec![1.0, 2.0], vec![0.0, 0.0], vec![4.0, 4.0]);
        let b = passes(vec![3.0, 6.0], vec![2.0, 2.0], vec![0.0, 2.0]);
        let c = centroid(&[a, b]);
        assert_eq!(c, passes(vec![2.0, 4.0], vec![1.0, 1.0], vec![2.0, 3.0]));
        assert!(centroid(&[]).high.is_empty());
    }

    #[test]
    fn scan_records_moves_and_respects_the_edges() {
        // n = 20, ws = 4 (half 2): admissible i are 3..=17.
        let mut high = vec![0.0; 20];
        high[1] = 50.0; // too close to the start
        high[5] = 10.0; // new point
        high[6] = 12.0; // within 2 of 5 and larger: moves 5 → 6
        high[8] = 11.0; // 8 − 6 = 2, not > 2, and 11 < 12: falls through to mid
        high[12] = 10.0; // new point
        high[18] = 50.0; // too close to the end
        let mut mid = vec![0.0; 20];
        mid[8] = 30.0; // larger than the stored 12: moves 6 → 8
        let low = vec![0.0; 20];
        let c = passes(high, mid, low);
        // Cutoff 0: thresholds are the means (high 7.15, mid 1.5, low 0).
        assert_eq!(find_change_points(&c, 4, 0.0), vec![9, 13]);
    }

    #[test]
    fn scan_uses_mean_plus_cutoff_sd() {
        let mut high = vec![0.0; 10];
        high[4] = 1.0;
        high[7] = 3.0;
        // mean 0.4, population sd = sqrt(1.0 − 0.16) ≈ 0.9165;
        // cutoff 1 → 1.3165: only bin index 7 passes.
        let c = passes(high, vec![0.0; 10], vec![0.0; 10]);
        assert_eq!(find_change_points(&c, 2, 1.0), vec![8]);
        assert_eq!(find_change_points(&c, 2, 0.5), vec![5, 8]);
    }
}
