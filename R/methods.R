# S3 methods for "wisp" fits (print, summary, coef, confint, logLik, nobs) and
# their shared helpers; predict() is in predict.R, fitted() and residuals() in
# residuals.R, the methods of "wisp_bootstrap" results in bootstrap-methods.R.
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
  if (!has && is.null(statistics_without_bootstrap(object))) return(object)
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
    if (length(unknown)) unknown_parameter_error(unknown, names, call)
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
  if (length(unknown)) unknown_parameter_error(unknown, names, call)
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
#' transitions per curve, the fit diagnostics, whether the fit was
#' bootstrapped and how many of its tests are significant (percentile tests
#' of the replicates of a bootstrapped fit, saying so when there are too few
#' replicates for the adjusted tests to reject anything; Wald tests of a
#' count-likelihood fit without one).
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
  cat(sprintf("Data: %d summed rows (%d observed); %d context%s, %d gene%s, %s, %d treatment%s, %d bins\n",
              nrow(d), sum(!is.na(d$count)),
              length(g$context.lvls), if (length(g$context.lvls) != 1) "s" else "",
              length(g$species.lvls), if (length(g$species.lvls) != 1) "s" else "",
              animal_count_text(length(real_ran), x$variables),
              length(x$treatment$names), if (length(x$treatment$names) != 1) "s" else "",
              if (nrow(d)) max(d$bin) else 0L))
  if (length(x$fix$names)) {
    cat("Fixed effects: ", fixed_effect_list(lengths(x$fix$lvls), x$fix$ref.lvl), "\n", sep = "")
  }
  degrees <- as.vector(x$degrees)
  if (length(degrees)) {
    tab <- table(factor(degrees, levels = sort(unique(degrees))))
    cat("Transitions per curve: ",
        paste0(names(tab), ": ", as.vector(tab), " curve", ifelse(as.vector(tab) == 1, "", "s"),
               collapse = ", "),
        sprintf(" (%d in all)\n", sum(degrees)), sep = "")
  }
  f <- x$fit.diagnostics
  cat(strwrap(sprintf("Fit: %s; %s; -log-likelihood %.2f", fit_course_text(f, fit_likelihood(x)),
                      count_noun(as.integer(f$n.params), "parameter"), f$neg.loglik),
              exdent = 2), sep = "\n")
  bound <- on_bound_text(x)
  if (!is.null(bound)) cat(strwrap(bound, exdent = 2), sep = "\n")
  significant <- function(s) sum(s$parameters$significance %in% c("*", "**", "***"))
  if (inherits(x$bootstrap, "wisp_bootstrap")) {
    b <- x$bootstrap
    cat(sprintf("Bootstrapped: %d replicates (%d converged)\n", as.integer(b$R),
                sum(b$diagnostics$converged %in% TRUE)))
    s <- x$stats
    if (!is.null(s$parameters)) {
      # (Fits saved by wispack 0.1.0 record neither the method nor the tests.)
      how <- switch(statistics_method(s), wald = "Wald tests",
                    centred = "The original's centred tests",
                    sprintf("Percentile tests from %d replicates", as.integer(s$replicates.used)))
      tests <- if (is.null(s$tests)) sum(!is.na(s$parameters$p.value)) else s$tests
      short <- !is.null(s$resolution) && !s$resolution$holm_can_reject &&
        !identical(s$adjustment, "none")
      cat(sprintf("%s of %s: %d significant (%s-adjusted within each gene, alpha %g)%s; see summary()\n",
                  how, count_noun(as.integer(tests), "treatment effect"), significant(s),
                  s$adjustment, s$alpha,
                  if (short) {
                    sprintf("; too few replicates to reject any (%d needed)",
                            as.integer(s$resolution$needed))
                  } else ""))
    }
  } else if (wisp_has_statistics(x) && x$stats$method %in% c("wald", "profile")) {
    s <- x$stats
    cat(sprintf("Not bootstrapped; Wald tests of %s%s: %d significant (%s-adjusted within each gene, alpha %g); see summary()\n",
                count_noun(as.integer(s$tests), "treatment effect"), profile_count_text(s),
                significant(s), s$adjustment, s$alpha))
    if (!is.null(x$gene.tests)) {
      cat("Gene-level tests (anova(fit)): ", paste(gene_call_lines(x$gene.tests), collapse = "; "),
          "\n", sep = "")
    }
  } else {
    cat("Not bootstrapped: refit with wisp(..., bootstraps.num = 1000) for intervals and p-values.\n")
  }
  invisible(x)
}

