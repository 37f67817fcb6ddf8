# The plain-R reference of the count model (helper-reference-count.R) against
# hand calculations and base R's distributions, so that it can serve as the
# oracle for the Rust implementation.

# Table (model vignette §4, §10) -----------------------------------------------

reference_count_tokens <- function() {
  # Key (m1, ctx, a, bin 1): cells 1 and 2, each with a token of g1 and g2.
  # Key (m1, ctx, a, bin 2): cell 3 with g1 only (g2 has no token there).
  # Bin 3 has no tokens at all: a missing key.
  data.frame(count = c(2, 0, 5, 1, 4), bin = c(1, 1, 1, 1, 2), context = "ctx",
             species = c("g1", "g2", "g1", "g2", "g1"), ran = "m1", trt = "a",
             cell = c(1, 1, 2, 2, 3), stringsAsFactors = FALSE)
}

test_that("the table sums counts per cell key and species, zeros included, keys without tokens absent", {
  table <- reference_count_table(reference_count_tokens(), "trt", exposure = "cells")
  table <- table[order(table$bin, table$species), ]
  expect_identical(nrow(table), 4L)
  expect_identical(table$bin, c(1, 1, 2, 2))
  expect_identical(table$species, c("g1", "g2", "g1", "g2"))
  expect_identical(table$count, c(7, 1, 4, 0))
  expect_identical(table$exposure, c(2L, 2L, 1L, 1L))
  expect_false(3 %in% table$bin)
})

test_that("token exposure counts a species' tokens and is refused when species differ", {
  tokens <- reference_count_tokens()
  expect_error(reference_count_table(tokens, "trt", exposure = "tokens"), "same number")
  complete <- rbind(tokens, data.frame(count = 0, bin = 2, context = "ctx", species = "g2",
                                       ran = "m1", trt = "a", cell = 3))
  table <- reference_count_table(complete, "trt", exposure = "tokens")
  table <- table[order(table$bin, table$species), ]
  expect_identical(as.numeric(table$exposure), c(2, 2, 1, 1))
  expect_identical(reference_count_table(tokens, "trt", exposure = "none")$exposure, rep(1, 4))
})

# Transforms and Psi (model vignette §5, §11.2) --------------------------------

test_that("theta maps to rates, bounded slopes and stick-broken points (model vignette §11.2)", {
  # B = 10: (L, U) = (0.5, 10.5), gap g = ceiling(10 / 20) = 1; theta_s =
  # (0, log 3) -> s = (4, 6); theta_p = (0, 0) -> q = (0.5, 0.75) ->
  # p_k = 0.5 + k g + (10 - 3 g) q_k = (1.5 + 3.5, 2.5 + 5.25) = (5, 7.75).
  curve <- reference_count_curve_from_theta(c(1, 2, 3, 0, log(3), 0, 0), degree = 2, bins = 10)
  expect_equal(curve$R, c(1, 2, 3))
  expect_equal(curve$s, c(4, 6))
  expect_equal(curve$p, c(5, 7.75))
})

test_that("theta and curve values map back and forth", {
  set.seed(11)
  for (d in 0:4) {
    theta <- stats::rnorm(3 * d + 1, sd = 2)
    curve <- reference_count_curve_from_theta(theta, d, bins = 40)
    expect_equal(reference_count_theta_from_curve(curve, bins = 40), theta, tolerance = 1e-10)
  }
})

test_that("any theta gives slopes in (0, 8) and ordered points inside (L, U)", {
  set.seed(12)
  for (i in 1:50) {
    theta <- stats::rnorm(10, sd = 6)
    curve <- reference_count_curve_from_theta(theta, 3, bins = 25)
    expect_true(all(curve$s > 0 & curve$s < 8))
    expect_true(all(diff(c(0.5, curve$p, 25.5)) >= 0))
  }
})

