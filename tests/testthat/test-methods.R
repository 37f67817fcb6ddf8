# S3 methods of "wisp" fits and "wisp_bootstrap" results, for both likelihoods:
# the count likelihood ("nb", the default) and the original objective.

methods_counts <- function() {
  counts <- wisp_simulate(n.genes = 2, n.bins = 40, seed = 1)
  # Empty cells: mouse2 has no tokens of gene1 in bins 3 to 6.
  counts[!(counts$ran == "mouse2" & counts$bin %in% 3:6 & counts$species == "gene1"), ]
}

# Wald statistics: this file checks them against Wald tests by hand (the
# default's profile checks are tested in test-profile.R).
methods_fit <- once(function() {
  wisp(methods_counts(), model.settings = list(LRO_cost = "none"), verbose = FALSE,
       statistics = "wald")
})

methods_fit_original <- once(function() {
  wisp(methods_counts(), model.settings = list(likelihood = "original", LRO_cost = "none"),
       verbose = FALSE)
})

methods_booted <- once(function() {
  suppressWarnings(wisp(methods_counts(), model.settings = list(LRO_cost = "none"),
                        bootstraps.num = 20, ran.seed = 1, verbose = FALSE))
})

methods_booted_original <- once(function() {
  suppressWarnings(wisp(methods_counts(),
                        model.settings = list(likelihood = "original", LRO_cost = "none"),
                        bootstraps.num = 20, ran.seed = 1, verbose = FALSE))
})

# Observed rows of a count fit, from the data alone: every measured cell key
# (animal, context, treatment, bin) once per gene; a gene without tokens in a
# measured cell counts 0 there.
observed_count_rows <- function(counts) {
  nrow(unique(counts[c("ran", "context", "hemisphere", "bin")])) * length(unique(counts$species))
}

# A slope effect's Wald test by hand (model vignette §15.1): with z the
# treatments' slopes (W times the curve's baseline and effects) and w the
# effect's row of W^-1, P and N are the sums of w_t z_t over the positive and
# of |w_t| z_t over the negative weights; rho = log(P / N) has the delta-method
# variance g' Cov(z) g with g_t = w_t / P (w_t > 0) or w_t / N (w_t < 0);
# the interval of rho maps back through 2 sqrt(P N) sinh(rho / 2).
slope_ratio_by_hand <- function(fit, name, level, df = Inf) {
  p <- fit$parameters
  at <- match(name, p$name)
  curve <- p$name[p$species == p$species[at] & p$context == p$context[at] &
                    p$block == p$block[at] & p$component == "tslope" &
                    p$role %in% c("baseline", "beta")]
  curve <- curve[order(match(p$treatment[match(curve, p$name)], fit$treatment$names))]
  W <- fit$weight.matrix
  z <- drop(W %*% coef(fit, "fixed")[curve])
  covariance <- W %*% vcov(fit)[curve, curve] %*% t(W)
  w <- solve(W)[match(name, curve), ]
  P <- sum((w * z)[w > 0])
  N <- -sum((w * z)[w < 0])
  g <- ifelse(w > 0, w / P, ifelse(w < 0, w / N, 0))
  rho <- log(P / N)
  se <- sqrt(drop(t(g) %*% covariance %*% g))
  q <- if (is.finite(df)) stats::qt(1 - (1 - level) / 2, df) else stats::qnorm(1 - (1 - level) / 2)
  list(p.value = if (is.finite(df)) 2 * stats::pt(-abs(rho / se), df) else 2 * stats::pnorm(-abs(rho / se)),
       lower = 2 * sqrt(P * N) * sinh((rho - q * se) / 2),
       upper = 2 * sqrt(P * N) * sinh((rho + q * se) / 2))
}

# Wald statistics of a count fit's fixed effects by hand, from vcov() and the
# definitions of R/inference.R. Hemisphere varies within animals, so every
# quantile is normal.
wald_by_hand <- function(fit, level = 0.95) {
  estimate <- coef(fit, "fixed")
  variance <- diag(vcov(fit))[names(estimate)]
  se <- ifelse(is.finite(variance) & variance > 0, sqrt(variance), NA_real_)
  z <- stats::qnorm(1 - (1 - level) / 2)
  parameters <- fit$parameters[match(names(estimate), fit$parameters$name), ]
  beta <- parameters$role == "beta"
  p <- ifelse(beta & !is.na(se), 2 * stats::pnorm(-abs(estimate / se)), NA_real_)
  lower <- estimate - z * se
  upper <- estimate + z * se
  for (i in which(beta & parameters$component == "tslope" & !is.na(se))) {
    ratio <- slope_ratio_by_hand(fit, names(estimate)[i], level)
    p[i] <- ratio$p.value
    lower[i] <- ratio$lower
    upper[i] <- ratio$upper
  }
  adjusted <- rep(NA_real_, length(p))
  adjusted[!is.na(p)] <- holm_by_gene(fit, stats::setNames(p, names(estimate))[!is.na(p)])
  data.frame(parameter = names(estimate), estimate = unname(estimate), se = unname(se),
             lower = unname(lower), upper = unname(upper),
             p.value = unname(p), p.value.adj = adjusted, component = parameters$component,
             stringsAsFactors = FALSE)
}

