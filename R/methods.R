# S3 methods for "wisp" fits and "wisp_bootstrap" results.
#
# Parameters are always selected through the columns of `fit$parameters`
# (role, component, context, species, ...), never by matching their names
# with regular expressions: gene names can be prefixes of each other.

# ---------------------------------------------------------------------------
# Helpers

# Whether a fit carries a bootstrap and its statistics.
wisp_has_bootstrap <- function(object) {
  inherits(object$bootstrap, "wisp_bootstrap") && !is.null(object$stats$parameters)
}

# Whether a fit carries statistics (from the bootstrap or Wald tests).
wisp_has_statistics <- function(object) {
  !is.null(object$stats$parameters)
}

# The method and level of a fit's statistics. Fits saved by wispack 0.1.0
# carry the original's centred statistics, with neither recorded.
statistics_method <- function(stats) if (is.null(stats$method)) "centred" else stats$method
statistics_level <- function(stats) if (is.null(stats$level)) 1 - stats$alpha else stats$level

# The fit with statistics at `level` (recomputed when they are missing or at
# another level; NULL keeps what is there). Fits of the original likelihood
# without a bootstrap have none.
statistics_at <- function(object, level = NULL) {
  has <- wisp_has_statistics(object)
  if (!is.null(level)) check_number(level, "level", lower = 0.5, upper = 0.9999)
  if (has && (is.null(level) || isTRUE(all.equal(level, statistics_level(object$stats))))) {
    return(object)
  }
  if (!has && fit_likelihood(object) != "nb") return(object)
  method <- if (has) statistics_method(object$stats) else NULL
  adjustment <- if (has) object$stats$adjustment else "holm"
  wisp_statistics(object, method = method, level = if (is.null(level)) 0.95 else level,
                  adjustment = adjustment)
}

check_wisp_object <- function(object, call = sys.call(-1)) {
  if (!inherits(object, "wisp")) {
    stop_input("`object` must be a \"wisp\" object from wisp(), not ", class(object)[1], ".",
               call = call)
  }
  invisible(object)
}

# An error naming the arguments a method was given in `...` but does not
# use (rather than swallowing them), e.g. predict(fit, grid, se.fit = TRUE).
check_unused_arguments <- function(..., .method = NULL, .call = sys.call(-1)) {
  if (...length() == 0L) return(invisible())
  method <- .method
  call <- .call
  dots <- as.list(substitute(list(...)))[-1L]
  labels <- names(dots)
  if (is.null(labels)) labels <- rep("", length(dots))
  shown <- vapply(seq_along(dots), function(i) {
    if (nzchar(labels[i])) labels[i] else paste(deparse(dots[[i]], nlines = 1L), collapse = "")
  }, "")
  if (is.null(method)) method <- deparse(call[[1L]], nlines = 1L)
  stop_input("unused argument", if (length(shown) > 1L) "s", " ",
             paste0("`", shown, "`", collapse = ", "), ": ", method, "() does not take ",
             if (length(shown) > 1L) "them" else "it", ".", call = call)
}

# Which rows of fit$count.data.summed belong to an animal (random level) x
# treatment combination that was observed; population rows (ran "none")
# always do. Under the count likelihood every row does (its table holds the
# observed cells only); the original's summed table has every combination,
# also those never observed, e.g. an animal under another genotype when
# animals are nested in genotype.
observed_rows <- function(fit) {
  d <- fit$count.data.summed
  key <- paste(d$ran, d$treatment, sep = "\r")
  d$ran == "none" | key %in% key[!is.na(d$count)]
}

# The parameter table with a logical selector for `type`.
wisp_parameter_selector <- function(parameters, type) {
  switch(type,
    all = rep(TRUE, nrow(parameters)),
    fixed = parameters$role %in% c("baseline", "beta"),
    baseline = parameters$role %in% "baseline",
    beta = parameters$role %in% "beta",
    warp = parameters$role %in% "warp"
  )
}

# Replicate rows that the statistics used: ok and converged when that is the
# number recorded in the statistics, else every ok replicate.
bootstrap_used_replicates <- function(boot, used = NULL) {
  d <- boot$diagnostics
  ok <- d$ok %in% TRUE
  # wisp(converged.resamples.only = FALSE) keeps every successful replicate.
  if (isFALSE(boot$converged.only)) return(ok)
  converged <- ok & d$converged %in% TRUE
  if (!is.null(used) && sum(ok) == used && sum(converged) != used) return(ok)
  if (any(converged)) converged else ok
}

# Percentile intervals from a replicate matrix.
percentile_intervals <- function(replicates, parm, level, call = sys.call(-1)) {
  if (!is.numeric(level) || length(level) != 1L || is.na(level) || level <= 0 || level >= 1) {
    stop_input("`level` must be a single number between 0 and 1, not ", describe_value(level),
               ".", call = call)
  }
  names <- colnames(replicates)
  if (missing(parm) || is.null(parm)) {
    parm <- names
  } else if (is.numeric(parm)) {
    if (anyNA(parm) || any(parm < 1 | parm > length(names) | parm != round(parm))) {
      stop_input("numeric `parm` must hold parameter numbers between 1 and ", length(names), ".",
                 call = call)
    }
    parm <- names[parm]
  } else if (is.character(parm)) {
    unknown <- setdiff(parm, names)
    if (length(unknown)) {
      stop_input("unknown parameter", if (length(unknown) > 1) "s", " in `parm`: ",
                 paste0("'", utils::head(unknown, 5), "'", collapse = ", "),
                 if (length(unknown) > 5) ", ...", ".", call = call)
    }
  } else {
    stop_input("`parm` must be parameter names or numbers.", call = call)
  }
  a <- (1 - level) / 2
  probs <- c(a, 1 - a)
  out <- matrix(NA_real_, length(parm), 2L,
                dimnames = list(parm, paste(format(100 * probs, trim = TRUE, scientific = FALSE,
                                                   digits = 3), "%")))
  for (p in parm) out[p, ] <- bootstrap_interval(replicates[, p], 1 - level)
  out
}

# Parameter names chosen by `parm` (names or numbers) among `names`.
select_parameters <- function(names, parm, call = sys.call(-1)) {
  if (is.numeric(parm)) {
    if (anyNA(parm) || any(parm < 1 | parm > length(names) | parm != round(parm))) {
      stop_input("numeric `parm` must hold parameter numbers between 1 and ", length(names), ".",
                 call = call)
    }
    return(names[parm])
  }
  if (!is.character(parm)) stop_input("`parm` must be parameter names or numbers.", call = call)
  unknown <- setdiff(parm, names)
  if (length(unknown)) {
    stop_input("unknown parameter", if (length(unknown) > 1) "s", " in `parm`: ",
               paste0("'", utils::head(unknown, 5), "'", collapse = ", "),
               if (length(unknown) > 5) ", ..." else "", ".", call = call)
  }
  parm
}

format_seconds <- function(s) {
  if (is.na(s)) return("NA")
  if (s < 1) sprintf("%.0f ms", 1000 * s) else if (s < 120) sprintf("%.1f s", s) else
    sprintf("%.1f min", s / 60)
}

