# Tests and intervals for a fit's fixed effects (model vignette §15.1, §15.2).
#
# Two methods, each with p-values that agree with its intervals: the
# unadjusted p-value is below alpha exactly when the unadjusted (1 - alpha)
# interval of the same method excludes 0.
# - Wald: estimate +/- quantile x standard error from the observed
#   information; t quantiles with Satterthwaite df for effects of factors
#   that vary between animals only, normal quantiles otherwise; slope
#   effects on the log-ratio scale (slope_ratio_tests()).
# - Bootstrap percentile: p = min(1, 2 min(#{x <= 0} + 1, #{x >= 0} + 1) / (R + 1)),
#   never 0, with the order-statistic interval [x_(k), x_(R+1-k)],
#   k = ceiling(alpha (R + 1) / 2) - 1 (bootstrap_p_value() and
#   bootstrap_interval(), in stats.R beside the original's centred rule).

#' Wald p-values and intervals
#'
#' @param estimate,se Estimates and standard errors (NA se: no test).
#' @param df Degrees of freedom per effect (Inf: normal quantiles).
#' @param alpha Level of the intervals.
#' @return A data.frame with `statistic`, `df`, `p.value`, `lower`, `upper`.
#' @keywords internal
#' @noRd
wald_tests <- function(estimate, se, df, alpha) {
  ok <- !is.na(estimate) & !is.na(se) & is.finite(se) & se > 0
  statistic <- ifelse(ok, estimate / se, NA_real_)
  quantile <- ifelse(is.finite(df), stats::qt(1 - alpha / 2, pmax(df, 1)), stats::qnorm(1 - alpha / 2))
  p <- ifelse(ok, 2 * ifelse(is.finite(df), stats::pt(-abs(statistic), pmax(df, 1)),
                             stats::pnorm(-abs(statistic))), NA_real_)
  data.frame(statistic = statistic, df = df, p.value = p,
             lower = ifelse(ok, estimate - quantile * se, NA_real_),
             upper = ifelse(ok, estimate + quantile * se, NA_real_))
}

# Wald tests and intervals of the slope effects on the log-ratio scale
# (model vignette §15.1). A slope effect is a contrast c = sum_t w_t s_t of
# the treatments' slopes s_t > 0 (w: its row of W^-1), i.e. c = P - N with
# P, N the sums of the slopes with positive and negative weights, so c = 0
# exactly when rho = log P - log N = 0. A slope's standard error grows with
# the slope, so on the slopes' own scale |c / se(c)| is bounded (by about
# 1 / relative SE) and the test rarely rejects where slopes are weakly
# informed: in the calibration benchmark it rejected 2-3 % of true nulls at
# alpha = 0.05 and its intervals covered 96-97 %. rho is close to normal.
# Its interval [rho_lo, rho_hi] maps back to c through
# c(rho) = 2 sqrt(P N) sinh(rho / 2), which is increasing, 0 at rho = 0 and
# c at rho-hat, so the interval of c excludes 0 exactly when rho's does.
# `wald` holds the value-scale results (wald_tests()) of every parameter;
# the slope effects' rows are replaced. df: each effect's df on the value
# scale (Satterthwaite's share of the animals' spread, used unchanged).
slope_ratio_tests <- function(fit, covariance, df, alpha, wald) {
  p <- fit$parameters
  weights <- fit$weight.matrix
  treatments <- fit$treatment$names
  if (is.null(weights) || nrow(weights) != length(treatments)) return(wald)
  contrasts <- solve(weights)
  estimates <- unname(fit$fitted.parameters)
  held <- held_rows(p)
  slopes <- which(p$component %in% "tslope" & p$role %in% c("baseline", "beta"))
  curve_key <- paste(p$species, p$context, p$block, sep = "\r")[slopes]
  # Each tested slope effect's row, log ratio, its standard error and the
  # back-transform's scale, collected first and tested in one call: a panel
  # has tens of thousands of them.
  rows <- log_ratio <- log_ratio_se <- scale <- vector("list", length(unique(curve_key)))
  k <- 0L
  for (idx in split(slopes, curve_key)) {
    idx <- idx[order(match(p$treatment[idx], treatments))]
    if (!identical(p$treatment[idx], treatments)) next
    # A reduced model's held effects are 0 with no variance.
    variance <- covariance_rows(covariance, idx)
    variance[held[idx], ] <- 0
    variance[, held[idx]] <- 0
    beta <- ifelse(held[idx], 0, estimates[idx])
    values <- drop(weights %*% beta)
    if (anyNA(values) || any(values <= 0)) next
    value_variance <- weights %*% variance %*% t(weights)
    for (j in which(p$role[idx] == "beta" & !held[idx])) {
      w <- contrasts[j, ]
      positive <- sum(pmax(w, 0) * values)
      negative <- sum(pmax(-w, 0) * values)
      # No value-scale standard error (a coordinate at a bound, ...): no test.
      if (!(positive > 0 && negative > 0) || is.na(wald$lower[idx[j]])) next
      gradient <- pmax(w, 0) / positive - pmax(-w, 0) / negative
      k <- k + 1L
      rows[[k]] <- idx[j]
      log_ratio[[k]] <- log(positive / negative)
      log_ratio_se[[k]] <- sqrt(max(drop(gradient %*% value_variance %*% gradient), 0))
      scale[[k]] <- 2 * sqrt(positive * negative)
    }
  }
  if (k == 0L) return(wald)
  rows <- unlist(rows[seq_len(k)])
  scale <- unlist(scale[seq_len(k)])
  ratio <- wald_tests(unlist(log_ratio[seq_len(k)]), unlist(log_ratio_se[seq_len(k)]),
                      df[rows], alpha)
  wald$statistic[rows] <- ratio$statistic
  wald$p.value[rows] <- ratio$p.value
  wald$lower[rows] <- scale * sinh(ratio$lower / 2)
  wald$upper[rows] <- scale * sinh(ratio$upper / 2)
  wald
}

