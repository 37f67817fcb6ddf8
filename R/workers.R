# Worker processes: how many the machine has, how many a future plan gives,
# and what to do when a worker cannot load wispack.

# The cores of this machine (NA when unknown).
available_cores <- function() {
  cores <- tryCatch(parallel::detectCores(), error = function(e) NA_integer_)
  if (length(cores) != 1L) NA_integer_ else cores
}

# A warning when `workers` exceeds the cores: the extra processes share cores
# and finish no sooner, each with its own copy of the data. wisp() warns
# once, not again for the bootstrap it runs.
warn_workers_above_cores <- function(workers, name = "max.fork", cores = available_cores()) {
  if (is.na(cores) || workers <= cores) return(invisible(FALSE))
  above <- seq_len(max(sys.nframe() - 2L, 0L))
  if (any(vapply(above, function(n) identical(sys.function(n), wisp), NA))) {
    return(invisible(FALSE))
  }
  warning(sprintf(paste0("%s = %d is more than the %s of this machine (parallel::detectCores()): ",
                         "the extra workers share cores and finish no sooner, and each needs ",
                         "its own memory; use %s = %d or fewer."),
                  name, as.integer(workers), count_noun(cores, "core"), name, cores),
          call. = FALSE)
  invisible(TRUE)
}

# The number of workers of the current future plan.
future_workers <- function() {
  workers <- tryCatch(future::nbrOfWorkers(), error = function(e) NA_real_)
  if (is.finite(workers)) as.integer(workers) else workers
}

# A future's error that says a worker could not load wispack (it searches
# other libraries than this session) becomes an input error that says where
# this session found wispack and how to show the workers that library; other
# errors are returned unchanged.
worker_library_error <- function(e, call = NULL) {
  message <- conditionMessage(e)
  cannot_load <- grepl("wispack", message, fixed = TRUE) &&
    grepl("no package called|(load|attach)[a-z ]*package|package[a-z ]*(not|cannot be) (found|installed|loaded)",
          message)
  if (inherits(e, "wisp_error") || !cannot_load) return(e)
  library <- dirname(find.package("wispack"))
  wisp_condition("input", paste0(
    "the future workers cannot load wispack (", trimws(message), "). This session loads ",
    "it from the library '", library, "', which the workers do not search: check ",
    ".libPaths() on a worker, and give them that library, e.g. with ",
    "future::plan(future::cluster, workers = ..., rscript_libs = c(\"", library,
    "\", .libPaths())), or by setting R_LIBS=", library, " in the workers' ",
    "environment (or install wispack in a library the workers search)."), call = call)
}
