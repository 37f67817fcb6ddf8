# Self-tests of the plain-R reference (helper-reference.R) against the worked
# examples and stated properties of the model vignette. The package is not used.

# Treatments and weights (model vignette §3) ---------------------------------

test_that("treatments are ref, then subsets by size, levels joined with ':'", {
  treatments <- reference_treatments(list(hemisphere = c("left", "right"),
                                          age = c(7, 12, 18)))
  expect_identical(as.vector(treatments),
                   c("ref", "right", "12", "18", "right:12", "right:18"))
  expect_identical(attr(treatments, "components")[[5]],
                   c(hemisphere = "right", age = "12"))
  expect_length(attr(treatments, "components")[[1]], 0)
})

test_that("any number of levels per factor gives T = product of level counts", {
  treatments <- reference_treatments(list(a = c("a0", "a1", "a2"), b = c("b0", "b1", "b2"),
                                          c = c("c0", "c1")))
  expect_length(treatments, 3 * 3 * 2)
  expect_identical(as.vector(treatments)[1:10],
                   c("ref", "a1", "a2", "b1", "b2", "c1", "a1:b1", "a1:b2", "a2:b1", "a2:b2"))
  expect_identical(tail(as.vector(treatments), 4),
                   c("a1:b1:c1", "a1:b2:c1", "a2:b1:c1", "a2:b2:c1"))
})

test_that("no fixed effects gives the single treatment ref", {
  expect_identical(as.vector(reference_treatments(list())), "ref")
  expect_equal(reference_weights(list()), matrix(1, 1, 1, dimnames = list("ref", "ref")))
})

test_that("W reproduces the hemisphere-by-age example of the model vignette (§3)", {
  treatments <- c("ref", "right", "12", "18", "right:12", "right:18")
  expected <- matrix(c(1, 0, 0, 0, 0, 0,
                       1, 1, 0, 0, 0, 0,
                       1, 0, 1, 0, 0, 0,
                       1, 0, 1, 1, 0, 0,
                       1, 1, 1, 0, 1, 0,
                       1, 1, 1, 1, 1, 1),
                     6, 6, byrow = TRUE, dimnames = list(treatments, treatments))
  W <- reference_weights(list(hemisphere = c("left", "right"), age = c(7, 12, 18)),
                         time_series = "age")
  expect_identical(W, expected)
})

test_that("time ranks follow numeric order of the time levels", {
  W <- reference_weights(list(age = c(18, 7, 120)), time_series = "age")
  expect_identical(rownames(W), c("ref", "18", "120"))
  expect_identical(unname(W["120", ]), c(1, 1, 1))
  expect_identical(unname(W["18", ]), c(1, 1, 0))
})

test_that("without a time series W is the subset relation of components", {
  fixed <- list(hemisphere = c("left", "right"), age = c(7, 12, 18))
  W <- reference_weights(fixed)
  components <- attr(reference_treatments(fixed), "components")
  for (p in seq_along(components)) for (i in seq_along(components)) {
    subset <- all(names(components[[i]]) %in% names(components[[p]])) &&
      all(components[[i]] == components[[p]][names(components[[i]])])
    expect_identical(W[p, i], if (subset) 1 else 0)
  }
  expect_identical(W["18", "12"], 0)
})

# Parameter layout, names and counts (model vignette §8) ---------------------

design_parameters <- function(n_contexts, n_species, fixed_levels, n_ran, degrees) {
  contexts <- paste0("c", seq_len(n_contexts))
  species <- paste0("g", seq_len(n_species))
  names <- reference_parameter_names(contexts, species, paste0("m", seq_len(n_ran)),
                                     reference_treatments(fixed_levels),
                                     reference_degrees(contexts, species, degrees))
  c(total = length(names), tested = sum(startsWith(names, "beta_")))
}

two_by_two <- list(hemisphere = c("left", "right"), genotype = c("ko", "wt"))
time_design <- list(hemisphere = c("left", "right"), age = c(7, 12, 18))

test_that("parameter counts match the examples of the original's tutorials", {
  expect_identical(design_parameters(1, 6, two_by_two, 4, c(3, 3, 3, 3, 3, 2)),
                   c(total = 300L, tested = 171L))
  expect_identical(design_parameters(1, 6, time_design, 5, c(3, 3, 3, 3, 2, 2))[["total"]],
                   414L)
  expect_identical(design_parameters(2, 6, time_design, 5,
                                     c(4, 4, 4, 4, 4, 4, 4, 4, 4, 3, 2, 2))[["total"]],
                   936L)
  expect_identical(design_parameters(1, 6, two_by_two, 10, rep(1, 6)),
                   c(total = 276L, tested = 72L))
  expect_identical(design_parameters(1, 2, list(hemisphere = c("left", "right")), 3, c(2, 0)),
                   c(total = 34L, tested = 8L))
})

