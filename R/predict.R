# predict() of a "wisp" fit: the columns of `newdata`, the curves at any
# position and their pointwise intervals (bootstrap or Wald).

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
  rate <- curve_rate(object)
  if (is.null(newdata)) {
    keep <- observed_rows(object)
    summed <- object$count.data.summed
    pred_log <- fit_predictions(object, object$fitted.parameters)
    response <- fit_response(object, pred_log)
    pred_log <- pred_log[keep]
    response <- response[keep]
    if (interval == "none") return(if (type == "response") response else pred_log)
    rows <- summed[keep, , drop = FALSE]
    exposure <- summed_exposure(object, rows)
    points <- list(ran = rows$ran, context = rows$context, species = rows$species,
                   treatment = rows$treatment, bin = as.numeric(rows$bin), exposure = exposure)
  } else {
    points <- prediction_points(object, newdata)
    pred_log <- curve_values(object, points, object$fitted.parameters)[, 1L]
    response <- rate(pred_log) * points$exposure
    if (interval == "none") return(if (type == "response") response else pred_log)
  }
  bounds <- prediction_intervals(object, points, pred_log, level, method)
  out <- cbind(fit = pred_log, lwr = bounds$lower, upr = bounds$upper)
  if (type == "response") {
    out[, "lwr"] <- rate(out[, "lwr"]) * points$exposure
    out[, "upr"] <- rate(out[, "upr"]) * points$exposure
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
  exposure <- newdata_exposure(object, newdata, n, call)
  list(ran = ran, context = context, species = species, treatment = treatment,
       bin = as.numeric(bin), exposure = as.numeric(exposure))
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
  require_likelihood(object, paste0(
    "Wald intervals need the count likelihood (likelihood = \"nb\"): the original's ",
    "objective is not a likelihood. Bootstrap the fit (wisp(..., bootstraps.num = ",
    "1000)) for bootstrap intervals."), call = call)
  if (any(points$ran != "none")) {
    stop_input("Wald intervals are of population curves (ran = \"none\"): the covariance holds ",
               "the fixed effects, not an animal's random effects. Predict with ran = \"none\", ",
               "or bootstrap the fit for intervals of animals' curves.", call = call)
  }
  model <- count_labels(object)
  code <- function(values, levels) as.integer(match(values, levels) - 1L)
  # The gradients as sparse entries (a curve depends on its block's few
  # effects): no points x parameters matrix, whatever the panel's size.
  gradients <- count_curve_gradient_entries_rust(object$plan,
                                                 as.double(object$fitted.parameters),
                                                 code(points$context, model$contexts),
                                                 code(points$species, model$species),
                                                 code(points$treatment, model$treatments),
                                                 points$bin)
  # Repeated (point, parameter) entries summed, in one pass.
  count <- length(object$fitted.parameters)
  summed <- rowsum(gradients$value, (gradients$point - 1) * count + gradients$index)
  key <- as.numeric(rownames(summed)) - 1
  index <- key %% count + 1
  by_point <- split(seq_along(key), factor(key %/% count + 1, seq_along(points$bin)))
  covariance <- wisp_covariance_blocks(object)
  se <- vapply(seq_along(points$bin), function(i) {
    if (is.na(gradients$psi[i])) return(NA_real_)
    mine <- by_point[[i]]
    mine <- mine[summed[mine] != 0]
    if (!length(mine)) return(0)
    delta_method_se(covariance, index[mine], summed[mine])
  }, 0)
  z <- stats::qnorm(1 - a)
  list(lower = pred_log - z * se, upper = pred_log + z * se)
}
