//! Prediction bands: per summed row, quantiles of the predicted log rate
//! over parameter samples (the bootstrap replicates).

use super::objective::{Model, Objective};
use crate::numeric::sorted_quantile;

/// Predictions held in memory at once (8 bytes each: 128 MiB); the rows are
/// processed in chunks that fit.
const MAX_BUFFERED: usize = 1 << 24;

/// For every probability, the quantile of the predicted log rate of every
/// row over `samples` (one parameter vector after another); NaN when there
/// are no samples. Probabilities must lie in [0, 1].
pub(crate) fn prediction_quantiles(
    model: &Model,
    samples: &[f64],
    probabilities: &[f64],
) -> Result<Vec<Vec<f64>>, String> {
    let parameters = model.parameter_count();
    if parameters == 0 || samples.len() % parameters != 0 {
        return Err("samples must hold whole parameter vectors".into());
    }
    if let Some(p) = probabilities.iter().find(|p| !(0.0..=1.0).contains(*p)) {
        return Err(format!("probabilities must lie in [0, 1], got {p}"));
    }
    let sample_count = samples.len() / parameters;
    let rows = model.table().row_count();
    let mut bands = vec![vec![f64::NAN; rows]; probabilities.len()];
    if sample_count == 0 {
        return Ok(bands);
    }
    let chunk_rows = (MAX_BUFFERED / sample_count).clamp(1, rows);
    let mut objective = Objective::new(model);
    let mut prediction = vec![0.0; rows];
    let mut buffer = vec![0.0; chunk_rows * sample_count];
    let mut row_values = vec![0.0; sample_count];
    for first in (0..rows).step_by(chunk_rows) {
        let last = (first + chunk_rows).min(rows);
        for (sample, x) in samples.chunks(parameters).enumerate() {
            objective.predict_log(x, &mut prediction)?;
            for row in first..last {
                buffer[(row - first) * sample_count + sample] = prediction[row];
            }
        }
        for row in first..last {
            row_values.copy_from_slice(
                &buffer[(row - first) * sample_count..(row - first + 1) * sample_count],
            );
            row_values.sort_by(f64::total_cmp);
            for (band, &p) in bands.iter_mut().zip(probabilities) {
                band[row] = sorted_quantile(&row_values, p);
            }
        }
    }
    Ok(bands)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::design::Factor;
    use crate::original::synthetic::{build_case_from, strings, SplitMix};

    #[test]
    fn quantiles_follow_r_type_7() {
        let sorted = [1.0, 2.0, 4.0, 8.0];
        assert_eq!(sorted_quantile(&sorted, 0.0), 1.0);
        assert_eq!(sorted_quantile(&sorted, 1.0), 8.0);
        // quantile(c(1, 2, 4, 8), 0.5) = 3, 0.25 = 1.75
        assert_eq!(sorted_quantile(&sorted, 0.5), 3.0);
        assert_eq!(sorted_quantile(&sorted, 0.25), 1.75);
    }

    #[test]
    fn bands_are_per_row_quantiles_of_the_predictions() {
        let case = build_case_from(
            &mut SplitMix(3),
            1,
            1,
            vec![1],
            vec![Factor::new("side", strings(&["a", "b"]))],
            2,
        );
        let model = &case.model;
        let mut samples = Vec::new();
        let mut predictions = Vec::new();
        for scale in [0.9, 1.0, 1.1] {
            let x: Vec<f64> = case.truth.iter().map(|v| v * scale).collect();
            let mut p = vec![0.0; model.table().row_count()];
            Objective::new(model).predict_log(&x, &mut p).unwrap();
            predictions.push(p);
            samples.extend(x);
        }
        let bands = prediction_quantiles(model, &samples, &[0.0, 0.5, 1.0]).unwrap();
        for row in 0..model.table().row_count() {
            let mut values: Vec<f64> = predictions.iter().map(|p| p[row]).collect();
            values.sort_by(f64::total_cmp);
            assert_eq!(bands[0][row], values[0]);
            assert_eq!(bands[1][row], values[1]);
            assert_eq!(bands[2][row], values[2]);
        }
        assert!(prediction_quantiles(model, &samples[1..], &[0.5]).is_err());
        assert!(prediction_quantiles(model, &samples, &[1.5]).is_err());
        let empty = prediction_quantiles(model, &[], &[0.5]).unwrap();
        assert!(empty[0].iter().all(|v| v.is_nan()));
    }
}
