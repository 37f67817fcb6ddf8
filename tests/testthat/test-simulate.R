# wisp_simulate() and wisp_design(): the data follow the count model of the
# model vignette (checked against the plain-R reference in
# helper-reference-count.R and against NB moments), the design is what was
# asked for, and the truth holds every true value under the model's names.

nested_design <- function(animals.per.group = 3) {
  wisp_design(between = list(genotype = c("WT", "KO"), age = c("P12", "P18")),
              within = list(hemisphere = c("left", "right")),
              animals.per.group = animals.per.group)
}

# The animal curve of one truth$rates row, from truth$curves and
# truth$random.effects, by the reference implementation.
reference_animal_curve <- function(truth, row) {
  curve <- reference_count_curve_of(truth$curves, row$context, row$species, row$treatment)
  u <- c(point = 0, rate = 0, slope = 0)
  for (w in names(u)) {
    name <- paste0("wfactor_", w, "_", row$ran, "_X_", row$species)
    if (name %in% names(truth$random.effects)) u[[w]] <- truth$random.effects[[name]]
  }
  reference_count_warp(curve, u, truth$settings$n.bins)
}

# Design -----------------------------------------------------------------------

test_that("wisp_design() nests animals in the between-animal groups with labels that tell the group", {
  design <- nested_design(c(WT_P18 = 1, WT_P12 = 2, KO_P12 = 3, KO_P18 = 4))
  expect_s3_class(design, "wisp_design")
  expect_identical(design$groups$group, c("WT_P12", "WT_P18", "KO_P12", "KO_P18"))
  expect_identical(design$groups$animals, c(2L, 1L, 3L, 4L))
  animals <- design$animals
  expect_identical(nrow(animals), 10L)
  expect_false(anyDuplicated(animals$ran) > 0)
  expect_true(all(startsWith(animals$ran, paste0(animals$genotype, "_", animals$age, "_m"))))
  expect_identical(as.vector(table(animals$group)[design$groups$group]), c(2L, 1L, 3L, 4L))
  expect_identical(wisp_design(within = list(h = c("l", "r")), animals.per.group = 2)$animals$ran,
                   c("m1", "m2"))
})

test_that("each animal is in exactly one between-animal group and observed at every within level", {
  design <- nested_design(c(2, 3, 2, 4))
  counts <- wisp_simulate(design = design, n.genes = 2, n.bins = 20, cells.per.bin = 2,
                          seed = 3)
  expect_named(counts, c("count", "bin", "context", "species", "ran", "genotype", "age",
                         "hemisphere"))
  groups <- unique(counts[c("ran", "genotype", "age")])
  expect_identical(nrow(groups), 11L)          # one group per animal
  expect_identical(sort(groups$ran), sort(design$animals$ran))
  truth_groups <- attr(counts, "truth")$design$animals
  expect_identical(as.character(groups$genotype),
                   truth_groups$genotype[match(groups$ran, truth_groups$ran)])
  expect_identical(as.character(groups$age), truth_groups$age[match(groups$ran, truth_groups$ran)])
  # factors with the levels in the order given, the first the reference
  expect_identical(levels(counts$genotype), c("WT", "KO"))
  within <- table(unique(counts[c("ran", "hemisphere")])$ran)
  expect_true(all(within == 2))                # both hemispheres of every animal
  per_group <- table(groups$genotype, groups$age)
  expect_identical(as.vector(per_group[cbind(c("WT", "WT", "KO", "KO"), c("P12", "P18", "P12", "P18"))]),
                   c(2L, 3L, 2L, 4L))
  # every cell key (animal, hemisphere, bin) has the same cells for both genes
  cells <- table(counts$ran, counts$hemisphere, counts$bin, counts$species)
  expect_identical(cells[, , , "gene1"], cells[, , , "gene2"])
  expect_true(all(cells == 2))
})

