# S3 methods for "wisp_bootstrap" results of bs_batch(): print, summary and
# as.data.frame (confint.wisp_bootstrap() is with confint.wisp() in methods.R).

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
#'   replicate), `total.seconds`, `seed`, `backend`, `max.fork` and
#'   `provenance` (printed as the last line when the object has one).
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

# A replicate's code for the figures: the termination's word, without a
# failure's reasons (which name genes and would give each failure a bar).
replicate_codes <- function(d) {
  failed <- model_rules()$termination$failed
  code <- ifelse(startsWith(d$code, failed), sub(": $", "", failed), d$code)
  ifelse(d$ok %in% TRUE, ifelse(is.na(d$code), "unknown", code), "failed")
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
    seed = object$seed, backend = object$backend, max.fork = object$max.fork,
    provenance = object$provenance
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
  made <- provenance_line(x$provenance)
  if (!is.null(made)) cat("\nRun with ", made, "\n", sep = "")
  invisible(x)
}

#' @rdname print.wisp_bootstrap
#' @param row.names,optional Ignored (for the generic).
#' @param fit For `as.data.frame()`: `NULL` (the default) gives one row per
#'   replicate, its diagnostics and then one column per parameter. The fit
#'   that was bootstrapped gives the tidy form instead: one row per
#'   replicate and estimate, with the labels of [as.data.frame.wisp()]
#'   (`context`, `gene`, `component`, `term`, `effect`, `block`, `animal`,
#'   `role`, `parameter`), the replicate's `estimate`, the fit's
#'   (`fitted`) and the replicate's convergence `code`.
#' @export
as.data.frame.wisp_bootstrap <- function(x, row.names = NULL, optional = FALSE, ...,
                                         fit = NULL) {
  if (!is.null(fit)) return(bootstrap_long(x, fit))
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

# One row per replicate and estimate, labelled as as.data.frame(fit) labels
# the fit's estimates.
bootstrap_long <- function(boot, fit) {
  check_wisp_object(fit)
  labels <- as.data.frame.wisp(fit)
  parameters <- names(boot$t0)
  at <- match(parameters, labels$parameter)
  if (anyNA(at)) {
    stop_input("`fit` is not the fit this bootstrap was made from: ",
               sum(is.na(at)), " of its ", length(parameters), " parameters (e.g. '",
               parameters[is.na(at)][1], "') are not the fit's.")
  }
  replicates <- nrow(boot$diagnostics)
  estimates <- boot$t
  if (is.null(estimates)) estimates <- matrix(NA_real_, replicates, length(parameters))
  keep <- c("context", "gene", "component", "term", "effect", "block", "animal", "role",
            "parameter")
  out <- labels[rep(at, each = replicates), keep, drop = FALSE]
  out <- data.frame(replicate = rep(seq_len(replicates), times = length(parameters)), out,
                    estimate = as.vector(estimates), fitted = rep(unname(boot$t0), each = replicates),
                    code = rep(replicate_codes(boot$diagnostics), times = length(parameters)),
                    stringsAsFactors = FALSE)
  out <- out[order(out$replicate, match(out$parameter, parameters)), , drop = FALSE]
  rownames(out) <- NULL
  out
}