# The replicates the statistics of a bootstrapped fit use: the converged
# ones (wisp(converged.resamples.only = TRUE), the default).
used_replicates <- function(booted) {
  d <- booted$bootstrap$diagnostics
  booted$bootstrap$t[d$ok & d$converged %in% TRUE, , drop = FALSE]
}

# The order-statistic interval of R/inference.R by hand: the k-th smallest
# and k-th largest replicate, k = ceiling(alpha (R + 1) / 2) - 1, (-Inf, Inf)
# when k < 1.
order_statistics <- function(x, level) {
  x <- sort(x[!is.na(x)])
  if (!length(x)) return(c(NA_real_, NA_real_))
  k <- ceiling(round((1 - level) * (length(x) + 1) / 2, 9)) - 1
  if (k < 1) return(c(-Inf, Inf))
  c(x[k], x[length(x) + 1 - k])
}

# The bootstrap p-value of R/inference.R by hand.
percentile_p_value <- function(x) {
  x <- x[!is.na(x)]
  min(1, 2 * (min(sum(x <= 0), sum(x >= 0)) + 1) / (length(x) + 1))
}

test_that("print.wisp shows the fit and whether it was bootstrapped", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  fit <- methods_fit_original()
  out <- capture.output(res <- print(fit))
  expect_identical(res, fit)
  expect_true(any(grepl("632 observed", out, fixed = TRUE)))
  expect_true(any(grepl("Not bootstrapped", out, fixed = TRUE)))
  expect_true(any(grepl("Transitions per curve", out, fixed = TRUE)))
  out <- capture.output(print(methods_booted_original()))
  expect_true(any(grepl("Bootstrapped: 20 replicates", out, fixed = TRUE)))

  # The count likelihood: its observed rows, and its Wald tests instead of
  # advice to bootstrap for them.
  fit <- methods_fit()
  # gene1's slope warps are barely informed by 3 animals: its variance
  # updates must still settle (they once cycled through all 200).
  expect_true(fit$fit.diagnostics$converged)
  out <- capture.output(res <- print(fit))
  expect_identical(res, fit)
  expect_identical(observed_count_rows(methods_counts()), 480L)
  expect_true(any(grepl("640 summed rows (480 observed)", out, fixed = TRUE)))
  expect_true(any(grepl("Transitions per curve", out, fixed = TRUE)))
  wald <- wald_by_hand(fit)
  expect_true(any(grepl(sprintf("Not bootstrapped; Wald tests of %d treatment effects: %d significant",
                                sum(!is.na(wald$p.value)), sum(wald$p.value.adj < 0.05, na.rm = TRUE)),
                        out, fixed = TRUE)))
  expect_false(any(grepl("bootstraps.num", out, fixed = TRUE)))
  booted <- methods_booted()
  out <- capture.output(print(booted))
  expect_true(any(grepl("Bootstrapped: 20 replicates", out, fixed = TRUE)))
  # Its percentile tests too (by hand: p = min(1, 2 min(#{x <= 0} + 1,
  # #{x >= 0} + 1) / (R + 1)), Holm over the treatment effects), and that
  # 20 replicates are too few: 2 / 21 x m is not below 0.05.
  replicates <- used_replicates(booted)
  beta <- booted$parameters$name[booted$parameters$role == "beta"]
  p <- vapply(beta, function(name) percentile_p_value(replicates[, name]), numeric(1))
  expect_true(any(grepl(sprintf("Percentile tests from %d replicates of %d treatment effects: %d significant",
                                nrow(replicates), length(beta), sum(holm_by_gene(booted, p) < 0.05)),
                        out, fixed = TRUE)))
  # Holm within a gene: 2 m / alpha replicates for the gene with the most (m) effects.
  largest_family <- max(table(booted$parameters$species[booted$parameters$role == "beta"]))
  expect_true(any(grepl(sprintf("too few replicates to reject any (%d needed)",
                                40L * largest_family), out, fixed = TRUE)))
})