test_that("without a design every animal is crossed with every treatment, as before", {
  counts <- wisp_simulate(n.genes = 2, n.random = 3, n.bins = 30,
                          fixed.effects = list(hemisphere = c("left", "right"),
                                               age = c(7, 12, 18)), seed = 4)
  expect_named(counts, c("count", "bin", "context", "species", "ran", "hemisphere", "age"))
  expect_identical(levels(counts$age), c("7", "12", "18")) # a factor, in the order given
  expect_true(all(counts$count >= 0 & counts$count == round(counts$count)))
  # 2 genes x 3 mice x 6 treatments x 30 bins x 5 cells
  expect_identical(nrow(counts), 2L * 3L * 6L * 30L * 5L)
  expect_identical(sort(unique(counts$ran)), c("mouse1", "mouse2", "mouse3"))
  expect_true(all(table(unique(counts[c("ran", "hemisphere", "age")])$ran) == 6))
})

# Truth ------------------------------------------------------------------------------

test_that("the truth holds every true value under the model's parameter names", {
  counts <- wisp_simulate(design = nested_design(2), n.contexts = 2, n.genes = 3, n.bins = 30,
                          seed = 5)
  truth <- attr(counts, "truth")
  expect_named(truth, c("degrees", "parameters", "effects", "random.effects", "sd", "sd.matrix",
                        "dispersion", "dispersion.matrix", "curves", "rates", "design",
                        "settings"))
  model <- wispack:::model_build(counts, c("genotype", "age", "hemisphere"), NULL, truth$degrees,
                                 bins = 30)
  n_model <- length(model$parameter_names)
  expect_identical(names(truth$parameters)[seq_len(n_model)], model$parameter_names)
  expect_identical(names(truth$random.effects),
                   model$parameter_names[model$parameters$role == "warp"])
  expect_identical(names(truth$effects), model$parameter_names[model$parameters$role == "beta"])
  expect_identical(names(truth$sd), paste0("sd_", c("point", "rate", "slope"), "_gene",
                                           rep(1:3, each = 3)))
  expect_identical(names(truth$dispersion),
                   paste0("dispersion_context", 1:2, "_gene", rep(1:3, each = 2)))
  expect_identical(names(truth$parameters)[-seq_len(n_model)],
                   c(names(truth$sd), names(truth$dispersion)))
  expect_identical(unname(truth$dispersion), as.vector(truth$dispersion.matrix))
  expect_identical(unname(truth$sd), as.vector(t(truth$sd.matrix)))
  expect_identical(unname(truth$sd.matrix[1, ]), c(0.15, 0.1, 0.15))
  expect_identical(dim(truth$degrees), c(2L, 3L))
  # an animal's random effects are named after it and its gene
  expect_true(all(c("wfactor_point_WT_P12_m1_X_gene1", "wfactor_slope_KO_P18_m2_X_gene3") %in%
                    names(truth$random.effects)))
})

test_that("the population curves are W beta for an independently built weight matrix", {
  counts <- wisp_simulate(design = nested_design(2), n.genes = 2, n.bins = 40, degrees = 2L,
                          seed = 6)
  truth <- attr(counts, "truth")
  levels <- list(genotype = c("WT", "KO"), age = c("P12", "P18"),
                 hemisphere = c("left", "right"))
  W <- reference_weights(levels)
  # the reference treatment is named by its levels: WT, P12, left
  rownames(W)[1] <- colnames(W)[1] <- "WT:P12:left"
  treatments <- rownames(W)
  beta_name <- function(component, gene, block, treatment) {
    if (treatment == "WT:P12:left") {
      sprintf("baseline_context1_%s_%s_Tns/Blk%d", component, gene, block)
    } else {
      sprintf("beta_%s_context1_%s_%s_X_Tns/Blk%d", component, gene, treatment, block)
    }
  }
  curves <- truth$curves
  for (i in seq_len(nrow(curves))) {
    beta <- vapply(treatments, function(t) {
      truth$parameters[[beta_name(curves$component[i], curves$species[i], curves$block[i], t)]]
    }, numeric(1))
    expect_equal(curves$value[i], sum(W[curves$treatment[i], ] * beta), tolerance = 1e-12)
  }
  expect_setequal(unique(curves$treatment), treatments)
})

