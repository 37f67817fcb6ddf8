# Recovery of the simulated truth: the count likelihood ("nb", wisp()'s
# default) against the original objective ("original"), fitted with the true
# structure (degrees) to data from wisp_simulate() with animals nested in a
# between-animal factor and with animals crossed with the treatments.
#
# Usage (from the repository root, wispack installed, e.g. R_LIBS=<library>):
#   Rscript benchmarks/recovery.R quick [workers]  # data sets 1-6 (a minute or two)
#   Rscript benchmarks/recovery.R full [workers]   # data sets 1-100 (about 13 min on 2 shared cores)
#   Rscript benchmarks/recovery.R table            # the tables again from the CSVs
# workers: data sets fitted at once (default 2; each fit runs on one core).
#
# Stages: one RDS per data set under benchmarks/out/recovery/ (skipped when
# present, so an interrupted run resumes; quick's data sets are full's first
# six), then a summary per data set x data version x likelihood x component,
# then Markdown tables on stdout. full writes benchmarks/results/recovery.csv
# (per fit x component), recovery_fits.csv (per fit) and
# recovery_datasets.csv (the simulator's arguments); quick writes them under
# benchmarks/out/.

args <- commandArgs(trailingOnly = TRUE)
mode <- if (length(args) >= 1) args[1] else "quick"
workers <- if (length(args) >= 2) as.integer(args[2]) else 2L
if (!mode %in% c("quick", "full", "table") || is.na(workers) || workers < 1) {
  stop("usage: Rscript benchmarks/recovery.R quick|full|table [workers]")
}
suppressPackageStartupMessages(library(wispack))

n_datasets <- if (mode == "quick") 6L else 100L
out_dir <- "benchmarks/out/recovery"
csv_dir <- if (mode == "quick") "benchmarks/out" else "benchmarks/results"
summary_csv <- file.path(csv_dir, if (mode == "quick") "recovery_quick.csv" else "recovery.csv")
datasets_csv <- file.path(csv_dir, if (mode == "quick") "recovery_quick_datasets.csv" else
  "recovery_datasets.csv")
fits_csv <- file.path(csv_dir, if (mode == "quick") "recovery_quick_fits.csv" else
  "recovery_fits.csv")
fit_keys <- c("dataset", "cells", "likelihood")
fit_columns <- c(fit_keys, "design", "ok", "converged", "seconds", "max_gradient", "on_bound",
                 "nonfinite", "genes", "genes_worse_optimum", "genes_left_box", "objective_gap",
                 "pairs", "pairs_unreached", "curves_unreached")
bootstrap_replicates <- 2000L

# ---------------------------------------------------------------------------
# The data sets

# Simulator arguments of data set i: odd i nested, even i crossed; sizes
# drawn from a stream of their own, so data set i is the same in every mode.
# Every other argument of wisp_simulate() is at its default: degrees drawn
# from 0, 1, 2; effect.prob = 0.5; effect.size = 0.5 (log(1 + rate));
# slope.effect = 0.5 (x baseline slope); point.effect = n.bins / 20 bins;
# random.sd = (point 0.15, rate 0.1, slope 0.15).
dataset_arguments <- function(i) {
  set.seed(7000L + i)
  design <- if (i %% 2L == 1L) "nested" else "crossed"
  list(dataset = i, design = design,
       n.contexts = sample(1:2, 1, prob = c(0.7, 0.3)),
       n.genes = sample(3:6, 1),
       n.bins = sample(30:60, 1),
       # nested: animals in (KO, WT), possibly unbalanced; crossed: animals in all
       animals = if (design == "nested") sample(3:6, 2, replace = TRUE) else sample(3:6, 1),
       cells.per.bin = sample(2:5, 1),
       dispersion = round(stats::runif(1, 0.02, 0.2), 3),
       seed = 20000L + i)
}

simulate_dataset <- function(a, cells) {
  common <- list(n.contexts = a$n.contexts, n.genes = a$n.genes, n.bins = a$n.bins,
                 cells.per.bin = cells, dispersion = a$dispersion, seed = a$seed)
  if (a$design == "nested") {
    design <- wisp_design(between = list(genotype = c("WT", "KO")),
                          within = list(hemisphere = c("left", "right")),
                          animals.per.group = c(KO = a$animals[1], WT = a$animals[2]))
    do.call(wisp_simulate, c(list(design = design), common))
  } else {
    do.call(wisp_simulate, c(list(n.random = a$animals,
                                  fixed.effects = list(condition = c("control", "drug"),
                                                       hemisphere = c("left", "right"))),
                             common))
  }
}

