# The count likelihood (the default): estimates that mean something, fits
# that reach their optimum, random effects that act. Expectations come from
# the simulator's truth, from the data themselves, or from an independent
# optimiser (stats::optim) run on the package's objective.

count_design <- function(nested) {
  if (nested) {
    wisp_design(between = list(genotype = c("KO", "WT")),
                within = list(hemisphere = c("left", "right")), animals.per.group = 3)
  } else {
    wisp_design(within = list(hemisphere = c("left", "right"), age = c("P12", "P18")),
                animals.per.group = 4)
  }
}

# The optimiser's coordinates of one gene, its objective and gradient there.
gene_objective <- function(fit, gene) {
  species <- match(gene, fit$grouping.variables$species.lvls) - 1L
  list(
    at = wispack:::count_objective_rust(fit$plan, species, NULL),
    value = function(x) wispack:::count_objective_rust(fit$plan, species, x)$value,
    gradient = function(x) wispack:::count_objective_rust(fit$plan, species, x)$gradient
  )
}

test_that("a gene with no count at all gets a rate near 0 and no significant effect", {
  counts <- wisp_simulate(n.genes = 3, n.random = 4, n.bins = 40, seed = 5)
  counts$count[counts$species == "gene3"] <- 0
  fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
  expect_true(fit$fit.diagnostics$converged)
  d <- fit$count.data.summed
  silent <- d$species == "gene3"
  # Rates per cell below 0.001 (the observed genes have tens per cell).
  expect_lt(max(d$pred[silent] / ifelse(is.na(d$exposure[silent]), 1, d$exposure[silent])), 1e-3)
  rates <- fit$parameters$species %in% "gene3" & fit$parameters$component == "Rt" &
    fit$parameters$role %in% c("baseline", "beta")
  expect_true(all(fit$fitted.parameters[rates] == 0))
  stats <- fit$stats$parameters
  gene3 <- stats$parameter %in% fit$parameters$name[fit$parameters$species %in% "gene3"]
  expect_false(any(stats$significance[gene3] %in% c("*", "**", "***")))
  # And none with the animals' bootstrap either: every replicate has no count.
  boot <- bs_batch(fit, 9, seed = 1, progress = FALSE)
  # (9 replicates are too few for Holm to reject anything: it warns so.)
  expect_warning(booted <- wisp_statistics(fit, boot = boot, level = 0.8)$stats$parameters,
                 class = "wisp_resolution_warning")
  expect_false(any(booted$significance[gene3] %in% c("*", "**", "***")))
})

test_that("a thinned gene's baseline is near its observed rate and inside its interval", {
  counts <- wisp_simulate(n.genes = 2, n.random = 4, n.bins = 30, degrees = 0L, seed = 8,
                          effect.prob = 0)
  set.seed(1)
  thin <- counts$species == "gene2"
  counts$count[thin] <- stats::rbinom(sum(thin), counts$count[thin], 0.01)
  fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
  expect_identical(unname(fit$degrees[, "gene2"]), 0L)
  observed <- with(counts[thin & counts$hemisphere == "left", ], sum(count) / length(count))
  name <- "baseline_context1_Rt_gene2_Tns/Blk1"
  estimate <- fit$fitted.parameters[[name]]
  # Within 25 % of the observed rate per cell (its own sampling error is ~15 %).
  expect_lt(abs(expm1(estimate) / observed - 1), 0.25)
  row <- fit$stats$parameters[fit$stats$parameters$parameter == name, ]
  expect_true(row$CI.low <= estimate && estimate <= row$CI.high)
  expect_true(row$CI.low <= log1p(observed) && log1p(observed) <= row$CI.high)
})

test_that("bins nobody measured create no transition", {
  counts <- wisp_simulate(n.genes = 2, n.random = 3, n.bins = 50, degrees = 0L, seed = 4)
  gap <- counts[!(counts$bin %in% 31:40), ]
  fit <- wisp(gap, verbose = FALSE)
  expect_identical(unname(fit$degrees[1, ]), c(0L, 0L))
  # Most bins unmeasured, in irregular runs (a common step would read as
  # positions and be refused): still flat.
  measured <- c(1:3, 9, 14:15, 22, 27:29, 36, 44:45, 50)
  sparse <- counts[counts$bin %in% measured, ]
  expect_identical(unname(suppressWarnings(wisp(sparse, verbose = FALSE))$degrees[1, ]),
                   c(0L, 0L))
})

