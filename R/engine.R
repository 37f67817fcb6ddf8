#' Exercise the fork engine with synthetic tasks
#'
#' Runs `n_tasks` synthetic tasks in forked child processes through the same
#' Rust engine that runs bootstrap replicates. Tests, benchmarks and the demo
#' use it to check the engine's guarantees: results independent of the worker
#' layout, per-task failure reasons, timeouts, memory limits and clean-up.
#'
#' It is a test hook: it exists only in builds with the test hooks
#' (`WISPACK_TEST_HOOKS=true R CMD INSTALL .`, as `tools/test.sh` does);
#' elsewhere it is an error, and so it is where there is no fork (Windows).
#'
#' Task `i` (numbered from 1) sleeps `sleep` seconds, allocates and touches
#' `alloc_mb` MB (`alloc_mb[i]` when it has one value per task), and returns `payload` doubles drawn from its own random
#' stream, determined by `seed` and `i` alone. Tasks listed in `crash` kill
#' themselves with `SIGKILL`; tasks listed in `hang` never finish.
#'
#' @param n_tasks Number of tasks.
#' @param workers Most child processes alive at once.
#' @param tasks_per_child Tasks a child runs before it exits (1: a fresh
#'   process per task), or `NULL` for children that live for the whole run
#'   and are sent one task at a time (as [bs_batch()]'s `tasks.per.child =
#'   NULL`).
#' @param schedule With a number for `tasks_per_child`: `"rolling"` forks a
#'   new child as soon as one exits; `"batch"` forks up to `workers` children
#'   and waits for all of them before the next batch. Ignored with `NULL`.
#' @param payload Number of doubles each task returns.
#' @param sleep Seconds each task sleeps.
#' @param crash,hang Task numbers that crash or hang.
#' @param alloc_mb Megabytes each task allocates and touches: one value for
#'   all tasks, or one per task.
#' @param timeout Seconds a task may run before its child is killed (`Inf`:
#'   no limit).
#' @param memory_limit_mb Headroom in MB above each child's address space at
#'   fork (`NA`: no limit). A child that exceeds it fails with reason
#'   `"memory limit"`.
#' @param memory_per_task Read PSS and private dirty memory after every
#'   task (`TRUE`) or only after each child's last task (`FALSE`, as
#'   [bs_batch()] does by default; the other tasks then have `NA` there).
#' @param seed Master seed of the per-task random streams.
#' @return A data.frame with one row per task, in task order: `task`, `ok`,
#'   `reason` (`NA` when `ok`), `checksum` (sum of the returned doubles),
#'   `pid` (the child that ran the task), `seconds` (wall time), and the
#'   child's `peak_rss_mb`, `pss_mb` and `private_dirty_mb` just before it
#'   wrote the result (`NA` for a task whose child died).
#' @keywords internal
#' @examples
#' if (wispack:::test_hooks_enabled() && wispack:::wisp_platform()$fork) {
#'   wispack:::engine_selftest(4, workers = 2, payload = 10, crash = 3)
#' }
engine_selftest <- function(n_tasks, workers = 1L, tasks_per_child = 1L,
                            schedule = "rolling", payload = 0L, sleep = 0,
                            crash = integer(), hang = integer(), alloc_mb = 0,
                            timeout = Inf, memory_limit_mb = NA, seed = 1L,
                            memory_per_task = TRUE) {
  check_whole_number(n_tasks, "n_tasks")
  check_whole_number(workers, "workers", lower = 1)
  check_worker_limit(workers)
  if (!is.null(tasks_per_child)) check_whole_number(tasks_per_child, "tasks_per_child", lower = 1)
  check_flag(memory_per_task, "memory_per_task")
  schedule <- match_schedule(schedule)
  check_whole_number(payload, "payload")
  check_number(sleep, "sleep", lower = 0, upper = 1e6)
  check_task_numbers(crash, "crash", n_tasks)
  check_task_numbers(hang, "hang", n_tasks)
  if (!is.numeric(alloc_mb) || !length(alloc_mb) %in% c(1L, n_tasks) ||
      anyNA(alloc_mb) || any(alloc_mb < 0 | alloc_mb > 1e6)) {
    stop_input("`alloc_mb` must hold 1 or `n_tasks` numbers between 0 and 1e6.")
  }
  check_timeout(timeout)
  check_number(memory_limit_mb, "memory_limit_mb", lower = 1, upper = 1e9, allow_na = TRUE)
  check_whole_number(seed, "seed", lower = -.Machine$integer.max)

  columns <- engine_selftest_rust(
    as.integer(n_tasks), as.integer(workers),
    if (is.null(tasks_per_child)) 0L else as.integer(tasks_per_child), schedule,
    as.integer(payload), as.double(sleep), as.integer(crash), as.integer(hang),
    as.double(alloc_mb), as.double(timeout), as.double(memory_limit_mb),
    isTRUE(memory_per_task), as.double(seed)
  )
  keep <- c("task", "ok", "reason", "checksum", "pid", "seconds",
            "peak_rss_mb", "pss_mb", "private_dirty_mb")
  as.data.frame(columns[keep], stringsAsFactors = FALSE)
}

match_schedule <- function(schedule, call = sys.call(-1)) {
  if (!is.character(schedule) || length(schedule) != 1L ||
      !schedule %in% c("rolling", "batch")) {
    stop_input("`schedule` must be \"rolling\" or \"batch\", not ",
               describe_value(schedule), ".", call = call)
  }
  schedule
}

check_timeout <- function(timeout, call = sys.call(-1)) {
  if (!is.numeric(timeout) || length(timeout) != 1L || is.na(timeout) || timeout <= 0 ||
      (is.finite(timeout) && timeout > 1e9)) {
    stop_input("`timeout` must be a positive number of seconds up to 1e9 (Inf for no limit), ",
               "not ", describe_value(timeout), ".", call = call)
  }
  invisible(timeout)
}