test_that("the true log rates are the reference model's population and animal curves", {
  counts <- wisp_simulate(design = nested_design(2), n.genes = 3, n.bins = 30, degrees = 2L,
                          random.sd = c(point = 0.4, rate = 0.3, slope = 0.4), seed = 7)
  truth <- attr(counts, "truth")
  rates <- truth$rates
  expect_identical(nrow(rates), 8L * 2L * 3L * 30L)   # animals x hemispheres x genes x bins
  set.seed(70)
  for (i in sample(nrow(rates), 150)) {
    row <- rates[i, ]
    population <- reference_count_curve_of(truth$curves, row$context, row$species, row$treatment)
    expect_equal(row$log.rate.population, reference_count_psi(row$bin, population),
                 tolerance = 1e-12)
    animal <- reference_animal_curve(truth, row)
    expect_equal(row$log.rate, reference_count_psi(row$bin, animal), tolerance = 1e-12)
    expect_equal(row$rate, reference_count_rate(row$log.rate), tolerance = 1e-12)
  }
})

test_that("labels that sort out of numeric order keep their own degrees and curves", {
  degrees <- outer(1:11, 1:10, function(i, j) as.integer((i + j) %% 3))
  counts <- wisp_simulate(n.contexts = 11, n.genes = 10, n.random = 2, n.bins = 20,
                          cells.per.bin = 1, degrees = degrees, seed = 17)
  truth <- attr(counts, "truth")
  expect_identical(unname(truth$degrees), degrees)
  transitions <- stats::aggregate(block ~ context + species,
                                  data = truth$curves[truth$curves$component == "tpoint", ],
                                  FUN = function(b) length(unique(b)))
  expected <- degrees[cbind(match(transitions$context, rownames(truth$degrees)),
                            match(transitions$species, colnames(truth$degrees)))]
  expect_identical(transitions$block, expected)
  expect_identical(nrow(transitions), sum(degrees > 0))
  set.seed(171)
  rates <- truth$rates
  for (i in sample(nrow(rates), 40)) {
    row <- rates[i, ]
    expect_equal(row$log.rate, reference_count_psi(row$bin, reference_animal_curve(truth, row)),
                 tolerance = 1e-12)
  }
})

test_that("summed counts match the true rates: standardised residuals have mean 0 and SD 1", {
  counts <- wisp_simulate(design = nested_design(2), n.genes = 3, n.bins = 30,
                          dispersion = matrix(c(0, 0.1, 0.5), 1), seed = 8)
  truth <- attr(counts, "truth")
  sums <- stats::aggregate(count ~ ran + context + species + hemisphere + bin, data = counts,
                           FUN = sum)
  rates <- truth$rates
  at <- match(do.call(paste, sums[c("ran", "context", "species", "hemisphere", "bin")]),
              do.call(paste, rates[c("ran", "context", "species", "hemisphere", "bin")]))
  expect_false(anyNA(at))
  exposure <- rates$cells[at]
  mean <- exposure * rates$rate[at]
  phi <- truth$dispersion.matrix[cbind(sums$context, sums$species)]
  z <- (sums$count - mean) / sqrt(mean + phi * mean^2 / exposure)
  for (gene in unique(sums$species)) {
    mine <- z[sums$species == gene]
    # 480 sums per gene: SE of the mean 0.046, of the SD about 0.035
    expect_lt(abs(mean(mine)), 0.2)
    expect_lt(abs(stats::sd(mine) - 1), 0.15)
  }
})

test_that("a cell's count has the NB mean and variance at its rate", {
  # Flat curves, no effects, no random effects: every cell of a gene has one rate.
  design <- wisp_design(within = list(h = c("l", "r")), animals.per.group = 4)
  counts <- wisp_simulate(design = design, n.genes = 3, n.bins = 10, cells.per.bin = 250,
                          degrees = 0L, effect.prob = 0,
                          random.sd = c(point = 0, rate = 0, slope = 0),
                          dispersion = matrix(c(0, 0.3, 1.5), 1), seed = 9)
  truth <- attr(counts, "truth")
  for (gene in c("gene1", "gene2", "gene3")) {
    y <- counts$count[counts$species == gene]
    rates <- unique(truth$rates$rate[truth$rates$species == gene & truth$rates$h == "l"])
    expect_length(rates, 1L)
    phi <- truth$dispersion[[paste0("dispersion_context1_", gene)]]
    # the right-hemisphere rate differs only through the treatment effect, which is 0 here
    expect_identical(unique(truth$rates$rate[truth$rates$species == gene]), rates)
    n <- length(y)
    expect_identical(n, 4L * 2L * 10L * 250L)
    variance <- rates + phi * rates^2
    expect_lt(abs(mean(y) - rates), 4 * sqrt(variance / n))
    m4 <- mean((y - mean(y))^4)
    se_variance <- sqrt((m4 - stats::var(y)^2) / n)
    expect_lt(abs(stats::var(y) - variance), 4 * se_variance)
  }
})