test_that("a single ran level has no warping factors (Poisson tutorial: P = 10)", {
  expect_identical(design_parameters(1, 1, list(), 1, 3), c(total = 10L, tested = 0L))
})

test_that("names of a small worked example follow the naming scheme (model vignette §8)", {
  names <- reference_parameter_names("ctx", c("A", "B"), c("m1", "m2", "m3"),
                                     reference_treatments(list(hemisphere = c("left", "right"))),
                                     reference_degrees("ctx", c("A", "B"), c(2, 0)))
  warps <- function(s) {
    as.vector(t(outer(c("m1", "m2", "m3"), c("point", "rate", "slope"),
                      function(r, w) paste0("wfactor_", w, "_", r, "_X_", s))))
  }
  expected <- c(
    "baseline_ctx_Rt_A_Tns/Blk1", "beta_Rt_ctx_A_right_X_Tns/Blk1",
    "baseline_ctx_Rt_A_Tns/Blk2", "beta_Rt_ctx_A_right_X_Tns/Blk2",
    "baseline_ctx_Rt_A_Tns/Blk3", "beta_Rt_ctx_A_right_X_Tns/Blk3",
    "baseline_ctx_Rt_B_Tns/Blk1", "beta_Rt_ctx_B_right_X_Tns/Blk1",
    "baseline_ctx_tslope_A_Tns/Blk1", "beta_tslope_ctx_A_right_X_Tns/Blk1",
    "baseline_ctx_tslope_A_Tns/Blk2", "beta_tslope_ctx_A_right_X_Tns/Blk2",
    "baseline_ctx_tpoint_A_Tns/Blk1", "beta_tpoint_ctx_A_right_X_Tns/Blk1",
    "baseline_ctx_tpoint_A_Tns/Blk2", "beta_tpoint_ctx_A_right_X_Tns/Blk2",
    warps("A"), warps("B"))
  expect_identical(names, expected)
  expect_identical(names[17:19], c("wfactor_point_m1_X_A", "wfactor_rate_m1_X_A",
                                   "wfactor_slope_m1_X_A"))
})

test_that("contexts loop inside components and species inside contexts", {
  names <- reference_parameter_names(c("c1", "c2"), c("g1", "g2"), "m1", "ref",
                                     reference_degrees(c("c1", "c2"), c("g1", "g2"), 1))
  expect_identical(names, c(
    "baseline_c1_Rt_g1_Tns/Blk1", "baseline_c1_Rt_g1_Tns/Blk2",
    "baseline_c1_Rt_g2_Tns/Blk1", "baseline_c1_Rt_g2_Tns/Blk2",
    "baseline_c2_Rt_g1_Tns/Blk1", "baseline_c2_Rt_g1_Tns/Blk2",
    "baseline_c2_Rt_g2_Tns/Blk1", "baseline_c2_Rt_g2_Tns/Blk2",
    "baseline_c1_tslope_g1_Tns/Blk1", "baseline_c1_tslope_g2_Tns/Blk1",
    "baseline_c2_tslope_g1_Tns/Blk1", "baseline_c2_tslope_g2_Tns/Blk1",
    "baseline_c1_tpoint_g1_Tns/Blk1", "baseline_c1_tpoint_g2_Tns/Blk1",
    "baseline_c2_tpoint_g1_Tns/Blk1", "baseline_c2_tpoint_g2_Tns/Blk1"))
})

# Summed table and dispersion (model vignette §4, §9.1) ----------------------

hand_table_tokens <- data.frame(
  count      = c(2, 1, 0, 4, 7, 3, NA, 5),
  bin        = c(1, 1, 2, 1, 1, 2, 1, 3),
  context    = "ctx",
  species    = "A",
  ran        = c("m1", "m1", "m1", "m1", "m2", "m2", "m2", "m1"),
  hemisphere = c("left", "left", "left", "right", "left", "left", "right", "left"),
  stringsAsFactors = FALSE)