test_that("fits and bootstraps record the wispack that made them, and summary() says which", {
  version <- as.character(utils::packageVersion("wispack"))
  for (fit in list(methods_fit(), methods_fit_original(), methods_booted())) {
    label <- fit_label(fit)
    made <- fit$provenance
    expect_identical(made$package, "wispack", label = label)
    expect_identical(made$version, version, label = label)
    expect_match(made$commit, "^([0-9a-f]{40}(-dirty)?|unknown)$", label = label)
    expect_identical(made$r, R.version.string, label = label)
    expect_s3_class(made$created, "POSIXct")
    short <- if (made$commit == "unknown") "unknown" else
      paste0(substr(made$commit, 1, 7), if (endsWith(made$commit, "-dirty")) "-dirty")
    out <- capture.output(print(summary(fit)))
    expect_identical(out[length(out)],
                     sprintf("Made with wispack %s (commit %s)", version, short), label = label)
  }
  boot <- methods_booted()$bootstrap
  expect_identical(boot$provenance$version, version)
  expect_identical(boot$provenance$commit, methods_booted()$provenance$commit)
  expect_output(print(summary(boot)), sprintf("Run with wispack %s", version), fixed = TRUE)
  # A fit saved before wispack recorded its provenance still summarises.
  old <- suppressWarnings(readRDS(test_path("fixtures", "fit-v1.rds")))
  expect_null(old$provenance)
  out <- capture.output(print(suppressWarnings(summary(old))))
  expect_identical(out[length(out)], "Made with a wispack that did not record its version")
})

test_that("citation(\"wispack\") cites the package at its version", {
  cited <- utils::citation("wispack")
  expect_s3_class(cited, "citation")
  expect_match(format(cited, style = "text"), "wispack", fixed = TRUE)
  expect_match(format(cited, style = "text"),
               paste("R package version", utils::packageVersion("wispack")), fixed = TRUE)
})

test_that("summary.wisp has the fixed-effect table, with Wald statistics for the count likelihood", {
  fit <- methods_fit()
  s <- summary(fit)
  expect_s3_class(s, "summary.wisp")
  fixed <- fit$parameters$role %in% c("baseline", "beta")
  expect_identical(s$coefficients$parameter, fit$parameters$name[fixed])
  expect_equal(s$coefficients$estimate, unname(fit$fitted.parameters[fixed]))
  expect_false(s$bootstrapped)
  expect_true(s$tested)
  expect_identical(s$method, "wald")
  wald <- wald_by_hand(fit)
  expect_identical(s$coefficients$parameter, wald$parameter)
  expect_equal(s$coefficients$std.error, wald$se)
  expect_equal(s$coefficients$CI.low, wald$lower)
  expect_equal(s$coefficients$CI.high, wald$upper)
  expect_equal(s$coefficients$p.value, wald$p.value)
  expect_equal(s$coefficients$p.value.adj, wald$p.value.adj)
  # Only treatment effects are tested, each one that has a standard error.
  beta <- s$coefficients$role == "beta"
  expect_true(all(is.na(s$coefficients$p.value[!beta])))
  expect_identical(!is.na(s$coefficients$p.value[beta]), !is.na(wald$se[beta]))
  expect_identical(s$n.warp, sum(fit$parameters$role == "warp"))
  expect_output(print(s), "Wald tests")
  expect_output(print(s), "Signif.")
  # Another level recomputes the Wald statistics.
  s90 <- summary(fit, level = 0.9)
  expect_equal(s90$coefficients$CI.low, wald_by_hand(fit, 0.9)$lower)
  expect_output(print(s90), "90 %[[:space:]]+intervals")
})

test_that("summary.wisp of the original likelihood has estimates only until bootstrapped", {
  fit <- methods_fit_original()
  s <- summary(fit)
  expect_s3_class(s, "summary.wisp")
  fixed <- fit$parameters$role %in% c("baseline", "beta")
  expect_identical(s$coefficients$parameter, fit$parameters$name[fixed])
  expect_equal(s$coefficients$estimate, unname(fit$fitted.parameters[fixed]))
  expect_false(s$bootstrapped)
  expect_false("p.value" %in% names(s$coefficients))
  expect_identical(s$n.warp, sum(fit$parameters$role == "warp"))
  expect_output(print(s), "estimates only")
})

test_that("summary.wisp of a bootstrapped fit has percentile statistics, for both likelihoods", {
  for (booted in list(methods_booted(), methods_booted_original())) {
    label <- fit_label(booted)
    s <- summary(booted)
    expect_true(s$bootstrapped, label = label)
    expect_identical(s$method, "percentile", label = label)
    replicates <- used_replicates(booted)
    expect_identical(s$replicates, nrow(replicates), label = label)
    expect_identical(s$replicates, booted$stats$replicates.used, label = label)
    at <- match(s$coefficients$parameter, booted$stats$parameters$parameter)
    for (column in c("CI.low", "CI.high", "p.value", "p.value.adj", "significance")) {
      expect_identical(s$coefficients[[column]], booted$stats$parameters[[column]][at],
                       label = paste(label, column))
    }
    beta <- s$coefficients$role == "beta"
    expect_true(all(!is.na(s$coefficients$p.value[beta])), label = label)
    expect_true(all(is.na(s$coefficients$p.value[!beta])), label = label)
    # The p-values and intervals by their definitions.
    by_hand <- vapply(s$coefficients$parameter[beta],
                      function(name) percentile_p_value(replicates[, name]), numeric(1))
    expect_equal(s$coefficients$p.value[beta], unname(by_hand), label = label)
    expect_equal(s$coefficients$p.value.adj[beta], unname(holm_by_gene(booted, by_hand)),
                 label = label)
    expect_true(all(s$coefficients$p.value[beta] >= 2 / (nrow(replicates) + 1)), label = label)
    intervals <- vapply(s$coefficients$parameter,
                        function(name) order_statistics(replicates[, name], 0.95), numeric(2))
    expect_equal(s$coefficients$CI.low, unname(intervals[1, ]), label = label)
    expect_equal(s$coefficients$CI.high, unname(intervals[2, ]), label = label)
    expect_output(print(s), "Signif.")
    expect_output(print(s), "percentile intervals")
    expect_output(print(s, max.rows = 3), "more rows")
  }
})