# The true Rt values on the scale of log(1 + summed count of `cells` cells),
# the scale the original fits: z'(t) = log(1 + cells (exp(z(t)) - 1)) per
# treatment, then beta' = W^-1 z'. Exact for the block levels of the
# population curve; NA for other parameters.
summed_scale_truth <- function(truth, weights, parameters, cells) {
  curves <- truth$curves[truth$curves$component == "Rt", ]
  result <- rep(NA_real_, nrow(parameters))
  rt <- which(parameters$component == "Rt" & parameters$role %in% c("baseline", "beta"))
  for (key in unique(paste(parameters$context[rt], parameters$species[rt], parameters$block[rt]))) {
    rows <- rt[paste(parameters$context[rt], parameters$species[rt], parameters$block[rt]) == key]
    one <- curves[paste(curves$context, curves$species, curves$block) == key, ]
    z <- log1p(cells * expm1(one$value[match(rownames(weights), one$treatment)]))
    beta <- solve(weights, z)
    result[rows] <- beta[match(parameters$treatment[rows], colnames(weights))]
  }
  result
}

# ---------------------------------------------------------------------------
# A diagnostic of the count fit: is its optimum the one nearest the truth?
# Per gene, the fit's inner objective J (penalised, at the fit's sigma) is
# minimised again by BFGS from the true population curves (with the fitted
# random effects and dispersions), on the package's own objective
# (wispack:::count_objective_rust, the one the tests use). If that ends
# lower than the fit, inside the core's box bounds, the fit stopped in
# another, worse optimum.

# The optimiser's coordinates theta of one curve (model vignette §11.2; points on
# the buffered axis of the Rust core: gap = ceiling(0.05 B) bins).
curve_theta <- function(rates, slopes, points, bins, gap) {
  d <- length(slopes)
  q <- (points - 0.5 - seq_len(d) * gap) / (bins - (d + 1) * gap)
  previous <- c(0, q[-d])
  c(rates, stats::qlogis(slopes / 8), stats::qlogis((q - previous) / (1 - previous)))
}

curve_values <- function(theta, d, bins, gap) {
  rates <- theta[seq_len(d + 1)]
  slopes <- 8 * stats::plogis(theta[d + 1 + seq_len(d)])
  q <- 1 - cumprod(stats::plogis(-theta[2 * d + 1 + seq_len(d)]))
  list(Rt = rates, tslope = slopes, tpoint = 0.5 + seq_len(d) * gap + (bins - (d + 1) * gap) * q)
}

# theta index of curve (context ci, treatment ti), from the objective's names.
theta_index <- function(names, ci, ti, treatments) {
  which(startsWith(names, sprintf("theta[%d,", (ci - 1) * treatments + (ti - 1))))
}

# beta of one gene from its coordinates x: per-treatment values, then W^-1.
beta_of_x <- function(x, names, fit, gene, bins, gap) {
  p <- fit$parameters
  w <- fit$weight.matrix
  contexts <- fit$grouping.variables$context.lvls
  degrees <- fit$degrees
  result <- rep(NA_real_, nrow(p))
  for (ci in seq_along(contexts)) {
    d <- degrees[contexts[ci], gene]
    values <- lapply(seq_len(nrow(w)), function(ti) {
      curve_values(x[theta_index(names, ci, ti, nrow(w))], d, bins, gap)
    })
    rows <- which(p$species %in% gene & p$context %in% contexts[ci] &
                    p$role %in% c("baseline", "beta"))
    for (key in unique(paste(p$component[rows], p$block[rows]))) {
      at <- rows[paste(p$component[rows], p$block[rows]) == key]
      m <- p$component[at[1]]
      k <- p$block[at[1]]
      z <- vapply(values, function(v) v[[m]][k], numeric(1))
      beta <- solve(w, z)
      result[at] <- beta[match(p$treatment[at], colnames(w))]
    }
  }
  result
}

coordinate_bounds <- function(names, degrees, treatments) {
  lower <- upper <- rep(NA_real_, length(names))
  theta <- regmatches(names, regexec("^theta\\[([0-9]+),([0-9]+)\\]$", names))
  for (i in seq_along(names)) {
    if (length(theta[[i]])) {
      curve <- as.integer(theta[[i]][2])
      d <- degrees[curve %/% treatments + 1]
      rate <- as.integer(theta[[i]][3]) <= d
      lower[i] <- if (rate) 0 else -20
      upper[i] <- if (rate) 25 else 20
    } else if (startsWith(names[i], "rho")) {
      lower[i] <- -18.4
      upper[i] <- 6.9
    } else {
      lower[i] <- -10
      upper[i] <- 10
    }
  }
  list(lower = lower, upper = upper)
}

