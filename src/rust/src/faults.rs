//! Deliberate misbehaviour of chosen tasks, for testing how the engine and
//! its callers cope with children that die, hang or run out of memory.
//! Only ever enabled by tests (through an internal R option).

use std::collections::HashSet;

/// How a chosen task misbehaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// The child is killed by SIGKILL.
    Kill,
    /// The child dies of a segmentation fault (SIGSEGV).
    Segfault,
    /// The task panics.
    Panic,
    /// The task never finishes.
    Hang,
    /// The task allocates far more memory than any limit a test sets.
    Allocate,
}

impl Fault {
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "kill" => Some(Fault::Kill),
            "segfault" => Some(Fault::Segfault),
            "panic" => Some(Fault::Panic),
            "hang" => Some(Fault::Hang),
            "allocate" => Some(Fault::Allocate),
            _ => None,
        }
    }
}

/// Which tasks misbehave, and how.
#[derive(Clone, Debug, Default)]
pub struct FaultPlan {
    faults: Vec<(Fault, HashSet<usize>)>,
}

impl FaultPlan {
    pub fn add(&mut self, fault: Fault, tasks: impl IntoIterator<Item = usize>) {
        self.faults.push((fault, tasks.into_iter().collect()));
    }

    /// Misbehaves as planned for `task`; returns normally when nothing is planned.
    pub fn strike(&self, task: usize) {
        for (fault, tasks) in &self.faults {
            if tasks.contains(&task) {
                strike(*fault);
            }
        }
    }
}

fn strike(fault: Fault) {
    match fault {
        // SAFETY: raising a signal against ourselves has no memory effects;
        // the default dispositions (set in the child) end the process.
        Fault::Kill => unsafe {
            libc::raise(libc::SIGKILL);
        },
        Fault::Segfault => unsafe {
            libc::raise(libc::SIGSEGV);
        },
        Fault::Panic => panic!("injected fault"),
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
