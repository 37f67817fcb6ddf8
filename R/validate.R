# Input checks shared by the user-facing functions. Every failure is an error
# of class `wisp_input_error` (R/conditions.R) whose message names the
# argument and the problem.

describe_value <- function(x) {
  if (is.null(x)) return("NULL")
  if (length(x) != 1L) return(sprintf("a %s vector of length %d", class(x)[1], length(x)))
  if (is.na(x)) return("NA")
  if (is.character(x)) return(sprintf("\"%s\"", x))
  format(x)
}

# A single whole number in [lower, upper] (Inf allowed only when `upper` is Inf).
check_whole_number <- function(x, name, lower = 0, upper = .Machine$integer.max,
                               call = sys.call(-1)) {
  ok <- is.numeric(x) && length(x) == 1L && !is.na(x) &&
    x >= lower && x <= upper && (is.infinite(x) || x == round(x))
  if (!ok) {
    range <- if (is.infinite(upper)) sprintf(">= %s", lower) else sprintf("between %s and %s", lower, upper)
    stop_input("`", name, "` must be a single whole number ", range, ", not ",
               describe_value(x), ".", call = call)
  }
  invisible(x)
}

# A single number in [lower, upper]; `allow_na` admits NA as "not set".
check_number <- function(x, name, lower = -Inf, upper = Inf, allow_na = FALSE,
                         call = sys.call(-1)) {
  if (allow_na && length(x) == 1L && is.na(x) && !is.nan(x)) return(invisible(x))
  ok <- is.numeric(x) && length(x) == 1L && !is.na(x) && x >= lower && x <= upper
  if (!ok) {
    stop_input("`", name, "` must be a single number between ", lower, " and ", upper,
               if (allow_na) " (or NA)" else "", ", not ", describe_value(x), ".",
               call = call)
  }
  invisible(x)
}

# Task numbers: whole numbers in 1..n, possibly none.
check_task_numbers <- function(x, name, n, call = sys.call(-1)) {
  ok <- is.numeric(x) && !anyNA(x) && all(x == round(x)) && all(x >= 1 & x <= max(n, 0))
  if (!ok) {
    stop_input("`", name, "` must hold task numbers between 1 and ", n, ".", call = call)
  }
  invisible(x)
}

# The worker cap R CMD check imposes, applied as the parallel package does.
check_worker_limit <- function(workers, name = "workers", call = sys.call(-1)) {
  limit <- tolower(Sys.getenv("_R_CHECK_LIMIT_CORES_", ""))
  if (nzchar(limit) && limit != "false" && workers > 2) {
    stop_input("`", name, "` = ", workers, " is more than the 2 workers allowed while ",
               "_R_CHECK_LIMIT_CORES_ is set (as under R CMD check --as-cran).", call = call)
  }
  invisible(workers)
}

check_flag <- function(x, name, allow_na = FALSE, call = sys.call(-1)) {
  if (!is.logical(x) || length(x) != 1L || (is.na(x) && !allow_na)) {
    stop_input("`", name, "` must be TRUE", if (allow_na) ", FALSE or NA" else " or FALSE",
               ", not ", describe_value(x), ".", call = call)
  }
  invisible(x)
}