truth_start <- function(fit, truth, bins) {
  gap <- ceiling(0.05 * bins)  # buffer_factor's default
  w <- fit$weight.matrix
  contexts <- fit$grouping.variables$context.lvls
  genes <- fit$grouping.variables$species.lvls
  estimate <- rep(NA_real_, nrow(fit$parameters))
  rows <- list()
  for (g in seq_along(genes)) {
    gene <- genes[g]
    objective <- function(x) wispack:::count_objective_rust(fit$plan, g - 1L, x)
    at <- objective(NULL)
    x0 <- at$x
    curves <- truth$curves[truth$curves$species == gene, ]
    for (ci in seq_along(contexts)) {
      for (ti in seq_len(nrow(w))) {
        one <- curves[curves$context == contexts[ci] & curves$treatment == rownames(w)[ti], ]
        pick <- function(m) one$value[one$component == m][order(one$block[one$component == m])]
        x0[theta_index(at$names, ci, ti, nrow(w))] <-
          curve_theta(pick("Rt"), pick("tslope"), pick("tpoint"), bins, gap)
      }
    }
    run <- stats::optim(x0, function(x) objective(x)$value, function(x) objective(x)$gradient,
                        method = "BFGS", control = list(maxit = 5000, reltol = 1e-14))
    # BFGS runs unconstrained; the core keeps its coordinates in a box
    # (src/rust/src/count/fit.rs: rates in [0, 25], logits in [-20, 20], log
    # dispersion in [-18.4, 6.9], u in [-10, 10]). An optimum outside it is
    # not one the fit could have reached.
    box <- coordinate_bounds(at$names, fit$degrees[, gene], nrow(w))
    inside <- all(run$par >= box$lower - 1e-6 & run$par <= box$upper + 1e-6)
    # Self-check of the coordinate mapping: the fit's own x gives its estimates.
    mine <- beta_of_x(at$x, at$names, fit, gene, bins, gap)
    own <- !is.na(mine)
    reported <- fit$fitted.parameters[fit$parameters$name]
    check <- own & is.finite(reported)  # the fit may report NaN (see recovery.md)
    mapping_error <- max(abs(mine[check] - reported[check]))
    if (mapping_error > 1e-6) stop("coordinate mapping is off by ", mapping_error, " for ", gene)
    from_truth <- beta_of_x(run$par, at$names, fit, gene, bins, gap)
    estimate[own] <- from_truth[own]
    rows[[g]] <- data.frame(gene = gene, objective_fit = at$value,
                            objective_truth_start = run$value, bfgs_code = run$convergence,
                            inside_box = inside,
                            max_gradient = max(abs(objective(run$par)$gradient)))
  }
  list(estimate = estimate, genes = do.call(rbind, rows))
}

fit_one <- function(data, truth, likelihood, cells) {
  warnings <- character()
  started <- proc.time()[["elapsed"]]
  fit <- tryCatch(
    withCallingHandlers(
      wisp(data, degrees = truth$degrees, fit_only = TRUE, verbose = FALSE,
           model.settings = list(likelihood = likelihood)),
      warning = function(w) {
        warnings <<- c(warnings, conditionMessage(w))
        invokeRestart("muffleWarning")
      }),
    error = function(e) e)
  seconds <- proc.time()[["elapsed"]] - started
  if (inherits(fit, "error")) {
    return(list(ok = FALSE, error = conditionMessage(fit), warnings = warnings, seconds = seconds))
  }
  p <- fit$parameters
  estimates <- data.frame(name = p$name, role = p$role, component = p$component,
                          context = p$context, species = p$species, block = p$block,
                          treatment = p$treatment, truth = unname(truth$parameters[p$name]),
                          estimate = unname(fit$fitted.parameters[p$name]),
                          stringsAsFactors = FALSE)
  if (likelihood == "original") {
    estimates$truth_summed <- summed_scale_truth(truth, fit$weight.matrix, p, cells)
    moment <- fit$gamma.dispersion  # species x context, fixed by moments before the fit
    moment_names <- paste("dispersion", rep(colnames(moment), each = nrow(moment)),
                          rep(rownames(moment), ncol(moment)), sep = "_")
    moment <- data.frame(name = moment_names, truth = unname(truth$dispersion[moment_names]),
                         estimate = as.vector(moment))
  } else {
    moment <- NULL
  }
  oracle <- NULL
  if (likelihood == "nb") {
    oracle <- tryCatch(truth_start(fit, truth, max(data$bin)), error = function(e) e)
    if (inherits(oracle, "error")) {
      oracle <- list(error = conditionMessage(oracle))
    } else {
      estimates$truth_start <- oracle$estimate
    }
  }
  d <- fit$fit.diagnostics
  list(ok = TRUE, truth_start = oracle$genes, truth_start_error = oracle$error, seconds = seconds, warnings = warnings, estimates = estimates,
       moment_dispersion = moment,
       exposure = if (is.null(fit$exposure)) NA_character_ else fit$exposure$rule,
       diagnostics = d[intersect(names(d), c("converged", "code", "num.evals", "iterations",
                                             "max.gradient", "on.bound", "fit.seconds",
                                             "n.params"))])
}

