//! The LRO grid search's points (model vignette §12.3), shared by both
//! likelihoods: the grid of detection settings, one point's fit and its
//! information criteria, and the grouping of points by what they detect.

use super::{DetectedStructure, DetectionSettings};
use crate::outcome::FitSummary;

/// The grid of the LRO search: 1.00, 1.25, …, 3.00 for both the window
/// factor and the cutoff (81 pairs), as the original.
pub(crate) fn lro_grid() -> Vec<(f64, f64)> {
    let values: Vec<f64> = (0..9).map(|i| 1.0 + 0.25 * i as f64).collect();
    values
        .iter()
        .flat_map(|&window| values.iter().map(move |&cutoff| (window, cutoff)))
        .collect()
}

/// One point of the grid search and the fit of its structure.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct GridPoint {
    pub(crate) window_factor: f64,
    pub(crate) cutoff: f64,
    /// Which distinct detected structure the point has (from 0).
    pub(crate) structure: usize,
    /// Estimated parameters of the structure's model (AIC's and BIC's k).
    pub(crate) parameters: usize,
    /// The structure's fit, or why it failed.
    pub(crate) fit: Result<FitSummary, String>,
}

impl GridPoint {
    /// Number of fitted parameters (0 when the fit failed).
    pub(crate) fn parameter_count(&self) -> usize {
        if self.fit.is_ok() {
            self.parameters
        } else {
            0
        }
    }

    /// The negative log-likelihood (NaN when the fit failed).
    pub(crate) fn nll(&self) -> f64 {
        self.fit.as_ref().map_or(f64::NAN, |f| f.nll)
    }

    /// AIC = 2(k + nll).
    pub(crate) fn aic(&self) -> f64 {
        2.0 * (self.parameter_count() as f64 + self.nll())
    }

    /// BIC = k·ln(n) + 2·nll (the original counted the k term twice).
    pub(crate) fn bic(&self, observations: usize) -> f64 {
        self.parameter_count() as f64 * (observations as f64).ln() + 2.0 * self.nll()
    }
}

/// Groups grid points whose detection gives the same structure and change
/// points: their fits are identical, so each distinct one is fitted once.
/// Returns the distinct detections and, per grid point, its index into them.
pub(crate) fn distinct_detections_by(
    grid: &[(f64, f64)],
    template: &DetectionSettings,
    detect: impl Fn(&DetectionSettings) -> Result<DetectedStructure, String>,
) -> Result<(Vec<DetectedStructure>, Vec<usize>), String> {
    let mut distinct: Vec<DetectedStructure> = Vec::new();
    let mut index_of_point = Vec::with_capacity(grid.len());
    for &(window, cutoff) in grid {
        let settings = DetectionSettings {
            lro_window_factor: window,
            lro_cutoff: cutoff,
            ..*template
        };
        let detected = detect(&settings)?;
        let index = match distinct.iter().position(|d| d == &detected) {
            Some(index) => index,
            None => {
                distinct.push(detected);
                distinct.len() - 1
            }
        };
        index_of_point.push(index);
    }
    Ok((distinct, index_of_point))
}
