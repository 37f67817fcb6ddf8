# Reliability: malformed input, injected faults, interrupts and large payloads.
# Every bad input must end in a classed error (or a documented warning),
# never in a crash, a hang or a silently wrong result.

test_that("malformed inputs to wisp(), bs_batch() and wisp_simulate() are classed errors", {
  base <- small_counts()
  fit <- small_fit()
  quick <- list(LRO_cost = "none")
  W <- function(data, ...) wisp(data, model.settings = quick, verbose = FALSE, ...)
  with_data <- function(change) {
    data <- base
    change(data)
  }
  with_fit <- function(change) {
    broken <- fit
    change(broken)
  }
  # bincode writes a short string as a one-byte length and its bytes: replace
  # that length by the 9-byte varint of 2^40.
  with_huge_string_length <- function(bytes, label) {
    label_bytes <- charToRaw(label)
    starts <- which(bytes[-length(bytes)] == as.raw(length(label_bytes)))
    at <- Find(function(i) identical(bytes[i + seq_along(label_bytes)], label_bytes), starts)
    stopifnot(!is.null(at))
    huge <- as.raw(c(253, 0, 0, 0, 0, 0, 1, 0, 0)) # 2^40, little-endian u64
    c(bytes[seq_len(at - 1)], huge, bytes[-seq_len(at)])
  }
  cases <- list(
    # wisp(): data
    "not a data.frame" = quote(W(as.matrix(base))),
    "a list" = quote(W(as.list(base))),
    "no rows" = quote(W(base[0, ])),
    "character counts" = quote(W(with_data(function(d) { d$count <- as.character(d$count); d }))),
    "logical counts" = quote(W(with_data(function(d) { d$count <- d$count > 0; d }))),
    "Inf count" = quote(W(with_data(function(d) { d$count[3] <- Inf; d }))),
    "negative count" = quote(W(with_data(function(d) { d$count[3] <- -1; d }))),
    "fractional count" = quote(W(with_data(function(d) { d$count[3] <- 0.5; d }))),
    "count beyond 2^53" = quote(W(with_data(function(d) { d$count[3] <- 2^60; d }))),
    "all counts NA" = quote(suppressWarnings(W(with_data(function(d) { d$count <- NA_real_; d })))),
    "bin 0" = quote(W(with_data(function(d) { d$bin[2] <- 0; d }))),
    "bin NA" = quote(W(with_data(function(d) { d$bin[2] <- NA; d }))),
    "bin 1e6 (a hang before)" = quote(W(with_data(function(d) { d$bin[2] <- 1e6; d }))),
    "bin 5000 among 40" = quote(W(with_data(function(d) { d$bin[2] <- 5000; d }))),
    "bin above max_bin" = quote(wisp(base, model.settings = list(LRO_cost = "none", max_bin = 10),
                                     verbose = FALSE)),
    "character bins" = quote(W(with_data(function(d) { d$bin <- as.character(d$bin); d }))),
    # The count likelihood fits what the data identify (test-unbalanced.R);
    # the original needs every treatment.
    "treatment without data, original likelihood" = quote(wisp(with_data(function(d) {
      d$age <- ifelse(d$hemisphere == "left", "P1", sample(c("P1", "P2"), nrow(d), TRUE))
      d[!(d$hemisphere == "left" & d$age == "P2"), ]
    }), model.settings = c(quick, likelihood = "original"), verbose = FALSE)),
    "labels collide after pasting (_)" = quote(W(with_data(function(d) {
      d$context <- ifelse(d$species == "gene1", "a_b", "a")
      d$species <- ifelse(d$species == "gene1", "c", "b_c")
      d
    }))),
    "levels collide after pasting (:)" = quote(W(with_data(function(d) {
      d$a <- sample(c("x", "y", "y:z"), nrow(d), TRUE)
      d$b <- sample(c("w", "z"), nrow(d), TRUE)
      d$hemisphere <- NULL
      d
    }))),
    "level named ref" = quote(W(with_data(function(d) {
      d$hemisphere <- ifelse(d$hemisphere == "left", "a", "ref")
      d
    }))),
    "numeric levels that print alike" = quote(W(with_data(function(d) {
      d$dose <- ifelse(d$hemisphere == "left", 0.3, 0.1 + 0.2)
      d$hemisphere <- NULL
      d
    }))),
    "invalid UTF-8 label" = quote(W(with_data(function(d) {
      d$species[d$species == "gene1"] <- "G\xe4d1"
      Encoding(d$species) <- "UTF-8"
      d
    }))),
    "one-level fixed effect" = quote(W(with_data(function(d) { d$age <- "P1"; d }))),
    "NA gene" = quote(W(with_data(function(d) { d$species[4] <- NA; d }))),
    "random level 'none'" = quote(W(with_data(function(d) { d$ran[d$ran == "mouse1"] <- "none"; d }))),
    "list fixed effect" = quote(W(with_data(function(d) { d$age <- I(as.list(seq_len(nrow(d)) %% 2)); d }))),
    # wisp(): arguments
    "max.fork 0" = quote(W(base, max.fork = 0)),
    "max.fork negative" = quote(W(base, max.fork = -2)),
    "max.fork NA" = quote(W(base, max.fork = NA)),
    "max.fork of length 2" = quote(W(base, max.fork = c(1, 2))),
    "bootstraps.num 2.5" = quote(W(base, bootstraps.num = 2.5)),
    "bootstraps.num text" = quote(W(base, bootstraps.num = "10")),
    "ran.seed of length 2" = quote(W(base, ran.seed = 1:2)),
    "variables of length 2" = quote(W(base, variables = list(count = c("count", "bin")))),
    "variables not a list" = quote(W(base, variables = "count")),
    "verbose NA" = quote(wisp(base, model.settings = quick, verbose = NA)),
    "unknown setting" = quote(wisp(base, model.settings = list(ctoll = 1), verbose = FALSE)),
    # bs_batch()
    "not a fit" = quote(bs_batch(list(), 2)),
    "bootstraps.num 0" = quote(bs_batch(fit, 0)),
    "bootstraps.num 1.5" = quote(bs_batch(fit, 1.5)),
    "bootstraps.num Inf" = quote(bs_batch(fit, Inf)),
    "bootstraps.num NA" = quote(bs_batch(fit, NA)),
    "bs max.fork 0" = quote(bs_batch(fit, 2, max.fork = 0)),
    "bs max.fork -1" = quote(bs_batch(fit, 2, max.fork = -1)),
    "bs max.fork NA" = quote(bs_batch(fit, 2, max.fork = NA_integer_)),
    "tasks.per.child 0" = quote(bs_batch(fit, 2, tasks.per.child = 0)),
    "timeout -1" = quote(bs_batch(fit, 2, timeout = -1)),
    "timeout NA" = quote(bs_batch(fit, 2, timeout = NA_real_)),
    "child.memory.limit 0" = quote(bs_batch(fit, 2, child.memory.limit = 0)),
    "seed 1.5" = quote(bs_batch(fit, 2, seed = 1.5)),
    "schedule unknown" = quote(bs_batch(fit, 2, schedule = "random")),
    "corrupted plan bytes" = quote(bs_batch(with_fit(function(f) { f$plan <- as.raw(1:10); f }), 2)),
    "truncated plan" = quote(bs_batch(with_fit(function(f) { f$plan <- f$plan[seq_len(length(f$plan) - 9)]; f }), 2)),
    "flipped plan bytes" = quote(bs_batch(with_fit(function(f) {
      at <- round(seq(20, length(f$plan), length.out = 20))
      f$plan[at] <- as.raw(255 - as.integer(f$plan[at]))
      f
    }), 2, backend = "serial")),
    # A length field claiming a terabyte: decoding must refuse it, not try to
    # allocate it (a failed allocation would abort the R session).
    "plan with a huge string length" = quote(bs_batch(with_fit(function(f) {
      f$plan <- with_huge_string_length(f$plan, "gene1")
      f
    }), 2)),
    # The same in a plan saved by wispack 0.1.0, which has no checksum: the
    # decoder itself must refuse it.
    "0.1.0 plan with a huge string length" = quote(bs_batch(local({
      f <- readRDS(test_path("fixtures", "fit-v0.rds"))
      f$plan <- with_huge_string_length(f$plan, "gene1")
      f
    }), 2)),
    "plan with a trailing byte" = quote(bs_batch(with_fit(function(f) { f$plan <- c(f$plan, as.raw(0)); f }), 2)),
    "plan of another fit" = quote(bs_batch(with_fit(function(f) {
      f$plan <- wisp(base[base$species == "gene1", ], model.settings = quick, verbose = FALSE)$plan
      f
    }), 2)),
    "parameters dropped" = quote(bs_batch(with_fit(function(f) { f$fitted.parameters <- f$fitted.parameters[-1]; f }), 2)),
    "plan removed" = quote(bs_batch(with_fit(function(f) { f$plan <- NULL; f }), 2)),
    "class only" = quote(bs_batch(structure(list(), class = "wisp"), 2)),
    # wisp_simulate()
    "n.genes 0" = quote(wisp_simulate(n.genes = 0)),
    "n.genes NA" = quote(wisp_simulate(n.genes = NA)),
    "n.bins 5" = quote(wisp_simulate(n.bins = 5)),
    "n.bins of length 2" = quote(wisp_simulate(n.bins = c(20, 30))),
    "one-level fixed effect (simulate)" = quote(wisp_simulate(fixed.effects = list(a = "x"))),
    "unnamed fixed effects" = quote(wisp_simulate(fixed.effects = list(c("a", "b")))),
    "fixed effect named bin" = quote(wisp_simulate(fixed.effects = list(bin = c("a", "b")))),
    "negative dispersion" = quote(wisp_simulate(dispersion = -1)),
    "degrees of wrong shape" = quote(wisp_simulate(n.genes = 2, degrees = matrix(1, 2, 2))),
    "time.series unknown" = quote(wisp_simulate(time.series = "age")),
    "seed text" = quote(wisp_simulate(seed = "1"))
  )
  expect_gte(length(cases), 25)
  for (name in names(cases)) {
    started <- Sys.time()
    expect_error(eval(cases[[name]]), class = "wisp_input_error", label = name)
    expect_lt(as.numeric(Sys.time() - started, units = "secs"), 10 * slowdown(), label = name)
  }
  expect_identical(child_pids(), integer())
})