# Both data versions (the drawn cells per bin, and one cell per bin, with
# the same truth) x both likelihoods, saved to one RDS.
run_dataset <- function(i) {
  path <- file.path(out_dir, sprintf("dataset_%03d.rds", i))
  if (file.exists(path)) return(path)
  a <- dataset_arguments(i)
  versions <- list(several = a$cells.per.bin, one = 1L)
  fits <- list()
  truths <- list()
  for (version in names(versions)) {
    data <- simulate_dataset(a, versions[[version]])
    truth <- attr(data, "truth")
    truths[[version]] <- truth[c("degrees", "parameters", "sd", "dispersion")]
    for (likelihood in c("nb", "original")) {
      fits[[paste(version, likelihood)]] <- c(
        list(version = version, cells = versions[[version]], likelihood = likelihood,
             tokens = nrow(data)),
        fit_one(data, truth, likelihood, versions[[version]]))
    }
  }
  result <- list(arguments = a, truths = truths, fits = fits,
                 wispack = as.character(utils::packageVersion("wispack")),
                 built = utils::packageDescription("wispack")$Built, date = Sys.time())
  temporary <- paste0(path, ".tmp", Sys.getpid())
  saveRDS(result, temporary)
  file.rename(temporary, path)
  path
}

# ---------------------------------------------------------------------------
# Summaries: one row per data set x data version x likelihood x component

component_label <- function(role, component) {
  ifelse(role %in% c("baseline", "beta"),
         paste(component, ifelse(role == "baseline", "baseline", "effect")),
         ifelse(role == "sd", paste0("sd_", component),
                ifelse(role == "warp", paste0("u_", component), role)))
}

# A gross error: more than 1 on the log(1 + rate) scale (twice the simulated
# rate effect), more than 1 per bin for a slope, more than 5 bins for a point.
gross_threshold <- c(Rt = 1, tslope = 1, tpoint = 5)

summarise_errors <- function(error, group) {
  keep <- !is.na(error)
  error <- error[keep]
  group <- group[keep]
  if (!length(error)) return(NULL)
  threshold <- unname(gross_threshold[sub(" .*", "", group)])
  levels <- sort(unique(group))
  by_group <- function(x, f) as.vector(tapply(x, group, f)[levels])
  data.frame(component = levels,
             n = by_group(error, length),
             mse = by_group(error^2, mean),
             bias = by_group(error, mean),
             mae = by_group(abs(error), mean),
             median_abs_error = by_group(abs(error), stats::median),
             gross = by_group(abs(error) > threshold, sum),
             stringsAsFactors = FALSE)
}

# The per-treatment curve values z(t) = W beta of one (context, gene) from
# its rows of `estimates` (column `column`). W of a factorial design without
# a time series: treatment t includes effect j when j's levels are among t's.
treatment_curves <- function(estimates, column) {
  treatments <- unique(estimates$treatment)
  levels <- lapply(strsplit(treatments, ":"), setdiff, "ref")
  w <- outer(seq_along(treatments), seq_along(treatments),
             Vectorize(function(t, j) as.numeric(all(levels[[j]] %in% levels[[t]]))))
  blocks <- split(estimates, paste(estimates$component, estimates$block))
  lapply(blocks, function(b) drop(w %*% b[[column]][match(treatments, b$treatment)]))
}

# Psi along the axis (every quarter bin) of a curve.
curve_psi <- function(rates, slopes, points, bins) {
  x <- seq(0.5, bins + 0.5, by = 0.25)
  psi <- rep(rates[1], length(x))
  for (k in seq_along(slopes)) psi <- psi + (rates[k + 1] - rates[k]) * stats::plogis(slopes[k] * (x - points[k]))
  psi
}

# Per (context, gene) of a fit: the number of treatments whose fitted curve
# never comes within 0.25 (log(1 + rate) scale) of one of its block rates,
# i.e. the block's level is not attained anywhere on the axis (two
# transitions overlap and the block rate only sets the curve's shape).
unreached_blocks <- function(estimates, bins) {
  e <- estimates[estimates$role %in% c("baseline", "beta"), ]
  pairs <- unique(paste(e$context, e$species))
  vapply(pairs, function(pair) {
    z <- treatment_curves(e[paste(e$context, e$species) == pair, ], "estimate")
    d <- sum(startsWith(names(z), "tslope"))
    if (d == 0) return(0L)
    count <- 0L
    for (t in seq_along(z[[1]])) {
      rates <- vapply(seq_len(d + 1), function(k) z[[paste("Rt", k)]][t], numeric(1))
      slopes <- vapply(seq_len(d), function(k) z[[paste("tslope", k)]][t], numeric(1))
      points <- vapply(seq_len(d), function(k) z[[paste("tpoint", k)]][t], numeric(1))
      if (!all(is.finite(c(rates, slopes, points)))) {
        count <- count + 1L
        next
      }
      psi <- curve_psi(rates, slopes, points, bins)
      if (any(vapply(rates, function(r) min(abs(psi - r)), numeric(1)) > 0.25)) count <- count + 1L
    }
    count
  }, integer(1))
}