test_that("the SD of drawn random effects over many animals is near random.sd", {
  design <- wisp_design(between = list(g = c("a", "b")), animals.per.group = 200)
  sd <- c(point = 0.3, rate = 0.2, slope = 0.1)
  counts <- wisp_simulate(design = design, n.genes = 2, n.bins = 40, cells.per.bin = 1,
                          degrees = 1L, random.sd = sd, seed = 10)
  truth <- attr(counts, "truth")
  u <- truth$random.effects
  for (w in names(sd)) {
    drawn <- u[startsWith(names(u), paste0("wfactor_", w, "_"))]
    expect_length(drawn, 800L)
    expect_lt(abs(stats::sd(drawn) - sd[[w]]), 4 * sd[[w]] / sqrt(2 * length(drawn)))
    expect_lt(abs(mean(drawn)), 4 * sd[[w]] / sqrt(length(drawn)))
  }
  expect_identical(unname(truth$sd.matrix["gene2", ]), unname(sd))
})

test_that("random.sd per gene and 0 switch warps off gene by gene", {
  sd <- rbind(c(point = 0, rate = 0.2, slope = 0), c(point = 0.1, rate = 0, slope = 0.3))
  counts <- wisp_simulate(n.genes = 2, n.random = 5, n.bins = 20, random.sd = sd, seed = 11)
  u <- attr(counts, "truth")$random.effects
  expect_true(all(u[grepl("^wfactor_(point|slope)_.*_X_gene1$", names(u))] == 0))
  expect_true(all(u[grepl("^wfactor_rate_.*_X_gene1$", names(u))] != 0))
  expect_true(all(u[grepl("^wfactor_rate_.*_X_gene2$", names(u))] == 0))
})

test_that("a single animal has no random effects and SDs of 0", {
  counts <- wisp_simulate(n.genes = 2, n.random = 1, n.bins = 20, seed = 12)
  truth <- attr(counts, "truth")
  expect_length(truth$random.effects, 0L)
  expect_true(all(truth$sd == 0))
  expect_equal(truth$rates$log.rate, truth$rates$log.rate.population)
})

test_that("the truth is valid: ordered, spaced points, slopes in range, positive rates", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  for (seed in 1:8) {
    bins <- 40
    counts <- wisp_simulate(design = nested_design(2), n.genes = 3, n.bins = bins,
                            degrees = 2L, effect.size = 0.8, slope.effect = 0.6,
                            point.effect = 3, effect.prob = 0.8,
                            random.sd = c(point = 0.3, rate = 0.2, slope = 0.3), seed = seed)
    truth <- attr(counts, "truth")
    gap <- max(2, bins / (4 * 3))
    for (key in split(truth$curves, truth$curves[c("species", "treatment")], drop = TRUE)) {
      curve <- reference_count_curve_of(key, key$context[1], key$species[1], key$treatment[1])
      expect_true(all(curve$R >= log1p(0.25)))
      expect_true(all(curve$s >= 0.1 & curve$s <= 4))
      expect_true(all(diff(c(0.5, curve$p, bins + 0.5)) >= gap))
    }
    rows <- unique(truth$rates[c("ran", "context", "species", "treatment")])
    for (i in seq_len(nrow(rows))) {
      animal <- reference_animal_curve(truth, rows[i, ])
      expect_true(all(diff(c(0.5, animal$p, bins + 0.5)) >= gap / 2))
      expect_true(all(animal$s > 0 & animal$s < 8) && all(animal$R > 0))
    }
  }
})

# Effects ------------------------------------------------------------------------------