# Warnings of `code`, muffled and collected, with its value.
warnings_of <- function(code) {
  said <- character()
  value <- withCallingHandlers(code, warning = function(w) {
    said <<- c(said, conditionMessage(w))
    invokeRestart("muffleWarning")
  })
  list(value = value, said = said)
}

test_that("unusual but valid inputs fit, with documented warnings where they are suspect", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  base <- small_counts()
  for (likelihood in c("nb", "original")) {
    W <- function(data) {
      wisp(data, model.settings = list(likelihood = likelihood, LRO_cost = "none"),
           verbose = FALSE)
    }
    # NA counts: dropped with a warning
    data <- base
    data$count[1:3] <- NA
    expect_warning(W(data), "Dropped 3 tokens with an NA count")
    # counts of 1e9: a warning that they are implausible, and a fit of
    # numbers: finite, except estimates the count likelihood reports as not
    # informed by the data (NaN)
    data <- base
    data$count[1:2] <- 1e9
    run <- warnings_of(W(data))
    expect_true(any(grepl("2 counts above 1e+07", run$said, fixed = TRUE)), label = likelihood)
    estimates <- run$value$fitted.parameters
    expect_false(any(is.infinite(estimates)), label = likelihood)
    expect_false(anyNA(estimates[!is.nan(estimates)]), label = likelihood)
    expect_true(is.finite(run$value$fit.diagnostics$neg.loglik), label = likelihood)
    if (likelihood == "original") expect_true(all(is.finite(estimates)))
    # duplicated rows are tokens (two cells with the same count): accepted and
    # counted, so doubling every row doubles every summed count
    once <- W(base)
    twice <- W(rbind(base, base))
    observed <- !is.na(once$count.data.summed$count) & once$count.data.summed$ran != "none"
    expect_equal(twice$count.data.summed$count[observed],
                 2 * once$count.data.summed$count[observed], label = likelihood)
    if (likelihood == "nb") {
      # ... and, with one token per cell and gene, the exposure too
      expect_identical(once$exposure$rule, "tokens")
      expect_equal(twice$count.data.summed$exposure[observed],
                   2 * once$count.data.summed$exposure[observed])
    }
    # a single bin, a single gene, a single random level
    single_bin <- W(transform(base, bin = 1))
    expect_s3_class(single_bin, "wisp")
    expect_true(all(single_bin$degrees == 0), label = likelihood)
    expect_true(all(is.finite(coef(single_bin, "fixed"))), label = likelihood)
    expect_identical(W(base[base$species == "gene1", ])$grouping.variables$species.lvls, "gene1")
    single_ran <- W(base[base$ran == "mouse1", ])
    expect_false(any(grepl("wfactor", names(single_ran$fitted.parameters))), label = likelihood)
    # non-ASCII labels in UTF-8 and latin1 (same labels either way)
    utf8 <- base
    utf8$species <- ifelse(utf8$species == "gene1", "G\u00e4d1", "\u03b1-Actin")
    latin1 <- base
    latin1$species <- iconv(ifelse(latin1$species == "gene1", "G\u00e4d1", "M\u00fcller"),
                            "UTF-8", "latin1")
    expect_identical(Encoding(latin1$species[1]), "latin1")
    expect_setequal(W(utf8)$grouping.variables$species.lvls, c("G\u00e4d1", "\u03b1-Actin"))
    expect_setequal(enc2utf8(W(latin1)$grouping.variables$species.lvls),
                    c("G\u00e4d1", "M\u00fcller"))
    # a non-ASCII fixed-effect name
    renamed <- base
    names(renamed)[names(renamed) == "hemisphere"] <- "h\u00e9misph\u00e8re"
    expect_s3_class(W(renamed), "wisp")
  }
})

