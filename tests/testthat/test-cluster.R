# bs_batch(backend = "future") on a real one-node Slurm cluster, through
# future.batchtools::batchtools_slurm and the template wispack ships. Each
# test starts the cluster with tools/slurm-cluster.sh and stops it at its end
# (a cluster that was already running is used and left running).
#
# Where Slurm cannot be set up (no root, no apt, daemons that do not start),
# the tests skip with the script's reason and, when WISPACK_SLURM_STATUS
# names a file, write "unavailable: <reason>" there; tools/test.sh reports
# that as a result of its own ("Slurm cluster test: NOT RUN ..."). It writes
# "ran" there when the cluster came up. Not run under CRAN.

slurm_script <- function() {
  Sys.getenv("WISPACK_SLURM_SCRIPT", test_path("..", "..", "tools", "slurm-cluster.sh"))
}

record_slurm_status <- function(line) {
  path <- Sys.getenv("WISPACK_SLURM_STATUS")
  if (nzchar(path)) writeLines(line, path)
}

# Starts the cluster for one test; returns a function that restores the
# environment and stops the cluster (when this call started it).
start_slurm_cluster <- function() {
  skip_on_cran()
  unavailable <- function(reason) {
    record_slurm_status(paste("unavailable:", reason))
    skip(paste("Slurm cannot be set up here:", reason))
  }
  script <- slurm_script()
  if (!file.exists(script)) unavailable(paste0("the script ", script, " is not there"))
  was_running <- system2("sh", c(shQuote(script), "status"), stdout = FALSE, stderr = FALSE) == 0
  out <- suppressWarnings(system2("sh", c(shQuote(script), "start"), stdout = TRUE, stderr = TRUE))
  conf <- sub("^export SLURM_CONF=", "", grep("^export SLURM_CONF=", out, value = TRUE))
  if (!is.null(attr(out, "status")) || length(conf) != 1L) {
    reason <- grep("^Slurm cannot be set up here: ", out, value = TRUE)
    unavailable(if (length(reason)) {
      sub("^Slurm cannot be set up here: ", "", reason[1])
    } else {
      paste(c("tools/slurm-cluster.sh start failed:", utils::tail(out, 3)), collapse = " ")
    })
  }
  if (!requireNamespace("future.batchtools", quietly = TRUE)) {
    unavailable("the future.batchtools package is not installed")
  }
  record_slurm_status("ran")
  # Jobs inherit the environment (sbatch's default): the cluster's config,
  # and the libraries where this session found wispack.
  old_env <- Sys.getenv(c("SLURM_CONF", "R_LIBS"), unset = NA)
  Sys.setenv(SLURM_CONF = conf, R_LIBS = paste(.libPaths(), collapse = ":"))
  registries <- tempfile("batchtools")
  old_options <- options(future.cache.path = registries)
  function() {
    release_futures(registries)
    future::plan(future::sequential)
    options(old_options)
    for (name in names(old_env)) {
      if (is.na(old_env[[name]])) Sys.unsetenv(name) else do.call(Sys.setenv, as.list(old_env[name]))
    }
    if (!was_running) system2("sh", c(shQuote(script), "stop"), stdout = FALSE, stderr = FALSE)
  }
}

# future.batchtools keeps the future of a failed job registered (so that a
# later future on a plan with few workers waits for it), and its finalizer
# asks Slurm about the job again, slowly, printing the failure. Forget the
# futures of this test and delete their registries: a finalizer that finds
# no registry returns at once.
release_futures <- function(registries) {
  registry <- get("FutureRegistry", asNamespace("future.batchtools"))
  for (where in names(environment(registry)$db)) registry(where, action = "reset")
  unlink(registries, recursive = TRUE)
  invisible(gc())
}

slurm_plan <- function(...) {
  future::plan(future.batchtools::batchtools_slurm,
               template = system.file("templates", "slurm.tmpl", package = "wispack"), ...)
}

# The jobs Slurm knows of, one named character vector of fields per job.
slurm_jobs <- function() {
  lines <- system2("scontrol", c("show", "job", "--oneliner"), stdout = TRUE, stderr = FALSE)
  lines <- lines[grepl("^JobId=", lines)]
  lapply(lines, function(line) {
    fields <- regmatches(line, gregexpr("[A-Za-z:]+=[^ ]*", line))[[1]]
    stats::setNames(sub("^[^=]*=", "", fields), sub("=.*$", "", fields))
  })
}