# wisp() warns when a fit's tests of transition points are outside the
# designs where the calibration benchmarks found them calibrated: from 5
# animals per group (a group: the animals that share the levels of the
# factors that vary between animals; all animals when none does) every
# design kept the promise within its Monte Carlo error; with fewer animals
# some did not. The figures quoted come from the benchmark's table shipped in
# inst/extdata/point_calibration.csv (benchmarks/profile_calibration.R).
POINT_TESTS_CALIBRATED_ANIMALS <- 5L

# The rows of the fit's statistics that test a transition-point effect by
# Wald or profile likelihood (none for bootstrap statistics).
tested_point_rows <- function(fit) {
  stats <- fit$stats
  rows <- stats$parameters
  if (is.null(rows)) return(data.frame())
  if (!stats$method %in% c("wald", "profile")) return(rows[0, , drop = FALSE])
  component <- fit$parameters$component[match(rows$parameter, fit$parameters$name)]
  rows[component %in% "tpoint" & !is.na(rows$p.value), , drop = FALSE]
}

# The animals in the smallest group when the fit's statistics hold Wald or
# profile tests of point effects and some group has fewer than
# POINT_TESTS_CALIBRATED_ANIMALS animals; NULL otherwise.
point_tests_small_design <- function(fit) {
  groups <- fit$design$groups
  if (is.null(groups) || !length(groups) || !nrow(tested_point_rows(fit))) return(NULL)
  smallest <- min(table(groups))
  if (smallest >= POINT_TESTS_CALIBRATED_ANIMALS) NULL else as.integer(smallest)
}

warn_point_tests_small_design <- function(fit, call = sys.call(-1)) {
  smallest <- point_tests_small_design(fit)
  if (is.null(smallest)) return(invisible())
  method <- fit$stats$method
  measured <- point_calibration_rows(method, smallest)
  figures <- if (is.null(measured)) "" else {
    sprintf(paste0(
      ": in the calibration benchmark with %d animals per group (%d simulated designs, %d data ",
      "sets each), %s of true-null tpoint effects had p < 0.05 and their 95 %% intervals ",
      "covered %s of the true values"),
      as.integer(measured$animals[1]), nrow(measured), as.integer(min(measured$datasets)),
      percent_range(measured$false.positive), percent_range(measured$coverage))
  }
  check <- if (identical(method, "wald")) {
    "check them by profile likelihood (wisp_statistics(fit, method = \"profile\")), or "
  } else {
    "or "
  }
  design_warning(sprintf(paste0(
    "Tests of transition-point (tpoint) effects are calibrated from %d animals per group; ",
    "this fit's smallest group has %d%s. Read the tpoint p-values with caution, %s",
    "bootstrap them: bs_batch(fit, resample = \"parametric\"). Whether a factor changes a gene ",
    "at all is answered by the gene-level tests, anova(fit) (fit$gene.tests) ",
    "(vignette(\"inference\", package = \"wispack\"))."), POINT_TESTS_CALIBRATED_ANIMALS,
    smallest, figures, check), call)
}

# Signals a wisp_design_warning (one class, so that one handler silences
# both of wisp()'s warnings on tests outside the calibrated designs).
design_warning <- function(message, call) {
  warning(structure(class = c("wisp_design_warning", "warning", "condition"),
                    list(message = message, call = call)))
}

# Tests of transition points are calibrated for well-expressed genes only:
# pooled over the calibration benchmark's designs, genes with fewer than 10
# molecules per bin and animal (the mean count of their rows in the summed
# table: one row per animal, within-animal level and bin) had 8-12 % false
# positives among true-null point effects, at every group size; from 10 on,
# 5-6 % (inst/extdata/point_calibration_counts.csv,
# benchmarks/profile_calibration.R).
POINT_TESTS_CALIBRATED_COUNTS <- 10

# The curves (context, gene) whose point effects the fit's statistics test
# and whose rows average fewer than POINT_TESTS_CALIBRATED_COUNTS molecules:
# a data frame with their mean count per row, lowest first (no rows when
# there are none, or no point tests).
sparse_point_curves <- function(fit) {
  none <- data.frame(context = character(), gene = character(), per.row = numeric(),
                     stringsAsFactors = FALSE)
  summed <- fit$count.data.summed
  tested <- tested_point_rows(fit)
  if (is.null(summed) || !nrow(tested)) return(none)
  curves <- unique(tested[c("context", "gene")])
  summed <- summed[summed$exposure > 0, , drop = FALSE]
  per_row <- tapply(summed$count, list(summed$context, summed$species), mean)
  curves$per.row <- per_row[cbind(match(curves$context, rownames(per_row)),
                                  match(curves$gene, colnames(per_row)))]
  sparse <- curves[!is.na(curves$per.row) & curves$per.row < POINT_TESTS_CALIBRATED_COUNTS, ,
                   drop = FALSE]
  attr(sparse, "tested") <- nrow(curves)
  sparse[order(sparse$per.row), , drop = FALSE]
}

