//! Format 1 of a count-likelihood plan: what the model is made of (labels,
//! factors, degrees, the row and cell of every token, its count, the
//! exposure rule), the change points, the fit settings and the full-data
//! estimate. Decoding rebuilds the table with its checking constructor and
//! checks every shape and value of the estimate, so damaged bytes that still
//! decode give an error or a valid plan.

use super::FactorV1;
use crate::changepoint::DetectedChangePoints;
use crate::data::TableShape;
use crate::design::{Design, Factor, Structure};
use crate::error::{Error, Result};
use crate::nb::curve::curve_len;
use crate::nb::fit::SpeciesFit;
use crate::nb::pipeline::{CountEstimate, CountPlan};
use crate::nb::settings::CountFitSettings;
use crate::nb::solver::NewtonSettings;
use crate::nb::table::{CountTable, Exposure};
use crate::nb::unknowns::SpeciesState;
use crate::nb::CountModel;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
pub(super) struct CountPlanV1 {
    contexts: Vec<String>,
    species: Vec<String>,
    ran_levels: Vec<String>,
    factors: Vec<FactorV1>,
    degrees: Vec<usize>,
    bins: usize,
    /// Smallest distance of transition points, bins.
    point_gap: f64,
    /// 0 cells, 1 tokens, 2 none, 3 given (the exposures: format 3).
    exposure: u8,
    token_rows: Vec<Option<usize>>,
    token_counts: Vec<f64>,
    token_cells: Vec<usize>,
    change_points: Vec<Vec<Vec<f64>>>,
    settings: CountSettingsV1,
    estimate: Vec<SpeciesFitV1>,
}

#[derive(Serialize, Deserialize)]
struct CountSettingsV1 {
    max_iterations: usize,
    gradient_tolerance: f64,
    decrement_tolerance: f64,
    max_variance_updates: usize,
    variance_tolerance: f64,
    fixed_sigma: Option<[f64; 3]>,
    rise_threshold_factor: f64,
    slope_prior_sd: f64,
    step_prior_sd: f64,
    effect_prior_sd: f64,
}

#[derive(Serialize, Deserialize)]
struct SpeciesFitV1 {
    theta: Vec<Vec<f64>>,
    rho: Vec<f64>,
    u: Vec<[f64; 3]>,
    sigma: [f64; 3],
    objective: f64,
    negative_log_likelihood: f64,
    iterations: usize,
    evaluations: usize,
    variance_updates: usize,
    converged: bool,
    scaled_gradient: f64,
    on_bound: usize,
    curve_informed: Vec<Vec<bool>>,
    rho_informed: Vec<bool>,
    stop: Option<String>,
}

fn exposure_code(exposure: Exposure) -> u8 {
    match exposure {
        Exposure::Cells => 0,
        Exposure::Tokens => 1,
        Exposure::Unit => 2,
        Exposure::Given => 3,
    }
}

