# Progress reaches progressr as the work finishes (issue #15, item 8): each
# bootstrap replicate on the fork and serial backends (the future backend's
# chunks: test-future.R), and each change-point structure of wisp()'s grid
# search and each gene of its fit. Handlers set with withCallingHandlers()
# around the call see the conditions while the work goes on.

local_progressr <- function(envir = parent.frame()) {
  skip_if_not_installed("progressr")
  old <- options(progressr.enable = TRUE)
  do.call(on.exit, list(substitute(options(old), list(old = old)), add = TRUE), envir = envir)
}

# For each progress update `code` signals, how many replicates the
# checkpoint at `path` held at that moment.
checkpoint_counts_at_updates <- function(code, path) {
  counts <- integer()
  withCallingHandlers(code, progression = function(p) {
    if (identical(p$type, "update")) {
      held <- if (file.exists(path)) length(wispack:::checkpoint_open_rust(path)$replicate) else 0L
      counts <<- c(counts, held)
    }
  })
  counts
}

test_that("the fork and serial backends report each replicate as it ends, after its checkpoint", {
  local_progressr()
  fit <- small_fit()
  for (backend in c("fork", "serial")) {
    path <- tempfile()
    counts <- checkpoint_counts_at_updates(
      bs_batch(fit, 5, max.fork = 2, backend = backend, seed = 61, checkpoint = path,
               progress = TRUE),
      path
    )
    unlink(path)
    # One update per replicate, each after that replicate was written and
    # before the next: 1, 2, ..., 5 replicates on disk.
    expect_identical(counts, 1:5, label = backend)
  }
  # mclapply returns when every replicate has ended: its updates come then.
  path <- tempfile()
  counts <- checkpoint_counts_at_updates(
    bs_batch(fit, 4, max.fork = 2, backend = "mclapply", seed = 61, checkpoint = path,
             progress = TRUE),
    path
  )
  unlink(path)
  expect_identical(counts, rep(4L, 4))
})

test_that("an error in a progress handler stops a fork-backend run and reaches the caller", {
  local_progressr()
  fit <- small_fit()
  seen <- 0L
  expect_no_trace(expect_error(
    withCallingHandlers(
      bs_batch(fit, 8, max.fork = 2, seed = 62, progress = TRUE),
      progression = function(p) {
        if (identical(p$type, "update")) {
          seen <<- seen + 1L
          stop("stop at the first replicate")
        }
      }
    ),
    "stop at the first replicate"
  ))
  expect_identical(seen, 1L)
  # The session goes on.
  expect_identical(nrow(bs_batch(fit, 2, seed = 62, progress = FALSE)$t), 2L)
})

# Runs wisp() and records its progress conditions (type, progressor, time)
# and messages.
record_wisp <- function(...) {
  events <- data.frame(type = character(), progressor = character(), time = numeric(),
                       stringsAsFactors = FALSE)
  said <- character()
  fit <- withCallingHandlers(
    wisp(...),
    progression = function(p) {
      events[nrow(events) + 1L, ] <<- list(p$type, p$progressor_uuid,
                                          proc.time()[["elapsed"]])
    },
    message = function(m) {
      said <<- c(said, conditionMessage(m))
      invokeRestart("muffleMessage")
    }
  )
  list(fit = fit, events = events, said = said)
}

