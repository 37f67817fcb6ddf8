//! Behaviour of the fork engine. These tests fork: run them with
//! `cargo test -- --test-threads=1` (the README's test command does).

use super::*;
use std::collections::HashSet;
use std::time::{Instant, SystemTime};

/// [`super::run_tasks`] for runs that are never interrupted: the records.
fn run_tasks<T, F, I, P>(
    tasks: &[usize],
    options: &PoolOptions,
    task: F,
    interrupted: I,
    on_record: P,
) -> Result<Vec<TaskRecord<T>>, PoolError>
where
    T: Serialize + DeserializeOwned + Send,
    F: Fn(TaskContext) -> Result<T, String> + Sync,
    I: FnMut() -> bool,
    P: FnMut(&TaskRecord<T>),
{
    super::run_tasks(tasks, options, task, interrupted, on_record).map(|batch| {
        assert!(!batch.interrupted);
        batch.records
    })
}

fn numbers(n: usize) -> Vec<usize> {
    (1..=n).collect()
}

fn options(workers: usize, tasks_per_child: usize, schedule: Schedule) -> PoolOptions {
    PoolOptions {
        workers,
        tasks_per_child: TasksPerChild::Fixed(tasks_per_child),
        schedule,
        ..PoolOptions::default()
    }
}

/// Options of workers fed one task at a time, PSS once per child (the
/// defaults of `bs_batch()`).
fn fed_options(workers: usize) -> PoolOptions {
    PoolOptions {
        workers,
        tasks_per_child: TasksPerChild::Fed,
        memory: MemoryReport::PerChild,
        ..PoolOptions::default()
    }
}

/// Tasks per child process, in the order the children first appear.
fn tasks_per_pid<T>(records: &[TaskRecord<T>]) -> Vec<(i32, Vec<usize>)> {
    let mut groups: Vec<(i32, Vec<usize>)> = Vec::new();
    for r in records {
        match groups.iter_mut().find(|(pid, _)| *pid == r.pid) {
            Some((_, tasks)) => tasks.push(r.task),
            None => groups.push((r.pid, vec![r.task])),
        }
    }
    groups
}

fn never() -> bool {
    false
}

/// Set by `tools/valgrind.sh`: under memcheck everything runs 20-50 times
/// slower, so timed tests stretch their pauses, and valgrind manages the
/// client's memory itself, so `RLIMIT_AS` cannot be tested there.
fn under_valgrind() -> bool {
    std::env::var_os("WISPACK_UNDER_VALGRIND").is_some()
}

/// How much longer timed tests wait.
fn stretch() -> f64 {
    if under_valgrind() {
        20.0
    } else {
        1.0
    }
}

/// Children of this process, zombies included, found through /proc.
fn child_pids() -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let after_name = &stat[stat.rfind(')').unwrap() + 2..];
        let ppid: i32 = after_name.split(' ').nth(1).unwrap().parse().unwrap();
        if ppid == me {
            found.push(pid);
        }
    }
    found
}

fn open_fd_count() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Runs `body` and checks that it left no child process and no open descriptor behind.
fn leaves_no_trace<R>(body: impl FnOnce() -> R) -> R {
    let fds = open_fd_count();
    let result = body();
    assert_eq!(child_pids(), Vec::<i32>::new(), "children left behind");
    assert_eq!(open_fd_count(), fds, "file descriptors leaked");
    result
}

fn draws(context: TaskContext) -> Result<Vec<f64>, String> {
    let mut stream = crate::streams::TaskStream::new(99, context.task as u64);
    Ok((0..50).map(|_| stream.uniform()).collect())
}

fn values(records: Vec<TaskRecord<Vec<f64>>>) -> Vec<Vec<f64>> {
    records
        .into_iter()
        .map(|r| r.outcome.expect("task succeeded"))
        .collect()
}