test_that("rate, slope and point effects are drawn with the asked sizes, and effect.prob = 0 gives null genes", {
  counts <- wisp_simulate(design = nested_design(2), n.genes = 3, n.bins = 50, degrees = 1L,
                          effect.size = 0.4, slope.effect = 0.5, point.effect = 2,
                          effect.prob = c(0.9, 0.9, 0), seed = 13)
  truth <- attr(counts, "truth")
  effects <- truth$effects
  component <- sub("^beta_([A-Za-z]+)_.*$", "\\1", names(effects))
  null_gene <- grepl("_gene3_", names(effects))
  expect_true(all(effects[null_gene] == 0))
  expect_true(all(abs(effects[!null_gene & component == "Rt"]) %in% c(0, 0.4)))
  expect_true(all(abs(effects[!null_gene & component == "tpoint"]) %in% c(0, 2)))
  slopes <- effects[!null_gene & component == "tslope"]
  expect_gt(sum(slopes != 0), 0)
  # a slope effect is half the baseline slope of its transition
  for (name in names(slopes)[slopes != 0]) {
    gene <- sub("^beta_tslope_context1_(gene[0-9]+)_.*$", "\\1", name)
    baseline <- truth$parameters[[sprintf("baseline_context1_tslope_%s_Tns/Blk1", gene)]]
    expect_equal(abs(slopes[[name]]), 0.5 * baseline)
  }
  none <- wisp_simulate(n.genes = 2, n.bins = 30, effect.prob = 0, seed = 13)
  expect_true(all(attr(none, "truth")$effects == 0))
})

test_that("rate.range sets the first block rate: sparse genes have the asked counts per cell", {
  # Flat curves (no transition), no random warps, Poisson counts: every cell
  # of gene g has mean expm1(R_1), R_1 the gene's drawn first block rate on
  # the log(1 + rate) scale, which must lie in log1p(rate.range).
  sparse <- wisp_simulate(n.genes = 4, n.bins = 50, cells.per.bin = 20, degrees = 0L,
                          dispersion = 0, effect.prob = 0, rate.range = c(0.05, 0.1),
                          random.sd = c(point = 0, rate = 0, slope = 0), seed = 21)
  truth <- attr(sparse, "truth")$parameters
  first <- expm1(unlist(truth[sprintf("baseline_context1_Rt_gene%d_Tns/Blk1", 1:4)]))
  names(first) <- sprintf("gene%d", 1:4)
  expect_true(all(first >= 0.05 & first <= 0.1))
  cells <- tapply(sparse$count, sparse$species, length)
  observed <- tapply(sparse$count, sparse$species, mean)
  # 3 animals x 2 hemispheres x 50 bins x 20 cells; 4 Poisson SEs of a mean.
  expect_equal(as.vector(cells[names(first)]), rep(6000, 4))
  expect_true(all(abs(observed[names(first)] - first) < 4 * sqrt(first / 6000)))
  expect_gt(mean(sparse$count == 0), 0.85)
  # With transitions and small effects, every treatment's rates stay at or
  # above the floor, log1p(0.05 / 2).
  stepped <- wisp_simulate(n.genes = 3, n.bins = 40, degrees = 2L, effect.size = 0.02,
                           effect.prob = 0.5, rate.range = c(0.05, 0.3), seed = 4)
  for (key in split(attr(stepped, "truth")$curves,
                    attr(stepped, "truth")$curves[c("species", "treatment")], drop = TRUE)) {
    curve <- reference_count_curve_of(key, key$context[1], key$species[1], key$treatment[1])
    expect_true(all(curve$R >= log1p(0.025)))
    expect_true(all(expm1(curve$R) <= 50))
  }
  expect_error(wisp_simulate(rate.range = c(0, 1)), class = "wisp_input_error",
               regexp = "rate.range")
  expect_error(wisp_simulate(rate.range = c(2, 1)), class = "wisp_input_error",
               regexp = "rate.range")
  expect_error(wisp_simulate(rate.range = c(1, 60)), class = "wisp_input_error",
               regexp = "rate.range")
})

