//! The process workers of the engine (Unix): forked children that report
//! each task as a frame over a pipe. Fed children ([`TasksPerChild::Fed`])
//! also read their tasks, one at a time, from a command pipe.
//!
//! The workers know no task's type: a task's value reaches them encoded
//! ([`Payload`]), and [`super::run_tasks`] encodes and decodes it, so one
//! copy of this code serves every kind of task.

use super::{
    frame, procmem, run_caught, Failure, MemoryReport, MemorySnapshot, PoolError, PoolOptions,
    Schedule, TaskContext, TaskRecord, TasksPerChild, POLL_INTERVAL,
};
use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags};
use nix::sys::resource::{setrlimit, Resource};
use nix::sys::signal::{kill, sigaction, signal, SaFlags, SigAction, SigHandler, SigSet, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, pipe, ForkResult, Pid};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// A task's value as the child encoded it, carried in the frame as one
/// byte string.
pub(super) struct Payload(pub(super) Vec<u8>);

impl Serialize for Payload {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Bytes;
        impl serde::de::Visitor<'_> for Bytes {
            type Value = Payload;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a task's encoded value")
            }
            fn visit_bytes<E: serde::de::Error>(self, bytes: &[u8]) -> Result<Payload, E> {
                Ok(Payload(bytes.to_vec()))
            }
        }
        deserializer.deserialize_byte_buf(Bytes)
    }
}

/// A task as the workers run it: its value encoded.
pub(super) type EncodedTask<'a> = dyn Fn(TaskContext) -> Result<Payload, String> + 'a;

/// What a child writes to its result pipe.
#[derive(Serialize, Deserialize)]
enum ChildMessage {
    /// A finished task.
    Report(ChildReport),
    /// The PSS and private dirty memory of a fed child under
    /// [`MemoryReport::PerChild`], read when it was told to leave, i.e.
    /// after its last task.
    Memory(MemorySnapshot),
}

#[derive(Serialize, Deserialize)]
struct ChildReport {
    task: usize,
    outcome: Result<Payload, Failure>,
    seconds: f64,
    memory: MemorySnapshot,
}

struct LiveChild {
    pid: Pid,
    /// Read end of the child's result pipe; None once it reached end of file.
    reader: Option<File>,
    frames: frame::FrameReader,
    /// Write end of a fed child's command pipe; None for a child with a
    /// fixed number of tasks, and once a fed child was told to leave.
    commands: Option<File>,
    /// Tasks given to this child and not yet reported, in the order it runs
    /// them (at most one for a fed child).
    unreported: VecDeque<usize>,
    /// When the task at the front of `unreported` started, as far as the parent can tell.
    current_since: Instant,
    /// The record of a fed child's last task, kept back until its memory
    /// figures arrive (under [`MemoryReport::PerChild`]) or the child ends.
    held: Option<TaskRecord<Payload>>,
    /// Set when the parent killed the child, to report why.
    killed_for: Option<Failure>,
    /// Exit status once reaped; `Some(None)` when another waiter reaped it first.
    exit: Option<Option<WaitStatus>>,
}

const READ_CHUNK_BYTES: usize = 1 << 18;

