//! The engine: runs numbered tasks on workers and returns one outcome per
//! task. It knows nothing about what a task computes.
//!
//! A worker is one of two kinds ([`WorkerKind`]):
//!
//! - a forked child process ([`fork`], Unix only, the default there): by
//!   default ([`TasksPerChild::Fed`]) the parent forks `workers` children
//!   once per run (and one more for each that dies) and feeds each one task number at a time over a
//!   command pipe, the next as soon as the child reports the last, so no
//!   worker idles while tasks wait and a child never holds more than the one
//!   task it is running; with [`TasksPerChild::Fixed`] each child gets a
//!   fixed number of tasks at fork and a fresh child follows. A child writes
//!   one frame per finished task to its result pipe at once and leaves with
//!   `_exit`, so the operating system reclaims everything the tasks
//!   allocated. The parent multiplexes
//!   all pipes with `poll()`, enforces the per-task timeout and memory limit,
//!   reaps every child by pid and turns every way a child can end into a
//!   per-task outcome: one failure never stops the other tasks;
//! - a thread of this process ([`threads`], every platform, the default
//!   where there is no fork, i.e. on Windows): for tasks that cannot bring
//!   the process down. A panic is caught and recorded; there is no timeout,
//!   no memory limit and no per-task memory figures.
//!
//! Safety contract for callers: the parent must be single-threaded when
//! `run_tasks` is called (R is), and the task closure must not touch the R API,
//! because it runs in a child process or in another thread. `interrupted` and
//! `on_record` always run on the calling thread.

#[cfg(unix)]
mod fork;
#[cfg(unix)]
mod frame;
mod map;
pub(crate) mod procmem;
mod threads;

pub(crate) use map::map_tasks;
use procmem::MemorySnapshot;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

/// When the parent starts new children under [`TasksPerChild::Fixed`] (fed
/// workers are forked once per run, and a replacement for one that died at
/// once, whatever the schedule).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Schedule {
    /// Fork a new child as soon as one exits.
    Rolling,
    /// Fork up to `workers` children, wait for all of them, then the next batch.
    Batch,
}

impl std::str::FromStr for Schedule {
    type Err = String;
    fn from_str(name: &str) -> Result<Self, String> {
        match name {
            "rolling" => Ok(Schedule::Rolling),
            "batch" => Ok(Schedule::Batch),
            other => Err(format!(
                "schedule must be \"rolling\" or \"batch\", not \"{other}\""
            )),
        }
    }
}

/// How many tasks a forked child runs before it exits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TasksPerChild {
    /// Exactly this many, given at fork (fewer for the last child when tasks
    /// run out); then a fresh child.
    Fixed(usize),
    /// Long-lived workers fed one task at a time: `workers` children per run
    /// (fewer when there are fewer tasks), each sent its next task as soon
    /// as it reports the last, and told to leave (end of file on its
    /// command pipe) when none is left. A child that dies fails the one
    /// task it was running, and a new child takes its place for the tasks
    /// that remain.
    Fed,
}

/// When a forked child reads the memory figures that need a walk of its page
/// tables (PSS and private dirty from `/proc/self/smaps_rollup`, whose cost
/// grows with the size of the process: about 34 ms at 4 GB).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MemoryReport {
    /// After each task.
    PerTask,
    /// Once per child, after its last task; the other tasks' records carry
    /// the peak RSS only (it is cheap to read), their PSS and private dirty
    /// are `None`. A fed child reads them when told to leave, and the
    /// parent adds them to the record of its last task; a child that is
    /// killed has none.
    PerChild,
    /// Never: every record carries the peak RSS only. Saves a walk of each
    /// child's page tables per run, tenths of a second from a parent of
    /// several GB on a loaded machine.
    Never,
}

/// What runs the tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WorkerKind {
    /// Short-lived forked child processes (Unix only).
    Process,
    /// Threads of this process (every platform). `tasks_per_child` and
    /// `schedule` do not apply; `timeout` and `memory_limit_mb` are refused.
    Thread,
}

impl WorkerKind {
    /// Processes where the platform can fork, threads elsewhere (Windows).
    pub(crate) const NATIVE: WorkerKind = if cfg!(unix) {
        WorkerKind::Process
    } else {
        WorkerKind::Thread
    };
}

/// How tasks are spread over workers.
#[derive(Clone, Debug)]
pub(crate) struct PoolOptions {
    /// Processes or threads; [`WorkerKind::NATIVE`] by default.
    pub(crate) kind: WorkerKind,
    /// At most this many workers alive at once.
    pub(crate) workers: usize,
    /// How many tasks a child runs before it exits (processes only).
    pub(crate) tasks_per_child: TasksPerChild,
    /// When a child reads its PSS and private dirty memory (processes only).
    #[cfg_attr(not(unix), allow(dead_code))]
    pub(crate) memory: MemoryReport,
    /// When new children start (processes only).
    #[cfg_attr(not(unix), allow(dead_code))]
    pub(crate) schedule: Schedule,
    /// Wall-clock limit for one task; its child is killed when it is exceeded.
    pub(crate) timeout: Option<Duration>,
    /// Headroom in MiB above the child's address space at fork (`RLIMIT_AS`;
    /// Linux only, where the address space can be read from `/proc`).
    pub(crate) memory_limit_mb: Option<f64>,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            kind: WorkerKind::NATIVE,
            workers: 1,
            tasks_per_child: TasksPerChild::Fixed(1),
            memory: MemoryReport::PerTask,
            schedule: Schedule::Rolling,
            timeout: None,
            memory_limit_mb: None,
        }
    }
}

