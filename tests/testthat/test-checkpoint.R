# Resumable bootstraps: bs_batch(..., checkpoint = path).

# The parts of a bootstrap that must not depend on how it was run (timing,
# pids and memory do).
stable_part <- function(boot) {
  list(t = boot$t, seed = boot$seed,
       diagnostics = boot$diagnostics[c("ok", "reason", "pen.neg.value", "neg.loglik",
                                        "converged", "code", "num.evals")])
}

# The entries of a checkpoint file: replicate, key, seed and the diagnostics.
checkpoint_entries <- function(path) {
  contents <- wispack:::checkpoint_open_rust(path)
  c(contents[c("replicate", "key", "seed")], contents$diagnostics)
}

test_that("a checkpointed run matches a plain one and a rerun skips every replicate", {
  fit <- small_fit()
  reference <- bs_batch(fit, 4, max.fork = 2, seed = 31)
  path <- tempfile(fileext = ".wckp")
  on.exit(unlink(path))
  first <- expect_no_trace(bs_batch(fit, 4, max.fork = 2, seed = 31, checkpoint = path))
  expect_identical(stable_part(first), stable_part(reference))
  expect_setequal(checkpoint_entries(path)$replicate, 1:4)
  size <- file.size(path)
  again <- expect_no_trace(bs_batch(fit, 4, max.fork = 2, seed = 31, checkpoint = path))
  expect_identical(again$diagnostics$pid, first$diagnostics$pid) # nothing was rerun
  expect_identical(stable_part(again), stable_part(reference))
  expect_identical(file.size(path), size)
})

test_that("a partial run is resumed and extended to the same result", {
  fit <- small_fit()
  reference <- bs_batch(fit, 6, max.fork = 2, seed = 32)
  path <- tempfile()
  on.exit(unlink(path))
  part <- bs_batch(fit, 3, max.fork = 2, seed = 32, checkpoint = path)
  # seed = NULL takes the seed recorded in the checkpoint
  whole <- bs_batch(fit, 6, max.fork = 2, checkpoint = path)
  expect_identical(whole$seed, 32)
  expect_identical(whole$diagnostics$pid[1:3], part$diagnostics$pid)
  expect_identical(stable_part(whole), stable_part(reference))
})

test_that("every backend appends to the checkpoint", {
  fit <- small_fit()
  reference <- bs_batch(fit, 3, seed = 33)
  backends <- list(serial = list(backend = "serial"),
                   mclapply = list(backend = "mclapply", max.fork = 2),
                   mclapply_dynamic = list(backend = "mclapply", max.fork = 2,
                                           mc.preschedule = FALSE))
  if (requireNamespace("future.apply", quietly = TRUE)) {
    old_plan <- future::plan(future::sequential)
    on.exit(future::plan(old_plan), add = TRUE)
    backends$future <- list(backend = "future")
  }
  for (name in names(backends)) {
    path <- tempfile()
    boot <- do.call(bs_batch, c(list(fit, 3, seed = 33, checkpoint = path), backends[[name]]))
    expect_identical(stable_part(boot), stable_part(reference), label = name)
    expect_setequal(unique(checkpoint_entries(path)$replicate), 1:3)
    resumed <- bs_batch(fit, 3, seed = 33, checkpoint = path)
    expect_identical(resumed$diagnostics$pid, boot$diagnostics$pid, label = name)
    unlink(path)
  }
})

test_that("a truncated tail loses only the frame it cut", {
  fit <- small_fit()
  path <- tempfile()
  on.exit(unlink(path))
  first <- bs_batch(fit, 4, max.fork = 2, seed = 34, checkpoint = path)
  last_frame <- max(checkpoint_entries(path)$replicate[4]) # written last
  bytes <- readBin(path, "raw", file.size(path))
  writeBin(bytes[seq_len(length(bytes) - 25)], path)
  expect_warning(resumed <- bs_batch(fit, 4, max.fork = 2, seed = 34, checkpoint = path),
                 class = "wisp_checkpoint_warning", regexp = "cut-short tail")
  rerun <- which(resumed$diagnostics$pid != first$diagnostics$pid)
  expect_identical(rerun, last_frame)
  expect_identical(stable_part(resumed), stable_part(first))
  # the file was repaired: a third run warns no more and reruns nothing
  expect_silent(third <- bs_batch(fit, 4, max.fork = 2, seed = 34, checkpoint = path))
  expect_identical(third$diagnostics$pid, resumed$diagnostics$pid)
})

