# Gene-level tests of anova(fit) / wisp_gene_tests(): the reduced fits hold
# a term's effects at 0 in every context of each gene.

nested_design <- function(animals = 3L) {
  wisp_design(between = list(genotype = c("WT", "KO")),
              within = list(hemisphere = c("left", "right")), animals.per.group = animals)
}

test_that("the terms of a design are each factor with its interactions, and each interaction", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  counts <- wisp_simulate(design = nested_design(), n.genes = 2, n.bins = 30, seed = 4)
  fit <- without_design_warning(wisp(counts, verbose = FALSE))
  terms <- wispack:::design_terms(fit)
  by_name <- stats::setNames(lapply(terms, `[[`, "effects"), vapply(terms, `[[`, "", "term"))
  # Treatments: WT:left (reference), KO, right, KO:right.
  expect_identical(by_name, list(genotype = c("KO", "KO:right"),
                                 hemisphere = c("right", "KO:right"),
                                 `genotype:hemisphere` = "KO:right"))
})

test_that("a gene's LR equals the likelihood ratio of two fits made without the holding code", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  # Genotype varies between animals only, so the data without the genotype
  # column are the same summed table: that fit is the reduced model written
  # as data. Its LR against the full fit must be anova()'s statistic, with
  # df the number of genotype effects (main and interaction) on 4 unknowns
  # of a 1-transition curve. The random-effect SDs are fixed (the same in
  # every fit) so that the two reduced fits solve the same problem; they
  # start from different places, so they agree to the optimiser's
  # tolerance, not bit for bit. (Before the held model's curve priors
  # counted each distinct curve once, they differed by up to 1.4.)
  design <- nested_design()
  for (case in list(list(seed = 1, effect = 0), list(seed = 3, effect = 0),
                    list(seed = 1, effect = 1))) {
    counts <- wisp_simulate(design = design, n.genes = 1, n.bins = 30, seed = case$seed,
                            degrees = 1L, effect.prob = case$effect)
    settings <- list(random_sd = c(0.1, 0.05, 0.05))
    full <- without_design_warning(wisp(counts, model.settings = settings, verbose = FALSE))
    tests <- anova(full, terms = "genotype")
    without <- counts
    without$genotype <- NULL
    reduced <- without_design_warning(wisp(without, model.settings = settings, verbose = FALSE,
                                           degrees = full$degrees))
    by_two_fits <- 2 * (as.numeric(logLik(full)) - as.numeric(logLik(reduced)))
    label <- sprintf("seed %d, effects %d", case$seed, case$effect)
    expect_lt(abs(tests$statistic - by_two_fits), 0.01, label = label)
    expect_identical(tests$df, 8L, label = label)
    expect_identical(tests$df, as.integer(attr(logLik(full), "df") - attr(logLik(reduced), "df")),
                     label = label)
    # Genotype varies between animals: F(8, den.df), den.df at least the
    # animals' 6 - 2 df.
    expect_identical(tests$method, "F")
    expect_gte(tests$den.df, 4)
    expect_equal(tests$p.value, stats::pf(tests$statistic / 8, 8, tests$den.df, lower.tail = FALSE))
    if (case$effect == 1) expect_lt(tests$p.value, 1e-6) else expect_gt(tests$p.value, 1e-3)
    # With the SDs estimated, the reduced fit started from the full one is
    # at least as good as the one from scratch (its LR no larger), and close.
    full <- without_design_warning(wisp(counts, verbose = FALSE))
    reduced <- without_design_warning(wisp(without, verbose = FALSE, degrees = full$degrees))
    by_two_fits <- 2 * (as.numeric(logLik(full)) - as.numeric(logLik(reduced)))
    statistic <- anova(full, terms = "genotype")$statistic
    expect_lt(statistic, by_two_fits + 0.01, label = label)
    expect_gt(statistic, by_two_fits - 0.5, label = label)
  }
})