test_that("every injected fault fails only its replicate, with its reason, and leaves no trace", {
  fit <- small_fit()
  clean <- bs_batch(fit, 7, max.fork = 2, seed = 41)
  # Under valgrind the memory limit is not enforced (see helper-processes.R),
  # so replicate 6 runs normally there.
  limit_tested <- !under_valgrind()
  faults <- list(kill = 2L, segfault = 3L, panic = 4L, hang = 5L)
  if (limit_tested) faults$allocate <- 6L
  with_faults(faults)
  on.exit(no_faults())
  fds <- open_fd_count()
  timeout <- 3 * slowdown()
  boot <- expect_no_trace(bs_batch(fit, 7, max.fork = 2, seed = 41, timeout = timeout,
                                   child.memory.limit = if (limit_tested) 256))
  no_faults()
  d <- boot$diagnostics
  failed <- if (limit_tested) 2:6 else 2:5
  expect_identical(d$ok, !seq_len(7) %in% failed)
  expect_identical(d$reason[2], "killed by signal 9 (SIGKILL)")
  expect_identical(d$reason[3], "killed by signal 11 (SIGSEGV)")
  expect_identical(d$reason[4], "panic: injected fault")
  expect_identical(d$reason[5], sprintf("timeout after %s s", format(timeout)))
  if (limit_tested) expect_identical(d$reason[6], "memory limit")
  expect_true(all(is.na(boot$t[failed, ])))
  expect_identical(boot$t[-failed, ], clean$t[-failed, ])
  # the session is still usable, descriptors included
  expect_identical(open_fd_count(), fds)
  expect_identical(bs_batch(fit, 7, max.fork = 2, seed = 41)$t, clean$t)
})

