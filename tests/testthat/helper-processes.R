# Process and descriptor bookkeeping for tests of code that forks.

# Children of process `pid` (zombies included), read from /proc.
child_pids <- function(pid = Sys.getpid()) {
  pids <- integer()
  for (stat_file in Sys.glob("/proc/[0-9]*/stat")) {
    # A process can exit between the listing and the read.
    stat <- tryCatch(suppressWarnings(readLines(stat_file, warn = FALSE)),
                     error = function(e) "")
    if (length(stat) != 1L || !nzchar(stat)) next
    fields <- strsplit(sub("^.*\\) ", "", stat), " ", fixed = TRUE)[[1]]
    if (as.integer(fields[2]) == pid) {
      pids <- c(pids, as.integer(sub("^/proc/([0-9]+)/stat$", "\\1", stat_file)))
    }
  }
  pids
}

open_fd_count <- function() length(list.files("/proc/self/fd"))

# Evaluates `code` and fails the test if it left a child process or an open
# file descriptor behind; returns the value of `code`.
expect_no_trace <- function(code) {
  fds_before <- open_fd_count()
  value <- force(code)
  testthat::expect_identical(child_pids(), integer(), label = "children left behind")
  testthat::expect_identical(open_fd_count(), fds_before, label = "open descriptors")
  invisible(value)
}

# The most workers a test may use: R CMD check --as-cran allows 2; otherwise
# up to 8 (more processes than cores is fine for these tests).
max_test_workers <- function() {
  limit <- tolower(Sys.getenv("_R_CHECK_LIMIT_CORES_", ""))
  if (nzchar(limit) && limit != "false") 2L else 8L
}

# R source text that evaluates to `x`, on one line.
r_literal <- function(x) paste(deparse(x), collapse = "")

# tools/valgrind.sh sets WISPACK_UNDER_VALGRIND. Everything, forked workers
# included, runs 20-50 times slower under memcheck, so time limits in the
# tests are stretched by `slowdown()`; and valgrind manages the address space
# itself, so RLIMIT_AS (`child.memory.limit`) cannot be tested there.
under_valgrind <- function() nzchar(Sys.getenv("WISPACK_UNDER_VALGRIND"))
slowdown <- function() if (under_valgrind()) 50 else 1

# Polls `condition()` every 50 ms for up to `seconds`; its last value.
wait_until <- function(condition, seconds) {
  deadline <- Sys.time() + seconds
  while (!condition() && Sys.time() < deadline) Sys.sleep(0.05)
  condition()
}

# Tests of test hooks (fault injection, synthetic engine tasks, the objective
# and fit entry points) need a build with them: tools/test.sh makes one, and
# fails on any skip. Elsewhere they skip, saying how to build for them.
skip_without_test_hooks <- function() {
  if (!wispack:::test_hooks_enabled()) {
    testthat::skip("needs a build with test hooks: WISPACK_TEST_HOOKS=true R CMD INSTALL .")
  }
}

# Arms injected faults (see wispack:::inject_faults); `no_faults()` disarms.
with_faults <- function(faults) {
  skip_without_test_hooks()
  wispack:::inject_faults(faults)
}
no_faults <- function() wispack:::inject_faults(list())

# A multisession plan of `workers` for the rest of the calling test.
local_multisession <- function(workers, envir = parent.frame()) {
  old_plan <- future::plan(future::multisession, workers = workers)
  # Back to sequential first, which shuts the workers down.
  do.call(on.exit, list(quote(future::plan(future::sequential)), add = TRUE), envir = envir)
  invisible(old_plan)
}