# ---------------------------------------------------------------------------
# print / summary

#' Print a wisp fit
#'
#' A short overview of a fit: the call, the size of the data, the number of
#' transitions per curve, the fit diagnostics and whether the fit was
#' bootstrapped (without a bootstrap, a count-likelihood fit says how many of
#' its Wald tests are significant).
#'
#' @param x A `"wisp"` object from [wisp()].
#' @param ... Unused.
#' @return `x`, invisibly.
#' @seealso [summary.wisp()], [plot.wisp()]
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 2, n.bins = 40)
#' fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
#' fit
print.wisp <- function(x, ...) {
  cat("Warped-sigmoid Poisson-process mixed-effects model (wisp)\n")
  if (!is.null(x$call)) cat("Call: ", paste(deparse(x$call, width.cutoff = 70L), collapse = "\n      "),
                            "\n", sep = "")
  d <- x$count.data.summed
  g <- x$grouping.variables
  real_ran <- setdiff(g$ran.lvls, "none")
  cat(sprintf("Data: %d summed rows (%d observed); %d context%s, %d gene%s, %d random level%s, %d treatment%s, %d bins\n",
              nrow(d), sum(!is.na(d$count)),
              length(g$context.lvls), if (length(g$context.lvls) != 1) "s" else "",
              length(g$species.lvls), if (length(g$species.lvls) != 1) "s" else "",
              length(real_ran), if (length(real_ran) != 1) "s" else "",
              length(x$treatment$names), if (length(x$treatment$names) != 1) "s" else "",
              if (nrow(d)) max(d$bin) else 0L))
  degrees <- as.vector(x$degrees)
  if (length(degrees)) {
    tab <- table(factor(degrees, levels = sort(unique(degrees))))
    cat("Transitions per curve: ",
        paste0(names(tab), ": ", as.vector(tab), " curve", ifelse(as.vector(tab) == 1, "", "s"),
               collapse = ", "),
        sprintf(" (%d in all)\n", sum(degrees)), sep = "")
  }
  f <- x$fit.diagnostics
  cat(sprintf("Fit: %s after %d evaluations (%s); %s; -log-likelihood %.2f\n",
              f$code, as.integer(f$num.evals), format_seconds(f$seconds),
              count_noun(as.integer(f$n.params), "parameter"),
              f$neg.loglik))
  if (inherits(x$bootstrap, "wisp_bootstrap")) {
    b <- x$bootstrap
    cat(sprintf("Bootstrapped: %d replicates (%d converged)\n", as.integer(b$R),
                sum(b$diagnostics$converged %in% TRUE)))
  } else if (wisp_has_statistics(x) && identical(x$stats$method, "wald")) {
    s <- x$stats
    cat(sprintf("Not bootstrapped; Wald tests of %d treatment effects: %d significant (%s-adjusted, alpha %g); see summary()\n",
                as.integer(s$tests), sum(s$parameters$p.value.adj < s$alpha, na.rm = TRUE),
                s$adjustment, s$alpha))
  } else {
    cat("Not bootstrapped: refit with wisp(..., bootstraps.num = 1000) for intervals and p-values.\n")
  }
  invisible(x)
}

#' Summarise a wisp fit
#'
#' The fixed-effect table of a fit (baseline parameters and treatment
#' effects) with the statistics of `fit$stats` (Wald statistics for a count
#' fit without a bootstrap; percentile or the original's centred statistics
#' from bootstrap replicates): intervals, p-values and significance marks,
#' plus the fit diagnostics.
#'
#' @param object A `"wisp"` object from [wisp()].
#' @param level `NULL` (the statistics the fit carries), or a confidence
#'   level at which [wisp_statistics()] recomputes them with the fit's method
#'   and adjustment (Wald tests for a count fit without any).
#' @param ... Nothing: an argument `summary()` does not take is an error.
#' @return An object of class `"summary.wisp"`: a list with `call`,
#'   `coefficients` (a data.frame, one row per fixed-effect parameter:
#'   `parameter, role, component, context, species, block, treatment,
#'   estimate` and, when the fit has statistics, `std.error, df, CI.low,
#'   CI.high, p.value, p.value.adj, significance`), `bootstrapped` (whether
#'   the fit carries bootstrap replicates), `tested` (whether it has
#'   statistics), `method` (`"wald"`, `"percentile"` or `"centred"`),
#'   `level`, `replicates` (replicates used by the statistics, or 0),
#'   `alpha`, `adjustment`, `likelihood`, `random.sd`, `fit.diagnostics`,
#'   `degrees`, `n.warp` (number of warping factors), `nobs`, `logLik` and
#'   `structure`: `NULL`, or for a fit whose transitions were chosen by the
#'   likelihood (`model.settings$structure = "likelihood"`) a data.frame, one
#'   row per curve: `context, species, degree` (chosen), `fixed` (set by
#'   `degrees =`), `runner.up` (the next best degree), `margin` (its BIC
#'   minus the winner's) and `close` (`margin` below 2: the data barely
#'   prefer the chosen degree; printed as a warning line with those curves),
#'   and `small.design`: `NULL`, or, for Wald tests of transition points
#'   with fewer than 5 animals in some group (where they were
#'   anti-conservative in the calibration benchmark; see [wisp()]), the
#'   number of animals in the smallest group, printed as a caution.
#' @seealso [coef.wisp()], [confint.wisp()]
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 2, n.bins = 40)
#' fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
#' summary(fit)
#' \donttest{
#' booted <- suppressWarnings(wisp(counts, model.settings = list(LRO_cost = "none"),
#'                                 bootstraps.num = 20, ran.seed = 1, verbose = FALSE))
#' s <- summary(booted)
#' head(s$coefficients)
#' }
summary.wisp <- function(object, level = NULL, ...) {
  check_unused_arguments(..., .method = "summary.wisp")
  check_wisp_object(object)
  object <- statistics_at(object, level)
  p <- object$parameters
  fixed <- p$role %in% c("baseline", "beta")
  table <- data.frame(parameter = p$name[fixed], role = p$role[fixed],
                      component = p$component[fixed], context = p$context[fixed],
                      species = p$species[fixed], block = p$block[fixed],
                      treatment = p$treatment[fixed],
                      estimate = unname(object$fitted.parameters[p$name[fixed]]),
                      stringsAsFactors = FALSE, row.names = NULL)
  tested <- wisp_has_statistics(object)
  if (tested) {
    stats <- object$stats$parameters
    at <- match(table$parameter, stats$parameter)
    for (column in c("std.error", "df", "CI.low", "CI.high", "p.value", "p.value.adj",
                     "significance")) {
      table[[column]] <- stats[[column]][at]
    }
  }
  structure(list(
    call = object$call, coefficients = table, bootstrapped = wisp_has_bootstrap(object),
    tested = tested, method = if (tested) statistics_method(object$stats) else NA_character_,
    level = if (tested) statistics_level(object$stats) else NA_real_,
    replicates = if (tested && !is.na(object$stats$replicates.used)) object$stats$replicates.used else 0L,
    alpha = if (tested) object$stats$alpha else NA_real_,
    adjustment = if (tested) object$stats$adjustment else NA_character_,
    likelihood = fit_likelihood(object), random.sd = object$random.sd,
    fit.diagnostics = object$fit.diagnostics, degrees = object$degrees,
    n.warp = sum(p$role %in% "warp"), nobs = nobs.wisp(object), logLik = logLik.wisp(object),
    structure = structure_summary(object$structure.selection),
    held.effects = object$held.effects,
    small.design = if (tested) wald_small_design(object) else NULL
  ), class = "summary.wisp")
}