test_that("point.positions puts every baseline point where it is asked, or says why not", {
  # 40 bins on 0.5..40.5: fraction 0.2 is bin 8.5, 0.42 and 0.58 are 17.3 and 23.7.
  near_end <- wisp_simulate(n.genes = 3, n.bins = 40, degrees = 1L, point.positions = 0.2,
                            seed = 5)
  truth <- attr(near_end, "truth")$parameters
  points <- truth[grepl("^baseline_context1_tpoint_gene[0-9]+_Tns/Blk1$", names(truth))]
  expect_length(points, 3)
  expect_equal(unname(points), rep(8.5, 3))
  close <- wisp_simulate(n.genes = 2, n.bins = 40, degrees = 2L,
                         point.positions = c(0.42, 0.58), seed = 5)
  truth <- attr(close, "truth")$parameters
  for (gene in c("gene1", "gene2")) {
    at <- truth[sprintf("baseline_context1_tpoint_%s_Tns/Blk%d", gene, 1:2)]
    expect_equal(unname(at), c(17.3, 23.7))
  }
  expect_error(wisp_simulate(n.bins = 40, degrees = 1L, point.positions = 1.2),
               class = "wisp_input_error", regexp = "increasing fractions of the axis")
  expect_error(wisp_simulate(n.bins = 40, degrees = 1L, point.positions = c(0.6, 0.4)),
               class = "wisp_input_error", regexp = "increasing fractions")
  expect_error(wisp_simulate(n.bins = 40, degrees = 2L, point.positions = 0.3),
               class = "wisp_input_error", regexp = "has 1 position but some curves have 2")
  # 40 bins and one transition keep points 5 bins from the edges: 0.05 is 2.
  expect_error(wisp_simulate(n.bins = 40, degrees = 1L, point.positions = 0.05),
               class = "wisp_input_error", regexp = "closer than 5 bins")
})

# Cells, exposure and missing data -------------------------------------------------------

test_that("cells per bin can vary along the axis or be drawn", {
  density <- rep(c(8, 4), each = 10)
  counts <- wisp_simulate(n.genes = 2, n.random = 2, n.bins = 20, cells.per.bin = density,
                          seed = 14)
  per_key <- table(counts$bin[counts$species == "gene1" & counts$ran == "mouse1" &
                                counts$hemisphere == "left"])
  expect_identical(as.vector(per_key), as.integer(density))
  rates <- attr(counts, "truth")$rates
  expect_identical(rates$cells, as.integer(density[rates$bin]))

  drawn <- wisp_simulate(n.genes = 2, n.random = 2, n.bins = 20,
                         cells.per.bin = function(n) stats::rpois(n, 3), seed = 14)
  cells <- attr(drawn, "truth")$rates$cells
  expect_gt(length(unique(cells)), 3)
  expect_equal(nrow(drawn), sum(cells))    # one token per cell and gene, summed over genes
  expect_identical(drawn, wisp_simulate(n.genes = 2, n.random = 2, n.bins = 20,
                                        cells.per.bin = function(n) stats::rpois(n, 3),
                                        seed = 14))
})

test_that("dropout removes bins, cell keys and cells, and cell ids are unique per cell", {
  counts <- wisp_simulate(n.contexts = 2, n.genes = 3, n.random = 3, n.bins = 40,
                          cells.per.bin = 6,
                          dropout = list(bins = list(context1 = 31:40), keys = 0.2, cells = 0.3),
                          cell.ids = TRUE, seed = 15)
  expect_named(counts, c("count", "bin", "context", "species", "ran", "hemisphere", "cell"))
  expect_false(any(counts$context == "context1" & counts$bin > 30))
  expect_true(any(counts$context == "context2" & counts$bin > 30))
  rates <- attr(counts, "truth")$rates
  expect_true(all(rates$cells[rates$context == "context1" & rates$bin > 30] == 0))
  # each cell has exactly one token per gene, all in one cell key
  per_cell <- table(counts$cell)
  expect_true(all(per_cell == 3))
  keys <- unique(counts[c("cell", "ran", "context", "hemisphere", "bin")])
  expect_false(anyDuplicated(keys$cell) > 0)
  # missing keys: about 20 % of the keys outside the dropped bins; cells: about 70 % kept
  kept <- rates[rates$species == "gene1" & !(rates$context == "context1" & rates$bin > 30), ]
  missing <- mean(kept$cells == 0)
  expect_gt(missing, 0.2 - 0.05)
  expect_lt(missing, 0.2 + 0.08)   # a few more keys lose all 6 cells (0.3^6)
  expect_lt(abs(mean(kept$cells[kept$cells > 0]) - 6 * 0.7), 0.2)
  # cell counts in the data agree with the exposure in the truth
  cells <- stats::aggregate(cell ~ ran + context + hemisphere + bin,
                            data = counts[counts$species == "gene1", ], FUN = length)
  at <- match(do.call(paste, cells[c("ran", "context", "hemisphere", "bin")]),
              do.call(paste, kept[c("ran", "context", "hemisphere", "bin")]))
  expect_identical(cells$cell, kept$cells[at])
})