#' Summarise a wisp fit
#'
#' The fixed-effect table of a fit (baseline parameters and treatment
#' effects) with the statistics of `fit$stats` (Wald statistics, with
#' profile likelihood for flagged transition points, for a count fit without
#' a bootstrap; percentile or the original's centred statistics
#' from bootstrap replicates): intervals, p-values and significance marks,
#' plus the fit diagnostics.
#'
#' @param object A `"wisp"` object from [wisp()].
#' @param level `NULL` (the statistics the fit carries), or a confidence
#'   level at which [wisp_statistics()] recomputes them with the fit's method
#'   and adjustment (profile-checked Wald tests for a count fit without any).
#' @param ... Nothing: an argument `summary()` does not take is an error.
#' @return An object of class `"summary.wisp"`: a list with `call`,
#'   `coefficients` (a data.frame, one row per fixed-effect parameter:
#'   `parameter, role, context, gene, component, term, effect, block,
#'   treatment, species, estimate` (the labels of [as.data.frame.wisp()];
#'   `component` readable, "block rate" for the original's `Rt`; `species`
#'   the same as `gene`, kept for scripts of 0.1.0) and, when the fit has statistics, `std.error, df, CI.low,
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
#'   and `small.design`: `NULL`, or, for Wald or profile tests of transition
#'   points with fewer than 5 animals in some group (where they were
#'   anti-conservative in the calibration benchmark; see [wisp()]), the
#'   number of animals in the smallest group, printed as a caution, and
#'   `on.bound` (`NULL`, or the estimates on a bound by gene and name, as
#'   printed), and `provenance` (the fit's record of the wispack that made it, `NULL` for
#'   fits saved before it was recorded), printed as the last line,
#'   "Made with wispack 0.1.0 (commit abc1234)".
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
  labels <- parameter_labels(object)[fixed, , drop = FALSE]
  table <- data.frame(parameter = p$name[fixed], role = p$role[fixed],
                      context = labels$context, gene = labels$gene,
                      component = labels$component, term = labels$term, effect = labels$effect,
                      block = labels$block, treatment = p$treatment[fixed],
                      species = p$species[fixed],
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
    gene.tests = object$gene.tests,
    gene.qc = object$gene.qc,
    on.bound = on_bound_text(object),
    genes = length(object$grouping.variables$species.lvls),
    small.design = if (tested) point_tests_small_design(object) else NULL,
    provenance = object$provenance
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
  wrapped <- function(text) cat(strwrap(text, exdent = 2), sep = "\n")
  if (identical(x$likelihood, "nb")) {
    cat("\n")
    wrapped(sprintf("Fit (count likelihood): %s; largest scaled gradient %.2g",
                    fit_course_text(f, "nb"), f$max.gradient))
    wrapped(sprintf("log-likelihood %.2f (df = %d, nobs = %d)", as.numeric(x$logLik),
                    as.integer(attr(x$logLik, "df")), as.integer(x$nobs)))
    if (!is.null(x$on.bound)) wrapped(x$on.bound)
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
    cat("\n")
    wrapped(sprintf("Fit (the original's objective): %s", fit_course_text(f, "original")))
    cat(sprintf("log-likelihood %.2f (df = %d, nobs = %d); penalised -log-likelihood %.2f\n",
                as.numeric(x$logLik), as.integer(f$n.params), as.integer(x$nobs), f$pen.neg.value))
  }
  if (!is.null(x$gene.qc)) print_gene_qc(x$gene.qc, digits, max.rows)
  # A panel's first question is gene-level: with many genes, that table leads.
  many_genes <- isTRUE(x$genes > 10L) && !is.null(x$gene.tests)
  if (many_genes) print_gene_tests_summary(x$gene.tests, digits, max.rows)
  cat(sprintf("%s, %s, %s in all\n", count_noun(nrow(x$coefficients), "fixed-effect parameter"),
              count_noun(as.integer(x$n.warp), "random effect"),
              count_noun(sum(x$degrees), "transition")))
  print_structure_summary(x$structure)
  tab <- x$coefficients
  number <- function(v, blank = "NA") {
    ifelse(is.na(v), blank, formatC(v, digits = digits, format = "fg"))
  }
  shown <- data.frame(context = tab$context, gene = tab$gene, component = tab$component,
                      block = tab$block, effect = tab$effect,
                      estimate = number(tab$estimate), stringsAsFactors = FALSE)
  if (isTRUE(x$tested)) {
    shown$CI.low <- number(tab$CI.low)
    shown$CI.high <- number(tab$CI.high)
    shown$p.adj <- ifelse(is.na(tab$p.value.adj), "",
                          format.pval(tab$p.value.adj, digits = 2, eps = 1e-4))
    shown$sig <- tab$significance
    how <- if (identical(x$method, "wald")) {
      "Wald tests; t quantiles for between-animal effects, slope effects on the log-ratio scale"
    } else if (identical(x$method, "profile")) {
      paste0("Wald tests; t quantiles for between-animal effects, slope effects on the ",
             "log-ratio scale; profile likelihood where a transition point's curvature ",
             "misleads (method column)")
    } else if (identical(x$method, "centred")) {
      sprintf("bootstrap: %s; the original's centred p-values, intervals at adjusted levels",
              count_noun(as.integer(x$replicates), "replicate"))
    } else {
      sprintf("bootstrap: %s; percentile intervals", count_noun(as.integer(x$replicates), "replicate"))
    }
    cat("", strwrap(sprintf("Fixed effects (%s; %g %% intervals; %s-adjusted p-values within each gene at alpha = %g):",
                            how, 100 * x$level, x$adjustment, x$alpha),
                    exdent = 2), "", sep = "\n")
  } else {
    cat("\nFixed effects (estimates only; bootstrap for intervals and p-values):\n")
  }
  # Gene by gene (and context by context), each in the fit's order.
  shown <- shown[order(match(tab$context, unique(tab$context)), match(tab$gene, unique(tab$gene))),
                 , drop = FALSE]
  if (length(unique(shown$context)) == 1L) shown$context <- NULL
  n <- nrow(shown)
  print_fitted_table(utils::head(shown, max.rows), split = c("context", "gene"))
  if (n > max.rows) cat(sprintf("... %d more rows: see summary(fit)$coefficients\n", n - max.rows))
  if (isTRUE(x$tested)) {
    cat(strwrap(sprintf("Signif.: *** p.adj < %g, ** < %g, * < %g, ns otherwise (tested: treatment effects)",
                        x$alpha / 50, x$alpha / 5, x$alpha), exdent = 2), sep = "\n")
  }
  if (!is.null(x$small.design)) {
    cat(strwrap(sprintf(paste0(
      "Caution: the smallest group has %d animals; below %d per group the tests of ",
      "transition points were anti-conservative on some designs of the calibration benchmark ",
      "(vignette(\"inference\")): %sbootstrap them (bs_batch(resample = \"parametric\")) ",
      "before reading their stars."), x$small.design, POINT_TESTS_CALIBRATED_ANIMALS,
      if (identical(x$method, "wald")) {
        "check them by profile likelihood (wisp_statistics(fit, method = \"profile\")) or "
      } else {
        ""
      }), exdent = 2),
      sep = "\n")
  }
  if (!many_genes && !is.null(x$gene.tests)) {
    print_gene_tests_summary(x$gene.tests, digits, max.rows)
  }
  made <- provenance_line(x$provenance)
  cat(if (is.null(made)) "Made with a wispack that did not record its version" else
    paste("Made with", made), "\n", sep = "")
  invisible(x)
}

