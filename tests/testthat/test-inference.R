test_that("bootstrap p-values are never 0 and count both tails", {
  expect_equal(wispack:::bootstrap_p_value(rep(1, 99)), 2 / 100)
  expect_equal(wispack:::bootstrap_p_value(c(-1, 1, 2, 3)), 2 * 2 / 5)
  # Replicates exactly 0 count on both sides: an effect fixed at 0 is never significant.
  expect_equal(wispack:::bootstrap_p_value(rep(0, 50)), 1)
  expect_true(is.na(wispack:::bootstrap_p_value(c(NA, NA))))
})

test_that("the bootstrap p-value is below alpha exactly when the interval excludes 0", {
  set.seed(42)
  for (n in c(19, 39, 99, 100, 199, 250)) {
    for (alpha in c(0.05, 0.1, 0.2)) {
      for (shift in c(-3, -1.9, -0.5, 0, 0.4, 1.7, 2.2, 4)) {
        x <- stats::rnorm(n, shift)
        if (shift == 0) x[1:5] <- 0 # ties at 0
        p <- wispack:::bootstrap_p_value(x)
        ci <- wispack:::bootstrap_interval(x, alpha)
        excludes <- ci[1] > 0 || ci[2] < 0
        expect_identical(p < alpha, excludes, info = sprintf("n %d alpha %g shift %g", n, alpha, shift))
      }
    }
  }
})

test_that("bootstrap intervals are order statistics at the matching rank", {
  x <- c(5, 1, 4, 2, 3, 9, 8, 7, 6, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19)
  # alpha (R + 1) / 2 = 0.2 * 20 / 2 = 2, so k = 1: the extremes.
  expect_equal(wispack:::bootstrap_interval(x, 0.2), c(1, 19))
  # 0.5 * 20 / 2 = 5 -> k = 4
  expect_equal(wispack:::bootstrap_interval(x, 0.5), c(4, 16))
  # Too few replicates for the level: no finite interval.
  expect_equal(wispack:::bootstrap_interval(1:5, 0.05), c(-Inf, Inf))
})

test_that("Wald tests use t quantiles for finite df and agree with their intervals", {
  out <- wispack:::wald_tests(c(2, -1, 0.5, NA), c(1, 0.4, 1, 1), c(Inf, 4, 10, Inf), 0.05)
  expect_equal(out$p.value[1], 2 * stats::pnorm(-2))
  expect_equal(out$p.value[2], 2 * stats::pt(-2.5, 4))
  expect_equal(out$lower[2], -1 - stats::qt(0.975, 4) * 0.4)
  expect_identical(out$p.value[1:3] < 0.05, out$lower[1:3] > 0 | out$upper[1:3] < 0)
  expect_true(is.na(out$p.value[4]))
})

test_that("Holm's resolution says when a bootstrap is too small to reject", {
  r <- wispack:::bootstrap_resolution(199, 20, 0.05)
  expect_equal(r$smallest, 0.01)
  expect_false(r$holm_can_reject) # 20 * 0.01 = 0.2 >= 0.05
  expect_true(wispack:::bootstrap_resolution(999, 20, 0.05)$holm_can_reject)
  # 2 x 20 / (R + 1) < 0.05 needs R + 1 > 800: 799 replicates give exactly
  # 0.05, which is not below it.
  expect_equal(wispack:::bootstrap_resolution(10, 20, 0.05)$needed, 800)
  expect_false(wispack:::bootstrap_resolution(799, 20, 0.05)$holm_can_reject)
  expect_true(wispack:::bootstrap_resolution(800, 20, 0.05)$holm_can_reject)
  expect_equal(wispack:::bootstrap_resolution(10, 3, 0.2)$needed, 30) # 6 / (R + 1) < 0.2
  # At that boundary m x 2 / (R + 1) is alpha in exact arithmetic; floating
  # point rounds it below 0.05 for some m (7 here), and it must not be a star.
  adjusted <- p.adjust(rep(2 / (40 * 7), 7), "holm")
  expect_lt(adjusted[1], 0.05) # the rounding this guards against
  expect_identical(wispack:::significance_marks(adjusted, 0.05), rep("ns", 7))
  expect_identical(wispack:::significance_marks(c(0.049, 0.0099, 0.00099), 0.05),
                   c("*", "**", "***"))
})

# Genotype (between animals) crossed with hemisphere (within), `animals`
# per genotype: the calibration benchmark's design.
genotype_by_hemisphere <- function(animals) {
  wisp_design(between = list(genotype = c("KO", "WT")),
              within = list(hemisphere = c("left", "right")), animals.per.group = animals)
}
# One gene, one transition, with 3 (few) and 5 (enough) animals per genotype.
few_animals <- once(function() {
  wisp_simulate(design = genotype_by_hemisphere(3), n.genes = 1, n.bins = 30, degrees = 1L,
                seed = 5)
})
enough_animals <- once(function() {
  wisp_simulate(design = genotype_by_hemisphere(5), n.genes = 1, n.bins = 30, degrees = 1L,
                seed = 5)
})

