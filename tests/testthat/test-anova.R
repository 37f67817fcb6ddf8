# Likelihood-ratio tests of nested fits: effects held at 0 (trtKO) and
# anova() with its parametric-bootstrap p-value.

anova_counts <- function(seed = 2) {
  wisp_simulate(n.genes = 1, n.bins = 30, seed = seed,
                fixed.effects = list(genotype = c("WT", "KO"), hemisphere = c("left", "right")))
}

# The negative-binomial log-likelihood of a fit's observed summed rows,
# computed here with dnbinom(): a row summing n cells has mean `pred` and
# size n / phi (model vignette §13.1). With the random effects fixed at 0 the
# fit's marginal likelihood is exactly this.
nb_loglik <- function(fit) {
  d <- fit$count.data.summed
  d <- d[d$ran != "none" & !is.na(d$count), ]
  phi <- fit$gamma.dispersion[cbind(d$species, d$context)]
  sum(stats::dnbinom(d$count, size = d$exposure / phi, mu = d$pred, log = TRUE))
}

test_that("a reduced model holds its effects at 0 and gives the reference's curve to every level", {
  counts <- anova_counts()
  full <- wisp(counts, verbose = FALSE)
  reduced <- wisp(counts, model.settings = list(trtKO = "genotype"), degrees = full$degrees,
                  verbose = FALSE)
  expect_setequal(reduced$held.effects, c("KO", "KO:right"))
  p <- reduced$parameters
  held <- p$role == "beta" & p$treatment %in% c("KO", "KO:right")
  expect_true(all(abs(reduced$fitted.parameters[held]) < 1e-5))
  expect_true(all(abs(reduced$fitted.parameters[p$role == "beta" & p$treatment == "right"]) > 1e-3))
  # Population curves of WT and KO coincide within each hemisphere (the
  # treatments are named by their non-reference levels: "KO" is KO, left).
  pop <- reduced$count.data.summed[reduced$count.data.summed$ran == "none", ]
  pairs <- list(c("WT:left", "KO"), c("right", "KO:right"))
  for (pair in pairs) {
    wt <- pop$pred.log[pop$treatment == pair[1]]
    ko <- pop$pred.log[pop$treatment == pair[2]]
    expect_length(wt, 30)
    expect_equal(ko, wt, tolerance = 1e-5)
  }
  full_pop <- full$count.data.summed[full$count.data.summed$ran == "none", ]
  expect_gt(max(abs(full_pop$pred.log[full_pop$treatment == "KO"] -
                    full_pop$pred.log[full_pop$treatment == "WT:left"])), 1e-3)
  # Held effects are not tested, and leave the likelihood's degrees of freedom.
  stats <- reduced$stats$parameters
  expect_true(all(is.na(stats$p.value[stats$parameter %in% p$name[held]])))
  expect_identical(attr(logLik(full), "df") - attr(logLik(reduced), "df"), sum(held))
  expect_lt(as.numeric(logLik(reduced)), as.numeric(logLik(full)))
})

test_that("anova()'s statistic matches the likelihood ratio computed with dnbinom", {
  counts <- anova_counts(5)
  settings <- list(random_sd = 0)
  full <- wisp(counts, model.settings = settings, verbose = FALSE)
  reduced <- wisp(counts, model.settings = c(settings, list(trtKO = "KO:right")),
                  degrees = full$degrees, verbose = FALSE)
  expect_equal(as.numeric(logLik(full)), nb_loglik(full), tolerance = 1e-9)
  expect_equal(as.numeric(logLik(reduced)), nb_loglik(reduced), tolerance = 1e-9)
  result <- anova(full, reduced, bootstraps = 9, seed = 3)
  expect_s3_class(result, "anova")
  expect_identical(rownames(result), c("reduced", "full"))
  expect_equal(result$LR[2], 2 * (nb_loglik(full) - nb_loglik(reduced)), tolerance = 1e-8)
  expect_identical(result$Df[2], attr(logLik(full), "df") - attr(logLik(reduced), "df"))
})

