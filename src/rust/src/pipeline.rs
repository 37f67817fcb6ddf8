//! From a model without structure to a fitted model: change-point detection,
//! initial values, feasibility repair and the L-BFGS fit (spec sections 3
//! and 4), and the LRO grid search over detection settings (3.4).

use crate::fit::{fit, repair_feasibility, FitResult, FitSettings, RepairOutcome};
use crate::model::{Model, Structure};
use crate::structure::{
    detect_structure, initial_parameters_with_stream, DetectedStructure, DetectionSettings,
};
use serde::{Deserialize, Serialize};

/// Random stream of the full-data fit's starting warping factors.
/// Bootstrap replicates use other streams (see [`crate::bootstrap`]).
pub const FULL_FIT_WARP_STREAM: u64 = 0;

/// The model with a structure, where it started and how the fit went.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StructuredFit {
    pub model: Model,
    pub detected: DetectedStructure,
    pub start: Vec<f64>,
    pub repair: RepairOutcome,
    pub fit: FitResult,
}

/// The same data and design with other degrees.
pub fn with_structure(base: &Model, structure: Structure) -> Result<Model, String> {
    Model::new(
        base.table().clone(),
        base.design().clone(),
        structure,
        *base.settings(),
    )
}

/// Initial values (with warps from `warp_stream`), feasibility repair and fit
/// for a model whose structure was already detected.
pub fn fit_structure(
    model: &Model,
    detected: &DetectedStructure,
    fit_settings: &FitSettings,
    seed: u64,
    warp_stream: u64,
) -> Result<(Vec<f64>, RepairOutcome, FitResult), String> {
    let mut start = initial_parameters_with_stream(model, detected, seed, warp_stream)?;
    let repair = repair_feasibility(model, &mut start, fit_settings)?;
    if !repair.feasible {
        return Err(format!(
            "no feasible starting point after {} repair attempts (smallest boundary distance {:.3e})",
            repair.attempts, repair.min_distance
        ));
    }
    let result = fit(model, &start, fit_settings)?;
    Ok((start, repair, result))
}

/// Detects the structure of `base`'s data and fits it.
pub fn detect_and_fit(
    base: &Model,
    detection: &DetectionSettings,
    fit_settings: &FitSettings,
    seed: u64,
) -> Result<StructuredFit, String> {
    let detected = detect_structure(base.table(), base.design(), detection)?;
    let model = with_structure(base, detected.structure.clone())?;
    let (start, repair, fit) =
        fit_structure(&model, &detected, fit_settings, seed, FULL_FIT_WARP_STREAM)?;
    Ok(StructuredFit {
        model,
        detected,
        start,
        repair,
        fit,
    })
}

/// The grid of the LRO search: 1.00, 1.25, …, 3.00 for both the window
/// factor and the cutoff (81 pairs), as the original.
pub fn lro_grid() -> Vec<(f64, f64)> {
    let values: Vec<f64> = (0..9).map(|i| 1.0 + 0.25 * i as f64).collect();
    values
        .iter()
        .flat_map(|&window| values.iter().map(move |&cutoff| (window, cutoff)))
        .collect()
}

/// One grid point's fit, summarised.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GridOutcome {
    pub nll: f64,
    pub penalized_nll: f64,
    pub code: String,
    pub converged: bool,
    pub parameters: usize,
}

impl GridOutcome {
    pub fn failed(reason: String) -> Self {
        GridOutcome {
            nll: f64::NAN,
            penalized_nll: f64::NAN,
            code: format!("failed: {reason}"),
            converged: false,
            parameters: 0,
        }
    }

    /// AIC = 2(k + nll).
    pub fn aic(&self) -> f64 {
        2.0 * (self.parameters as f64 + self.nll)
    }

    /// BIC = k·ln(n) + 2·nll (the original counted the k term twice).
    pub fn bic(&self, observations: usize) -> f64 {
        self.parameters as f64 * (observations as f64).ln() + 2.0 * self.nll
    }
}

/// Fits one detected structure for the grid search.
pub fn grid_fit(
    base: &Model,
    detected: &DetectedStructure,
    fit_settings: &FitSettings,
    seed: u64,
) -> GridOutcome {
    let attempt = with_structure(base, detected.structure.clone()).and_then(|model| {
        let (_, _, result) =
            fit_structure(&model, detected, fit_settings, seed, FULL_FIT_WARP_STREAM)?;
        Ok(GridOutcome {
            nll: result.nll,
            penalized_nll: result.penalized_nll,
            code: result.code.to_string(),
            converged: result.code.is_converged(),
            parameters: model.parameter_count(),
        })
    });
    attempt.unwrap_or_else(GridOutcome::failed)
}

/// Groups grid points whose detection gives the same structure and change
/// points: their fits are identical, so each distinct one is fitted once.
/// Returns the distinct detections and, per grid point, its index into them.
pub fn distinct_detections(
    base: &Model,
    grid: &[(f64, f64)],
    template: &DetectionSettings,
) -> Result<(Vec<DetectedStructure>, Vec<usize>), String> {
    let mut distinct: Vec<DetectedStructure> = Vec::new();
    let mut index_of_point = Vec::with_capacity(grid.len());
    for &(window, cutoff) in grid {
        let settings = DetectionSettings {
            lro_window_factor: window,
            lro_cutoff: cutoff,
            ..*template
        };
        let detected = detect_structure(base.table(), base.design(), &settings)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grid_has_81_pairs_from_1_to_3() {
        let grid = lro_grid();
        assert_eq!(grid.len(), 81);
        assert_eq!(grid[0], (1.0, 1.0));
        assert_eq!(grid[1], (1.0, 1.25));
        assert_eq!(grid[80], (3.0, 3.0));
    }

    #[test]
    fn information_criteria_follow_their_definitions() {
        let outcome = GridOutcome {
            nll: 100.0,
            penalized_nll: 101.0,
            code: "converged".into(),
            converged: true,
            parameters: 10,
        };
        assert_eq!(outcome.aic(), 220.0);
        assert!((outcome.bic(1000) - (10.0 * 1000f64.ln() + 200.0)).abs() < 1e-12);
    }
}