test_that("on Slurm, one job per chunk, with the run's resources, gives the fork backend's replicates", {
  stop_cluster <- start_slurm_cluster()
  on.exit(stop_cluster(), add = TRUE)
  fit <- small_fit()
  reference <- bs_batch(fit, 6, max.fork = 2, seed = 61)
  before <- vapply(slurm_jobs(), function(job) job[["JobId"]], "")
  # 3 workers: 3 jobs of 2 replicates. The plan's resources and the run's are merged.
  slurm_plan(workers = 3, resources = list(time = "00:10:00"))
  boot <- bs_batch(fit, 6, backend = "future", seed = 61, resources = list(mem = "1G"))
  expect_identical(boot$t, reference$t)
  expect_identical(boot$diagnostics$ok, rep(TRUE, 6))
  jobs <- Filter(function(job) !job[["JobId"]] %in% before, slurm_jobs())
  names <- vapply(jobs, function(job) job[["JobName"]], "")
  expect_setequal(names, c("wispack-1-2", "wispack-3-4", "wispack-5-6"))
  expect_identical(unique(vapply(jobs, function(job) job[["MinMemoryNode"]], "")), "1G")
  expect_identical(unique(vapply(jobs, function(job) job[["TimeLimit"]], "")), "00:10:00")
  expect_identical(unique(vapply(jobs, function(job) job[["JobState"]], "")), "COMPLETED")
})

test_that("on Slurm, a killed job's replicates fail with its reason and a rerun completes them", {
  stop_cluster <- start_slurm_cluster()
  on.exit(stop_cluster(), add = TRUE)
  fit <- small_fit()
  reference <- bs_batch(fit, 6, max.fork = 2, seed = 62)
  path <- tempfile()
  on.exit(unlink(path), add = TRUE)
  slurm_plan(workers = 3)
  # The job of replicates 3-4 is killed (SIGKILL) before replicate 3.
  old <- options(wispack.inject_faults = list(kill = 3L))
  failed <- bs_batch(fit, 6, backend = "future", seed = 62, checkpoint = path)
  options(old)
  expect_identical(failed$diagnostics$ok, c(TRUE, TRUE, FALSE, FALSE, TRUE, TRUE))
  expect_match(failed$diagnostics$reason[3:4],
               "^future failed: BatchtoolsExpiration: Future \\('wispack-3-4'\\) expired")
  expect_identical(failed$t[-(3:4), ], reference$t[-(3:4), ])
  # The collecting session wrote every replicate, the failed ones too.
  expect_setequal(wispack:::checkpoint_open_rust(path)$replicate, 1:6)
  resumed <- bs_batch(fit, 6, backend = "future", checkpoint = path)
  expect_identical(resumed$t, reference$t)
  expect_identical(resumed$diagnostics$pid[-(3:4)], failed$diagnostics$pid[-(3:4)])
})

test_that("on Slurm, wisp() fits genes as jobs; a killed job's genes are fitted on rerun", {
  stop_cluster <- start_slurm_cluster()
  on.exit(stop_cluster(), add = TRUE)
  counts <- wisp_simulate(n.genes = 4, n.random = 3, n.bins = 40, seed = 21)
  reference <- wisp(counts, verbose = FALSE, fit_only = TRUE, max.fork = 2)
  parts <- function(fit) fit[c("fitted.parameters", "structure.selection", "gene.qc", "plan")]
  path <- tempfile()
  on.exit(unlink(path), add = TRUE)
  before <- vapply(slurm_jobs(), function(job) job[["JobId"]], "")
  slurm_plan(workers = 2)
  # Two jobs of two genes; the one of genes 3-4 is killed (SIGKILL).
  old <- options(wispack.inject_faults = list(kill = 3L))
  expect_error(wisp(counts, verbose = FALSE, fit_only = TRUE, backend = "future",
                    checkpoint = path),
               class = "wisp_system_error", regexp = "gene3, gene4 \\(.*wispack-genes-3-4")
  options(old)
  expect_setequal(wispack:::fit_checkpoint_open_rust(path)$species, c("gene1", "gene2"))
  resumed <- wisp(counts, verbose = FALSE, fit_only = TRUE, backend = "future",
                  checkpoint = path)
  expect_identical(parts(resumed), parts(reference))
  jobs <- Filter(function(job) !job[["JobId"]] %in% before, slurm_jobs())
  expect_setequal(vapply(jobs, function(job) job[["JobName"]], ""),
                  c("wispack-genes-1-2", "wispack-genes-3-4", "wispack-genes-3", "wispack-genes-4"))
})

test_that("on Slurm, a job over its memory limit fails with Slurm's reason", {
  stop_cluster <- start_slurm_cluster()
  on.exit(stop_cluster(), add = TRUE)
  fit <- small_fit()
  slurm_plan(workers = 1)
  # R alone needs more than 20 MB; Slurm samples a job's memory every second
  # and kills it. The 200 replicates would keep the job alive for several
  # seconds; it is killed at the first sample, so they cost no time.
  boot <- bs_batch(fit, 200, backend = "future", seed = 63, resources = list(mem = "20M"))
  expect_identical(boot$diagnostics$ok, rep(FALSE, 200))
  expect_match(boot$diagnostics$reason, "^future failed: .*exceeded memory limit")
})
