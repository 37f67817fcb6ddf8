//! Synthetic tasks for exercising the fork engine from R and from tests:
//! they sleep, allocate, crash, hang and return random payloads on demand.

use crate::engine::TaskContext;
use crate::streams::TaskStream;
use std::collections::HashSet;
use std::time::Duration;

/// What the synthetic tasks do. Task numbers are 1-based, as in R.
#[derive(Clone, Debug, Default)]
pub(crate) struct SyntheticTasks {
    pub(crate) payload: usize,
    pub(crate) sleep: Duration,
    /// Megabytes to allocate: one value for every task, or one per task.
    pub(crate) alloc_mb: Vec<f64>,
    pub(crate) crash: HashSet<usize>,
    pub(crate) hang: HashSet<usize>,
    pub(crate) seed: u64,
}

impl SyntheticTasks {
    /// Runs task `context.task` in the calling (child) process.
    pub(crate) fn run(&self, context: TaskContext) -> Result<Vec<f64>, String> {
        if self.crash.contains(&context.task) {
            crate::platform::kill_self();
        }
        if self.hang.contains(&context.task) {
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        std::thread::sleep(self.sleep);
        let touched = touch_megabytes(self.alloc_mb_for(context.task));
        let mut stream = TaskStream::new(self.seed, context.task as u64);
        let values = (0..self.payload).map(|_| stream.uniform()).collect();
        std::hint::black_box(touched);
        Ok(values)
    }
}

impl SyntheticTasks {
    fn alloc_mb_for(&self, task: usize) -> f64 {
        match self.alloc_mb.len() {
            0 => 0.0,
            1 => self.alloc_mb[0],
            n => self.alloc_mb[(task.max(1) - 1) % n],
        }
    }
}

/// Allocates and writes every page of `megabytes` MiB, so they count as resident.
fn touch_megabytes(megabytes: f64) -> Vec<u8> {
    let bytes = (megabytes.max(0.0) * 1024.0 * 1024.0) as usize;
    let mut buffer = vec![0u8; bytes];
    for page in buffer.chunks_mut(4096) {
        page[0] = 1;
    }
    buffer
}