warn_point_tests_sparse_genes <- function(fit, call = sys.call(-1)) {
  sparse <- sparse_point_curves(fit)
  if (!nrow(sparse)) return(invisible())
  method <- fit$stats$method
  one_context <- length(unique(fit$count.data.summed$context)) == 1L
  named <- sprintf("%s%s: %.1f", sparse$gene,
                   if (one_context) "" else paste(" in", sparse$context), sparse$per.row)
  shown <- paste(utils::head(named, 5), collapse = ", ")
  if (length(named) > 5) shown <- paste0(shown, ", ...")
  measured <- calibration_by_counts("point_calibration_counts.csv", method, range(sparse$per.row))
  figures <- if (is.null(measured)) "" else {
    sprintf(paste0(
      "; in the calibration benchmark (%d simulated designs, 3-8 animals per group), %s of ",
      "true-null tpoint effects of genes with %s molecules per bin and animal had p < 0.05 ",
      "and their 95 %% intervals covered %s of the true values, at every group size"),
      as.integer(max(measured$designs)), percent_range(measured$false.positive),
      paste(format(min(measured$counts.from)), "to", format(max(measured$counts.to))),
      percent_range(measured$coverage))
  }
  genes <- calibration_by_counts("gene_calibration_counts.csv", NULL, range(sparse$per.row))
  gene_figures <- if (is.null(genes)) "" else {
    sprintf(paste0(
      "; their gene-level tests (anova(fit)) were anti-conservative too: %s of unchanged genes ",
      "in those bands had p < 0.05"), percent_range(genes$false.positive))
  }
  design_warning(sprintf(paste0(
    "Tests of transition-point (tpoint) effects are calibrated for genes with at least %d ",
    "molecules per bin and animal (the mean count of a row of the summed table); %d of the ",
    "%d curves whose points were tested have fewer (%s)%s. Read their tpoint p-values ",
    "with caution%s (vignette(\"inference\", package = \"wispack\"))."),
    as.integer(POINT_TESTS_CALIBRATED_COUNTS), nrow(sparse), attr(sparse, "tested"), shown,
    figures, gene_figures), call)
}

# "a-b %" (or "a %") of a vector of rates, in percent to one decimal.
percent_range <- function(x) {
  x <- sort(unique(round(100 * range(x), 1)))
  paste0(paste(sprintf("%.1f", x), collapse = "-"), " %")
}

# The rows of a shipped benchmark table by expression (`file` in
# inst/extdata: point tests by `method`, or gene-level tests with `method`
# NULL) for the bands of molecules per bin and animal that `counts` (a
# range) falls in; NULL when the table is not installed.
calibration_by_counts <- function(file, method, counts) {
  file <- system.file("extdata", file, package = "wispack")
  if (!nzchar(file)) return(NULL)
  table <- utils::read.csv(file, stringsAsFactors = FALSE)
  if (!is.null(method)) table <- table[table$method == method, , drop = FALSE]
  table <- table[table$counts.to > counts[1] & table$counts.from <= counts[2], , drop = FALSE]
  if (!nrow(table)) NULL else table
}

# The calibration benchmark's rows for point tests by `method` ("wald" or
# "profile") at the group size closest to `animals`, one per design; NULL
# when the table is not installed.
point_calibration_rows <- function(method, animals) {
  file <- system.file("extdata", "point_calibration.csv", package = "wispack")
  if (!nzchar(file)) return(NULL)
  table <- utils::read.csv(file, stringsAsFactors = FALSE)
  table <- table[table$method == method, , drop = FALSE]
  if (!nrow(table)) return(NULL)
  sizes <- sort(unique(table$animals))
  closest <- sizes[which.min(abs(sizes - animals))]
  table[table$animals == closest, , drop = FALSE]
}

#' Significance marks of adjusted p-values
#'
#' A p-value counts as below a threshold only when it is below it by more
#' than rounding: m x 2 / (R + 1) equal to alpha in exact arithmetic (R =
#' 2m / alpha - 1 replicates) comes out of floating point a hair above or
#' below alpha, depending on m, and must not be a star.
#' @keywords internal
#' @noRd
significance_marks <- function(p_adjusted, alpha) {
  below <- function(threshold) p_adjusted < threshold * (1 - 1e-10)
  ifelse(is.na(p_adjusted), "",
  ifelse(below(alpha / 50), "***",
  ifelse(below(alpha / 5), "**",
  ifelse(below(alpha), "*", "ns"))))
}

#' The smallest p-value a bootstrap of R replicates can give, and whether
#' Holm can reject anything with m tests at level alpha
#'
#' The smallest percentile p-value is 2 / (R + 1) (bootstrap_p_value()), and
#' Holm's (or Bonferroni's) adjustment multiplies it by m: something can be
#' rejected only when 2 m / (R + 1) < alpha, that is R + 1 > 2 m / alpha.
#' `needed` is the smallest such R (e.g. 800 for m = 20 at alpha = 0.05:
#' 799 replicates give exactly 0.05, not below it). The comparison allows
#' for rounding in 2 m / alpha, as significance_marks() does.
#' @keywords internal
#' @noRd
bootstrap_resolution <- function(replicates, tests, alpha) {
  smallest <- 2 / (replicates + 1)
  needed <- floor(2 * tests / alpha * (1 + 1e-10))
  list(smallest = smallest, holm_can_reject = replicates >= needed, needed = needed)
}

