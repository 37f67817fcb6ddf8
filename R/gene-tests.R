# Gene-level tests (model vignette §15.4): does a term (a fixed-effect
# factor with all its interactions, or one interaction on its own) change a
# gene anywhere along the axis, in any context? One reduced fit per term
# holds the term's effects at 0 in every context of every gene; species are
# independent, so that one refit gives each gene its own reduced fit, and
# LR = 2 (logLik(full) - logLik(reduced)) per gene, on the Laplace marginal
# likelihood with the random-effect variances estimated the same way in
# both fits (the REML-type Laplace criterion of the fit).

# The terms of a fit's design: each factor (its main effect and every
# interaction that involves it) and each interaction on its own. A list of
# list(term, factors, effects), effects naming W's columns (treatments).
design_terms <- function(fit) {
  factors <- fit$fix$names
  treatments <- fit$treatment$names
  if (!length(factors) || length(treatments) < 2L) return(list())
  off <- non_reference_factors(fit)
  held <- if (length(fit$held.effects)) fit$held.effects else character()
  term <- function(name, factors, effects) {
    effects <- setdiff(effects, held)
    if (length(effects)) list(term = name, factors = factors, effects = effects)
  }
  mains <- lapply(factors, function(f) {
    term(f, f, treatments[vapply(off, function(o) f %in% o, TRUE)])
  })
  sets <- unique(Filter(function(o) length(o) >= 2L, off))
  interactions <- lapply(sets, function(set) {
    term(paste(set, collapse = ":"), set,
         treatments[vapply(off, function(o) setequal(o, set), TRUE)])
  })
  Filter(Negate(is.null), c(mains, interactions))
}

# Per gene, the number of informed effects a term holds: the fixed effects
# (rows of the parameter table) of the term's treatments that the full fit
# estimates: the numerator degrees of freedom of the reference.
term_degrees <- function(fit, effects) {
  rows <- term_rows(fit, effects)
  genes <- fit$grouping.variables$species.lvls
  as.integer(table(factor(fit$parameters$species[rows], levels = genes)))
}

# Which rows of the parameter table are effects a term holds that the full
# fit estimates.
term_rows <- function(fit, effects) {
  p <- fit$parameters
  p$role %in% "beta" & p$treatment %in% effects & is.finite(unname(fit$fitted.parameters)) &
    !held_rows(p)
}

# Per gene, the denominator degrees of freedom of the F reference of a
# term's test (model vignette §15.4). A term whose factors all vary between
# animals (genotype, with its interactions) is estimated against the
# animals' spread, whose variance has animals - groups degrees of freedom;
# its effects' Wald covariance V splits into that spread's share and the
# within-animal share V_within. The multivariate Satterthwaite
# approximation of Fai and Cornelius (1996) gives the df: one Satterthwaite
# df per principal direction of V, combined through the mean of F. It is
# animals - groups when the spread dominates and grows to Inf (the
# chi-square) as it vanishes. Terms within animals get Inf. `covariance` is
# wisp_covariance_blocks(fit); NA for a gene without estimated effects, and
# animals - groups (the least) where none of its effects has a Wald variance.
term_denominator_df <- function(fit, term, covariance) {
  genes <- fit$grouping.variables$species.lvls
  spread_df <- animal_spread_df(fit)
  if (!term_between_animals(fit, term)) return(rep(Inf, length(genes)))
  # The term's estimated effects, gene by gene (one pass: a panel has 10^5
  # parameters).
  rows <- which(term_rows(fit, term$effects))
  by_gene <- split(rows, factor(fit$parameters$species[rows], levels = genes))
  vapply(by_gene, function(idx) {
    if (!length(idx)) return(NA_real_)
    total <- covariance_rows(covariance, idx)
    within <- covariance_rows(covariance, idx, "within")
    defined <- is.finite(diag(total)) & is.finite(diag(within))
    if (!any(defined)) return(spread_df)
    multivariate_satterthwaite_df(total[defined, defined, drop = FALSE],
                                  within[defined, defined, drop = FALSE], spread_df)
  }, 0, USE.NAMES = FALSE)
}

# Whether all the factors of a term vary between animals only (genotype,
# age, and their interactions), so that its effects are estimated against
# the animals' spread, whose variance has animals - groups degrees of
# freedom.
term_between_animals <- function(fit, term) {
  !is.null(animal_spread_df(fit)) && all(fit$design$between[term$factors] %in% TRUE)
}

# Fai and Cornelius's denominator df of an F test of q effects with
# covariance `total`, of which `within` is known and the rest is estimated on
# `spread_df` degrees of freedom: with nu_i the Satterthwaite df of the i-th
# principal direction of `total`, F's mean sum(nu_i / (nu_i - 2)) / q is
# matched by F(q, nu): nu = 2 E / (E - q), E = sum(nu_i / (nu_i - 2)). A
# direction with nu_i <= 2 leaves F's mean undefined: then min(nu_i).
multivariate_satterthwaite_df <- function(total, within, spread_df) {
  decomposition <- eigen(total, symmetric = TRUE)
  kept <- decomposition$values > 1e-10 * max(decomposition$values)
  directions <- decomposition$vectors[, kept, drop = FALSE]
  variance <- decomposition$values[kept]
  within_share <- colSums(directions * (within %*% directions))
  nu <- satterthwaite_df(variance, within_share, spread_df)
  nu[is.na(nu)] <- spread_df
  if (any(nu <= 2)) return(min(nu))
  expected <- sum(ifelse(is.finite(nu), nu / (nu - 2), 1))
  if (expected <= length(nu)) return(Inf)
  2 * expected / (expected - length(nu))
}