test_that("coef.wisp selects parameters by role", {
  for (fit in list(methods_fit(), methods_fit_original())) {
    label <- fit_label(fit)
    p <- fit$parameters
    expect_identical(coef(fit), fit$fitted.parameters, label = label)
    for (role in c("baseline", "beta", "warp")) {
      expect_identical(names(coef(fit, role)), p$name[p$role == role], label = label)
    }
    expect_identical(names(coef(fit, "fixed")), p$name[p$role %in% c("baseline", "beta")],
                     label = label)
    expect_length(coef(fit, "fixed"), length(coef(fit, "baseline")) + length(coef(fit, "beta")))
    expect_error(coef(fit, "nope"), class = "wisp_input_error")
  }
  # The original has no other roles; the count likelihood adds the
  # random-effect SDs and the dispersions, which are not fixed effects.
  expect_setequal(unique(methods_fit_original()$parameters$role), c("baseline", "beta", "warp"))
  expect_setequal(unique(methods_fit()$parameters$role),
                  c("baseline", "beta", "warp", "sd", "dispersion"))
})

test_that("confint.wisp gives Wald intervals for the count likelihood", {
  fit <- methods_fit()
  wald <- wald_by_hand(fit)
  ci <- confint(fit)
  expect_true(is.matrix(ci))
  expect_identical(rownames(ci), names(coef(fit, "fixed")))
  expect_identical(colnames(ci), c("2.5 %", "97.5 %"))
  expect_equal(unname(ci[, 1]), wald$lower)
  expect_equal(unname(ci[, 2]), wald$upper)
  expect_identical(confint(fit, method = "wald"), ci)
  # No standard error, no interval; a standard error, an interval.
  expect_identical(unname(is.na(ci[, 1])), is.na(wald$se))
  expect_identical(unname(is.na(ci[, 2])), is.na(wald$se))
  expect_true(all(ci[!is.na(wald$se), 1] < ci[!is.na(wald$se), 2]))
  beta <- names(coef(fit, "beta"))
  ci90 <- confint(fit, beta, level = 0.9)
  expect_identical(colnames(ci90), c("5 %", "95 %"))
  wald90 <- wald_by_hand(fit, 0.9)
  expect_equal(unname(ci90[, 1]), wald90$lower[match(beta, wald90$parameter)])
  # Outside the slopes the interval is estimate +/- quantile x SE.
  linear <- wald$component[match(beta, wald$parameter)] != "tslope"
  expect_gt(sum(!linear & !is.na(ci90[, 1])), 0)
  expect_equal(unname(ci90[linear, 1]), wald$lower[match(beta, wald$parameter)][linear] +
                 (stats::qnorm(0.975) - stats::qnorm(0.95)) * wald$se[match(beta, wald$parameter)][linear])
  expect_identical(confint(fit, 2:3), ci[2:3, , drop = FALSE])
  expect_error(confint(fit, method = "bootstrap"), class = "wisp_input_error")
  expect_error(confint(fit, "not a parameter"), class = "wisp_input_error")
  # Users reach vcov() and wisp_statistics() from outside the namespace.
  expect_true("wisp_statistics" %in% getNamespaceExports("wispack"))
  expect_false(is.null(getS3method("vcov", "wisp", optional = TRUE, envir = globalenv())))
  expect_equal(evalq(stats::vcov(fit), list(fit = fit), globalenv()), vcov(fit))
  # The original's objective is not a likelihood: no Wald intervals.
  expect_error(confint(methods_fit_original()), class = "wisp_input_error", regexp = "count likelihood")
  expect_error(vcov(methods_fit_original()), class = "wisp_input_error")
})