#' @rdname summary.wisp
#' @param x A `"summary.wisp"` object.
#' @param digits Significant digits of the table.
#' @param max.rows Most rows of the coefficient table to print.
#' @export
print.summary.wisp <- function(x, digits = max(3L, getOption("digits") - 3L), max.rows = 50L, ...) {
  check_whole_number(digits, "digits", lower = 1, upper = 22)
  check_whole_number(max.rows, "max.rows", lower = 0, upper = Inf)
  cat("wisp fit summary\n")
  if (!is.null(x$call)) cat("Call: ", paste(deparse(x$call, width.cutoff = 70L), collapse = "\n      "),
                            "\n", sep = "")
  f <- x$fit.diagnostics
  status <- if (isTRUE(f$converged)) "converged" else "NOT converged"
  if (!identical(f$code, status)) status <- sprintf("%s (%s)", status, f$code)
  if (identical(x$likelihood, "nb")) {
    wrapped <- function(text) cat(strwrap(text, exdent = 2), sep = "\n")
    cat("\n")
    wrapped(sprintf("Fit (count likelihood): %s after %s in %s; largest scaled gradient %.2g",
                    status, count_noun(as.integer(f$iterations), "Newton iteration"),
                    format_seconds(f$seconds), f$max.gradient))
    wrapped(sprintf("log-likelihood %.2f (df = %d, nobs = %d)%s", as.numeric(x$logLik),
                    as.integer(attr(x$logLik, "df")), as.integer(x$nobs),
                    if (isTRUE(f$on.bound > 0)) {
                      paste0("; ", count_noun(as.integer(f$on.bound), "estimate"), " on a bound")
                    } else ""))
    if (!is.null(x$random.sd) && length(x$random.sd)) {
      sd <- apply(x$random.sd, 2, function(v) {
        paste(unique(formatC(range(v), digits = 2, format = "g")), collapse = "-")
      })
      wrapped(sprintf("random-effect SDs over genes: point %s, rate %s, slope %s", sd[["point"]],
                      sd[["rate"]], sd[["slope"]]))
    }
    if (length(x$held.effects)) {
      wrapped(paste0("reduced model: effects held at 0 (model.settings$trtKO), not tested: ",
                     paste(x$held.effects, collapse = ", ")))
    }
  } else {
    cat(sprintf("\nFit: %s after %d evaluations in %s\n", status,
                as.integer(f$num.evals), format_seconds(f$seconds)))
    cat(sprintf("log-likelihood %.2f (df = %d, nobs = %d); penalised -log-likelihood %.2f\n",
                as.numeric(x$logLik), as.integer(f$n.params), as.integer(x$nobs), f$pen.neg.value))
  }
  cat(sprintf("%s, %s, %s in all\n", count_noun(nrow(x$coefficients), "fixed-effect parameter"),
              count_noun(as.integer(x$n.warp), "random effect"),
              count_noun(sum(x$degrees), "transition")))
  print_structure_summary(x$structure)
  tab <- x$coefficients
  number <- function(v, blank = "NA") {
    ifelse(is.na(v), blank, formatC(v, digits = digits, format = "fg"))
  }
  shown <- data.frame(component = tab$component, context = tab$context, species = tab$species,
                      block = tab$block, treatment = tab$treatment,
                      estimate = number(tab$estimate), stringsAsFactors = FALSE)
  if (isTRUE(x$tested)) {
    shown$CI.low <- number(tab$CI.low)
    shown$CI.high <- number(tab$CI.high)
    shown$p.adj <- ifelse(is.na(tab$p.value.adj), "",
                          format.pval(tab$p.value.adj, digits = 2, eps = 1e-4))
    shown$sig <- tab$significance
    how <- if (identical(x$method, "wald")) {
      "Wald tests; t quantiles for between-animal effects, slope effects on the log-ratio scale"
    } else if (identical(x$method, "centred")) {
      sprintf("bootstrap: %s; the original's centred p-values, intervals at adjusted levels",
              count_noun(as.integer(x$replicates), "replicate"))
    } else {
      sprintf("bootstrap: %s; percentile intervals", count_noun(as.integer(x$replicates), "replicate"))
    }
    cat("", strwrap(sprintf("Fixed effects (%s; %g %% intervals; %s-adjusted p-values at alpha = %g):",
                            how, 100 * x$level, x$adjustment, x$alpha),
                    exdent = 2), "", sep = "\n")
  } else {
    cat("\nFixed effects (estimates only; bootstrap for intervals and p-values):\n")
  }
  shown$role <- tab$role
  shown <- shown[, c("role", setdiff(names(shown), "role"))]
  if (length(unique(shown$context)) == 1L) shown$context <- NULL
  n <- nrow(shown)
  print_fitted_table(utils::head(shown, max.rows), split = c("context", "species"))
  if (n > max.rows) cat(sprintf("... %d more rows: see summary(fit)$coefficients\n", n - max.rows))
  if (isTRUE(x$tested)) {
    cat(strwrap(sprintf("Signif.: *** p.adj < %g, ** < %g, * < %g, ns otherwise (tested: treatment effects)",
                        x$alpha / 50, x$alpha / 5, x$alpha), exdent = 2), sep = "\n")
  }
  if (!is.null(x$small.design)) {
    cat(strwrap(sprintf(paste0(
      "Caution: the smallest group has %d animals; below %d per group the Wald tests of ",
      "transition points (tpoint) were anti-conservative in the calibration benchmark ",
      "(vignette(\"inference\")): bootstrap them (bs_batch(resample = \"parametric\")) ",
      "before reading their stars."), x$small.design, WALD_CALIBRATED_ANIMALS), exdent = 2),
      sep = "\n")
  }
  invisible(x)
}

# ---------------------------------------------------------------------------
# coef / confint / fitted / residuals / predict / logLik / nobs

#' Estimates of a wisp fit
#'
#' @param object A `"wisp"` object from [wisp()].
#' @param type Which parameters: `"all"`, `"fixed"` (baseline and treatment
#'   effects), `"baseline"`, `"beta"` (treatment effects) or `"warp"`
#'   (random-level warping factors).
#' @param ... Nothing: an argument `coef()` does not take is an error.
#' @return A named numeric vector of estimates (the medians of the bootstrap
#'   replicates when the fit was made with `use.median = TRUE`).
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 2, n.bins = 40)
#' fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
#' coef(fit, "beta")
coef.wisp <- function(object, type = c("all", "fixed", "baseline", "beta", "warp"), ...) {
  check_unused_arguments(..., .method = "coef.wisp")
  type <- match_choice(type, "type", c("all", "fixed", "baseline", "beta", "warp"))
  keep <- wisp_parameter_selector(object$parameters, type)
  object$fitted.parameters[object$parameters$name[keep]]
}