test_that("the hand-computed summed table is reproduced (round_none = TRUE)", {
  table <- reference_table(hand_table_tokens, "hemisphere", bins = 2)
  summed <- table$summed
  expect_identical(table$ran_levels, c("none", "m1", "m2"))
  expect_identical(table$treatments, c("ref", "right"))
  expect_identical(summed$ran, rep(c("none", "m1", "m2"), each = 4))
  expect_identical(summed$treatment, rep(rep(c("ref", "right"), each = 2), 3))
  expect_identical(summed$bin, rep(1:2, 6))
  # none: ref b1 = round(sqrt(4 * 8) - 1) = 5, ref b2 = sqrt(1 * 4) - 1 = 1,
  # right b1 from m1 only = 4, right b2 has an empty pool = 0.
  expect_identical(summed$count, c(5, 1, 4, 0,  3, 0, 4, NA,  7, 3, NA, NA))
  expect_identical(summed$observed, !is.na(summed$count))
  expect_equal(summed$count_log, log(summed$count + 1), tolerance = 1e-15)
  # Pool 5,1,4,0,3,0,4,7,3: mean 3, variance 44/9, phi = (44/27 - 1) / 3.
  expect_equal(table$dispersion, matrix(17 / 81, 1, 1, dimnames = list("A", "ctx")),
               tolerance = 1e-15)
})

test_that("the hand-computed summed table is reproduced (round_none = FALSE)", {
  table <- reference_table(hand_table_tokens, "hemisphere", bins = 2, round_none = FALSE)
  counts <- c(sqrt(32) - 1, 1, 4, 0,  3, 0, 4, NA,  7, 3, NA, NA)
  expect_equal(table$summed$count, counts, tolerance = 1e-15)
  pool <- counts[!is.na(counts)]
  m <- mean(pool)
  v <- mean((pool - m)^2)
  expect_equal(table$dispersion[["A", "ctx"]], (v / m - 1) / m, tolerance = 1e-14)
})

test_that("a single ran level adds no none rows and keeps its NA cells", {
  tokens <- hand_table_tokens[hand_table_tokens$ran == "m1", ]
  table <- reference_table(tokens, "hemisphere", bins = 2)
  expect_identical(table$ran_levels, "m1")
  expect_identical(table$summed$count, c(3, 0, 4, NA))
})

test_that("dispersion is 0 when the variance does not exceed the mean", {
  expect_identical(reference_dispersion_of(c(2, 2, 2)), 0)
  expect_identical(reference_dispersion_of(c(1, 2, 3)), 0)
  expect_equal(reference_dispersion_of(c(0, 10)), (25 / 5 - 1) / 5)
})

test_that("the small worked example has N = 1600 rows and 72 distances", {
  table <- reference_skeleton("ctx", c("A", "B"), c("m1", "m2", "m3"),
                              list(hemisphere = c("left", "right")), bins = 100)
  degrees <- reference_degrees("ctx", c("A", "B"), c(2, 0))
  expect_identical(nrow(table$summed), 1600L)
  x <- rep(1, 34)
  expect_length(reference_distances(table, reference_blocks(table, x, degrees)), 72)
})

test_that("the Poisson tutorial has 11 distances and the cortex design 1260", {
  poisson <- reference_skeleton("ctx", "A", "m1", list(), bins = 100)
  expect_length(reference_distances(poisson, reference_blocks(
    poisson, rep(1, 10), reference_degrees("ctx", "A", 3))), 11)
  species <- paste0("g", 1:6)
  cortex <- reference_skeleton("ctx", species, paste0("m", 1:4), two_by_two, bins = 10)
  degrees <- reference_degrees("ctx", species, c(3, 3, 3, 3, 3, 2))
  # N = B * C * S * (R + 1) * T; with the tutorial's B = 100 that is 12 000.
  expect_identical(nrow(cortex$summed), 10L * 1L * 6L * 5L * 4L)
  expect_length(reference_distances(cortex, reference_blocks(cortex, rep(1, 300), degrees)),
                1260)
})

# Curve and warping (model vignette §5, §7.1) --------------------------------

test_that("the warp is the identity at w = 0 and moves toward b or 0", {
  expect_identical(reference_warp(3.7, 100, 0), 3.7)
  expect_equal(reference_warp(40, 100, 0.5), 40 + (1 - exp(-0.25 * 40 / 100)) * 60)
  expect_equal(reference_warp(40, 100, -0.5), 40 - (1 - exp(-0.25 * 60 / 100)) * 40)
  inf_warp <- 1e-7 / .Machine$double.eps
  expect_equal(reference_warp(2, inf_warp, 0.1), 2 * (1 + 0.01), tolerance = 1e-8)
  expect_equal(reference_warp(2, inf_warp, -0.1), 2 * exp(-0.01), tolerance = 1e-8)
})