# Reproducibility, speed, errors ----------------------------------------------------------

test_that("the simulator leaves the caller's random stream alone and is reproducible", {
  set.seed(1)
  before <- runif(1)
  set.seed(1)
  first <- wisp_simulate(design = nested_design(2), n.genes = 2, n.bins = 20, seed = 2)
  after <- runif(1)
  expect_identical(before, after)
  expect_identical(first, wisp_simulate(design = nested_design(2), n.genes = 2, n.bins = 20,
                                        seed = 2))
  expect_false(identical(first$count, wisp_simulate(design = nested_design(2), n.genes = 2,
                                                    n.bins = 20, seed = 3)$count))
})

test_that("a 6-gene, 12-animal 2 x 2 design with 50 bins simulates in well under a second", {
  skip_if(under_valgrind())
  design <- wisp_design(between = list(genotype = c("WT", "KO")),
                        within = list(hemisphere = c("left", "right")), animals.per.group = 6)
  wisp_simulate(design = design, n.genes = 6, n.bins = 50, seed = 1)   # warm up
  seconds <- system.time(
    counts <- wisp_simulate(design = design, n.genes = 6, n.bins = 50, cells.per.bin = 5,
                            seed = 2)
  )[["elapsed"]]
  expect_identical(nrow(counts), 12L * 2L * 50L * 5L * 6L)
  expect_lt(seconds, 0.5)
})

test_that("the simulator refuses bad arguments", {
  expect_error(wisp_simulate(n.genes = 0), class = "wisp_input_error", regexp = "n.genes")
  expect_error(wisp_simulate(fixed.effects = list(a = "x")), class = "wisp_input_error",
               regexp = "fixed.effects")
  expect_error(wisp_simulate(fixed.effects = list(bin = c("a", "b"))),
               class = "wisp_input_error", regexp = "bin")
  expect_error(wisp_simulate(degrees = matrix(1, 2, 2)), class = "wisp_input_error",
               regexp = "degrees")
  expect_error(wisp_simulate(time.series = "age"), class = "wisp_input_error",
               regexp = "time.series")
  expect_error(wisp_simulate(design = nested_design(), n.random = 4),
               class = "wisp_input_error", regexp = "design")
  expect_error(wisp_simulate(design = list(between = list())), class = "wisp_input_error",
               regexp = "wisp_design")
  expect_error(wisp_simulate(random.sd = c(0.1, 0.1, 0.1)), class = "wisp_input_error",
               regexp = "random.sd")
  expect_error(wisp_simulate(dispersion = matrix(0.1, 2, 2)), class = "wisp_input_error",
               regexp = "dispersion")
  expect_error(wisp_simulate(cells.per.bin = c(1, 2)), class = "wisp_input_error",
               regexp = "cells.per.bin")
  expect_error(wisp_simulate(cells.per.bin = function(n) 1), class = "wisp_input_error",
               regexp = "cells.per.bin")
  expect_error(wisp_simulate(dropout = list(rows = 0.1)), class = "wisp_input_error",
               regexp = "dropout")
  expect_error(wisp_simulate(dropout = list(bins = 0)), class = "wisp_input_error",
               regexp = "dropout")
  expect_error(wisp_simulate(effect.prob = c(0.5, 0.5)), class = "wisp_input_error",
               regexp = "effect.prob")
  expect_error(wisp_simulate(cell.ids = NA), class = "wisp_input_error", regexp = "cell.ids")
  expect_error(wisp_simulate(n.bins = 10, degrees = 5L), class = "wisp_input_error",
               regexp = "n.bins")
  expect_error(wisp_design(between = list(g = c("a", "b")), within = list(g = c("a", "b"))),
               class = "wisp_input_error", regexp = "both")
  expect_error(wisp_design(), class = "wisp_input_error", regexp = "at least one factor")
  expect_error(wisp_design(between = list(g = c("a", "b")), animals.per.group = c(1, 2, 3)),
               class = "wisp_input_error", regexp = "animals.per.group")
  expect_error(wisp_design(between = list(g = c("a", "b")), animals.per.group = c(a = 1, c = 2)),
               class = "wisp_input_error", regexp = "animals.per.group")
})

