//! The R boundary: conversions between R values and the core's types, and
//! error mapping. No work happens here; each submodule wraps one topic:
//! [`model`], [`fit`], [`bootstrap`], [`checkpoint`], [`engine`].
//!
//! Every function returns `Result<T, Error>`: an error reaches R as a
//! condition value `list(kind, message)` (extendr's `result_condition`), and
//! `rust_result()` in R/rust.R raises it with the class of its kind. Entry
//! points that exist for tests and benchmarks only are compiled with the
//! `test-hooks` feature; without it they refuse with an input error.

mod binning;
mod bootstrap;
mod checkpoint;
mod convert;
mod engine;
mod nb;
mod nb_describe;
mod nb_inference;
mod nb_predict;
mod original;
mod original_fit;
mod rules;
mod saved;

use crate::engine::{MemoryReport, PoolOptions, Schedule, TasksPerChild, WorkerKind};
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

// ---------------------------------------------------------------------------
// Calling R back while Rust works (progress)

// R's API for evaluating R code from C that may jump; exported by libR. R
// objects cross as untyped pointers (`Sexp`; extendr's `SEXP` points to a
// struct Rust cannot see into).
type Sexp = *mut c_void;

/// `R_UnwindProtect` as a function that may unwind: its cleanup function
/// panics (see `on_jump`) and the panic passes through it.
type UnwindProtect = unsafe extern "C-unwind" fn(
    fun: unsafe extern "C" fn(*mut c_void) -> Sexp,
    data: *mut c_void,
    cleanfun: unsafe extern "C-unwind" fn(*mut c_void, c_int),
    cleandata: *mut c_void,
    cont: Sexp,
) -> Sexp;

extern "C" {
    // Called only through an `UnwindProtect` pointer hidden from the
    // optimiser (see `Relay::call`): extendr declares the same symbol as a
    // function that cannot unwind, and with link-time optimisation the call
    // would inherit that, losing the landing pad that catches the panic.
    fn R_UnwindProtect();
    static R_GlobalEnv: Sexp;
    fn Rf_eval(expr: Sexp, env: Sexp) -> Sexp;
    fn Rf_lcons(car: Sexp, cdr: Sexp) -> Sexp;
    fn R_MakeUnwindCont() -> Sexp;
    fn R_ContinueUnwind(cont: Sexp) -> !;
}

/// Evaluates the call `data` in R's global environment. R may longjmp out of
/// it (to `R_UnwindProtect`): it owns nothing that would need dropping.
unsafe extern "C" fn eval_call(data: *mut c_void) -> Sexp {
    Rf_eval(data, R_GlobalEnv)
}

/// What `on_jump` unwinds with.
struct RJumped;

/// `R_UnwindProtect`'s cleanup: when R code jumped, turns the jump into a
/// Rust unwind that ends at [`Relay::call`] (R has already ended the
/// protected context, so nothing of R's is left half done), instead of
/// letting R's longjmp cross Rust frames.
unsafe extern "C-unwind" fn on_jump(_: *mut c_void, jump: c_int) {
    if jump != 0 {
        std::panic::resume_unwind(Box::new(RJumped));
    }
}

/// An R function that Rust calls as work finishes (progress, messages).
///
/// The function is evaluated in R's current context, so the condition
/// handlers of the caller (`withCallingHandlers()`, progressr's global
/// handlers) see what it signals; extendr's `call()` (R_tryEval) would hide
/// them, since it evaluates in a new top-level context. R code can jump out
/// of the call (an error in a handler, an exiting handler such as
/// `tryCatch()`, Ctrl-C): `R_UnwindProtect` stops the jump before it crosses
/// a Rust frame, and the relay keeps its continuation and calls nothing
/// more. The caller polls [`Relay::jumped`] (stopping its work and its child
/// processes when true) and returns [`Relay::result`], from which R resumes
/// the jump (`continue_jump()` in R/rust.R) once Rust has returned.
pub(super) struct Relay {
    function: Option<Robj>,
    jump: std::cell::RefCell<Option<Robj>>,
}

impl Relay {
    /// A relay to `function`, or one that does nothing when it is not a
    /// function (e.g. NULL).
    pub(super) fn new(function: Robj) -> Self {
        Relay {
            function: function.is_function().then_some(function),
            jump: std::cell::RefCell::new(None),
        }
    }

    /// Whether R code jumped out of a call (the work should stop).
    pub(super) fn jumped(&self) -> bool {
        self.jump.borrow().is_some()
    }

    /// Calls the function with `args`; does nothing after a jump.
    pub(super) fn call(&self, args: Pairlist) {
        let Some(function) = &self.function else {
            return;
        };
        if self.jumped() {
            return;
        }
        // SAFETY: on R's main thread (every boundary function runs there).
        // The call and the continuation are protected by their Robj. R code
        // cannot longjmp over a Rust frame: it runs inside R_UnwindProtect,
        // whose cleanup turns a jump into an unwind caught right here, and
        // `eval_call` owns nothing.
        unsafe {
            let call = Robj::from_sexp(Rf_lcons(function.get().cast(), args.get().cast()).cast());
            let token = Robj::from_sexp(R_MakeUnwindCont().cast());
            let (call_sexp, token_sexp): (Sexp, Sexp) = (call.get().cast(), token.get().cast());
            let protect: UnwindProtect = std::hint::black_box(std::mem::transmute::<
                unsafe extern "C" fn(),
                UnwindProtect,
            >(R_UnwindProtect));
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                protect(
                    eval_call,
                    call_sexp,
                    on_jump,
                    std::ptr::null_mut(),
                    token_sexp,
                )
            }));
            match outcome {
                Ok(_) => {}
                Err(payload) if payload.is::<RJumped>() => {
                    *self.jump.borrow_mut() = Some(token);
                }
                Err(payload) => std::panic::resume_unwind(payload),
            }
        }
    }

    /// `value`, or, after a jump, `list(wisp_unwind = <continuation>)` for
    /// R to resume.
    pub(super) fn result(&self, value: RResult<List>) -> RResult<List> {
        match self.jump.borrow_mut().take() {
            Some(token) => Ok(list!(wisp_unwind = token)),
            None => value,
        }
    }
}

