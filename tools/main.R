# The package's main job. Until the model lands (see NEWS.md), this
# demonstrates the fork engine that will run bootstrap replicates: tasks in
# short-lived child processes, failures reported per task, results that do not
# depend on how the work is spread.
library(wispack)
selftest <- wispack:::engine_selftest

cat("wispack", format(utils::packageVersion("wispack")), "- fork engine demonstration\n\n")

cat("12 tasks on 2 workers, a fresh process per task; task 5 crashes, task 9 hangs\n",
    "(1 s timeout), task 11 allocates 600 MB against a 200 MB limit:\n", sep = "")
alloc <- rep(20, 12)
alloc[11] <- 600
result <- selftest(12, workers = 2, payload = 1000, crash = 5, hang = 9, timeout = 1,
                   alloc_mb = alloc, memory_limit_mb = 200, seed = 2026)
print(result, digits = 4, row.names = FALSE)

cat("\nThe same tasks with 1 worker, then with 3 tasks per child on a batch schedule:\n")
ok <- result$ok
serial <- selftest(12, workers = 1, payload = 1000, seed = 2026)
grouped <- selftest(12, workers = 2, tasks_per_child = 3, schedule = "batch",
                    payload = 1000, seed = 2026)
cat("  identical checksums for the tasks that succeeded: ",
    identical(serial$checksum[ok], result$checksum[ok]) &&
      identical(grouped$checksum[ok], result$checksum[ok]), "\n", sep = "")
cat("  children used: ", length(unique(serial$pid)), " (1 per task) and ",
    length(unique(grouped$pid)), " (3 tasks each)\n", sep = "")

cat("\nEight tasks returning 1,000,000 doubles each through pipes (2 workers):\n")
elapsed <- system.time(big <- selftest(8, workers = 2, payload = 1e6))[["elapsed"]]
cat(sprintf("  all ok: %s; %.0f MB moved in %.2f s\n", all(big$ok), 8 * 8, elapsed))
