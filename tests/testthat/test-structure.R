# The structure step by the count likelihood (model.settings$structure =
# "likelihood", model vignette §12.6): each curve's number of transitions
# chosen by BIC, curve by curve. Expectations compare with the simulated
# truth, never with values the code under test computed.

# Four genes with 0, 1, 2 and 3 clearly separated transitions: steps of
# exp(U(0.8, 1.5)) between block rates, points about 25 bins apart, 8 cells
# per bin at 3-50 counts per cell.
separated_counts <- once(function() {
  wisp_simulate(n.contexts = 1, n.genes = 4, n.random = 3,
                fixed.effects = list(hemisphere = c("left", "right")), n.bins = 100,
                cells.per.bin = 8, degrees = matrix(0:3, 1, 4), seed = 21)
})

by_likelihood <- list(structure = "likelihood")

separated_fit <- once(function() {
  wisp(separated_counts(), model.settings = by_likelihood, fit_only = TRUE, verbose = FALSE,
       max.fork = 1)
})

test_that("curves with 0, 1, 2 and 3 clearly separated transitions are recovered with k", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  counts <- separated_counts()
  truth <- attr(counts, "truth")
  fit <- separated_fit()
  expect_identical(unname(fit$degrees[1, ]), as.integer(truth$degrees[1, ]))
  expect_identical(unname(fit$degrees[1, ]), 0:3)
  # The transition points land near the simulated ones (within 5 bins: the
  # animals' point warps move the realised mean a few bins).
  points <- truth$curves[truth$curves$component == "tpoint", ]
  found <- fit$change.points
  for (i in seq_len(nrow(points))) {
    at <- found$species == points$species[i] & found$treatment == points$treatment[i] &
      found$transition == points$block[i]
    expect_equal(sum(at), 1L)
    expect_lt(abs(found$bin[at] - points$value[i]), 5)
  }
  # Every candidate is in the result, the winner's margin with it, and each
  # curve's chosen degree is its smallest BIC.
  selection <- fit$structure.selection
  expect_true(all(c("context", "species", "degree", "BIC", "delta.BIC", "chosen", "margin",
                    "fixed") %in% names(selection)))
  for (gene in colnames(fit$degrees)) {
    one <- selection[selection$species == gene, ]
    expect_setequal(one$degree, 0:max(one$degree))
    expect_identical(one$degree[one$chosen], fit$degrees[1, gene])
    expect_false(any(one$fixed))
  }
  expect_true(all(selection$margin[selection$chosen] > 2))
})

test_that("the structure is the same for any worker count", {
  skip_on_cran()
  one <- separated_fit()
  two <- wisp(separated_counts(), model.settings = by_likelihood, fit_only = TRUE,
              verbose = FALSE, max.fork = 2)
  expect_identical(two$degrees, one$degrees)
  expect_identical(two$structure.selection, one$structure.selection)
  expect_identical(two$change.points, one$change.points)
})

test_that("degrees fixed by the user are respected, the rest is chosen", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  counts <- separated_counts()
  truth <- attr(counts, "truth")
  genes <- colnames(truth$degrees)
  # A list fixes gene2 at 2 (truth 1) and gene4 at 1 (truth 3); the others are chosen.
  fixed <- stats::setNames(list(stats::setNames(c(2, 1), genes[c(2, 4)])),
                           rownames(truth$degrees))
  fit <- wisp(counts, model.settings = by_likelihood, degrees = fixed, fit_only = TRUE,
              verbose = FALSE, max.fork = 1)
  expect_identical(unname(fit$degrees[1, ]), c(0L, 2L, 2L, 1L))
  selection <- fit$structure.selection
  expect_identical(selection$fixed[selection$chosen], c(FALSE, TRUE, FALSE, TRUE))
  expect_identical(sum(selection$species == genes[2]), 1L)
  # The same as a matrix with NA where the degree is chosen.
  as_matrix <- matrix(c(NA, 2, NA, 1), 1, 4, dimnames = dimnames(truth$degrees))
  again <- wisp(counts, model.settings = by_likelihood, degrees = as_matrix, fit_only = TRUE,
                verbose = FALSE, max.fork = 1)
  expect_identical(again$degrees, fit$degrees)
  # Fixing every curve also holds under the detector.
  all_fixed <- matrix(c(1L, 1L, 0L, 3L), 1, 4, dimnames = dimnames(truth$degrees))
  lro <- wisp(counts, model.settings = list(LRO_cost = "none"), degrees = all_fixed,
              fit_only = TRUE, verbose = FALSE, max.fork = 1)
  expect_identical(unname(lro$degrees), unname(all_fixed))
  # Partly fixed under the detector: the fixed curves as given.
  partly <- wisp(counts, model.settings = list(LRO_cost = "none"), degrees = fixed,
                 fit_only = TRUE, verbose = FALSE, max.fork = 1)
  expect_identical(unname(partly$degrees[1, c(2, 4)]), c(2L, 1L))
})

test_that("bad structure settings and degrees are input errors", {
  counts <- separated_counts()
  expect_error(wisp(counts, model.settings = list(structure = "bic"), verbose = FALSE),
               class = "wisp_input_error", regexp = "structure")
  expect_error(wisp(counts, model.settings = list(structure = "likelihood",
                                                  likelihood = "original"), verbose = FALSE),
               class = "wisp_input_error", regexp = "likelihood")
  expect_error(wisp(counts, degrees = list(nowhere = 1), verbose = FALSE),
               class = "wisp_input_error", regexp = "nowhere")
  expect_error(wisp(counts, degrees = list(context1 = c(nogene = 1)), verbose = FALSE),
               class = "wisp_input_error", regexp = "nogene")
  expect_error(wisp(counts, degrees = list(context1 = c(gene1 = 1.5)), verbose = FALSE),
               class = "wisp_input_error", regexp = "whole")
  expect_error(wisp(counts, degrees = list(context1 = c(gene1 = 1)), verbose = FALSE,
                    model.settings = list(likelihood = "original")),
               class = "wisp_input_error", regexp = "every curve or none")
  # More transitions than the bins have room for.
  expect_error(wisp(counts, degrees = list(context1 = c(gene1 = 20)), verbose = FALSE,
                    model.settings = by_likelihood),
               class = "wisp_input_error", regexp = "gene1")
})

test_that("summary() names the curves whose choice was close", {
  fit <- separated_fit()
  s <- summary(fit)
  expect_identical(s$structure$degree, unname(fit$degrees[1, ]))
  expect_false(any(s$structure$close))
  expect_output(print(s), "Transitions chosen by BIC for 4 curves\\.")
  # A close call (runner-up within 2 of the winner) is named with its runner-up.
  fit$structure.selection$margin[fit$structure.selection$species == "gene2"] <- 1.5
  s <- summary(fit)
  expect_identical(s$structure$close, c(FALSE, TRUE, FALSE, FALSE))
  expect_output(print(s), "1 choice close.*context1/gene2 1 \\[2, 1.5\\]")
})