/// Resumes the jump of a continuation `R_UnwindProtect` kept: the `.Call()`
/// routine `wisp_continue_unwind` (see `continue_jump()` in R/rust.R). It
/// owns nothing, so R's longjmp out of it skips nothing that would need
/// dropping; that is also why it is a raw routine and not an extendr
/// wrapper, whose frames own their arguments.
unsafe extern "C" fn continue_unwind(token: Sexp) -> Sexp {
    R_ContinueUnwind(token)
}

/// One `.Call()` routine for `R_registerRoutines` (R's `R_CallMethodDef`).
#[repr(C)]
struct CallRoutine {
    name: *const std::ffi::c_char,
    fun: Option<unsafe extern "C" fn() -> *mut c_void>,
    arguments: c_int,
}

extern "C" {
    fn R_registerRoutines(
        info: *mut c_void,
        c_routines: *const c_void,
        call_routines: *const CallRoutine,
        fortran_routines: *const c_void,
        external_routines: *const c_void,
    ) -> c_int;
    fn R_useDynamicSymbols(info: *mut c_void, value: c_int) -> c_int;
    fn R_forceSymbols(info: *mut c_void, value: c_int) -> c_int;
}

/// Registers the package's `.Call()` routines (called by `R_init_wispack`
/// in src/entrypoint.c): extendr's wrappers, as extendr's own
/// `R_init_wispack_extendr` would, and `wisp_continue_unwind`. One call
/// must register them all, as `R_registerRoutines` replaces what a DLL had.
///
/// # Safety
/// Called once by R with the package's `DllInfo`, on R's main thread.
#[no_mangle]
pub unsafe extern "C" fn R_init_wispack_routines(info: *mut c_void) {
    let metadata = crate::get_wispack_metadata();
    let functions = metadata
        .functions
        .iter()
        .chain(metadata.impls.iter().flat_map(|i| i.methods.iter()));
    let mut names: Vec<std::ffi::CString> = Vec::new();
    let mut routines: Vec<CallRoutine> = Vec::new();
    for function in functions {
        let Ok(name) = std::ffi::CString::new(function.c_name) else {
            continue;
        };
        // SAFETY: extendr's wrappers have .Call's signature (SEXPs in, one
        // out); R calls them with `arguments` arguments.
        let fun = std::mem::transmute::<*const u8, unsafe extern "C" fn() -> *mut c_void>(
            function.func_ptr,
        );
        routines.push(CallRoutine {
            name: name.as_ptr(),
            fun: Some(fun),
            arguments: function.args.len() as c_int,
        });
        names.push(name);
    }
    routines.push(CallRoutine {
        name: c"wisp_continue_unwind".as_ptr(),
        fun: Some(std::mem::transmute::<
            unsafe extern "C" fn(Sexp) -> Sexp,
            unsafe extern "C" fn() -> *mut c_void,
        >(continue_unwind)),
        arguments: 1,
    });
    routines.push(CallRoutine {
        name: std::ptr::null(),
        fun: None,
        arguments: 0,
    });
    // R copies the names.
    R_registerRoutines(
        info,
        std::ptr::null(),
        routines.as_ptr(),
        std::ptr::null(),
        std::ptr::null(),
    );
    R_useDynamicSymbols(info, 0);
    R_forceSymbols(info, 0);
    drop(names);
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

/// The fork engine's options for fits (species, reduced fits, profiles):
/// `workers` long-lived workers fed one task at a time (a fresh child per
/// task would copy the session's page tables once per gene), no time or
/// memory limit, no memory figures (a fit's tasks report none).
fn fit_pool_options(workers: i32) -> RResult<PoolOptions> {
    pool_options(workers, 0, "rolling", f64::INFINITY, None, None)
}

/// Options of the fork engine from R values (`tasks_per_child` 0: workers
/// fed one task at a time, `memory_limit_mb` NA no limit; `memory_per_task` TRUE reads PSS
/// after every task, FALSE once per child, NA never). Worker processes: where
/// there is no fork, a run is refused.
fn pool_options(
    workers: i32,
    tasks_per_child: i32,
    schedule: &str,
    timeout: f64,
    memory_limit_mb: Option<f64>,
    memory_per_task: Option<bool>,
) -> RResult<PoolOptions> {
    if memory_limit_mb.is_some_and(|limit| !(limit.is_finite() && limit > 0.0 && limit <= 1e12)) {
        return Err(Error::input(
            "`memory_limit_mb` must be a positive number of MB or NA",
        ));
    }
    Ok(PoolOptions {
        kind: WorkerKind::Process,
        workers: count_option(workers, "workers")?,
        tasks_per_child: if tasks_per_child == 0 {
            TasksPerChild::Fed
        } else {
            TasksPerChild::Fixed(count_option(tasks_per_child, "tasks_per_child")?)
        },
        memory: match memory_per_task {
            Some(true) => MemoryReport::PerTask,
            Some(false) => MemoryReport::PerChild,
            None => MemoryReport::Never,
        },
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
    use binning;
    use nb;
    use nb_describe;
    use nb_predict;
    use nb_inference;
    use original;
    use original_fit;
    use rules;
    use saved;
    use bootstrap;
    use checkpoint;
    use engine;
}
