//! The bootstrap (model vignette §14): the plan a fit keeps, one replicate
//! (resample tokens within cells, recompute the "none" rows, dispersion and
//! initial values with the structure kept fixed, and fit), and a batch of
//! replicates on the fork engine. The fork engine, mclapply, the serial loop
//! and future workers all run [`Plan::run_replicate`], so a replicate's
//! result depends only on (plan, seed, replicate number).

use crate::checkpoint::{self, Entry};
use crate::design::ParameterRole;
use crate::engine::{self, procmem, PoolOptions, TaskRecord};
use crate::error::{Error, Result};
use crate::nb::pipeline::CountPlan;
pub(crate) use crate::original::replicate::WarpedSigmoidPlan;
#[cfg(test)]
use crate::original::Model;
use crate::outcome::{FitSummary, Outcome, ProcessStats};
use crate::resample::{ReplicatePlan, Resampling};
use std::path::Path;
use std::time::Instant;

/// What a fit keeps so that it can be bootstrapped and predicted later. One
/// variant per likelihood; [`crate::saved`] stores it.
#[derive(Clone, Debug)]
pub(crate) enum Plan {
    /// The original's objective with its detected structure
    /// (`likelihood = "original"`).
    WarpedSigmoid(WarpedSigmoidPlan),
    /// The count likelihood with its structure and full-data estimate
    /// (`likelihood = "nb"`).
    Count(CountPlan),
}

impl Plan {
    /// The plan of its likelihood, as the bootstrap sees every likelihood.
    fn likelihood_plan(&self) -> &dyn ReplicatePlan {
        match self {
            Plan::WarpedSigmoid(plan) => plan,
            Plan::Count(plan) => plan,
        }
    }

    /// The names of the estimates a fit of this plan reports, in order.
    pub(crate) fn parameter_names(&self) -> Vec<String> {
        self.likelihood_plan().parameter_names()
    }

    pub(crate) fn parameter_count(&self) -> usize {
        self.parameter_names().len()
    }

    /// The original likelihood's model (tests of the saved state).
    #[cfg(test)]
    pub(crate) fn model(&self) -> &Model {
        match self {
            Plan::WarpedSigmoid(plan) => &plan.model,
            Plan::Count(_) => panic!("a count plan has no model of the original's kind"),
        }
    }

    /// Per random level, its group under the `animals` scheme (levels that
    /// share their between-animal factor levels share a group).
    pub(crate) fn animal_groups(&self) -> Vec<usize> {
        self.likelihood_plan().animal_groups()
    }

    /// The likelihood's name as R knows it.
    pub(crate) fn likelihood(&self) -> &'static str {
        self.likelihood_plan().likelihood()
    }

    /// Runs replicate `replicate` (from 1) of the bootstrap seeded with
    /// `seed`, the data redrawn by `scheme`.
    ///
    /// Under `Animals`, the replicate's animal r is whichever animal was
    /// drawn into slot r, so its warping factors are not comparable across
    /// replicates: they are reported as NaN (the fixed effects, variances
    /// and dispersions are).
    pub(crate) fn run_replicate(
        &self,
        scheme: Resampling,
        seed: u64,
        replicate: usize,
    ) -> std::result::Result<FitSummary, String> {
        let plan = self.likelihood_plan();
        let mut summary = plan.run_replicate(scheme, seed, replicate)?;
        if scheme == Resampling::Animals {
            let roles = plan.parameter_roles()?;
            for (value, role) in summary.parameters.iter_mut().zip(&roles) {
                if matches!(role, ParameterRole::Warp { .. }) {
                    *value = f64::NAN;
                }
            }
        }
        Ok(summary)
    }
}

/// The outcome of a replicate run in this process, timed and with this
/// process's memory (the serial, mclapply and future backends): the peak
/// RSS, and with `memory` the PSS and private dirty too (they cost a walk of
/// the process's page tables, so R asks for them once per worker).
pub(crate) fn replicate_here(
    plan: &Plan,
    scheme: Resampling,
    seed: u64,
    replicate: usize,
    trim: bool,
    memory: bool,
) -> Outcome {
    let started = Instant::now();
    let fit = plan
        .run_replicate(scheme, seed, replicate)
        .map_err(|message| format!("error: {message}"));
    if trim {
        procmem::trim_heap();
    }
    let seconds = started.elapsed().as_secs_f64();
    let memory = if memory {
        procmem::snapshot_self()
    } else {
        procmem::snapshot_peak()
    };
    Outcome {
        replicate,
        fit,
        process: ProcessStats {
            seconds: Some(seconds),
            pid: i32::try_from(std::process::id()).ok(),
            peak_rss_mb: memory.peak_rss_mb,
            pss_mb: memory.pss_mb,
            private_dirty_mb: memory.private_dirty_mb,
        },
    }
}