test_that("the same faults under tasks.per.child > 1 keep the replicates around them", {
  fit <- small_fit()
  clean <- bs_batch(fit, 6, max.fork = 2, seed = 42)
  with_faults(list(kill = 2L, panic = 4L))
  on.exit(no_faults())
  boot <- expect_no_trace(bs_batch(fit, 6, max.fork = 2, tasks.per.child = 3, seed = 42))
  expect_identical(boot$diagnostics$ok, c(TRUE, FALSE, TRUE, FALSE, TRUE, TRUE))
  ok <- boot$diagnostics$ok
  expect_identical(boot$t[ok, ], clean$t[ok, ])
})

test_that("Ctrl-C during bs_batch() keeps the finished replicates, in the condition and the checkpoint", {
  skip_if_not(file.exists("/proc/self/stat"))
  skip_without_test_hooks()
  fit <- small_fit()
  fit_file <- tempfile(fileext = ".rds")
  saveRDS(fit, fit_file)
  checkpoint <- tempfile()
  pid_file <- tempfile()
  out_file <- tempfile()
  on.exit(unlink(c(fit_file, checkpoint, pid_file, out_file)))
  script <- sprintf(paste(
    ".libPaths(%s)",
    "library(wispack)",
    "fit <- readRDS(%s)",
    "wispack:::inject_faults(list(hang = 5:6))",
    "writeLines(as.character(Sys.getpid()), %s)",
    # a fresh worker per replicate, so that the two hanging replicates run at once
    "caught <- tryCatch(bs_batch(fit, 6, max.fork = 2, seed = 43, checkpoint = %s,",
    "                            tasks.per.child = 1),",
    "  wisp_interrupted = function(e) e)",
    "after <- bs_batch(fit, 2, seed = 43)", # the session is still usable
    "saveRDS(list(class = class(caught), result = caught$result, after = after$t), %s)",
    sep = "\n"), r_literal(.libPaths()), r_literal(fit_file), r_literal(pid_file),
    r_literal(checkpoint), r_literal(out_file))
  script_file <- tempfile(fileext = ".R")
  on.exit(unlink(script_file), add = TRUE)
  writeLines(script, script_file)
  system2(file.path(R.home("bin"), "Rscript"), script_file, wait = FALSE, stdout = FALSE,
          stderr = FALSE)
  expect_true(wait_until(function() file.exists(pid_file) && length(readLines(pid_file)) == 1, 30))
  worker <- as.integer(readLines(pid_file))
  # wait until replicates 1-4 are durable and the two hanging ones run
  expect_true(wait_until(function() {
    file.exists(checkpoint) &&
      length(wispack:::checkpoint_open_rust(checkpoint)$replicate) == 4 &&
      length(child_pids(worker)) == 2
  }, 30))
  children <- child_pids(worker)
  tools::pskill(worker, tools::SIGINT)
  expect_true(wait_until(function() file.exists(out_file), 20))
  Sys.sleep(0.3) # let saveRDS finish
  outcome <- readRDS(out_file)
  expect_true("wisp_interrupted" %in% outcome$class)
  partial <- outcome$result
  expect_s3_class(partial, "wisp_bootstrap")
  expect_identical(partial$diagnostics$ok, c(TRUE, TRUE, TRUE, TRUE, FALSE, FALSE))
  expect_identical(partial$diagnostics$reason[5:6], c("interrupted", "interrupted"))
  expect_false(any(file.exists(file.path("/proc", children))))
  reference <- bs_batch(fit, 6, max.fork = 2, seed = 43)
  expect_identical(partial$t[1:4, ], reference$t[1:4, ])
  expect_identical(outcome$after, reference$t[1:2, ])
  # resuming from the checkpoint runs only 5 and 6 and gives the full result
  resumed <- expect_no_trace(bs_batch(fit, 6, max.fork = 2, checkpoint = checkpoint))
  expect_identical(resumed$diagnostics$pid[1:4], partial$diagnostics$pid[1:4])
  expect_identical(resumed$t, reference$t)
})

