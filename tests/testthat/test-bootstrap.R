test_that("every backend returns bitwise-identical replicates for one seed", {
  fit <- small_fit()
  reference <- bs_batch(fit, 4, backend = "serial", seed = 21)
  expect_identical(dim(reference$t), c(4L, length(fit$fitted.parameters)))
  expect_identical(colnames(reference$t), names(fit$fitted.parameters))
  variants <- list(
    fork_1 = bs_batch(fit, 4, max.fork = 1, seed = 21),
    fork_2 = bs_batch(fit, 4, max.fork = 2, seed = 21),
    fork_batch = bs_batch(fit, 4, max.fork = 2, tasks.per.child = 3, schedule = "batch", seed = 21),
    mclapply_1 = bs_batch(fit, 4, max.fork = 1, backend = "mclapply", seed = 21),
    mclapply_2 = bs_batch(fit, 4, max.fork = 2, backend = "mclapply", seed = 21),
    mclapply_dynamic = bs_batch(fit, 4, max.fork = 2, backend = "mclapply",
                                mc.preschedule = FALSE, seed = 21)
  )
  for (name in names(variants)) {
    expect_identical(variants[[name]]$t, reference$t, label = name)
  }
  expect_false(identical(bs_batch(fit, 4, seed = 22)$t, reference$t))
})

test_that("by default one fed worker per slot gives the replicates of a fresh worker each; a number wins", {
  fit <- small_fit()
  fresh <- bs_batch(fit, 6, max.fork = 2, tasks.per.child = 1, seed = 23)
  expect_length(unique(fresh$diagnostics$pid), 6)
  fed <- bs_batch(fit, 6, max.fork = 2, seed = 23)
  expect_identical(fed$t, fresh$t)
  expect_length(unique(fed$diagnostics$pid), 2)
  # an explicit number wins
  one <- bs_batch(fit, 6, max.fork = 2, tasks.per.child = 6, seed = 23)
  expect_length(unique(one$diagnostics$pid), 1)
  expect_identical(one$t, fresh$t)
  expect_error(bs_batch(fit, 2, tasks.per.child = 0), class = "wisp_input_error",
               regexp = "tasks.per.child")
  expect_error(bs_batch(fit, 2, memory.per.replicate = "yes"), class = "wisp_input_error",
               regexp = "memory.per.replicate")
  expect_error(bs_batch(fit, 2, memory.per.replicate = c(TRUE, FALSE)),
               class = "wisp_input_error", regexp = "TRUE, FALSE or NA")
})

test_that("PSS and private dirty are read once per worker, after its last replicate, unless asked per replicate", {
  skip_if_not(wispack:::wisp_platform()$memory_figures)
  fit <- small_fit()
  measured <- function(boot) !is.na(boot$diagnostics$pss_mb)
  # fork: two workers of 3 replicates each, one after the other
  boot <- bs_batch(fit, 6, max.fork = 1, tasks.per.child = 3, seed = 24)
  expect_identical(measured(boot), c(FALSE, FALSE, TRUE, FALSE, FALSE, TRUE))
  expect_identical(!is.na(boot$diagnostics$private_dirty_mb), measured(boot))
  expect_true(all(boot$diagnostics$peak_rss_mb > 0))
  every <- bs_batch(fit, 6, max.fork = 1, tasks.per.child = 3, seed = 24,
                    memory.per.replicate = TRUE)
  expect_true(all(measured(every)))
  expect_identical(every$t, boot$t)
  # fed workers (the default): one worker, read after replicate 6
  fed <- bs_batch(fit, 6, max.fork = 1, seed = 24)
  expect_identical(measured(fed), seq_len(6) == 6)
  expect_identical(fed$t, boot$t)
  # mclapply: prescheduled, replicates 1, 3 go to one child and 2, 4 to the other
  pre <- bs_batch(fit, 4, max.fork = 2, backend = "mclapply", seed = 24)
  expect_identical(measured(pre), c(FALSE, FALSE, TRUE, TRUE))
  expect_length(unique(pre$diagnostics$pid[3:4]), 2)
  dynamic <- bs_batch(fit, 4, max.fork = 2, backend = "mclapply", mc.preschedule = FALSE,
                      seed = 24)
  expect_true(all(measured(dynamic)))
  expect_length(unique(dynamic$diagnostics$pid), 4)
  # NA: never, on every backend; the peak RSS is still there, the estimates the same
  for (backend in c("fork", "mclapply", "serial")) {
    never <- bs_batch(fit, 6, max.fork = 2, backend = backend, seed = 24,
                      memory.per.replicate = NA)
    expect_false(any(measured(never)), label = backend)
    expect_true(all(is.na(never$diagnostics$private_dirty_mb)), label = backend)
    expect_true(all(never$diagnostics$peak_rss_mb > 0), label = backend)
    expect_identical(never$t, boot$t, label = backend)
  }
  never <- bs_batch(fit, 6, max.fork = 1, tasks.per.child = 3, seed = 24,
                    memory.per.replicate = NA)
  expect_false(any(measured(never)))
  expect_identical(never$t, boot$t)
})