test_that("the summed table holds each observed row once with its summed count, then the curves", {
  # Animals nested in genotype; one animal misses two bins, and one gene
  # has no count at all.
  counts <- wisp_simulate(design = count_design(nested = TRUE), n.genes = 2, n.bins = 20,
                          cells.per.bin = 3, seed = 11)
  first <- sort(unique(as.character(counts$ran)))[1]
  counts <- counts[!(counts$ran == first & counts$bin %in% c(5, 6)), ]
  counts$count[counts$species == "gene2"] <- 0
  fit <- suppressWarnings(wisp(counts, model.settings = list(LRO_cost = "none"),
                               verbose = FALSE, fit_only = TRUE))
  d <- fit$count.data.summed
  expect_identical(names(d), c("bin", "count", "exposure", "pred", "count.log", "pred.log",
                               "context", "species", "ran", "treatment"))
  observed <- d[d$ran != "none", ]
  # Each (animal, context, gene, bin, hemisphere) of the tokens, summed by
  # hand: the count and the number of cells (the exposure).
  by_hand <- stats::aggregate(list(count = counts$count, exposure = rep(1, nrow(counts))),
                              counts[c("ran", "context", "species", "bin", "hemisphere")], sum)
  expect_identical(nrow(observed), nrow(by_hand))
  key <- function(x) paste(x$ran, x$context, x$species, x$bin, x$count, x$exposure, sep = "\r")
  expect_identical(sort(key(observed)), sort(key(by_hand)))
  expect_false(any(observed$ran == first & observed$bin %in% c(5, 6)))
  # Each animal's rows carry its own genotype's treatments only.
  genotype <- vapply(split(as.character(counts$genotype), as.character(counts$ran)), unique, "")
  treatments <- lapply(split(observed$treatment, observed$ran), function(t) sort(unique(t)))
  expect_identical(names(treatments), names(genotype))
  expect_identical(unname(lengths(treatments)), rep(2L, length(genotype)))
  expect_identical(length(unique(vapply(treatments[genotype == "KO"], paste, "",
                                        collapse = ","))), 1L)
  expect_length(intersect(unlist(treatments[genotype == "KO"]),
                          unlist(treatments[genotype == "WT"])), 0L)
  # Population rows: one per context x gene x treatment x bin, nothing observed.
  population <- d[d$ran == "none", ]
  expect_identical(nrow(population), 1L * 2L * 4L * 20L)
  expect_true(all(is.na(population$count) & is.na(population$exposure) &
                    is.na(population$count.log)))
  expect_identical(sort(unique(population$treatment)), sort(fit$treatment$names))
  # The columns computed from the others, by hand: log(1 + count / exposure),
  # and the expected count exposure x (e^psi - 1) away from the rate's
  # smooth floor at 0 (which adds 1e-8 per unit of exposure there).
  expect_identical(observed$count.log, log1p(observed$count / observed$exposure))
  clear <- d$pred.log > 0.1
  exposure <- ifelse(is.na(d$exposure), 1, d$exposure)
  expect_lt(max(abs(d$pred[clear] - exposure[clear] * expm1(d$pred.log[clear])) /
                  exposure[clear]), 1e-7)
  expect_identical(d$pred.log, predict(fit))
  expect_identical(fit$gene.qc$note[2], "no counts: every count of the gene is 0")
})

test_that("param.idx0 lists each curve's parameters as selecting them one by one does", {
  fit <- small_fit()
  model <- list(parameters = fit$parameters, contexts = fit$grouping.variables$context.lvls,
                species = fit$grouping.variables$species.lvls)
  # The straightforward selection, curve by curve (quadratic in a panel).
  p <- fit$parameters
  index0 <- seq_len(nrow(p)) - 1L
  slow <- lapply(c(Rt = "Rt", tslope = "tslope", tpoint = "tpoint"), function(component) {
    lapply(stats::setNames(model$contexts, model$contexts), function(context) {
      lapply(stats::setNames(model$species, model$species), function(species) {
        index0[p$role != "warp" & p$component == component &
                 p$context %in% context & p$species %in% species]
      })
    })
  })
  expect_identical(fit$param.idx0$beta, slow)
  expect_identical(wispack:::parameter_indices(model)$beta, slow)
  # A gene of the layout without curves of some component keeps empty entries.
  model$species <- c(model$species, "absent")
  expect_identical(wispack:::parameter_indices(model)$beta$tpoint[[1]]$absent, integer(0))
})

