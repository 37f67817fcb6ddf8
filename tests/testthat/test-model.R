# The Rust model core (through wispack:::model_build / model_objective /
# model_predict) against the plain-R reference of helper-reference.R.

# Token sets ----------------------------------------------------------------

# Small token sets drawn by hand rules: every (ran, context, species,
# treatment, bin) cell gets 1-3 tokens with counts 0..12, or is left empty
# (an NA cell) with probability `empty`; the last bin of the first cell is
# always filled so that B = `bins`.
hand_tokens <- function(ran, fixed_levels, contexts = "ctx", species = "A", bins = 4,
                        empty = 0.25, seed = 1) {
  set.seed(seed)
  skeleton <- reference_skeleton(contexts, species, ran, fixed_levels, bins = bins)
  cells <- skeleton$summed[skeleton$summed$ran != "none", ]
  keep <- stats::runif(nrow(cells)) >= empty
  keep[bins] <- TRUE
  counts <- numeric(0)
  rows <- integer(0)
  for (cell in which(keep)) {
    n_tokens <- sample(1:3, 1)
    counts <- c(counts, sample(0:12, n_tokens, replace = TRUE))
    rows <- c(rows, rep(cell, n_tokens))
  }
  tokens <- data.frame(count = counts, bin = cells$bin[rows], context = cells$context[rows],
                       species = cells$species[rows], ran = cells$ran[rows],
                       stringsAsFactors = FALSE)
  components <- attr(reference_treatments(fixed_levels), "components")
  names(components) <- skeleton$treatments
  for (f in names(fixed_levels)) {
    levels <- fixed_levels[[f]]
    values <- vapply(cells$treatment[rows], function(t) {
      comp <- components[[t]]
      if (f %in% names(comp)) comp[[f]] else reference_ordered_levels(fixed_levels)[[f]][1]
    }, "", USE.NAMES = FALSE)
    tokens[[f]] <- if (is.numeric(levels)) as.numeric(values) else values
  }
  tokens
}

hemisphere <- list(hemisphere = c("left", "right"))
hemisphere_age <- list(hemisphere = c("left", "right"), age = c(7, 12, 18))
hemisphere_genotype <- list(hemisphere = c("left", "right"), genotype = c("ko", "wt"))

# Treatment names as the reference implementation (and the Rust core) give
# them: the package names the reference treatment by its levels, the
# reference calls it "ref".
core_treatments <- function(x, model) {
  x <- as.character(x)
  x[x == model$treatments[1]] <- "ref"
  x
}

# Compares the package's summed table, levels and dispersion with the reference.
expect_table_matches <- function(tokens, fixed_effects, time_series = NULL,
                                 round_none = TRUE) {
  settings <- if (round_none) list() else list(round_none = FALSE)
  model <- wispack:::model_build(tokens, fixed_effects = fixed_effects,
                                 time_series = time_series, degrees = 0L,
                                 settings = settings)
  reference <- reference_table(tokens, fixed_effects, time_series, round_none = round_none)
  expected <- reference$summed
  got <- model$summed

  expect_identical(model$contexts, reference$contexts)
  expect_identical(model$species, reference$species)
  expect_identical(model$ran_levels, reference$ran_levels)
  expect_identical(as.integer(model$bins), reference$bins)
  expect_identical(nrow(got), nrow(expected))
  expect_identical(as.character(got$ran), expected$ran)
  expect_identical(as.character(got$context), expected$context)
  expect_identical(as.character(got$species), expected$species)
  expect_identical(core_treatments(got$treatment, model), expected$treatment)
  expect_identical(as.integer(got$bin), expected$bin)
  expect_identical(as.logical(got$observed), expected$observed)
  observed <- expected$observed
  expect_true(all(is.na(got$count[!observed])))
  real <- observed & expected$ran != "none"
  none <- expected$ran == "none"
  expect_identical(as.numeric(got$count[real]), expected$count[real])
  if (round_none) {
    expect_identical(as.numeric(got$count[none]), expected$count[none])
  } else {
    # exp(mean(log1p)) - 1 may differ in the last bit with the summation order.
    expect_equal(as.numeric(got$count[none]), expected$count[none], tolerance = 1e-12)
  }
  expect_equal(as.numeric(got$count_log[observed]), expected$count_log[observed],
               tolerance = 1e-14)
  expect_identical(dimnames(model$dispersion), dimnames(reference$dispersion))
  expect_equal(unname(model$dispersion), unname(reference$dispersion), tolerance = 1e-12)
  invisible(model)
}