# Gene-level effect sizes of a term, from the full fit's population curves,
# with Wald intervals (delta method on the fit's Wald covariance, blocks from
# wisp_covariance_blocks(); `level` their confidence): `log.fc`, the log
# fold change of the gene's total expected count per cell (summed over bins
# and contexts), and `shift`, the largest change of a fitted transition
# point in bins. For a factor f, each treatment t at a non-reference level
# of f is compared with t at f's reference level; for an interaction of the
# factors S, the contrast is the interaction's: the sum over subsets A of S
# of (-1)^|S \ A| times the value at t with the factors outside A at their
# reference levels. The largest in absolute value across treatments (and,
# for shifts, contexts and points) is reported, signed, with the interval of
# that contrast. Because it was chosen as the largest of m candidates, its
# interval is Bonferroni's over the m (level 1 - (1 - level) / m), so that
# all m intervals would hold together, the chosen one with them. A term
# between animals takes a t quantile on the contrast's Satterthwaite df
# (its variance's share from the animals' spread, estimated on animals -
# groups df; as the Wald tests' df), others the normal one.
term_effect_sizes <- function(fit, term, covariance, level = 0.95) {
  genes <- fit$grouping.variables$species.lvls
  treatments <- fit$treatment$names
  components <- fit$treatment$components
  reference <- fit$fix$ref.lvl
  # The treatment with the levels of t but those of `to_reference` at reference.
  treatment_at <- function(t, to_reference) {
    levels <- components[[match(t, treatments)]]
    levels[to_reference] <- reference[to_reference]
    hit <- which(vapply(components, function(l) identical(unname(l), unname(levels)), TRUE))
    if (length(hit)) treatments[hit[1]] else NA_character_
  }
  # Each contrast of the term as signed weights over the treatments.
  contrast_of <- function(t) {
    set <- term$factors
    subsets <- unlist(lapply(0:length(set), function(k) utils::combn(set, k, simplify = FALSE)),
                      recursive = FALSE)
    weights <- stats::setNames(rep(0, length(treatments)), treatments)
    for (a in subsets) {
      at <- treatment_at(t, setdiff(set, a))
      if (is.na(at)) return(NULL)
      weights[at] <- weights[at] + (-1)^(length(set) - length(a))
    }
    weights
  }
  contrasts <- Filter(Negate(is.null), lapply(term$effects, contrast_of))
  contrasts <- if (length(contrasts)) do.call(rbind, contrasts) else
    matrix(0, 0, length(treatments))
  log_fc <- log_fc_with_gradients(fit, contrasts)
  shift <- shift_with_gradients(fit, contrasts)
  held <- held_rows(fit$parameters)
  spread_df <- if (term_between_animals(fit, term)) animal_spread_df(fit)
  interval <- function(estimate, gradient, candidates) {
    if (is.null(gradient) || !is.finite(estimate)) return(c(NA_real_, NA_real_))
    gradient <- gradient[!held[as.integer(names(gradient))]]
    if (!length(gradient)) return(c(estimate, estimate))
    index <- as.integer(names(gradient))
    variance <- delta_method_variance(covariance, index, gradient)
    tail <- (1 - level) / (2 * max(1L, candidates))
    quantile <- if (is.null(spread_df)) stats::qnorm(1 - tail) else {
      within <- delta_method_variance(covariance, index, gradient, "within")
      df <- satterthwaite_df(variance, within, spread_df)
      stats::qt(1 - tail, if (is.na(df)) spread_df else df)
    }
    estimate + c(-1, 1) * quantile * sqrt(variance)
  }
  intervals <- function(sizes) {
    limits <- vapply(sizes, function(x) interval(x$estimate, x$gradient, x$candidates), c(0, 0))
    list(estimate = vapply(sizes, `[[`, 0, "estimate"), lower = limits[1, ],
         upper = limits[2, ])
  }
  lfc <- intervals(log_fc)
  sh <- intervals(shift)
  list(log.fc = unname(lfc$estimate), log.fc.lower = unname(lfc$lower),
       log.fc.upper = unname(lfc$upper), shift = unname(sh$estimate),
       shift.lower = unname(sh$lower), shift.upper = unname(sh$upper))
}

# The largest signed value among candidates (a vector), its position.
largest_position <- function(values) {
  finite <- which(is.finite(values))
  if (length(finite)) finite[which.max(abs(values[finite]))] else NA_integer_
}

