//! R entry points for the bootstrap: plan checks, the fork-engine batch,
//! single replicates for the in-process backends, and their outcomes.

use super::{
    index_column, outcome_bytes, outcome_columns, outcome_from_bytes, pool_options, seed_value,
    user_interrupt_pending, RResult, Relay,
};
use crate::bootstrap::{self, CheckpointTarget};
use crate::checkpoint;
use crate::codec::fnv1a64;
use crate::error::Error;
use crate::outcome::{estimate_rows, Outcome};
use crate::resample::Resampling;
use crate::saved;
use extendr_api::prelude::*;

/// The checkpoint key of a plan and resampling scheme: a fingerprint of the
/// plan's bytes (and of the scheme's name, for any scheme but "cells", whose
/// key is the plan's alone as it always was), in hex.
fn plan_key(plan: &Raw, scheme: Resampling) -> String {
    let hash = match scheme {
        Resampling::Cells => fnv1a64(&[plan.as_slice()]),
        other => fnv1a64(&[plan.as_slice(), other.name().as_bytes()]),
    };
    format!("{hash:016x}")
}

fn scheme(name: &str) -> RResult<Resampling> {
    Resampling::parse(name).map_err(Error::input)
}

fn plan_hash(key: &str) -> RResult<u64> {
    u64::from_str_radix(key, 16).map_err(|_| Error::input("bad checkpoint key"))
}

fn checkpoint_target<'a>(
    path: &'a str,
    key: &str,
    seed: f64,
) -> RResult<Option<CheckpointTarget<'a>>> {
    if path.is_empty() {
        return Ok(None);
    }
    Ok(Some(CheckpointTarget {
        path: std::path::Path::new(path),
        plan_hash: plan_hash(key)?,
        seed,
    }))
}

/// Decodes a fit's saved plan (checking it); returns its parameter names,
/// its likelihood, its checkpoint key for the resampling scheme and the
/// format it was saved in (0: wispack 0.1.0).
/// @keywords internal
/// @noRd
#[extendr]
fn plan_info_rust(plan: Raw, resample: &str) -> RResult<List> {
    let decoded = saved::decode_plan(plan.as_slice())?;
    Ok(list!(
        parameter_names = decoded.parameter_names(),
        likelihood = decoded.likelihood(),
        key = plan_key(&plan, scheme(resample)?),
        animal_groups = decoded
            .animal_groups()
            .into_iter()
            .map(|g| g as i32)
            .collect::<Vec<i32>>(),
        format = saved::format_of(plan.as_slice()) as i32
    ))
}

/// Bootstrap replicates on the fork engine. With a non-empty `checkpoint`
/// path (a file prepared by `checkpoint_open_rust`), the parent appends every
/// replicate's outcome to it, fsync'd, as it arrives. A Ctrl-C returns the
/// replicates finished so far with `interrupted = TRUE`. `on_result(replicate,
/// ok)` is called (through a [`Relay`]) as each replicate ends; a jump out of
/// it stops the run and is handed back to R to resume.
/// @keywords internal
/// @noRd
#[extendr]
#[allow(clippy::too_many_arguments)]
fn bootstrap_fork_rust(
    plan: Raw,
    resample: &str,
    seed: f64,
    replicates: Vec<i32>,
    workers: i32,
    tasks_per_child: i32,
    schedule: &str,
    timeout: f64,
    memory_limit_mb: Option<f64>,
    memory_per_task: Option<bool>,
    trim_memory: bool,
    on_result: Robj,
    checkpoint: &str,
    key: &str,
) -> RResult<List> {
    let decoded = saved::decode_plan(plan.as_slice())?;
    let options = pool_options(
        workers,
        tasks_per_child,
        schedule,
        timeout,
        memory_limit_mb,
        memory_per_task,
    )?;
    let replicates = index_column(replicates, "replicates")?;
    let relay = Relay::new(on_result);
    let batch = bootstrap::BatchRun {
        plan: &decoded,
        scheme: scheme(resample)?,
        seed: seed_value(seed)?,
        replicates: &replicates,
        options: &options,
        trim: trim_memory,
        checkpoint: checkpoint_target(checkpoint, key, seed)?,
    };
    let result = batch.run(
        || relay.jumped() || user_interrupt_pending(),
        |outcome| relay.call(pairlist!(outcome.replicate as i32, outcome.fit.is_ok())),
    );
    let parameter_count = decoded.parameter_count();
    relay.result(result.map(|result| {
        list!(
            diagnostics = outcome_columns(&result.outcomes),
            estimates = estimate_rows(&result.outcomes, parameter_count),
            parameter_count = parameter_count as i32,
            interrupted = result.interrupted,
            checkpoint_error = r!(result.checkpoint_error)
        )
    }))
}