summarise_dataset <- function(result) {
  a <- result$arguments
  rows <- list()
  # (context, gene) pairs whose nb fit reaches every block in every treatment,
  # per data version: the subset on which the "regular" rows compare both fits.
  regular <- lapply(c(several = "several", one = "one"), function(version) {
    fit <- result$fits[[paste(version, "nb")]]
    if (!fit$ok) return(character())
    unreached <- unreached_blocks(fit$estimates, a$n.bins)
    names(unreached)[unreached == 0]
  })
  for (fit in result$fits) {
    head <- data.frame(dataset = a$dataset, design = a$design, cells = fit$cells,
                       likelihood = fit$likelihood, ok = fit$ok,
                       converged = fit$ok && isTRUE(fit$diagnostics$converged),
                       seconds = fit$seconds,
                       max_gradient = if (fit$ok) fit$diagnostics$max.gradient else NA_real_,
                       on_bound = if (fit$ok) fit$diagnostics$on.bound else NA_integer_,
                       nonfinite = if (fit$ok) sum(!is.finite(fit$estimates$estimate)) else NA_integer_,
                       genes = NA_integer_, genes_worse_optimum = NA_integer_,
                       genes_left_box = NA_integer_,
                       pairs = NA_integer_, pairs_unreached = NA_integer_,
                       curves_unreached = NA_integer_,
                       objective_gap = NA_real_, stringsAsFactors = FALSE)
    if (!is.null(fit$truth_start)) {
      # gap: J at the fit minus J after BFGS from the truth (> 0: the fit is in a worse optimum)
      gap <- fit$truth_start$objective_fit - fit$truth_start$objective_truth_start
      head$genes <- length(gap)
      head$genes_worse_optimum <- sum(gap > 0.01 & fit$truth_start$inside_box)
      head$genes_left_box <- sum(!fit$truth_start$inside_box)
      head$objective_gap <- max(gap)
    }
    if (!fit$ok) {
      rows[[length(rows) + 1]] <- cbind(head, component = "(fit failed)", n = 0L, mse = NA,
                                        bias = NA, mae = NA, median_abs_error = NA, gross = NA)
      next
    }
    e <- fit$estimates
    unreached <- unreached_blocks(e, a$n.bins)
    head$pairs <- length(unreached)
    head$pairs_unreached <- sum(unreached > 0)
    head$curves_unreached <- sum(unreached)
    group <- component_label(e$role, e$component)
    errors <- summarise_errors(e$estimate - e$truth, group)
    # The same components on the pairs where the nb fit reached every block.
    keep <- paste(e$context, e$species) %in% regular[[fit$version]] &
      e$role %in% c("baseline", "beta")
    subset <- summarise_errors(e$estimate[keep] - e$truth[keep], group[keep])
    if (!is.null(subset)) {
      subset$component <- paste(subset$component, "[regular]")
      errors <- rbind(errors, subset)
    }
    if (fit$likelihood == "original") {
      # The original's warps are free parameters of a different warp function
      # (no distribution): not estimates of the simulated u.
      errors <- errors[!grepl("^u_", errors$component), ]
      if (fit$cells > 1) {
        summed <- summarise_errors(e$estimate - e$truth_summed, group)
        summed$component <- paste(summed$component, "[summed truth]")
        errors <- rbind(errors, summed)
      }
      moment <- summarise_errors(fit$moment_dispersion$estimate - fit$moment_dispersion$truth,
                                 rep("dispersion [moments]",
                                     nrow(fit$moment_dispersion)))
      errors <- rbind(errors, moment)
    }
    rows[[length(rows) + 1]] <- cbind(head[rep(1, nrow(errors)), ], errors)
    if (!is.null(e$truth_start)) {
      fixed <- e$role %in% c("baseline", "beta")
      oracle <- summarise_errors(e$truth_start[fixed] - e$truth[fixed], group[fixed])
      head$likelihood <- "nb_truth_start"
      rows[[length(rows) + 1]] <- cbind(head[rep(1, nrow(oracle)), ], oracle)
    }
  }
  do.call(rbind, rows)
}

dataset_table <- function(result) {
  a <- result$arguments
  tokens <- vapply(result$fits, function(f) f$tokens, numeric(1))
  data.frame(dataset = a$dataset, design = a$design, n_contexts = a$n.contexts,
             n_genes = a$n.genes, n_bins = a$n.bins,
             animals = paste(a$animals, collapse = "+"), cells_per_bin = a$cells.per.bin,
             dispersion = a$dispersion, seed = a$seed,
             degrees = paste(result$truths$several$degrees, collapse = ""),
             tokens_several = tokens[["several nb"]], tokens_one = tokens[["one nb"]],
             wispack = result$wispack, stringsAsFactors = FALSE)
}

# ---------------------------------------------------------------------------
# Markdown tables from the summary