# (1) Summed table and dispersion ---------------------------------------------

test_that("summed table: binary factor, three mice, NA cells, rounded none rows", {
  tokens <- hand_tokens(c("m1", "m2", "m3"), hemisphere, species = c("A", "B"), seed = 1)
  expect_true(anyNA(reference_table(tokens, "hemisphere")$summed$count))
  expect_table_matches(tokens, "hemisphere")
})

test_that("summed table: none rows are not rounded when round_none = FALSE", {
  tokens <- hand_tokens(c("m1", "m2", "m3"), hemisphere, species = c("A", "B"), seed = 2)
  reference <- reference_table(tokens, "hemisphere", round_none = FALSE)
  none <- reference$summed$ran == "none"
  expect_true(any(reference$summed$count[none] != round(reference$summed$count[none])))
  expect_table_matches(tokens, "hemisphere", round_none = FALSE)
})

test_that("summed table: a none cell whose real cells are all empty counts 0", {
  tokens <- hand_tokens(c("m1", "m2"), hemisphere, bins = 6, empty = 0.6, seed = 3)
  reference <- reference_table(tokens, "hemisphere")
  none <- reference$summed$ran == "none"
  expect_true(any(reference$summed$count[none] == 0))
  expect_table_matches(tokens, "hemisphere")
})

test_that("summed table: a three-level time-series factor crossed with a binary one", {
  tokens <- hand_tokens(c("m1", "m2"), hemisphere_age, bins = 3, seed = 4)
  expect_table_matches(tokens, c("hemisphere", "age"), time_series = "age")
  expect_table_matches(tokens, c("hemisphere", "age"), time_series = "age",
                       round_none = FALSE)
})

test_that("summed table: a three-level factor that is not a time series", {
  tokens <- hand_tokens(c("m1", "m2"), list(age = c(7, 12, 18)), bins = 3, seed = 5)
  expect_table_matches(tokens, "age")
})

test_that("summed table: a 2 x 2 design", {
  tokens <- hand_tokens(c("m1", "m2"), hemisphere_genotype, species = c("A", "B"), bins = 3,
                        seed = 6)
  expect_table_matches(tokens, c("hemisphere", "genotype"))
})

test_that("summed table: a single ran level has no none rows and keeps NA cells", {
  tokens <- hand_tokens("m1", hemisphere, contexts = c("c1", "c2"), bins = 5, seed = 7)
  model <- expect_table_matches(tokens, "hemisphere")
  expect_identical(model$ran_levels, "m1")
})

test_that("summed table: tokens with a missing count are skipped", {
  tokens <- hand_tokens(c("m1", "m2"), hemisphere, bins = 3, empty = 0, seed = 8)
  tokens$count[c(1, 5)] <- NA
  # The cell (m2, right, bin 3) keeps only a token with a missing count: NA cell.
  cell <- tokens$ran == "m2" & tokens$hemisphere == "right" & tokens$bin == 3
  tokens$count[cell] <- NA
  expect_true(is.na(reference_table(tokens, "hemisphere")$summed$count[24]))
  expect_table_matches(tokens, "hemisphere")
})

# (2) Treatments, W and parameter names ---------------------------------------

expect_design_matches <- function(tokens, fixed_effects, time_series, degrees) {
  model <- wispack:::model_build(tokens, fixed_effects = fixed_effects,
                                 time_series = time_series, degrees = degrees)
  reference <- reference_table(tokens, fixed_effects, time_series)
  expect_identical(core_treatments(model$treatments, model), reference$treatments)
  expect_identical(unname(model$weights) + 0, unname(reference$weights))
  real_ran <- reference_levels(tokens$ran)
  expect_identical(model$parameter_names,
                   reference_parameter_names(reference$contexts, reference$species, real_ran,
                                             reference$treatments, degrees))
  invisible(model)
}

test_that("design: names, treatments and W with names that prefix one another", {
  tokens <- hand_tokens(c("m1", "m10"), hemisphere_age, contexts = c("L2", "L23"),
                        species = c("Gad", "Gad1", "Gad1b"), bins = 4, seed = 9)
  degrees <- reference_degrees(c("L2", "L23"), c("Gad", "Gad1", "Gad1b"), c(0, 1, 2, 3, 1, 0))
  expect_design_matches(tokens, c("hemisphere", "age"), "age", degrees)
})