test_that("the bootstrap p-value is never 0, follows its replicates and any worker count", {
  counts <- anova_counts(7)
  full <- wisp(counts, verbose = FALSE)
  reduced <- wisp(counts, model.settings = list(trtKO = "hemisphere"), degrees = full$degrees,
                  verbose = FALSE)
  one <- anova(reduced, full, bootstraps = 11, seed = 4)
  star <- attr(one, "replicates")
  expect_length(star, 11)
  expect_false(anyNA(star))
  expect_equal(one[["Pr(>LR)"]][2], (1 + sum(star >= one$LR[2])) / (length(star) + 1))
  expect_gt(one[["Pr(>LR)"]][2], 0)
  skip_on_os("windows")
  two <- anova(reduced, full, bootstraps = 11, seed = 4, max.fork = 2)
  expect_identical(attr(two, "replicates"), star)
  other_seed <- anova(reduced, full, bootstraps = 11, seed = 5)
  expect_false(identical(attr(other_seed, "replicates"), star))
})

test_that("under a true null the bootstrap replicates look like the observed statistic", {
  # Data simulated without any genotype effect: the observed LR is one draw
  # from the null distribution that the replicates approximate, so its
  # p-value is not extreme (a loose check; the calibration of the test
  # itself belongs to a benchmark).
  counts <- wisp_simulate(n.genes = 1, n.bins = 30, seed = 11, effect.prob = 0,
                          fixed.effects = list(genotype = c("WT", "KO")))
  full <- wisp(counts, verbose = FALSE)
  reduced <- wisp(counts, model.settings = list(trtKO = "genotype"), degrees = full$degrees,
                  verbose = FALSE)
  result <- anova(reduced, full, bootstraps = 39, seed = 1)
  expect_gt(result[["Pr(>LR)"]][2], 0.01)
  # The fits maximise the likelihood plus weak priors, so a replicate's
  # statistic can fall a little below 0, never far.
  expect_true(all(attr(result, "replicates") > -1))
})

test_that("a reduced model that the data contradict still converges", {
  # Genotype (between animals) with effects on every rate, slope and point,
  # held at 0: with the solver's damping scaled by the held penalty's
  # curvature, these fits stopped after 200 Newton iterations.
  design <- wisp_design(between = list(genotype = c("KO", "WT")),
                        within = list(hemisphere = c("left", "right")), animals.per.group = 3)
  for (k in 2:3) {
    data <- wisp_simulate(design = design, n.genes = 4, n.bins = 40, cells.per.bin = 4,
                          degrees = 1L, effect.prob = c(0, 0, 1, 1), seed = 30000 + k)
    gene <- data[data$species == "gene3", ]
    degrees <- attr(data, "truth")$degrees[, "gene3", drop = FALSE]
    full <- wisp(gene, degrees = degrees, verbose = FALSE)
    reduced <- expect_silent(without_design_warning(
      wisp(gene, degrees = degrees, verbose = FALSE, model.settings = list(trtKO = "genotype"))))
    expect_true(reduced$fit.diagnostics$converged)
    expect_lt(as.numeric(logLik(reduced)), as.numeric(logLik(full)))
  }
})

test_that("anova() and trtKO refuse what they cannot do, saying why", {
  counts <- anova_counts()
  full <- wisp(counts, verbose = FALSE)
  expect_error(wisp(counts, model.settings = list(trtKO = "age"), verbose = FALSE),
               class = "wisp_input_error", regexp = "\"age\" is neither an effect")
  expect_error(wisp(counts, model.settings = list(trtKO = "KO", likelihood = "original"),
                    verbose = FALSE),
               class = "wisp_input_error", regexp = "needs the count likelihood")
  expect_error(anova(full, full, full), regexp = "exactly two")
  expect_error(anova(full, full), regexp = "and more")
  other <- wisp(anova_counts(3), model.settings = list(trtKO = "KO"), verbose = FALSE)
  expect_error(anova(other, full), regexp = "not nested")
  degrees <- full$degrees
  degrees[] <- degrees[] + 1L
  shifted <- wisp(counts, model.settings = list(trtKO = "KO"), degrees = degrees, verbose = FALSE)
  expect_error(anova(shifted, full), regexp = "different numbers of transitions")
})