test_that("a damaged frame in the middle is the only one redone", {
  fit <- small_fit()
  path <- tempfile()
  on.exit(unlink(path))
  first <- bs_batch(fit, 4, max.fork = 2, seed = 35, checkpoint = path)
  order_written <- checkpoint_entries(path)$replicate
  bytes <- readBin(path, "raw", file.size(path))
  frame <- (length(bytes) - 8) / 4 # equal-size frames after the 8-byte magic
  at <- 8 + frame + 40 # inside the second frame's payload
  bytes[at] <- as.raw(bitwXor(as.integer(bytes[at]), 0xff))
  writeBin(bytes, path)
  expect_warning(resumed <- bs_batch(fit, 4, max.fork = 2, seed = 35, checkpoint = path),
                 class = "wisp_checkpoint_warning", regexp = "1 damaged stretch")
  expect_identical(which(resumed$diagnostics$pid != first$diagnostics$pid), order_written[2])
  expect_identical(stable_part(resumed), stable_part(first))
})

test_that("failed replicates are recorded and redone on resume", {
  fit <- small_fit()
  reference <- bs_batch(fit, 4, max.fork = 2, seed = 36)
  path <- tempfile()
  on.exit(unlink(path))
  with_faults(list(kill = 3L))
  on.exit(no_faults(), add = TRUE)
  failed <- expect_no_trace(bs_batch(fit, 4, max.fork = 2, seed = 36, checkpoint = path))
  no_faults()
  expect_identical(failed$diagnostics$ok, c(TRUE, TRUE, FALSE, TRUE))
  entries <- checkpoint_entries(path)
  expect_identical(entries$reason[entries$replicate == 3], "killed by signal 9 (SIGKILL)")
  resumed <- bs_batch(fit, 4, max.fork = 2, seed = 36, checkpoint = path)
  expect_identical(which(resumed$diagnostics$pid != failed$diagnostics$pid), 3L)
  expect_identical(stable_part(resumed), stable_part(reference))
})

test_that("checkpoints of other runs and other files are refused and left alone", {
  fit <- small_fit()
  path <- tempfile()
  on.exit(unlink(path))
  bs_batch(fit, 2, seed = 37, checkpoint = path)
  before <- readBin(path, "raw", file.size(path))
  expect_error(bs_batch(fit, 2, seed = 38, checkpoint = path), class = "wisp_input_error",
               regexp = "seed 37")
  other <- wisp(small_counts()[small_counts()$species == "gene1", ],
                model.settings = list(LRO_cost = "none"), verbose = FALSE)
  expect_error(bs_batch(other, 2, seed = 37, checkpoint = path), class = "wisp_input_error",
               regexp = "different fit")
  expect_identical(readBin(path, "raw", file.size(path)), before)

  foreign <- tempfile(fileext = ".csv")
  on.exit(unlink(foreign), add = TRUE)
  writeLines(c("count,bin", "1,2"), foreign)
  expect_error(bs_batch(fit, 2, seed = 37, checkpoint = foreign), class = "wisp_input_error",
               regexp = "not a wispack checkpoint")
  expect_identical(readLines(foreign), c("count,bin", "1,2"))

  expect_error(bs_batch(fit, 2, checkpoint = tempdir()), class = "wisp_input_error",
               regexp = "directory")
  expect_error(bs_batch(fit, 2, checkpoint = file.path(tempfile(), "x")),
               class = "wisp_input_error", regexp = "does not exist")
  expect_error(bs_batch(fit, 2, checkpoint = NA_character_), class = "wisp_input_error",
               regexp = "checkpoint")
  expect_error(bs_batch(fit, 2, checkpoint = c("a", "b")), class = "wisp_input_error",
               regexp = "checkpoint")
})

test_that("a checkpoint path that is not a regular file is refused", {
  skip_if_not(file.exists("/dev/zero"))
  expect_error(bs_batch(small_fit(), 2, checkpoint = "/dev/zero"), class = "wisp_input_error",
               regexp = "regular file")
})