test_that("a value on a bound is a slope above 0.99 S_MAX or points within 1e-3 B of the gap", {
  inside <- list(R = c(1, 2), s = 2, p = 5)
  expect_false(reference_count_on_bound(inside, bins = 10))
  expect_true(reference_count_on_bound(list(R = c(1, 2), s = 7.95, p = 5), bins = 10))
  expect_true(reference_count_on_bound(list(R = c(1, 2), s = 2, p = 0.5 + 0.005), bins = 10))
  expect_true(reference_count_on_bound(list(R = c(1, 2, 3), s = c(1, 1), p = c(5, 5.001)),
                                       bins = 10))
  # B = 10: gap g = 1 bin, slack 1e-3 * 10 = 0.01 bins.
  expect_true(reference_count_on_bound(list(R = c(1, 2, 3), s = c(1, 1), p = c(5, 6.005)),
                                       bins = 10))
  expect_false(reference_count_on_bound(list(R = c(1, 2, 3), s = c(1, 1), p = c(5, 6.02)),
                                        bins = 10))
  expect_true(reference_count_on_bound(list(R = c(1, 2), s = 2, p = 10.5 - 1.005), bins = 10))
})

test_that("Psi matches hand values", {
  curve <- list(R = c(1, 3), s = 2, p = 5)
  expect_equal(reference_count_psi(5, curve), 2)
  expect_equal(reference_count_psi(5 + log(3) / 2, curve), 1 + 2 * 0.75)
  expect_equal(reference_count_psi(c(-100, 100), curve), c(1, 3))
  expect_equal(reference_count_psi(1:4, list(R = 0.7, s = numeric(0), p = numeric(0))),
               rep(0.7, 4))
})

# Warps (model vignette §7.2) --------------------------------------------------

test_that("the warps are the identity at u = 0 and match hand values", {
  curve <- list(R = c(1, 2), s = 4, p = 5.5)
  zero <- c(point = 0, rate = 0, slope = 0)
  expect_equal(reference_count_warp(curve, zero, bins = 10), curve)
  warped <- reference_count_warp(curve, c(point = log(3), rate = 0.3, slope = log(3)), bins = 10)
  expect_equal(warped$R, c(1, 2) * exp(0.3))
  expect_equal(warped$s, 6)      # logit(4/8) = 0 -> 8 * 0.75
  # gap 1: p = 1.5 + 8 q, q = 0.5 -> logit + log 3 -> 0.75 -> 1.5 + 8 * 0.75
  expect_equal(warped$p, 7.5)
})

test_that("each warp moves linearly at u = 0 and keeps order and range", {
  curve <- list(R = c(1, 2, 1.5), s = c(1, 3), p = c(3, 12))
  bins <- 20
  h <- 1e-6
  move <- function(w) {
    up <- reference_count_warp(curve, replace(c(point = 0, rate = 0, slope = 0), w, h), bins)
    down <- reference_count_warp(curve, replace(c(point = 0, rate = 0, slope = 0), w, -h), bins)
    list(R = (up$R - down$R) / (2 * h), s = (up$s - down$s) / (2 * h),
         p = (up$p - down$p) / (2 * h))
  }
  # gap 1 bin: point k = 0.5 + k + 17 q_k
  free <- bins - 3
  q <- (curve$p - 0.5 - 1:2) / free
  expect_equal(move("rate")$R, curve$R, tolerance = 1e-6)
  expect_equal(move("slope")$s, curve$s * (1 - curve$s / 8), tolerance = 1e-6)
  expect_equal(move("point")$p, free * q * (1 - q), tolerance = 1e-6)
  for (u in c(-4, 4)) {
    warped <- reference_count_warp(curve, c(point = u, rate = 0, slope = u), bins)
    expect_true(all(diff(c(0.5, warped$p, bins + 0.5)) > 0))
    expect_true(all(warped$s > 0 & warped$s < 8))
  }
  # s' is about s e^u for slopes far below S_MAX
  small <- reference_count_warp(list(R = c(1, 2), s = 0.01, p = 5),
                                c(point = 0, rate = 0, slope = 0.5), bins)
  expect_equal(small$s, 0.01 * exp(0.5), tolerance = 0.01)
})

# Rate floor and likelihood (model vignette §9.2) ------------------------------

test_that("the rate floor is exp(Psi) - 1 above small rates and stays positive", {
  psi <- log1p(c(0.05, 1, 5, 300))
  expect_equal(reference_count_rate(psi), expm1(psi), tolerance = 1e-9)
  expect_equal(reference_count_rate(0), 1e-8 + 1e-3 * log(2))
  expect_equal(reference_count_rate(-5), 1e-8)
  expect_equal(reference_count_rate(20), expm1(20))
  rates <- reference_count_rate(seq(-3, 3, by = 0.01))
  expect_true(all(rates > 0))
  expect_true(all(diff(rates) >= 0))
  # strictly increasing wherever the floor has not flattened to epsilon
  expect_true(all(diff(reference_count_rate(seq(-0.005, 3, by = 0.001))) > 0))
})