impl CountPlanV1 {
    pub(super) fn from_plan(plan: &CountPlan) -> Self {
        let model = &plan.model;
        let design = model.design();
        let table = model.table();
        let settings = plan.settings;
        CountPlanV1 {
            contexts: design.contexts().to_vec(),
            species: design.species().to_vec(),
            ran_levels: design.ran_levels().to_vec(),
            factors: design
                .factors()
                .iter()
                .map(|f| FactorV1 {
                    name: f.name.clone(),
                    levels: f.levels.clone(),
                    is_time_series: f.is_time_series,
                })
                .collect(),
            degrees: model.structure().degrees().to_vec(),
            bins: table.shape().bins,
            point_gap: model.point_gap(),
            exposure: exposure_code(table.exposure_kind()),
            token_rows: table.token_rows().to_vec(),
            token_counts: table.token_counts().to_vec(),
            token_cells: table.token_cells().to_vec(),
            change_points: plan.detected.change_points.clone(),
            settings: CountSettingsV1 {
                max_iterations: settings.newton.max_iterations,
                gradient_tolerance: settings.newton.gradient_tolerance,
                decrement_tolerance: settings.newton.decrement_tolerance,
                max_variance_updates: settings.max_variance_updates,
                variance_tolerance: settings.variance_tolerance,
                fixed_sigma: settings.fixed_sigma,
                rise_threshold_factor: settings.rise_threshold_factor,
                slope_prior_sd: settings.slope_prior_sd,
                step_prior_sd: settings.step_prior_sd,
                effect_prior_sd: settings.effect_prior_sd,
            },
            estimate: plan
                .estimate
                .species
                .iter()
                .map(|f| SpeciesFitV1 {
                    theta: f.state.theta.clone(),
                    rho: f.state.rho.clone(),
                    u: f.state.u.clone(),
                    sigma: f.sigma,
                    objective: f.objective,
                    negative_log_likelihood: f.negative_log_likelihood,
                    iterations: f.iterations,
                    evaluations: f.evaluations,
                    variance_updates: f.variance_updates,
                    converged: f.converged,
                    scaled_gradient: f.scaled_gradient,
                    on_bound: f.on_bound,
                    curve_informed: f.curve_informed.clone(),
                    rho_informed: f.rho_informed.clone(),
                    stop: f.stop.clone(),
                })
                .collect(),
        }
    }

    /// The plan; `token_exposures` are the tokens' exposures (given
    /// exposure only, else empty).
    pub(super) fn into_plan(self, token_exposures: Vec<f64>) -> Result<CountPlan> {
        let invalid =
            |reason: String| Error::corrupt(format!("the saved plan is invalid: {reason}"));
        let factors = self
            .factors
            .into_iter()
            .map(|f| Factor {
                name: f.name,
                levels: f.levels,
                is_time_series: f.is_time_series,
            })
            .collect();
        let design =
            Design::new(self.contexts, self.species, self.ran_levels, factors).map_err(invalid)?;
        if self.bins == 0 || self.bins > crate::rules::MAX_BINS {
            return Err(invalid(format!("{} bins", self.bins)));
        }
        let shape = TableShape {
            bins: self.bins,
            contexts: design.contexts().len(),
            species: design.species().len(),
            ran_levels: design.ran_levels().len(),
            treatments: design.treatment_count(),
        };
        let exposure = match self.exposure {
            0 => Exposure::Cells,
            1 => Exposure::Tokens,
            2 => Exposure::Unit,
            3 => Exposure::Given,
            other => return Err(invalid(format!("unknown exposure {other}"))),
        };
        let table = CountTable::from_token_rows(
            shape,
            exposure,
            self.token_rows,
            self.token_counts,
            crate::nb::table::TokenExtras {
                cells: self.token_cells,
                exposures: token_exposures,
            },
        )
        .map_err(invalid)?;
        let structure =
            Structure::new(shape.contexts, shape.species, self.degrees).map_err(invalid)?;
        let model = CountModel::new(table, design, structure, self.point_gap).map_err(invalid)?;
        let detected = DetectedChangePoints {
            structure: model.structure().clone(),
            change_points: self.change_points,
        };
        check_change_points(&model, &detected).map_err(invalid)?;
        let s = self.settings;
        let settings = CountFitSettings {
            newton: NewtonSettings {
                max_iterations: s.max_iterations,
                gradient_tolerance: s.gradient_tolerance,
                decrement_tolerance: s.decrement_tolerance,
                trace: false,
            },
            max_variance_updates: s.max_variance_updates,
            variance_tolerance: s.variance_tolerance,
            fixed_sigma: s.fixed_sigma,
            rise_threshold_factor: s.rise_threshold_factor,
            slope_prior_sd: s.slope_prior_sd,
            step_prior_sd: s.step_prior_sd,
            effect_prior_sd: s.effect_prior_sd,
            // Format 2's extras carry it (see `PlanExtrasV2`).
            fixed_dispersion: None,
        };
        settings.validate().map_err(invalid)?;
        if self.estimate.len() != shape.species {
            return Err(invalid(format!(
                "an estimate for {} species, the model has {}",
                self.estimate.len(),
                shape.species
            )));
        }
        let species = self
            .estimate
            .into_iter()
            .enumerate()
            .map(|(s, wire)| species_fit(&model, s, wire))
            .collect::<std::result::Result<Vec<_>, String>>()
            .map_err(invalid)?;
        Ok(CountPlan {
            model,
            detected,
            settings,
            estimate: CountEstimate { species },
        })
    }
}