#[test]
fn results_do_not_depend_on_workers_grouping_or_schedule() {
    let reference: Vec<Vec<f64>> = numbers(7)
        .into_iter()
        .map(|t| draws(TaskContext { task: t }).unwrap())
        .collect();
    for schedule in [Schedule::Rolling, Schedule::Batch] {
        for workers in [1, 2, 3] {
            for per_child in [1, 3] {
                let records = leaves_no_trace(|| {
                    run_tasks(
                        &numbers(7),
                        &options(workers, per_child, schedule),
                        draws,
                        never,
                        |_| {},
                    )
                    .unwrap()
                });
                assert_eq!(
                    records.iter().map(|r| r.task).collect::<Vec<_>>(),
                    numbers(7)
                );
                assert_eq!(
                    values(records),
                    reference,
                    "{schedule:?} workers {workers} per child {per_child}"
                );
            }
        }
    }
}

#[test]
fn each_child_runs_at_most_tasks_per_child_tasks_in_distinct_processes() {
    let records = leaves_no_trace(|| {
        run_tasks(
            &numbers(7),
            &options(2, 3, Schedule::Rolling),
            draws,
            never,
            |_| {},
        )
        .unwrap()
    });
    let mut per_pid = std::collections::HashMap::new();
    for r in &records {
        assert_ne!(r.pid, std::process::id() as i32);
        *per_pid.entry(r.pid).or_insert(0) += 1;
    }
    assert_eq!(per_pid.len(), 3, "7 tasks at 3 per child need 3 children");
    assert!(per_pid.values().all(|&n| n <= 3));
}

fn now_seconds() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// Start and end times of a task that sleeps 0.4 s for task 1 and 0.05 s
/// otherwise (20 times longer under valgrind).
fn timed(context: TaskContext) -> Result<(f64, f64), String> {
    let start = now_seconds();
    let pause = stretch() * if context.task == 1 { 0.4 } else { 0.05 };
    std::thread::sleep(Duration::from_secs_f64(pause));
    Ok((start, now_seconds()))
}

#[test]
fn rolling_refills_at_once_and_batch_waits_for_the_whole_batch() {
    let spans = |schedule| {
        let records = leaves_no_trace(|| {
            run_tasks(&numbers(4), &options(2, 1, schedule), timed, never, |_| {}).unwrap()
        });
        records
            .into_iter()
            .map(|r| r.outcome.unwrap())
            .collect::<Vec<_>>()
    };
    let rolling = spans(Schedule::Rolling);
    assert!(
        rolling[2].0 < rolling[0].1,
        "rolling: task 3 should start while task 1 runs"
    );
    let batch = spans(Schedule::Batch);
    assert!(
        batch[2].0 >= batch[0].1,
        "batch: task 3 must wait for task 1"
    );
    assert!(batch[3].0 >= batch[0].1);
    for spans in [rolling, batch] {
        for (i, a) in spans.iter().enumerate() {
            let running = spans.iter().filter(|b| b.0 <= a.0 && a.0 < b.1).count();
            assert!(
                running <= 2,
                "{running} tasks were running when task {} started, with 2 workers",
                i + 1
            );
        }
    }
}

#[test]
fn a_crashed_task_reports_its_signal_and_the_others_succeed() {
    let crash = |context: TaskContext| {
        if context.task == 2 {
            unsafe { libc::raise(libc::SIGKILL) };
        }
        draws(context)
    };
    let records = leaves_no_trace(|| {
        run_tasks(
            &numbers(5),
            &options(2, 3, Schedule::Rolling),
            crash,
            never,
            |_| {},
        )
        .unwrap()
    });
    assert_eq!(
        records[1].outcome.as_ref().unwrap_err(),
        &Failure::Signal(9)
    );
    assert_eq!(
        records[1].outcome.as_ref().unwrap_err().to_string(),
        "killed by signal 9 (SIGKILL)"
    );
    for r in records.iter().filter(|r| r.task != 2) {
        assert!(r.outcome.is_ok(), "task {} failed: {:?}", r.task, r.outcome);
    }
}