# RMSE over all parameters of a component, pooled over the data sets of a
# design; its Monte Carlo SE, and the ratio nb / original with a 95 %
# percentile interval, by a bootstrap over data sets (the same resampled
# data sets for every likelihood, so the ratio is paired).
component_rows <- function(s, version, design, component, draws) {
  one <- function(likelihood, component) {
    x <- s[s$design == design & s$version == version & s$likelihood == likelihood &
             s$component == component, ]
    x <- x[match(draws$datasets, x$dataset), ]
    n <- ifelse(is.na(x$n), 0, x$n)
    sse <- ifelse(is.na(x$mse), 0, n * x$mse)
    total <- ifelse(is.na(x$bias), 0, n * x$bias)
    if (sum(n) == 0) {
      return(list(rmse = NA_real_, se = NA_real_, bias = NA_real_, n = 0,
                  boot = rep(NA_real_, nrow(draws$counts))))
    }
    boot <- sqrt(as.vector(draws$counts %*% sse) / as.vector(draws$counts %*% n))
    list(rmse = sqrt(sum(sse) / sum(n)), se = stats::sd(boot), bias = sum(total) / sum(n),
         n = sum(n), boot = boot)
  }
  summed <- grepl("[summed truth]", component, fixed = TRUE)
  nb <- one("nb", sub(" [summed truth]", "", component, fixed = TRUE))
  if (summed) nb[c("rmse", "se", "bias")] <- NA_real_
  original <- one("original", component)
  oracle <- one("nb_truth_start", component)
  ratio <- nb$boot / original$boot
  data.frame(version = version, component = component, design = design,
             nb_rmse = nb$rmse, nb_se = nb$se, nb_bias = nb$bias, nb_n = nb$n,
             original_rmse = original$rmse, original_se = original$se,
             original_bias = original$bias, original_n = original$n,
             ratio = if (summed) NA_real_ else nb$rmse / original$rmse,
             ratio_low = if (summed) NA_real_ else
               unname(stats::quantile(ratio, 0.025, na.rm = TRUE)),
             ratio_high = if (summed) NA_real_ else
               unname(stats::quantile(ratio, 0.975, na.rm = TRUE)),
             truth_start_rmse = oracle$rmse, truth_start_se = oracle$se,
             stringsAsFactors = FALSE)
}

bootstrap_draws <- function(datasets, seed) {
  set.seed(seed)
  d <- length(datasets)
  index <- matrix(sample.int(d, d * bootstrap_replicates, replace = TRUE), bootstrap_replicates)
  counts <- t(apply(index, 1, tabulate, nbins = d))
  list(datasets = datasets, counts = counts)
}

fmt <- function(x, digits = 3) {
  ifelse(is.na(x), "n/a", formatC(signif(x, digits), digits = digits, format = "fg", flag = "#"))
}
fmt_se <- function(x, se) ifelse(is.na(x), "n/a", sprintf("%s (%s)", fmt(x), fmt(se, 2)))

fixed_components <- c("Rt baseline", "Rt effect", "tslope baseline", "tslope effect",
                      "tpoint baseline", "tpoint effect")
nb_only_components <- c("sd_point", "sd_rate", "sd_slope", "dispersion", "u_point", "u_rate",
                        "u_slope")