# ---------------------------------------------------------------------------
# coef / confint / logLik / nobs

#' Estimates of a wisp fit
#'
#' The estimates, chosen by kind (`type`) and, with the selectors, by what
#' they belong to: the labels of [as.data.frame.wisp()] (`gene`, `context`,
#' `component`, `term`, `block`). Selectors combine with "and"; each takes
#' one value or several.
#'
#' @param object A `"wisp"` object from [wisp()].
#' @param type Which parameters: `"all"`, `"fixed"` (baseline and treatment
#'   effects), `"baseline"`, `"beta"` (treatment effects) or `"warp"`
#'   (the animals' warping factors).
#' @param gene,context Genes and contexts, by name.
#' @param component `"block rate"`, `"transition slope"` or `"transition
#'   point"` (also as `"rate"`, `"slope"`, `"point"` or the original's codes
#'   `"Rt"`, `"tslope"`, `"tpoint"`), or `"dispersion"`.
#' @param term `"baseline"`, a term of the design (`"hemisphere"`,
#'   `"hemisphere:age"`: every effect of it) or one effect (a treatment:
#'   `"right"`, `"right:P18"`).
#' @param block Block numbers of block rates, transition numbers of slopes
#'   and points.
#' @param ... Nothing: an argument `coef()` does not take is an error.
#' @return A named numeric vector of estimates (the medians of the bootstrap
#'   replicates when the fit was made with `use.median = TRUE`), named by
#'   the original's parameter names.
#' @seealso [as.data.frame.wisp()] for the estimates with their labels.
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 2, n.bins = 40)
#' fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
#' coef(fit, "beta")
#' coef(fit, gene = "gene1", component = "rate", term = "baseline")
coef.wisp <- function(object, type = c("all", "fixed", "baseline", "beta", "warp"), gene = NULL,
                      context = NULL, component = NULL, term = NULL, block = NULL, ...) {
  check_unused_arguments(..., .method = "coef.wisp")
  type <- match_choice(type, "type", c("all", "fixed", "baseline", "beta", "warp"))
  keep <- wisp_parameter_selector(object$parameters, type)
  if (any_selector(gene, context, component, term, block)) {
    keep <- keep & select_labelled(parameter_labels(object), gene, context, component, term,
                                   block, call = sys.call())
  }
  object$fitted.parameters[object$parameters$name[keep]]
}

