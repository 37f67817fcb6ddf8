#' Likelihood-ratio tests: gene-level tests of one fit, or nested fits
#'
#' With one fit, `anova(fit)` gives the gene-level tests of every term of the
#' design: one row per gene and term, with Benjamini–Hochberg adjusted
#' p-values across genes (see [wisp_gene_tests()], which it calls with
#' `terms`, `method` (default `"F"`), `bootstraps`, `seed`, `max.fork`
#' and `verbose`).
#'
#' With two fits, it tests whether chosen treatment effects are needed: a reduced model, fitted
#' with those effects held at 0 (`model.settings = list(trtKO = ...)`),
#' against the full model, both fitted to the same data with the count
#' likelihood and the same numbers of transitions. The statistic is
#' LR = 2 (logLik(full) − logLik(reduced)), on the Laplace marginal
#' likelihood that [logLik.wisp()] reports. Its p-value comes from a
#' parametric bootstrap (model vignette §15.4): data sets are drawn from the
#' reduced fit (new random effects and counts, as `bs_batch(resample =
#' "parametric")` draws them), both models are refitted to each, and
#' p = (1 + #{LR* ≥ LR}) / (B + 1), which is never 0. No chi-square p-value is
#' given: with random effects, bounded parameters and the weak priors of the
#' fit, the chi-square reference has not been shown to hold.
#'
#' `trtKO` names effects as the fit reports them (`"KO"`, `"KO:right"`; see
#' `fit$treatment$names`) or factors (`"genotype"`: every effect that involves
#' the factor, its main effect and its interactions). The held effects are
#' held at 0 on the model's unconstrained scale (model vignette §15.4), so a
#' held interaction of slopes or points can be reported as a small non-zero
#' value; held effects are not tested in the reduced fit's `summary()`. Unlike
#' the original package's `trtKO`, no data are dropped.
#'
#' @param object,... One `"wisp"` fit with `likelihood = "nb"` (gene-level
#'   tests), or two, in either order: the full model and the reduced model.
#' @param terms,method With one fit: passed to [wisp_gene_tests()] (`method`
#'   `"F"`, `"chisq"` or `"bootstrap"`; default `"F"`). Two fits are compared by
#'   the parametric bootstrap only.
#' @param bootstraps Number of parametric-bootstrap replicates for the
#'   p-value (each refits both models).
#' @param seed Seed of the replicates: replicate b depends only on (fits,
#'   seed, b), whatever `max.fork` is.
#' @param max.fork Number of processes to run the replicates in (forked with
#'   [parallel::mclapply()] on Unix-alikes; 1 runs them in this session).
#' @param verbose Report progress in messages.
#' @return With one fit, a `"wisp_gene_tests"` table (see
#'   [wisp_gene_tests()]). With two, an object of class `c("anova", "data.frame")` with one row per
#'   model (reduced first): `npar` (degrees of freedom of [logLik.wisp()]),
#'   `logLik`, `AIC`, `BIC`, and on the full model's row `LR`, `Df` (the
#'   difference in `npar`) and `Pr(>LR)` (the bootstrap p-value). The
#'   attribute `"replicates"` holds LR* of every replicate (NA where a refit
#'   failed; those are left out of the p-value and counted in the heading).
#' @seealso [logLik.wisp()], [bs_batch()] and [wisp_statistics()] for tests of
#'   single effects.
#' @importFrom stats anova
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 1, n.bins = 30, seed = 2,
#'                         fixed.effects = list(genotype = c("WT", "KO")))
#' full <- wisp(counts, verbose = FALSE)
#' reduced <- wisp(counts, model.settings = list(trtKO = "genotype"),
#'                 degrees = full$degrees, verbose = FALSE)
#' anova(reduced, full, bootstraps = 19)
#' anova(full)
anova.wisp <- function(object, ..., terms = NULL, method = NULL, bootstraps = 199L, seed = 1L,
                       max.fork = 1L, verbose = FALSE) {
  if (...length() == 0L) {
    return(wisp_gene_tests(object, terms = terms, method = method %||% "F",
                           bootstraps = bootstraps, seed = seed, max.fork = max.fork,
                           verbose = verbose))
  }
  if (!is.null(terms) || !is.null(method)) {
    stop_input("`terms` and `method` are for the gene-level tests of one fit (anova(fit)); ",
               "two fits are compared by a parametric bootstrap.")
  }
  fits <- c(list(object), list(...))
  if (length(fits) != 2L || !all(vapply(fits, inherits, TRUE, what = "wisp"))) {
    stop_input("anova() compares exactly two \"wisp\" fits: the reduced and the full model.")
  }
  for (fit in fits) check_wisp_object(fit)
  for (fit in fits) {
    require_likelihood(fit, paste0(
      "anova() needs fits with the count likelihood (likelihood = \"nb\"): the ",
      "original's objective is not a likelihood."), call = sys.call())
  }
  check_whole_number(bootstraps, "bootstraps", lower = 1)
  check_whole_number(seed, "seed")
  check_whole_number(max.fork, "max.fork", lower = 1)
  check_flag(verbose, "verbose")
  held <- lapply(fits, function(fit) if (is.null(fit$held.effects)) character() else fit$held.effects)
  order <- order(-lengths(held))
  reduced <- fits[[order[1]]]
  full <- fits[[order[2]]]
  with_context(count_check_nested_rust(reduced$plan, full$plan),
               "the two fits are not nested: ")
  statistic <- 2 * (as.numeric(logLik(full)) - as.numeric(logLik(reduced)))
  replicate_statistic <- function(b) {
    nll <- tryCatch(count_lr_replicate_rust(reduced$plan, full$plan, as.double(seed),
                                            as.integer(b)),
                    error = function(e) c(NA_real_, NA_real_))
    # Per species: the reduced fits' -logLik, then the full fits'.
    half <- length(nll) / 2
    2 * (sum(nll[seq_len(half)]) - sum(nll[half + seq_len(half)]))
  }
  if (verbose) {
    message(sprintf("Likelihood-ratio test: %d parametric-bootstrap replicates on %d %s",
                    bootstraps, max.fork, if (max.fork == 1) "process" else "processes"))
  }
  replicates <- seq_len(bootstraps)
  if (max.fork > 1L && .Platform$OS.type == "unix" && requireNamespace("parallel", quietly = TRUE)) {
    statistics <- unlist(parallel::mclapply(replicates, replicate_statistic,
                                            mc.cores = max.fork, mc.set.seed = FALSE))
  } else {
    statistics <- vapply(replicates, replicate_statistic, numeric(1))
  }
  used <- statistics[!is.na(statistics)]
  p_value <- if (length(used)) (1 + sum(used >= statistic)) / (length(used) + 1) else NA_real_
  lik <- lapply(list(reduced, full), logLik)
  npar <- vapply(lik, function(l) attr(l, "df"), 0L)
  table <- data.frame(
    npar = npar, logLik = vapply(lik, as.numeric, 0),
    AIC = vapply(lik, stats::AIC, 0), BIC = vapply(lik, stats::BIC, 0),
    LR = c(NA, statistic), Df = c(NA, npar[2] - npar[1]), `Pr(>LR)` = c(NA, p_value),
    row.names = c("reduced", "full"), check.names = FALSE
  )
  failed <- sum(is.na(statistics))
  structure(table, class = c("anova", "data.frame"), replicates = statistics,
            heading = c(
              paste0("Likelihood-ratio test of the effects held at 0 in the reduced model: ",
                     paste(reduced$held.effects[!reduced$held.effects %in% full$held.effects],
                           collapse = ", ")),
              paste0("Pr(>LR): parametric bootstrap, ", length(used), " replicates drawn from ",
                     "the reduced fit (seed ", seed, ")",
                     if (failed) paste0("; ", failed, " replicates failed and are left out") else "",
                     "\n")
            ))
}
