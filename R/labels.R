# Parameters in the user's words (issue #27): which context, gene, component,
# term, effect, block and animal each reported parameter belongs to, read
# from the fit's own structure (`fit$parameters`, `fit$treatment`,
# `fit$fix`), never parsed from the pasted names, and the selection of
# parameters by these labels for coef(), confint() and as.data.frame().

# The readable name of each component code. Fixed effects carry the
# original's codes (Rt, tslope, tpoint); warps and their SDs name the
# component they warp (rate, slope, point).
component_names <- c(Rt = "block rate", tslope = "transition slope", tpoint = "transition point",
                      rate = "block rate", slope = "transition slope", point = "transition point",
                      dispersion = "dispersion")

# What a user may write for a component, by readable name.
component_aliases <- list(
  "block rate" = c("block rate", "rate", "Rt"),
  "transition slope" = c("transition slope", "slope", "tslope"),
  "transition point" = c("transition point", "point", "tpoint"),
  "dispersion" = "dispersion"
)

# The design term of each treatment: the factors at a non-reference level,
# joined by ":" as in the gene-level tests ("hemisphere", "hemisphere:age");
# NA for the reference treatment or a fit that does not record its levels.
treatment_terms <- function(fit) {
  treatments <- fit$treatment$names
  components <- fit$treatment$components
  if (is.null(treatments) || length(components) != length(treatments)) {
    return(stats::setNames(rep(NA_character_, length(treatments)), treatments))
  }
  terms <- vapply(non_reference_factors(fit), function(off) {
    if (length(off)) paste(off, collapse = ":") else NA_character_
  }, "")
  stats::setNames(terms, treatments)
}

# The factors at a non-reference level in each treatment (a list in the
# order of fit$treatment$names): a treatment's term, and which terms of
# the design (design_terms()) its effect belongs to.
non_reference_factors <- function(fit) {
  factors <- fit$fix$names
  reference <- fit$fix$ref.lvl
  lapply(fit$treatment$components, function(levels) {
    factors[!is.na(levels[factors]) & levels[factors] != reference[factors]]
  })
}

#' The labels of a fit's parameters
#'
#' One row per reported parameter (in the order of `fit$parameters`):
#' `context`, `gene`, `component` (readable: "block rate", "transition
#' slope", "transition point", "dispersion"), `term` ("baseline" for a
#' baseline parameter, the design term of a treatment effect such as
#' "hemisphere" or "hemisphere:age"; NA for random effects and
#' dispersions), `effect` ("baseline", or the treatment whose effect it is,
#' such as "right" or "right:P18"), `block` (the block of a block rate, the
#' transition of a slope or point), `animal` (the random-effect level of a
#' warp), `role` and `parameter` (the original's name).
#' @keywords internal
#' @noRd
parameter_labels <- function(fit) {
  p <- fit$parameters
  fixed <- p$role %in% c("baseline", "beta")
  terms <- treatment_terms(fit)
  term <- ifelse(p$role %in% "baseline", "baseline",
                 ifelse(p$role %in% "beta", unname(terms[p$treatment]), NA_character_))
  effect <- ifelse(p$role %in% "baseline", "baseline",
                   ifelse(p$role %in% "beta", p$treatment, NA_character_))
  component <- unname(component_names[p$component])
  data.frame(context = p$context, gene = p$species, component = component, term = term,
             effect = effect, block = as.integer(p$block),
             animal = if (is.null(p$ran)) NA_character_ else p$ran,
             role = p$role, parameter = p$name, stringsAsFactors = FALSE, row.names = NULL)[
               , c("context", "gene", "component", "term", "effect", "block", "animal", "role",
                   "parameter")]
}

# Which rows of `labels` (parameter_labels()) the selectors choose: each
# selector NULL (any) or a vector of accepted values. An unknown value is an
# error that lists the values there are.
select_labelled <- function(labels, gene = NULL, context = NULL, component = NULL, term = NULL,
                            block = NULL, call = sys.call(-1)) {
  keep <- rep(TRUE, nrow(labels))
  check_values <- function(values, available, what) {
    if (!is.character(values) || anyNA(values)) {
      stop_input("`", what, "` must be a character vector.", call = call)
    }
    unknown <- setdiff(values, available)
    if (length(unknown)) {
      stop_input("unknown ", what, " ", quoted_names(unknown), "; the fit's are ",
                 quoted_names(available), ".", call = call)
    }
  }
  if (!is.null(gene)) {
    check_values(gene, unique(stats::na.omit(labels$gene)), "gene")
    keep <- keep & labels$gene %in% gene
  }
  if (!is.null(context)) {
    check_values(context, unique(stats::na.omit(labels$context)), "context")
    keep <- keep & labels$context %in% context
  }
  if (!is.null(component)) {
    aliases <- unlist(component_aliases)
    readable <- rep(names(component_aliases), lengths(component_aliases))
    check_values(component, unname(aliases), "component")
    keep <- keep & labels$component %in% readable[match(component, aliases)]
  }
  if (!is.null(term)) {
    # A term ("hemisphere") or one effect of it ("right"), or "baseline".
    available <- unique(stats::na.omit(c(labels$term, labels$effect)))
    check_values(term, available, "term")
    keep <- keep & (labels$term %in% term | labels$effect %in% term)
  }
  if (!is.null(block)) {
    if (!is.numeric(block) || anyNA(block) || any(block != round(block))) {
      stop_input("`block` must be whole numbers (the block of a rate, the transition of a ",
                 "slope or point).", call = call)
    }
    keep <- keep & labels$block %in% block
  }
  keep
}

# Whether any selector is given.
any_selector <- function(...) any(!vapply(list(...), is.null, NA))

# ---------------------------------------------------------------------------
# How a fit ended, and which of its estimates lie on a bound

