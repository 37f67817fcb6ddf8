//! The process workers of the engine (Unix): short-lived forked children
//! that report each task as a frame over a pipe.

use super::{
    frame, panic_message, procmem, Failure, MemoryReport, MemorySnapshot, PoolError, PoolOptions,
    Records, Schedule, TaskContext, TaskRecord, TasksPerChild, AUTO_OVERHEAD_TARGET, POLL_INTERVAL,
};
use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags};
use nix::sys::resource::{setrlimit, Resource};
use nix::sys::signal::{kill, signal, SigHandler, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, pipe, ForkResult, Pid};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

/// What a child writes to its pipe for each task it finishes.
#[derive(Serialize, Deserialize)]
struct ChildReport<T> {
    task: usize,
    outcome: Result<T, Failure>,
    seconds: f64,
    memory: MemorySnapshot,
}

struct LiveChild {
    pid: Pid,
    /// When the parent began to fork it.
    spawned_at: Instant,
    /// When its pipe reached end of file: the child has closed its files,
    /// which the kernel does after it has torn down the child's memory.
    eof_at: Option<Instant>,
    /// Sum of the task seconds the child reported.
    reported_seconds: f64,
    /// Read end of the child's pipe; None once it reached end of file.
    reader: Option<File>,
    frames: frame::FrameReader,
    /// Tasks given to this child and not yet reported, in the order it runs them.
    unreported: VecDeque<usize>,
    /// When the task at the front of `unreported` started, as far as the parent can tell.
    current_since: Instant,
    /// Set when the parent killed the child, to report why.
    killed_for: Option<Failure>,
    /// Exit status once reaped; `Some(None)` when another waiter reaped it first.
    exit: Option<Option<WaitStatus>>,
}

const READ_CHUNK_BYTES: usize = 1 << 18;

/// Decides how many tasks each new child runs ([`TasksPerChild`]), from what
/// the children that ended so far cost.
pub(super) struct ChildSizer {
    rule: TasksPerChild,
    /// Per child that ran all its tasks: its lifetime (fork to end of file)
    /// minus the seconds of its tasks, i.e. forking, starting, the memory
    /// report and exiting.
    overheads: Vec<f64>,
    task_seconds: f64,
    tasks_timed: usize,
    /// The parent is so large that its children are known to be expensive
    /// before any has ended: see [`LARGE_PARENT_BYTES`].
    large_parent: bool,
}

/// Resident size from which the parent counts as large: forking and ending
/// a child of a 1 GB process costs about 20 ms on a quiet machine (50 ms at
/// 4 GB, and many times that on a loaded one), more than 2 % of any task
/// under a second, so under [`TasksPerChild::Auto`] the first children of a
/// large parent split the tasks evenly between the workers (as
/// `mclapply(mc.preschedule = TRUE)` does) instead of running one task each
/// to measure them.
pub(super) const LARGE_PARENT_BYTES: u64 = 1 << 30;

impl ChildSizer {
    /// A sizer for a parent of the calling process's resident size.
    pub(super) fn new(rule: TasksPerChild) -> Self {
        Self::for_parent(rule, procmem::resident_bytes())
    }

    /// A sizer for a parent of `resident_bytes` (None: unknown, as on
    /// platforms without `/proc`).
    pub(super) fn for_parent(rule: TasksPerChild, resident_bytes: Option<u64>) -> Self {
        ChildSizer {
            rule,
            overheads: Vec::new(),
            task_seconds: 0.0,
            tasks_timed: 0,
            large_parent: resident_bytes.is_some_and(|bytes| bytes >= LARGE_PARENT_BYTES),
        }
    }

    pub(super) fn task_finished(&mut self, seconds: f64) {
        if seconds.is_finite() && seconds >= 0.0 {
            self.task_seconds += seconds;
            self.tasks_timed += 1;
        }
    }