test_that("the NB log-pmf with exposure is dnbinom(size = E / phi, mu = E * rate)", {
  cases <- expand.grid(y = c(0, 1, 3, 17, 250), rate = c(0.01, 0.7, 12), exposure = c(1, 3, 8.5),
                       phi = c(1e-4, 0.05, 0.6, 4))
  expected <- stats::dnbinom(cases$y, size = cases$exposure / cases$phi,
                             mu = cases$exposure * cases$rate, log = TRUE)
  expect_equal(reference_count_nb_logpmf(cases$y, cases$rate, cases$exposure, cases$phi),
               expected, tolerance = 1e-10)
})

test_that("phi = 0 is Poisson and the pmf sums to 1", {
  y <- 0:40
  expect_equal(reference_count_nb_logpmf(y, 1.3, 4, 0), stats::dpois(y, 5.2, log = TRUE),
               tolerance = 1e-12)
  expect_equal(sum(exp(reference_count_nb_logpmf(0:2000, 2.5, 6, 0.8))), 1, tolerance = 1e-10)
  # phi -> 0 approaches Poisson
  expect_equal(reference_count_nb_logpmf(y, 1.3, 4, 1e-7), stats::dpois(y, 5.2, log = TRUE),
               tolerance = 1e-5)
})

test_that("the sum of E cells, each NB(rate, dispersion phi), is NB(E rate, size E / phi)", {
  rate <- 1.7
  phi <- 0.4
  cell <- stats::dnbinom(0:400, size = 1 / phi, mu = rate)
  convolved <- cell
  for (e in 2:4) {
    convolved <- vapply(0:400, function(n) sum(convolved[seq_len(n + 1)] * cell[(n + 1):1]),
                        numeric(1))
  }
  expect_equal(log(convolved[1:60]), reference_count_nb_logpmf(0:59, rate, 4, phi),
               tolerance = 1e-9)
})

# The objective (model vignette §13.2) ------------------------------------------

reference_count_case <- function() {
  bins <- 6
  curves <- data.frame(context = "ctx", species = "g1", treatment = "ref",
                       component = c("Rt", "Rt", "tslope", "tpoint"), block = c(1, 2, 1, 1),
                       value = c(1, 2, 1, 2.5), stringsAsFactors = FALSE)
  rows <- data.frame(animal = c("a", "a", "b", "b"), context = "ctx", species = "g1",
                     treatment = "ref", bin = c(1, 5, 2, 6), count = c(3, 9, 1, 40),
                     exposure = c(2, 3, 1, 5), stringsAsFactors = FALSE)
  u <- data.frame(species = "g1", animal = c("a", "b"), point = c(0.1, -0.2),
                  rate = c(0.2, 0.05), slope = c(-0.1, 0.3), stringsAsFactors = FALSE)
  sigma <- matrix(c(0.5, 0.3, 0.4), 1, dimnames = list("g1", c("point", "rate", "slope")))
  log_phi <- matrix(log(0.3), 1, 1, dimnames = list("ctx", "g1"))
  list(bins = bins, curves = curves, rows = rows, u = u, sigma = sigma, log_phi = log_phi)
}

test_that("the objective is minus the NB log-likelihood of the warped curves plus u^2 / (2 sigma^2)", {
  case <- reference_count_case()
  # By hand: the animal curves of model vignette §7.2 and dnbinom.
  loglik <- numeric(4)
  for (i in 1:4) {
    u <- case$u[case$u$animal == case$rows$animal[i], ]
    R <- c(1, 2) * exp(u$rate)
    s <- 8 * stats::plogis(stats::qlogis(1 / 8) + u$slope)
    # gap ceiling(6 / 20) = 1: p = 1.5 + 4 q, q = (2.5 - 1.5) / 4
    p <- 1.5 + 4 * stats::plogis(stats::qlogis((2.5 - 1.5) / 4) + u$point)
    psi <- R[1] + (R[2] - R[1]) * stats::plogis(s * (case$rows$bin[i] - p))
    e <- case$rows$exposure[i]
    # r(psi) = expm1(psi) + epsilon for rates far above tau
    loglik[i] <- stats::dnbinom(case$rows$count[i], size = e / 0.3, mu = e * (expm1(psi) + 1e-8),
                                log = TRUE)
  }
  penalty <- sum(case$u$point^2) / (2 * 0.25) + sum(case$u$rate^2) / (2 * 0.09) +
    sum(case$u$slope^2) / (2 * 0.16)
  result <- reference_count_objective(case$rows, case$curves, case$u, case$log_phi, case$sigma,
                                      bins = case$bins)
  expect_equal(result$loglik, loglik, tolerance = 1e-12)
  expect_equal(result$nll, -sum(loglik), tolerance = 1e-12)
  expect_equal(result$penalty, penalty, tolerance = 1e-12)
  expect_equal(result$value, -sum(loglik) + penalty, tolerance = 1e-12)
})