/// Runs the tasks in forked children (see [`super::run_tasks`]), giving
/// each task's final record to `finish`; returns whether an interrupt
/// stopped the run. On an interrupt or a system error every child is
/// killed and reaped.
pub(super) fn run(
    tasks: &[usize],
    options: &PoolOptions,
    task: &EncodedTask,
    interrupted: &mut dyn FnMut() -> bool,
    finish: &mut dyn FnMut(TaskRecord<Payload>),
) -> Result<bool, PoolError> {
    let fed = options.tasks_per_child == TasksPerChild::Fed;
    // A fed child's last record waits for the memory figures it reads on leaving.
    let hold_last = fed && options.memory == MemoryReport::PerChild;
    let mut pending: VecDeque<usize> = tasks.iter().copied().collect();
    let mut live: Vec<LiveChild> = Vec::new();
    let mut chunk = vec![0u8; READ_CHUNK_BYTES];
    let mut was_interrupted = false;

    loop {
        let may_start = fed
            || match options.schedule {
                Schedule::Rolling => true,
                Schedule::Batch => live.is_empty(),
            };
        while may_start && live.len() < options.workers && !pending.is_empty() {
            let batch: Vec<usize> = match options.tasks_per_child {
                TasksPerChild::Fixed(n) => pending.drain(..n.min(pending.len())).collect(),
                TasksPerChild::Fed => Vec::new(),
            };
            match spawn_child(&batch, fed, options, task, &live) {
                Ok(mut child) => {
                    feed(&mut child, &mut pending);
                    live.push(child);
                }
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
            match child.frames.take_frames::<ChildMessage>() {
                Ok(messages) => {
                    for message in messages {
                        match message {
                            ChildMessage::Report(report) => {
                                let Some(_) = child.unreported.pop_front() else {
                                    continue;
                                };
                                child.current_since = Instant::now();
                                let record = TaskRecord {
                                    task: report.task,
                                    outcome: report.outcome,
                                    pid: child.pid.as_raw(),
                                    seconds: report.seconds,
                                    memory: report.memory,
                                };
                                // Fed tasks only leave `pending`, so with none
                                // left this was the child's last task.
                                if hold_last && pending.is_empty() {
                                    child.held = Some(record);
                                } else {
                                    finish(record);
                                }
                            }
                            ChildMessage::Memory(memory) => {
                                if let Some(mut record) = child.held.take() {
                                    record.memory = memory;
                                    finish(record);
                                }
                            }
                        }
                    }
                }
                Err(message) => {
                    let _ = kill(child.pid, Signal::SIGKILL);
                    child.killed_for.get_or_insert(Failure::BadFrame(message));
                }
            }
            if child.unreported.is_empty() && child.killed_for.is_none() && child.reader.is_some() {
                feed(child, &mut pending);
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
            // The child ended before its memory figures came: the record as it is.
            if let Some(record) = child.held.take() {
                finish(record);
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
                finish(record);
            }
        }
        live = still_live;

        if interrupted() {
            // Finished tasks whose memory figures were still on their way.
            for child in live.iter_mut() {
                if let Some(record) = child.held.take() {
                    finish(record);
                }
            }
            kill_and_reap_all(&mut live);
            was_interrupted = true;
            break;
        }
    }

    Ok(was_interrupted)
}

/// Sends a fed child the next pending task, or, when none is left, closes
/// its command pipe, which tells it to leave. Does nothing for a child with
/// a fixed number of tasks or one already told to leave.
fn feed(child: &mut LiveChild, pending: &mut VecDeque<usize>) {
    let Some(commands) = child.commands.as_mut() else {
        return;
    };
    let Some(task) = pending.pop_front() else {
        child.commands = None;
        return;
    };
    child.unreported.push_back(task);
    child.current_since = Instant::now();
    if send_task(commands, task).is_err() {
        // The child is gone (EPIPE) or its pipe is unusable: the task fails
        // with whatever ended the child, as a task it was running would.
        child.commands = None;
        let _ = kill(child.pid, Signal::SIGKILL);
    }
}

/// Writes a task number to a fed child's command pipe. A write to the pipe
/// of a child that has died fails with EPIPE and raises SIGPIPE, which R
/// handles by signalling an R error, a longjmp through this code: SIGPIPE is
/// ignored during the write (the parent is single-threaded).
pub(super) fn send_task(commands: &mut File, task: usize) -> std::io::Result<()> {
    let ignore = SigAction::new(SigHandler::SigIgn, SaFlags::empty(), SigSet::empty());
    // SAFETY: ignoring a signal is always sound; the previous action is restored below.
    let previous = unsafe { sigaction(Signal::SIGPIPE, &ignore) };
    let written = commands.write_all(&(task as u64).to_le_bytes());
    if let Ok(previous) = previous {
        // SAFETY: reinstalls the action that was in place before the write.
        let _ = unsafe { sigaction(Signal::SIGPIPE, &previous) };
    }
    written
}

/// Reads the next task number from the command pipe; `Ok(None)` at end of
/// file, i.e. when the parent has no task left for this child.
fn read_task(commands: &mut File) -> std::io::Result<Option<usize>> {
    let mut bytes = [0u8; 8];
    let mut filled = 0;
    while filled < bytes.len() {
        match commands.read(&mut bytes[filled..]) {
            Ok(0) if filled == 0 => return Ok(None),
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Some(u64::from_le_bytes(bytes) as usize))
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

/// Forks a child that runs `batch`, or, when `fed`, the tasks it will read
/// from a command pipe.
fn spawn_child(
    batch: &[usize],
    fed: bool,
    options: &PoolOptions,
    task: &EncodedTask,
    siblings: &[LiveChild],
) -> Result<LiveChild, String> {
    let (read_end, write_end) = pipe().map_err(|e| format!("pipe() failed: {e}"))?;
    let command_pipe = if fed {
        Some(pipe().map_err(|e| format!("pipe() failed: {e}"))?)
    } else {
        None
    };
    let parent_pid = nix::unistd::getpid();
    // The siblings' pipe ends this process holds: a child that kept a
    // sibling's command pipe open would stop it from ever seeing end of file.
    let sibling_fds: Vec<RawFd> = siblings
        .iter()
        .flat_map(|c| [c.reader.as_ref(), c.commands.as_ref()])
        .flatten()
        .map(|file| file.as_raw_fd())
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
            let tasks = match command_pipe {
                Some((commands, parent_end)) => {
                    drop(parent_end);
                    ChildTasks::Fed(commands)
                }
                None => ChildTasks::Batch(batch),
            };
            let status = run_in_child(tasks, options, task, write_end, parent_pid);
            // SAFETY: `_exit` skips atexit handlers and stdio flushing, which belong to R.
            unsafe { libc::_exit(status) }
        }
        Ok(ForkResult::Parent { child }) => {
            // Close our copy of the write end so end of file arrives when the child exits.
            drop(write_end);
            let commands = command_pipe.map(|(child_end, write_end)| {
                drop(child_end);
                File::from(write_end)
            });
            Ok(LiveChild {
                pid: child,
                reader: Some(File::from(read_end)),
                frames: frame::FrameReader::default(),
                commands,
                unreported: batch.iter().copied().collect(),
                current_since: Instant::now(),
                held: None,
                killed_for: None,
                exit: None,
            })
        }
    }
}

/// Exit statuses a child uses for problems outside any task.
const EXIT_WRITE_FAILED: i32 = 3;
const EXIT_SETUP_FAILED: i32 = 4;
const EXIT_COMMAND_FAILED: i32 = 5;

/// Runs one task and reports it with `memory`, read after it.
fn run_one(task: &EncodedTask, number: usize, memory: fn() -> MemorySnapshot) -> ChildMessage {
    let started = Instant::now();
    let outcome = run_caught(task, TaskContext { task: number });
    ChildMessage::Report(ChildReport {
        task: number,
        outcome,
        seconds: started.elapsed().as_secs_f64(),
        memory: memory(),
    })
}

/// Writes one message as a frame; false when it could not.
fn send(pipe: &mut File, message: &ChildMessage) -> bool {
    frame::encode(message)
        .and_then(|bytes| pipe.write_all(&bytes).map_err(|e| e.to_string()))
        .is_ok()
}

/// The memory figures a child reads after a task: all of them, or the
/// cheap peak RSS only.
fn memory_reader(all: bool) -> fn() -> MemorySnapshot {
    if all {
        procmem::snapshot_self
    } else {
        procmem::snapshot_peak
    }
}

/// Where a child gets its tasks from.
enum ChildTasks<'a> {
    /// All of them at fork.
    Batch(&'a [usize]),
    /// One task number at a time from this command pipe, until end of file.
    Fed(OwnedFd),
}

/// The body of a child: runs its tasks and reports each one; a fed child
/// under [`MemoryReport::PerChild`] reports its memory when told to leave.
fn run_in_child(
    tasks: ChildTasks,
    options: &PoolOptions,
    task: &EncodedTask,
    write_end: OwnedFd,
    parent_pid: Pid,
) -> i32 {
    if let Err(status) = set_up_child(options, parent_pid) {
        return status;
    }
    let mut pipe = File::from(write_end);
    let per_task = options.memory == MemoryReport::PerTask;
    let per_child = options.memory == MemoryReport::PerChild;
    match tasks {
        ChildTasks::Batch(batch) => {
            for (at, &number) in batch.iter().enumerate() {
                let memory = memory_reader(per_task || (per_child && at + 1 == batch.len()));
                if !send(&mut pipe, &run_one(task, number, memory)) {
                    return EXIT_WRITE_FAILED;
                }
            }
        }
        ChildTasks::Fed(commands) => {
            let mut commands = File::from(commands);
            let mut ran = false;
            loop {
                let number = match read_task(&mut commands) {
                    Ok(Some(number)) => number,
                    Ok(None) => break,
                    Err(_) => return EXIT_COMMAND_FAILED,
                };
                if !send(&mut pipe, &run_one(task, number, memory_reader(per_task))) {
                    return EXIT_WRITE_FAILED;
                }
                ran = true;
            }
            // Under PerTask every report carried its figures already, under
            // Never there are none, and a child that ran nothing has none to
            // give. Reading them costs a walk of the page tables (tenths of a
            // second from a 4 GB session), so only when they are sent.
            if ran && per_child {
                let memory = ChildMessage::Memory(procmem::snapshot_self());
                if !send(&mut pipe, &memory) {
                    return EXIT_WRITE_FAILED;
                }
            }
        }
    }
    0
}

/// What every child does first; the exit status when it failed.
fn set_up_child(options: &PoolOptions, parent_pid: Pid) -> Result<(), i32> {
    prepare_child_process(parent_pid);
    if let Some(limit_mb) = options.memory_limit_mb {
        if limit_address_space(limit_mb).is_err() {
            return Err(EXIT_SETUP_FAILED);
        }
    }
    Ok(())
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