test_that("Wald intervals of between-animal effects use t quantiles with Satterthwaite df", {
  design <- wisp_design(between = list(genotype = c("WT", "KO")),
                        within = list(hemisphere = c("left", "right")), animals.per.group = 2)
  counts <- wisp_simulate(design = design, n.genes = 2, n.bins = 30, degrees = 1L, seed = 16)
  # Genotype is the between-animal factor: one genotype per animal.
  expect_true(all(tapply(counts$genotype, counts$ran, function(g) length(unique(g))) == 1))
  df <- length(unique(counts$ran)) - length(unique(counts$genotype))
  expect_identical(df, 2L)
  fit <- expect_silent(without_design_warning(
    wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE,
         statistics = "wald")))
  # WT and left are the reference levels (given first), so "KO" changes only
  # the genotype; "right" and "KO:right" change the hemisphere, within
  # animals.
  expect_identical(fit$treatment$names, c("WT:left", "KO", "right", "KO:right"))
  estimate <- coef(fit, "fixed")
  p <- fit$parameters[match(names(estimate), fit$parameters$name), ]
  variance <- diag(vcov(fit))[names(estimate)]
  se <- ifelse(is.finite(variance) & variance > 0, sqrt(variance), NA_real_)
  between <- p$treatment %in% "KO"
  expect_gt(sum(between & !is.na(se)), 0)
  s <- summary(fit)$coefficients
  expect_identical(s$parameter, names(estimate))
  # Between-animal effects: Satterthwaite df >= animals - groups; within: Inf.
  expect_true(all(s$df[between] >= df))
  expect_true(all(s$df[!between] == Inf))
  ddf <- s$df
  quantile <- ifelse(is.finite(ddf), stats::qt(0.975, ddf), stats::qnorm(0.975))
  ci <- confint(fit, method = "wald")
  linear <- p$component != "tslope"
  expect_equal(unname(ci[linear, 1]), unname(estimate - quantile * se)[linear])
  expect_equal(unname(ci[linear, 2]), unname(estimate + quantile * se)[linear])
  statistic <- estimate / se
  p_value <- ifelse(is.finite(ddf), 2 * stats::pt(-abs(statistic), ddf),
                    2 * stats::pnorm(-abs(statistic)))
  beta <- p$role == "beta"
  expect_equal(s$p.value[beta & linear], unname(p_value[beta & linear]))
  # Slope effects: the same df on the log-ratio scale.
  slopes <- which(beta & !linear & !is.na(se))
  expect_gt(sum(between[slopes]), 0)
  for (i in slopes) {
    ratio <- slope_ratio_by_hand(fit, names(estimate)[i], 0.95, ddf[i])
    expect_equal(s$p.value[i], ratio$p.value)
    expect_equal(unname(ci[i, ]), c(ratio$lower, ratio$upper))
  }

  # The df of the rate effects of genotype, computed here from a Hessian of J
  # by central differences of its gradient: V = g' H^-1 g with g the
  # effect's weights (row "KO" of W^-1) on the curves' rate coordinates,
  # V_within the same with the random effects' rows and columns removed,
  # df = (animals - groups) (V / (V - V_within))^2.
  species <- 0L
  at <- wispack:::count_objective_rust(fit$plan, species, NULL)
  x <- at$x
  n <- length(x)
  gradient <- function(x) wispack:::count_objective_rust(fit$plan, species, x)$gradient
  h <- 1e-5
  hessian <- vapply(seq_len(n), function(i) {
    step <- replace(numeric(n), i, h)
    (gradient(x + step) - gradient(x - step)) / (2 * h)
  }, numeric(n))
  hessian <- (hessian + t(hessian)) / 2
  inverse_weights <- solve(fit$weight.matrix)
  treatments <- nrow(inverse_weights)
  random <- grepl("^u\\[", at$names)
  expect_gt(sum(random), 0)
  rate_effects <- which(between & p$component == "Rt" & p$species == "gene1")
  expect_gt(length(rate_effects), 0)
  for (j in rate_effects) {
    block <- p$block[j] - 1L
    g <- numeric(n)
    for (t in seq_len(treatments)) {
      g[match(sprintf("theta[%d,%d]", t - 1L, block), at$names)] <- inverse_weights["KO", t]
    }
    expect_equal(sum(abs(g) > 0), treatments - sum(inverse_weights["KO", ] == 0))
    v <- drop(g %*% solve(hessian, g))
    within <- drop(g[!random] %*% solve(hessian[!random, !random], g[!random]))
    expect_equal(unname(variance[j]), v, tolerance = 1e-4)
    expect_equal(s$df[j], df * (v / (v - within))^2, tolerance = 1e-3)
  }
})