test_that("every resampling scheme gives the same replicates on every backend, for both likelihoods", {
  schemes <- list(nb = c("animals", "cells", "parametric"), original = c("cells", "animals"))
  for (fit in list(small_fit(), small_fit_original())) {
    label <- fit_label(fit)
    previous <- NULL
    for (resample in schemes[[label]]) {
      reference <- bs_batch(fit, 2, backend = "serial", seed = 21, resample = resample)
      expect_identical(reference$resample, resample)
      expect_true(all(reference$diagnostics$ok), label = paste(label, resample))
      expect_identical(bs_batch(fit, 2, max.fork = 2, seed = 21, resample = resample)$t,
                       reference$t, label = paste(label, resample, "fork"))
      # Another scheme redraws other data.
      if (!is.null(previous)) expect_false(identical(reference$t, previous))
      previous <- reference$t
    }
  }
  # Defaults: parametric for the count likelihood, the original's cells for the original.
  expect_identical(bs_batch(small_fit(), 1, seed = 1)$resample, "parametric")
  expect_identical(bs_batch(small_fit_original(), 1, seed = 1)$resample, "cells")
  expect_error(bs_batch(small_fit_original(), 2, resample = "parametric"),
               class = "wisp_input_error", regexp = "count likelihood")
})

test_that("replicate numbers extend a run: two attached runs are one run", {
  for (fit in list(small_fit(), small_fit_original())) {
    label <- fit_label(fit)
    whole <- bs_batch(fit, 4, seed = 3, max.fork = 2)
    first <- bs_batch(fit, replicates = 1:2, seed = 3)
    second <- bs_batch(fit, replicates = 3:4, seed = 3)
    expect_identical(rbind(first$t, second$t), whole$t, label = label)
    # (4 replicates are too few for Holm to reject anything: a warning, not
    # the point here.)
    few <- function(expr) {
      withCallingHandlers(expr, wisp_resolution_warning = function(w) invokeRestart("muffleWarning"))
    }
    attached <- few(wisp_statistics(few(wisp_statistics(fit, boot = second)), boot = first))
    expect_identical(attached$bootstrap$t, whole$t, label = label)
    expect_identical(attached$bootstrap$replicates, 1:4)
    expect_equal(attached$stats, few(wisp_statistics(fit, boot = whole))$stats, label = label)
    expect_error(wisp_statistics(attached, boot = first), class = "wisp_input_error",
                 regexp = "already attached")
    expect_error(wisp_statistics(attached, boot = bs_batch(fit, replicates = 5, seed = 4)),
                 class = "wisp_input_error", regexp = "seed")
  }
})

test_that("the future backend matches, sequential and multisession", {
  skip_if_not_installed("future.apply")
  fit <- small_fit()
  reference <- bs_batch(fit, 3, backend = "serial", seed = 8)
  old_plan <- future::plan(future::sequential)
  on.exit(future::plan(old_plan), add = TRUE)
  expect_identical(bs_batch(fit, 3, backend = "future", seed = 8)$t, reference$t)
  # memory.per.replicate = NA: no PSS read in any chunk
  never <- bs_batch(fit, 3, backend = "future", seed = 8, memory.per.replicate = NA)
  expect_true(all(is.na(never$diagnostics$pss_mb)))
  expect_identical(never$t, reference$t)
  future::plan(future::multisession, workers = 2)
  expect_identical(bs_batch(fit, 3, backend = "future", seed = 8)$t, reference$t)
})

test_that("the replicate count is exact for awkward combinations", {
  fit <- small_fit()
  expect_identical(nrow(bs_batch(fit, 1, max.fork = 2, seed = 1)$t), 1L)
  expect_identical(nrow(bs_batch(fit, 7, max.fork = 2, schedule = "batch", seed = 1)$t), 7L)
  skip_on_cran() # more than 2 workers
  expect_identical(nrow(bs_batch(fit, 7, max.fork = 3, schedule = "batch", seed = 1)$t), 7L)
  expect_identical(nrow(bs_batch(fit, 2, max.fork = 4, seed = 1)$t), 2L)
})

