selftest <- wispack:::engine_selftest
skip_without_test_hooks()

test_that("the result has the documented columns, one row per task in task order", {
  result <- expect_no_trace(selftest(5, workers = 2, payload = 3))
  expect_s3_class(result, "data.frame")
  expect_named(result, c("task", "ok", "reason", "checksum", "pid", "seconds",
                         "peak_rss_mb", "pss_mb", "private_dirty_mb"))
  expect_identical(result$task, 1:5)
  expect_true(all(result$ok))
  expect_true(all(is.na(result$reason)))
  expect_true(all(result$pid != Sys.getpid()))
  expect_true(all(result$seconds >= 0))
})

test_that("checksums do not depend on workers, tasks per child or schedule", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  reference <- expect_no_trace(selftest(7, payload = 1000, seed = 11))$checksum
  for (schedule in c("rolling", "batch")) {
    for (workers in 1:2) {
      for (per_child in c(1L, 3L)) {
        result <- expect_no_trace(selftest(7, workers = workers, tasks_per_child = per_child,
                                           schedule = schedule, payload = 1000, seed = 11))
        expect_identical(result$checksum, reference,
                         label = sprintf("%s, %d workers, %d per child", schedule, workers, per_child))
      }
    }
  }
  # Each task draws its own stream: tasks and seeds differ.
  expect_length(unique(reference), 7)
  expect_false(identical(selftest(7, payload = 1000, seed = 12)$checksum, reference))
})

test_that("payload values are uniform on [0, 1)", {
  # The sum of n uniforms has mean n/2 and sd sqrt(n/12); allow 6 sd.
  n <- 100000
  result <- expect_no_trace(selftest(3, workers = 2, payload = n))
  expect_true(all(abs(result$checksum - n / 2) < 6 * sqrt(n / 12)))
})

test_that("a child runs at most tasks_per_child tasks", {
  result <- expect_no_trace(selftest(7, workers = 2, tasks_per_child = 3))
  runs <- table(result$pid)
  expect_length(runs, 3)
  expect_true(all(runs <= 3))
  fresh <- expect_no_trace(selftest(4, workers = 2))
  expect_length(unique(fresh$pid), 4)
})

test_that("fed workers (tasks_per_child = NULL): the same checksums, one child per worker, PSS once per child", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  fresh <- expect_no_trace(selftest(30, workers = 2, payload = 10))
  fed <- expect_no_trace(selftest(30, workers = 2, payload = 10, tasks_per_child = NULL,
                                  memory_per_task = FALSE))
  expect_identical(fed$checksum, fresh$checksum)
  expect_length(unique(fed$pid), 2)
  # schedule = "batch" does not apply to fed workers
  batch <- expect_no_trace(selftest(30, workers = 2, payload = 10, tasks_per_child = NULL,
                                    schedule = "batch"))
  expect_identical(batch$checksum, fresh$checksum)
  expect_length(unique(batch$pid), 2)
  skip_if_not(wispack:::wisp_platform()$memory_figures)
  # a fed child runs its tasks in increasing order, so its last is its largest
  last <- fed$task == ave(fed$task, fed$pid, FUN = max)
  expect_identical(!is.na(fed$pss_mb), last)
  expect_true(all(fed$peak_rss_mb > 0))
})

test_that("a crash or a hang with fed workers fails only its task, and a new child takes the rest", {
  crashed <- expect_no_trace(selftest(10, workers = 2, tasks_per_child = NULL, payload = 10,
                                      sleep = 0.02 * slowdown(), crash = 3))
  expect_identical(crashed$ok, seq_len(10) != 3)
  expect_identical(crashed$reason[3], "killed by signal 9 (SIGKILL)")
  expect_identical(crashed$checksum[-3], selftest(10, payload = 10)$checksum[-3])
  expect_length(unique(crashed$pid), 3)
  # the tasks after a hung one come back long before its timeout
  timeout <- 2 * slowdown()
  started <- proc.time()[["elapsed"]]
  hung <- expect_no_trace(selftest(8, workers = 2, tasks_per_child = NULL, hang = 2,
                                   sleep = 0.02 * slowdown(), timeout = timeout))
  expect_identical(hung$ok, seq_len(8) != 2)
  expect_identical(hung$reason[2], sprintf("timeout after %s s", format(timeout)))
  expect_lt(proc.time()[["elapsed"]] - started, 3 * timeout)
})

test_that("a crashed task is reported with its signal while the others succeed", {
  result <- expect_no_trace(selftest(5, workers = 2, tasks_per_child = 2, payload = 10, crash = 2))
  expect_identical(result$ok, c(TRUE, FALSE, TRUE, TRUE, TRUE))
  expect_identical(result$reason[2], "killed by signal 9 (SIGKILL)")
  expect_identical(result$checksum[2], NA_real_)
  expect_identical(result$peak_rss_mb[2], NA_real_)
  expect_identical(result$checksum[-2], selftest(5, payload = 10)$checksum[-2])
})

test_that("a hung task times out and the rest finish", {
  started <- proc.time()[["elapsed"]]
  timeout <- 0.5 * slowdown()
  result <- expect_no_trace(selftest(4, workers = 2, hang = 3, timeout = timeout))
  expect_identical(result$ok, c(TRUE, TRUE, FALSE, TRUE))
  expect_identical(result$reason[3], sprintf("timeout after %s s", format(timeout)))
  expect_lt(proc.time()[["elapsed"]] - started, 10 * timeout)
})