#[test]
fn exits_without_a_result_are_reported_by_status() {
    let quit = |context: TaskContext| -> Result<Vec<f64>, String> {
        match context.task {
            1 => unsafe { libc::_exit(7) },
            2 => unsafe { libc::_exit(0) },
            3 => Err("bad input".into()),
            4 => panic!("deliberate"),
            _ => draws(context),
        }
    };
    let records = leaves_no_trace(|| {
        run_tasks(
            &numbers(5),
            &options(2, 1, Schedule::Rolling),
            quit,
            never,
            |_| {},
        )
        .unwrap()
    });
    let reasons: Vec<String> = records
        .iter()
        .map(|r| {
            r.outcome
                .as_ref()
                .err()
                .map_or("ok".into(), |f| f.to_string())
        })
        .collect();
    assert_eq!(
        reasons,
        [
            "non-zero exit (status 7)",
            "no result",
            "error: bad input",
            "panic: deliberate",
            "ok"
        ]
    );
}

#[test]
fn a_panic_does_not_cost_the_tasks_after_it_in_the_same_child() {
    let flaky = |context: TaskContext| {
        if context.task == 1 {
            panic!("first task fails");
        }
        draws(context)
    };
    let records = leaves_no_trace(|| {
        run_tasks(
            &numbers(3),
            &options(1, 3, Schedule::Rolling),
            flaky,
            never,
            |_| {},
        )
        .unwrap()
    });
    assert!(matches!(records[0].outcome, Err(Failure::Panic(_))));
    assert!(records[1].outcome.is_ok() && records[2].outcome.is_ok());
    assert_eq!(records[0].pid, records[2].pid, "one child ran all three");
}

/// A value that cannot be encoded when it is 1 and cannot be decoded when
/// it is 2.
#[derive(Debug, PartialEq)]
struct Fussy(u32);