test_that("a u whose sigma is 0 must be 0 and adds nothing", {
  case <- reference_count_case()
  case$sigma[, "slope"] <- 0
  expect_error(reference_count_objective(case$rows, case$curves, case$u, case$log_phi,
                                         case$sigma, bins = case$bins), "sigma is 0")
  case$u$slope <- 0
  with_zero <- reference_count_objective(case$rows, case$curves, case$u, case$log_phi,
                                         case$sigma, bins = case$bins)
  expected <- sum(case$u$point^2) / (2 * 0.25) + sum(case$u$rate^2) / (2 * 0.09)
  expect_equal(with_zero$penalty, expected)
  # no u at all: every animal on the population curve, no penalty
  none <- reference_count_objective(case$rows, case$curves, NULL, case$log_phi, case$sigma,
                                    bins = case$bins)
  expect_identical(none$penalty, 0)
  curve <- list(R = c(1, 2), s = 1, p = 2.5)
  expect_equal(none$psi, reference_count_psi(case$rows$bin, curve))
})

test_that("log phi = -Inf is the Poisson likelihood", {
  case <- reference_count_case()
  case$log_phi[] <- -Inf
  result <- reference_count_objective(case$rows, case$curves, NULL, case$log_phi, case$sigma,
                                      bins = case$bins)
  mu <- case$rows$exposure * (expm1(result$psi) + 1e-8)
  expect_equal(result$loglik, stats::dpois(case$rows$count, mu, log = TRUE), tolerance = 1e-12)
})

# Finite-difference gradient --------------------------------------------------------

test_that("the coordinates are theta of §11.2, log phi and the free u, and unpack reads them back", {
  case <- reference_count_case()
  x <- reference_count_pack(case$curves, case$u, case$log_phi, case$sigma, case$bins)
  # By hand (model vignette §11.2): B = 6, gap ceiling(6 / 20) = 1; R = (1, 2);
  # theta_s = logit(1 / 8) = log(1 / 7); p = 2.5 = 0.5 + 1 + (6 - 2) q, q = 1 / 4,
  # theta_p = logit(1 / 4) = log(1 / 3); rho = log 0.3; then every u.
  expected <- c(theta_ctx_g1_ref_R1 = 1, theta_ctx_g1_ref_R2 = 2,
                theta_ctx_g1_ref_s1 = log(1 / 7), theta_ctx_g1_ref_p1 = log(1 / 3),
                rho_ctx_g1 = log(0.3),
                u_point_a_X_g1 = 0.1, u_rate_a_X_g1 = 0.2, u_slope_a_X_g1 = -0.1,
                u_point_b_X_g1 = -0.2, u_rate_b_X_g1 = 0.05, u_slope_b_X_g1 = 0.3)
  expect_equal(x, expected, tolerance = 1e-12)
  # Moved coordinates give the curve of the transforms by hand: theta_s = 0 is
  # s = 8 sigma(0) = 4; theta_p = 0 is q = 1 / 2, p = 1.5 + 4 / 2 = 3.5.
  moved <- replace(x, c("theta_ctx_g1_ref_s1", "theta_ctx_g1_ref_p1", "rho_ctx_g1",
                        "u_rate_b_X_g1"), c(0, 0, log(2), -0.4))
  parts <- reference_count_unpack(moved, case$curves, case$u, case$log_phi, case$bins)
  expect_equal(parts$curves$value, c(1, 2, 4, 3.5), tolerance = 1e-12)
  expect_equal(parts$log_phi[["ctx", "g1"]], log(2))
  expect_equal(parts$u$rate, c(0.2, -0.4))
  # A curve coordinate that is not there reads as NA (the oracle checks for it).
  expect_true(is.na(reference_count_unpack(x[-1], case$curves, case$u, case$log_phi,
                                           case$bins)$curves$value[1]))
})