print_tables <- function(s) {
  s$version <- ifelse(s$cells == 1, "one", "several")
  all_rows <- list()
  draws <- lapply(c(nested = "nested", crossed = "crossed"), function(design) {
    bootstrap_draws(sort(unique(s$dataset[s$design == design])),
                    1000L + match(design, c("nested", "crossed")))
  })
  for (version in c("one", "several")) {
    title <- if (version == "one") {
      "Table A. One cell per bin (`cells.per.bin = 1`): both likelihoods estimate the same quantities"
    } else {
      "Table B. Several cells per bin (2-5, as drawn): \"nb\" per cell, \"original\" on log(1 + summed count)"
    }
    cat(sprintf("\n#### %s\n\n", title))
    cat("| component | design | nb: RMSE (SE) | nb: bias | original: RMSE (SE) | original: bias | RMSE nb / original (95 % CI) | nb from a start at the truth: RMSE (SE) | parameters |\n")
    cat("|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
    components <- c(fixed_components,
                    if (version == "several") c("Rt baseline [summed truth]",
                                                "Rt effect [summed truth]"),
                    nb_only_components)
    for (component in components) {
      for (design in c("nested", "crossed")) {
        r <- component_rows(s, version, design, component, draws[[design]])
        all_rows[[length(all_rows) + 1]] <- r
        ratio <- if (is.na(r$ratio)) "n/a" else
          sprintf("%s (%s–%s)", fmt(r$ratio), fmt(r$ratio_low, 2), fmt(r$ratio_high, 2))
        cat(sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %d |\n", component, design,
                    fmt_se(r$nb_rmse, r$nb_se), fmt(r$nb_bias, 2),
                    fmt_se(r$original_rmse, r$original_se), fmt(r$original_bias, 2), ratio,
                    fmt_se(r$truth_start_rmse, r$truth_start_se),
                    as.integer(max(r$nb_n, r$original_n))))
      }
    }
  }

  cat("\n#### Table C. Fits: convergence, where they stopped, time\n\n")
  cat("| data | design | likelihood | fits | converged (own rule) | failed | max \\|gradient\\| at the end, median (max) | fits with estimates on a bound | fits with NaN estimates | genes in a worse optimum than BFGS from the truth finds | (context, gene) pairs with a block never reached | seconds per fit, median (range) |\n")
  cat("|---|---|---|---:|---:|---:|---|---:|---:|---:|---:|---|\n")
  fits <- unique(s[s$likelihood != "nb_truth_start",
                   c("dataset", "design", "version", "likelihood", "ok", "converged", "seconds",
                     "max_gradient", "on_bound", "nonfinite", "genes", "genes_worse_optimum",
                     "genes_left_box", "pairs", "pairs_unreached")])
  for (version in c("one", "several")) {
    for (design in c("nested", "crossed")) {
      for (likelihood in c("nb", "original")) {
        f <- fits[fits$version == version & fits$design == design & fits$likelihood == likelihood, ]
        gradient <- f$max_gradient[!is.na(f$max_gradient)]
        worse <- if (likelihood == "nb") {
          sprintf("%d of %d (in %d fits); %d left the box", sum(f$genes_worse_optimum, na.rm = TRUE),
                  sum(f$genes, na.rm = TRUE), sum(f$genes_worse_optimum > 0, na.rm = TRUE),
                  sum(f$genes_left_box, na.rm = TRUE))
        } else "n/a"
        cat(sprintf("| %s | %s | %s | %d | %d (%.0f %%) | %d | %s (%s) | %d | %d | %s | %d of %d | %.2f (%.2f–%.2f) |\n",
                    if (version == "one") "one cell" else "several cells", design, likelihood,
                    nrow(f), sum(f$converged), 100 * mean(f$converged), sum(!f$ok),
                    if (length(gradient)) fmt(stats::median(gradient), 2) else "n/a",
                    if (length(gradient)) fmt(max(gradient), 2) else "n/a",
                    sum(f$on_bound > 0, na.rm = TRUE), sum(f$nonfinite > 0, na.rm = TRUE),
                    worse, sum(f$pairs_unreached, na.rm = TRUE), sum(f$pairs, na.rm = TRUE),
                    stats::median(f$seconds), min(f$seconds), max(f$seconds)))
      }
    }
  }
  cat("\n#### Table E. Fixed effects on the (context, gene) pairs where the nb fit reaches every block level\n\n")
  cat("Both likelihoods on the same parameters: those of the pairs whose nb curves come within 0.25 of every block rate in every treatment (a selection by the nb fit, so a diagnostic, not a fair comparison).\n\n")
  cat("| data | component | design | nb: RMSE (SE) | original: RMSE (SE) | RMSE nb / original (95 % CI) | parameters |\n")
  cat("|---|---|---|---:|---:|---:|---:|\n")
  for (version in c("one", "several")) {
    for (component in fixed_components) {
      for (design in c("nested", "crossed")) {
        r <- component_rows(s, version, design, paste(component, "[regular]"),
                            draws[[design]])
        cat(sprintf("| %s | %s | %s | %s | %s | %s (%s–%s) | %d |\n",
                    if (version == "one") "one cell" else "several cells", component, design,
                    fmt_se(r$nb_rmse, r$nb_se), fmt_se(r$original_rmse, r$original_se),
                    fmt(r$ratio), fmt(r$ratio_low, 2), fmt(r$ratio_high, 2), as.integer(r$nb_n)))
      }
    }
  }

  cat("\n#### Table D. The typical error and the gross errors (fixed effects)\n\n")
  cat("Median |error|: the median over data sets of each data set's median absolute error. MAE: mean absolute error pooled over data sets. Gross: the share of parameters with |error| > 1 for Rt, > 1 per bin for tslope, > 5 bins for tpoint.\n\n")
  cat("| data | component | design | nb: median \\|error\\| | original: median \\|error\\| | nb: MAE | original: MAE | nb: gross | original: gross | nb from the truth: gross |\n")
  cat("|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
  for (version in c("one", "several")) {
    for (component in fixed_components) {
      for (design in c("nested", "crossed")) {
        pooled <- function(likelihood) {
          x <- s[s$version == version & s$design == design & s$likelihood == likelihood &
                   s$component == component & !is.na(s$n) & s$n > 0, ]
          c(mae = sum(x$n * x$mae) / sum(x$n), gross = sum(x$gross), n = sum(x$n),
            median = stats::median(x$median_abs_error))
        }
        a <- pooled("nb")
        b <- pooled("original")
        o <- pooled("nb_truth_start")
        share <- function(p) sprintf("%.1f %% (%d)", 100 * p[["gross"]] / p[["n"]], as.integer(p[["gross"]]))
        cat(sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
                    if (version == "one") "one cell" else "several cells", component, design,
                    fmt(a[["median"]]), fmt(b[["median"]]), fmt(a[["mae"]]), fmt(b[["mae"]]),
                    share(a), share(b), share(o)))
      }
    }
  }

  rows <- do.call(rbind, all_rows)
  fixed <- rows[rows$component %in% fixed_components, ]
  cat("\n#### Is \"nb\" better on every fixed-effect component?\n\n")
  for (version in c("one", "several")) {
    x <- fixed[fixed$version == version, ]
    better <- x$ratio < 1
    cat(sprintf("- %s: nb has the lower RMSE in %d of %d (component, design) cells; the 95 %% interval of the ratio lies below 1 in %d and above 1 in %d. Higher in: %s.\n",
                if (version == "one") "Table A (one cell per bin)" else "Table B (several cells per bin)",
                sum(better), nrow(x), sum(x$ratio_high < 1), sum(x$ratio_low > 1),
                if (any(!better)) paste(sprintf("%s, %s (%.2f)", x$component[!better],
                                                x$design[!better], x$ratio[!better]),
                                        collapse = "; ") else "none"))
  }
  invisible(rows)
}