test_that("every Wald test agrees with its interval, slopes' log-ratio tests included", {
  fit <- methods_fit()
  for (level in c(0.8, 0.95, 0.99)) {
    s <- wisp_statistics(fit, method = "wald", level = level, adjustment = "none")$stats$parameters
    # p-values and limits against the formulas by hand (from vcov() and the
    # normal quantile, slopes' on the log-ratio scale), not against each other.
    hand <- wald_by_hand(fit, level)
    at <- match(hand$parameter, s$parameter)
    expect_false(anyNA(at))
    expect_equal(s$p.value[at], hand$p.value, info = paste(level))
    expect_equal(s$CI.low[at], hand$lower, info = paste(level))
    expect_equal(s$CI.high[at], hand$upper, info = paste(level))
    tested <- !is.na(s$p.value)
    slopes <- tested & grepl("^beta_tslope", s$parameter)
    expect_gt(sum(slopes), 0)
    # And the duality of test and interval holds for the hand values.
    excludes <- hand$lower > 0 | hand$upper < 0
    hand_tested <- !is.na(hand$p.value)
    expect_identical(hand$p.value[hand_tested] < 1 - level, excludes[hand_tested],
                     info = paste(level))
    # The sinh map sends rho-hat to the estimate, so the interval holds it.
    expect_true(all(s$CI.low[slopes] < s$estimate[slopes] & s$estimate[slopes] < s$CI.high[slopes]))
  }
})

test_that("Satterthwaite df follow the formula, from animals - groups up to Inf", {
  expect_equal(wispack:::satterthwaite_df(c(2, 1, 1, 3), c(1, 0, 1, NA), 4),
               c(4 * (2 / 1)^2, 4, Inf, NA))
})

test_that("confint.wisp gives order-statistic intervals from the replicates, for both likelihoods", {
  for (booted in list(methods_booted(), methods_booted_original())) {
    label <- fit_label(booted)
    replicates <- used_replicates(booted)
    for (level in c(0.95, 0.9, 0.8)) {
      ci <- confint(booted, level = level)
      expect_true(is.matrix(ci), label = label)
      expect_identical(dim(ci), c(length(booted$fitted.parameters), 2L), label = label)
      expect_identical(rownames(ci), names(booted$fitted.parameters), label = label)
      by_hand <- apply(replicates, 2, order_statistics, level = level)
      expect_equal(unname(ci), unname(t(by_hand)), label = paste(label, level))
      expect_identical(confint(booted, method = "bootstrap", level = level), ci, label = label)
    }
    # 20 replicates or fewer are too few for a 95 % interval: k = 0.
    expect_lte(nrow(replicates), 20)
    # Parameters the scheme does not resample (warps under resample =
    # "animals") have NaN replicates and NA limits.
    resampled <- colSums(is.finite(replicates)) > 0
    expect_true(all(confint(booted)[resampled, 1] == -Inf &
                      confint(booted)[resampled, 2] == Inf), label = label)
    expect_true(all(is.na(confint(booted)[!resampled, ])), label = label)
    expect_identical(colnames(confint(booted)), c("2.5 %", "97.5 %"))

    beta <- names(coef(booted, "beta"))
    ci90 <- confint(booted, beta, level = 0.9)
    expect_identical(rownames(ci90), beta, label = label)
    expect_identical(colnames(ci90), c("5 %", "95 %"), label = label)
    ci80 <- confint(booted, level = 0.8)
    expect_identical(confint(booted, 2:3, level = 0.8), ci80[2:3, , drop = FALSE], label = label)
    expect_error(confint(booted, "not a parameter"), class = "wisp_input_error")
    expect_error(confint(booted, level = 2), class = "wisp_input_error")
    # The bootstrap object itself: every successful replicate.
    ok <- booted$bootstrap$diagnostics$ok
    expect_equal(unname(confint(booted$bootstrap, level = 0.8)),
                 unname(t(apply(booted$bootstrap$t[ok, , drop = FALSE], 2, order_statistics,
                                level = 0.8))), label = label)
  }
  # The original's replicates all converge here, so both give the same intervals.
  booted <- methods_booted_original()
  expect_true(all(booted$bootstrap$diagnostics$converged))
  expect_equal(confint(booted$bootstrap, level = 0.8), confint(booted, level = 0.8))
  # With replicates, Wald intervals are still there for the count likelihood.
  expect_equal(confint(methods_booted(), method = "wald"), confint(methods_fit()))
})