test_that("a replicate whose child is killed is kept as a failure with its signal", {
  fit <- small_fit()
  with_faults(list(kill = 2L))
  on.exit(no_faults())
  boot <- expect_no_trace(bs_batch(fit, 4, max.fork = 2, seed = 3))
  expect_identical(boot$diagnostics$ok, c(TRUE, FALSE, TRUE, TRUE))
  expect_identical(boot$diagnostics$reason[2], "killed by signal 9 (SIGKILL)")
  expect_true(all(is.na(boot$t[2, ])))
  no_faults()
  clean <- bs_batch(fit, 4, max.fork = 2, seed = 3)
  expect_identical(boot$t[-2, ], clean$t[-2, ])
})

test_that("the serial path leaves the fit untouched", {
  fit <- small_fit()
  before <- unserialize(serialize(fit, NULL))
  bs_batch(fit, 2, backend = "serial", seed = 2)
  expect_identical(fit, before)
  # and the model itself is unchanged: a later bootstrap gives the same result
  expect_identical(bs_batch(fit, 2, backend = "serial", seed = 9)$t,
                   bs_batch(fit, 2, seed = 9)$t)
})

test_that("seed = NULL draws the seed from R's generator and records it", {
  fit <- small_fit()
  set.seed(77)
  first <- bs_batch(fit, 2)
  set.seed(77)
  second <- bs_batch(fit, 2)
  expect_identical(first$seed, second$seed)
  expect_identical(first$t, second$t)
})

test_that("diagnostics have the documented columns", {
  boot <- bs_batch(small_fit(), 2, seed = 1)
  expect_named(boot$diagnostics, c("ok", "reason", "pen.neg.value", "neg.loglik", "converged",
                                   "code", "num.evals", "iterations", "max.gradient", "on.bound",
                                   "fit.seconds", "seconds", "pid", "peak_rss_mb", "pss_mb",
                                   "private_dirty_mb"))
  expect_s3_class(boot, "wisp_bootstrap")
  expect_identical(boot$t0, small_fit()$fitted.parameters)
})

test_that("bad arguments are refused", {
  fit <- small_fit()
  expect_error(bs_batch(list(), 2), class = "wisp_input_error", regexp = "wisp")
  expect_error(bs_batch(fit, 0), class = "wisp_input_error", regexp = "bootstraps.num")
  expect_error(bs_batch(fit, 2, backend = "snow"), class = "wisp_input_error", regexp = "backend")
  expect_error(bs_batch(fit, 2, checkpoint = tempdir()), class = "wisp_input_error",
               regexp = "checkpoint")
  expect_error(bs_batch(fit, 2, backend = "serial", timeout = 5), class = "wisp_input_error",
               regexp = "fork")
  broken <- fit
  broken$plan <- NULL
  expect_error(bs_batch(broken, 2), class = "wisp_input_error", regexp = "serialised model")
})

test_that("large simulated effects come out significant and zero effects mostly not", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  counts <- wisp_simulate(n.genes = 3, n.random = 3, n.bins = 50, seed = 1)
  truth <- attr(counts, "truth")$effects
  # 60 replicates cannot give a Holm-adjusted bootstrap p-value below 0.05
  # over this many tests (the smallest p-value is 2/61): wisp() says so.
  expect_warning(fit <- wisp(counts, bootstraps.num = 60, max.fork = 2, ran.seed = 5,
                             model.settings = list(LRO_cost = "none"), verbose = FALSE),
                 "can reject nothing")
  stats <- fit$stats$parameters
  expect_identical(fit$stats$method, "percentile")
  expect_identical(fit$stats$replicates.used, 60L)
  p <- fit$parameters
  rate_effects <- p$name[p$role == "beta" & p$component == "Rt"]
  large <- rate_effects[abs(truth[rate_effects]) >= 0.5]
  zero <- names(truth)[truth == 0]
  expect_gt(length(large), 0)
  expect_gt(length(zero), 0)
  expect_true(all(stats$p.value.adj >= 0.05, na.rm = TRUE))
  # Unadjusted: every replicate of a large effect has its sign, so its
  # p-value is the smallest possible and its interval excludes 0.
  at <- match(large, stats$parameter)
  expect_equal(stats$p.value[at], rep(2 / 61, length(large)))
  expect_identical(sign(stats$estimate[at]), sign(unname(truth[large])))
  expect_true(all(stats$CI.low[at] > 0 | stats$CI.high[at] < 0))
  false_positive <- mean(stats$p.value[match(zero, stats$parameter)] < 0.05)
  expect_lt(false_positive, 0.2)
  # Holm-adjusted significance from the same fit's Wald tests.
  wald <- wisp_statistics(fit, method = "wald")$stats$parameters
  expect_true(all(wald$p.value.adj[match(large, wald$parameter)] < 0.05))
  expect_lt(mean(wald$p.value.adj[match(zero, wald$parameter)] < 0.05), 0.2)
  expect_true(all(c("pred.low", "pred.high") %in% names(fit$count.data.summed)))
  expect_identical(nrow(fit$sample.params.bs), 61L)
})