/// One bootstrap replicate in this process (serial, mclapply and future
/// paths): its outcome as bytes, appended to `checkpoint` when one is given
/// (`checkpointed` says whether that worked). `memory`: read PSS and private
/// dirty too (a walk of the page tables), not only the peak RSS.
/// @keywords internal
/// @noRd
#[extendr]
#[allow(clippy::too_many_arguments)]
fn bootstrap_replicate_rust(
    plan: Raw,
    resample: &str,
    seed: f64,
    replicate: i32,
    trim_memory: bool,
    memory: bool,
    checkpoint: &str,
    key: &str,
) -> RResult<List> {
    let decoded = saved::decode_plan(plan.as_slice())?;
    let replicate = super::count_option(replicate, "replicate")?;
    let outcome = bootstrap::replicate_here(
        &decoded,
        scheme(resample)?,
        seed_value(seed)?,
        replicate,
        trim_memory,
        memory,
    );
    let checkpointed = match checkpoint_target(checkpoint, key, seed)? {
        None => false,
        Some(target) => checkpoint::Appender::new(target.path)
            .and_then(|mut appender| {
                appender.append(&checkpoint::Entry {
                    plan_hash: target.plan_hash,
                    seed: target.seed,
                    outcome: outcome.clone(),
                })
            })
            .is_ok(),
    };
    Ok(list!(
        outcome = outcome_bytes(&outcome)?,
        checkpointed = checkpointed
    ))
}

/// The outcome of a replicate that produced no result in R (e.g. its
/// mclapply worker died), as bytes.
/// @keywords internal
/// @noRd
#[extendr]
fn outcome_failure_rust(replicate: i32, reason: &str) -> RResult<Raw> {
    let replicate = super::count_option(replicate, "replicate")?;
    outcome_bytes(&Outcome::failed(replicate, reason))
}

/// The diagnostics columns and estimates (one row after another) of
/// outcomes given as bytes.
/// @keywords internal
/// @noRd
#[extendr]
fn outcome_table_rust(outcomes: List, parameter_count: i32) -> RResult<List> {
    let outcomes = outcomes
        .values()
        .map(|value| {
            let bytes =
                Raw::try_from(value).map_err(|_| Error::input("outcomes must be raw vectors"))?;
            outcome_from_bytes(&bytes)
        })
        .collect::<RResult<Vec<Outcome>>>()?;
    let parameter_count = super::index_option(parameter_count, "parameter_count")?;
    Ok(list!(
        diagnostics = outcome_columns(&outcomes),
        estimates = estimate_rows(&outcomes, parameter_count)
    ))
}

/// Arms the faults that the fork backend's replicates then commit (test
/// hook): a named list of replicate numbers per fault ("kill", "segfault",
/// "panic", "hang", "allocate"); an empty list disarms.
/// @keywords internal
/// @noRd
#[extendr]
#[cfg_attr(not(feature = "test-hooks"), allow(unused_variables))]
fn faults_arm_rust(faults: List) -> RResult<()> {
    #[cfg(feature = "test-hooks")]
    return {
        use crate::faults::{self, Fault, FaultPlan};
        let mut plan = FaultPlan::default();
        for (name, tasks) in faults.iter() {
            let fault = Fault::from_name(name)
                .ok_or_else(|| Error::input(format!("unknown fault \"{name}\"")))?;
            let tasks = tasks
                .as_integer_vector()
                .ok_or_else(|| Error::input("fault tasks must be integers"))?;
            plan.add(
                fault,
                tasks.into_iter().filter_map(|t| usize::try_from(t).ok()),
            );
        }
        faults::arm((!faults.is_empty()).then_some(plan));
        Ok(())
    };
    #[cfg(not(feature = "test-hooks"))]
    Err(super::without_test_hooks("inject_faults()"))
}

extendr_module! {
    mod bootstrap;
    fn plan_info_rust;
    fn bootstrap_fork_rust;
    fn bootstrap_replicate_rust;
    fn outcome_failure_rust;
    fn outcome_table_rust;
    fn faults_arm_rust;
}