    pub(super) fn child_finished(&mut self, overhead: f64) {
        if overhead.is_finite() {
            self.overheads.push(overhead.max(0.0));
        }
    }

    /// Tasks for the next child, when `pending` tasks wait, `in_flight`
    /// were given to live children and not reported yet, and at most
    /// `workers` children run at once.
    pub(super) fn tasks_for_next(&self, pending: usize, in_flight: usize, workers: usize) -> usize {
        match self.rule {
            TasksPerChild::Fixed(n) => n.min(pending),
            TasksPerChild::Auto if self.large_parent && self.overheads.is_empty() => {
                auto_tasks(Some(f64::INFINITY), Some(1.0), pending, in_flight, workers)
            }
            TasksPerChild::Auto => {
                let overhead = median(&self.overheads);
                let task =
                    (self.tasks_timed > 0).then(|| self.task_seconds / self.tasks_timed as f64);
                auto_tasks(overhead, task, pending, in_flight, workers)
            }
        }
    }
}

/// The automatic number of tasks for a child: enough that `overhead`
/// seconds per child stay under [`AUTO_OVERHEAD_TARGET`] of the tasks'
/// time (`task` seconds each), and 1 while either figure is unknown. It is
/// at most the worker's share of what remains, `ceil((pending + in_flight)
/// / workers)` (and at most `pending`), so that no worker is given more
/// than the others still have to do.
pub(super) fn auto_tasks(
    overhead: Option<f64>,
    task: Option<f64>,
    pending: usize,
    in_flight: usize,
    workers: usize,
) -> usize {
    let share = (pending + in_flight)
        .div_ceil(workers.max(1))
        .min(pending)
        .max(1);
    let (Some(overhead), Some(task)) = (overhead, task) else {
        return 1;
    };
    let needed = overhead / (AUTO_OVERHEAD_TARGET * task);
    if !(needed.is_finite() && needed < share as f64) {
        return share;
    }
    (needed.ceil() as usize).clamp(1, share)
}

fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        0.5 * (sorted[mid - 1] + sorted[mid])
    })
}