test_that("wisp() reports each structure of the grid search and each gene as it is fitted", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  local_progressr()
  skip_if_not(wispack:::test_hooks_enabled(), "needs a build with the test hooks")
  # Structure 2 of the grid search and gene 2 of the fit each take 0.6 s
  # longer: updates that arrive as the fits end are spread over that time;
  # updates relayed when the work is over would all come at once.
  wispack:::inject_faults(list(delay = 2L))
  on.exit(wispack:::inject_faults(list()), add = TRUE)
  runs <- list(
    list(likelihood = "nb", workers = 1), list(likelihood = "nb", workers = 2),
    list(likelihood = "original", workers = 2)
  )
  for (run in runs) {
    label <- sprintf("%s on %d worker(s)", run$likelihood, run$workers)
    out <- record_wisp(small_counts(), max.fork = run$workers, fit_only = TRUE,
                       model.settings = list(likelihood = run$likelihood, LRO_cost = "AIC",
                                             structure = "lro"))
    structures <- length(unique(out$fit$LRO.grid.search.results$structure))
    genes <- length(out$fit$grouping.variables$species.lvls)
    expect_gte(structures, 2)
    updates <- out$events[out$events$type == "update", ]
    stages <- unique(updates$progressor)
    # The grid search's progressor, then the fit's (one step for the
    # original's fit of every gene at once).
    expect_length(stages, 2)
    grid <- updates$time[updates$progressor == stages[1]]
    fit <- updates$time[updates$progressor == stages[2]]
    expect_length(grid, structures)
    expect_length(fit, if (run$likelihood == "nb") genes else 1L)
    expect_gt(diff(range(grid)), 0.3, label = paste(label, "grid"))
    if (run$likelihood == "nb") expect_gt(diff(range(fit)), 0.3, label = paste(label, "fit"))
    # Each progressor starts before its updates and finishes after them.
    for (stage in stages) {
      types <- out$events$type[out$events$progressor == stage]
      expect_identical(types[1], "initiate", label = label)
      expect_identical(types[length(types)], "finish", label = label)
    }
    # Coarse progress in messages.
    expect_true(any(grepl(sprintf("Grid search: %d change-point structures to fit", structures),
                          out$said, fixed = TRUE)), label = label)
    if (run$likelihood == "nb") {
      expect_true(any(grepl("Fit: 2 genes to fit", out$said, fixed = TRUE)), label = label)
      # A short stage says only that it starts.
      expect_false(any(grepl("of 2 genes fitted", out$said, fixed = TRUE)), label = label)
    }
  }
})

test_that("an error in a progress handler during wisp() stops the fit and reaches the caller", {
  local_progressr()
  for (workers in c(1, 2)) {
    updates <- 0L
    # The handler's error (a wispack error, of the class wisp() catches
    # inside to add context) reaches the caller as it is.
    expect_no_trace(expect_error(
      withCallingHandlers(
        suppressMessages(wisp(small_counts(), max.fork = workers, fit_only = TRUE,
                              model.settings = list(LRO_cost = "AIC"))),
        progression = function(p) {
          if (identical(p$type, "update")) {
            updates <<- updates + 1L
            stop(wispack:::wisp_condition("input", "stopped by a progress handler"))
          }
        }
      ),
      class = "wisp_input_error", regexp = "^stopped by a progress handler$"
    ))
    expect_identical(updates, 1L, label = sprintf("%d worker(s)", workers))
  }
})

test_that("the default structure selection reports each curve as it is chosen", {
  local_progressr()
  for (workers in 1:2) {
    out <- record_wisp(small_counts(), max.fork = workers, fit_only = TRUE, verbose = TRUE)
    curves <- nrow(out$fit$degrees) * ncol(out$fit$degrees)
    expect_gt(curves, 1)
    genes <- ncol(out$fit$degrees)
    for (pass in c("random effects at 0", "random effects held")) {
      expect_true(any(grepl(sprintf("Structure (degrees by BIC, %s): %d curves to fit", pass,
                                    curves), out$said, fixed = TRUE)),
                  label = paste(workers, "worker(s),", pass))
    }
    updates <- out$events[out$events$type == "update", ]
    stages <- unique(updates$progressor)
    # The first pass (one step per curve), the pooled fit (one per gene), the
    # second pass (one per curve), then the fit of the genes whose degrees
    # the second pass changed (no progressor when it kept them all).
    expect_gte(length(stages), 3)
    expect_lte(length(stages), 4)
    expect_equal(sum(updates$progressor == stages[1]), curves)
    expect_equal(sum(updates$progressor == stages[2]), genes)
    expect_equal(sum(updates$progressor == stages[3]), curves)
  }
})