# Per gene, the largest of the contrasts (rows of `contrasts`, over
# treatments) of log(total expected count per cell), the total summed over
# bins and contexts of the population curves, and its gradient in the
# reported parameters (named by their positions): d log T / d theta =
# sum_i r'(Psi_i) dPsi_i / d theta / T. Genes go to Rust in chunks, so the
# sparse gradient entries of a panel are never held at once.
log_fc_with_gradients <- function(fit, contrasts) {
  genes <- fit$grouping.variables$species.lvls
  contexts <- fit$grouping.variables$context.lvls
  treatments <- fit$treatment$names
  model <- count_labels(fit)
  likelihood <- fit_likelihood(fit)
  bins <- as.double(seq_len(max(1L, fit$settings$max_bin %||% 0L, max(fit$count.data.summed$bin))))
  code <- function(values, levels) as.integer(match(values, levels) - 1L)
  per_chunk <- max(1L, floor(2e5 / (length(bins) * length(treatments) * length(contexts))))
  chunks <- split(genes, ceiling(seq_along(genes) / per_chunk))
  out <- lapply(chunks, function(chunk) {
    grid <- expand.grid(bin = bins, treatment = treatments, context = contexts,
                        species = chunk, stringsAsFactors = FALSE)
    entries <- count_curve_gradient_entries_rust(
      fit$plan, as.double(fit$fitted.parameters), code(grid$context, model$contexts),
      code(grid$species, model$species), code(grid$treatment, model$treatments), grid$bin)
    rate <- rate_at(entries$psi, likelihood)
    slope <- rate
    known <- !is.na(entries$psi)
    slope[known] <- curve_rate_slope_rust(as.double(entries$psi[known]), likelihood)
    group <- factor(paste(grid$species, grid$treatment, sep = "\r"))
    total <- tapply(rate, group, sum)
    by_gene <- split(seq_along(entries$point), factor(grid$species[entries$point], chunk))
    lapply(stats::setNames(chunk, chunk), function(g) {
      key <- paste(g, treatments, sep = "\r")
      log_total <- log(pmax(total[key], .Machine$double.xmin))
      values <- drop(contrasts %*% log_total)
      best <- largest_position(values)
      if (is.na(best)) return(list(estimate = NA_real_, gradient = NULL, candidates = 0L))
      used <- by_gene[[g]]
      point <- entries$point[used]
      # d log T_t: the point's weight in its treatment's total.
      treatment_weight <- contrasts[best, match(grid$treatment[point], treatments)]
      weight <- treatment_weight * slope[point] / total[as.character(group[point])]
      gradient <- tapply(weight * entries$value[used], entries$index[used], sum)
      list(estimate = unname(values[best]),
           gradient = stats::setNames(as.double(gradient), names(gradient)),
           candidates = sum(is.finite(values)))
    })
  })
  unlist(unname(out), recursive = FALSE)[genes]
}

# Per gene, the largest of the contrasts of a fitted transition point (in
# bins) across contexts and transitions, and its gradient. A point under
# treatment t is z_t = sum_i W[t, i] beta_i over its block's baseline and
# effects (as in the parameters plot), so a contrast c of it is c' W beta,
# with gradient W' c in those beta.
shift_with_gradients <- function(fit, contrasts) {
  genes <- fit$grouping.variables$species.lvls
  treatments <- fit$treatment$names
  W <- fit$weight.matrix
  p <- fit$parameters
  estimates <- unname(fit$fitted.parameters)
  rows <- which(p$role %in% c("baseline", "beta") & p$component %in% "tpoint")
  key <- paste(p$species, p$context, p$block, sep = "\r")[rows]
  weights <- contrasts %*% W
  candidates <- lapply(split(rows, factor(key, levels = unique(key))), function(i) {
    at <- i[match(treatments, ifelse(p$role[i] == "baseline", treatments[1], p$treatment[i]))]
    if (anyNA(at)) return(NULL)
    list(species = p$species[at[1]], index = at, values = drop(weights %*% estimates[at]),
         weights = weights)
  })
  candidates <- Filter(Negate(is.null), candidates)
  species <- vapply(candidates, `[[`, "", "species")
  lapply(stats::setNames(genes, genes), function(g) {
    mine <- candidates[species == g]
    none <- list(estimate = NA_real_, gradient = NULL, candidates = 0L)
    if (!length(mine) || !nrow(contrasts)) return(none)
    values <- unlist(lapply(mine, `[[`, "values"))
    best <- largest_position(values)
    if (is.na(best)) return(none)
    block <- mine[[(best - 1L) %/% nrow(contrasts) + 1L]]
    row <- (best - 1L) %% nrow(contrasts) + 1L
    list(estimate = unname(values[best]),
         gradient = stats::setNames(as.double(block$weights[row, ]), block$index),
         candidates = sum(is.finite(values)))
  })
}

