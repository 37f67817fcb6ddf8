//! Initial parameter values (model vignette §12.4): block rates, transition
//! slopes and points per treatment from the bin-wise mean log counts and the
//! detected change points, turned into β by solving W·β = v, plus small
//! random warps.

use super::DetectedStructure;
use crate::model::{Component, Model, SummedTable, WarpKind};
use crate::streams::TaskStream;

/// Floor of the initial transition slopes (model vignette §12.4).
pub(crate) const MIN_INITIAL_SLOPE: f64 = 0.25;

/// Initial warping factors are drawn from U(−WARP_HALF_WIDTH, WARP_HALF_WIDTH).
pub(crate) const WARP_HALF_WIDTH: f64 = 0.1;

/// Settings of the starting values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct StartSettings {
    /// Target rise of a transition's run, as a fraction of the block-rate
    /// step (see [`block_rates_and_runs`]).
    pub(crate) rise_threshold_factor: f64,
}

impl Default for StartSettings {
    fn default() -> Self {
        Self {
            rise_threshold_factor: crate::rules::DEFAULT_RISE_THRESHOLD_FACTOR,
        }
    }
}

impl StartSettings {
    pub(crate) fn validate(&self) -> Result<(), String> {
        crate::rules::check_rise_threshold_factor(self.rise_threshold_factor)
    }
}

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
fn mean_skipping_nan(series: &[f64]) -> f64 {
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

/// Initial parameter vector (model vignette §12.4) in the layout of `model`:
/// - per (context, species) and treatment: block rates (the mean of the
///   bin-wise mean log counts for d = 0), slopes 4/run floored at 0.25 and
///   tpoints = the detected per-treatment change points (1-based bins);
/// - per block or transition, β solves W·β = v (v the per-treatment values),
///   so β₀ is the reference value and the others are effect contrasts;
/// - every warping factor ~ U(−0.1, 0.1) from `TaskStream::new(seed, stream)`,
///   drawn in layout order (species, ran level, point/rate/slope).
///
/// `model.structure()` must equal `detected.structure`.
pub(crate) fn initial_parameters(
    model: &Model,
    detected: &DetectedStructure,
    settings: &StartSettings,
    seed: u64,
    stream: u64,
) -> Result<Vec<f64>, String> {
    settings.validate()?;
    if model.structure() != &detected.structure {
        return Err("the model's degrees differ from the detected structure".into());
    }
    let table = model.table();
    let design = model.design();
    let layout = model.layout();
    let structure = model.structure();
    let (contexts, species) = (structure.contexts(), structure.species());
    let treatments = design.treatment_count();
    if detected.change_points.len() != contexts * species {
        return Err(format!(
            "change points for {} curves, the model has {}",
            detected.change_points.len(),
            contexts * species
        ));
    }
    let weights = FullPivotLu::new(design.weights(), treatments)
        .map_err(|e| format!("the weight matrix W: {e}"))?;
    let mut parameters = vec![0.0; layout.len()];
    let mut assign = |component: Component,
                      c: usize,
                      s: usize,
                      per_treatment: &[Vec<f64>]|
     -> Result<(), String> {
        let blocks = per_treatment.first().map_or(0, Vec::len);
        for k in 0..blocks {
            let values: Vec<f64> = per_treatment.iter().map(|v| v[k]).collect();
            let betas = weights.solve(&values)?;
            for (i, beta) in betas.into_iter().enumerate() {
                let index = layout
                    .beta_index(component, c, s, k, i)
                    .ok_or_else(|| format!("no β slot for {component:?} ({c}, {s}, {k}, {i})"))?;
                parameters[index] = beta;
            }
        }
        Ok(())
    };
    for c in 0..contexts {
        for s in 0..species {
            let curve = c * species + s;
            let degree = structure.degree(c, s);
            let points = &detected.change_points[curve];
            if points.len() != treatments || points.iter().any(|p| p.len() != degree) {
                return Err(format!(
                    "curve ({c}, {s}): expected {treatments} treatments × {degree} change points"
                ));
            }
            let average = count_log_average(table, c, s)?;
            let mut rates = Vec::with_capacity(treatments);
            let mut slopes = Vec::with_capacity(treatments);
            for (t, treatment_points) in points.iter().enumerate() {
                let series = average.column(t);
                if degree == 0 {
                    let mean = mean_skipping_nan(series);
                    rates.push(vec![if mean.is_nan() { 0.0 } else { mean }]);
                    slopes.push(Vec::new());
                    continue;
                }
                if !treatment_points.iter().all(|p| p.is_finite()) {
                    return Err(format!("curve ({c}, {s}): non-finite change point"));
                }
                let rounded: Vec<usize> = treatment_points
                    .iter()
                    .map(|p| p.round().clamp(1.0, average.bins() as f64) as usize)
                    .collect();
                let estimates =
                    block_rates_and_runs(series, &rounded, settings.rise_threshold_factor)?;
                slopes.push(estimates.runs.iter().map(|&r| initial_slope(r)).collect());
                rates.push(estimates.rates);
            }
            assign(Component::Rate, c, s, &rates)?;
            if degree > 0 {
                assign(Component::Slope, c, s, &slopes)?;
                assign(Component::Point, c, s, points)?;
            }
        }
    }
    let mut draws = TaskStream::new(seed, stream);
    for s in 0..species {
        for r in 0..design.ran_blocks().warped_levels() {
            for kind in WarpKind::ALL {
                let index = layout
                    .warp_index(kind, s, r)
                    .ok_or_else(|| format!("no warp slot for species {s}, level {r}"))?;
                // u = 0 would give the excluded end point −0.1.
                let u = loop {
                    let u = draws.uniform();
                    if u > 0.0 {
                        break u;
                    }
                };
                parameters[index] = WARP_HALF_WIDTH * (2.0 * u - 1.0);
            }
        }
    }
    Ok(parameters)
}

#[cfg(test)]
mod tests {
    use super::super::simulate::{poisson_table, Curve};
    use super::super::{detect_structure, DetectionSettings};
    use super::*;
    use crate::model::table::TokenColumns;
    use crate::model::{Design, Factor, Settings, Structure, TableShape};

    fn strings(values: &[&str]) -> Vec<String> {
        values.iter().map(|v| v.to_string()).collect()
    }

    fn multiply(matrix: &[f64], n: usize, x: &[f64]) -> Vec<f64> {
        (0..n)
            .map(|i| (0..n).map(|j| matrix[i * n + j] * x[j]).sum())
            .collect()
    }

    #[test]
    fn lu_recovers_beta_through_the_hemisphere_by_age_weight_matrix() {
        // Model vignette §3: hemisphere {left, right} × age {7, 12, 18} (time
        // series).
        let design = Design::new(
            strings(&["ctx"]),
            strings(&["gene"]),
            strings(&["m1"]),
            vec![
                Factor::new("hemisphere", strings(&["left", "right"])),
                Factor::time_series("age", strings(&["7", "12", "18"])),
            ],
        )
        .unwrap();
        #[rustfmt::skip]
        let w = [
            1.0, 0.0, 0.0, 0.0, 0.0, 0.0,
            1.0, 1.0, 0.0, 0.0, 0.0, 0.0,
            1.0, 0.0, 1.0, 0.0, 0.0, 0.0,
            1.0, 0.0, 1.0, 1.0, 0.0, 0.0,
            1.0, 1.0, 1.0, 0.0, 1.0, 0.0,
            1.0, 1.0, 1.0, 1.0, 1.0, 1.0,
        ];
        assert_eq!(design.weights(), &w[..]);
        let beta = [1.5, -0.3, 0.7, 2.0, -1.1, 0.4];
        let v = multiply(&w, 6, &beta);
        // By hand: ref 1.5, right 1.2, 12 2.2, 18 4.2, right12 0.8, right18 3.2.
        let by_hand = [1.5, 1.2, 2.2, 4.2, 0.8, 3.2];
        for (a, b) in v.iter().zip(by_hand) {
            assert!((a - b).abs() < 1e-12);
        }
        let solved = FullPivotLu::new(&w, 6).unwrap().solve(&v).unwrap();
        for (a, b) in solved.iter().zip(beta) {
            assert!((a - b).abs() < 1e-12, "{solved:?}");
        }
    }

    #[test]
    fn lu_pivots_and_rejects_singular_or_malformed_input() {
        // A zero leading entry needs pivoting.
        let swap = [0.0, 2.0, 3.0, 0.0];
        let x = FullPivotLu::new(&swap, 2)
            .unwrap()
            .solve(&[4.0, 9.0])
            .unwrap();
        assert_eq!(x, vec![3.0, 2.0]);
        let general = [2.0, 1.0, 1.0, 4.0, -6.0, 0.0, -2.0, 7.0, 2.0];
        let truth = [1.0, 2.0, -1.0];
        let rhs = multiply(&general, 3, &truth);
        let x = FullPivotLu::new(&general, 3).unwrap().solve(&rhs).unwrap();
        for (a, b) in x.iter().zip(truth) {
            assert!((a - b).abs() < 1e-12);
        }
        assert!(FullPivotLu::new(&[1.0, 2.0, 2.0, 4.0], 2).is_err());
        assert!(FullPivotLu::new(&[1.0, 2.0, 3.0], 2).is_err());
        assert!(FullPivotLu::new(&[f64::NAN], 1).is_err());
        assert!(FullPivotLu::new(&[1.0], 1)
            .unwrap()
            .solve(&[1.0, 2.0])
            .is_err());
    }

    #[test]
    fn block_means_cover_every_bin_once_and_runs_grow_in_turn() {
        // Bins 1–3 at 1, 4–7 at 5, 8–10 at 2; transitions open bins 4 and 8.
        let series = [1.0, 1.0, 1.0, 5.0, 5.0, 5.0, 5.0, 2.0, 2.0, 2.0];
        let estimates = block_rates_and_runs(&series, &[4, 8], 0.8).unwrap();
        assert_eq!(estimates.rates, vec![1.0, 5.0, 2.0]);
        // Transition 1 (target 3.2): rise 0 (bf → 1), rise 0 (bb → 1),
        // rise 5 − 1 = 4 (bf → 2), stop: run = 1 + 2 = 3. Transition 2 alike.
        assert_eq!(estimates.runs, vec![3.0, 3.0]);
        // The last bin belongs to the last block (the original drops it).
        let mut last = series;
        last[9] = 8.0;
        let estimates = block_rates_and_runs(&last, &[4, 8], 0.8).unwrap();
        assert_eq!(estimates.rates[2], 4.0);
        // An empty first block takes the value at its start; NaN bins are skipped.
        let estimates = block_rates_and_runs(&[3.0, f64::NAN, 1.0], &[1], 0.8).unwrap();
        assert_eq!(estimates.rates, vec![3.0, 2.0]);
        assert!(block_rates_and_runs(&series, &[8, 4], 0.8).is_err());
        assert!(block_rates_and_runs(&series, &[11], 0.8).is_err());
        // No observed bin at all: rates fall back to 0.
        let estimates = block_rates_and_runs(&[f64::NAN; 4], &[3], 0.8).unwrap();
        assert_eq!(estimates.rates, vec![0.0, 0.0]);
    }

    #[test]
    fn slopes_are_four_over_the_run_with_a_floor() {
        assert_eq!(initial_slope(2.0), 2.0);
        assert_eq!(initial_slope(16.0), 0.25);
        assert_eq!(initial_slope(100.0), MIN_INITIAL_SLOPE);
    }

    #[test]
    fn count_log_average_is_not_shifted() {
        // Two mice, B = 3: mouse 1 has no token in bin 3.
        let count = [3.0, 1.0, 1.0, 0.0, 7.0];
        let bin = [1, 2, 1, 2, 3];
        let zeros = [0usize; 5];
        let ran = [0, 0, 1, 1, 1];
        let shape = TableShape {
            bins: 3,
            contexts: 1,
            species: 1,
            ran_levels: 2,
            treatments: 1,
        };
        let tokens = TokenColumns {
            count: &count,
            bin: &bin,
            context: &zeros,
            species: &zeros,
            ran: &ran,
            treatment: &zeros,
        };
        let table = SummedTable::new(shape, tokens, true).unwrap();
        let average = count_log_average(&table, 0, 0).unwrap();
        // "none": bin 1 round(√(4·2) − 1) = 2, bin 2 round(√2 − 1) = 0, bin 3 = 7.
        let ln = f64::ln;
        let expected = [(ln(3.0) + ln(4.0) + ln(2.0)) / 3.0, ln(2.0) / 3.0, ln(8.0)];
        for (b, e) in expected.iter().enumerate() {
            assert!((average.at(b + 1, 0).unwrap() - e).abs() < 1e-12);
        }
        assert_eq!(average.column(0).len(), 3);
        assert_eq!(average.at(0, 0), None);
        assert_eq!(average.at(4, 0), None);
        assert!(count_log_average(&table, 1, 0).is_err());
    }

    fn two_genes() -> Vec<[Curve; 2]> {
        let curve = |levels: &[f64], points: &[f64], slope: f64| Curve {
            levels: levels.to_vec(),
            points: points.to_vec(),
            slopes: vec![slope; points.len()],
        };
        vec![
            [
                curve(&[1.0, 3.0, 1.5], &[30.0, 65.0], 1.0),
                curve(&[1.5, 3.2, 1.0], &[34.0, 62.0], 1.0),
            ],
            [curve(&[2.0], &[], 1.0), curve(&[2.4], &[], 1.0)],
        ]
    }

    fn fixture() -> (Model, DetectedStructure) {
        let (table, design) = poisson_table(&two_genes(), 100, 3, 11);
        let detected = detect_structure(&table, &design, &DetectionSettings::default()).unwrap();
        assert_eq!(detected.structure.degrees(), &[2, 0]);
        let model = Model::new(
            table,
            design,
            detected.structure.clone(),
            Settings::default(),
        )
        .unwrap();
        (model, detected)
    }

    /// z(t) = Σ_i W[t, i]·β_i of one block of one component.
    fn unwarped(model: &Model, x: &[f64], m: Component, s: usize, k: usize, t: usize) -> f64 {
        let w = model.design().weight_row(t);
        (0..w.len())
            .map(|i| w[i] * x[model.layout().beta_index(m, 0, s, k, i).unwrap()])
            .sum()
    }

    #[test]
    fn the_rise_threshold_factor_sets_the_initial_slopes() {
        let (model, detected) = fixture();
        let with = |factor: f64| {
            let settings = StartSettings {
                rise_threshold_factor: factor,
            };
            initial_parameters(&model, &detected, &settings, 42, 0).unwrap()
        };
        let slope = model
            .layout()
            .beta_index(Component::Slope, 0, 0, 0, 0)
            .unwrap();
        // Gene 1, transition 1, reference treatment: 4 / run, with the run
        // grown until the rise reaches the factor times the step.
        let average = count_log_average(model.table(), 0, 0).unwrap();
        let points: Vec<usize> = detected.change_points[0][0]
            .iter()
            .map(|p| p.round() as usize)
            .collect();
        for factor in [0.1, 0.8, 0.99] {
            let runs = block_rates_and_runs(average.column(0), &points, factor)
                .unwrap()
                .runs;
            assert!((with(factor)[slope] - initial_slope(runs[0])).abs() < 1e-12);
        }
        assert_ne!(with(0.1)[slope], with(0.99)[slope]);
        assert_eq!(
            with(0.8),
            initial_parameters(&model, &detected, &StartSettings::default(), 42, 0).unwrap()
        );
        // One range for both likelihoods: (0, 1].
        for bad in [0.0, -1.0, 1.5, f64::NAN, f64::INFINITY] {
            let settings = StartSettings {
                rise_threshold_factor: bad,
            };
            assert!(initial_parameters(&model, &detected, &settings, 42, 0).is_err());
        }
    }

    #[test]
    fn initial_parameters_reproduce_the_per_treatment_estimates() {
        let (model, detected) = fixture();
        let x = initial_parameters(&model, &detected, &StartSettings::default(), 42, 0).unwrap();
        assert_eq!(x.len(), model.parameter_count());
        for t in 0..2 {
            // Gene 1 (d = 2): block means, runs and points per treatment.
            let average = count_log_average(model.table(), 0, 0).unwrap();
            let points = &detected.change_points[0][t];
            let rounded: Vec<usize> = points.iter().map(|p| p.round() as usize).collect();
            let expected = block_rates_and_runs(average.column(t), &rounded, 0.8).unwrap();
            for k in 0..3 {
                let z = unwarped(&model, &x, Component::Rate, 0, k, t);
                assert!((z - expected.rates[k]).abs() < 1e-12);
            }
            for (k, (&run, &point)) in expected.runs.iter().zip(points).enumerate() {
                let slope = unwarped(&model, &x, Component::Slope, 0, k, t);
                assert!((slope - initial_slope(run)).abs() < 1e-12);
                assert!(slope >= MIN_INITIAL_SLOPE);
                let tpoint = unwarped(&model, &x, Component::Point, 0, k, t);
                assert!((tpoint - point).abs() < 1e-12);
            }
            // Gene 2 (d = 0): the mean of its bin-wise mean log counts.
            let flat = count_log_average(model.table(), 0, 1).unwrap();
            let mean = flat.column(t).iter().sum::<f64>() / 100.0;
            assert!((unwarped(&model, &x, Component::Rate, 1, 0, t) - mean).abs() < 1e-12);
        }
        // The knock-out raises gene 2 by about 0.4 on the log scale.
        let effect = x[model
            .layout()
            .beta_index(Component::Rate, 0, 1, 0, 1)
            .unwrap()];
        assert!((effect - 0.4).abs() < 0.15, "{effect}");
    }

    #[test]
    fn warps_are_small_uniform_and_reproducible() {
        let (model, detected) = fixture();
        let x = initial_parameters(&model, &detected, &StartSettings::default(), 42, 0).unwrap();
        let warps = &x[model.layout().warp_start()..];
        assert_eq!(warps.len(), 2 * 3 * 3);
        assert!(warps.iter().all(|w| w.abs() < WARP_HALF_WIDTH));
        assert!(warps.windows(2).all(|w| w[0] != w[1]));
        assert_eq!(
            x,
            initial_parameters(&model, &detected, &StartSettings::default(), 42, 0).unwrap()
        );
        let other =
            initial_parameters(&model, &detected, &StartSettings::default(), 43, 0).unwrap();
        assert_ne!(warps, &other[model.layout().warp_start()..]);
        let streamed =
            initial_parameters(&model, &detected, &StartSettings::default(), 42, 5).unwrap();
        assert_ne!(x, streamed);
        // Only the warps depend on the seed.
        let start = model.layout().warp_start();
        assert_eq!(x[..start], other[..start]);
    }

    #[test]
    fn a_mismatched_structure_is_an_error() {
        let (model, mut detected) = fixture();
        detected.structure = Structure::new(1, 2, vec![1, 0]).unwrap();
        assert!(initial_parameters(&model, &detected, &StartSettings::default(), 1, 0).is_err());
        let (model, mut detected) = fixture();
        detected.change_points[0][1].pop();
        assert!(initial_parameters(&model, &detected, &StartSettings::default(), 1, 0).is_err());
    }
}