test_that("each test's note says why it has no statistic or why its statistic says nothing", {
  # Hand-made reduced-fit outcomes, one per case, in the order the rules
  # take them: failed; no effect estimated; not converged; a reduced fit
  # better than the fit (deviance -2.5); within the tolerance's noise
  # (-0.004); an ordinary LR.
  notes <- wispack:::gene_test_notes(
    failed = c(TRUE, FALSE, FALSE, FALSE, FALSE, FALSE),
    failure = c("boom", "", "", "", "", ""),
    df = c(2L, 0L, 2L, 2L, 2L, 2L),
    converged = c(FALSE, TRUE, FALSE, TRUE, TRUE, TRUE),
    stop = c("", "", "iteration limit", "", "", ""),
    deviance = c(NA, NA, 3, -2.5, -0.004, 7))
  expect_identical(notes[c(1:3, 5:6)],
                   c("the reduced fit failed: boom", "the fit estimates none of the term's effects",
                     "the reduced fit did not converge: iteration limit", "", ""))
  expect_match(notes[4], "reduced fit is better than the fit by 2.5 in deviance", fixed = TRUE)
  expect_match(notes[4], "statistic set to 0", fixed = TRUE)
})

test_that("p.adj is Benjamini-Hochberg across the genes of each term", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  counts <- wisp_simulate(design = nested_design(), n.genes = 5, n.bins = 30, seed = 8,
                          degrees = 1L, effect.prob = c(0, 0, 1, 0, 1))
  fit <- without_design_warning(wisp(counts, verbose = FALSE, max.fork = 2))
  tests <- anova(fit)
  expect_s3_class(tests, "wisp_gene_tests")
  expect_identical(nrow(tests), 15L)
  expect_identical(names(tests)[1:7],
                   c("gene", "term", "df", "statistic", "p.value", "method", "p.adj"))
  for (term in unique(tests$term)) {
    rows <- tests$term == term
    expect_identical(tests$gene[rows], paste0("gene", 1:5))
    expect_equal(tests$p.adj[rows], stats::p.adjust(tests$p.value[rows], method = "BH"))
  }
  # The changed genes are found with p-values far below what BH needs
  # (0.01 for the smallest of 5). Genotype varies between 6 animals, so its
  # F reference is far less sure than the chi-square (3e-5 against 9e-13
  # for gene 5).
  genotype <- tests[tests$term == "genotype", ]
  expect_true(all(genotype$p.value[c(3, 5)] < 1e-4))
  # One fork per gene gives the same reduced fits as one process.
  expect_identical(anova(fit, max.fork = 1)$statistic, tests$statistic)
  out <- capture.output(print(tests))
  expect_true(any(grepl("genotype: [0-9] of 5 genes called at FDR 0.05", out)))
})