#' Gene-level tests of a fit's terms
#'
#' For every gene and every term of the design, a likelihood-ratio test of
#' "the term changes this gene nowhere along the axis, in no context": the
#' fit against a reduced fit with the term's effects held at 0 in every
#' context of the gene. A term is a fixed-effect factor with all its
#' interactions (`genotype`: the genotype's main effect and, in a genotype ×
#' hemisphere design, the genotype:hemisphere interaction) or one
#' interaction on its own (`genotype:hemisphere`).
#'
#' One reduced fit per term refits every gene, each started from its full
#' fit (genes are independent in the model, so this is each gene's own
#' reduced fit); the numbers of transitions are the full fit's. The
#' statistic is LR = 2 (logLik(full) − logLik(reduced)) per gene, on the
#' Laplace marginal likelihood that [logLik.wisp()] reports, with the
#' random-effect standard deviations estimated in both fits by the same
#' REML-type Laplace criterion. `df` is the number of the gene's effects the
#' term holds that the full fit estimates. The p-value (continuous, fast, and
#' fine for BH across thousands of rows) is from:
#'
#' - `method = "F"` (the default): LR / df against F(df, `den.df`). For a
#'   term whose factors all vary between animals (genotype, with its
#'   interactions), its effects are estimated against the animals' spread,
#'   whose variance has only animals − groups degrees of freedom; `den.df`
#'   is the multivariate Satterthwaite approximation of Fai and Cornelius
#'   (1996) built from the term's Wald covariance and its within-animal share
#'   (model vignette §15.4): animals − groups when the animals' spread
#'   dominates, growing to `Inf` as it vanishes. Other terms get
#'   `den.df = Inf`, the chi-square on `df`, and `method` says `"chisq"` on
#'   their rows.
#' - `method = "chisq"`: the chi-square on `df` for every term.
#' - `method = "bootstrap"`: a parametric bootstrap per gene (counts drawn
#'   from the reduced fit, both models refitted, p = (1 + #{LR* ≥ LR}) / (B +
#'   1); opt-in, B refits of every gene per term).
#'
#' How well the references hold on designs like real experiments is measured
#' in `benchmarks/gene_tests.R` (see `vignette("inference", package =
#' "wispack")`): on six simulated designs, five of them not used to tune
#' anything, the terms within animals kept their level, while the chi-square
#' reference of genotype (between animals) was liberal with 2–5 animals per
#' group (12.6 % of true-null genes at p < 0.05 with 2, 6.2–7.5 % with 3–5),
#' where the F reference was below the nominal 5 % (2.5–3.7 % at 2–8 animals
#' per group, the least at 3). With 2 animals per group it also lost power
#' (0.88 against the chi-square's 1.00 on the benchmark's large effects).
#' Tests below the group sizes where a reference was measured carry a
#' caution; for a reported test there, use `method = "bootstrap"` with 999
#' or more replicates.
#'
#' `p.adj` is the Benjamini–Hochberg adjustment across the genes of each
#' term: calling genes with `p.adj < 0.05` controls the false-discovery rate
#' per term at 5 %, as DESeq2 does per contrast. Calls of several terms add
#' up: their union is not controlled at 5 %.
#'
#' Effect sizes come from the full fit's population curves: `log.fc`, the
#' log fold change (natural log) of the gene's expected count per cell
#' summed over the bins and contexts, and `shift`, the largest change of a
#' fitted transition point, in bins. For a factor, each treatment at a
#' non-reference level is compared with the same treatment at the factor's
#' reference level (KO:right with right); for an interaction, the
#' interaction contrast (difference of differences) is used; the largest in
#' absolute value is reported, with its sign. Each comes with a 95 % Wald
#' interval (`log.fc.lower`, `log.fc.upper`, `shift.lower`, `shift.upper`):
#' the delta method on the fit's Wald covariance (as [vcov.wisp()]), for the
#' contrast reported. That contrast was chosen as the largest of m
#' candidates (treatment pairs, and for `shift` also contexts and
#' transitions), so its interval is Bonferroni's over the m (each at level 1
#' − 0.05 / m, so that all m would hold together). A term whose factors all
#' vary between animals (genotype) takes a t quantile on the contrast's
#' Satterthwaite degrees of freedom (as the Wald tests' df, from the
#' animals' spread), others the normal quantile. In
#' `benchmarks/effect_sizes.R` (six simulated designs, 2-8 animals per
#' group) the `log.fc` intervals covered the truth in 92-98 % of cases; the
#' `shift` intervals in 87-94 % where transitions moved (less where two lie
#' close together) and 91-96 % elsewhere: read them as a measure of
#' precision (see `vignette("inference", package = "wispack")`).
#'
#' @param object A `"wisp"` fit with `likelihood = "nb"`.
#' @param terms Names of the terms to test (default: every term of the design).
#' @param method `"F"` (default), `"chisq"` or `"bootstrap"`.
#' @param bootstraps Replicates per term under `method = "bootstrap"`.
#' @param seed Seed of the bootstrap replicates.
#' @param max.fork Processes for the reduced fits (and replicates).
#' @param verbose Report progress in messages.
#' @param backend `"fork"` (default: the reduced fits on `max.fork` forked
#'   processes) or `"future"`: on the current [future::plan()], one future
#'   per chunk of `chunk.size` genes that makes every term's reduced fits of
#'   its genes (`method = "F"` or `"chisq"`). The same tests either way; a chunk
#'   whose future fails leaves its genes with `NA` statistics and the
#'   future's error in `note`.
#' @param chunk.size,resources Genes per future (`NULL`: one chunk per
#'   worker) and future.batchtools resources, as in [wisp()] (backend
#'   `"future"`).
#' @return A `c("wisp_gene_tests", "data.frame")`, one row per gene and term:
#'   `gene`, `term`, `df`, `statistic` (LR), `p.value`, `method` (the row's
#'   reference: `"F"`, `"chisq"` or `"bootstrap"`), `p.adj`, `den.df` (the F
#'   reference's denominator df; `Inf` for the chi-square, `NA` under the
#'   bootstrap), `log.fc`, `log.fc.lower`, `log.fc.upper`, `shift`,
#'   `shift.lower`, `shift.upper`, `converged` (whether the reduced fit converged; a
#'   gene whose reduced fit failed has NA statistics and its reason in
#'   `note`), and `note` (also where the reduced fit was better than the
#'   fit: the gene's fit is then at a local optimum, and its statistic, 0,
#'   and p-value, 1, say nothing; the note gives the difference).
#' @references Fai, A. H.-T. and Cornelius, P. L. (1996). Approximate F-tests
#'   of multiple degree of freedom hypotheses in generalized least squares
#'   analyses of unbalanced split-plot experiments. *Journal of Statistical
#'   Computation and Simulation* 54, 363–378.
#' @seealso [anova.wisp()], which with two fits compares nested models.
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 3, n.bins = 30, seed = 2,
#'                         fixed.effects = list(genotype = c("WT", "KO")))
#' fit <- wisp(counts, verbose = FALSE)
#' wisp_gene_tests(fit)
wisp_gene_tests <- function(object, terms = NULL, method = c("F", "chisq", "bootstrap"),
                            bootstraps = 199L, seed = 1L, max.fork = 1L, verbose = FALSE,
                            backend = c("fork", "future"), chunk.size = NULL,
                            resources = NULL) {
  fit <- object
  check_wisp_object(fit)
  require_likelihood(fit, paste0(
    "gene-level tests need the count likelihood (likelihood = \"nb\"): the ",
    "original's objective is not a likelihood."), call = sys.call())
  method <- match_choice(method, "method", c("F", "chisq", "bootstrap"))
  check_whole_number(bootstraps, "bootstraps", lower = 1)
  check_whole_number(seed, "seed")
  check_whole_number(max.fork, "max.fork", lower = 1)
  check_flag(verbose, "verbose")
  backend <- match_choice(backend, "backend", c("fork", "future"))
  check_future_arguments(backend, chunk.size, resources)
  if (backend == "future") {
    if (method == "bootstrap") {
      stop_input("method = \"bootstrap\" runs on backend = \"fork\": its replicates need ",
                 "every gene's reduced fit in this session.")
    }
    if (!requireNamespace("future", quietly = TRUE)) {
      stop_input("backend = \"future\" needs the future package.")
    }
  }
  available <- design_terms(fit)
  names(available) <- vapply(available, `[[`, "", "term")
  if (!length(available)) {
    stop_input("the fit has no fixed-effect terms to test: its design has one treatment",
               if (length(fit$held.effects)) " besides the effects it holds at 0" else "", ".")
  }
  if (is.null(terms)) terms <- names(available)
  if (!is.character(terms) || !length(terms) || anyNA(terms)) {
    stop_input("`terms` must name terms of the design: ", quoted_names(names(available)), ".")
  }
  unknown <- setdiff(terms, names(available))
  if (length(unknown)) {
    stop_input("`terms` ", quoted_names(unknown), " ", if (length(unknown) > 1) "are" else "is",
               " not a term of this design; its terms are ", quoted_names(names(available)), ".")
  }
  genes <- fit$grouping.variables$species.lvls
  # The Wald covariance: F's denominator df and the effect sizes' intervals.
  covariance <- wisp_covariance_blocks(fit)
  on_futures <- if (backend == "future") {
    if (verbose) {
      message(sprintf("Gene-level tests of %s: reduced fits of %s on futures.",
                      paste(terms, collapse = ", "), count_noun(length(genes), "gene")))
    }
    future_term_fits(fit$plan, length(genes),
                     lapply(available[terms], `[[`, "effects"), chunk.size, resources)
  }
  tables <- lapply(available[terms], function(term) {
    if (verbose && backend == "fork") {
      message(sprintf("Gene-level test of %s: reduced fits of %s.", term$term,
                      count_noun(length(genes), "gene")))
    }
    reduced <- if (backend == "future") on_futures[[term$term]] else
      count_term_fit_rust(fit$plan, term$effects, as.integer(max.fork),
                          keep_plan = method == "bootstrap", progress = NULL)
    deviance <- 2 * (reduced$reduced - reduced$full)
    statistic <- pmax(deviance, 0)
    df <- term_degrees(fit, term$effects)
    failed <- nzchar(reduced$failure)
    statistic[failed | df == 0L] <- NA_real_
    den_df <- switch(method, F = term_denominator_df(fit, term, covariance),
                     chisq = rep(Inf, length(genes)), bootstrap = rep(NA_real_, length(genes)))
    p_value <- if (method == "bootstrap") {
      gene_bootstrap_p(fit$plan, reduced$plan, statistic, bootstraps, seed, max.fork)
    } else {
      # F(df, Inf) is the chi-square on df, divided by df.
      ifelse(is.finite(den_df), stats::pf(statistic / df, df, den_df, lower.tail = FALSE),
             stats::pchisq(statistic, df, lower.tail = FALSE))
    }
    row_method <- if (method == "F") ifelse(is.finite(den_df), "F", "chisq") else method
    note <- gene_test_notes(failed, reduced$failure, df, reduced$converged, reduced$stop,
                            deviance)
    sizes <- term_effect_sizes(fit, term, covariance)
    data.frame(gene = genes, term = term$term, df = df, statistic = statistic,
               p.value = p_value, method = row_method,
               p.adj = stats::p.adjust(p_value, method = "BH"), den.df = den_df,
               log.fc = sizes$log.fc, log.fc.lower = sizes$log.fc.lower,
               log.fc.upper = sizes$log.fc.upper, shift = sizes$shift,
               shift.lower = sizes$shift.lower, shift.upper = sizes$shift.upper,
               converged = reduced$converged & !failed, note = note,
               stringsAsFactors = FALSE)
  })
  table <- do.call(rbind, unname(tables))
  rownames(table) <- NULL
  structure(table, class = c("wisp_gene_tests", "data.frame"),
            method = method, bootstraps = if (method == "bootstrap") bootstraps,
            caution = between_animal_caution(fit, available[terms], method))
}