test_that("fitted.wisp and residuals.wisp follow R's conventions", {
  for (fit in list(methods_fit(), methods_fit_original())) {
    label <- fit_label(fit)
    d <- fit$count.data.summed
    expect_identical(fitted(fit), d$pred, label = label)
    expect_identical(fitted(fit, type = "link"), d$pred.log, label = label)
    expect_length(fitted(fit), nrow(d))
    r <- residuals(fit)
    expect_equal(r, d$count - d$pred, label = label)              # observed - fitted
    expect_equal(residuals(fit, "log"), d$count.log - d$pred.log, label = label)
    empty <- is.na(d$count)
    expect_true(all(is.na(r[empty])), label = label)
    expect_true(all(!is.na(r[!empty])), label = label)
    expect_equal(resid(fit), r, label = label)
    expect_error(residuals(fit, "pearson"), class = "wisp_input_error")
  }

  # Original: the 8 emptied cells have no count.
  d <- methods_fit_original()$count.data.summed
  expect_identical(sum(is.na(d$count)), 8L)
  expect_true(all(is.na(d$count[d$ran == "mouse2" & d$species == "gene1" & d$bin %in% 3:6])))

  # Count likelihood: mouse2's cells in bins 3 to 6 were measured (gene2 has
  # tokens there), so gene1 counts 0 there; only population rows have no count.
  fit <- methods_fit()
  d <- fit$count.data.summed
  expect_identical(is.na(d$count), d$ran == "none")
  emptied <- d$ran == "mouse2" & d$species == "gene1" & d$bin %in% 3:6
  expect_identical(sum(emptied), 8L)
  expect_true(all(d$count[emptied] == 0))
  # Fitted values are expected counts: exposure x rate, with the rate
  # r(psi) = 1e-8 + 1e-3 log(1 + exp((e^psi - 1) / 1e-3)) (model vignette §9.2);
  # the rate itself on population rows. The log scale is psi.
  x <- expm1(d$pred.log) / 1e-3
  rate <- 1e-8 + 1e-3 * (pmax(x, 0) + log1p(exp(-abs(x))))
  expect_equal(d$pred, ifelse(is.na(d$exposure), 1, d$exposure) * rate)
  expect_equal(d$count.log, log1p(d$count / d$exposure))
  # These data do not list every cell x gene pair (the emptied tokens), so
  # the exposure is 1 per bin.
  expect_identical(fit$exposure$rule, "none")
  expect_true(all(d$exposure[!is.na(d$count)] == 1))
})

test_that("predict.wisp equals fitted() on the training grid, for both likelihoods", {
  for (fit in list(methods_fit(), methods_fit_original())) {
    label <- fit_label(fit)
    d <- fit$count.data.summed
    expect_equal(predict(fit, type = "response"), fitted(fit), tolerance = 1e-12, label = label)
    expect_equal(predict(fit), fitted(fit, type = "link"), tolerance = 1e-12, label = label)

    set.seed(2)
    rows <- sample(nrow(d), 50)
    newdata <- d[rows, c("bin", "context", "species", "treatment", "ran")]
    expect_equal(predict(fit, newdata, type = "response"), d$pred[rows], tolerance = 1e-12,
                 label = label)
    expect_equal(predict(fit, newdata), d$pred.log[rows], tolerance = 1e-12, label = label)

    # Without `ran`: the population curve.
    grid <- data.frame(bin = 1:40, context = "context1", species = "gene2", treatment = "right")
    population <- d[d$ran == "none" & d$species == "gene2" & d$treatment == "right", ]
    expect_equal(predict(fit, grid, type = "response"), population$pred[order(population$bin)],
                 tolerance = 1e-12, label = label)
    # Fixed-effect columns instead of `treatment`.
    by_levels <- data.frame(bin = 1:40, context = "context1", species = "gene2",
                            hemisphere = "right")
    expect_equal(predict(fit, by_levels), predict(fit, grid), label = label)

    expect_error(predict(fit, transform(grid, bin = 0L)), class = "wisp_input_error")
    expect_error(predict(fit, transform(grid, bin = bin + 1L)), class = "wisp_input_error")
    expect_error(predict(fit, transform(grid, bin = 0.5)), class = "wisp_input_error")
    expect_error(predict(fit, transform(grid, species = "gene")), class = "wisp_input_error")
    expect_error(predict(fit, transform(grid, treatment = "middle")), class = "wisp_input_error")
    expect_error(predict(fit, grid[, -4]), class = "wisp_input_error")
    expect_error(predict(fit, transform(grid, ran = "mouse9")), class = "wisp_input_error")
  }
})

test_that("predict.wisp uses the estimates of a use.median fit", {
  skip_on_cran()
  for (likelihood in c("nb", "original")) {
    booted <- suppressWarnings(wisp(methods_counts(),
                                    model.settings = list(likelihood = likelihood, LRO_cost = "none"),
                                    bootstraps.num = 20, ran.seed = 1, use.median = TRUE,
                                    verbose = FALSE))
    expect_equal(predict(booted, type = "response"), fitted(booted), tolerance = 1e-12,
                 label = likelihood)
  }
})

test_that("logLik, nobs, AIC and BIC of the original use every parameter", {
  fit <- methods_fit_original()
  ll <- logLik(fit)
  expect_s3_class(ll, "logLik")
  expect_equal(as.numeric(ll), -fit$fit.diagnostics$neg.loglik)
  df <- length(fit$fitted.parameters)
  expect_identical(attr(ll, "df"), as.integer(df))
  n <- sum(!is.na(fit$count.data.summed$count))
  expect_identical(nobs(fit), n)
  expect_identical(attr(ll, "nobs"), n)
  expect_equal(AIC(fit), 2 * fit$fit.diagnostics$neg.loglik + 2 * df)
  expect_equal(BIC(fit), 2 * fit$fit.diagnostics$neg.loglik + log(n) * df)
})