# How the fit ended, in the same words wherever it is said (wisp()'s
# message, print(), summary()): the count likelihood's fit counts Newton
# iterations, with the likelihood evaluations of their line searches beside
# them; the original's L-BFGS counts evaluations only.
fit_course_text <- function(diagnostics, likelihood) {
  f <- diagnostics
  status <- if (isTRUE(f$converged)) "converged" else "NOT converged"
  if (!is.null(f$code) && !identical(f$code, status)) status <- sprintf("%s (%s)", status, f$code)
  evaluations <- count_noun(as.integer(f$num.evals), "likelihood evaluation")
  steps <- if (identical(likelihood, "nb") && !is.null(f$iterations)) {
    sprintf("%s (%s)", count_noun(as.integer(f$iterations), "Newton iteration"), evaluations)
  } else evaluations
  sprintf("%s after %s, %s", status, steps, format_seconds(f$seconds))
}

# The estimates on a bound that the reported values show, one row each:
# `gene`, `context`, `component`, `block` and `treatment` of a block rate
# at 0 (its lower bound) or a transition slope at its steepest (above 0.99
# of the largest slope), read from the treatments' curve values W beta.
# What else a gene's count in fit$gene.qc$on.bound holds (a dispersion at
# its bound, a transition point at the axis' edge or next to another) shows
# only in that count.
bound_estimates <- function(fit) {
  p <- fit$parameters
  weights <- fit$weight.matrix
  treatments <- fit$treatment$names
  none <- data.frame(gene = character(), context = character(), component = character(),
                     block = integer(), treatment = character(), stringsAsFactors = FALSE)
  if (is.null(weights) || nrow(weights) != length(treatments)) return(none)
  estimates <- unname(fit$fitted.parameters)
  estimates[held_rows(p)] <- 0
  slope_max <- model_rules()$count_model$slope_max
  curves <- which(p$role %in% c("baseline", "beta") & p$component %in% c("Rt", "tslope"))
  key <- paste(p$species, p$context, p$component, p$block, sep = "\r")[curves]
  rows <- lapply(split(curves, factor(key, levels = unique(key))), function(idx) {
    idx <- idx[order(match(p$treatment[idx], treatments))]
    if (!identical(p$treatment[idx], treatments)) return(NULL)
    values <- drop(weights %*% estimates[idx])
    at <- if (p$component[idx[1]] == "Rt") values <= 1e-8 else values > 0.99 * slope_max
    at <- which(at %in% TRUE)
    if (!length(at)) return(NULL)
    data.frame(gene = p$species[idx[1]], context = p$context[idx[1]],
               component = unname(component_names[p$component[idx[1]]]),
               block = as.integer(p$block[idx[1]]), treatment = treatments[at],
               stringsAsFactors = FALSE)
  })
  out <- do.call(rbind, c(list(none), rows))
  rownames(out) <- NULL
  out
}

# "5 estimates on a bound, in gene 'gene3' (5: no counts; block rate 1 at 0
# under every treatment; 1 more)...": the genes by name (from
# fit$gene.qc), and the estimates that bound_estimates() reads; NULL when
# no estimate is on a bound.
on_bound_text <- function(fit) {
  f <- fit$fit.diagnostics
  if (!isTRUE(f$on.bound > 0)) return(NULL)
  qc <- fit$gene.qc
  head <- paste(count_noun(as.integer(f$on.bound), "estimate"), "on a bound")
  if (is.null(qc) || !any(qc$on.bound > 0)) return(paste0(head, ": see fit$fit.diagnostics."))
  genes <- qc[qc$on.bound > 0, , drop = FALSE]
  d <- fit$count.data.summed
  totals <- tapply(d$count, factor(d$species, levels = qc$gene), sum, na.rm = TRUE)
  found <- bound_estimates(fit)
  several_contexts <- length(fit$grouping.variables$context.lvls) > 1L
  more_any <- FALSE
  # Treatments by all their levels ("left, P12"), as in the figures, so
  # that none reads as an effect.
  labels <- treatment_labels(fit)
  under <- function(treatments) {
    if (setequal(treatments, names(labels))) return("under every treatment")
    paste("under", paste(labels[treatments], collapse = " / "))
  }
  describe <- function(gene, count) {
    mine <- found[found$gene == gene, , drop = FALSE]
    curve <- paste(mine$component, mine$block)
    # (paste() would turn no rows into one " in ")
    if (several_contexts && nrow(mine)) curve <- paste(curve, "in", mine$context)
    what <- ifelse(mine$component == "block rate", "at 0", "at its steepest")
    pieces <- vapply(split(seq_len(nrow(mine)), factor(curve, levels = unique(curve))),
                     function(i) {
                       sprintf("%s %s %s", curve[i[1]], what[i[1]], under(mine$treatment[i]))
                     }, "")
    more <- count - nrow(mine)
    if (more > 0) more_any <<- TRUE
    parts <- c(if (isTRUE(totals[[gene]] == 0)) "no counts", pieces,
               if (more > 0) sprintf("%d more", more))
    sprintf("'%s' (%d: %s)", gene, as.integer(count), paste(parts, collapse = "; "))
  }
  shown <- utils::head(seq_len(nrow(genes)), 5L)
  named <- vapply(shown, function(i) describe(genes$gene[i], genes$on.bound[i]), "")
  paste0(head, ", in ", if (nrow(genes) == 1L) "gene " else sprintf("%d genes: ", nrow(genes)),
         paste(named, collapse = ", "),
         if (nrow(genes) > 5L) sprintf(" and %d more genes", nrow(genes) - 5L) else "",
         if (more_any) paste0("; \"more\": a dispersion at its bound, or a transition point ",
                              "at the axis' edge or next to another") else "",
         ". fit$gene.qc has each gene's count.")
}
