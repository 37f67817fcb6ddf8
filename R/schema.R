# The diagnostics of a fit or bootstrap replicate: one row per fit, one
# column per field of the Rust record (`COLUMNS` in src/rust/src/outcome.rs,
# which converts it to these columns). To add a column, add its field and
# its line there, and its name and type here; test-schema.R checks that the
# two lists agree.
diagnostic_columns <- c(
  ok = "logical",            # whether the replicate produced a fit
  reason = "character",      # why not (NA when ok)
  pen.neg.value = "double",  # the minimised objective (original: nll + boundary penalty; nb: J)
  neg.loglik = "double",     # negative log-likelihood
  converged = "logical",
  code = "character",        # how the fit ended
  num.evals = "integer",     # objective evaluations
  iterations = "integer",    # optimiser iterations
  max.gradient = "double",   # max |gradient| of the objective at the estimate
  on.bound = "integer",      # estimates on a bound
  fit.seconds = "double",    # seconds of the optimisation
  seconds = "double",        # seconds of the whole fit or replicate
  pid = "integer",           # the process that ran it
  peak_rss_mb = "double",    # that process's memory, MB
  pss_mb = "double",
  private_dirty_mb = "double"
)

# The one constructor of diagnostics tables: the columns from Rust (a named
# list) as a data.frame; with no columns, `n` rows of a replicate that did
# not run (ok FALSE, everything else NA).
new_diagnostics <- function(columns = NULL, n = 0L) {
  if (is.null(columns)) {
    columns <- lapply(diagnostic_columns, function(type) vector(type, n))
    for (name in names(columns)[-1]) columns[[name]][] <- NA
  }
  if (!identical(names(columns), names(diagnostic_columns))) {
    stop("internal error: diagnostics columns differ from R/schema.R's list", call. = FALSE)
  }
  as.data.frame(columns, stringsAsFactors = FALSE, optional = TRUE)
}

# The fit.diagnostics of a "wisp" object: its diagnostics row as a list,
# without `ok` and `reason` (a full fit that fails is an error), with the
# number of parameters.
fit_diagnostics <- function(columns, n.params) {
  row <- new_diagnostics(columns)
  c(as.list(row[setdiff(names(diagnostic_columns), c("ok", "reason"))]),
    list(n.params = as.integer(n.params)))
}