# ---------------------------------------------------------------------------
# Run

if (mode != "table") {
  dir.create(out_dir, recursive = TRUE, showWarnings = FALSE)
  dir.create(csv_dir, recursive = TRUE, showWarnings = FALSE)
  todo <- seq_len(n_datasets)
  missing <- todo[!file.exists(file.path(out_dir, sprintf("dataset_%03d.rds", todo)))]
  cat(sprintf("%s: %d data sets, %d to fit, %d workers; %s\n", mode, n_datasets, length(missing),
              workers, format(Sys.time(), "%Y-%m-%d %H:%M:%S %Z")))
  started <- proc.time()[["elapsed"]]
  done <- parallel::mclapply(missing, function(i) {
    path <- tryCatch(run_dataset(i), error = function(e) e)
    if (inherits(path, "error")) {
      message(sprintf("data set %d: %s", i, conditionMessage(path)))
    } else {
      message(sprintf("data set %d done (%.0f s since start)", i,
                      proc.time()[["elapsed"]] - started))
    }
    path
  }, mc.cores = workers, mc.preschedule = FALSE)
  failed <- vapply(done, function(x) inherits(x, "error") || !is.character(x), logical(1))
  if (any(failed)) stop(sum(failed), " data sets failed; rerun to retry them")
  cat(sprintf("Fitting took %.0f s.\n", proc.time()[["elapsed"]] - started))
  results <- lapply(file.path(out_dir, sprintf("dataset_%03d.rds", todo)), readRDS)
  summary <- do.call(rbind, lapply(results, summarise_dataset))
  numeric <- vapply(summary, is.double, logical(1))
  summary[numeric] <- lapply(summary[numeric], signif, digits = 4)
  # Two files: one row per fit, one row per fit x component.
  source("benchmarks/headlines.R") # with_provenance()
  fits <- unique(summary[fit_columns])
  utils::write.csv(with_provenance(fits, fits$likelihood), fits_csv, row.names = FALSE)
  components <- summary[c(fit_keys, setdiff(names(summary), fit_columns))]
  utils::write.csv(with_provenance(components, components$likelihood), summary_csv,
                   row.names = FALSE, quote = FALSE)
  # Every data set is fitted with both likelihoods.
  utils::write.csv(with_provenance(do.call(rbind, lapply(results, dataset_table)), "nb+original"),
                   datasets_csv, row.names = FALSE)
  cat(sprintf("Wrote %s, %s and %s.\n", summary_csv, fits_csv, datasets_csv))
}

summary <- merge(utils::read.csv(summary_csv, stringsAsFactors = FALSE),
                 utils::read.csv(fits_csv, stringsAsFactors = FALSE), by = fit_keys)
datasets <- utils::read.csv(datasets_csv, stringsAsFactors = FALSE)
cat(sprintf("\n%d data sets (%d nested, %d crossed), %s; R %s, wispack %s; %d-CPU machine, load %s\n",
            nrow(datasets), sum(datasets$design == "nested"), sum(datasets$design == "crossed"),
            format(Sys.time(), "%Y-%m-%d"), getRversion(), datasets$wispack[1],
            parallel::detectCores(),
            paste(readLines("/proc/loadavg")[1], collapse = "")))
cat(sprintf("Sizes: %d-%d genes, %d-%d bins, %d-%d contexts, %d-%d cells per bin, dispersion %.3f-%.3f, %s-%s tokens (several cells).\n",
            min(datasets$n_genes), max(datasets$n_genes), min(datasets$n_bins),
            max(datasets$n_bins), min(datasets$n_contexts), max(datasets$n_contexts),
            min(datasets$cells_per_bin), max(datasets$cells_per_bin), min(datasets$dispersion),
            max(datasets$dispersion), format(min(datasets$tokens_several), big.mark = ","),
            format(max(datasets$tokens_several), big.mark = ",")))
invisible(print_tables(summary))