test_that("the gene-level effect sizes are the curves' contrasts, by hand", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  counts <- wisp_simulate(design = nested_design(), n.genes = 2, n.bins = 30, seed = 6,
                          degrees = 1L, effect.prob = 1)
  fit <- without_design_warning(wisp(counts, verbose = FALSE))
  tests <- anova(fit, terms = c("genotype", "genotype:hemisphere"))
  # By hand from predict(): the population rate per treatment summed over bins.
  grid <- expand.grid(bin = 1:30, treatment = fit$treatment$names, species = c("gene1", "gene2"),
                      context = "context1", ran = "none", stringsAsFactors = FALSE)
  grid$rate <- predict(fit, newdata = grid, type = "response")
  total <- tapply(grid$rate, list(grid$species, grid$treatment), sum)
  for (g in c("gene1", "gene2")) {
    lfc <- log(total[g, c("KO", "KO:right")]) - log(total[g, c("WT:left", "right")])
    expected <- lfc[which.max(abs(lfc))]
    expect_equal(tests$log.fc[tests$term == "genotype" & tests$gene == g], unname(expected),
                 tolerance = 1e-6)
    interaction <- log(total[g, "KO:right"]) - log(total[g, "right"]) -
      log(total[g, "KO"]) + log(total[g, "WT:left"])
    expect_equal(tests$log.fc[tests$term == "genotype:hemisphere" & tests$gene == g],
                 unname(interaction), tolerance = 1e-6)
    # A one-transition curve is steepest at its transition point: found by
    # optimize() on the curve's slope, by central differences of predict().
    point_of <- function(object, t) {
      slope <- function(x) {
        at <- data.frame(bin = x + c(-1e-4, 1e-4), treatment = t, species = g,
                         context = "context1", ran = "none")
        abs(diff(predict(object, newdata = at, type = "link")))
      }
      stats::optimize(slope, c(1.5, 29.5), maximum = TRUE, tol = 1e-7)$maximum
    }
    shift_of <- function(object) {
      s <- c(point_of(object, "KO") - point_of(object, "WT:left"),
             point_of(object, "KO:right") - point_of(object, "right"))
      s[which.max(abs(s))]
    }
    row <- tests[tests$term == "genotype" & tests$gene == g, ]
    expect_equal(row$shift, shift_of(fit), tolerance = 1e-3)
    # The 95 % intervals: the delta method with gradients by central
    # differences of the by-hand quantities, and vcov(fit). The reported
    # contrast is the larger of two, so Bonferroni's level over both (tail
    # 0.025 / 2); genotype varies between animals, so a t quantile on the
    # contrast's Satterthwaite df: animals - genotypes, times (g'Vg / g'V_b
    # g)^2 with V_b the share of V from the animals' spread (V less the
    # fit's within-animal share).
    within <- wispack:::wisp_covariance_blocks(fit)
    spread_df <- length(unique(counts$ran)) - 2L
    log_fc_of <- function(object) {
      rate <- predict(object, newdata = grid[grid$species == g, ], type = "response")
      total <- tapply(rate, grid$treatment[grid$species == g], sum)
      lfc <- log(total[c("KO", "KO:right")]) - log(total[c("WT:left", "right")])
      lfc[which.max(abs(lfc))]
    }
    # A point moves linearly with its effects, so its differences can take
    # wide steps (the optimum's location is found to about 1e-5 bins).
    delta_interval <- function(of, names, relative.step = 1e-5, between = TRUE, candidates = 2L) {
      gradient <- vapply(names, function(name) {
        step <- relative.step * max(1, abs(fit$fitted.parameters[[name]]))
        up <- down <- fit
        up$fitted.parameters[[name]] <- up$fitted.parameters[[name]] + step
        down$fitted.parameters[[name]] <- down$fitted.parameters[[name]] - step
        (of(up) - of(down)) / (2 * step)
      }, 0)
      at <- match(names, names(fit$fitted.parameters))
      variance <- drop(gradient %*% stats::vcov(fit)[names, names] %*% gradient)
      variance_within <- drop(gradient %*% wispack:::covariance_rows(within, at, "within") %*%
                                gradient)
      df <- if (between) spread_df * (variance / (variance - variance_within))^2 else Inf
      of(fit) + c(-1, 1) * stats::qt(1 - 0.025 / candidates, df) * sqrt(variance)
    }
    mine <- grep(paste0("_", g, "_"), rownames(stats::vcov(fit)), value = TRUE)
    expect_equal(c(row$log.fc.lower, row$log.fc.upper),
                 unname(delta_interval(log_fc_of, mine)), tolerance = 1e-4)
    expect_equal(c(row$shift.lower, row$shift.upper),
                 unname(delta_interval(shift_of, grep("tpoint", mine, value = TRUE), 0.01)),
                 tolerance = 1e-3)
    # The interaction varies within animals too, and is one contrast: the
    # plain normal 95 % interval.
    interaction_of <- function(object) {
      rate <- predict(object, newdata = grid[grid$species == g, ], type = "response")
      total <- tapply(rate, grid$treatment[grid$species == g], sum)
      log(total[["KO:right"]]) - log(total[["right"]]) - log(total[["KO"]]) +
        log(total[["WT:left"]])
    }
    row <- tests[tests$term == "genotype:hemisphere" & tests$gene == g, ]
    expect_equal(c(row$log.fc.lower, row$log.fc.upper),
                 unname(delta_interval(interaction_of, mine, between = FALSE, candidates = 1L)),
                 tolerance = 1e-4)
  }
})

test_that("the bootstrap reference is per gene, never 0, and bad terms are named", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  counts <- wisp_simulate(design = nested_design(), n.genes = 2, n.bins = 30, seed = 2,
                          degrees = 1L, effect.prob = c(0, 1))
  fit <- without_design_warning(wisp(counts, verbose = FALSE))
  boot <- anova(fit, terms = "genotype", method = "bootstrap", bootstraps = 9, seed = 3)
  expect_identical(boot$method, rep("bootstrap", 2))
  expect_true(all(boot$p.value >= 1 / 10 & boot$p.value <= 1))
  # The changed gene's LR is beyond every replicate's: p = 1 / (B + 1).
  expect_identical(boot$p.value[2], 1 / 10)
  expect_identical(boot$statistic, anova(fit, terms = "genotype")$statistic)
  expect_error(anova(fit, terms = "genotpye"), class = "wisp_input_error",
               regexp = "\"genotpye\" is not a term of this design; its terms are \"genotype\"")
  expect_error(anova(fit, fit, terms = "genotype"), class = "wisp_input_error")
})