#' Confidence intervals of wisp parameters
#'
#' Wald and profile intervals (count likelihood) or bootstrap percentile intervals, the
#' same as the statistics of [wisp_statistics()] use, so that an interval
#' excludes 0 exactly when the effect's unadjusted p-value is below 1 -
#' `level`.
#'
#' - `"profile"`: Wald intervals, except
#'   for the transition-point effects whose likelihood the Wald curvature
#'   misjudges, which get profile-likelihood intervals (see
#'   [wisp_statistics()]).
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
#' Parameters are chosen by name or number (`parm`), by what they belong to
#' (`gene`, `context`, `component`, `term`, `block`, as in [coef.wisp()]),
#' or both (the parameters that both choose). [as.data.frame.wisp()] gives
#' the intervals of the fit's statistics beside the parameters' labels.
#'
#' @param object A `"wisp"` object, or a `"wisp_bootstrap"` from [bs_batch()]
#'   (all successful replicates).
#' @param parm Parameter names or numbers (default: the fixed effects for
#'   Wald intervals, every parameter for bootstrap intervals).
#' @param level Confidence level.
#' @param method `"auto"` (bootstrap when the fit carries replicates, the
#'   fit's own method when it is `"profile"`, Wald otherwise), `"profile"`,
#'   `"wald"` or `"bootstrap"`.
#' @inheritParams coef.wisp
#' @param ... Nothing: an argument `confint()` does not take is an error.
#' @return A matrix with one row per parameter (named by the original's
#'   parameter names) and columns for the lower and upper limits, labelled
#'   in percent (as [stats::confint()]).
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 2, n.bins = 40)
#' fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
#' confint(fit, parm = names(coef(fit, "beta")), method = "wald")
#' confint(fit, gene = "gene1", component = "rate")
#' boot <- bs_batch(fit, 19, seed = 1)
#' confint(boot, parm = names(coef(fit, "beta")), level = 0.9)
confint.wisp <- function(object, parm, level = 0.95,
                         method = c("auto", "profile", "wald", "bootstrap"),
                         gene = NULL, context = NULL, component = NULL, term = NULL,
                         block = NULL, ...) {
  check_unused_arguments(..., .method = "confint.wisp")
  check_wisp_object(object)
  check_number(level, "level", lower = 0.5, upper = 0.9999)
  method <- match_choice(method, "method", c("auto", "profile", "wald", "bootstrap"))
  if (method == "auto") {
    method <- if (inherits(object$bootstrap, "wisp_bootstrap")) {
      "bootstrap"
    } else if (identical(object$stats$method, "profile")) {
      "profile"
    } else {
      "wald"
    }
  }
  # The parameters the selectors choose (NULL: no selector given).
  chosen <- if (any_selector(gene, context, component, term, block)) {
    object$parameters$name[select_labelled(parameter_labels(object), gene, context, component,
                                           term, block, call = sys.call())]
  }
  narrow <- function(parm, all) {
    if (is.null(chosen)) return(parm)
    if (is.null(parm)) parm <- all
    parm[parm %in% chosen]
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
    parm <- if (missing(parm)) NULL else select_parameters(colnames(replicates), parm)
    return(percentile_intervals(replicates, narrow(parm, colnames(replicates)), level))
  }
  # The fit's own statistics when they are these (profiles are refits).
  stats <- if (wisp_has_statistics(object) && identical(object$stats$method, method) &&
               isTRUE(all.equal(statistics_level(object$stats), level))) {
    object$stats$parameters
  } else {
    wisp_statistics(object, method = method, level = level)$stats$parameters
  }
  values <- cbind(stats$CI.low, stats$CI.high)
  rownames(values) <- stats$parameter
  parm <- if (missing(parm)) rownames(values) else select_parameters(rownames(values), parm)
  parm <- narrow(parm, rownames(values))
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

#' A wisp fit's estimates as a table
#'
#' One row per estimate, its labels first: what it belongs to in the
#' words of the plots, then the original's parameter name, the estimate
#' and, for the fixed effects of a fit with statistics, those of
#' `fit$stats` (Wald or bootstrap).
#'
#' The columns: `context`, `gene`; `component`: `"block rate"`,
#' `"transition slope"`, `"transition point"` (the original's codes `Rt`,
#' `tslope`, `tpoint`; for warps and their SDs the component warped) or
#' `"dispersion"`; `term`: `"baseline"` (the curve at the reference
#' levels, `fit$fix$ref.lvl`), the term of the design a treatment effect
#' belongs to (`"hemisphere"`, `"hemisphere:age"`, as in [anova.wisp()])
#' or `NA` (random effects, dispersions); `effect`: `"baseline"` or the
#' treatment whose effect it is (`"right"`, `"right:P18"`); `block`: the
#' block of a block rate, the transition of a slope or point; `animal`: the
#' random-effect level of a warp; `role`: `"baseline"`, `"beta"`
#' (treatment effect), `"warp"`, `"sd"` (of the warps, per gene) or
#' `"dispersion"`; `parameter`: the original's name
#' (`beta_Rt_context1_gene1_right_X_Tns/Blk1`), as in `coef()` and
#' `fit$stats$parameters`; `estimate`; and `std.error, df, CI.low, CI.high,
#' p.value, p.value.adj, significance` (`NA` where there is none).
#'
#' @param x A `"wisp"` object from [wisp()], or its [summary()].
#' @param row.names,optional Ignored (for the generic).
#' @inheritParams coef.wisp
#' @param ... Nothing: an argument `as.data.frame()` does not take is an
#'   error.
#' @return A data.frame. For a `"summary.wisp"`, its `coefficients`.
#' @seealso [coef.wisp()], [confint.wisp()]
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 2, n.bins = 40)
#' fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
#' effects <- as.data.frame(fit, type = "beta")
#' head(effects[, c("gene", "component", "term", "effect", "block", "estimate", "p.value.adj")])
as.data.frame.wisp <- function(x, row.names = NULL, optional = FALSE,
                               type = c("all", "fixed", "baseline", "beta", "warp"),
                               gene = NULL, context = NULL, component = NULL, term = NULL,
                               block = NULL, ...) {
  check_unused_arguments(..., .method = "as.data.frame.wisp")
  check_wisp_object(x)
  type <- match_choice(type, "type", c("all", "fixed", "baseline", "beta", "warp"))
  labels <- parameter_labels(x)
  keep <- wisp_parameter_selector(x$parameters, type)
  if (any_selector(gene, context, component, term, block)) {
    keep <- keep & select_labelled(labels, gene, context, component, term, block,
                                   call = sys.call())
  }
  out <- labels[keep, , drop = FALSE]
  out$estimate <- unname(x$fitted.parameters[out$parameter])
  stats <- x$stats$parameters
  columns <- c("std.error", "df", "CI.low", "CI.high", "p.value", "p.value.adj", "significance")
  at <- if (is.null(stats)) rep(NA_integer_, nrow(out)) else match(out$parameter, stats$parameter)
  for (column in columns) {
    out[[column]] <- if (is.null(stats[[column]])) {
      rep(if (column == "significance") NA_character_ else NA_real_, nrow(out))
    } else stats[[column]][at]
  }
  rownames(out) <- NULL
  out
}