# A reduced fit better than the fit by more than this (in deviance, beyond
# the Newton tolerance's noise): the fit is at a local optimum of the gene.
REDUCED_FIT_BETTER <- 0.01

# Each gene-level test's note: why it has no statistic, why its statistic
# may mislead (a reduced fit that did not converge), or that its reduced fit
# was better than the fit (`deviance` < 0: the LR is then clipped at 0, p =
# 1, and the gene's fit missed its optimum); "" otherwise.
gene_test_notes <- function(failed, failure, df, converged, stop, deviance) {
  better <- sprintf(paste("the reduced fit is better than the fit by %.3g in deviance (the",
                          "gene's fit is at a local optimum); statistic set to 0"), -deviance)
  ifelse(failed, paste("the reduced fit failed:", failure),
         ifelse(df == 0L, "the fit estimates none of the term's effects",
                ifelse(!converged, paste("the reduced fit did not converge:", stop),
                       ifelse(!is.na(deviance) & deviance < -REDUCED_FIT_BETTER, better, ""))))
}

# The group sizes benchmarks/gene_tests.R measured the references of terms
# whose factors all vary between animals at: the chi-square was liberal
# below 8 animals per group (12.6 % of true-null genes at p < 0.05 at 2,
# 6.2-7.5 % at 3-5); the F reference gave 2.5-3.7 % at 2-8, and was not
# measured below 2.
GENE_TESTS_CHISQ_CALIBRATED_ANIMALS <- 8L
GENE_TESTS_F_CALIBRATED_ANIMALS <- 2L