# Priors and held effects (model vignette §11.3, §15.4) --------------------------

# Two treatments (W = [1 0; 1 1]: beta_2 = v_2 - v_1), one degree-1 curve each,
# two animals with mean rate warp 0.1 and mean slope warp -0.2.
reference_count_prior_case <- function() {
  bins <- 20
  curves <- data.frame(context = "ctx", species = "g1", treatment = rep(c("ref", "KO"), each = 4),
                       component = rep(c("Rt", "Rt", "tslope", "tpoint"), 2),
                       block = rep(c(1, 2, 1, 1), 2),
                       value = c(1, 2.5, 0.8, 8, 1.4, 2.2, 2, 12), stringsAsFactors = FALSE)
  u <- data.frame(species = "g1", animal = c("a", "b"), point = c(0.3, -0.1),
                  rate = c(0.25, -0.05), slope = c(-0.5, 0.1), stringsAsFactors = FALSE)
  weights <- matrix(c(1, 1, 0, 1), 2, dimnames = list(c("ref", "KO"), c("ref", "KO")))
  list(bins = bins, curves = curves, u = u, weights = weights)
}

test_that("the priors are the vignette's sums, at the animals' mean warps", {
  case <- reference_count_prior_case()
  # theta by hand: gap 1, free width 20 - 2 = 18, q = (p - 1.5) / 18.
  theta_s <- stats::qlogis(c(0.8, 2) / 8)
  theta_p <- stats::qlogis((c(8, 12) - 1.5) / 18)
  rates <- rbind(ref = c(1, 2.5), KO = c(1.4, 2.2))
  e <- exp(0.1)
  slope <- sum((theta_s - 0.2 - log(1 / 7))^2) / (2 * 1.5^2)
  step <- sum(((rates[, 2] - rates[, 1]) * e)^2) / (2 * 0.8^2)
  effect <- (sum(((rates["KO", ] - rates["ref", ]) * e)^2) + diff(theta_s)^2 + diff(theta_p)^2) /
    (2 * 0.6^2)
  prior <- function(...) reference_count_prior(case$curves, case$u, case$bins,
                                               list(weights = case$weights, ...))
  expect_equal(prior(slope_sd = 1.5), slope, tolerance = 1e-12)
  expect_equal(prior(step_sd = 0.8), step, tolerance = 1e-12)
  expect_equal(prior(effect_sd = 0.6), effect, tolerance = 1e-12)
  expect_equal(prior(slope_sd = 1.5, step_sd = 0.8, effect_sd = 0.6), slope + step + effect,
               tolerance = 1e-12)
  expect_identical(prior(slope_sd = 0, step_sd = 0, effect_sd = 0), 0)
  # Without u the mean warps are 0: the plain priors.
  plain <- reference_count_prior(case$curves, NULL, case$bins,
                                 list(step_sd = 0.8, weights = case$weights))
  expect_equal(plain, sum((rates[, 2] - rates[, 1])^2) / (2 * 0.8^2), tolerance = 1e-12)
  # Moving the population rates by e^c and every rate warp by -c, or every
  # slope logit by c and every slope warp by -c, leaves the priors as they were.
  shifted <- case$curves
  shifted$value[shifted$component == "Rt"] <- shifted$value[shifted$component == "Rt"] * exp(0.3)
  logits <- stats::qlogis(shifted$value[shifted$component == "tslope"] / 8) + 0.4
  shifted$value[shifted$component == "tslope"] <- 8 * stats::plogis(logits)
  moved_u <- transform(case$u, rate = rate - 0.3, slope = slope - 0.4)
  all_three <- list(slope_sd = 1.5, step_sd = 0.8, effect_sd = 0.6, weights = case$weights)
  expect_equal(reference_count_prior(shifted, moved_u, case$bins, all_three),
               slope + step + effect, tolerance = 1e-10)
})

