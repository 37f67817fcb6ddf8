# bs_batch(backend = "future"): chunks, progress, failures, arguments. The
# same backend on a real Slurm cluster is tested in test-cluster.R.

checkpoint_count <- function(path) {
  if (!file.exists(path)) return(0L)
  length(wispack:::checkpoint_open_rust(path)$replicate)
}

# Runs `code` and returns, for each progress update it signals, how many
# replicates the checkpoint at `path` held at that moment.
checkpoint_at_each_update <- function(code, path) {
  counts <- integer()
  withCallingHandlers(code, progression = function(p) {
    if (identical(p$type, "update") && isTRUE(p$amount > 0)) {
      counts <<- c(counts, checkpoint_count(path))
    }
  })
  counts
}

# The chunk sizes seen through `counts` (from checkpoint_at_each_update()),
# in the order the chunks were collected, when every chunk was on disk
# before its updates and its updates came before the next chunk was written;
# NULL otherwise.
chunks_seen <- function(counts) {
  runs <- rle(counts)
  if (!identical(runs$lengths, diff(c(0L, runs$values)))) return(NULL)
  runs$lengths
}

test_that("chunks default to one per worker and each is checkpointed and reported as it arrives", {
  skip_if_not_installed("future")
  skip_if_not_installed("progressr")
  fit <- small_fit()
  reference <- bs_batch(fit, 6, max.fork = 2, seed = 51)
  local_multisession(2)
  old <- options(progressr.enable = TRUE)
  on.exit(options(old), add = TRUE)
  path <- tempfile()
  on.exit(unlink(path), add = TRUE)
  boot <- NULL
  counts <- checkpoint_at_each_update(
    boot <- bs_batch(fit, 6, backend = "future", seed = 51, checkpoint = path, progress = TRUE),
    path
  )
  expect_identical(boot$t, reference$t)
  # 2 workers: two futures of 3 replicates; each chunk is on disk before its
  # 3 progress updates, and the first is reported before the second arrives.
  expect_identical(chunks_seen(counts), c(3L, 3L))
})

test_that("chunk.size sets the replicates per future", {
  skip_if_not_installed("future")
  skip_if_not_installed("progressr")
  fit <- small_fit()
  reference <- bs_batch(fit, 5, max.fork = 2, seed = 52)
  local_multisession(2)
  old <- options(progressr.enable = TRUE)
  on.exit(options(old), add = TRUE)
  path <- tempfile()
  on.exit(unlink(path), add = TRUE)
  boot <- NULL
  counts <- checkpoint_at_each_update(
    boot <- bs_batch(fit, 5, backend = "future", seed = 52, checkpoint = path, progress = TRUE,
                     chunk.size = 2),
    path
  )
  expect_identical(boot$t, reference$t)
  # Chunks 1-2, 3-4 and 5, in whatever order they finish.
  expect_identical(sort(chunks_seen(counts)), c(1L, 2L, 2L))
})

test_that("progress starts before the first chunk and finishes after the last", {
  skip_if_not_installed("future")
  skip_if_not_installed("progressr")
  old_plan <- future::plan(future::sequential)
  on.exit(future::plan(old_plan), add = TRUE)
  old <- options(progressr.enable = TRUE)
  on.exit(options(old), add = TRUE)
  types <- character()
  withCallingHandlers(
    bs_batch(small_fit(), 3, backend = "future", seed = 55, progress = TRUE),
    progression = function(p) types <<- c(types, p$type)
  )
  expect_identical(types, c("initiate", "update", "update", "update", "finish"))
})

test_that("the default chunk size uses every worker with as few futures as possible", {
  expect_identical(wispack:::future_chunk_size(6, 2), 3L)
  expect_identical(wispack:::future_chunk_size(7, 3), 3L)
  expect_identical(wispack:::future_chunk_size(6, 100), 1L)
  expect_identical(wispack:::future_chunk_size(6, Inf), 1L)
  expect_identical(wispack:::future_chunk_size(6, 2, chunk_size = 4), 4L)
})

test_that("a chunk whose worker dies fails alone, with the future's reason", {
  skip_if_not_installed("future")
  fit <- small_fit()
  reference <- bs_batch(fit, 4, max.fork = 2, seed = 53)
  local_multisession(2) # both chunks start at once, one on each worker
  old <- options(wispack.inject_faults = list(kill = 3L))
  boot <- bs_batch(fit, 4, backend = "future", seed = 53, chunk.size = 2)
  options(old)
  expect_identical(boot$diagnostics$ok, c(TRUE, TRUE, FALSE, FALSE))
  expect_match(boot$diagnostics$reason[3:4], "^future failed: .*wispack-3-4")
  expect_identical(boot$t[1:2, ], reference$t[1:2, ])
  expect_true(all(is.na(boot$t[3:4, ])))
})

test_that("a failed chunk is written to the checkpoint and rerun on resume", {
  skip_if_not_installed("future")
  fit <- small_fit()
  reference <- bs_batch(fit, 4, max.fork = 2, seed = 54)
  path <- tempfile()
  on.exit(unlink(path), add = TRUE)
  local_multisession(2)
  old <- options(wispack.inject_faults = list(kill = 1L))
  failed <- bs_batch(fit, 4, backend = "future", seed = 54, chunk.size = 2, checkpoint = path)
  options(old)
  expect_identical(failed$diagnostics$ok, c(FALSE, FALSE, TRUE, TRUE))
  entries <- wispack:::checkpoint_open_rust(path)
  expect_setequal(entries$replicate, 1:4)
  expect_match(entries$diagnostics$reason[entries$replicate == 1], "^future failed:")
  future::plan(future::sequential) # a fresh plan: one of the workers is dead
  resumed <- bs_batch(fit, 4, backend = "future", checkpoint = path)
  expect_identical(resumed$t, reference$t)
  expect_identical(resumed$diagnostics$pid[3:4], failed$diagnostics$pid[3:4]) # kept, not rerun
})

test_that("chunk.size and resources are checked", {
  fit <- small_fit()
  expect_error(bs_batch(fit, 2, chunk.size = 2), class = "wisp_input_error",
               regexp = "need backend = \"future\"")
  expect_error(bs_batch(fit, 2, backend = "serial", resources = list(mem = "1G")),
               class = "wisp_input_error", regexp = "need backend = \"future\"")
  skip_if_not_installed("future")
  old_plan <- future::plan(future::sequential)
  on.exit(future::plan(old_plan), add = TRUE)
  for (bad in list(0, 1.5, "2", c(1, 2), NA)) {
    expect_error(bs_batch(fit, 2, backend = "future", chunk.size = bad),
                 class = "wisp_input_error", regexp = "`chunk.size` must be a single whole number")
  }
  for (bad in list("1G", list("1G"), list(mem = "1G", mem = "2G"))) {
    expect_error(bs_batch(fit, 2, backend = "future", resources = bad),
                 class = "wisp_input_error", regexp = "`resources` must be NULL or a list")
  }
  expect_error(bs_batch(fit, 2, backend = "future", resources = list(mem = "1G")),
               class = "wisp_input_error", regexp = "not a batchtools plan")
})