#' @rdname as.data.frame.wisp
#' @export
as.data.frame.summary.wisp <- function(x, row.names = NULL, optional = FALSE, ...) {
  x$coefficients
}

#' Log-likelihood, number of observations and information criteria
#'
#' `logLik()` is minus the fitted negative log-likelihood (without the
#' boundary penalty), with `df` the number of fitted parameters and `nobs`
#' the number of observed summed rows (population rows included, empty
#' cells excluded), so that [stats::AIC()] and [stats::BIC()] work. A gene
#' whose fit failed (see `gene.qc` in [wisp()]) is left out of all three.
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
  rows <- object$count.data.summed
  # A gene whose fit failed adds nothing to the likelihood, nor its rows.
  qc <- object$gene.qc
  failed <- if (is.null(qc)) character() else qc$gene[!gene_fitted(qc)]
  sum(!is.na(rows$count) & !rows$species %in% failed)
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

# The gene-level tests in a summary: the calls per term, then the rows
# (smallest p first).
# The genes' own fits in a line, and the genes whose fit needs a look (not
# converged, or estimates on a bound) as a table.
print_gene_qc <- function(qc, digits, max.rows) {
  flagged <- qc[!qc$converged | qc$on.bound > 0, , drop = FALSE]
  line <- sprintf("Genes: %s fitted, %s converged (Newton iterations %d-%d)",
                  format(nrow(qc), big.mark = ","),
                  if (all(qc$converged)) "all" else format(sum(qc$converged), big.mark = ","),
                  min(qc$iterations), max(qc$iterations))
  if (any(qc$on.bound > 0)) {
    line <- paste0(line, sprintf("; %s with estimates on a bound",
                                 count_noun(sum(qc$on.bound > 0), "gene")))
  }
  # Fits saved before the column have no `molecules`.
  sparse <- !is.null(qc$molecules) & qc$molecules < POINT_TESTS_CALIBRATED_COUNTS
  if (any(sparse, na.rm = TRUE)) {
    line <- paste0(line, sprintf(paste0(
      "; %s with fewer than %d molecules per bin and animal (column molecules), where the ",
      "tests of transition points and the gene-level tests are not calibrated"),
      count_noun(sum(sparse, na.rm = TRUE), "gene"), as.integer(POINT_TESTS_CALIBRATED_COUNTS)))
  }
  cat(strwrap(paste0(line, if (nrow(flagged)) ":" else "; fit$gene.qc has each gene's row."),
              exdent = 2), sep = "\n")
  if (nrow(flagged)) {
    print(utils::head(flagged, max.rows), digits = digits, row.names = FALSE)
    if (nrow(flagged) > max.rows) {
      cat(sprintf("... %d more genes: see fit$gene.qc\n", nrow(flagged) - max.rows))
    }
  }
}

