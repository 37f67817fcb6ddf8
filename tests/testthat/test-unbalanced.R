# Unbalanced designs (a combination of fixed-effect levels without data):
# the count likelihood fits what the data identify and reports the rest as
# NaN; the original likelihood and a missing reference are refused.

unbalanced_counts <- function(drop = c(genotype = "KO", age = "P28"), seed = 4) {
  design <- wisp_design(between = list(genotype = c("WT", "KO"), age = c("P12", "P28")),
                        animals.per.group = 3)
  counts <- wisp_simulate(design = design, n.genes = 2, n.bins = 40, degrees = 1L, seed = seed)
  gone <- counts$genotype == drop[["genotype"]] & counts$age == drop[["age"]]
  kept <- counts[!gone, ]
  attr(kept, "truth") <- attr(counts, "truth")
  kept
}

unbalanced_fit <- once(function() {
  expect_warning(
    fit <- wisp(unbalanced_counts(), model.settings = list(LRO_cost = "none"), verbose = FALSE),
    "genotype = KO, age = P28"
  )
  fit
})

test_that("a treatment without data leaves only the effects that need it unestimated", {
  counts <- unbalanced_counts()
  fit <- unbalanced_fit()
  expect_true(fit$fit.diagnostics$converged)
  beta <- fit$parameters$name[fit$parameters$role == "beta"]
  interaction <- grepl("KO:P28", beta, fixed = TRUE)
  expect_gt(sum(interaction), 0)
  expect_gt(sum(!interaction), 0)
  estimates <- fit$fitted.parameters[beta]
  expect_true(all(is.nan(estimates[interaction])))
  expect_true(all(is.finite(estimates[!interaction])))
  # The main effects are estimated from the three treatments with data: each
  # Wald estimate lies within 4 standard errors of the simulated truth.
  stats <- fit$stats$parameters
  main <- beta[!interaction]
  rows <- stats[match(main, stats$parameter), ]
  truth <- attr(counts, "truth")$effects[main]
  expect_false(anyNA(truth))
  expect_true(all(is.finite(rows$std.error)))
  expect_true(all(abs(rows$estimate - truth) < 4 * rows$std.error))
  # The interactions are not tested.
  expect_true(all(is.na(stats$p.value[match(beta[interaction], stats$parameter)])))
})

test_that("predict() refuses the curves of a treatment without data", {
  fit <- unbalanced_fit()
  grid <- data.frame(bin = c(5, 30), context = "context1", species = "gene1", genotype = "KO")
  expect_error(predict(fit, transform(grid, age = "P28")), class = "wisp_input_error",
               regexp = "gene1 in context1 under \"KO:P28\"")
  observed <- predict(fit, transform(grid, age = "P12"), type = "response")
  expect_true(all(is.finite(observed) & observed > 0))
})

test_that("a missing reference combination, or the original likelihood, is refused", {
  # Without WT at P12 (the reference) no effect has a baseline to differ from.
  counts <- unbalanced_counts(drop = c(genotype = "WT", age = "P12"))
  expect_error(wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE),
               class = "wisp_input_error", regexp = "reference \\(genotype = WT, age = P12\\)")
  # Choosing another reference by factor levels makes it fit.
  counts$genotype <- factor(counts$genotype, levels = c("KO", "WT"))
  expect_warning(fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE),
                 "genotype = WT, age = P12")
  expect_true(fit$fit.diagnostics$converged)
  expect_error(wisp(unbalanced_counts(), verbose = FALSE,
                    model.settings = list(likelihood = "original", LRO_cost = "none")),
               class = "wisp_input_error", regexp = "likelihood = \"original\"")
})