test_that("logLik of the count likelihood counts informed fixed effects, SDs and dispersions", {
  fit <- methods_fit()
  ll <- logLik(fit)
  expect_s3_class(ll, "logLik")
  expect_equal(as.numeric(ll), -fit$fit.diagnostics$neg.loglik)
  # df by hand: fixed effects the data inform (not NaN), the three SDs of
  # each gene (3 animals: all estimated) and the dispersions.
  p <- fit$parameters
  estimates <- fit$fitted.parameters
  informed <- sum(p$role %in% c("baseline", "beta") & !is.nan(estimates))
  df <- informed + 3 * 2 + sum(p$role == "dispersion" & is.finite(estimates))
  expect_identical(sum(p$role == "sd"), 6L)
  expect_lt(df, length(estimates)) # the conditional modes are not parameters
  expect_identical(fit$fit.diagnostics$df, as.integer(df))
  expect_identical(attr(ll, "df"), as.integer(fit$fit.diagnostics$df))
  n <- observed_count_rows(methods_counts())
  expect_identical(nobs(fit), n)
  expect_identical(attr(ll, "nobs"), n)
  expect_equal(AIC(fit), 2 * fit$fit.diagnostics$neg.loglik + 2 * df)
  expect_equal(BIC(fit), 2 * fit$fit.diagnostics$neg.loglik + log(n) * df)
  expect_output(print(summary(fit)), sprintf("(df = %d, nobs = %d)", df, n), fixed = TRUE)
})

test_that("wisp_bootstrap: print, summary and as.data.frame", {
  for (booted in list(methods_booted(), methods_booted_original())) {
    label <- fit_label(booted)
    boot <- booted$bootstrap
    expect_s3_class(boot, "wisp_bootstrap")
    expect_identical(boot$resample, if (label == "nb") "parametric" else "cells")
    out <- capture.output(res <- print(boot))
    expect_identical(res, boot)
    expect_true(any(grepl("20 replicates", out, fixed = TRUE)), label = label)

    s <- summary(boot)
    expect_s3_class(s, "summary.wisp_bootstrap")
    expect_identical(sum(s$codes), 20L)
    expect_identical(s$ok, sum(boot$diagnostics$ok))
    expect_identical(s$converged, sum(boot$diagnostics$converged %in% TRUE))
    expect_identical(rownames(s$time), "seconds")
    expect_identical(rownames(s$memory), c("peak_rss_mb", "pss_mb", "private_dirty_mb"))
    expect_identical(names(s$time), c("min", "median", "mean", "max"))
    expect_equal(s$time$median, stats::median(boot$diagnostics$seconds))
    expect_output(print(s), "Convergence codes")

    df <- as.data.frame(boot)
    expect_s3_class(df, "data.frame")
    expect_identical(nrow(df), 20L)
    expect_identical(names(df), c("replicate", names(boot$diagnostics), names(boot$t0)))
    expect_identical(df$replicate, 1:20)
    expect_equal(unname(as.matrix(df[names(boot$t0)])), unname(boot$t), label = label)
    expect_identical(df$code, boot$diagnostics$code)
  }
})

test_that("wisp_bootstrap methods record failed replicates", {
  for (booted in list(methods_booted(), methods_booted_original())) {
    label <- fit_label(booted)
    boot <- booted$bootstrap
    boot$diagnostics$ok[2] <- FALSE
    boot$diagnostics$converged[2] <- NA
    boot$diagnostics$code[2] <- NA
    boot$diagnostics$reason[2] <- "timeout"
    boot$t[2, ] <- NA
    s <- summary(boot)
    expect_identical(unname(s$codes[["failed"]]), 1L)
    expect_identical(unname(s$reasons[["timeout"]]), 1L)
    expect_output(print(s), "Failure reasons")
    expect_true(all(is.na(unlist(as.data.frame(boot)[2, names(boot$t0)]))))
    ci <- confint(boot, level = 0.8)
    by_hand <- apply(boot$t[-2, ], 2, order_statistics, level = 0.8)
    expect_equal(unname(ci), unname(t(by_hand)), label = label)
    # 19 replicates at 80 %: k = ceiling(0.2 x 20 / 2) - 1 = 1, the extremes
    # (estimates a replicate could not inform, NaN, are left out).
    complete <- colSums(is.na(boot$t[-2, ])) == 0
    expect_equal(unname(ci[complete, 1]), unname(apply(boot$t[-2, complete], 2, min)), label = label)
    expect_equal(unname(ci[complete, 2]), unname(apply(boot$t[-2, complete], 2, max)), label = label)
  }
})