#' Warn when a bootstrap is too small for its adjusted tests to reject
#'
#' The one warning (class `wisp_resolution_warning`) of wisp(bootstraps.num =)
#' and wisp_statistics(boot =) when the fit's bootstrap statistics cannot
#' reject anything: it names the usable replicates B, the replicates needed
#' and how to add the missing ones to the same run.
#' @param fit A "wisp" object with bootstrap statistics (`fit$stats$resolution`).
#' @keywords internal
#' @noRd
warn_bootstrap_resolution <- function(fit, call = NULL) {
  s <- fit$stats
  resolution <- s$resolution
  if (is.null(resolution) || resolution$holm_can_reject || identical(s$adjustment, "none")) {
    return(invisible(FALSE))
  }
  boot <- fit$bootstrap
  more <- resolution$needed - s$replicates.used
  last <- max(boot$replicates)
  message <- sprintf(paste0(
    "with B = %d usable bootstrap replicates the smallest p-value is 2/(B + 1) = %.3g, so ",
    "%s adjustment over a gene's %d tested effects can reject nothing at alpha = %g: every effect ",
    "is \"ns\". It needs at least %d replicates: add %d or more to this run with ",
    "more <- bs_batch(fit, replicates = %d:%d, seed = %s%s) and ",
    "fit <- wisp_statistics(fit, boot = more)%s."),
    as.integer(s$replicates.used), resolution$smallest, s$adjustment,
    as.integer(s$family.size %||% s$tests),
    s$alpha, as.integer(resolution$needed), as.integer(more), as.integer(last + 1),
    as.integer(last + more), format(boot$seed),
    if (identical(boot$resample, resample_schemes(fit)[1])) "" else
      sprintf(", resample = \"%s\"", boot$resample),
    if (identical(fit_likelihood(fit), "nb")) {
      ", or use the Wald statistics of the count likelihood (wisp_statistics(fit, method = \"wald\"))"
    } else "")
  warning(structure(class = c("wisp_resolution_warning", "warning", "condition"),
                    list(message = message, call = call)))
  invisible(TRUE)
}

# ---------------------------------------------------------------------------
# Wald covariance and the statistics of a fit

#' Covariance of a wisp fit's fixed effects
#'
#' The Wald covariance of the estimates from the observed information of the
#' count likelihood at the fit (the inverse Hessian of the objective in the
#' optimiser's coordinates, carried to the reported effects by the delta
#' method, at the estimated random-effect variances). Genes are fitted
#' independently, so effects of different genes have covariance 0.
#' Parameters without a variance (on a bound, or not informed by the data)
#' have `NA` rows and columns.
#'
#' @param object A `"wisp"` object fitted with the count likelihood (the
#'   default).
#' @param type `"fixed"` (baseline parameters and treatment effects) or
#'   `"beta"` (treatment effects only).
#' @param ... Nothing: an argument `vcov()` does not take is an error.
#' @return A symmetric matrix named by parameter.
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 2, n.bins = 30, seed = 3)
#' fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
#' sqrt(diag(vcov(fit, "beta")))
vcov.wisp <- function(object, type = c("fixed", "beta"), ...) {
  check_unused_arguments(..., .method = "vcov.wisp")
  check_wisp_object(object)
  type <- match_choice(type, "type", c("fixed", "beta"))
  require_likelihood(object, paste0(
    "vcov() needs the count likelihood (likelihood = \"nb\"): the original's ",
    "objective is not a likelihood, so it has no Wald covariance. Use the ",
    "bootstrap (bs_batch()) for its intervals."), call = sys.call())
  keep <- which(wisp_parameter_selector(object$parameters, type))
  covariance_rows(wisp_covariance_blocks(object), keep)
}

# The Wald covariance of a fit, kept as it is: one block per gene (the
# genes' fits are independent), so that a panel of 20,000 parameters holds
# its genes' blocks, not a 20,000 x 20,000 matrix. A list: `blocks` (the
# matrices), `block` and `position` (each reported parameter's block and
# place in it; NA outside every block), `variance` (each parameter's
# variance; NA outside every block), `within` (each block's share with the
# animals' random effects held at their estimates, the within-animal part),
# `conditional` (its diagonal, for the Satterthwaite degrees of freedom of
# the Wald tests) and `species` (each parameter's gene). covariance_rows()
# reads submatrices from it; wisp_covariance() the whole matrix.
wisp_covariance_blocks <- function(fit) {
  names <- names(fit$fitted.parameters)
  n <- length(names)
  block <- rep(NA_integer_, n)
  position <- rep(NA_integer_, n)
  variance <- rep(NA_real_, n)
  conditional <- rep(NA_real_, n)
  matrices <- list()
  within <- list()
  for (b in count_vcov_rust(fit$plan)) {
    if (is.null(b)) next
    k <- length(b$index)
    m <- matrix(b$matrix, k, k, byrow = TRUE)
    w <- matrix(b$conditional, k, k, byrow = TRUE)
    matrices[[length(matrices) + 1L]] <- m
    within[[length(within) + 1L]] <- w
    block[b$index] <- length(matrices)
    position[b$index] <- seq_len(k)
    variance[b$index] <- diag(m)
    conditional[b$index] <- diag(w)
  }
  list(blocks = matrices, within = within, block = block, position = position,
       variance = stats::setNames(variance, names),
       conditional = stats::setNames(conditional, names),
       species = fit$parameters$species, names = names)
}

# The covariance of the parameters at `idx` (positions in the reported
# vector): from their gene's block; 0 between parameters of different genes
# (independent); NA for a parameter outside every block.
# `share = "within"` reads the within-animal share instead.
covariance_rows <- function(covariance, idx, share = c("total", "within")) {
  blocks <- covariance[[if (match.arg(share) == "total") "blocks" else "within"]]
  k <- length(idx)
  out <- matrix(NA_real_, k, k, dimnames = list(covariance$names[idx], covariance$names[idx]))
  block <- covariance$block[idx]
  for (b in unique(block[!is.na(block)])) {
    rows <- which(block %in% b)
    at <- covariance$position[idx[rows]]
    out[rows, rows] <- blocks[[b]][at, at, drop = FALSE]
  }
  species <- covariance$species[idx]
  cross <- outer(species, species, "!=")
  out[!is.na(cross) & cross & is.na(out)] <- 0
  out
}