/// Change points for every curve and treatment, as many as the curve's
/// degree, inside the bin axis.
fn check_change_points(
    model: &CountModel,
    detected: &DetectedChangePoints,
) -> std::result::Result<(), String> {
    let structure = model.structure();
    let treatments = model.design().treatment_count();
    let bins = model.table().shape().bins as f64;
    if detected.change_points.len() != structure.degrees().len() {
        return Err(format!(
            "change points for {} curves, the model has {}",
            detected.change_points.len(),
            structure.degrees().len()
        ));
    }
    for (curve, (points, &degree)) in detected
        .change_points
        .iter()
        .zip(structure.degrees())
        .enumerate()
    {
        let valid = points.len() == treatments
            && points.iter().all(|p| {
                p.len() == degree
                    && p.iter()
                        .all(|v| v.is_finite() && *v >= 0.0 && *v <= bins + 1.0)
            });
        if !valid {
            return Err(format!(
                "curve {curve} needs {degree} change points within the bins for each of {treatments} treatments"
            ));
        }
    }
    Ok(())
}

/// One species' estimate, every shape and value checked.
fn species_fit(
    model: &CountModel,
    species: usize,
    wire: SpeciesFitV1,
) -> std::result::Result<SpeciesFit, String> {
    let shape = model.table().shape();
    let finite = |v: &f64| v.is_finite();
    let curves = shape.contexts * shape.treatments;
    if wire.theta.len() != curves || wire.curve_informed.len() != curves {
        return Err(format!(
            "species {species}: values for {} curves, expected {curves}",
            wire.theta.len()
        ));
    }
    for (curve, (theta, informed)) in wire.theta.iter().zip(&wire.curve_informed).enumerate() {
        let degree = model.structure().degree(curve / shape.treatments, species);
        if theta.len() != curve_len(degree)
            || informed.len() != theta.len()
            || !theta.iter().all(finite)
        {
            return Err(format!(
                "species {species}, curve {curve}: {} values for degree {degree}",
                theta.len()
            ));
        }
    }
    let ok = wire.rho.len() == shape.contexts
        && wire.rho_informed.len() == shape.contexts
        && wire.rho.iter().all(finite)
        && wire.u.len() == shape.ran_levels
        && wire.u.iter().all(|u| u.iter().all(finite))
        && wire.sigma.iter().all(|s| s.is_finite() && *s >= 0.0)
        && (model.has_random_effects() || wire.sigma == [0.0; 3]);
    if !ok {
        return Err(format!(
            "species {species}: dispersions or random effects do not fit the model"
        ));
    }
    Ok(SpeciesFit {
        species,
        state: SpeciesState {
            theta: wire.theta,
            rho: wire.rho,
            u: wire.u,
        },
        sigma: wire.sigma,
        objective: wire.objective,
        negative_log_likelihood: wire.negative_log_likelihood,
        iterations: wire.iterations,
        evaluations: wire.evaluations,
        variance_updates: wire.variance_updates,
        converged: wire.converged,
        scaled_gradient: wire.scaled_gradient,
        on_bound: wire.on_bound,
        curve_informed: wire.curve_informed,
        rho_informed: wire.rho_informed,
        stop: wire.stop,
        trace: Vec::new(),
    })
}