test_that("100,000-value results from 20 concurrent children arrive in bounded memory", {
  skip_on_cran() # 20 workers
  skip_if_not(file.exists("/proc/self/status"))
  skip_without_test_hooks()
  out_file <- tempfile()
  on.exit(unlink(out_file))
  script <- sprintf(paste(
    ".libPaths(%s)",
    "library(wispack)",
    "status <- function(key) {",
    "  line <- grep(paste0('^', key, ':'), readLines('/proc/self/status'), value = TRUE)",
    "  as.numeric(gsub('[^0-9]', '', line)) / 1024",
    "}",
    "invisible(wispack:::engine_selftest(2, workers = 2, payload = 10))",
    "before <- status('VmRSS')",
    "started <- Sys.time()",
    "result <- wispack:::engine_selftest(40, workers = 20, tasks_per_child = 2, payload = 1e5)",
    "saveRDS(list(ok = result$ok, checksum = result$checksum, growth = status('VmHWM') - before,",
    "             seconds = as.numeric(Sys.time() - started, units = 'secs')), %s)",
    sep = "\n"), r_literal(.libPaths()), r_literal(out_file))
  script_file <- tempfile(fileext = ".R")
  on.exit(unlink(script_file), add = TRUE)
  writeLines(script, script_file)
  status <- system2(file.path(R.home("bin"), "Rscript"), script_file, timeout = 120)
  expect_identical(status, 0L)
  outcome <- readRDS(out_file)
  expect_true(all(outcome$ok))
  expect_true(all(abs(outcome$checksum / 1e5 - 0.5) < 0.01)) # means of uniforms
  result_mb <- 40 * 1e5 * 8 / 2^20 # 30.5 MB of doubles
  expect_lt(outcome$growth, 3 * result_mb + 64)
  expect_lt(outcome$seconds, 60)
  # the same payloads with the small pipes of one child per task
  same <- expect_no_trace(wispack:::engine_selftest(40, workers = 20, payload = 1e5))
  expect_identical(same$checksum, outcome$checksum)
})