# The delta method's variance of a quantity whose gradient in the reported
# parameters at positions `index` is `gradient` (zero elsewhere): g' V g
# from the Wald covariance blocks (`share = "within"`: from their
# within-animal share); NA where V is undefined. delta_method_se() is its
# square root.
delta_method_variance <- function(covariance, index, gradient, share = c("total", "within")) {
  v <- covariance_rows(covariance, index, match.arg(share))
  if (anyNA(v)) return(NA_real_)
  max(0, drop(gradient %*% v %*% gradient))
}

delta_method_se <- function(covariance, index, gradient) {
  sqrt(delta_method_variance(covariance, index, gradient))
}

# The whole Wald covariance (every reported parameter; NA where undefined):
# what vcov() returns. Everything else reads blocks (covariance_rows()).
wisp_covariance <- function(fit) {
  covariance <- wisp_covariance_blocks(fit)
  whole <- covariance_rows(covariance, seq_along(covariance$names))
  attr(whole, "conditional") <- covariance$conditional
  whole
}

# Degrees of freedom of each tested effect's Wald test (model vignette
# §15.2). An effect of a factor that varies between animals only (genotype,
# age) has a variance V = V_between + V_within: V_between from the animals'
# spread, whose variance is estimated from animals - groups degrees of
# freedom, and V_within from the counts given the animals (treated as known).
# Satterthwaite's approximation gives df = (animals - groups) (V / V_between)^2:
# animals - groups when the animals' spread dominates, growing to Inf
# (normal quantiles) as it vanishes. Effects within animals get Inf.
# `variance` and `within` are every parameter's V and V_within; where
# either is unavailable the df is animals - groups.
wald_degrees_of_freedom <- function(fit, variance, within) {
  p <- fit$parameters
  df <- rep(Inf, nrow(p))
  between_df <- animal_spread_df(fit)
  if (is.null(between_df)) return(df)
  between <- fit$design$between
  reference <- fit$fix$ref.lvl
  components <- stats::setNames(fit$treatment$components, fit$treatment$names)
  is_between <- vapply(fit$treatment$names, function(treatment) {
    levels <- components[[treatment]]
    changed <- names(levels)[levels != reference[names(levels)]]
    length(changed) > 0 && all(between[changed])
  }, logical(1))
  at <- which(p$role %in% c("baseline", "beta") & !is.na(p$treatment))
  at <- at[is_between[p$treatment[at]] %in% TRUE]
  satterthwaite <- satterthwaite_df(variance[at], within[at], between_df)
  df[at] <- ifelse(is.na(satterthwaite), between_df, satterthwaite)
  df
}

# The degrees of freedom of the animals' spread, animals - groups (at least
# 1), where the groups are the cells of the factors that vary between
# animals; NULL when no factor does.
animal_spread_df <- function(fit) {
  between <- fit$design$between
  groups <- fit$design$groups
  if (is.null(between) || !any(between) || is.null(groups)) return(NULL)
  max(1, length(groups) - length(unique(groups)))
}

# Satterthwaite degrees of freedom of V = V_between + V_within with V_between
# estimated on `between_df` degrees of freedom and V_within known: NA where
# V or V_within is not available.
satterthwaite_df <- function(variance, within, between_df) {
  spread <- pmax(variance - within, 0)
  df <- between_df * (variance / spread)^2
  df[spread <= 1e-12 * variance] <- Inf
  df[!is.finite(variance) | !is.finite(within) | variance <= 0] <- NA_real_
  df
}