#' Confidence intervals of wisp parameters
#'
#' Wald intervals (count likelihood) or bootstrap percentile intervals, the
#' same as the statistics of [wisp_statistics()] use, so that an interval
#' excludes 0 exactly when the effect's unadjusted p-value is below 1 -
#' `level`.
#'
#' - `"wald"`: estimate ± quantile × standard error ([vcov.wisp()]); t
#'   quantiles with df = animals − groups for effects of factors that vary
#'   between animals only. Parameters without a variance (on a bound, or not
#'   informed by the data) get `NA`.
#' - `"bootstrap"`: the order statistics x_(k) and x_(R+1-k) of the
#'   replicates, k = ceiling(alpha (R + 1) / 2) - 1 (`-Inf`/`Inf` when
#'   there are too few replicates for the level; `NA` for parameters the
#'   resampling scheme does not redraw, such as warps under `resample =
#'   "animals"`).
#'
#' @param object A `"wisp"` object, or a `"wisp_bootstrap"` from [bs_batch()]
#'   (all successful replicates).
#' @param parm Parameter names or numbers (default: the fixed effects for
#'   Wald intervals, every parameter for bootstrap intervals).
#' @param level Confidence level.
#' @param method `"auto"` (bootstrap when the fit carries replicates, Wald
#'   otherwise), `"wald"` or `"bootstrap"`.
#' @param ... Nothing: an argument `confint()` does not take is an error.
#' @return A matrix with one row per parameter and columns for the lower and
#'   upper limits, labelled in percent (as [stats::confint()]).
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 2, n.bins = 40)
#' fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
#' confint(fit, parm = names(coef(fit, "beta")), method = "wald")
#' boot <- bs_batch(fit, 19, seed = 1)
#' confint(boot, parm = names(coef(fit, "beta")), level = 0.9)
confint.wisp <- function(object, parm, level = 0.95, method = c("auto", "wald", "bootstrap"),
                         ...) {
  check_unused_arguments(..., .method = "confint.wisp")
  check_wisp_object(object)
  check_number(level, "level", lower = 0.5, upper = 0.9999)
  method <- match_choice(method, "method", c("auto", "wald", "bootstrap"))
  if (method == "auto") {
    method <- if (inherits(object$bootstrap, "wisp_bootstrap")) "bootstrap" else "wald"
  }
  if (method == "bootstrap") {
    if (!inherits(object$bootstrap, "wisp_bootstrap")) {
      stop_input("bootstrap intervals need replicates: use wisp(..., bootstraps.num = 1000), ",
                 "or wisp_statistics(fit, boot = bs_batch(fit, ...)).")
    }
    boot <- object$bootstrap
    use <- bootstrap_used_replicates(boot, object$stats$replicates.used)
    replicates <- boot$t[use, , drop = FALSE]
    colnames(replicates) <- names(object$fitted.parameters)
    return(percentile_intervals(replicates, if (missing(parm)) NULL else parm, level))
  }
  stats <- wisp_statistics(object, method = "wald", level = level)$stats$parameters
  values <- cbind(stats$CI.low, stats$CI.high)
  rownames(values) <- stats$parameter
  parm <- if (missing(parm)) rownames(values) else select_parameters(rownames(values), parm)
  a <- (1 - level) / 2
  out <- values[parm, , drop = FALSE]
  colnames(out) <- paste(format(100 * c(a, 1 - a), trim = TRUE, scientific = FALSE, digits = 3), "%")
  out
}

#' @rdname confint.wisp
#' @export
confint.wisp_bootstrap <- function(object, parm, level = 0.95, ...) {
  check_unused_arguments(..., .method = "confint.wisp_bootstrap")
  if (is.null(object$t)) stop_input("the bootstrap has no successful replicate.")
  use <- object$diagnostics$ok %in% TRUE
  replicates <- object$t[use, , drop = FALSE]
  percentile_intervals(replicates, if (missing(parm)) NULL else parm, level)
}

#' Fitted values and residuals of a wisp fit
#'
#' One value per row of `fit$count.data.summed` (population rows, `ran ==
#' "none"`, included), in its order, except rows of an animal (random level)
#' under a treatment it was never observed in. Those exist only in the
#' summed table of `likelihood = "original"` (as in the original package),
#' which has every animal x treatment combination: with animals nested in a
#' between-animal factor (e.g. each animal has one genotype), an animal has
#' no fitted values under the other levels of that factor. `fitted(fit)`
#' is `fit$count.data.summed$pred[keep]` with `keep` the observed
#' combinations' rows (all rows under the count likelihood, whose table holds
#' observed cells only).
#'
#' `residuals()` follows R's convention, observed minus fitted. Note that
#' the residual tables of the original wispack were fitted minus observed:
#' their signs are reversed.
#'
#' `residuals(type = "quantile")` (count likelihood only) gives randomized
#' quantile residuals (Dunn and Smyth 1996): for an observed count y with
#' fitted negative-binomial distribution F (mean `pred`, size `exposure /
#' dispersion`), `qnorm(u)` with u drawn uniformly between F(y - 1) and
#' F(y). They are standard normal when the model is right, whatever the
#' counts' sizes, so a QQ plot or a test against the normal shows a misfit
#' (a missing transition, ignored overdispersion). The draws use R's random
#' number generator: call [set.seed()] first to repeat them.
#'
#' @param object A `"wisp"` object from [wisp()].
#' @param type For `fitted()`: `"response"` (expected counts, `pred`) or
#'   `"link"` (log scale, `pred.log` = log(rate + 1)). For `residuals()`:
#'   `"response"` (`count - pred`), `"log"` (`count.log - pred.log`) or
#'   `"quantile"` (randomized quantile residuals, count likelihood only).
#' @param ... Nothing: an argument these methods do not take is an error.
#' @return A numeric vector; residuals are `NA` where the summed cell is
#'   empty (no observed count) and, for the quantile residuals, on the
#'   population rows.
#' @seealso [predict.wisp()] for the curves at any bins and for intervals.
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 2, n.bins = 40)
#' fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
#' head(fitted(fit))
#' summary(residuals(fit, type = "log"))
fitted.wisp <- function(object, type = c("response", "link"), ...) {
  check_unused_arguments(..., .method = "fitted.wisp")
  type <- match_choice(type, "type", c("response", "link"))
  d <- object$count.data.summed[observed_rows(object), , drop = FALSE]
  if (type == "response") d$pred else d$pred.log
}

#' @rdname fitted.wisp
#' @export
residuals.wisp <- function(object, type = c("response", "log", "quantile"), ...) {
  check_unused_arguments(..., .method = "residuals.wisp")
  type <- match_choice(type, "type", c("response", "log", "quantile"))
  keep <- observed_rows(object)
  d <- object$count.data.summed[keep, , drop = FALSE]
  switch(type,
    response = d$count - d$pred,
    log = d$count.log - d$pred.log,
    quantile = quantile_residuals(object)[keep]
  )
}