/// The outcome of a replicate as the fork engine recorded it.
fn outcome_of(record: &TaskRecord<FitSummary>) -> Outcome {
    Outcome {
        replicate: record.task,
        fit: record
            .outcome
            .clone()
            .map_err(|failure| failure.to_string()),
        process: ProcessStats {
            seconds: Some(record.seconds).filter(|s| s.is_finite()),
            pid: Some(record.pid).filter(|&p| p > 0),
            peak_rss_mb: record.memory.peak_rss_mb,
            pss_mb: record.memory.pss_mb,
            private_dirty_mb: record.memory.private_dirty_mb,
        },
    }
}

/// Where a batch appends its outcomes as they arrive.
pub(crate) struct CheckpointTarget<'a> {
    pub(crate) path: &'a Path,
    /// Fingerprint of the plan, stored with every entry.
    pub(crate) plan_hash: u64,
    /// The seed as R gave it, stored with every entry.
    pub(crate) seed: f64,
}

/// A batch's outcomes, in the order of the replicate numbers.
#[derive(Debug)]
pub(crate) struct BatchResult {
    pub(crate) outcomes: Vec<Outcome>,
    /// Ctrl-C stopped the run; unfinished replicates failed with "interrupted".
    pub(crate) interrupted: bool,
    /// The first checkpoint write that failed, if any (the run went on).
    pub(crate) checkpoint_error: Option<String>,
}

/// A batch of replicates for the fork engine.
pub(crate) struct BatchRun<'a> {
    pub(crate) plan: &'a Plan,
    pub(crate) scheme: Resampling,
    pub(crate) seed: u64,
    /// Replicate numbers, from 1.
    pub(crate) replicates: &'a [usize],
    pub(crate) options: &'a PoolOptions,
    /// Return freed heap to the system after each replicate.
    pub(crate) trim: bool,
    pub(crate) checkpoint: Option<CheckpointTarget<'a>>,
}

impl BatchRun<'_> {
    /// Runs the replicates on the fork engine. With a checkpoint (a file
    /// prepared by [`checkpoint::open`]), the parent appends every outcome to
    /// it, fsync'd, as it arrives; `on_outcome` is told too (for progress).
    /// An interrupt returns the outcomes finished so far with `interrupted` set.
    pub(crate) fn run(
        &self,
        interrupted: impl FnMut() -> bool,
        mut on_outcome: impl FnMut(&Outcome),
    ) -> Result<BatchResult> {
        let mut appender = match &self.checkpoint {
            Some(target) => Some(checkpoint::Appender::new(target.path).map_err(Error::from)?),
            None => None,
        };
        let mut checkpoint_error: Option<String> = None;
        let (plan, scheme, seed, trim) = (self.plan, self.scheme, self.seed, self.trim);
        let batch = engine::run_tasks(
            self.replicates,
            self.options,
            |context| {
                #[cfg(feature = "test-hooks")]
                crate::faults::strike_armed(context.task);
                let result = plan.run_replicate(scheme, seed, context.task);
                if trim {
                    procmem::trim_heap();
                }
                result
            },
            interrupted,
            |record| {
                let outcome = outcome_of(record);
                if let (Some(writer), Some(target), None) =
                    (appender.as_mut(), &self.checkpoint, &checkpoint_error)
                {
                    let entry = Entry {
                        plan_hash: target.plan_hash,
                        seed: target.seed,
                        outcome: outcome.clone(),
                    };
                    if let Err(e) = writer.append(&entry) {
                        checkpoint_error = Some(format!("replicate {}: {e}", record.task));
                    }
                }
                on_outcome(&outcome);
            },
        )?;
        Ok(BatchResult {
            outcomes: batch.records.iter().map(outcome_of).collect(),
            interrupted: batch.interrupted,
            checkpoint_error,
        })
    }
}