#' Tests and intervals of a wisp fit's effects, recomputed on demand
#'
#' Computes the statistics of a fit's fixed effects at any level, with any
#' multiplicity adjustment, by Wald tests from the fit or from bootstrap
#' replicates, and attaches them (and, with `boot`, the replicates) to the
#' fit. `summary()` and `confint()` use what this stores.
#'
#' - `"wald"` (count likelihood): estimate ± quantile × standard error from
#'   [vcov.wisp()]; for effects of factors that vary between animals only,
#'   t quantiles with Satterthwaite degrees of freedom
#'   (animals − groups) × (V / V_between)², where V_between is the part of
#'   the effect's variance V due to the animals' spread (so df = animals −
#'   groups when that spread dominates, and normal quantiles when it is 0);
#'   normal quantiles for effects within animals. Slope effects (tslope)
#'   are tested on the log-ratio scale: an effect c = P - N (P and N the sums
#'   of the treatments' slopes entering it with positive and negative
#'   weights) is 0 exactly when rho = log(P / N) is, and rho's Wald test is
#'   calibrated where c's is not (a slope's standard error grows with the
#'   slope). Its interval maps back to c through 2 sqrt(P N) sinh(rho / 2), so
#'   slope intervals are asymmetric around the estimate; `std.error` stays
#'   c's delta-method standard error.
#' - `"profile"` (count likelihood): the Wald statistics, checked for every
#'   transition-point effect by three refits with the effect held at 0 and
#'   at the ends of its Wald interval (profile deviances D = 2 (M(v) - M),
#'   M the negative Laplace marginal log-likelihood plus the fit's priors,
#'   the random-effect SDs held at the fit's). Where a signed root deviance
#'   differs from what a quadratic likelihood gives (the Wald statistic at 0,
#'   the interval's quantile at its ends) by more than `tolerance`, or the
#'   two tests disagree, the effect is flagged and gets the profile
#'   likelihood's test (the signed root deviance at 0, referred to the same
#'   t or normal distribution as its Wald test) and interval
#'   ({v : D(v) < q^2}, its ends found by Newton steps on the signed root
#'   deviance, each refit giving its slope, kept inside a bracket by secant
#'   steps). The columns
#'   `method` and `flagged` say which each effect got; `stats$profiles`
#'   holds the checks (deviances, ends reaching the axis' limits as `open`,
#'   refits, notes). A transition that a small rate step barely places can
#'   have a likelihood that is sharp at the estimate and flat beyond it:
#'   there the Wald p-value can be below 1e-8 for an effect whose profile
#'   p-value is 0.05 (`tests/testthat/test-profile.R`). The default without
#'   replicates: on simulated designs with small rate steps, few animals,
#'   transitions near the axis' ends or close together and unequal groups
#'   (`benchmarks/profile_calibration.R`, most of them designs the package
#'   was not tuned on) it kept true-null point effects' false-positive
#'   rates and its intervals' coverage near their nominal levels where the
#'   Wald tests alone did not (`vignette("inference")`). Its cost is the
#'   refits: about 3 times the fit's own time on a simulated panel of 200
#'   genes x 4 cell types, where half the point effects were flagged.
#' - `"centred"` (bootstrap): the original package's statistics, for
#'   reproducing them: p = 1 - F(|estimate|) + F(-|estimate|) with F the
#'   empirical distribution of the centred replicates (0 is possible), and
#'   type-7 percentile intervals at each effect's Holm- or Bonferroni-adjusted
#'   level. Its p-values and intervals do not agree with each other.
#' - `"percentile"` (bootstrap): the order-statistic interval
#'   \[x_(k), x_(R+1-k)\], k = ceiling(alpha (R + 1) / 2) - 1, and the
#'   two-sided p-value min(1, 2 min(#{x <= 0} + 1, #{x >= 0} + 1) / (R + 1)),
#'   which is never 0.
#'
#' For the Wald and percentile methods, an unadjusted p-value is below alpha exactly when the
#' unadjusted interval excludes 0. The adjustment's family is each gene: the
#' tested effects (the treatment effects) of one gene in every context
#' (`method = "centred"` keeps the original's family, every tested effect of
#' the fit). For
#' "does this term change the gene?", with the false-discovery rate
#' controlled across genes, use the gene-level tests of `anova(fit)`
#' ([wisp_gene_tests()]).
#'
#' @param fit A `"wisp"` object.
#' @param method `"wald"`, `"profile"`, `"percentile"` or `"centred"`; the default is
#'   `"percentile"` when the fit carries bootstrap replicates and `"profile"` otherwise.
#' @param tolerance For `method = "profile"`: how far (on the signed-root
#'   scale, in standard-normal units) a check may differ from the quadratic
#'   likelihood's before the effect is flagged.
#' @param max.fork For `method = "profile"`: worker processes (genes in
#'   parallel).
#' @param level Confidence level of the intervals; `alpha = 1 - level` is
#'   also the family-wise level of the adjusted tests.
#' @param adjustment `"holm"`, `"bonferroni"` or `"none"`.
#' @param boot A `"wisp_bootstrap"` from [bs_batch()] to attach (added to
#'   the replicates the fit has; a replicate number run twice with the same
#'   seed is an error).
#' @return `fit` with `stats` (and `bootstrap`) updated. `stats$parameters`
#'   has one row per fixed effect (baseline parameters and treatment
#'   effects): `parameter` (the original's name), its labels `context,
#'   gene, component, term, effect, block` (as in [as.data.frame.wisp()]:
#'   `component` is `"block rate"`, `"transition slope"` or `"transition
#'   point"`; `term` `"baseline"` or the design term, such as
#'   `"hemisphere:age"`; `effect` `"baseline"` or the treatment, such as
#'   `"right:P18"`), then `estimate, std.error, df, CI.low, CI.high,
#'   p.value, p.value.adj, significance, method, flagged` (`method`: how
#'   the effect was tested; `flagged`: whether the profile check flagged it,
#'   `NA` where it was not checked).
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 2, n.bins = 30, seed = 3)
#' fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
#' fit <- wisp_statistics(fit, level = 0.9)
#' head(fit$stats$parameters)
wisp_statistics <- function(fit, method = NULL, level = 0.95,
                            adjustment = c("holm", "bonferroni", "none"), boot = NULL,
                            tolerance = 0.25, max.fork = 1) {
  check_wisp_object(fit)
  check_number(level, "level", lower = 0.5, upper = 0.9999)
  adjustment <- match_choice(adjustment, "adjustment", c("holm", "bonferroni", "none"))
  attached <- !is.null(boot)
  if (attached) fit <- attach_replicates(fit, boot)
  has_replicates <- inherits(fit$bootstrap, "wisp_bootstrap")
  if (is.null(method)) method <- if (has_replicates) "percentile" else "profile"
  method <- match_choice(method, "method", c("profile", "wald", "percentile", "centred"))
  check_number(tolerance, "tolerance", lower = 1e-3, upper = 10)
  check_whole_number(max.fork, "max.fork", lower = 1, upper = 4096)
  statistics_of(fit, method, level, adjustment, tolerance, max.fork, attached)
}

