//! Deliberate misbehaviour of chosen tasks, for testing how the engine and
//! its callers cope with children that die, hang or run out of memory.
//! Compiled only with the `test-hooks` feature: tests arm a plan with
//! [`arm`] (from R, `wispack:::inject_faults()`), and the fork-backend
//! bootstrap task calls [`strike_armed`] before each replicate, as does
//! every task of [`crate::engine::map_tasks`] that runs in a forked child
//! (the fits of species, structures and curves). Run in this process, those
//! tasks call [`delay_armed`], which only applies [`Fault::Delay`] (a slow
//! task, for tests that watch progress arrive while work goes on).

use std::collections::HashSet;
use std::sync::Mutex;

/// The plan armed for this process; forked children inherit it.
static ARMED: Mutex<Option<FaultPlan>> = Mutex::new(None);

/// Arms `plan` for the following fork-backend runs (`None` disarms).
pub(crate) fn arm(plan: Option<FaultPlan>) {
    *ARMED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner()) = plan;
}

/// Sleeps as the armed plan says for `task` when it delays that task; every
/// other fault is left to [`strike_armed`].
pub(crate) fn delay_armed(task: usize) {
    let plan = ARMED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .clone();
    if let Some(plan) = plan {
        for (fault, tasks) in &plan.faults {
            if *fault == Fault::Delay && tasks.contains(&task) {
                strike(Fault::Delay);
            }
        }
    }
}

/// Misbehaves as the armed plan says for `task`, if one is armed.
pub(crate) fn strike_armed(task: usize) {
    let plan = ARMED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .clone();
    if let Some(plan) = plan {
        plan.strike(task);
    }
}

/// How a chosen task misbehaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Fault {
    /// The child is killed by SIGKILL (aborts where there are no signals).
    Kill,
    /// The child dies of a segmentation fault (SIGSEGV).
    Segfault,
    /// The task panics.
    Panic,
    /// The task never finishes.
    Hang,
    /// The task allocates far more memory than any limit a test sets.
    Allocate,
    /// The task sleeps for [`DELAY`] before it starts.
    Delay,
}

/// How long a [`Fault::Delay`] task sleeps.
pub(crate) const DELAY: std::time::Duration = std::time::Duration::from_millis(600);

impl Fault {
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        match name {
            "kill" => Some(Fault::Kill),
            "segfault" => Some(Fault::Segfault),
            "panic" => Some(Fault::Panic),
            "hang" => Some(Fault::Hang),
            "allocate" => Some(Fault::Allocate),
            "delay" => Some(Fault::Delay),
            _ => None,
        }
    }
}

/// Which tasks misbehave, and how.
#[derive(Clone, Debug, Default)]
pub(crate) struct FaultPlan {
    faults: Vec<(Fault, HashSet<usize>)>,
}

impl FaultPlan {
    pub(crate) fn add(&mut self, fault: Fault, tasks: impl IntoIterator<Item = usize>) {
        self.faults.push((fault, tasks.into_iter().collect()));
    }

    /// Misbehaves as planned for `task`; returns normally when nothing is planned.
    pub(crate) fn strike(&self, task: usize) {
        for (fault, tasks) in &self.faults {
            if tasks.contains(&task) {
                strike(*fault);
            }
        }
    }
}

fn strike(fault: Fault) {
    match fault {
        Fault::Kill => crate::platform::kill_self(),
        // SAFETY: raising a signal against ourselves has no memory effects;
        // the default disposition (set in the child) ends the process.
        Fault::Segfault => unsafe {
            libc::raise(libc::SIGSEGV);
        },
        Fault::Panic => panic!("injected fault"),
        Fault::Delay => std::thread::sleep(DELAY),
        Fault::Hang => loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        },
        Fault::Allocate => {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                let mut block = vec![0u8; 64 << 20];
                for page in block.chunks_mut(4096) {
                    page[0] = 1;
                }
                hoard.push(block);
            }
        }
    }
}
