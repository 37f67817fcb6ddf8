//! The thread workers of the engine: where there is no fork (Windows), tasks
//! run on up to `workers` threads of this process.
//!
//! A thread shares the process, so it has none of a child process's
//! guarantees: a panic is caught and recorded, but a task that crashes ends
//! the whole process, one that hangs holds the run up (threads cannot be
//! killed, so timeouts and memory limits are refused beforehand), and there
//! are no per-task memory figures. It suits tasks that cannot crash, such
//! as the grid search's fits.

use super::{
    run_caught, MemorySnapshot, PoolError, PoolOptions, Records, TaskContext, TaskRecord,
    POLL_INTERVAL,
};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::time::Instant;

/// Stack of a worker thread: that of R's main thread on most systems, so a
/// task needs no more than it would there.
const STACK_BYTES: usize = 8 << 20;

/// Runs the tasks on threads (see [`super::run_tasks`]); returns whether an
/// interrupt stopped the run. After an interrupt no task starts, and the
/// tasks already running are waited for and kept. An error only when not a
/// single thread could be started.
pub(super) fn run<T, F, I, P>(
    tasks: &[usize],
    options: &PoolOptions,
    task: &F,
    mut interrupted: I,
    records: &mut Records<T, P>,
) -> Result<bool, PoolError>
where
    T: Send,
    F: Fn(TaskContext) -> Result<T, String> + Sync,
    I: FnMut() -> bool,
    P: FnMut(&TaskRecord<T>),
{
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let pid = i32::try_from(std::process::id()).unwrap_or(0);
    let mut was_interrupted = false;
    let mut started_threads = 0;
    let mut spawn_error = None;
    let (sender, receiver) = channel::<TaskRecord<T>>();
    std::thread::scope(|scope| {
        for _ in 0..options.workers.min(tasks.len()) {
            let sender = sender.clone();
            let (next, stop) = (&next, &stop);
            let worker = move || {
                while !stop.load(Ordering::Relaxed) {
                    let Some(&number) = tasks.get(next.fetch_add(1, Ordering::Relaxed)) else {
                        break;
                    };
                    let started = Instant::now();
                    let outcome = run_caught(task, TaskContext { task: number });
                    let record = TaskRecord {
                        task: number,
                        outcome,
                        pid,
                        seconds: started.elapsed().as_secs_f64(),
                        memory: MemorySnapshot::default(),
                    };
                    if sender.send(record).is_err() {
                        break;
                    }
                }
            };
            // With fewer threads than asked for, the others take the tasks.
            match std::thread::Builder::new()
                .stack_size(STACK_BYTES)
                .spawn_scoped(scope, worker)
            {
                Ok(_) => started_threads += 1,
                Err(error) => spawn_error = Some(error),
            }
        }
        drop(sender);
        if started_threads == 0 {
            return;
        }
        loop {
            match receiver.recv_timeout(POLL_INTERVAL) {
                Ok(record) => records.finish(record),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if !was_interrupted && interrupted() {
                was_interrupted = true;
                stop.store(true, Ordering::Relaxed);
            }
        }
    });
    match spawn_error {
        Some(error) if started_threads == 0 => Err(PoolError::System(format!(
            "cannot start a worker thread: {error}"
        ))),
        _ => Ok(was_interrupted),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{run_tasks, Failure, WorkerKind};
    use super::*;
    use std::time::Duration;

    fn threads(workers: usize) -> PoolOptions {
        PoolOptions {
            kind: WorkerKind::Thread,
            workers,
            ..PoolOptions::default()
        }
    }

    fn draws(context: TaskContext) -> Result<Vec<f64>, String> {
        let mut stream = crate::streams::TaskStream::new(99, context.task as u64);
        Ok((0..50).map(|_| stream.uniform()).collect())
    }

    #[test]
    fn results_come_back_in_task_order_whatever_the_thread_count() {
        let tasks: Vec<usize> = vec![5, 1, 9, 2, 7, 3];
        let reference: Vec<Vec<f64>> = tasks
            .iter()
            .map(|&t| draws(TaskContext { task: t }).unwrap())
            .collect();
        for workers in [1, 2, 3, 8] {
            let mut announced = Vec::new();
            let batch = run_tasks(
                &tasks,
                &threads(workers),
                draws,
                || false,
                |r| announced.push(r.task),
            )
            .unwrap();
            assert!(!batch.interrupted);
            let values: Vec<Vec<f64>> = batch
                .records
                .iter()
                .map(|r| r.outcome.clone().unwrap())
                .collect();
            assert_eq!(values, reference, "{workers} threads");
            assert!(batch
                .records
                .iter()
                .all(|r| r.pid == std::process::id() as i32));
            assert!(batch
                .records
                .iter()
                .all(|r| r.memory == MemorySnapshot::default()));
            announced.sort_unstable();
            let mut expected = tasks.clone();
            expected.sort_unstable();
            assert_eq!(announced, expected, "every task announced once");
        }
    }

    #[test]
    fn tasks_run_at_once_on_several_threads() {
        let started = Instant::now();
        let nap = |_: TaskContext| {
            std::thread::sleep(Duration::from_millis(300));
            Ok(format!("{:?}", std::thread::current().id()))
        };
        let batch = run_tasks(&[1, 2, 3, 4], &threads(4), nap, || false, |_| {}).unwrap();
        let elapsed = started.elapsed();
        assert!(elapsed < Duration::from_millis(1100), "took {elapsed:?}");
        let mut ids: Vec<_> = batch
            .records
            .iter()
            .map(|r| r.outcome.clone().unwrap())
            .collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 4, "four distinct threads");
    }

    #[test]
    fn errors_and_panics_fail_only_their_task() {
        let picky = |context: TaskContext| match context.task {
            2 => Err("no good".to_string()),
            3 => panic!("task three panicked"),
            n => Ok(n * 10),
        };
        let batch = run_tasks(&[1, 2, 3, 4], &threads(2), picky, || false, |_| {}).unwrap();
        let outcomes: Vec<_> = batch.records.iter().map(|r| r.outcome.clone()).collect();
        assert_eq!(outcomes[0], Ok(10));
        assert_eq!(outcomes[1], Err(Failure::Task("no good".into())));
        assert_eq!(
            outcomes[2],
            Err(Failure::Panic("task three panicked".into()))
        );
        assert_eq!(outcomes[3], Ok(40));
    }

    #[test]
    fn an_interrupt_starts_no_further_task_and_keeps_the_finished_ones() {
        let nap = |context: TaskContext| {
            std::thread::sleep(Duration::from_millis(200));
            Ok(context.task)
        };
        let started = Instant::now();
        let tasks: Vec<usize> = (1..=40).collect();
        let batch = run_tasks(
            &tasks,
            &threads(2),
            nap,
            || started.elapsed() > Duration::from_millis(300),
            |_| {},
        )
        .unwrap();
        assert!(batch.interrupted);
        assert!(started.elapsed() < Duration::from_secs(2));
        let finished = batch.records.iter().filter(|r| r.outcome.is_ok()).count();
        assert!((2..=6).contains(&finished), "{finished} finished");
        assert!(batch.records[39].outcome == Err(Failure::Interrupted));
    }

    #[test]
    fn timeouts_and_memory_limits_are_refused() {
        let mut options = threads(2);
        options.timeout = Some(Duration::from_secs(1));
        let refused = run_tasks(&[1], &options, draws, || false, |_| {});
        assert!(matches!(refused, Err(PoolError::Invalid(_))));
        let mut options = threads(2);
        options.memory_limit_mb = Some(100.0);
        let refused = run_tasks(&[1], &options, draws, || false, |_| {});
        assert!(matches!(refused, Err(PoolError::Invalid(_))));
    }

    #[test]
    fn zero_tasks_start_no_thread() {
        let batch = run_tasks(&[], &threads(4), draws, || false, |_| {}).unwrap();
        assert!(batch.records.is_empty() && !batch.interrupted);
    }
}