impl PoolOptions {
    fn validate(&self) -> Result<(), PoolError> {
        if self.kind == WorkerKind::Process && !crate::platform::FORK {
            return Err(PoolError::Invalid(
                "worker processes need fork(), which this platform does not have".into(),
            ));
        }
        if self.kind == WorkerKind::Thread
            && (self.timeout.is_some() || self.memory_limit_mb.is_some())
        {
            return Err(PoolError::Invalid(
                "a timeout or memory limit needs worker processes (the fork engine)".into(),
            ));
        }
        if self.memory_limit_mb.is_some() && !crate::platform::MEMORY_LIMIT {
            return Err(PoolError::Invalid(
                "memory limits need Linux: elsewhere the address space a limit adds to \
                 cannot be read, and macOS does not enforce RLIMIT_AS"
                    .into(),
            ));
        }
        if self.workers == 0 {
            return Err(PoolError::Invalid("workers must be at least 1".into()));
        }
        if self.tasks_per_child == TasksPerChild::Fixed(0) {
            return Err(PoolError::Invalid(
                "tasks_per_child must be at least 1".into(),
            ));
        }
        if let Some(limit) = self.memory_limit_mb {
            if !(limit.is_finite() && limit > 0.0) {
                return Err(PoolError::Invalid(
                    "memory_limit_mb must be a positive number of MB".into(),
                ));
            }
        }
        Ok(())
    }
}

/// Why a task produced no value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) enum Failure {
    /// The task itself returned an error.
    Task(String),
    /// The task panicked; the child caught it and carried on.
    Panic(String),
    /// The child exited with this non-zero status before reporting the task.
    Exit(i32),
    /// The child was killed by this signal before reporting the task.
    Signal(i32),
    /// The child ended normally but never reported the task.
    NoResult,
    /// The task ran longer than the timeout (seconds) and its child was killed.
    Timeout(f64),
    /// The child ran out of its memory allowance.
    MemoryLimit,
    /// The child wrote bytes that do not decode as a frame.
    BadFrame(String),
    /// The run was interrupted before the task finished; its child, if it
    /// had one, was killed.
    Interrupted,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Task(message) => write!(f, "error: {message}"),
            Failure::Panic(message) => write!(f, "panic: {message}"),
            Failure::Exit(status) => write!(f, "non-zero exit (status {status})"),
            Failure::Signal(number) => {
                write!(f, "killed by signal {number} ({})", signal_name(*number))
            }
            Failure::NoResult => write!(f, "no result"),
            Failure::Timeout(seconds) => write!(f, "timeout after {seconds} s"),
            Failure::MemoryLimit => write!(f, "memory limit"),
            Failure::BadFrame(message) => write!(f, "bad result frame: {message}"),
            Failure::Interrupted => write!(f, "interrupted"),
        }
    }
}

/// The name of signal `number`, e.g. "SIGKILL".
fn signal_name(number: i32) -> &'static str {
    #[cfg(unix)]
    return nix::sys::signal::Signal::try_from(number)
        .map(|s| s.as_str())
        .unwrap_or("unknown signal");
    #[cfg(not(unix))]
    {
        // Only forked children end by a signal, and there are none here.
        let _ = number;
        "unknown signal"
    }
}

/// Errors that stop the whole run.
#[derive(Debug)]
pub(crate) enum PoolError {
    /// The options or task numbers are invalid; nothing was started.
    Invalid(String),
    /// A system call in the parent failed; every worker was stopped (child
    /// processes killed and reaped), and the message says so.
    System(String),
}

impl fmt::Display for PoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolError::Invalid(message) => write!(f, "{message}"),
            PoolError::System(message) => write!(f, "{message}"),
        }
    }
}

impl std::error::Error for PoolError {}

impl From<PoolError> for crate::error::Error {
    fn from(error: PoolError) -> Self {
        match error {
            PoolError::Invalid(message) => crate::error::Error::input(message),
            PoolError::System(_) => crate::error::Error::system(error.to_string()),
        }
    }
}

/// What a run returns: one record per task, in the order of the task
/// numbers, and whether it was interrupted (then the tasks that had not
/// finished have [`Failure::Interrupted`]).
#[derive(Debug)]
pub(crate) struct Batch<T> {
    pub(crate) records: Vec<TaskRecord<T>>,
    pub(crate) interrupted: bool,
}
/// What a task is told about itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TaskContext {
    /// The task's number, as the caller gave it.
    pub(crate) task: usize,
}