# wisp_statistics() past its checks of the arguments, `boot` attached
# (`attached`); `progress(done, total)` hears how the profile checks go, in
# genes.
statistics_of <- function(fit, method, level, adjustment, tolerance, max.fork, attached = FALSE,
                          progress = NULL) {
  has_replicates <- inherits(fit$bootstrap, "wisp_bootstrap")
  # 1 - 0.95 is 0.05 + 4e-17 in floating point; rounded, alpha is the level
  # the user means (0.05 exactly, as the original's statistics used).
  alpha <- round(1 - level, 10)
  p <- fit$parameters
  estimates <- unname(fit$fitted.parameters)
  # Effects a reduced model holds at 0 are not estimated, so not tested.
  tested <- p$role %in% "beta" & !held_rows(p)
  shown <- p$role %in% c("baseline", "beta")
  # How each effect is tested: a profile fit's effects are Wald unless profiled.
  row_method <- rep(if (method == "profile") "wald" else method, length(estimates))
  flagged <- rep(NA, length(estimates))
  profiles <- NULL
  if (method %in% c("wald", "profile")) {
    require_likelihood(fit, paste0(
      "Wald statistics need the count likelihood (likelihood = \"nb\"); use ",
      "method = \"percentile\" with a bootstrap."), call = sys.call())
    covariance <- wisp_covariance_blocks(fit)
    se <- sqrt(pmax(unname(covariance$variance), 0))
    df <- wald_degrees_of_freedom(fit, unname(covariance$variance),
                                  unname(covariance$conditional))
    wald <- wald_tests(estimates, se, df, alpha)
    wald <- slope_ratio_tests(fit, covariance, df, alpha, wald)
    lower <- wald$lower
    upper <- wald$upper
    p_value <- ifelse(tested, wald$p.value, NA_real_)
    if (method == "profile") {
      checked <- which(tested & p$component %in% "tpoint" & is.finite(se) & se > 0)
      profiles <- profile_checks(fit, checked, estimates, se, df, alpha, tolerance, max.fork,
                                 progress)
      flagged[checked] <- profiles$flagged
      use <- checked[profiles$method == "profile"]
      from <- match(use, checked)
      lower[use] <- profiles$CI.low[from]
      upper[use] <- profiles$CI.high[from]
      p_value[use] <- profiles$p.value[from]
      row_method[use] <- "profile"
    }
    replicates_used <- NA_integer_
  } else if (method == "centred") {
    if (!has_replicates) {
      stop_input("centred statistics need bootstrap replicates (bs_batch()).")
    }
    replicates <- fit$bootstrap$t[bootstrap_used_replicates(fit$bootstrap), , drop = FALSE]
    centred <- parameter_statistics(fit$fitted.parameters, replicates, tested, alpha,
                                    if (adjustment == "none") "bonferroni" else adjustment)
    lower <- centred$CI.low
    upper <- centred$CI.high
    p_value <- centred$p.value
    se <- apply(replicates, 2, stats::sd, na.rm = TRUE)
    df <- rep(NA_real_, length(estimates))
    replicates_used <- nrow(replicates)
  } else {
    if (!has_replicates) {
      stop_input("percentile statistics need bootstrap replicates: run bs_batch() and pass ",
                 "its result as `boot`, or use wisp(..., bootstraps.num = 1000).")
    }
    boot <- fit$bootstrap
    use <- bootstrap_used_replicates(boot)
    replicates <- boot$t[use, , drop = FALSE]
    interval <- vapply(seq_along(estimates), function(j) bootstrap_interval(replicates[, j], alpha),
                       numeric(2))
    lower <- interval[1, ]
    upper <- interval[2, ]
    p_value <- ifelse(tested, vapply(seq_along(estimates), function(j) {
      bootstrap_p_value(replicates[, j])
    }, numeric(1)), NA_real_)
    se <- apply(replicates, 2, stats::sd, na.rm = TRUE)
    df <- rep(NA_real_, length(estimates))
    replicates_used <- nrow(replicates)
  }
  # A reduced model's held effects are 0 by construction: no variance, no test.
  held <- held_rows(p)
  estimates[held] <- 0
  se[held] <- NA_real_
  lower[held] <- NA_real_
  upper[held] <- NA_real_
  has_p <- !is.na(p_value)
  # One family per gene: a panel of hundreds of genes would otherwise call
  # nothing (Holm over every effect of the fit). Gene-level questions are
  # answered, with the FDR controlled across genes, by anova(fit).
  # The original's centred statistics keep its family, every effect of the fit.
  p_adjusted <- rep(NA_real_, length(p_value))
  family <- if (method == "centred") rep("fit", nrow(p)) else p$species
  for (members in split(which(has_p), family[has_p])) {
    p_adjusted[members] <- stats::p.adjust(p_value[members], method = adjustment)
  }
  family_size <- if (any(has_p)) max(table(family[has_p])) else 0L
  labels <- parameter_labels(fit)
  table <- data.frame(
    parameter = p$name, context = labels$context, gene = labels$gene,
    component = labels$component, term = labels$term, effect = labels$effect,
    block = labels$block, estimate = estimates, std.error = unname(se), df = df,
    CI.low = lower, CI.high = upper, p.value = p_value, p.value.adj = p_adjusted,
    significance = significance_marks(p_adjusted, alpha),
    method = row_method, flagged = flagged,
    stringsAsFactors = FALSE, row.names = NULL
  )[shown, , drop = FALSE]
  rownames(table) <- NULL
  fit$stats <- list(parameters = table, method = method, level = level, alpha = alpha,
                    adjustment = adjustment, replicates.used = replicates_used,
                    tests = sum(has_p), family = if (method == "centred") "fit" else "gene",
                    family.size = family_size, profiles = profiles)
  if (method == "percentile") {
    # (The centred p-values can be 0: no floor, no resolution.)
    resolution <- bootstrap_resolution(replicates_used, family_size, alpha)
    fit$stats$resolution <- resolution
  }
  if (attached) {
    # What wisp(bootstraps.num =) gives a fit besides the statistics: the
    # band of the rate-count figure and the original's fields; and its
    # warnings, once, when the replicates are attached.
    fit <- bootstrap_fields(fit)
    warn_bootstrap_replicates(fit)
    warn_bootstrap_resolution(fit)
  }
  fit
}