/// Runs the tasks in forked children (see [`super::run_tasks`]); returns
/// whether an interrupt stopped the run. On an interrupt or a system error
/// every child is killed and reaped.
pub(super) fn run<T, F, I, P>(
    tasks: &[usize],
    options: &PoolOptions,
    task: &F,
    mut interrupted: I,
    records: &mut Records<T, P>,
) -> Result<bool, PoolError>
where
    T: Serialize + DeserializeOwned,
    F: Fn(TaskContext) -> Result<T, String>,
    I: FnMut() -> bool,
    P: FnMut(&TaskRecord<T>),
{
    let mut pending: VecDeque<usize> = tasks.iter().copied().collect();
    let mut live: Vec<LiveChild> = Vec::new();
    let mut chunk = vec![0u8; READ_CHUNK_BYTES];
    let mut was_interrupted = false;
    let mut sizer = ChildSizer::new(options.tasks_per_child);

    loop {
        let may_start = match options.schedule {
            Schedule::Rolling => true,
            Schedule::Batch => live.is_empty(),
        };
        while may_start && live.len() < options.workers && !pending.is_empty() {
            let in_flight = live.iter().map(|c| c.unreported.len()).sum();
            let take = sizer.tasks_for_next(pending.len(), in_flight, options.workers);
            let batch: Vec<usize> = pending.drain(..take).collect();
            match spawn_child(&batch, options, task, &live) {
                Ok(child) => live.push(child),
                Err(message) => {
                    kill_and_reap_all(&mut live);
                    return Err(PoolError::System(format!(
                        "{message}; all child processes were killed"
                    )));
                }
            }
        }
        if live.is_empty() {
            break;
        }

        if let Err(message) = wait_for_output(&mut live, options.timeout, &mut chunk) {
            kill_and_reap_all(&mut live);
            return Err(PoolError::System(format!(
                "{message}; all child processes were killed"
            )));
        }

        for child in live.iter_mut() {
            match child.frames.take_frames::<ChildReport<T>>() {
                Ok(reports) => {
                    for report in reports {
                        let Some(_) = child.unreported.pop_front() else {
                            continue;
                        };
                        child.current_since = Instant::now();
                        child.reported_seconds += report.seconds;
                        sizer.task_finished(report.seconds);
                        let record = TaskRecord {
                            task: report.task,
                            outcome: report.outcome,
                            pid: child.pid.as_raw(),
                            seconds: report.seconds,
                            memory: report.memory,
                        };
                        records.finish(record);
                    }
                }
                Err(message) => {
                    let _ = kill(child.pid, Signal::SIGKILL);
                    child.killed_for.get_or_insert(Failure::BadFrame(message));
                }
            }
            if let (Some(limit), Some(_)) = (options.timeout, child.unreported.front()) {
                if child.killed_for.is_none() && child.current_since.elapsed() > limit {
                    let _ = kill(child.pid, Signal::SIGKILL);
                    child.killed_for = Some(Failure::Timeout(limit.as_secs_f64()));
                }
            }
            if child.reader.is_none() && child.exit.is_none() {
                child.exit = try_reap(child.pid);
            }
        }

        let mut still_live = Vec::with_capacity(live.len());
        for mut child in live.drain(..) {
            if child.exit.is_none() {
                still_live.push(child);
                continue;
            }
            if child.unreported.is_empty()
                && child.killed_for.is_none()
                && matches!(child.exit, Some(Some(WaitStatus::Exited(_, 0))))
            {
                let ended = child.eof_at.unwrap_or_else(Instant::now);
                let lifetime = ended.duration_since(child.spawned_at).as_secs_f64();
                sizer.child_finished(lifetime - child.reported_seconds);
            }
            let failure = child_failure(&child, options.memory_limit_mb.is_some());
            let seconds = child.current_since.elapsed().as_secs_f64();
            // Tasks after the one that was running never started: they go back
            // to the queue as they were, in front so task order is kept.
            while child.unreported.len() > 1 {
                let unstarted = child.unreported.pop_back().expect("length checked");
                pending.push_front(unstarted);
            }
            if let Some(failed) = child.unreported.pop_front() {
                let record = TaskRecord {
                    task: failed,
                    outcome: Err(failure),
                    pid: child.pid.as_raw(),
                    seconds,
                    memory: MemorySnapshot::default(),
                };
                records.finish(record);
            }
        }
        live = still_live;

        if interrupted() {
            kill_and_reap_all(&mut live);
            was_interrupted = true;
            break;
        }
    }

    Ok(was_interrupted)
}

/// Why the task that was running in a finished child failed.
fn child_failure(child: &LiveChild, memory_limited: bool) -> Failure {
    if let Some(reason) = &child.killed_for {
        return reason.clone();
    }
    match child.exit {
        Some(Some(WaitStatus::Signaled(_, Signal::SIGABRT, _))) if memory_limited => {
            Failure::MemoryLimit
        }
        Some(Some(WaitStatus::Signaled(_, signal, _))) => Failure::Signal(signal as i32),
        Some(Some(WaitStatus::Exited(_, status))) if status != 0 => Failure::Exit(status),
        _ if child.frames.pending_bytes() > 0 => Failure::BadFrame(format!(
            "stream ended inside a frame ({} bytes received)",
            child.frames.pending_bytes()
        )),
        _ => Failure::NoResult,
    }
}

