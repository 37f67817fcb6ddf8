//! The one loop that runs tasks 1..=n for the core (fits of species, of
//! grid points, of structure candidates), with progress and interrupts:
//! here, one after another, with one worker or a single task; on the
//! engine's workers otherwise. Either way a task's own error is
//! [`Failure::Task`] and an interrupt is one error with one message, so
//! callers treat every worker count alike.

use super::{run_tasks, Failure, MemoryReport, PoolOptions};
use crate::error::Error;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// The message of an interrupted run, on every path.
pub(crate) const INTERRUPTED: &str = "interrupted; every worker was stopped";

/// Runs tasks 1..=`total` and returns their outcomes in task order.
/// `progress(done, total)` hears 0 before the first task and each count as
/// tasks end; when `interrupted()` turns true the run stops with an
/// [`crate::error::ErrorKind::Interrupted`] error.
pub(crate) fn map_tasks<T>(
    total: usize,
    options: &PoolOptions,
    task: impl Fn(usize) -> Result<T, String> + Sync,
    mut interrupted: impl FnMut() -> bool,
    mut progress: impl FnMut(usize, usize),
) -> Result<Vec<Result<T, Failure>>, Error>
where
    T: Serialize + DeserializeOwned + Send,
{
    progress(0, total);
    if options.workers <= 1 || total <= 1 {
        let mut outcomes = Vec::with_capacity(total);
        for number in 1..=total {
            if interrupted() {
                return Err(Error::interrupted(INTERRUPTED));
            }
            #[cfg(feature = "test-hooks")]
            crate::faults::delay_armed(number);
            outcomes.push(task(number).map_err(Failure::Task));
            progress(number, total);
        }
        return Ok(outcomes);
    }
    let tasks: Vec<usize> = (1..=total).collect();
    // Only the outcomes are returned: the memory figures a worker would
    // read after its tasks (a walk of all its page tables, dearer the
    // larger the session it was forked from) would be thrown away.
    let options = PoolOptions {
        memory: MemoryReport::Never,
        ..options.clone()
    };
    let mut done = 0;
    let batch = run_tasks(
        &tasks,
        &options,
        |context| {
            // In a forked child any armed fault may strike (in this
            // process, above, only a delay may).
            #[cfg(feature = "test-hooks")]
            crate::faults::strike_armed(context.task);
            task(context.task)
        },
        interrupted,
        |_| {
            done += 1;
            progress(done, total);
        },
    )?;
    if batch.interrupted {
        return Err(Error::interrupted(INTERRUPTED));
    }
    Ok(batch
        .records
        .into_iter()
        .map(|record| record.outcome)
        .collect())
}