# Randomized quantile residuals of a count fit (see ?residuals.wisp).
quantile_residuals <- function(fit, call = sys.call(-1)) {
  if (fit_likelihood(fit) != "nb") {
    stop_input("quantile residuals need the count likelihood (likelihood = \"nb\"): the ",
               "original's objective is not a distribution of the counts.", call = call)
  }
  d <- fit$count.data.summed
  observed <- which(!is.na(d$count) & d$ran != "none")
  dispersion <- fit$gamma.dispersion
  phi <- dispersion[cbind(match(d$species[observed], rownames(dispersion)),
                          match(d$context[observed], colnames(dispersion)))]
  y <- d$count[observed]
  mu <- d$pred[observed]
  size <- d$exposure[observed] / phi
  poisson <- !is.finite(size) | phi <= 0
  cdf <- function(q) {
    out <- numeric(length(q))
    out[poisson] <- stats::ppois(q[poisson], mu[poisson])
    out[!poisson] <- stats::pnbinom(q[!poisson], size = size[!poisson], mu = mu[!poisson])
    out
  }
  lower <- ifelse(y > 0, cdf(y - 1), 0)
  upper <- cdf(y)
  u <- stats::runif(length(y), lower, upper)
  # Keep qnorm finite where the fitted distribution puts (almost) no mass.
  u <- pmin(pmax(u, .Machine$double.eps), 1 - .Machine$double.eps)
  out <- rep(NA_real_, nrow(d))
  out[observed] <- stats::qnorm(u)
  out
}

#' Predictions of a wisp fit
#'
#' Evaluates the fitted curves (with the fit's parameters) at any position
#' on the bin axis, for the population or for an animal, optionally with
#' confidence intervals.
#'
#' @section Columns of `newdata`:
#' Columns may be named as in your data (the columns mapped in
#' `variables` of [wisp()], e.g. `gene` for `variables = list(species =
#' "gene")`, kept in `fit$variables`) or by their role:
#' - the bin (`bin`, or your bin column): numbers from 1 to the number of
#'   bins; fractional positions (e.g. `seq(1, 40, by = 0.1)`) give smooth
#'   curves, since the curves are functions of a continuous position;
#' - the context and the gene (`context`, `species`, or your columns);
#'   a fit with a single context or gene takes it when the column is
#'   missing;
#' - the treatment: a `treatment` column (names as in
#'   `fit$treatment$names`), or one column per fixed effect
#'   (`fit$fix$names`) giving its level;
#' - optionally the animal (`ran`, or your random-level column): default
#'   `"none"`, the population curve (with a single random level under
#'   `likelihood = "original"`, that level);
#' - optionally `exposure` (count likelihood, `type = "response"`): the
#'   exposure the expected count is for (default 1: the rate per cell, or
#'   per bin with `exposure = "none"`).
#'
#' Other columns are ignored.
#'
#' @section Animals under treatments they were not observed in:
#' An animal's curve is predicted only under the treatments the animal was
#' observed in. With animals nested in a between-animal factor (each animal
#' has one genotype, say), "animal KO_m1 under WT" does not exist, and
#' asking for it is an error of class `wisp_input_error` that names the
#' combination: predict the population curve (`ran = "none"`) instead. The
#' error (rather than the population curve with a message) keeps a grid of
#' every animal x treatment from silently mixing animals' and population
#' curves.
#'
#' @section Intervals:
#' `interval = "confidence"` gives pointwise intervals of the curve at
#' `level`:
#' - `"bootstrap"` (the default when the fit carries bootstrap replicates,
#'   [wisp()] with `bootstraps.num`, or [wisp_statistics()] with `boot`):
#'   percentile intervals, the (1 - level) / 2 and (1 + level) / 2
#'   quantiles (R's type 7) of the curve over the replicates the fit's
#'   statistics use, as the bands of [plot.wisp()]. An animal's curve
#'   has bootstrap intervals only when the replicates keep the animals
#'   (`resample = "parametric"` or `"cells"` in [bs_batch()]): under
#'   `"animals"` a replicate's random
#'   effects are `NaN`, and asking for them is an error;
#' - `"wald"` (the default otherwise; count likelihood only): the curve
#'   ± the normal quantile times its standard error by the delta method,
#'   from the gradient of the curve in the fixed effects and [vcov.wisp()].
#'   Wald intervals are of population curves (`ran = "none"`): the
#'   covariance holds the fixed effects, not an animal's random effects.
#'   They are `NA` where a parameter of the curve has no variance (on a
#'   bound, or not informed by the data).
#'
#' Intervals are computed on the log scale and carried to the response scale
#' by the (increasing) rate function, so they are not symmetric there.
#'
#' @param object A `"wisp"` object from [wisp()].
#' @param newdata `NULL` (the rows of [fitted.wisp()], that is of
#'   `fit$count.data.summed` for the animal x treatment combinations that
#'   were observed) or a data.frame; see "Columns of `newdata`".
#' @param type `"link"` (log scale, log(rate + 1)) or `"response"`
#'   (expected counts: the rate, times `exposure` under the count
#'   likelihood).
#' @param interval `"none"` or `"confidence"` (see "Intervals").
#' @param level Confidence level of the intervals.
#' @param method How intervals are computed: `"auto"` (bootstrap when the
#'   fit carries replicates, Wald otherwise), `"wald"` or `"bootstrap"`.
#' @param ... Nothing: an argument `predict()` does not take (e.g.
#'   `se.fit`) is an error.
#' @return With `interval = "none"`, a numeric vector, one value per row of
#'   `newdata`; on the training grid, `predict(fit, type = "response")`
#'   equals `fitted(fit)`. With `interval = "confidence"`, a matrix with
#'   columns `fit`, `lwr` and `upr` (as [stats::predict.lm()]).
#' @seealso [fitted.wisp()], [confint.wisp()], [plot.wisp()]
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 2, n.bins = 40)
#' fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
#' grid <- data.frame(bin = seq(1, 40, by = 0.25), context = "context1",
#'                    species = "gene1", treatment = "right")
#' curve <- predict(fit, grid, type = "response", interval = "confidence")
#' matplot(grid$bin, curve, type = "l", lty = c(1, 2, 2), col = 1,
#'         xlab = "bin", ylab = "expected count per cell")
predict.wisp <- function(object, newdata = NULL, type = c("link", "response"),
                         interval = c("none", "confidence"), level = 0.95,
                         method = c("auto", "wald", "bootstrap"), ...) {
  check_unused_arguments(..., .method = "predict.wisp")
  check_wisp_fit(object, call = sys.call())
  type <- match_choice(type, "type", c("link", "response"))
  interval <- match_choice(interval, "interval", c("none", "confidence"))
  check_number(level, "level", lower = 0.5, upper = 0.9999)
  method <- match_choice(method, "method", c("auto", "wald", "bootstrap"))
  nb <- fit_likelihood(object) == "nb"
  if (is.null(newdata)) {
    keep <- observed_rows(object)
    summed <- object$count.data.summed
    pred_log <- fit_predictions(object, object$fitted.parameters)
    response <- fit_response(object, pred_log)
    pred_log <- pred_log[keep]
    response <- response[keep]
    if (interval == "none") return(if (type == "response") response else pred_log)
    rows <- summed[keep, , drop = FALSE]
    exposure <- if (nb) ifelse(is.na(rows$exposure), 1, rows$exposure) else rep(1, nrow(rows))
    points <- list(ran = rows$ran, context = rows$context, species = rows$species,
                   treatment = rows$treatment, bin = as.numeric(rows$bin), exposure = exposure)
  } else {
    points <- prediction_points(object, newdata)
    pred_log <- curve_values(object, points, object$fitted.parameters)[, 1L]
    response <- if (nb) count_rate(pred_log) * points$exposure else exp(pred_log) - 1
    if (interval == "none") return(if (type == "response") response else pred_log)
  }
  bounds <- prediction_intervals(object, points, pred_log, level, method)
  out <- cbind(fit = pred_log, lwr = bounds$lower, upr = bounds$upper)
  if (type == "response") {
    out[, "lwr"] <- if (nb) count_rate(out[, "lwr"]) * points$exposure else exp(out[, "lwr"]) - 1
    out[, "upr"] <- if (nb) count_rate(out[, "upr"]) * points$exposure else exp(out[, "upr"]) - 1
    out[, "fit"] <- response
  }
  rownames(out) <- NULL
  out
}