test_that("wisp() keeps the gene-level tests; print, summary and the genes plot show them", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  counts <- wisp_simulate(design = nested_design(), n.genes = 11, n.bins = 20, seed = 9,
                          degrees = 1L, effect.prob = c(rep(0, 8), 1, 1, 1))
  fit <- without_design_warning(wisp(counts, verbose = FALSE, max.fork = 2))
  expect_identical(fit$gene.tests, anova(fit))
  out <- capture.output(print(fit))
  expect_true(any(grepl("Gene-level tests (anova(fit)): genotype: ", out, fixed = TRUE)))
  # With more than 10 genes the summary leads with the gene-level table.
  out <- capture.output(summary(fit))
  expect_lt(grep("Gene-level tests", out)[1], grep("Fixed effects", out)[1])
  # Fewer genes: after the fixed effects.
  few <- without_design_warning(wisp(counts[counts$species %in% c("gene1", "gene9"), ],
                                     verbose = FALSE))
  out <- capture.output(summary(few))
  expect_gt(grep("Gene-level tests", out)[1], grep("Fixed effects", out)[1])
  # The figure: one tile per gene and term filled by its log fold change, a
  # dot on the called ones (by the table's own p.adj).
  built <- ggplot2::ggplot_build(plot(fit, type = "genes"))
  tiles <- built$plot$data
  expect_identical(nrow(tiles), nrow(fit$gene.tests))
  expect_equal(sort(tiles$log.fc), sort(fit$gene.tests$log.fc))
  # Drawn: one tile per row, red for a gain and blue for a loss.
  drawn <- built$data[[1]]
  expect_identical(nrow(drawn), nrow(fit$gene.tests))
  rgb <- grDevices::col2rgb(drawn$fill)
  big <- abs(tiles$log.fc) > 0.2
  expect_true(all((rgb["red", ] > rgb["blue", ])[big] == (tiles$log.fc[big] > 0)))
  dots <- built$plot$layers[[2]]$data
  called <- fit$gene.tests[fit$gene.tests$p.adj < 0.05, ]
  expect_setequal(paste(dots$gene, dots$term), paste(called$gene, called$term))
  expect_true(all(c("gene9", "gene10", "gene11") %in% called$gene[called$term == "genotype"]))
  # wisp(fit_only = TRUE) makes no statistics, so no gene-level tests.
  expect_null(without_design_warning(wisp(counts, verbose = FALSE, fit_only = TRUE))$gene.tests)
})

test_that("tests of between-animal terms with fewer animals than calibrated carry a caution", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  counts <- wisp_simulate(design = nested_design(3L), n.genes = 1, n.bins = 20, seed = 1,
                          degrees = 1L)
  fit <- without_design_warning(wisp(counts, verbose = FALSE))
  # The default F reference was measured from 2 animals per group.
  expect_null(attr(fit$gene.tests, "caution"))
  expect_true(any(grepl("F(df, den.df)", capture.output(print(fit$gene.tests)), fixed = TRUE)))
  tests <- anova(fit, method = "chisq")
  caution <- attr(tests, "caution")
  # Genotype varies between animals only; hemisphere and the interaction do not.
  expect_match(caution, "^genotype varies between animals and the smallest group has 3")
  expect_match(caution, "method = \"bootstrap\"", fixed = TRUE)
  expect_true(any(grepl("Caution: genotype varies", capture.output(print(tests)), fixed = TRUE)))
  # Within-animal terms only, the bootstrap, or 8 animals per group: no caution.
  expect_null(attr(anova(fit, terms = c("hemisphere", "genotype:hemisphere"), method = "chisq"),
                   "caution"))
  expect_null(attr(anova(fit, terms = "genotype", method = "bootstrap", bootstraps = 2),
                   "caution"))
  eight <- wisp_simulate(design = nested_design(8L), n.genes = 1, n.bins = 20, seed = 1,
                         degrees = 1L)
  expect_null(attr(anova(without_design_warning(wisp(eight, verbose = FALSE)), method = "chisq"),
                   "caution"))
  # Two animals per group: within what the F reference was measured at,
  # not the chi-square's; the caution shows in summary().
  two <- without_design_warning(wisp(wisp_simulate(design = nested_design(2L), n.genes = 1,
                                                   n.bins = 20, seed = 1, degrees = 1L),
                                     verbose = FALSE))
  expect_null(attr(two$gene.tests, "caution"))
  two$gene.tests <- anova(two, method = "chisq")
  expect_match(attr(two$gene.tests, "caution"), "smallest group has 2: in the calibration")
  expect_true(any(grepl("Caution: genotype varies", capture.output(summary(two)), fixed = TRUE)))
  # One animal per group is below both (the rule, on the design alone).
  one <- list(design = list(between = c(genotype = TRUE, hemisphere = FALSE),
                            groups = c(a1 = "WT", a2 = "KO")))
  genotype <- list(list(term = "genotype", factors = "genotype"))
  expect_match(wispack:::between_animal_caution(one, genotype, "F"),
               "^genotype varies between animals and the smallest group has 1: the F reference was measured from 2")
  expect_null(wispack:::between_animal_caution(one, genotype, "bootstrap"))
})