# The figures the design warning must quote for `method` at 3 animals per
# group, recomputed from the shipped benchmark table: the range over its
# designs, in percent to one decimal.
quoted_range <- function(method, column) {
  table <- utils::read.csv(system.file("extdata", "point_calibration.csv", package = "wispack"))
  rows <- table[table$method == method & table$animals == 3, ]
  expect_gt(nrow(rows), 3L)
  x <- sort(unique(round(100 * range(rows[[column]]), 1)))
  paste0(paste(sprintf("%.1f", x), collapse = "-"), " %")
}

test_that("wisp() warns when the genes whose points it tests are sparse, quoting the benchmark", {
  design <- wisp_design(between = list(genotype = c("KO", "WT")),
                        within = list(hemisphere = c("left", "right")), animals.per.group = 5)
  design_warnings <- function(expr) {
    caught <- character()
    value <- withCallingHandlers(expr, wisp_design_warning = function(w) {
      caught <<- c(caught, conditionMessage(w))
      invokeRestart("muffleWarning")
    })
    list(value = value, messages = caught)
  }
  fit_of <- function(data) {
    wisp(data, degrees = 1L, model.settings = list(LRO_cost = "none"), verbose = FALSE)
  }
  sparse <- wisp_simulate(design = design, n.genes = 3, n.bins = 30, cells.per.bin = 4,
                          degrees = 1L, rate.range = c(0.1, 0.3), effect.size = 0.02,
                          effect.prob = 0, seed = 3)
  caught <- design_warnings(fit_of(sparse))
  # 5 animals per group: only the warning on sparse genes.
  expect_length(caught$messages, 1L)
  message <- caught$messages
  # Molecules per bin and animal from the tokens themselves: the mean of a
  # gene's sums per animal, hemisphere and bin.
  summed <- stats::aggregate(count ~ species + ran + hemisphere + bin, data = sparse, FUN = sum)
  per_row <- tapply(summed$count, summed$species, mean)
  expect_true(all(per_row < 10))
  for (gene in names(per_row)) {
    expect_match(message, sprintf("%s: %.1f", gene, per_row[[gene]]), fixed = TRUE)
  }
  expect_match(message, "at least 10 molecules per bin and animal", fixed = TRUE)
  # The same figure per gene in fit$gene.qc, and summary() points to it.
  qc <- caught$value$gene.qc
  expect_equal(qc$molecules, as.vector(per_row[qc$gene]))
  expect_output(print(summary(caught$value)),
                "3 genes with fewer than 10 molecules per bin\\s+and animal")
  expect_match(message, "3 of the 3 curves whose points were tested have fewer", fixed = TRUE)
  # The figures: the shipped table's bands that hold these genes, for the
  # fit's (default, profile-checked) statistics.
  expect_identical(caught$value$stats$method, "profile")
  table <- utils::read.csv(system.file("extdata", "point_calibration_counts.csv",
                                       package = "wispack"))
  rows <- table[table$method == "profile" & table$counts.to > min(per_row) &
                  table$counts.from <= max(per_row), ]
  expect_gt(nrow(rows), 0L)
  percent <- function(x) {
    x <- sort(unique(round(100 * range(x), 1)))
    paste0(paste(sprintf("%.1f", x), collapse = "-"), " %")
  }
  expect_match(message, paste(percent(rows$false.positive), "of true-null tpoint effects"),
               fixed = TRUE)
  expect_match(message, paste("covered", percent(rows$coverage)), fixed = TRUE)
  # And the gene-level tests' false positives in those bands, every term.
  genes <- utils::read.csv(system.file("extdata", "gene_calibration_counts.csv",
                                       package = "wispack"))
  genes <- genes[genes$counts.to > min(per_row) & genes$counts.from <= max(per_row), ]
  expect_gt(nrow(genes), 0L)
  expect_match(message, paste("anti-conservative too:", percent(genes$false.positive),
                              "of unchanged genes"), fixed = TRUE)
  # Well-expressed genes (the simulator's default rates), or no statistics:
  # no such warning.
  rich <- wisp_simulate(design = design, n.genes = 3, n.bins = 30, cells.per.bin = 4,
                        degrees = 1L, effect.prob = 0, seed = 3)
  expect_length(design_warnings(fit_of(rich))$messages, 0L)
  expect_length(design_warnings(wisp(sparse, degrees = 1L, fit_only = TRUE, verbose = FALSE,
                                     model.settings = list(LRO_cost = "none")))$messages, 0L)
})