test_that("a step that needs more memory than the process can get is a wisp_system_error", {
  # The forecast of a count fit, by hand: per token 60 bytes of coded columns
  # (2 factors), 40 of the table and 64 of the saved plan; 40 per summed row;
  # a quarter more as margin.
  forecast <- wispack:::count_memory_rust(1000, 2, 5000)
  expect_identical(forecast$bytes, (1000 * (60 + 40 + 64) + 5000 * 40) * 1.25)
  expect_true(forecast$available)
  # More than any address space: refused before it is tried.
  expect_false(wispack:::count_memory_rust(1e15, 2, 1)$available)
  expect_error(wispack:::check_memory(wispack:::count_memory_rust(1e15, 2, 1), "the count fit",
                                      "fit fewer genes"),
               class = "wisp_system_error", regexp = "about 2.*e\\+05 GB|GB of memory")
})

test_that("under an address-space limit, binning and fitting fail with a classed error, and R lives on", {
  skip_if_not(file.exists("/proc/self/status"))
  out_file <- tempfile()
  on.exit(unlink(out_file))
  # Data small for R but far too large for the limit in the Rust core: the
  # binned sums of 2,000 cells (each its own group, a unique id kept) x
  # 200,000 genes need 3.2 GB; the fit of one row for each of 20,000 genes
  # has 2 contexts x 20,000 genes x 8 animals x 4 treatments x 100 bins =
  # 128 million summed rows, about 6 GB by the forecast.
  script <- sprintf(paste(
    ".libPaths(%s)",
    "outcome <- list(binning = 'not run', fitting = 'not run')",
    "catch <- function(expr) tryCatch({ expr; 'no error' }, error = function(e) class(e)[1])",
    "tryCatch({",
    "  suppressPackageStartupMessages(library(wispack))",
    "  cells <- data.frame(cell = sprintf('c%%d', 1:2000), position = seq(0, 1, length.out = 2000),",
    "                      slice = 1:2000)",
    "  counts <- Matrix::sparseMatrix(i = 1:2000, j = 1:2000, x = 1, dims = c(2000, 200000),",
    "                                 dimnames = list(cells$cell, sprintf('g%%d', 1:200000)))",
    "  outcome$binning <- catch(suppressWarnings(wisp_bin(counts, cells, bins = 10)))",
    "  g <- 1:20000",
    "  rows <- data.frame(count = 1, exposure = 2, bin = g %%%% 100 + 1,",
    "                     species = sprintf('g%%d', g), ran = sprintf('m%%d', g %%%% 8 + 1),",
    "                     context = c('L2', 'L5')[g %%%% 2 + 1],",
    "                     hemisphere = c('left', 'right')[(g %%/%% 2) %%%% 2 + 1])",
    "  rows$genotype <- ifelse(rows$ran %%in%% c('m1', 'm2', 'm3', 'm4'), 'WT', 'KO')",
    "  outcome$fitting <- catch(suppressWarnings(wisp(rows, variables = list(exposure = 'exposure'),",
    "                                                 verbose = FALSE, fit_only = TRUE, degrees = 0)))",
    "}, error = function(e) outcome$setup <<- conditionMessage(e))",
    "saveRDS(outcome, %s)",
    sep = "\n"), r_literal(.libPaths()), r_literal(out_file))
  script_file <- tempfile(fileext = ".R")
  on.exit(unlink(script_file), add = TRUE)
  writeLines(script, script_file)
  # 1.5 GB: room for R and the data, not for the sums nor the fit's forecast
  command <- sprintf("ulimit -v %d; %s %s", 1500000L, shQuote(file.path(R.home("bin"), "Rscript")),
                     shQuote(script_file))
  status <- system2("sh", c("-c", shQuote(command)), stdout = FALSE, stderr = FALSE, timeout = 300)
  expect_identical(status, 0L) # R was not aborted
  outcome <- readRDS(out_file)
  expect_null(outcome$setup)
  expect_identical(outcome$binning, "wisp_system_error")
  expect_identical(outcome$fitting, "wisp_system_error")
})