test_that("a held effect adds p / 2 beta^2 on theta, with its analytic gradient", {
  case <- reference_count_prior_case()
  settings <- list(weights = case$weights, held = "KO")
  theta_s <- stats::qlogis(c(0.8, 2) / 8)
  theta_p <- stats::qlogis((c(8, 12) - 1.5) / 18)
  # beta_KO = v_KO - v_ref of each unknown, on theta itself (no mean warps).
  beta <- c(1.4 - 1, 2.2 - 2.5, diff(theta_s), diff(theta_p))
  expect_equal(reference_count_prior(case$curves, case$u, case$bins, settings),
               1e8 / 2 * sum(beta^2), tolerance = 1e-12)
  gradient <- reference_count_held_gradient(case$curves, case$bins, settings)
  labels <- c("R1", "R2", "s1", "p1")
  expect_equal(unname(gradient[paste0("theta_ctx_g1_KO_", labels)]), 1e8 * beta, tolerance = 1e-12)
  expect_equal(unname(gradient[paste0("theta_ctx_g1_ref_", labels)]), -1e8 * beta,
               tolerance = 1e-12)
})

test_that("the finite-difference gradient matches analytic derivatives of a flat curve", {
  # One degree-0 curve R, one row: J = -loglik(y | E r(R e^u)) + u^2 / (2 sigma^2).
  R <- 1.2
  u_rate <- 0.15
  sigma_rate <- 0.3
  phi <- 0.25
  y <- 7
  e <- 2
  curves <- data.frame(context = "ctx", species = "g1", treatment = "ref", component = "Rt",
                       block = 1, value = R, stringsAsFactors = FALSE)
  rows <- data.frame(animal = "a", context = "ctx", species = "g1", treatment = "ref", bin = 3,
                     count = y, exposure = e, stringsAsFactors = FALSE)
  u <- data.frame(species = "g1", animal = "a", point = 0, rate = u_rate, slope = 0,
                  stringsAsFactors = FALSE)
  sigma <- matrix(c(0, sigma_rate, 0), 1, dimnames = list("g1", c("point", "rate", "slope")))
  log_phi <- matrix(log(phi), 1, 1, dimnames = list("ctx", "g1"))
  gradient <- reference_count_gradient(rows, curves, u, log_phi, sigma, bins = 5)
  expect_named(gradient, c("theta_ctx_g1_ref_R1", "rho_ctx_g1", "u_rate_a_X_g1"))

  psi <- R * exp(u_rate)
  rate_derivative <- stats::plogis(expm1(psi) / 1e-3) * exp(psi)   # d r / d psi
  mu <- e * (expm1(psi) + 1e-8)                                    # r(psi) far above tau
  k <- e / phi
  dloglik_dmu <- y / mu - (y + k) / (k + mu)
  dloglik_dpsi <- dloglik_dmu * e * rate_derivative
  expect_equal(gradient[["theta_ctx_g1_ref_R1"]], -dloglik_dpsi * exp(u_rate), tolerance = 1e-6)
  expect_equal(gradient[["u_rate_a_X_g1"]], -dloglik_dpsi * psi + u_rate / sigma_rate^2,
               tolerance = 1e-6)
  dloglik_dk <- digamma(y + k) - digamma(k) + log(k / (k + mu)) + (mu - y) / (k + mu)
  expect_equal(gradient[["rho_ctx_g1"]], k * dloglik_dk, tolerance = 1e-6)
})

test_that("the finite-difference gradient in u is the likelihood's plus u / sigma^2", {
  case <- reference_count_case()
  # Animal b has no rows: its u enters J through the penalty alone.
  rows <- case$rows[case$rows$animal == "a", ]
  gradient <- reference_count_gradient(rows, case$curves, case$u, case$log_phi, case$sigma,
                                       bins = case$bins)
  expect_equal(unname(gradient[c("u_point_b_X_g1", "u_rate_b_X_g1", "u_slope_b_X_g1")]),
               c(-0.2 / 0.25, 0.05 / 0.09, 0.3 / 0.16), tolerance = 1e-7)
  # For animal a, a sigma so wide that the penalty vanishes leaves the likelihood's part.
  wide <- case$sigma
  wide[] <- 1e8
  likelihood_part <- reference_count_gradient(rows, case$curves, case$u, case$log_phi, wide,
                                              bins = case$bins)
  expect_equal(gradient[["u_rate_a_X_g1"]] - likelihood_part[["u_rate_a_X_g1"]], 0.2 / 0.09,
               tolerance = 1e-6)
  expect_equal(gradient[["u_point_a_X_g1"]] - likelihood_part[["u_point_a_X_g1"]], 0.1 / 0.25,
               tolerance = 1e-6)
})
