//! The LRO grid search's points (model vignette §12.3), shared by both
//! likelihoods: the grid of detection settings, one point's fit and its
//! information criteria, and the grouping of points by what they detect.

use super::{DetectedChangePoints, DetectionSettings};
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
    detect: impl Fn(&DetectionSettings) -> Result<DetectedChangePoints, String>,
) -> Result<(Vec<DetectedChangePoints>, Vec<usize>), String> {
    let mut distinct: Vec<DetectedChangePoints> = Vec::new();
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

/// How the number of transitions of each curve is found when the user's
/// `degrees` do not fix them all (`model.settings$structure`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StructureMethod {
    /// Each curve's degree chosen by BIC on count-likelihood fits (model
    /// vignette §12.6; the count model only).
    Likelihood,
    /// Change-point detection, tuned by the LRO grid search unless its cost
    /// is "none" (§12.1–12.3).
    Lro,
}

impl StructureMethod {
    /// The method a setting names under a likelihood ("nb" or "original"):
    /// "auto" is "likelihood" under "nb" and "lro" under "original", the only
    /// one the original likelihood has.
    pub(crate) fn resolve(name: &str, likelihood: &str) -> Result<Self, String> {
        let method = match name {
            "auto" if likelihood == "original" => StructureMethod::Lro,
            "auto" | "likelihood" => StructureMethod::Likelihood,
            "lro" => StructureMethod::Lro,
            other => {
                return Err(format!(
                    "structure must be \"auto\", \"likelihood\" or \"lro\", not \"{other}\""
                ))
            }
        };
        if method == StructureMethod::Likelihood && likelihood != "nb" {
            return Err(
                "structure = \"likelihood\" chooses degrees by count-likelihood fits, which \
                 need likelihood = \"nb\""
                    .into(),
            );
        }
        Ok(method)
    }
}

/// What the grid search minimises over its points (`LRO_cost`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GridCost {
    Nll,
    Aic,
    Bic,
}

impl GridCost {
    /// The cost an `LRO_cost` names; `None` for "none" (no grid search).
    pub(crate) fn from_name(name: &str) -> Result<Option<Self>, String> {
        match name {
            "none" => Ok(None),
            "NLL" => Ok(Some(GridCost::Nll)),
            "AIC" => Ok(Some(GridCost::Aic)),
            "BIC" => Ok(Some(GridCost::Bic)),
            other => Err(format!(
                "LRO_cost must be \"none\", \"NLL\", \"AIC\" or \"BIC\", not \"{other}\""
            )),
        }
    }

    fn of(self, point: &GridPoint, observations: usize) -> f64 {
        match self {
            GridCost::Nll => point.nll(),
            GridCost::Aic => point.aic(),
            GridCost::Bic => point.bic(observations),
        }
    }
}

/// The index of the grid point of least finite cost (the first of equals),
/// for either likelihood; an error when every point's fit failed.
pub(crate) fn best_point(
    points: &[GridPoint],
    cost: GridCost,
    observations: usize,
) -> Result<usize, String> {
    points
        .iter()
        .enumerate()
        .filter(|(_, p)| cost.of(p, observations).is_finite())
        .min_by(|(_, a), (_, b)| {
            cost.of(a, observations)
                .total_cmp(&cost.of(b, observations))
        })
        .map(|(index, _)| index)
        .ok_or_else(|| {
            "every fit of the LRO grid search failed; set model.settings$LRO_cost = \"none\""
                .to_string()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(nll: f64, parameters: usize) -> GridPoint {
        GridPoint {
            window_factor: 1.0 + nll,
            cutoff: 2.0,
            structure: 0,
            parameters,
            fit: if nll.is_nan() {
                Err("failed".into())
            } else {
                Ok(FitSummary {
                    parameters: vec![0.0; parameters],
                    objective: nll,
                    nll,
                    code: "converged".into(),
                    converged: true,
                    iterations: 1,
                    evaluations: 1,
                    max_gradient: 0.0,
                    on_bound: 0,
                    seconds: 0.0,
                })
            },
        }
    }

    #[test]
    fn the_best_point_is_the_first_of_least_finite_cost() {
        // AIC = 2(k + nll): 2(3 + 10) = 26, 2(1 + 12) = 26, 2(5 + 9) = 28.
        let points = [
            point(10.0, 3),
            point(f64::NAN, 1),
            point(12.0, 1),
            point(9.0, 5),
        ];
        let best = best_point(&points, GridCost::Aic, 100).unwrap();
        assert_eq!(best, 0);
        // NLL alone: 9 is least.
        assert_eq!(best_point(&points, GridCost::Nll, 100).unwrap(), 3);
        // BIC = k ln n + 2 nll with n = 100: 3(4.605) + 20 = 33.8, 1(4.605) + 24 = 28.6, 5(4.605) + 18 = 41.0.
        assert_eq!(best_point(&points, GridCost::Bic, 100).unwrap(), 2);
        assert!(best_point(&[point(f64::NAN, 1)], GridCost::Aic, 10).is_err());
    }

    #[test]
    fn auto_structure_follows_the_likelihood() {
        assert_eq!(
            StructureMethod::resolve("auto", "nb"),
            Ok(StructureMethod::Likelihood)
        );
        assert_eq!(
            StructureMethod::resolve("auto", "original"),
            Ok(StructureMethod::Lro)
        );
        assert_eq!(
            StructureMethod::resolve("lro", "nb"),
            Ok(StructureMethod::Lro)
        );
        assert!(StructureMethod::resolve("likelihood", "original").is_err());
        assert!(StructureMethod::resolve("best", "nb").is_err());
        assert_eq!(GridCost::from_name("none"), Ok(None));
        assert!(GridCost::from_name("aic").is_err());
    }
}