# With wisp() ---------------------------------------------------------------------------------

test_that("wisp() fits simulated data, crossed and nested", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  fit <- wisp(wisp_simulate(), verbose = FALSE)
  expect_s3_class(fit, "wisp")
  expect_true(fit$fit.diagnostics$converged)
  nested <- wisp_simulate(design = nested_design(2), n.genes = 2, n.bins = 30, degrees = 1L,
                          seed = 16)
  fit <- wisp(nested, model.settings = list(LRO_cost = "none"), verbose = FALSE)
  expect_s3_class(fit, "wisp")
  # the random effects are named as the fit names its warps, whatever degrees it found
  warps <- fit$param.names[startsWith(fit$param.names, "wfactor_")]
  expect_identical(warps, names(attr(nested, "truth")$random.effects))
})

test_that("wisp_truth() matches the truth by name, and by degree for curve parameters", {
  counts <- wisp_simulate(n.genes = 2, n.random = 3, n.bins = 40, seed = 12)
  truth <- attr(counts, "truth")
  fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
  comparison <- wisp_truth(fit, counts)
  expected <- ifelse(comparison$degree.matches,
                     unname(truth$parameters[comparison$parameter]), NA_real_)
  expect_identical(comparison$truth, expected)
  warps <- comparison$role == "warp"
  expect_identical(comparison$truth[warps],
                   unname(truth$random.effects[comparison$parameter[warps]]))
  same <- comparison$degree.matches & comparison$role != "warp"
  expect_identical(comparison$estimate[same], unname(fit$fitted.parameters[comparison$parameter[same]]))
  # SDs and dispersions do not depend on the degrees: always compared.
  other <- comparison$role %in% c("sd", "dispersion")
  expect_identical(sum(other), 3L * 2L + 2L)
  expect_true(all(comparison$degree.matches[other]))
  expect_identical(comparison$truth[other],
                   unname(c(truth$sd, truth$dispersion)[comparison$parameter[other]]))
})

# Recovery under the fitted model: the old simulator's test. It needs a fit of
# the count model ("nb", the default); with the original likelihood (log(1 +
# bin sum) density, "none" rows) the new data are not from the fitted model.
# The structure comes from the default grid search: a single detection at the
# default cutoff splits gene1's gentle transition (slope 0.42 per bin) in two.
test_that("a bootstrapped fit recovers large effects and covers most true values", {
  counts <- wisp_simulate(n.genes = 2, n.random = 3, n.bins = 40, seed = 12)
  fit <- suppressWarnings(wisp(counts, bootstraps.num = 60, max.fork = 2, ran.seed = 3,
                               verbose = FALSE))
  expect_identical(fit$bootstrap$resample, "parametric")
  comparison <- wisp_truth(fit, counts)
  expect_s3_class(comparison, "wisp_truth")
  expect_true(all(comparison$degree.matches))
  large <- comparison$role == "beta" & comparison$component == "Rt" & abs(comparison$truth) >= 0.5
  expect_gt(sum(large), 0)
  expect_identical(sign(comparison$estimate[large]), sign(comparison$truth[large]))
  # "Most": 60 replicates of a parametric bootstrap with 3 animals give rough
  # intervals; a majority of the true rate parameters must still fall inside
  # them.
  rates <- comparison$component == "Rt"
  expect_gt(mean(comparison$covered[rates], na.rm = TRUE), 0.5)
  plot <- plot(comparison)
  expect_s3_class(plot, "ggplot")
  expect_silent(ggplot2::ggplot_build(plot))
})