test_that("wisp() warns when its tests of points are outside the calibrated designs", {
  few <- few_animals()
  caught <- NULL
  catch <- function(expr) {
    caught <<- NULL
    withCallingHandlers(expr, wisp_design_warning = function(w) {
      caught <<- w
      invokeRestart("muffleWarning")
    })
  }
  fit <- catch(wisp(few, degrees = 1L, model.settings = list(LRO_cost = "none"),
                    verbose = FALSE))
  expect_s3_class(caught, "warning")
  message <- conditionMessage(caught)
  expect_match(message, "calibrated from 5 animals per group; this fit's smallest group has 3")
  expect_match(message, "resample = \"parametric\"", fixed = TRUE)
  expect_match(message, "gene-level tests, anova(fit)", fixed = TRUE)
  expect_match(message, "with 3 animals per group", fixed = TRUE)
  # The default statistics are the profile-checked ones: the figures are
  # theirs, from the shipped table, and the message does not send the user
  # to profiles the fit already has.
  expect_identical(fit$stats$method, "profile")
  expect_match(message, paste(quoted_range("profile", "false.positive"),
                              "of true-null tpoint effects had p < 0.05"), fixed = TRUE)
  expect_match(message, paste("covered", quoted_range("profile", "coverage")), fixed = TRUE)
  expect_false(grepl("method = \"profile\"", message, fixed = TRUE))
  # The fit was tested all the same.
  expect_true(any(!is.na(fit$stats$parameters$p.value)))
  # Wald statistics: their own figures, and the profile as the check.
  wald_fit <- catch(wisp(few, degrees = 1L, model.settings = list(LRO_cost = "none"),
                         verbose = FALSE, statistics = "wald"))
  expect_identical(wald_fit$stats$method, "wald")
  message <- conditionMessage(caught)
  expect_match(message, paste(quoted_range("wald", "false.positive"),
                              "of true-null tpoint effects had p < 0.05"), fixed = TRUE)
  expect_match(message, "wisp_statistics(fit, method = \"profile\")", fixed = TRUE)

  # No statistics (fit_only), no transitions (no points to test), or 5
  # animals per group: no such warning.
  quiet <- function(expr) {
    classes <- character()
    withCallingHandlers(expr, warning = function(w) {
      classes <<- c(classes, class(w))
      invokeRestart("muffleWarning")
    })
    "wisp_design_warning" %in% classes
  }
  expect_false(quiet(wisp(few, degrees = 1L, fit_only = TRUE, verbose = FALSE,
                          model.settings = list(LRO_cost = "none"))))
  expect_false(quiet(wisp(few, degrees = 0L, verbose = FALSE,
                          model.settings = list(LRO_cost = "none"))))
  enough <- enough_animals()
  expect_false(quiet(wisp(enough, degrees = 1L, verbose = FALSE,
                          model.settings = list(LRO_cost = "none"))))
})

test_that("summary() repeats the small-design caution of tests of points", {
  few <- few_animals()
  fit <- without_design_warning(wisp(few, degrees = 1L, model.settings = list(LRO_cost = "none"),
                                     verbose = FALSE, statistics = "wald"))
  s <- summary(fit)
  expect_identical(s$small.design, 3L)
  expect_output(print(s), "Caution: the smallest group has 3 animals")
  expect_match(paste(capture.output(print(s)), collapse = " "),
               "wisp_statistics(fit, method = \"profile\")", fixed = TRUE)
  # Profile statistics keep the caution but do not send the user to them.
  profiled <- summary(wisp_statistics(fit, method = "profile"))
  expect_identical(profiled$small.design, 3L)
  out <- paste(capture.output(print(profiled)), collapse = " ")
  expect_match(out, "Caution: the smallest group has 3 animals", fixed = TRUE)
  expect_false(grepl("method = \"profile\"", out, fixed = TRUE))
  # Percentile statistics from a bootstrap: no Wald tests, no caution.
  boot <- suppressWarnings(bs_batch(fit, 9, backend = "serial", seed = 1, progress = FALSE))
  booted <- suppressWarnings(wisp_statistics(fit, boot = boot))
  expect_null(summary(booted)$small.design)
  # Enough animals: no caution.
  enough <- enough_animals()
  s <- summary(wisp(enough, degrees = 1L, model.settings = list(LRO_cost = "none"),
                    verbose = FALSE))
  expect_null(s$small.design)
  # (The gene-level tests' own caution, below 8 animals, is another line.)
  expect_false(any(grepl("Caution: the smallest group", capture.output(print(s)), fixed = TRUE)))
})