# A line for the tests of between-animal terms with fewer animals than their
# reference was calibrated at (NULL when none applies).
between_animal_caution <- function(fit, terms, method) {
  between <- fit$design$between
  groups <- fit$design$groups
  if (method == "bootstrap" || is.null(between) || is.null(groups) || !length(groups)) {
    return(NULL)
  }
  smallest <- min(table(groups))
  calibrated <- if (method == "F") GENE_TESTS_F_CALIBRATED_ANIMALS else
    GENE_TESTS_CHISQ_CALIBRATED_ANIMALS
  if (smallest >= calibrated) return(NULL)
  names <- vapply(Filter(function(term) all(between[term$factors] %in% TRUE), terms),
                  `[[`, "", "term")
  if (!length(names)) return(NULL)
  what <- if (method == "F") {
    sprintf("the F reference was measured from %d animals per group", calibrated)
  } else {
    sprintf(paste0("in the calibration benchmark the chi-square p-values of such terms were ",
                   "liberal below %d animals per group (6.2-12.6 %% of true-null genes at ",
                   "p < 0.05 with 2-5; the default method = \"F\" gave 2.5-3.7 %%)"), calibrated)
  }
  sprintf(paste0("%s %s between animals and the smallest group has %d: %s; for reported ",
                 "tests use method = \"bootstrap\" (999 or more replicates)."),
          paste(names, collapse = ", "), if (length(names) > 1) "vary" else "varies",
          as.integer(smallest), what)
}

# The gene-level tests wisp() computes with its default statistics: every
# term of a count fit's design (NULL without terms). A failure leaves the
# fit without them, saying why, rather than losing the fit.
default_gene_tests <- function(fit, max.fork, say = function(...) NULL, apart = NULL) {
  if (!identical(fit_likelihood(fit), "nb") || !length(design_terms(fit))) return(NULL)
  started <- proc.time()[["elapsed"]]
  on_futures <- identical(apart$backend, "future")
  tests <- tryCatch(wisp_gene_tests(fit, max.fork = max.fork,
                                    backend = if (on_futures) "future" else "fork",
                                    chunk.size = if (on_futures) apart$chunk.size,
                                    resources = if (on_futures) apart$resources),
                    error = function(e) {
    say("Gene-level tests failed (", conditionMessage(e), "); anova(fit) runs them again.")
    NULL
  })
  if (!is.null(tests)) {
    say(sprintf("Gene-level tests: %s in %s.", count_noun(nrow(tests), "gene x term test"),
                format_seconds(proc.time()[["elapsed"]] - started)))
  }
  tests
}

