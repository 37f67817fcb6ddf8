//! The original likelihood's bootstrap plan and one replicate of it (model
//! vignette §14): tokens redrawn within cells or animals within their
//! groups, the structure kept, and the fit started afresh.

use super::pipeline::{fit_structure, PipelineSettings};
use super::Model;
use crate::changepoint::DetectedChangePoints;
use crate::design::ParameterRole;
use crate::outcome::FitSummary;
use crate::resample::{ReplicatePlan, Resampling};
use crate::streams::{replicate_redraw_stream, replicate_warp_stream, TaskStream};

/// Everything a replicate of the warped-sigmoid model needs.
#[derive(Clone, Debug)]
pub(crate) struct WarpedSigmoidPlan {
    /// The full-data model, its structure included.
    pub(crate) model: Model,
    /// Degrees and change points of the full-data fit, kept for every replicate.
    pub(crate) detected: DetectedChangePoints,
    pub(crate) settings: PipelineSettings,
}

impl ReplicatePlan for WarpedSigmoidPlan {
    fn likelihood(&self) -> &'static str {
        "original"
    }

    fn parameter_names(&self) -> Vec<String> {
        self.model.parameter_names()
    }

    fn parameter_roles(&self) -> Result<Vec<ParameterRole>, String> {
        Ok(self.model.layout().roles())
    }

    fn animal_groups(&self) -> Vec<usize> {
        crate::resample::animal_groups(
            self.model.design(),
            self.model.design().ran_levels().len(),
            |animal, context, treatment| {
                self.model
                    .table()
                    .animal_has_data(animal, context, treatment)
            },
        )
    }

    fn run_replicate(
        &self,
        scheme: Resampling,
        seed: u64,
        replicate: usize,
    ) -> Result<FitSummary, String> {
        crate::streams::check_replicate_number(replicate)?;
        let mut model = self.model.clone();
        let mut stream = TaskStream::new(seed, replicate_redraw_stream(replicate));
        match scheme {
            Resampling::Cells => model
                .table_mut()
                .resample_pools(|n| stream.below(n as u64) as usize)?,
            Resampling::Animals => {
                let groups = self.animal_groups();
                let mapping =
                    crate::resample::draw_animals(&groups, |n| stream.below(n as u64) as usize);
                model.table_mut().copy_animals(&mapping);
            }
            Resampling::Parametric => {
                return Err(
                    "the parametric bootstrap needs the count likelihood (likelihood = \"nb\"); \
                     the original's objective is not a likelihood to draw from"
                        .into(),
                )
            }
        }
        let (_, _, result) = fit_structure(
            &model,
            &self.detected,
            &self.settings,
            seed,
            replicate_warp_stream(replicate),
        )?;
        Ok(result)
    }
}