test_that("design: the same factors without a time series", {
  tokens <- hand_tokens(c("m1", "m2", "m3"), hemisphere_age, bins = 4, seed = 10)
  degrees <- reference_degrees("ctx", "A", 2)
  model <- expect_design_matches(tokens, c("hemisphere", "age"), NULL, degrees)
  expect_identical(as.character(model$treatments),
                   c("left:7", "right", "12", "18", "right:12", "right:18"))
})

test_that("design: a 2 x 2 design and a single ran level (no warping factors)", {
  tokens <- hand_tokens("m1", hemisphere_genotype, species = c("A", "B"), bins = 4, seed = 11)
  degrees <- reference_degrees("ctx", c("A", "B"), c(1, 2))
  model <- expect_design_matches(tokens, c("hemisphere", "genotype"), NULL, degrees)
  expect_false(any(startsWith(model$parameter_names, "wfactor_")))
})

test_that("design: one degree for all pairs equals the full degree matrix", {
  tokens <- hand_tokens(c("m1", "m2"), hemisphere, contexts = c("c1", "c2"),
                        species = c("A", "B"), bins = 4, seed = 12)
  single <- wispack:::model_build(tokens, fixed_effects = "hemisphere", degrees = 2L)
  matrix_form <- wispack:::model_build(
    tokens, fixed_effects = "hemisphere",
    degrees = reference_degrees(c("c1", "c2"), c("A", "B"), 2))
  expect_identical(single$parameter_names, matrix_form$parameter_names)
})

# Simulated designs for the objective ------------------------------------------

# A design with data drawn from a plausible truth, built once per file run.
design_cases <- new.env()
design_case <- function(name) {
  if (!is.null(design_cases[[name]])) return(design_cases[[name]])
  spec <- switch(name,
    single = list(contexts = "ctx", species = "A", ran = "m1", fixed = hemisphere,
                  time_series = NULL, degrees = 1, bins = 20, seed = 21),
    two_species = list(contexts = "ctx", species = c("A", "B"), ran = c("m1", "m2", "m3"),
                       fixed = hemisphere, time_series = NULL, degrees = c(1, 2),
                       bins = 24, seed = 22),
    time_series = list(contexts = c("c1", "c2"), species = c("A", "B", "C"),
                       ran = c("m1", "m2"), fixed = hemisphere_age, time_series = "age",
                       degrees = c(0, 1, 2, 3, 1, 0), bins = 24, seed = 23),
    two_by_two = list(contexts = "ctx", species = "A", ran = c("m1", "m2", "m3", "m4"),
                      fixed = hemisphere_genotype, time_series = NULL, degrees = 3,
                      bins = 30, seed = 24))
  skeleton <- reference_skeleton(spec$contexts, spec$species, spec$ran, spec$fixed,
                                 spec$time_series, spec$bins)
  degrees <- reference_degrees(spec$contexts, spec$species, spec$degrees)
  truth <- reference_truth(skeleton, degrees, seed = spec$seed)
  tokens <- reference_simulate_tokens(skeleton, truth, degrees, empty = 0.1,
                                      seed = spec$seed + 100)
  fixed_effects <- names(spec$fixed)
  case <- list(
    name = name, degrees = degrees, truth = truth,
    table = reference_table(tokens, fixed_effects, spec$time_series),
    model = wispack:::model_build(tokens, fixed_effects = fixed_effects,
                                  time_series = spec$time_series, degrees = degrees))
  design_cases[[name]] <- case
  case
}
case_names <- c("single", "two_species", "time_series", "two_by_two")

# A feasible point near the truth: every parameter moved by a relative
# `scale`, warping factors redrawn in +-`warp`; halves the move until every
# distance is positive and no prediction is below -0.01.
nearby_point <- function(case, seed, scale = 0.02, warp = NULL) {
  set.seed(seed)
  for (attempt in 1:20) {
    x <- case$truth * (1 + stats::rnorm(length(case$truth), 0, scale)) +
      stats::rnorm(length(case$truth), 0, scale / 10)
    if (!is.null(warp)) {
      is_warp <- startsWith(names(x), "wfactor_")
      x[is_warp] <- stats::runif(sum(is_warp), -warp, warp)
    }
    blocks <- reference_blocks(case$table, x, case$degrees)
    pred <- reference_predict(case$table, x, case$degrees, blocks = blocks)
    if (all(reference_distances(case$table, blocks) > 0) &&
        all(pred[case$table$summed$observed] >= -0.01)) {
      return(x)
    }
    scale <- scale / 2
    if (!is.null(warp)) warp <- warp / 2
  }
  stop("no feasible point near the truth")
}