# Attaches (or adds) bootstrap replicates to a fit.
attach_replicates <- function(fit, boot) {
  if (!inherits(boot, "wisp_bootstrap")) {
    stop_input("`boot` must be a \"wisp_bootstrap\" from bs_batch(), not ", class(boot)[1], ".")
  }
  if (!identical(colnames(boot$t), names(fit$fitted.parameters))) {
    stop_input("`boot` holds replicates of a different fit (its parameters differ).")
  }
  old <- fit$bootstrap
  if (inherits(old, "wisp_bootstrap")) {
    if (!identical(old$resample, boot$resample)) {
      stop_input("`boot` resamples by \"", boot$resample, "\" but the fit's replicates by \"",
                 old$resample, "\"; keep one scheme per fit.")
    }
    if (!identical(old$seed, boot$seed)) {
      stop_input("`boot` has seed ", format(boot$seed), " but the fit's replicates seed ",
                 format(old$seed), ": replicates of one fit must share a seed and differ in ",
                 "their numbers (bs_batch(fit, replicates = ...)).")
    }
    twice <- intersect(old$replicates, boot$replicates)
    if (length(twice)) {
      stop_input("replicate", if (length(twice) > 1) "s", " ", row_list(twice), " of seed ",
                 format(boot$seed), " ", if (length(twice) > 1) "are" else "is",
                 " already attached to the fit.")
    }
    boot <- combine_bootstraps(old, boot)
  }
  fit$bootstrap <- boot
  fit
}

# wisp()'s line on the statistics it computed: the method and, for
# "profile", how many point effects were checked and how many profiled.
statistics_message <- function(stats, seconds) {
  checks <- stats$profiles
  if (!identical(stats$method, "profile") || is.null(checks)) {
    return(sprintf("Statistics: Wald tests in %s.", format_seconds(seconds)))
  }
  sprintf(paste0("Statistics: Wald tests; %s checked by profile likelihood, %s flagged and ",
                 "given profile tests and intervals, in %s (wisp(statistics = \"wald\") skips ",
                 "the checks)."),
          count_noun(nrow(checks), "transition-point effect"),
          format(sum(checks$method == "profile"), big.mark = ","), format_seconds(seconds))
}

# The profile checks of method = "profile" (model vignette §15.5): for each
# transition-point effect in `rows`, held fits at 0 and at its Wald
# interval's ends (count_profile_rust()); where a signed root deviance
# differs from the quadratic's (the Wald statistic z at 0, the interval's
# quantile q at its ends) by more than `tolerance`, or the two tests
# disagree, the effect is flagged and its test and interval are the
# profile's: p from the signed root deviance r at 0 (t with the Wald df
# where the Wald test used t, normal otherwise; so that p < alpha exactly
# when r > q) and the interval {v : D(v) < q^2}. A flagged effect whose
# profile could not be completed keeps its Wald statistics, with the reason
# in `note`.
profile_checks <- function(fit, rows, estimates, se, df, alpha, tolerance, max.fork,
                           progress = NULL) {
  quantile <- ifelse(is.finite(df[rows]), stats::qt(1 - alpha / 2, pmax(df[rows], 1)),
                     stats::qnorm(1 - alpha / 2))
  empty <- data.frame(parameter = character(), estimate = numeric(), std.error = numeric(),
                      deviance.zero = numeric(), deviance.lower = numeric(),
                      deviance.upper = numeric(), flagged = logical(), method = character(),
                      CI.low = numeric(), CI.high = numeric(), open = character(),
                      p.value = numeric(), fits = integer(), note = character(),
                      stringsAsFactors = FALSE)
  if (!length(rows)) return(empty)
  result <- count_profile_rust(fit$plan, as.integer(rows), as.numeric(se[rows]), quantile,
                               tolerance, as.integer(max.fork), progress)
  root <- sign(estimates[rows]) * sqrt(pmax(result$deviance_zero, 0))
  p_value <- ifelse(is.finite(df[rows]), 2 * stats::pt(-abs(root), pmax(df[rows], 1)),
                    2 * stats::pnorm(-abs(root)))
  complete <- result$flagged & is.finite(result$deviance_zero) &
    is.finite(result$lower) & is.finite(result$upper)
  open <- ifelse(result$lower_open & result$upper_open, "both",
                 ifelse(result$lower_open, "lower", ifelse(result$upper_open, "upper", "")))
  data.frame(
    parameter = fit$parameters$name[rows], estimate = estimates[rows], std.error = se[rows],
    deviance.zero = result$deviance_zero, deviance.lower = result$deviance_lower,
    deviance.upper = result$deviance_upper, flagged = result$flagged,
    method = ifelse(complete, "profile", "wald"),
    CI.low = ifelse(complete, result$lower, NA_real_),
    CI.high = ifelse(complete, result$upper, NA_real_),
    open = ifelse(complete, open, ""),
    p.value = ifelse(complete, p_value, NA_real_),
    fits = result$fits, note = result$note,
    stringsAsFactors = FALSE, row.names = NULL
  )
}