test_that("the F reference's denominator df is Fai and Cornelius's, by hand", {
  df <- wispack:::multivariate_satterthwaite_df
  # One effect: Satterthwaite's (animals - groups) (V / V_between)^2 =
  # 4 (3 / 2)^2.
  expect_equal(df(matrix(3), matrix(1), 4), 9)
  # Two directions: one with V = 2 of which 1 is the animals' (nu = 4 (2 /
  # 1)^2 = 16), one without their spread (nu = Inf). E = 16 / 14 + 1, nu =
  # 2 E / (E - 2) = 30; the same for any rotation of the two effects.
  expect_equal(df(diag(c(2, 1)), diag(c(1, 1)), 4), 30)
  rotation <- matrix(c(cos(0.7), sin(0.7), -sin(0.7), cos(0.7)), 2)
  expect_equal(df(rotation %*% diag(c(2, 1)) %*% t(rotation),
                  rotation %*% diag(c(1, 1)) %*% t(rotation), 4), 30)
  # Equal directions give their own df; no spread at all, the chi-square.
  expect_equal(df(diag(c(2, 2)), diag(c(1, 1)), 4), 16)
  expect_identical(df(diag(c(2, 1)), diag(c(2, 1)), 4), Inf)
  # A direction at nu <= 2 leaves F's mean undefined: the smallest nu,
  # 1 x (2 / 1.9)^2.
  expect_equal(df(diag(c(2, 1)), diag(c(0.1, 1)), 1), (2 / 1.9)^2)
})

test_that("method = \"F\" tests between-animal terms against F(df, den.df), the rest by chi-square", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  counts <- wisp_simulate(design = nested_design(3L), n.genes = 3, n.bins = 30, seed = 12,
                          degrees = 1L, effect.prob = c(0, 0, 1))
  fit <- without_design_warning(wisp(counts, verbose = FALSE, max.fork = 2))
  f <- anova(fit, method = "F")
  chisq <- anova(fit, method = "chisq")
  expect_identical(f$statistic, chisq$statistic)
  expect_equal(chisq$p.value, stats::pchisq(chisq$statistic, chisq$df, lower.tail = FALSE))
  genotype <- f$term == "genotype"
  expect_true(all(f$method[genotype] == "F"))
  expect_true(all(f$method[!genotype] == "chisq"))
  expect_true(all(is.infinite(f$den.df[!genotype])))
  expect_identical(f$p.value[!genotype], chisq$p.value[!genotype])
  # 6 animals in 2 groups: the animals' spread has 4 df, the least den.df.
  expect_true(all(is.finite(f$den.df[genotype]) & f$den.df[genotype] >= 4))
  expect_equal(f$p.value[genotype],
               stats::pf(f$statistic[genotype] / f$df[genotype], f$df[genotype],
                         f$den.df[genotype], lower.tail = FALSE))
  expect_equal(f$p.adj[genotype], stats::p.adjust(f$p.value[genotype], "BH"))
  # The changed gene is still found far below what BH needs.
  expect_lt(f$p.value[genotype][3], 1e-6)

  # Without the animals' spread (random effects fixed at 0) nothing is
  # estimated between animals: den.df is Inf and F is the chi-square.
  settings <- list(random_sd = c(0, 0, 0))
  flat <- without_design_warning(wisp(counts, verbose = FALSE, model.settings = settings,
                                      max.fork = 2))
  f0 <- anova(flat, method = "F", terms = "genotype")
  expect_true(all(is.infinite(f0$den.df)))
  expect_identical(f0$p.value, anova(flat, method = "chisq", terms = "genotype")$p.value)
})
