//! R entry points for the fork engine itself (test hooks) and what the
//! platform offers.

use super::RResult;
#[cfg(feature = "test-hooks")]
use super::{index_option, pool_options, user_interrupt_pending};
#[cfg(feature = "test-hooks")]
use crate::error::Error;
use extendr_api::prelude::*;

/// Whether this build has the test hooks (the `test-hooks` feature).
/// @keywords internal
/// @noRd
#[extendr]
fn test_hooks_rust() -> bool {
    cfg!(feature = "test-hooks")
}

/// What this build can do on this platform: `fork` (the fork engine: Linux
/// and macOS), `memory_limit` (worker memory limits: Linux) and
/// `memory_figures` (the memory columns: Linux); see `src/platform.rs`.
/// @keywords internal
/// @noRd
#[extendr]
fn platform_rust() -> List {
    use crate::platform;
    list!(
        fork = platform::FORK,
        memory_limit = platform::MEMORY_LIMIT,
        memory_figures = platform::MEMORY_FIGURES
    )
}

/// Run synthetic tasks on the fork engine (backend of `engine_selftest()`;
/// test hook).
/// @keywords internal
/// @noRd
#[extendr]
#[allow(clippy::too_many_arguments)]
#[cfg_attr(not(feature = "test-hooks"), allow(unused_variables))]
fn engine_selftest_rust(
    n_tasks: i32,
    workers: i32,
    tasks_per_child: i32,
    schedule: &str,
    payload: i32,
    sleep: f64,
    crash: Vec<i32>,
    hang: Vec<i32>,
    alloc_mb: Vec<f64>,
    timeout: f64,
    memory_limit_mb: Option<f64>,
    memory_per_task: Option<bool>,
    seed: f64,
) -> RResult<List> {
    #[cfg(feature = "test-hooks")]
    return {
        use crate::engine::{self, TaskRecord};
        use std::time::Duration;
        let options = pool_options(
            workers,
            tasks_per_child,
            schedule,
            timeout,
            memory_limit_mb,
            memory_per_task,
        )?;
        let n_tasks = index_option(n_tasks, "n_tasks")?;
        let payload = index_option(payload, "payload")?;
        let in_range = |value: f64| value.is_finite() && (0.0..=1e6).contains(&value);
        if !(in_range(sleep) && alloc_mb.iter().copied().all(in_range)) {
            return Err(Error::input(
                "`sleep` and `alloc_mb` must be finite and between 0 and 1e6",
            ));
        }
        let task_numbers = |v: Vec<i32>| {
            v.into_iter()
                .filter_map(|t| usize::try_from(t).ok())
                .collect()
        };
        let tasks = crate::selftest::SyntheticTasks {
            payload,
            sleep: Duration::from_secs_f64(sleep),
            alloc_mb,
            crash: task_numbers(crash),
            hang: task_numbers(hang),
            seed: super::seed_value(seed)?,
        };
        let numbers: Vec<usize> = (1..=n_tasks).collect();
        let batch = engine::run_tasks(
            &numbers,
            &options,
            |c| tasks.run(c),
            user_interrupt_pending,
            |_| {},
        )?;
        if batch.interrupted {
            return Err(Error::interrupted(
                "interrupted; all child processes were killed",
            ));
        }
        let records = &batch.records;
        fn column<T, U>(records: &[TaskRecord<T>], field: impl Fn(&TaskRecord<T>) -> U) -> Robj
        where
            Vec<U>: Into<Robj>,
        {
            records.iter().map(field).collect::<Vec<U>>().into()
        }
        Ok(List::from_pairs(vec![
            ("task", column(records, |r| r.task as i32)),
            ("ok", column(records, |r| r.outcome.is_ok())),
            (
                "reason",
                column(records, |r| r.outcome.as_ref().err().map(|f| f.to_string())),
            ),
            (
                "checksum",
                column(records, |r| {
                    r.outcome.as_ref().ok().map(|v| v.iter().sum::<f64>())
                }),
            ),
            ("pid", column(records, |r| r.pid)),
            ("seconds", column(records, |r| r.seconds)),
            ("peak_rss_mb", column(records, |r| r.memory.peak_rss_mb)),
            ("pss_mb", column(records, |r| r.memory.pss_mb)),
            (
                "private_dirty_mb",
                column(records, |r| r.memory.private_dirty_mb),
            ),
        ]))
    };
    #[cfg(not(feature = "test-hooks"))]
    Err(super::without_test_hooks("engine_selftest()"))
}

extendr_module! {
    mod engine;
    fn test_hooks_rust;
    fn platform_rust;
    fn engine_selftest_rust;
}