# The column of `newdata` that holds `role`: the user's column for it (as
# mapped in fit$variables) or the role's own name; NULL when neither.
newdata_column <- function(fit, newdata, role) {
  mapped <- fit$variables[[role]]
  for (name in unique(c(if (is.character(mapped) && length(mapped) == 1L) mapped, role))) {
    if (name %in% names(newdata)) return(newdata[[name]])
  }
  NULL
}

# How a role's column may be named in `newdata`, for messages.
newdata_column_names <- function(fit, role) {
  mapped <- fit$variables[[role]]
  names <- unique(c(if (is.character(mapped) && length(mapped) == 1L) mapped, role))
  paste0("`", names, "`", collapse = " or ")
}

# The points of `newdata` on the fit's curves: labels of the random level,
# context, species and treatment, the bin (possibly fractional) and the
# exposure, one per row, checked.
prediction_points <- function(object, newdata, call = sys.call(-1)) {
  if (!is.data.frame(newdata)) {
    stop_input("`newdata` must be a data.frame or NULL, not ", class(newdata)[1], ".", call = call)
  }
  n <- nrow(newdata)
  groups <- object$grouping.variables
  fixed <- object$fix$names
  treatment_column <- if ("treatment" %in% fixed) NULL else newdata$treatment
  if (is.null(treatment_column)) {
    missing <- setdiff(fixed, names(newdata))
    if (length(missing) || !length(fixed)) {
      stop_input("`newdata` needs a `treatment` column (one of ",
                 paste0("\"", object$treatment$names, "\"", collapse = ", "), ")",
                 if (length(fixed)) paste0(" or the fixed-effect columns ",
                                           paste0("`", fixed, "`", collapse = ", ")), ".",
                 call = call)
    }
    key_of <- function(levels) paste(vapply(fixed, function(f) as.character(levels[[f]]), ""),
                                     collapse = "\r")
    treatment_keys <- vapply(object$treatment$components, key_of, "")
    row_keys <- do.call(paste, c(lapply(fixed, function(f) as.character(newdata[[f]])),
                                 sep = "\r"))
    treatment <- object$treatment$names[match(row_keys, treatment_keys)]
    if (anyNA(treatment)) {
      stop_input("`newdata` has fixed-effect level combinations that are not treatments of the fit.",
                 call = call)
    }
  } else {
    treatment <- as.character(treatment_column)
  }
  # "ref" (the reference's name before it was named by its levels) still works
  reference <- reference_treatment_name(unname(object$fix$ref.lvl), object$treatment$names[-1])
  treatment <- as_treatment_names(treatment, reference)
  label_column <- function(role, levels, what) {
    values <- newdata_column(object, newdata, role)
    if (is.null(values)) {
      if (length(levels) == 1L) return(rep(levels, n))
      stop_input("`newdata` needs a column for the ", what, ": ",
                 newdata_column_names(object, role), ".", call = call)
    }
    as.character(values)
  }
  context <- label_column("context", groups$context.lvls, "contexts")
  species <- label_column("species", groups$species.lvls, "genes")
  bin <- newdata_column(object, newdata, "bin")
  if (is.null(bin)) {
    stop_input("`newdata` needs a column for the bins: ", newdata_column_names(object, "bin"),
               ".", call = call)
  }
  summed <- object$count.data.summed
  bins <- max(summed$bin)
  if (!is.numeric(bin) || anyNA(bin) || any(!is.finite(bin)) || any(bin < 1 | bin > bins)) {
    stop_input("the bins of `newdata` (", newdata_column_names(object, "bin"), ") must be ",
               "numbers from 1 to ", bins, " (the fit's bins; fractional positions are fine).",
               call = call)
  }
  ran <- newdata_column(object, newdata, "ran")
  ran <- if (is.null(ran)) rep("none", n) else as.character(ran)
  summed_ran <- unique(summed$ran)
  if (!"none" %in% summed_ran && length(summed_ran) == 1L) {
    # A single random level plays the population: "none" means it.
    ran[ran == "none"] <- summed_ran
  }
  check_levels <- function(values, known, what) {
    unknown <- setdiff(unique(values), known)
    if (length(unknown)) {
      stop_input("`newdata` has ", what, if (length(unknown) > 1) " values" else " value",
                 " not in the fit: ",
                 paste0("\"", utils::head(unknown, 5), "\"", collapse = ", "), ".", call = call)
    }
  }
  in_column <- function(what, role) {
    sprintf("%s (column %s)", what, newdata_column_names(object, role))
  }
  check_levels(context, groups$context.lvls, in_column("context", "context"))
  check_levels(species, groups$species.lvls, in_column("gene", "species"))
  check_levels(treatment, as_treatment_names(object$treatment$names, reference), "treatment")
  check_levels(ran, summed_ran, in_column("random level", "ran"))
  # A treatment without tokens in a context and gene (an unbalanced design
  # under the count likelihood) has no estimated curve there.
  has_data <- !is.na(summed$count)
  estimated <- unique(paste(summed$context[has_data], summed$species[has_data],
                            summed$treatment[has_data], sep = "\r"))
  unestimated <- which(!paste(context, species, treatment, sep = "\r") %in% estimated)
  if (length(unestimated)) {
    curves <- unique(sprintf("%s in %s under \"%s\"", species[unestimated], context[unestimated],
                             treatment[unestimated]))
    stop_input("`newdata` asks for curves the data of the fit do not contain: ",
               paste(utils::head(curves, 3), collapse = ", "),
               if (length(curves) > 3) sprintf(" (and %d more)", length(curves) - 3) else "",
               ". A treatment without tokens has no estimated curve (its effects are NaN).",
               call = call)
  }
  # An animal's curve exists only under the treatments it was observed in.
  animal <- ran != "none"
  if (any(animal)) {
    keep <- observed_rows(object)
    observed <- unique(paste(summed$ran[keep], summed$treatment[keep], sep = "\r"))
    asked <- paste(ran, treatment, sep = "\r")
    unseen <- unique(which(animal & !asked %in% observed))
    if (length(unseen)) {
      pairs <- unique(paste0(ran[unseen], " under \"", treatment[unseen], "\""))
      stop_input("`newdata` asks for animals under treatments they were not observed in: ",
                 paste(utils::head(pairs, 3), collapse = ", "),
                 if (length(pairs) > 3) sprintf(" (and %d more)", length(pairs) - 3) else "",
                 ". An animal has curves only under its own treatments (e.g. not under ",
                 "another genotype when animals are nested in genotype); use ran = \"none\" ",
                 "for the population curve.", call = call)
    }
  }
  exposure <- newdata$exposure
  if (is.null(exposure) || fit_likelihood(object) != "nb") {
    exposure <- rep(1, n)
  } else if (!is.numeric(exposure) || anyNA(exposure) || any(!is.finite(exposure)) ||
             any(exposure <= 0)) {
    stop_input("`newdata$exposure` must hold positive numbers.", call = call)
  }
  list(ran = ran, context = context, species = species, treatment = treatment,
       bin = as.numeric(bin), exposure = as.numeric(exposure))
}