print_gene_tests_summary <- function(tests, digits, max.rows) {
  cat("", strwrap(paste0("Gene-level tests (anova(fit): does the term change the gene anywhere? ",
                         reference_words(tests$method), "; BH across genes per term):"),
                  exdent = 2),
      sep = "\n")
  cat(paste0("  ", gene_call_lines(tests)), sep = "\n")
  shown <- as.data.frame(unclass(tests))[order(tests$p.value), c("gene", "term", "df",
                                                                  "statistic", "p.value",
                                                                  "p.adj", "log.fc", "shift")]
  rownames(shown) <- NULL
  print(utils::head(shown, max.rows), digits = digits)
  if (nrow(shown) > max.rows) {
    cat(sprintf("... %d more rows: see fit$gene.tests\n", nrow(shown) - max.rows))
  }
  caution <- attr(tests, "caution")
  if (!is.null(caution)) cat(strwrap(paste("Caution:", caution), exdent = 2), sep = "\n")
  cat("\n")
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

# " (3 of 12 transition-point effects by profile likelihood)" for the print
# line of profile statistics; "" for other methods.
profile_count_text <- function(stats) {
  profiles <- stats$profiles
  if (!identical(stats$method, "profile") || is.null(profiles) || !nrow(profiles)) return("")
  sprintf(" (%d of %s by profile likelihood)", sum(profiles$method == "profile"),
          count_noun(nrow(profiles), "transition-point effect"))
}