test_that("Holm-adjusted p-values of a fit match p.adjust within each gene", {
  fit <- suppressWarnings(wisp(small_counts(), bootstraps.num = 20, ran.seed = 2,
                               model.settings = list(LRO_cost = "none"), verbose = FALSE))
  s <- fit$stats$parameters
  tested <- !is.na(s$p.value)
  p <- stats::setNames(s$p.value[tested], s$parameter[tested])
  expect_gt(length(unique(fit$parameters$species[match(names(p), fit$parameters$name)])), 1)
  expect_equal(s$p.value.adj[tested], unname(holm_by_gene(fit, p)))
  expect_identical(fit$stats$family, "gene")
  # Not Holm over every effect of the fit (which would be larger).
  expect_false(isTRUE(all.equal(s$p.value.adj[tested], p.adjust(s$p.value[tested], "holm"))))
})

test_that("under resample = \"animals\" the replicates' random effects are NaN, the rest is not", {
  for (fit in list(small_fit(), small_fit_original())) {
    label <- fit_label(fit)
    warp <- fit$parameters$role == "warp"
    expect_gt(sum(warp), 0)
    boot <- bs_batch(fit, 3, seed = 5, resample = "animals")
    expect_true(all(boot$diagnostics$ok), label = label)
    expect_true(all(is.nan(boot$t[, warp])), label = label)
    fixed <- fit$parameters$role %in% c("baseline", "beta") & is.finite(fit$fitted.parameters)
    expect_true(all(is.finite(boot$t[, fixed])), label = label)
    # The other schemes keep the animals, and report their random effects.
    cells <- bs_batch(fit, 2, seed = 5, resample = "cells")
    expect_true(all(is.finite(cells$t[, warp])), label = label)
  }
})

test_that("animals alone in their group cannot be resampled", {
  counts <- wisp_simulate(n.genes = 2, n.random = 1, n.bins = 30, degrees = 1L, seed = 12)
  fit <- suppressWarnings(wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE))
  expect_error(bs_batch(fit, 2, seed = 1, resample = "animals"), class = "wisp_input_error",
               regexp = "single random level")
  # The default scheme of the count likelihood draws from the fitted model,
  # which needs no animals to redraw.
  expect_no_condition(boot <- bs_batch(fit, 2, seed = 1))
  expect_identical(boot$resample, "parametric")
  expect_true(all(boot$diagnostics$ok))
  # One genotype with a single animal: a warning names the groups.
  design <- wisp_design(between = list(genotype = c("WT", "KO")),
                        within = list(hemisphere = c("left", "right")),
                        animals.per.group = c(WT = 3, KO = 1))
  nested <- wisp_simulate(design = design, n.genes = 1, n.bins = 30, degrees = 1L, seed = 13)
  fit <- wisp(nested, model.settings = list(LRO_cost = "none"), verbose = FALSE)
  expect_warning(bs_batch(fit, 2, seed = 1, resample = "animals"), "1 of 2 groups")
})

test_that("wisp(converged.resamples.only = FALSE) keeps every successful replicate", {
  fit <- small_fit()
  boot <- bs_batch(fit, 40, seed = 9, max.fork = 2)
  # Mark some replicates as not converged: the statistics must follow the flag.
  expect_true(all(boot$diagnostics$ok))
  converged_before <- sum(boot$diagnostics$converged[-c(2, 5, 7)])
  boot$diagnostics$converged[c(2, 5, 7)] <- FALSE
  only <- wispack:::attach_bootstrap(fit, boot, converged.only = TRUE)
  every <- wispack:::attach_bootstrap(fit, boot, converged.only = FALSE)
  expect_identical(only$stats$replicates.used, as.integer(converged_before))
  expect_identical(every$stats$replicates.used, 40L)
  beta <- which(fit$parameters$role == "beta")[1]
  name <- fit$parameters$name[beta]
  # R = 40, alpha = 0.05: k = ceiling(0.05 * 41 / 2) - 1 = 1, so [x_(1), x_(40)].
  by_hand <- range(boot$t[, beta])
  row <- every$stats$parameters[every$stats$parameters$parameter == name, ]
  expect_equal(c(row$CI.low, row$CI.high), by_hand)
})