/// The final outcome of one task.
#[derive(Clone, Debug)]
pub(crate) struct TaskRecord<T> {
    pub(crate) task: usize,
    pub(crate) outcome: Result<T, Failure>,
    /// The process that ran the task (this one for thread workers).
    pub(crate) pid: i32,
    /// Wall time of the task: measured in the child for reported
    /// tasks, by the parent for tasks whose child died.
    pub(crate) seconds: f64,
    /// Memory of the child just before it wrote the result (None for failures
    /// the child could not report, for thread workers, and where the platform
    /// does not report it: see [`procmem`]). Under [`MemoryReport::PerChild`]
    /// only the child's last task has PSS and private dirty; the others have
    /// the peak RSS so far only.
    pub(crate) memory: MemorySnapshot,
}

/// How often the parent checks for an interrupt (and, for processes, timeouts).
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Runs `task` once for every number in `tasks`, on the workers
/// `options.kind` says, and returns one record per task in the order of
/// `tasks`.
///
/// `interrupted` is polled at least every 100 ms on the calling thread; when
/// it returns true the run stops, returning the records finished so far with
/// `interrupted` set: child processes are killed and reaped at once, threads
/// finish the task they are running (a thread cannot be killed) and start no
/// other. `on_record` is called on the calling thread as each task's final
/// outcome becomes known (for progress and checkpoints); it is not called
/// for the tasks an interrupt stopped.
pub(crate) fn run_tasks<T, F, I, P>(
    tasks: &[usize],
    options: &PoolOptions,
    task: F,
    interrupted: I,
    on_record: P,
) -> Result<Batch<T>, PoolError>
where
    T: Serialize + DeserializeOwned + Send,
    F: Fn(TaskContext) -> Result<T, String> + Sync,
    I: FnMut() -> bool,
    P: FnMut(&TaskRecord<T>),
{
    options.validate()?;
    let mut records = Records::new(tasks, on_record)?;
    let was_interrupted = match options.kind {
        #[cfg(unix)]
        WorkerKind::Process => {
            // The workers carry the value encoded; a value the parent
            // cannot decode fails its task alone.
            let encoded = |context: TaskContext| -> Result<fork::Payload, String> {
                frame::encode_value(&task(context)?).map(fork::Payload)
            };
            let mut interrupted = interrupted;
            fork::run(tasks, options, &encoded, &mut interrupted, &mut |record| {
                records.finish(TaskRecord {
                    outcome: record.outcome.and_then(|payload| {
                        crate::codec::decode_exact::<T>(&payload.0, "a task's result")
                            .map_err(Failure::BadFrame)
                    }),
                    task: record.task,
                    pid: record.pid,
                    seconds: record.seconds,
                    memory: record.memory,
                })
            })?
        }
        #[cfg(not(unix))]
        WorkerKind::Process => unreachable!("validate() refuses processes without fork"),
        WorkerKind::Thread => threads::run(tasks, options, &task, interrupted, &mut records)?,
    };
    Ok(records.into_batch(tasks, was_interrupted))
}

/// The records of a run as they arrive, in the order of the task numbers.
struct Records<T, P> {
    position: HashMap<usize, usize>,
    records: Vec<Option<TaskRecord<T>>>,
    on_record: P,
}

impl<T, P: FnMut(&TaskRecord<T>)> Records<T, P> {
    fn new(tasks: &[usize], on_record: P) -> Result<Self, PoolError> {
        let position: HashMap<usize, usize> =
            tasks.iter().enumerate().map(|(at, &t)| (t, at)).collect();
        if position.len() != tasks.len() {
            return Err(PoolError::Invalid("task numbers must be unique".into()));
        }
        Ok(Records {
            position,
            records: tasks.iter().map(|_| None).collect(),
            on_record,
        })
    }

    /// Announces a task's final outcome and keeps it.
    fn finish(&mut self, record: TaskRecord<T>) {
        (self.on_record)(&record);
        if let Some(&at) = self.position.get(&record.task) {
            self.records[at] = Some(record);
        }
    }

    /// One record per task: the tasks that never finished failed with
    /// [`Failure::Interrupted`] after an interrupt, else [`Failure::NoResult`].
    fn into_batch(self, tasks: &[usize], interrupted: bool) -> Batch<T> {
        let unfinished = if interrupted {
            Failure::Interrupted
        } else {
            Failure::NoResult
        };
        let records = self
            .records
            .into_iter()
            .zip(tasks)
            .map(|(record, &task)| {
                record.unwrap_or_else(|| TaskRecord {
                    task,
                    outcome: Err(unfinished.clone()),
                    pid: 0,
                    seconds: f64::NAN,
                    memory: MemorySnapshot::default(),
                })
            })
            .collect();
        Batch {
            records,
            interrupted,
        }
    }
}

/// Runs one task, a panic caught and recorded as [`Failure::Panic`].
fn run_caught<T, F>(task: &F, context: TaskContext) -> Result<T, Failure>
where
    F: Fn(TaskContext) -> Result<T, String> + ?Sized,
{
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| task(context))) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(message)) => Err(Failure::Task(message)),
        Err(payload) => Err(Failure::Panic(panic_message(payload.as_ref()))),
    }
}

/// The message of a caught panic.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "unknown panic payload".into()
    }
}

// The engine tests fork and read /proc.
#[cfg(all(test, target_os = "linux"))]
mod tests;
