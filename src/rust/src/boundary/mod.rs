//! The R boundary: conversions between R values and the core's types, and
//! error mapping. No work happens here; each submodule wraps one topic:
//! [`model`], [`fit`], [`bootstrap`], [`checkpoint`], [`engine`].
//!
//! Every function returns `Result<T, Error>`: an error reaches R as a
//! condition value `list(kind, message)` (extendr's `result_condition`), and
//! `rust_result()` in R/rust.R raises it with the class of its kind. Entry
//! points that exist for tests and benchmarks only are compiled with the
//! `test-hooks` feature; without it they refuse with an input error.

mod bootstrap;
mod checkpoint;
mod count;
mod engine;
mod fit;
mod model;

use crate::engine::{PoolOptions, Schedule, WorkerKind};
use crate::error::Error;
use crate::outcome::{Cell, ColumnType, Outcome, COLUMNS};
use extendr_api::prelude::*;
use std::ffi::{c_int, c_void};
use std::time::Duration;

/// What every boundary function returns.
type RResult<T> = std::result::Result<T, Error>;

impl From<Error> for Robj {
    fn from(error: Error) -> Self {
        list!(kind = error.kind.name(), message = error.message).into()
    }
}

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

/// Longest accepted timeout: `Duration` holds far more, but nothing needs it.
const MAX_SECONDS: f64 = 1e9;

/// Seconds as a duration; `Inf` is none. Positive, at most [`MAX_SECONDS`].
fn seconds_option(seconds: f64, name: &str) -> RResult<Option<Duration>> {
    if seconds.is_infinite() && seconds > 0.0 {
        Ok(None)
    } else if seconds > 0.0 && seconds <= MAX_SECONDS {
        Ok(Some(Duration::from_secs_f64(seconds)))
    } else {
        Err(Error::input(format!(
            "`{name}` must be a positive number of seconds up to {MAX_SECONDS} (Inf for none), \
             not {seconds}"
        )))
    }
}

/// A whole number >= 1 (R's NA integer is i32::MIN, so it is refused too).
fn count_option(value: i32, name: &str) -> RResult<usize> {
    usize::try_from(value)
        .ok()
        .filter(|&v| v >= 1)
        .ok_or_else(|| Error::input(format!("`{name}` must be a whole number >= 1")))
}

/// A whole number >= 0.
fn index_option(value: i32, name: &str) -> RResult<usize> {
    usize::try_from(value)
        .map_err(|_| Error::input(format!("`{name}` must be a whole number >= 0")))
}

fn index_column(values: Vec<i32>, name: &str) -> RResult<Vec<usize>> {
    values
        .into_iter()
        .map(|v| {
            usize::try_from(v)
                .map_err(|_| Error::input(format!("negative or NA index in `{name}`")))
        })
        .collect()
}

/// Options of the fork engine from R values (`memory_limit_mb` NA means no
/// limit). Worker processes: where there is no fork, a run is refused.
fn pool_options(
    workers: i32,
    tasks_per_child: i32,
    schedule: &str,
    timeout: f64,
    memory_limit_mb: Option<f64>,
) -> RResult<PoolOptions> {
    if memory_limit_mb.is_some_and(|limit| !(limit.is_finite() && limit > 0.0 && limit <= 1e12)) {
        return Err(Error::input(
            "`memory_limit_mb` must be a positive number of MB or NA",
        ));
    }
    Ok(PoolOptions {
        kind: WorkerKind::Process,
        workers: count_option(workers, "workers")?,
        tasks_per_child: count_option(tasks_per_child, "tasks_per_child")?,
        schedule: schedule.parse::<Schedule>().map_err(Error::input)?,
        timeout: seconds_option(timeout, "timeout")?,
        memory_limit_mb,
    })
}

/// A seed from R: a whole number, as R's doubles hold them exactly.
fn seed_value(seed: f64) -> RResult<u64> {
    if seed.is_finite() && seed == seed.trunc() && seed.abs() <= 2f64.powi(53) {
        Ok(seed as i64 as u64)
    } else {
        Err(Error::input(
            "the seed must be a whole number of at most 2^53 in size",
        ))
    }
}

/// The diagnostics columns of `outcomes`, as named R vectors: the one
/// conversion of [`COLUMNS`] to R.
fn outcome_columns(outcomes: &[Outcome]) -> List {
    List::from_pairs(COLUMNS.iter().map(|column| {
        let cells = outcomes.iter().map(|outcome| (column.cell)(outcome));
        let values: Robj = match column.column_type {
            ColumnType::Logical => cells
                .map(|cell| match cell {
                    Cell::Logical(value) => value,
                    _ => None,
                })
                .collect::<Vec<Option<bool>>>()
                .into(),
            ColumnType::Integer => cells
                .map(|cell| match cell {
                    Cell::Integer(value) => value,
                    _ => None,
                })
                .collect::<Vec<Option<i32>>>()
                .into(),
            ColumnType::Double => cells
                .map(|cell| match cell {
                    Cell::Double(value) => value,
                    _ => None,
                })
                .collect::<Vec<Option<f64>>>()
                .into(),
            ColumnType::Character => cells
                .map(|cell| match cell {
                    Cell::Character(value) => value,
                    _ => None,
                })
                .collect::<Vec<Option<String>>>()
                .into(),
        };
        (column.name, values)
    }))
}

/// An outcome as bytes, to travel through R (in-process backends) and back.
fn outcome_bytes(outcome: &Outcome) -> RResult<Raw> {
    bincode::serde::encode_to_vec(outcome, bincode::config::standard())
        .map(|bytes| Raw::from_bytes(&bytes))
        .map_err(|e| Error::system(format!("cannot encode a replicate's outcome: {e}")))
}

fn outcome_from_bytes(bytes: &Raw) -> RResult<Outcome> {
    crate::codec::decode_exact(bytes.as_slice(), "a replicate's outcome").map_err(Error::corrupt)
}

/// The error of a test-only entry point in a build without test hooks.
#[cfg(not(feature = "test-hooks"))]
fn without_test_hooks(what: &str) -> Error {
    Error::input(format!(
        "{what} is compiled only into builds with test hooks; reinstall with \
         WISPACK_TEST_HOOKS=true R CMD INSTALL . (as tools/test.sh does)"
    ))
}

extendr_module! {
    mod boundary;
    use model;
    use fit;
    use count;
    use bootstrap;
    use checkpoint;
    use engine;
}