# Psi at `points` (from prediction_points()) for each parameter vector: the
# rows of `samples` (or one vector). A points x samples matrix.
curve_values <- function(object, points, samples) {
  count <- length(object$fitted.parameters)
  samples <- matrix(as.double(samples), ncol = count)
  code <- function(values, levels) as.integer(match(values, levels) - 1L)
  if (fit_likelihood(object) == "nb") {
    model <- count_description(object$plan)
    ran <- ifelse(points$ran == "none", -1L, code(points$ran, model$ran_levels))
    values <- count_curves_rust(object$plan, as.vector(t(samples)), as.integer(ran),
                                code(points$context, model$contexts),
                                code(points$species, model$species),
                                code(points$treatment, model$treatments), points$bin)
  } else {
    model <- model_from_bytes(object$plan, object$settings)
    values <- model_curves_rust(object$plan, as.vector(t(samples)),
                                code(points$ran, model$ran_levels),
                                code(points$context, model$contexts),
                                code(points$species, model$species),
                                code(points$treatment, model$treatments), points$bin)
  }
  matrix(values, nrow = length(points$bin))
}

# Pointwise confidence limits of the curves (log scale) at `points`.
prediction_intervals <- function(object, points, pred_log, level, method,
                                 call = sys.call(-1)) {
  booted <- inherits(object$bootstrap, "wisp_bootstrap")
  if (method == "auto") method <- if (booted) "bootstrap" else "wald"
  a <- (1 - level) / 2
  if (method == "bootstrap") {
    if (!booted) {
      stop_input("bootstrap intervals need replicates: use wisp(..., bootstraps.num = 1000), ",
                 "or wisp_statistics(fit, boot = bs_batch(fit, ...)).", call = call)
    }
    boot <- object$bootstrap
    if (identical(boot$resample, "animals") && any(points$ran != "none")) {
      stop_input("bootstrap intervals of an animal's curve need replicates that keep the ",
                 "animals: under resample = \"animals\" a replicate's random effects belong ",
                 "to whichever animal was drawn, so they are NaN. Predict the population curve ",
                 "(ran = \"none\"), or bootstrap with bs_batch(fit, ..., resample = ",
                 "\"parametric\") and attach it with wisp_statistics(fit, boot = ).", call = call)
    }
    use <- bootstrap_used_replicates(boot, object$stats$replicates.used)
    values <- curve_values(object, points, boot$t[use, , drop = FALSE])
    limits <- apply(values, 1L, function(v) {
      v <- v[is.finite(v)]
      if (!length(v)) return(c(NA_real_, NA_real_))
      stats::quantile(v, c(a, 1 - a), type = 7, names = FALSE)
    })
    return(list(lower = limits[1L, ], upper = limits[2L, ]))
  }
  if (fit_likelihood(object) != "nb") {
    stop_input("Wald intervals need the count likelihood (likelihood = \"nb\"): the original's ",
               "objective is not a likelihood. Bootstrap the fit (wisp(..., bootstraps.num = ",
               "1000)) for bootstrap intervals.", call = call)
  }
  if (any(points$ran != "none")) {
    stop_input("Wald intervals are of population curves (ran = \"none\"): the covariance holds ",
               "the fixed effects, not an animal's random effects. Predict with ran = \"none\", ",
               "or bootstrap the fit for intervals of animals' curves.", call = call)
  }
  model <- count_description(object$plan)
  code <- function(values, levels) as.integer(match(values, levels) - 1L)
  gradients <- count_curve_gradients_rust(object$plan, as.double(object$fitted.parameters),
                                          code(points$context, model$contexts),
                                          code(points$species, model$species),
                                          code(points$treatment, model$treatments),
                                          points$bin)
  count <- length(object$fitted.parameters)
  gradient <- matrix(gradients$gradient, ncol = count, byrow = TRUE)
  covariance <- wisp_covariance(object)
  se <- vapply(seq_len(nrow(gradient)), function(i) {
    g <- gradient[i, ]
    if (anyNA(g)) return(NA_real_)
    used <- which(g != 0)
    v <- covariance[used, used, drop = FALSE]
    if (anyNA(v)) return(NA_real_)
    sqrt(max(0, drop(g[used] %*% v %*% g[used])))
  }, 0)
  z <- stats::qnorm(1 - a)
  list(lower = pred_log - z * se, upper = pred_log + z * se)
}

#' Log-likelihood, number of observations and information criteria
#'
#' `logLik()` is minus the fitted negative log-likelihood (without the
#' boundary penalty), with `df` the number of fitted parameters and `nobs`
#' the number of observed summed rows (population rows included, empty
#' cells excluded), so that [stats::AIC()] and [stats::BIC()] work.
#'
#' @param object A `"wisp"` object from [wisp()].
#' @param ... Unused.
#' @return `logLik()`: an object of class `"logLik"`; `nobs()`: an integer.
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 2, n.bins = 40)
#' fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
#' logLik(fit)
#' AIC(fit)
#' BIC(fit)
logLik.wisp <- function(object, ...) {
  f <- object$fit.diagnostics
  df <- if (is.null(f$df)) f$n.params else f$df
  structure(-f$neg.loglik, df = as.integer(df), nobs = nobs.wisp(object), class = "logLik")
}

#' @rdname logLik.wisp
#' @export
nobs.wisp <- function(object, ...) {
  sum(!is.na(object$count.data.summed$count))
}

# ---------------------------------------------------------------------------
# wisp_bootstrap