test_that("a worker killed while checking a gene's transition points costs that gene's checks only", {
  skip_without_test_hooks()
  counts <- wisp_simulate(n.genes = 3, n.bins = 40, seed = 4, degrees = 1L,
                          fixed.effects = list(genotype = c("WT", "KO")))
  fit <- without_design_warning(wisp(counts, verbose = FALSE, fit_only = TRUE,
                                     model.settings = list(LRO_cost = "none")))
  reference <- wisp_statistics(fit, method = "profile", max.fork = 2)$stats
  # One task per gene with point effects: the second is gene2's.
  with_faults(list(kill = 2L))
  on.exit(no_faults(), add = TRUE)
  stats <- expect_no_trace(wisp_statistics(fit, method = "profile", max.fork = 2))$stats
  no_faults()
  checks <- stats$profiles
  in_gene2 <- grepl("_gene2_", checks$parameter, fixed = TRUE)
  expect_gt(sum(in_gene2), 0L)
  expect_gt(sum(!in_gene2), 0L)
  # Its checks are missing, with the reason; its point effects keep their
  # Wald statistics and are flagged (not checked).
  expect_true(all(is.na(checks$deviance.zero[in_gene2])))
  expect_true(all(checks$flagged[in_gene2]))
  expect_match(checks$note[in_gene2], "killed by signal 9")
  rows <- stats$parameters
  gene2_rows <- rows$parameter %in% checks$parameter[in_gene2]
  expect_identical(rows$method[gene2_rows], rep("wald", sum(gene2_rows)))
  wald <- wisp_statistics(fit, method = "wald")$stats$parameters
  expect_identical(rows$p.value[gene2_rows], wald$p.value[gene2_rows])
  # The other genes' checks and statistics are those of the run without it.
  expect_identical(checks[!in_gene2, ], reference$profiles[!in_gene2, ])
  other <- !grepl("_gene2_", rows$parameter, fixed = TRUE)
  expect_identical(rows[other, ], reference$parameters[other, ])
})

