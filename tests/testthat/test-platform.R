# Which backends exist where, and the default per platform (R/platform.R).
# Windows is simulated by local_platform(fork = FALSE) (helper-platform.R).

test_that("the build reports what this platform can do", {
  platform <- wispack:::wisp_platform()
  expect_identical(platform$fork, .Platform$OS.type == "unix")
  linux <- Sys.info()[["sysname"]] == "Linux"
  expect_identical(platform$memory_limit, linux)
  expect_identical(platform$memory_figures, linux)
})

test_that("the default backend is fork where there is fork", {
  skip_if_not(.Platform$OS.type == "unix")
  fit <- small_fit()
  boot <- bs_batch(fit, 2, seed = 4)
  expect_identical(boot$backend, "fork")
  expect_identical(boot$t, bs_batch(fit, 2, backend = "serial", seed = 4)$t)
})

test_that("the default backend elsewhere is future, or serial without future.apply", {
  no_fork <- list(fork = FALSE, memory_limit = FALSE, memory_figures = FALSE)
  expect_identical(wispack:::default_backend(no_fork, future_apply = TRUE), "future")
  expect_identical(wispack:::default_backend(no_fork, future_apply = FALSE), "serial")
  expect_identical(wispack:::default_backend(list(fork = TRUE), future_apply = TRUE), "fork")
})

test_that("without fork, the default backend gives the serial replicates", {
  skip_if_not_installed("future.apply")
  fit <- small_fit()
  reference <- bs_batch(fit, 3, backend = "serial", seed = 8)
  old_plan <- future::plan(future::sequential)
  on.exit(future::plan(old_plan), add = TRUE)
  local_platform(fork = FALSE)
  boot <- bs_batch(fit, 3, seed = 8)
  expect_identical(boot$backend, "future")
  expect_identical(boot$t, reference$t)
  expect_identical(boot$diagnostics$ok, rep(TRUE, 3))
})

test_that("without fork, the default runs in parallel on a multisession plan", {
  skip_if_not_installed("future.apply")
  fit <- small_fit()
  reference <- bs_batch(fit, 4, backend = "serial", seed = 5)
  old_plan <- future::plan(future::multisession, workers = 2)
  on.exit(future::plan(old_plan), add = TRUE)
  local_platform(fork = FALSE)
  boot <- expect_silent(bs_batch(fit, 4, max.fork = 2, seed = 5, progress = FALSE))
  expect_identical(boot$t, reference$t)
  workers <- unique(boot$diagnostics$pid)
  expect_length(workers, 2)
  expect_false(Sys.getpid() %in% workers)
})

test_that("without fork, max.fork > 1 on a sequential plan says how to get workers", {
  skip_if_not_installed("future.apply")
  fit <- small_fit()
  old_plan <- future::plan(future::sequential)
  on.exit(future::plan(old_plan), add = TRUE)
  local_platform(fork = FALSE)
  # max.fork = 2: R CMD check --as-cran allows no more.
  expect_message(bs_batch(fit, 2, max.fork = 2, seed = 1, progress = FALSE),
                 "future::plan\\(future::multisession, workers = 2\\)")
  expect_silent(bs_batch(fit, 2, max.fork = 2, backend = "future", seed = 1, progress = FALSE))
})

test_that("without fork, the fork and mclapply backends are input errors naming the others", {
  fit <- small_fit()
  local_platform(fork = FALSE)
  for (backend in c("fork", "mclapply")) {
    error <- expect_error(bs_batch(fit, 2, backend = backend), class = "wisp_input_error")
    expect_match(conditionMessage(error), paste0("backend = \"", backend, "\" needs fork()"),
                 fixed = TRUE)
    expect_match(conditionMessage(error), "backend = \"future\"", fixed = TRUE)
    expect_match(conditionMessage(error), "backend = \"serial\"", fixed = TRUE)
  }
  expect_error(bs_batch(fit, 2, timeout = 10), class = "wisp_input_error")
  expect_identical(bs_batch(fit, 2, backend = "serial", seed = 3)$backend, "serial")
})

test_that("child.memory.limit is refused where the platform cannot limit memory", {
  fit <- small_fit()
  local_platform(fork = TRUE, memory_limit = FALSE)
  expect_error(bs_batch(fit, 2, child.memory.limit = 500), "needs Linux",
               class = "wisp_input_error")
  expect_identical(bs_batch(fit, 2, seed = 3)$backend, "fork")
})

test_that("wisp() fits and bootstraps without fork", {
  skip_if_not_installed("future.apply")
  old_plan <- future::plan(future::sequential)
  on.exit(future::plan(old_plan), add = TRUE)
  # (3 replicates are too few for the statistics, which warn so.)
  reference <- suppressWarnings(wisp(small_counts(), bootstraps.num = 3, verbose = FALSE,
                                     model.settings = list(LRO_cost = "none"), ran.seed = 2))
  local_platform(fork = FALSE)
  fit <- suppressWarnings(wisp(small_counts(), bootstraps.num = 3, verbose = FALSE,
                               model.settings = list(LRO_cost = "none"), ran.seed = 2))
  expect_identical(fit$bootstrap$backend, "future")
  expect_identical(fit$sample.params.bs, reference$sample.params.bs)
})

test_that("the memory columns are reported where the platform has them", {
  skip_if_not(wispack:::wisp_platform()$memory_figures)
  # The serial backend's one worker is this session: PSS and private dirty
  # after its last replicate, or after every one on request.
  boot <- bs_batch(small_fit(), 2, backend = "serial", seed = 1)
  expect_true(all(boot$diagnostics$peak_rss_mb > 0))
  for (column in c("pss_mb", "private_dirty_mb")) {
    expect_identical(is.na(boot$diagnostics[[column]]), c(TRUE, FALSE), label = column)
    expect_true(boot$diagnostics[[column]][2] >= 0, label = column)
  }
  every <- bs_batch(small_fit(), 2, backend = "serial", seed = 1, memory.per.replicate = TRUE)
  for (column in c("peak_rss_mb", "pss_mb", "private_dirty_mb")) {
    expect_true(all(every$diagnostics[[column]] >= 0), label = column)
  }
})

test_that("without fork, a count fit with max.fork > 1 runs in this process and says so", {
  reference <- small_fit()
  local_platform(fork = FALSE)
  # The core's worker processes need fork(): asked for 2, the fit takes 1,
  # with a message naming the future backend, and is the same fit.
  expect_message(
    fit <- without_design_warning(
      wisp(small_counts(), model.settings = list(LRO_cost = "none"), verbose = FALSE,
           max.fork = 2)),
    "no fork.*max.fork = 2.*backend = \"future\"")
  expect_identical(fit$fitted.parameters, reference$fitted.parameters)
  expect_identical(fit$gene.tests, reference$gene.tests)
  expect_identical(wispack:::count_fit_workers(2, "original"), 2)
  expect_silent(wispack:::count_fit_workers(1, "nb"))
})