test_that("psi is a sum of sigmoid steps between block rates", {
  expect_identical(reference_psi(5, 2.5, numeric(0), numeric(0)), 2.5)
  expect_equal(reference_psi(10, c(1, 3), 2, 10), 2)
  expect_equal(reference_psi(12, c(1, 3, 2), c(0.5, 1), c(10, 20)),
               1 + 2 * plogis(0.5 * 2) - plogis(1 * -8))
})

# Likelihood and penalty (model vignette §9.1, §11.1) ------------------------

one_row_table <- function(y_log, phi) {
  table <- reference_skeleton("ctx", "A", "m1", list(), bins = 1)
  table$summed$count_log <- y_log
  table$summed$count <- exp(y_log) - 1
  table$summed$observed <- TRUE
  table$dispersion[] <- phi
  table
}

test_that("a row's likelihood is the negative binomial at the real value log(1 + y)", {
  mu <- 1.7
  lambda <- exp(mu) - 1
  for (phi in c(0, 0.3)) {
    v <- (lambda + phi * lambda^2) / (lambda + 1)^2
    shape <- mu^2 / v
    # At an integer log-count the Poisson-gamma integral is dnbinom.
    expect_equal(reference_nll(one_row_table(2, phi), mu),
                 -dnbinom(2, size = shape, prob = (shape / mu) / (shape / mu + 1), log = TRUE),
                 tolerance = 1e-12)
  }
})

test_that("rows with zero count, and rows predicted at zero, contribute nothing", {
  expect_identical(reference_nll(one_row_table(0, 0.2), 1.5), 0)
  expect_identical(reference_nll(one_row_table(1, 0.2), -0.005), 0)
})

test_that("a prediction below -0.01 or not finite makes nll = 1e100", {
  expect_identical(reference_nll(one_row_table(1, 0.2), -0.02), 1e100)
  expect_identical(reference_nll(one_row_table(1, 0.2), NaN), 1e100)
  expect_identical(reference_nll(one_row_table(1, 0.2), Inf), 1e100)
})

test_that("at the start point the penalty is max_penalty_at_distance_factor * nll", {
  table <- reference_skeleton("ctx", c("A", "B"), c("m1", "m2", "m3"),
                              list(hemisphere = c("left", "right")), bins = 30)
  degrees <- reference_degrees("ctx", c("A", "B"), c(2, 0))
  x <- reference_truth(table, degrees, seed = 11)
  table <- reference_table(reference_simulate_tokens(table, x, degrees, seed = 12),
                           "hemisphere")
  objective <- reference_objective(table, x, degrees)
  expect_gt(objective$nll, 0)
  expect_equal(objective$penalty, 0.01 * objective$nll, tolerance = 1e-12)
  expect_equal(objective$value, objective$nll + objective$penalty)
  expect_true(all(objective$distances > 0))
})

test_that("every coefficient, the last one included, is kappa / x0_i", {
  table <- reference_skeleton("ctx", "A", c("m1", "m2"), list(), bins = 20)
  degrees <- reference_degrees("ctx", "A", 1)
  x <- reference_truth(table, degrees, seed = 5)
  table <- reference_table(reference_simulate_tokens(table, x, degrees, seed = 6),
                           character(0))
  start <- reference_objective(table, x, degrees)
  moved <- x
  moved["baseline_ctx_Rt_A_Tns/Blk2"] <- moved["baseline_ctx_Rt_A_Tns/Blk2"] + 0.2
  at_moved <- reference_objective(table, moved, degrees, start = x)
  n <- length(start$distances)
  a <- sqrt(n / (start$nll * 0.01)) / start$distances
  expect_equal(at_moved$penalty, sum(1 / (a * at_moved$distances)^2), tolerance = 1e-12)
  # The last distance is the last block's last rate: it changed with the move.
  expect_false(tail(at_moved$distances, 1) == tail(start$distances, 1))
})

test_that("a non-positive distance is clamped to a 1e60 penalty term", {
  table <- reference_skeleton("ctx", "A", c("m1", "m2"), list(), bins = 20)
  degrees <- reference_degrees("ctx", "A", 0)
  x <- reference_truth(table, degrees, seed = 8)
  table <- reference_table(reference_simulate_tokens(table, x, degrees, seed = 9),
                           character(0))
  infeasible <- x
  infeasible[1] <- -1
  objective <- reference_objective(table, infeasible, degrees, start = x)
  expect_identical(objective$nll, 1e100)
  expect_gte(objective$penalty, 3e60)
  expect_identical(objective$value, 1e100 + objective$penalty)
})