test_that("a gene whose fit fails is kept with its reason, and the others go on", {
  skip_without_test_hooks()
  counts <- wisp_simulate(n.genes = 3, n.bins = 40, seed = 4,
                          fixed.effects = list(genotype = c("WT", "KO")))
  settings <- list(structure = "lro", LRO_cost = "none")
  # Wald statistics: the fault below strikes the second task of every stage
  # on workers, and the profile checks' second task is another gene's once
  # gene2 has failed (a crash there costs that gene's checks alone: the test
  # above).
  reference <- without_design_warning(wisp(counts, verbose = FALSE, max.fork = 2,
                                           model.settings = settings, statistics = "wald"))
  # The worker fitting gene2 dies (as one killed by the kernel for memory).
  with_faults(list(kill = 2L))
  on.exit(no_faults(), add = TRUE)
  expect_warning(fit <- without_design_warning(expect_no_trace(
    wisp(counts, verbose = FALSE, max.fork = 2, model.settings = settings,
         statistics = "wald"))),
    "the fit of 1 gene failed and it is kept without estimates.*gene2 \\(killed by signal 9")
  no_faults()
  qc <- fit$gene.qc
  expect_identical(qc$converged, c(TRUE, FALSE, TRUE))
  expect_identical(qc$note[2], "failed: killed by signal 9 (SIGKILL)")
  expect_true(is.na(qc$dispersion[2]))
  gene2 <- fit$parameters$species %in% "gene2"
  expect_true(all(is.na(fit$fitted.parameters[gene2])))
  expect_identical(unname(fit$fitted.parameters[!gene2]),
                   unname(reference$fitted.parameters[!gene2]))
  # Its statistics and gene-level test are missing, with the reason; the
  # others' are those of the fit without the failure.
  stats <- fit$stats$parameters
  in_gene2 <- stats$parameter %in% fit$parameters$name[gene2]
  expect_true(all(is.na(stats$p.value[in_gene2])))
  expect_identical(stats[!in_gene2, ], reference$stats$parameters[!in_gene2, ])
  tests <- fit$gene.tests
  expect_true(is.na(tests$statistic[tests$gene == "gene2"]))
  expect_match(tests$note[tests$gene == "gene2"], "the gene's fit failed: killed by signal 9")
  expect_identical(tests$statistic[tests$gene != "gene2"],
                   reference$gene.tests$statistic[reference$gene.tests$gene != "gene2"])
  # Its figure shows its counts; a bootstrap keeps it failed.
  expect_no_error(ggplot2::ggplot_build(plot(fit, type = "ratecount", species = "gene2")))
  # Its rows are left out of nobs() as its likelihood is of logLik().
  rows <- reference$count.data.summed
  expect_identical(nobs(fit), sum(!is.na(rows$count) & rows$species != "gene2"))
  expect_lt(attr(logLik(fit), "df"), attr(logLik(reference), "df"))
  # The other genes decide whether the fit (and a replicate) converged.
  expect_true(fit$fit.diagnostics$converged)
  expect_match(fit$fit.diagnostics$code, "^failed: gene2: killed")
  expect_identical(fit$gene.qc$fitted, fit$gene.qc$gene != "gene2")
  boot <- bs_batch(fit, 2, resample = "parametric", seed = 3, progress = FALSE)
  expect_identical(boot$diagnostics$converged, c(TRUE, TRUE))
  expect_true(all(is.na(boot$t[, gene2])))
  expect_true(all(is.finite(boot$t[, !gene2 & fit$parameters$role %in% "beta"])))
})