test_that("exposure keeps cell density from reading as expression", {
  density <- c(rep(8L, 20), rep(4L, 20)) # cells per bin: half as many from bin 21
  counts <- wisp_simulate(n.genes = 2, n.random = 3, n.bins = 40, cells.per.bin = density,
                          degrees = 0L, effect.prob = 0, seed = 2)
  fit <- wisp(counts, verbose = FALSE)
  expect_identical(fit$exposure$rule, "tokens")
  expect_identical(unname(fit$degrees[1, ]), c(0L, 0L))
  # Per bin, without exposure, the density step is a transition.
  per_bin <- wisp(counts, verbose = FALSE, model.settings = list(exposure = "none"))
  expect_true(all(per_bin$degrees > 0))
  # Data that list only expressed genes cannot use per-token exposure.
  expressed <- counts[counts$count > 0, ]
  expect_error(wisp(expressed, verbose = FALSE, model.settings = list(exposure = "tokens")),
               class = "wisp_input_error", regexp = "zero")
  # A cell id gives the exposure back.
  with_cells <- wisp_simulate(n.genes = 2, n.random = 3, n.bins = 40, cells.per.bin = density,
                              degrees = 0L, effect.prob = 0, seed = 2, cell.ids = TRUE)
  by_cell <- wisp(with_cells[with_cells$count > 0, ], verbose = FALSE)
  expect_identical(by_cell$exposure$rule, "cells")
  expect_identical(unname(by_cell$degrees[1, ]), c(0L, 0L))
})

test_that("default fits reach their optimum: gradient criterion and no BFGS improvement", {
  skip_on_cran()
  for (k in 1:20) {
    nested <- k %% 2 == 0
    counts <- wisp_simulate(design = count_design(nested), n.genes = 2, n.bins = 30,
                            seed = 100 + k)
    fit <- wisp(counts, verbose = FALSE)
    f <- fit$fit.diagnostics
    label <- sprintf("data set %d (%s)", k, if (nested) "nested" else "crossed")
    expect_true(f$converged, label = label)
    expect_lte(f$max.gradient, 1e-4, label = label)
    for (gene in fit$grouping.variables$species.lvls) {
      o <- gene_objective(fit, gene)
      run <- stats::optim(o$at$x, o$value, o$gradient, method = "BFGS",
                          control = list(maxit = 2000, reltol = 1e-15))
      drop <- (o$at$value - run$value) / abs(o$at$value)
      expect_lt(drop, 1e-6, label = paste(label, gene))
    }
    # Slopes stay off their bound (the simulated transitions are smooth).
    slopes <- fit$parameters$role == "baseline" & fit$parameters$component == "tslope"
    expect_true(all(fit$fitted.parameters[slopes] < 0.99 * 8), label = label)
  }
})

test_that("each random effect moves the likelihood at 0 when animals differ", {
  counts <- wisp_simulate(design = count_design(TRUE), n.genes = 1, n.bins = 30, degrees = 1L,
                          random.sd = c(point = 0.3, rate = 0.2, slope = 0.3), seed = 7)
  fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
  o <- gene_objective(fit, "gene1")
  u <- grepl("^u\\[", o$at$names)
  expect_gt(sum(u), 0)
  at_zero <- o$at$x
  at_zero[u] <- 0
  gradient <- o$gradient(at_zero)[u]
  expect_true(all(abs(gradient) > 1e-3))
  # The analytic gradient there agrees with central differences.
  h <- 1e-6
  numeric <- vapply(which(u), function(i) {
    up <- at_zero
    down <- at_zero
    up[i] <- up[i] + h
    down[i] <- down[i] - h
    (o$value(up) - o$value(down)) / (2 * h)
  }, numeric(1))
  expect_equal(gradient, numeric, tolerance = 1e-5)
})

test_that("the fit's estimates track the simulated truth", {
  counts <- wisp_simulate(design = count_design(FALSE), n.genes = 3, n.bins = 40, seed = 31,
                          cells.per.bin = 8)
  truth <- attr(counts, "truth")
  fit <- wisp(counts, model.settings = list(LRO_cost = "none"), degrees = truth$degrees,
              verbose = FALSE)
  common <- intersect(names(truth$effects), names(coef(fit, "beta")))
  expect_gt(length(common), 20)
  error <- coef(fit, "beta")[common] - truth$effects[common]
  se <- sqrt(diag(vcov(fit, "beta")))[common]
  z <- error / se
  # Errors of the size the Wald standard errors say: none beyond 4 SEs, and
  # a root mean square near 1 (below 1.5 with these ~30 effects).
  expect_true(all(is.finite(z)))
  expect_lt(max(abs(z)), 4)
  expect_lt(sqrt(mean(z^2)), 1.5)
  sd <- fit$random.sd
  expect_true(all(sd >= 0 & sd < 1))
})