# "genotype: 3 of 10 genes called at FDR 0.05" per term of gene-level tests.
gene_call_lines <- function(tests) {
  vapply(unique(tests$term), function(term) {
    rows <- tests[tests$term == term, , drop = FALSE]
    sprintf("%s: %d of %s called at FDR 0.05", term, sum(rows$p.adj < 0.05, na.rm = TRUE),
            count_noun(nrow(rows), "gene"))
  }, "", USE.NAMES = FALSE)
}

quoted_names <- function(x) paste0("\"", x, "\"", collapse = ", ")

# Per-gene parametric-bootstrap p-values of a term: each replicate draws a
# whole data set from the reduced fit and refits both models; a gene's
# replicate statistic is its own pair of likelihoods (genes are independent).
gene_bootstrap_p <- function(full_plan, reduced_plan, statistic, bootstraps, seed, max.fork) {
  genes <- length(statistic)
  replicate_statistic <- function(b) {
    nll <- tryCatch(count_lr_replicate_rust(reduced_plan, full_plan, as.double(seed),
                                            as.integer(b)),
                    error = function(e) rep(NA_real_, 2L * genes))
    2 * (nll[seq_len(genes)] - nll[genes + seq_len(genes)])
  }
  replicates <- seq_len(bootstraps)
  draws <- if (max.fork > 1L && .Platform$OS.type == "unix") {
    parallel::mclapply(replicates, replicate_statistic, mc.cores = max.fork,
                       mc.set.seed = FALSE)
  } else {
    lapply(replicates, replicate_statistic)
  }
  draws <- matrix(unlist(draws), nrow = genes)
  vapply(seq_len(genes), function(g) {
    used <- draws[g, !is.na(draws[g, ])]
    if (is.na(statistic[g]) || !length(used)) return(NA_real_)
    (1 + sum(used >= statistic[g])) / (length(used) + 1)
  }, 0)
}

# How a table's p-values were referred, in words (its rows' `method`s).
reference_words <- function(methods) {
  used <- unique(methods[!is.na(methods)])
  if ("bootstrap" %in% used) return("parametric bootstrap of the likelihood ratio")
  if (all(c("F", "chisq") %in% used)) {
    return(paste0("likelihood ratio / df against F(df, den.df) for terms between animals, ",
                  "against chi-square on df within"))
  }
  if ("F" %in% used) return("likelihood ratio / df against F(df, den.df)")
  "likelihood ratio against chi-square on df"
}

#' @export
print.wisp_gene_tests <- function(x, digits = 3, n = 20L, ...) {
  method <- attr(x, "method")
  cat("Gene-level tests: does the term change the gene anywhere along the axis?\n")
  cat(sprintf("p-values: %s; p.adj: Benjamini-Hochberg across the genes of each term.\n",
              if (identical(method, "bootstrap")) {
                paste0("parametric bootstrap, ", attr(x, "bootstraps"), " replicates")
              } else {
                reference_words(x$method)
              }))
  cat(gene_call_lines(x), sep = "\n")
  shown <- as.data.frame(unclass(x))[order(x$p.value), , drop = FALSE]
  shown$note <- NULL
  if (all(shown$converged)) shown$converged <- NULL
  # Each effect size with its 95 % interval in one column: "0.47 [0.31, 0.62]".
  for (size in intersect(c("log.fc", "shift"), names(shown))) {
    limits <- paste0(size, c(".lower", ".upper"))
    if (!all(limits %in% names(shown))) next
    number <- function(v) ifelse(is.na(v), "NA", formatC(v, digits = digits, format = "fg"))
    shown[[size]] <- ifelse(is.na(shown[[limits[1]]]), number(shown[[size]]),
                            sprintf("%s [%s, %s]", number(shown[[size]]),
                                    number(shown[[limits[1]]]), number(shown[[limits[2]]])))
    shown[limits] <- NULL
  }
  rownames(shown) <- NULL
  print(utils::head(shown, n), digits = digits, ...)
  if (nrow(x) > n) cat(sprintf("... %d more rows\n", nrow(x) - n))
  notes <- x$note[nzchar(x$note)]
  if (length(notes)) cat(sprintf("Note: %s\n", utils::head(unique(notes), 3)), sep = "")
  caution <- attr(x, "caution")
  if (!is.null(caution)) cat(strwrap(paste("Caution:", caution), exdent = 2), sep = "\n")
  invisible(x)
}

#' Gene-level tests as a plain table
#'
#' @param x A `"wisp_gene_tests"` table from [wisp_gene_tests()] (or
#'   `fit$gene.tests`).
#' @param row.names,optional,... Ignored (for the generic).
#' @return A data.frame, one row per gene and term, with the columns of
#'   [wisp_gene_tests()] (`gene`, `term`, `df`, `statistic`, `p.value`,
#'   `method`, `p.adj`, `den.df`, `log.fc` and `shift` with their intervals,
#'   `converged`, `note`) and none of its attributes.
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 2, n.bins = 30, seed = 3)
#' fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
#' as.data.frame(fit$gene.tests)
as.data.frame.wisp_gene_tests <- function(x, row.names = NULL, optional = FALSE, ...) {
  out <- as.data.frame(unclass(x), stringsAsFactors = FALSE)
  for (a in c("method", "bootstraps", "caution")) attr(out, a) <- NULL
  rownames(out) <- NULL
  out
}