# The points compared in each design: (x, start) pairs.
comparison_points <- function(case) {
  near <- nearby_point(case, seed = 1)
  list(truth = list(x = case$truth, start = case$truth),
       near = list(x = near, start = near),
       near_from_truth = list(x = near, start = case$truth),
       strong_warps = list(x = nearby_point(case, seed = 2, scale = 0.05, warp = 0.3),
                           start = case$truth))
}

# (3) Objective, nll, penalty, predictions --------------------------------------

for (name in case_names) {
  test_that(paste0("objective matches the reference: ", name), {
    skip_without_test_hooks()
    case <- design_case(name)
    expect_identical(case$model$parameter_names, names(case$truth))
    for (point in comparison_points(case)) {
      expected <- reference_objective(case$table, point$x, case$degrees, start = point$start)
      got <- wispack:::model_objective(case$model, unname(point$x), start = unname(point$start))
      expect_equal(got$nll, expected$nll, tolerance = 1e-10)
      expect_equal(got$penalty, expected$penalty, tolerance = 1e-10)
      expect_equal(got$value, expected$value, tolerance = 1e-10)
      expect_equal(as.numeric(got$distances), expected$distances, tolerance = 1e-10)
      expect_equal(as.numeric(wispack:::model_predict(case$model, unname(point$x))),
                   expected$pred_log, tolerance = 1e-10)
    }
  })
}

test_that("objective at the start point carries a penalty of 1% of nll", {
  skip_without_test_hooks()
  case <- design_case("two_species")
  got <- wispack:::model_objective(case$model, unname(case$truth))
  expect_equal(got$penalty, 0.01 * got$nll, tolerance = 1e-10)
})

# (4) Gradient ------------------------------------------------------------------

central_differences <- function(model, x, start) {
  vapply(seq_along(x), function(i) {
    h <- 1e-5 * max(1, abs(x[i]))
    up <- x
    down <- x
    up[i] <- x[i] + h
    down[i] <- x[i] - h
    (wispack:::model_objective(model, up, start = start)$value -
       wispack:::model_objective(model, down, start = start)$value) / (2 * h)
  }, 0)
}

for (name in case_names) {
  test_that(paste0("gradient matches central differences: ", name), {
    skip_without_test_hooks()
    case <- design_case(name)
    points <- comparison_points(case)
    for (point in points[c("truth", "near_from_truth", "strong_warps")]) {
      x <- unname(point$x)
      start <- unname(point$start)
      gradient <- as.numeric(wispack:::model_objective(case$model, x, start = start)$gradient)
      numeric_gradient <- central_differences(case$model, x, start)
      expect_length(gradient, length(x))
      error <- sqrt(sum((gradient - numeric_gradient)^2))
      expect_lte(error, 1e-6 * max(1, sqrt(sum(numeric_gradient^2))))
    }
  })
}

# (5) Predictions below the lower bound ----------------------------------------

test_that("a prediction below -0.01 gives nll = 1e100 plus the penalty, as the reference", {
  skip_without_test_hooks()
  for (name in c("single", "two_species")) {
    case <- design_case(name)
    x <- case$truth
    x["baseline_ctx_Rt_A_Tns/Blk1"] <- -0.5
    expected <- reference_objective(case$table, x, case$degrees, start = case$truth)
    expect_lt(min(expected$pred_log[case$table$summed$observed]), -0.01)
    got <- wispack:::model_objective(case$model, unname(x), start = unname(case$truth))
    expect_identical(expected$nll, 1e100)
    # Not identical(): under valgrind R parses the literal 1e100 with 64-bit
    # instead of 80-bit long doubles and lands one ulp away from Rust's 1e100.
    expect_equal(got$nll, 1e100, tolerance = 1e-15)
    expect_equal(got$penalty, expected$penalty, tolerance = 1e-10)
    expect_equal(got$value, 1e100 + got$penalty, tolerance = 1e-15)
    expect_equal(expected$value, 1e100 + expected$penalty, tolerance = 1e-15)
  }
})