test_that("large payloads come back without deadlock", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  workers <- min(8L, max_test_workers())
  result <- expect_no_trace(selftest(8, workers = workers, payload = 1e6))
  expect_true(all(result$ok))
  expect_true(all(abs(result$checksum - 5e5) < 6 * sqrt(1e6 / 12)))
})

test_that("eight concurrent children return a million doubles each", {
  skip_on_cran() # R CMD check --as-cran allows 2 workers; the full run uses 8
  skip_if(max_test_workers() < 8, "the worker limit is set")
  result <- expect_no_trace(selftest(8, workers = 8, payload = 1e6))
  expect_true(all(result$ok))
  expect_length(unique(result$pid), 8)
})

test_that("a task over its memory limit fails with 'memory limit' while the others succeed", {
  skip_if(under_valgrind(), "valgrind does not enforce RLIMIT_AS")
  result <- expect_no_trace(
    selftest(3, workers = 2, alloc_mb = c(10, 600, 10), memory_limit_mb = 200)
  )
  expect_identical(result$ok, c(TRUE, FALSE, TRUE))
  expect_identical(result$reason[2], "memory limit")
})

test_that("memory figures are the child's own", {
  result <- expect_no_trace(selftest(2, workers = 2, alloc_mb = 64))
  expect_true(all(result$peak_rss_mb >= 64))
  expect_true(all(result$pss_mb > 0 & result$pss_mb <= result$peak_rss_mb))
  expect_true(all(result$private_dirty_mb >= 0))
})

test_that("no tasks means no children", {
  result <- expect_no_trace(selftest(0))
  expect_identical(nrow(result), 0L)
})

test_that("the engine works alongside parallel::mclapply", {
  skip_if_not(.Platform$OS.type == "unix")
  inside <- parallel::mclapply(1:2, function(i) selftest(3, payload = 5)$checksum, mc.cores = 2)
  expect_identical(inside[[1]], inside[[2]])
  after <- expect_no_trace(selftest(3, workers = 2, payload = 5))
  expect_identical(after$checksum, inside[[1]])
})

test_that("more than 2 workers are refused under the check core limit", {
  old <- Sys.getenv("_R_CHECK_LIMIT_CORES_", unset = NA)
  on.exit(if (is.na(old)) Sys.unsetenv("_R_CHECK_LIMIT_CORES_") else Sys.setenv("_R_CHECK_LIMIT_CORES_" = old))
  Sys.setenv("_R_CHECK_LIMIT_CORES_" = "TRUE")
  expect_error(selftest(3, workers = 3), class = "wisp_input_error", regexp = "_R_CHECK_LIMIT_CORES_")
  expect_no_error(selftest(2, workers = 2))
})

test_that("bad arguments are refused with a message naming them", {
  expect_error(selftest(-1), class = "wisp_input_error", regexp = "n_tasks")
  expect_error(selftest(2.5), class = "wisp_input_error", regexp = "n_tasks")
  expect_error(selftest(2, workers = 0), class = "wisp_input_error", regexp = "workers")
  expect_error(selftest(2, workers = NA), class = "wisp_input_error", regexp = "workers")
  expect_error(selftest(2, tasks_per_child = 0), class = "wisp_input_error", regexp = "tasks_per_child")
  expect_error(selftest(2, schedule = "round-robin"), class = "wisp_input_error", regexp = "schedule")
  expect_error(selftest(2, crash = 3), class = "wisp_input_error", regexp = "crash")
  expect_error(selftest(2, hang = 0), class = "wisp_input_error", regexp = "hang")
  expect_error(selftest(2, timeout = 0), class = "wisp_input_error", regexp = "timeout")
  expect_error(selftest(2, memory_limit_mb = -5), class = "wisp_input_error", regexp = "memory_limit_mb")
  expect_error(selftest(2, alloc_mb = c(1, 2, 3)), class = "wisp_input_error", regexp = "alloc_mb")
  expect_error(selftest(2, sleep = "1"), class = "wisp_input_error", regexp = "sleep")
  expect_identical(child_pids(), integer())
})

test_that("Ctrl-C kills and reaps every child within a second and raises an error", {
  skip_if_not(file.exists("/proc/self/stat"))
  rscript <- file.path(R.home("bin"), "Rscript")
  pid_file <- tempfile()
  out_file <- tempfile()
  script <- sprintf(paste(
    ".libPaths(%s)",
    "library(wispack)",
    "writeLines(as.character(Sys.getpid()), %s)",
    "caught <- tryCatch(wispack:::engine_selftest(4, workers = 2, hang = 1:4),",
    "  wisp_interrupted = function(e) Sys.time())",
    "saveRDS(list(caught = as.numeric(caught), class = class(caught)), %s)",
    sep = "\n"), r_literal(.libPaths()), r_literal(pid_file), r_literal(out_file))
  script_file <- tempfile(fileext = ".R")
  writeLines(script, script_file)
  system2(rscript, script_file, wait = FALSE, stdout = FALSE, stderr = FALSE)

  expect_true(wait_until(function() file.exists(pid_file) && length(readLines(pid_file)) == 1, 30))
  worker_pid <- as.integer(readLines(pid_file))
  expect_true(wait_until(function() length(child_pids(worker_pid)) == 2, 30))
  children <- child_pids(worker_pid)

  sent <- as.numeric(Sys.time())
  tools::pskill(worker_pid, tools::SIGINT)
  expect_true(wait_until(function() file.exists(out_file), 10))
  Sys.sleep(0.2) # let saveRDS finish writing
  outcome <- readRDS(out_file)
  expect_lt(outcome$caught - sent, 1)
  expect_false(any(file.exists(file.path("/proc", children))))
})
