//! The R boundary: argument conversion and error mapping only. The work lives
//! in the core modules below, which know nothing about R.

use extendr_api::prelude::*;
// extendr-api 0.9: the prelude no longer re-exports the `Result<T>` alias.
use extendr_api::Result;

pub mod engine;
pub mod fit;
pub mod model;
pub mod selftest;
pub mod streams;
pub mod structure;

use engine::{Failure, PoolOptions, TaskRecord};
use std::ffi::{c_int, c_void};
use std::time::Duration;

// Not exposed by extendr-ffi 0.9; both are exported by libR.
extern "C" {
    fn R_ToplevelExec(fun: Option<unsafe extern "C" fn(*mut c_void)>, data: *mut c_void) -> c_int;
    fn R_CheckUserInterrupt();
}

unsafe extern "C" fn check_interrupt_callback(_: *mut c_void) {
    R_CheckUserInterrupt();
}

/// True when the user pressed Ctrl-C. Inside `R_ToplevelExec` the longjmp of
/// `R_CheckUserInterrupt` stops there instead of unwinding through Rust frames.
fn user_interrupt_pending() -> bool {
    // SAFETY: called on R's main thread; the callback takes no data.
    unsafe { R_ToplevelExec(Some(check_interrupt_callback), std::ptr::null_mut()) == 0 }
}

fn input_error(message: impl Into<String>) -> Error {
    Error::Other(message.into())
}

fn seconds_option(seconds: f64, name: &str) -> Result<Option<Duration>> {
    if seconds.is_nan() || seconds <= 0.0 {
        Err(input_error(format!(
            "`{name}` must be a positive number of seconds (Inf for none)"
        )))
    } else if seconds.is_infinite() {
        Ok(None)
    } else {
        Ok(Some(Duration::from_secs_f64(seconds)))
    }
}

fn count_option(value: i32, name: &str) -> Result<usize> {
    usize::try_from(value)
        .ok()
        .filter(|&v| v >= 1)
        .ok_or_else(|| input_error(format!("`{name}` must be a whole number >= 1")))
}

/// Engine options from R values (`memory_limit_mb` NA means no limit).
fn pool_options(
    workers: i32,
    tasks_per_child: i32,
    schedule: &str,
    timeout: f64,
    memory_limit_mb: Option<f64>,
    retries: i32,
) -> Result<PoolOptions> {
    if memory_limit_mb.is_some_and(|limit| !(limit.is_finite() && limit > 0.0)) {
        return Err(input_error(
            "`memory_limit_mb` must be a positive number of MB or NA",
        ));
    }
    Ok(PoolOptions {
        workers: count_option(workers, "workers")?,
        tasks_per_child: count_option(tasks_per_child, "tasks_per_child")?,
        schedule: schedule.parse().map_err(input_error)?,
        timeout: seconds_option(timeout, "timeout")?,
        memory_limit_mb,
        retries: u32::try_from(retries).map_err(|_| input_error("`retries` must be >= 0"))?,
    })
}

/// The per-task columns every engine run reports, as named R vectors;
/// `value_summary` becomes the column after `reason`. `None` becomes NA.
fn record_columns<T>(records: &[TaskRecord<T>], value_summary: (&'static str, Robj)) -> List {
    fn column<T, U>(records: &[TaskRecord<T>], field: impl Fn(&TaskRecord<T>) -> U) -> Robj
    where
        Vec<U>: Into<Robj>,
    {
        records.iter().map(field).collect::<Vec<U>>().into()
    }
    List::from_pairs(vec![
        ("task", column(records, |r| r.task as i32)),
        ("ok", column(records, |r| r.outcome.is_ok())),
        (
            "reason",
            column(records, |r| {
                r.outcome.as_ref().err().map(Failure::to_string)
            }),
        ),
        value_summary,
        ("attempts", column(records, |r| r.attempts as i32)),
        ("pid", column(records, |r| r.pid)),
        ("seconds", column(records, |r| r.seconds)),
        ("peak_rss_mb", column(records, |r| r.memory.peak_rss_mb)),
        ("pss_mb", column(records, |r| r.memory.pss_mb)),
        (
            "private_dirty_mb",
            column(records, |r| r.memory.private_dirty_mb),
        ),
    ])
}

/// Run synthetic tasks on the fork engine (backend of `engine_selftest()`).
/// @keywords internal
/// @noRd
#[extendr]
#[allow(clippy::too_many_arguments)]
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
    seed: f64,
    retries: i32,
) -> Result<List> {
    let options = pool_options(
        workers,
        tasks_per_child,
        schedule,
        timeout,
        memory_limit_mb,
        retries,
    )?;
    let n_tasks = usize::try_from(n_tasks).map_err(|_| input_error("`n_tasks` must be >= 0"))?;
    let payload = usize::try_from(payload).map_err(|_| input_error("`payload` must be >= 0"))?;
    let non_negative = |value: f64| value.is_finite() && value >= 0.0;
    if !(non_negative(sleep) && alloc_mb.iter().copied().all(non_negative)) {
        return Err(input_error(
            "`sleep` and `alloc_mb` must be finite and >= 0",
        ));
    }
    let task_numbers = |v: Vec<i32>| {
        v.into_iter()
            .filter_map(|t| usize::try_from(t).ok())
            .collect()
    };
    let tasks = selftest::SyntheticTasks {
        payload,
        sleep: Duration::from_secs_f64(sleep),
        alloc_mb,
        crash: task_numbers(crash),
        hang: task_numbers(hang),
        seed: seed as i64 as u64,
    };
    let numbers: Vec<usize> = (1..=n_tasks).collect();
    let records = engine::run_tasks(
        &numbers,
        &options,
        |c| tasks.run(c),
        user_interrupt_pending,
        |_| {},
    )
    .map_err(|e| input_error(e.to_string()))?;
    let checksum: Vec<Option<f64>> = records
        .iter()
        .map(|r| r.outcome.as_ref().ok().map(|v| v.iter().sum()))
        .collect();
    Ok(record_columns(&records, ("checksum", r!(checksum))))
}

extendr_module! {
    mod wispack;
    fn engine_selftest_rust;
}