/// Waits up to one poll interval (or the nearest task deadline) for output
/// from any child and reads what is there.
fn wait_for_output(
    live: &mut [LiveChild],
    timeout: Option<Duration>,
    chunk: &mut [u8],
) -> Result<(), String> {
    let open: Vec<usize> = (0..live.len())
        .filter(|&i| live[i].reader.is_some())
        .collect();
    let mut wait = POLL_INTERVAL;
    if live.iter().any(|c| c.reader.is_none() && c.exit.is_none()) {
        // A child has closed its pipe and is exiting: reap it soon, so its
        // worker slot is refilled at once.
        wait = Duration::from_millis(1);
    }
    if let Some(limit) = timeout {
        for child in live.iter().filter(|c| !c.unreported.is_empty()) {
            wait = wait.min(limit.saturating_sub(child.current_since.elapsed()));
        }
    }
    if open.is_empty() {
        // Every pipe is closed; children are only waiting to be reaped.
        std::thread::sleep(wait.min(Duration::from_millis(5)));
        return Ok(());
    }
    let wait_ms = wait.as_millis().clamp(1, POLL_INTERVAL.as_millis()) as u16;
    let ready: Vec<usize> = {
        let mut fds: Vec<PollFd> = open
            .iter()
            .map(|&i| {
                PollFd::new(
                    live[i].reader.as_ref().expect("open").as_fd(),
                    PollFlags::POLLIN,
                )
            })
            .collect();
        match poll(&mut fds, wait_ms) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return Err(format!("poll() failed: {e}")),
        }
        fds.iter()
            .zip(&open)
            .filter(|(fd, _)| fd.revents().is_some_and(|r| !r.is_empty()))
            .map(|(_, &i)| i)
            .collect()
    };
    for i in ready {
        let child = &mut live[i];
        let reader = child.reader.as_mut().expect("open");
        match reader.read(chunk) {
            Ok(0) => {
                child.reader = None;
                child.eof_at = Some(Instant::now());
            }
            Ok(n) => child.frames.extend(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("reading from child {}: {e}", child.pid)),
        }
    }
    Ok(())
}

/// Non-blocking reap. `Some(None)`: someone else (e.g. parallel's SIGCHLD
/// handler) reaped the child first, so its status is unknown.
fn try_reap(pid: Pid) -> Option<Option<WaitStatus>> {
    loop {
        match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => return None,
            Ok(status) => return Some(Some(status)),
            Err(Errno::EINTR) => continue,
            Err(_) => return Some(None),
        }
    }
}

fn reap_blocking(pid: Pid) {
    while let Err(Errno::EINTR) = waitpid(pid, None) {}
}

fn kill_and_reap_all(live: &mut Vec<LiveChild>) {
    for child in live.iter().filter(|c| c.exit.is_none()) {
        let _ = kill(child.pid, Signal::SIGKILL);
    }
    for child in live.drain(..) {
        if child.exit.is_none() {
            reap_blocking(child.pid);
        }
    }
}

fn spawn_child<T, F>(
    batch: &[usize],
    options: &PoolOptions,
    task: &F,
    siblings: &[LiveChild],
) -> Result<LiveChild, String>
where
    T: Serialize,
    F: Fn(TaskContext) -> Result<T, String>,
{
    let spawned_at = Instant::now();
    let (read_end, write_end) = pipe().map_err(|e| format!("pipe() failed: {e}"))?;
    let parent_pid = nix::unistd::getpid();
    let sibling_fds: Vec<RawFd> = siblings
        .iter()
        .filter_map(|c| c.reader.as_ref().map(|r| r.as_raw_fd()))
        .collect();
    // SAFETY: the parent is single-threaded (documented contract), and the
    // child runs only Rust code and leaves through `_exit` without returning.
    match unsafe { fork() } {
        Err(e) => Err(format!("fork() failed: {e}")),
        Ok(ForkResult::Child) => {
            drop(read_end);
            for fd in sibling_fds {
                // SAFETY: these descriptors belong to the parent's bookkeeping, which
                // this process never uses again.
                unsafe { libc::close(fd) };
            }
            let status = run_in_child(batch, options, task, write_end, parent_pid);
            // SAFETY: `_exit` skips atexit handlers and stdio flushing, which belong to R.
            unsafe { libc::_exit(status) }
        }
        Ok(ForkResult::Parent { child }) => {
            // Close our copy of the write end so end of file arrives when the child exits.
            drop(write_end);
            Ok(LiveChild {
                pid: child,
                spawned_at,
                eof_at: None,
                reported_seconds: 0.0,
                reader: Some(File::from(read_end)),
                frames: frame::FrameReader::default(),
                unreported: batch.iter().copied().collect(),
                current_since: Instant::now(),
                killed_for: None,
                exit: None,
            })
        }
    }
}