impl Serialize for Fussy {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.0 == 1 {
            return Err(serde::ser::Error::custom("one is not encodable"));
        }
        serializer.serialize_u32(self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Fussy {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = u32::deserialize(deserializer)?;
        if value == 2 {
            return Err(serde::de::Error::custom("two is not decodable"));
        }
        Ok(Fussy(value))
    }
}

#[test]
fn a_value_that_cannot_be_encoded_or_decoded_fails_its_task_alone() {
    for workers in [options(1, 3, Schedule::Rolling), fed_options(1)] {
        let records = leaves_no_trace(|| {
            run_tasks(
                &numbers(3),
                &workers,
                |context: TaskContext| Ok(Fussy(context.task as u32)),
                never,
                |_| {},
            )
            .unwrap()
        });
        match &records[0].outcome {
            Err(Failure::Task(message)) => {
                assert!(message.contains("one is not encodable"), "{message}")
            }
            other => panic!("task 1: {other:?}"),
        }
        match &records[1].outcome {
            Err(Failure::BadFrame(message)) => {
                assert!(message.contains("two is not decodable"), "{message}")
            }
            other => panic!("task 2: {other:?}"),
        }
        assert_eq!(records[2].outcome.as_ref().ok(), Some(&Fussy(3)));
        assert_eq!(records[0].pid, records[2].pid, "one child ran all three");
    }
}

#[test]
fn a_hung_task_times_out_without_holding_back_the_rest() {
    let hang = |context: TaskContext| {
        if context.task == 3 {
            loop {
                std::thread::sleep(Duration::from_secs(60));
            }
        }
        draws(context)
    };
    let started = Instant::now();
    let mut opts = options(2, 2, Schedule::Rolling);
    let timeout = 0.5 * stretch();
    opts.timeout = Some(Duration::from_secs_f64(timeout));
    let records = leaves_no_trace(|| run_tasks(&numbers(6), &opts, hang, never, |_| {}).unwrap());
    assert_eq!(
        records[2].outcome.as_ref().unwrap_err(),
        &Failure::Timeout(timeout)
    );
    assert!(records
        .iter()
        .filter(|r| r.task != 3)
        .all(|r| r.outcome.is_ok()));
    assert!(
        started.elapsed() < Duration::from_secs_f64(10.0 * timeout),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn eight_children_return_a_million_doubles_each_without_deadlock() {
    let big = |context: TaskContext| Ok(vec![context.task as f64; 1_000_000]);
    let records = leaves_no_trace(|| {
        run_tasks(
            &numbers(8),
            &options(8, 1, Schedule::Rolling),
            big,
            never,
            |_| {},
        )
        .unwrap()
    });
    for r in records {
        let v = r.outcome.unwrap();
        assert_eq!(v.len(), 1_000_000);
        assert!(v.iter().all(|&x| x == r.task as f64));
    }
}

#[test]
fn twenty_children_return_a_hundred_thousand_doubles_each() {
    let wide = |context: TaskContext| Ok(vec![context.task as f64 + 0.5; 100_000]);
    let records = leaves_no_trace(|| {
        run_tasks(
            &numbers(60),
            &options(20, 3, Schedule::Rolling),
            wide,
            never,
            |_| {},
        )
        .unwrap()
    });
    assert!(records
        .iter()
        .all(|r| r.outcome.as_ref().unwrap()[99_999] == r.task as f64 + 0.5));
}

#[test]
fn a_task_over_its_memory_limit_fails_with_memory_limit() {
    if under_valgrind() {
        eprintln!("not run under valgrind: it does not enforce RLIMIT_AS");
        return;
    }
    let hungry = |context: TaskContext| {
        let megabytes = if context.task == 2 { 400 } else { 8 };
        let mut buffer = vec![0u8; megabytes << 20];
        for page in buffer.chunks_mut(4096) {
            page[0] = 1;
        }
        Ok(buffer.len())
    };
    let mut opts = options(2, 1, Schedule::Rolling);
    opts.memory_limit_mb = Some(100.0);
    let records = leaves_no_trace(|| run_tasks(&numbers(3), &opts, hungry, never, |_| {}).unwrap());
    assert_eq!(
        records[1].outcome.as_ref().unwrap_err(),
        &Failure::MemoryLimit
    );
    assert_eq!(records[0].outcome.as_ref().unwrap(), &(8 << 20));
    assert_eq!(records[2].outcome.as_ref().unwrap(), &(8 << 20));
}

#[test]
fn memory_figures_are_those_of_the_child() {
    let touch = |_: TaskContext| {
        let mut buffer = vec![0u8; 50 << 20];
        for page in buffer.chunks_mut(4096) {
            page[0] = 1;
        }
        Ok(std::hint::black_box(buffer).len())
    };
    let records = leaves_no_trace(|| {
        run_tasks(
            &numbers(2),
            &options(2, 1, Schedule::Rolling),
            touch,
            never,
            |_| {},
        )
        .unwrap()
    });
    for r in records {
        assert!(r.memory.peak_rss_mb.unwrap() >= 50.0, "{:?}", r.memory);
        assert!(r.memory.pss_mb.unwrap() > 0.0 && r.memory.private_dirty_mb.unwrap() >= 0.0);
    }
}

#[test]
fn an_interrupt_kills_and_reaps_every_child_promptly() {
    // Task 1 finishes at once; the others would take 30 s.
    let slow = |context: TaskContext| -> Result<u8, String> {
        if context.task > 1 {
            std::thread::sleep(Duration::from_secs(30));
        }
        Ok(context.task as u8)
    };
    for opts in [options(2, 1, Schedule::Rolling), fed_options(2)] {
        let started = Instant::now();
        let interrupt_after_300ms = || started.elapsed() > Duration::from_millis(300);
        let mut announced = Vec::new();
        let batch = leaves_no_trace(|| {
            super::run_tasks(&numbers(4), &opts, slow, interrupt_after_300ms, |record| {
                announced.push(record.task)
            })
            .unwrap()
        });
        assert!(batch.interrupted);
        // The finished task is kept; the others are marked interrupted.
        assert_eq!(batch.records[0].outcome, Ok(1));
        assert_eq!(announced, vec![1]);
        for record in &batch.records[1..] {
            assert_eq!(record.outcome, Err(Failure::Interrupted));
            assert_eq!(
                record.outcome.as_ref().unwrap_err().to_string(),
                "interrupted"
            );
        }
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}: took {:?}",
            opts.tasks_per_child,
            started.elapsed()
        );
    }
}

#[test]
fn every_outcome_is_announced_once_as_it_arrives() {
    let mut seen = Vec::new();
    let crash_three = |context: TaskContext| {
        if context.task == 3 {
            unsafe { libc::raise(libc::SIGKILL) };
        }
        draws(context)
    };
    leaves_no_trace(|| {
        run_tasks(
            &numbers(5),
            &options(2, 2, Schedule::Batch),
            crash_three,
            never,
            |r| seen.push(r.task),
        )
        .unwrap()
    });
    seen.sort_unstable();
    assert_eq!(seen, numbers(5));
}

#[test]
fn a_subset_of_tasks_can_be_run_and_comes_back_in_the_given_order() {
    let records = leaves_no_trace(|| {
        run_tasks(
            &[9, 4, 6],
            &options(2, 1, Schedule::Rolling),
            draws,
            never,
            |_| {},
        )
        .unwrap()
    });
    assert_eq!(
        records.iter().map(|r| r.task).collect::<Vec<_>>(),
        [9, 4, 6]
    );
    assert!(run_tasks(&[1, 1], &PoolOptions::default(), draws, never, |_| {}).is_err());
    assert!(run_tasks(
        &[1],
        &options(0, 1, Schedule::Rolling),
        draws,
        never,
        |_| {}
    )
    .is_err());
}

#[test]
fn zero_tasks_fork_nothing() {
    let records =
        leaves_no_trace(|| run_tasks(&[], &PoolOptions::default(), draws, never, |_| {}).unwrap());
    assert!(records.is_empty());
    let pids: HashSet<i32> = child_pids().into_iter().collect();
    assert!(pids.is_empty());
}

const MEMORY_REPORTS: [MemoryReport; 3] = [
    MemoryReport::PerChild,
    MemoryReport::PerTask,
    MemoryReport::Never,
];

/// Checks that every record has its peak RSS, and PSS and private dirty
/// exactly as `memory` says: after every task, after each child's last
/// (a child runs its tasks in increasing order, so its largest), or never.
fn assert_memory_figures<T>(records: &[TaskRecord<T>], memory: MemoryReport) {
    let groups = tasks_per_pid(records);
    for r in records {
        let (_, tasks) = groups.iter().find(|(pid, _)| *pid == r.pid).unwrap();
        let last = tasks.iter().max() == Some(&r.task);
        let expect = match memory {
            MemoryReport::PerTask => true,
            MemoryReport::PerChild => last,
            MemoryReport::Never => false,
        };
        assert!(r.memory.peak_rss_mb.is_some(), "task {}", r.task);
        assert_eq!(
            r.memory.pss_mb.is_some(),
            expect,
            "{memory:?} task {}",
            r.task
        );
        assert_eq!(r.memory.private_dirty_mb.is_some(), expect);
    }
}

#[test]
fn pss_is_read_once_per_child_unless_asked_per_task_or_never() {
    for memory in MEMORY_REPORTS {
        let options = PoolOptions {
            memory,
            ..options(1, 3, Schedule::Rolling)
        };
        let records =
            leaves_no_trace(|| run_tasks(&numbers(7), &options, draws, never, |_| {}).unwrap());
        let groups = tasks_per_pid(&records);
        assert_eq!(
            groups.iter().map(|(_, t)| t.len()).collect::<Vec<_>>(),
            vec![3, 3, 1]
        );
        assert_memory_figures(&records, memory);
    }
}

/// The reference values of tasks `1..=n`, computed in this process.
fn reference_draws(n: usize) -> Vec<Vec<f64>> {
    numbers(n)
        .into_iter()
        .map(|t| draws(TaskContext { task: t }).unwrap())
        .collect()
}

#[test]
fn fed_workers_run_every_task_once_in_one_child_per_worker() {
    for (workers, n) in [(1, 13), (2, 13), (3, 13), (5, 13), (9, 4)] {
        let mut announced = Vec::new();
        let records = leaves_no_trace(|| {
            run_tasks(&numbers(n), &fed_options(workers), draws, never, |r| {
                announced.push(r.task)
            })
            .unwrap()
        });
        announced.sort_unstable();
        assert_eq!(
            announced,
            numbers(n),
            "{workers} workers: announced once each"
        );
        assert_eq!(
            records.iter().map(|r| r.task).collect::<Vec<_>>(),
            numbers(n)
        );
        let pids: HashSet<i32> = records.iter().map(|r| r.pid).collect();
        assert!(!pids.contains(&(std::process::id() as i32)));
        assert_eq!(
            pids.len(),
            workers.min(n),
            "{workers} workers, {n} tasks: forks"
        );
        assert_eq!(values(records), reference_draws(n), "{workers} workers");
    }
}

/// Task 1 sleeps `long` seconds, the others `short` (stretched under valgrind).
fn one_long_task(long: f64, short: f64) -> impl Fn(TaskContext) -> Result<Vec<f64>, String> + Sync {
    move |context: TaskContext| {
        let pause = stretch() * if context.task == 1 { long } else { short };
        std::thread::sleep(Duration::from_secs_f64(pause));
        draws(context)
    }
}

#[test]
fn a_fed_worker_takes_the_next_task_as_soon_as_it_is_free() {
    // Task 1 takes 1 s; the other 11 take 20 ms each, 0.22 s in all: the
    // second worker runs them while the first is still on task 1.
    let records = leaves_no_trace(|| {
        run_tasks(
            &numbers(12),
            &fed_options(2),
            one_long_task(1.0, 0.02),
            never,
            |_| {},
        )
        .unwrap()
    });
    let groups = tasks_per_pid(&records);
    assert_eq!(groups.len(), 2);
    let long_worker = groups.iter().find(|(_, tasks)| tasks.contains(&1)).unwrap();
    assert!(
        long_worker.1.len() <= 2,
        "the worker on the long task ran {:?}",
        long_worker.1
    );
    assert_eq!(values(records), reference_draws(12));
}

#[test]
fn a_failure_in_a_fed_child_costs_only_its_task() {
    // Task 3 fails in one of five ways; the other tasks take 20 ms each, so
    // tasks are still waiting when the failure is seen.
    let kinds: [(&str, bool); 5] = [
        ("crash", true),
        ("exit", true),
        ("panic", false),
        ("error", false),
        ("memory", true),
    ];
    for (kind, child_dies) in kinds {
        if kind == "memory" && under_valgrind() {
            continue;
        }
        let failing = move |context: TaskContext| -> Result<Vec<f64>, String> {
            if context.task == 3 {
                match kind {
                    "crash" => unsafe {
                        libc::raise(libc::SIGKILL);
                    },
                    "exit" => unsafe { libc::_exit(7) },
                    "panic" => panic!("deliberate"),
                    "error" => return Err("bad input".into()),
                    _ => {
                        let mut buffer = vec![0u8; 400 << 20];
                        for page in buffer.chunks_mut(4096) {
                            page[0] = 1;
                        }
                        std::hint::black_box(buffer);
                    }
                }
            }
            std::thread::sleep(Duration::from_secs_f64(0.02 * stretch()));
            draws(context)
        };
        let mut opts = fed_options(2);
        if kind == "memory" {
            opts.memory_limit_mb = Some(100.0);
        }
        // Enough tasks that the dead child's replacement still finds work on
        // a loaded machine, where noticing a memory-limit death takes a while
        // and the surviving child keeps taking tasks meanwhile.
        let records =
            leaves_no_trace(|| run_tasks(&numbers(40), &opts, failing, never, |_| {}).unwrap());
        let expected = match kind {
            "crash" => Failure::Signal(9),
            "exit" => Failure::Exit(7),
            "panic" => Failure::Panic("deliberate".into()),
            "error" => Failure::Task("bad input".into()),
            _ => Failure::MemoryLimit,
        };
        assert_eq!(
            records[2].outcome.as_ref().unwrap_err(),
            &expected,
            "{kind}"
        );
        for r in records.iter().filter(|r| r.task != 3) {
            assert_eq!(
                r.outcome.as_ref().unwrap(),
                &draws(TaskContext { task: r.task }).unwrap(),
                "{kind}: task {}",
                r.task
            );
        }
        // A child that died is replaced once; one that survived goes on.
        let pids: HashSet<i32> = records.iter().map(|r| r.pid).collect();
        assert_eq!(pids.len(), if child_dies { 3 } else { 2 }, "{kind}: forks");
        let dead = records[2].pid;
        for pid in pids.iter().filter(|&&pid| !child_dies || pid != dead) {
            let measured = records
                .iter()
                .filter(|r| r.pid == *pid && r.memory.pss_mb.is_some())
                .count();
            assert_eq!(measured, 1, "{kind}: PSS of child {pid}");
        }
        if child_dies {
            assert!(records
                .iter()
                .filter(|r| r.pid == dead)
                .all(|r| r.memory.pss_mb.is_none()));
        }
    }
}

#[test]
fn a_hung_fed_task_does_not_hold_back_the_tasks_after_it() {
    let hang = |context: TaskContext| {
        if context.task == 2 {
            loop {
                std::thread::sleep(Duration::from_secs(60));
            }
        }
        std::thread::sleep(Duration::from_secs_f64(0.02 * stretch()));
        draws(context)
    };
    let timeout = 2.0 * stretch();
    let mut opts = fed_options(2);
    opts.timeout = Some(Duration::from_secs_f64(timeout));
    let started = Instant::now();
    let mut announced: Vec<(usize, f64)> = Vec::new();
    let records = leaves_no_trace(|| {
        run_tasks(&numbers(8), &opts, hang, never, |r| {
            announced.push((r.task, started.elapsed().as_secs_f64()))
        })
        .unwrap()
    });
    assert_eq!(
        records[1].outcome.as_ref().unwrap_err(),
        &Failure::Timeout(timeout)
    );
    // The seven other tasks (about 0.14 s of work) all came back before the
    // hung one was given up.
    for &(task, at) in announced.iter().filter(|(task, _)| *task != 2) {
        assert!(at < timeout, "task {task} came back after {at} s");
    }
    assert!(records
        .iter()
        .filter(|r| r.task != 2)
        .all(|r| r.outcome.is_ok()));
    assert!(started.elapsed() < Duration::from_secs_f64(3.0 * timeout));
}

#[test]
fn a_fed_child_reads_its_pss_once_after_its_last_task_unless_asked_per_task_or_never() {
    // The worker on the 0.5 s task 1 was sent it while tasks still waited,
    // and then none was left for it: its PSS comes when it is told to leave.
    for memory in MEMORY_REPORTS {
        let options = PoolOptions {
            memory,
            ..fed_options(2)
        };
        let records = leaves_no_trace(|| {
            run_tasks(
                &numbers(9),
                &options,
                one_long_task(0.5, 0.01),
                never,
                |_| {},
            )
            .unwrap()
        });
        assert_eq!(tasks_per_pid(&records).len(), 2);
        assert_memory_figures(&records, memory);
        assert_eq!(values(records), reference_draws(9));
    }
}

#[test]
fn a_command_to_a_dead_child_is_an_error_not_a_sigpipe() {
    // R catches SIGPIPE and turns it into an R error; here SIGPIPE is at its
    // default action, which would end the process.
    // SAFETY: the child only makes system calls and leaves with `_exit`.
    match unsafe { nix::unistd::fork() }.unwrap() {
        nix::unistd::ForkResult::Child => {
            let code = std::panic::catch_unwind(|| {
                unsafe {
                    nix::sys::signal::signal(
                        nix::sys::signal::Signal::SIGPIPE,
                        nix::sys::signal::SigHandler::SigDfl,
                    )
                }
                .unwrap();
                let (read_end, write_end) = nix::unistd::pipe().unwrap();
                drop(read_end);
                let mut commands = std::fs::File::from(write_end);
                let error = super::fork::send_task(&mut commands, 5).unwrap_err();
                let restored = unsafe {
                    nix::sys::signal::signal(
                        nix::sys::signal::Signal::SIGPIPE,
                        nix::sys::signal::SigHandler::SigDfl,
                    )
                }
                .unwrap();
                match (error.raw_os_error(), restored) {
                    (Some(libc::EPIPE), nix::sys::signal::SigHandler::SigDfl) => 0,
                    _ => 1,
                }
            })
            .unwrap_or(2);
            unsafe { libc::_exit(code) }
        }
        nix::unistd::ForkResult::Parent { child } => {
            let status = nix::sys::wait::waitpid(child, None).unwrap();
            assert_eq!(status, nix::sys::wait::WaitStatus::Exited(child, 0));
        }
    }
}