test_that("wisp_statistics(boot =) warns when Holm can reject nothing, gives the band and prints the tests", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  counts <- wisp_simulate(n.genes = 1, n.bins = 30, seed = 3)
  fit <- without_design_warning(wisp(counts, model.settings = list(LRO_cost = "none"),
                                     verbose = FALSE))
  # The tested effects: every treatment effect (the fit holds none at 0).
  m <- sum(fit$parameters$role == "beta")
  expect_gt(m, 1)
  # By hand: B replicates give percentile p-values of at least 2 / (B + 1)
  # (min(#{x <= 0} + 1, #{x >= 0} + 1) is at least 1), and Holm multiplies
  # the smallest by m. Something can be rejected at alpha = 0.05 = 1/20 only
  # when 2 m / (B + 1) < 1/20, i.e. B + 1 > 40 m: at least 40 m replicates
  # (40 m - 1 give exactly 0.05, which is not below it).
  needed <- 40L * m
  boot <- bs_batch(fit, replicates = seq_len(needed - 1L), max.fork = 2, seed = 1)
  expect_true(all(boot$diagnostics$converged))
  B <- needed - 1L
  expect_warning(short <- wisp_statistics(fit, boot = boot), class = "wisp_resolution_warning",
                 regexp = sprintf("B = %d usable.*at least %d replicates.*replicates = %d:%d, seed = 1",
                                  B, needed, needed, needed))
  expect_true(all(short$stats$parameters$significance %in% c("", "ns")))
  # The band and fields wisp(bootstraps.num =) gives: its run of the same
  # replicates (seed = ran.seed) is the same bootstrap.
  d <- short$count.data.summed
  expect_true(all(c("pred.low", "pred.high") %in% names(d)))
  population <- d$ran == "none"
  expect_true(all(d$pred.low[population] <= d$pred.high[population]))
  booted <- suppressWarnings(wisp(counts, model.settings = list(LRO_cost = "none"),
                                  bootstraps.num = B, ran.seed = 1, verbose = FALSE))
  expect_identical(booted$bootstrap$t, boot$t)
  expect_identical(d[c("pred.low", "pred.high")], booted$count.data.summed[c("pred.low", "pred.high")])
  expect_identical(short$sample.params.bs, booted$sample.params.bs)
  expect_identical(short$diagnostics.bs, booted$diagnostics.bs)
  expect_equal(short$stats, booted$stats)
  geoms <- function(p) {
    vapply(ggplot2::ggplot_build(p)$plot$layers, function(l) class(l$geom)[1], "")
  }
  expect_false("GeomRibbon" %in% geoms(plot(fit, type = "ratecount")))
  expect_true("GeomRibbon" %in% geoms(plot(short, type = "ratecount")))
  expect_identical(nrow(short$sample.params.bs), as.integer(B + 1L))
  out <- capture.output(print(short))
  expect_true(any(grepl(sprintf("Percentile tests from %d replicates of %d treatment effects: 0 significant", B, m),
                        out, fixed = TRUE)))
  expect_true(any(grepl(sprintf("too few replicates to reject any (%d needed)", needed), out,
                        fixed = TRUE)))

  # One replicate more, added to the same run: enough, and no warning.
  more <- bs_batch(fit, replicates = needed, seed = 1)
  expect_no_warning(enough <- wisp_statistics(short, boot = more))
  expect_identical(enough$bootstrap$replicates, seq_len(needed))
  # The significant effects by hand: percentile p-values, Holm, below 0.05.
  t <- enough$bootstrap$t
  beta <- fit$parameters$name[fit$parameters$role == "beta"]
  p <- vapply(beta, function(name) {
    x <- t[, name]
    min(1, 2 * min(sum(x <= 0) + 1, sum(x >= 0) + 1) / (needed + 1))
  }, numeric(1))
  significant <- sum(holm_by_gene(fit, p) < 0.05)
  out <- capture.output(print(enough))
  expect_true(any(grepl(sprintf("Percentile tests from %d replicates of %d treatment effects: %d significant",
                                needed, m, significant), out, fixed = TRUE)))
  expect_false(any(grepl("too few replicates", out, fixed = TRUE)))
})
