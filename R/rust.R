# The Rust functions return their errors as "extendr_error" conditions
# (extendr's `result_condition` feature) rather than raising them: an R error
# raised inside Rust longjmps over the Rust frames, so the memory they own
# (the message, at least) would leak on every error. Each generated wrapper in
# R/extendr-wrappers.R passes its result through here, and the error is raised
# in R, where the same handlers see it as before.
rust_result <- function(value) {
  if (inherits(value, "extendr_error")) {
    stop(simpleError(paste(as.character(value$value), collapse = "\n"), call = sys.call(-1)))
  }
  value
}