# plot(fit, type = "genes"): one tile per gene (rows, ordered by their
# smallest adjusted p-value) and term (columns), filled by the gene-level
# log fold change on a diverging scale symmetric about 0, with a dot where
# the gene is called (p.adj < 0.05).
gene_test_plot <- function(fit, species, opts) {
  tests <- fit$gene.tests
  if (is.null(tests)) {
    if (!identical(fit_likelihood(fit), "nb") || !length(design_terms(fit))) {
      stop_input("plot(type = \"genes\") needs gene-level tests: a count fit (likelihood = ",
                 "\"nb\") with fixed effects.", call = NULL)
    }
    tests <- wisp_gene_tests(fit)
  }
  tests <- as.data.frame(unclass(tests))
  tests <- tests[tests$gene %in% species, , drop = FALSE]
  best <- tapply(tests$p.adj, tests$gene, function(p) suppressWarnings(min(p, na.rm = TRUE)))
  tests$gene <- factor(tests$gene, levels = rev(names(sort(best, na.last = TRUE))))
  tests$term <- factor(tests$term, levels = unique(tests$term))
  tests$called <- !is.na(tests$p.adj) & tests$p.adj < 0.05
  limit <- max(abs(tests$log.fc), 0.1, na.rm = TRUE)
  ggplot2::ggplot(tests, ggplot2::aes(x = .data$term, y = .data$gene)) +
    ggplot2::geom_tile(ggplot2::aes(fill = .data$log.fc), colour = "white", linewidth = 0.6) +
    ggplot2::geom_point(data = tests[tests$called, , drop = FALSE], size = 1.8,
                        colour = "black") +
    ggplot2::scale_fill_distiller(palette = "RdBu", limits = c(-limit, limit), direction = -1,
                                  na.value = "grey85",
                                  name = "log fold change\nof the total") +
    ggplot2::scale_x_discrete(labels = function(x) gsub(":", ":\n", x, fixed = TRUE)) +
    ggplot2::labs(x = "term", y = NULL, title = "Gene-level tests",
                  subtitle = "dot: called at FDR 0.05 (BH across genes per term)") +
    wisp_theme(fit, opts, legend = "right") +
    ggplot2::theme(panel.grid = ggplot2::element_blank())
}

# wisp_gene_tests(backend = "future"): every term's reduced fits of the
# `genes` genes of `plan`, one future per chunk of genes (each sent only its
# genes' rows and fits), collected in this session. Per term (named), what
# count_term_fit_rust() gives but the reduced plan: `reduced`, `full`,
# `converged`, `failure`, `stop`, in gene order. A chunk whose future failed
# gives its genes that failure.
future_term_fits <- function(plan, genes, effects, chunk_size, resources, call = sys.call(-1)) {
  size <- future_chunk_size(genes, future::nbrOfWorkers(), chunk_size)
  chunks <- unname(split(seq_len(genes), (seq_len(genes) - 1L) %/% size))
  launch <- future_launcher(resources)
  blank <- list(reduced = rep(NA_real_, genes), full = rep(NA_real_, genes),
                converged = rep(FALSE, genes), failure = rep("", genes), stop = rep("", genes))
  fits <- rep(list(blank), length(effects))
  names(fits) <- names(effects)
  unnamed <- unname(effects)
  kill <- as.integer(getOption("wispack.inject_faults", list())$kill)
  fail_chunk <- function(k, reason) {
    for (i in seq_along(fits)) fits[[i]]$failure[chunks[[k]]] <<- reason
  }
  future_chunks(
    length(chunks),
    launch = function(k) {
      subtask <- count_term_subtask_rust(plan, chunks[[k]] - 1L)
      genes <- chunks[[k]]
      label <- paste0("wispack-tests-", genes[1],
                      if (length(genes) > 1L) paste0("-", genes[length(genes)]) else "")
      launch(quote(run_term_chunk(subtask, effects, kill, collector)),
             list(run_term_chunk = run_term_chunk, subtask = subtask, effects = unnamed,
                  kill = any(genes %in% kill), collector = Sys.getpid()), label)
    },
    collect = function(k, value) {
      at <- chunks[[k]]
      if (!is.list(value) || length(value) != length(effects)) {
        return(fail_chunk(k, "the future returned no reduced fits"))
      }
      for (i in seq_along(effects)) {
        for (field in names(blank)) fits[[i]][[field]][at] <<- value[[i]][[field]]
      }
    },
    fail = function(k, error) {
      fail_chunk(k, paste("future failed:", trimws(conditionMessage(error))))
    },
    call = call
  )
  fits
}

# Runs on a future's worker: count_term_species_rust() of a chunk's task.
# `kill` is a test hook, as for run_gene_chunk().
run_term_chunk <- function(subtask, effects, kill = FALSE, collector = NA_integer_) {
  if (isTRUE(kill) && Sys.getpid() != collector) tools::pskill(Sys.getpid(), tools::SIGKILL)
  count_term_species_rust(subtask, effects)
}