/// Exit statuses a child uses for problems outside any task.
const EXIT_WRITE_FAILED: i32 = 3;
const EXIT_SETUP_FAILED: i32 = 4;

fn run_in_child<T, F>(
    batch: &[usize],
    options: &PoolOptions,
    task: &F,
    write_end: OwnedFd,
    parent_pid: Pid,
) -> i32
where
    T: Serialize,
    F: Fn(TaskContext) -> Result<T, String>,
{
    prepare_child_process(parent_pid);
    if let Some(limit_mb) = options.memory_limit_mb {
        if limit_address_space(limit_mb).is_err() {
            return EXIT_SETUP_FAILED;
        }
    }
    let mut pipe = File::from(write_end);
    for (at, &task_number) in batch.iter().enumerate() {
        let started = Instant::now();
        let context = TaskContext { task: task_number };
        let outcome = match catch_unwind(AssertUnwindSafe(|| task(context))) {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(message)) => Err(Failure::Task(message)),
            Err(payload) => Err(Failure::Panic(panic_message(payload.as_ref()))),
        };
        let report = ChildReport {
            task: task_number,
            outcome,
            seconds: started.elapsed().as_secs_f64(),
            memory: if options.memory == MemoryReport::PerTask || at + 1 == batch.len() {
                procmem::snapshot_self()
            } else {
                procmem::snapshot_peak()
            },
        };
        let written = frame::encode(&report)
            .and_then(|bytes| pipe.write_all(&bytes).map_err(|e| e.to_string()));
        if written.is_err() {
            return EXIT_WRITE_FAILED;
        }
    }
    0
}

/// Makes the child independent of the R process's signal handling.
fn prepare_child_process(parent_pid: Pid) {
    // R's handlers for these would run R code in the child (R's segfault
    // handler even cleans up the session's temporary directory).
    for sig in [
        Signal::SIGSEGV,
        Signal::SIGBUS,
        Signal::SIGILL,
        Signal::SIGFPE,
        Signal::SIGPIPE,
        Signal::SIGCHLD,
        Signal::SIGUSR1,
        Signal::SIGUSR2,
        Signal::SIGABRT,
    ] {
        // SAFETY: installing the default disposition is always sound.
        let _ = unsafe { signal(sig, SigHandler::SigDfl) };
    }
    // Ctrl-C reaches the whole process group; the parent decides what happens
    // to the children, within one poll interval.
    // SAFETY: ignoring a signal is always sound.
    let _ = unsafe { signal(Signal::SIGINT, SigHandler::SigIgn) };
    #[cfg(target_os = "linux")]
    {
        // Die with the parent rather than run on as an orphan.
        // SAFETY: plain prctl call with integer arguments.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
        if nix::unistd::getppid() != parent_pid {
            // SAFETY: see run_in_child's exit.
            unsafe { libc::_exit(EXIT_SETUP_FAILED) };
        }
    }
    // Elsewhere a child cannot ask to die with its parent.
    #[cfg(not(target_os = "linux"))]
    let _ = parent_pid;
}

fn limit_address_space(headroom_mb: f64) -> Result<(), Errno> {
    let current = procmem::address_space_bytes().unwrap_or(0);
    let limit = current.saturating_add((headroom_mb * 1024.0 * 1024.0) as u64);
    setrlimit(Resource::RLIMIT_AS, limit, limit)
}