#' Print, summarise and convert a wisp bootstrap
#'
#' @param x,object A `"wisp_bootstrap"` object from [bs_batch()].
#' @param ... Ignored by `print()` and `as.data.frame()`; for `summary()`,
#'   nothing: an argument it does not take is an error.
#' @return `print()`: `x`, invisibly. `summary()`: an object of class
#'   `"summary.wisp_bootstrap"`: a list with `R`, `ok`, `converged`
#'   (counts), `codes` (a table of convergence codes, failures as
#'   `"failed"`), `reasons` (a table of failure reasons), `time` and
#'   `memory` (data.frames of the minimum, median, mean and maximum of
#'   `seconds`, and of `peak_rss_mb`, `pss_mb` and `private_dirty_mb`, per
#'   replicate), `total.seconds`, `seed`, `backend` and `max.fork`.
#'   `as.data.frame()`: one row per replicate: `replicate`, the diagnostics
#'   columns (see [bs_batch()]) and one column per parameter (named as in
#'   the fit, `NA` for failed replicates).
#' @seealso [plot.wisp_bootstrap()]
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 2, n.bins = 40)
#' fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
#' boot <- bs_batch(fit, 20, seed = 1)
#' boot
#' summary(boot)
#' head(as.data.frame(boot)[, 1:8])
print.wisp_bootstrap <- function(x, ...) {
  d <- x$diagnostics
  cat(sprintf("wisp bootstrap: %s (backend \"%s\", %d worker%s, seed %s)\n",
              count_noun(as.integer(x$R), "replicate"), x$backend,
              as.integer(if (is.null(x$max.fork)) 1L else x$max.fork),
              if (isTRUE(x$max.fork > 1)) "s" else "", format(x$seed)))
  cat(sprintf("%d succeeded, %d converged, %d failed; %s per replicate (median)\n",
              sum(d$ok %in% TRUE), sum(d$converged %in% TRUE), sum(!d$ok %in% TRUE),
              format_seconds(stats::median(d$seconds, na.rm = TRUE))))
  cat(sprintf("%s per replicate\n", count_noun(length(x$t0), "parameter")))
  invisible(x)
}

replicate_codes <- function(d) {
  ifelse(d$ok %in% TRUE, ifelse(is.na(d$code), "unknown", d$code), "failed")
}

describe_columns <- function(d, columns) {
  rows <- lapply(columns, function(column) {
    v <- d[[column]]
    v <- v[!is.na(v)]
    if (!length(v)) return(c(NA_real_, NA_real_, NA_real_, NA_real_))
    c(min(v), stats::median(v), mean(v), max(v))
  })
  out <- as.data.frame(do.call(rbind, rows))
  names(out) <- c("min", "median", "mean", "max")
  rownames(out) <- columns
  out
}

#' @rdname print.wisp_bootstrap
#' @export
summary.wisp_bootstrap <- function(object, ...) {
  check_unused_arguments(..., .method = "summary.wisp_bootstrap")
  d <- object$diagnostics
  reasons <- d$reason[!d$ok %in% TRUE]
  structure(list(
    R = object$R, ok = sum(d$ok %in% TRUE), converged = sum(d$converged %in% TRUE),
    codes = table(code = replicate_codes(d)),
    reasons = table(reason = ifelse(is.na(reasons), "unknown", reasons)),
    time = describe_columns(d, "seconds"),
    memory = describe_columns(d, c("peak_rss_mb", "pss_mb", "private_dirty_mb")),
    total.seconds = sum(d$seconds, na.rm = TRUE),
    seed = object$seed, backend = object$backend, max.fork = object$max.fork
  ), class = "summary.wisp_bootstrap")
}

#' @rdname print.wisp_bootstrap
#' @export
print.summary.wisp_bootstrap <- function(x, ...) {
  cat(sprintf("wisp bootstrap summary: %s, %d succeeded, %d converged\n",
              count_noun(as.integer(x$R), "replicate"), as.integer(x$ok), as.integer(x$converged)))
  cat(sprintf("backend \"%s\", %d worker%s, seed %s\n", x$backend,
              as.integer(if (is.null(x$max.fork)) 1L else x$max.fork),
              if (isTRUE(x$max.fork > 1)) "s" else "", format(x$seed)))
  cat("\nConvergence codes:\n")
  print(x$codes)
  if (length(x$reasons)) {
    cat("\nFailure reasons:\n")
    print(x$reasons)
  }
  cat(sprintf("\nSeconds per replicate (%s in all):\n", format_seconds(x$total.seconds)))
  print(signif(x$time, 3))
  cat("\nMemory per replicate (MB, of the process that ran it):\n")
  print(signif(x$memory, 3))
  invisible(x)
}

#' @rdname print.wisp_bootstrap
#' @param row.names,optional Ignored (for the generic).
#' @export
as.data.frame.wisp_bootstrap <- function(x, row.names = NULL, optional = FALSE, ...) {
  d <- x$diagnostics
  out <- data.frame(replicate = seq_len(nrow(d)), d, stringsAsFactors = FALSE)
  estimates <- x$t
  if (is.null(estimates)) {
    estimates <- matrix(NA_real_, nrow(d), length(x$t0))
  }
  colnames(estimates) <- names(x$t0)
  estimates <- as.data.frame(estimates, stringsAsFactors = FALSE)
  names(estimates) <- names(x$t0) # keep the names as they are (no make.names)
  out <- cbind(out, estimates)
  rownames(out) <- NULL
  out
}

# One row per curve of a likelihood-chosen structure (see summary.wisp()),
# or NULL when the structure was detected or fixed otherwise.
structure_summary <- function(selection) {
  if (is.null(selection) || !nrow(selection)) return(NULL)
  keys <- unique(selection[c("context", "species")])
  rows <- lapply(seq_len(nrow(keys)), function(i) {
    one <- selection[selection$context == keys$context[i] & selection$species == keys$species[i], ]
    won <- one[one$chosen, , drop = FALSE][1, ]
    rest <- one[!one$chosen & is.finite(one$BIC), , drop = FALSE]
    runner <- if (nrow(rest)) rest$degree[which.min(rest$BIC)] else NA_integer_
    data.frame(context = won$context, species = won$species, degree = won$degree,
               fixed = isTRUE(won$fixed), runner.up = runner,
               margin = if (nrow(rest)) won$margin else NA_real_,
               close = !isTRUE(won$fixed) && nrow(rest) > 0 && won$margin < close_margin,
               stringsAsFactors = FALSE)
  })
  do.call(rbind, rows)
}

print_structure_summary <- function(structure) {
  if (is.null(structure)) return(invisible())
  chosen <- structure[!structure$fixed, , drop = FALSE]
  text <- sprintf("Transitions chosen by BIC for %s%s", count_noun(nrow(chosen), "curve"),
                  if (any(structure$fixed)) {
                    sprintf(" (%s fixed by `degrees`)", count_noun(sum(structure$fixed), "curve"))
                  } else "")
  close <- chosen[chosen$close, , drop = FALSE]
  if (nrow(close)) {
    text <- paste0(text, sprintf("; %s close (BIC margin < %g, runner-up in brackets): %s",
                                 count_noun(nrow(close), "choice"), close_margin,
                                 paste(sprintf("%s/%s %d [%d, %.1f]", close$context, close$species,
                                               close$degree, close$runner.up, close$margin),
                                       collapse = ", ")))
  }
  cat(strwrap(paste0(text, "."), exdent = 2), sep = "\n")
  invisible()
}
