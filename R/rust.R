# The Rust functions return their errors as "extendr_error" conditions
# (extendr's `result_condition` feature) rather than raising them: an R error
# raised inside Rust longjmps over the Rust frames, so the memory they own
# (the message, at least) would leak on every error. Each generated wrapper in
# R/extendr-wrappers.R passes its result through here, and the error is
# raised in R with the class of its kind (`list(kind, message)`, see
# src/rust/src/error.rs and ?wisp_conditions).
rust_result <- function(value) {
  if (inherits(value, "extendr_error")) {
    error <- value$value
    if (is.list(error) && is.character(error$kind) && is.character(error$message)) {
      stop(wisp_condition(error$kind, error$message, call = sys.call(-1)))
    }
    stop(wisp_condition("input", paste(as.character(error), collapse = "\n"),
                        call = sys.call(-1)))
  }
  value
}

# Whether this build has the test hooks (the cargo feature `test-hooks`, on
# with WISPACK_TEST_HOOKS=true at install time; tools/test.sh sets it).
test_hooks_enabled <- function() test_hooks_rust()

# Test hook: makes the fork backend's replicates misbehave, e.g.
# inject_faults(list(kill = 2, hang = 5)) (faults: kill, segfault, panic,
# hang, allocate); inject_faults(list()) disarms.
inject_faults <- function(faults) {
  invisible(faults_arm_rust(lapply(faults, as.integer)))
}

# Resumes a jump out of an R callback that ran while Rust worked. Rust calls
# progress callbacks in R's current context (so withCallingHandlers() and
# progressr's global handlers see their conditions); when R code jumps out
# of one (an error in a handler, an exiting handler, Ctrl-C), Rust stops its
# work (killing its child processes), returns `list(wisp_unwind = ...)`, and
# the jump goes on from here to where it was going. Returns `value` otherwise.
# Call it on the Rust wrapper's value directly, with no tryCatch() or
# withRestarts() in between: the jump may be going to one, and it must
# still be there.
continue_jump <- function(value) {
  if (is.list(value) && !is.null(value$wisp_unwind)) {
    .Call(wisp_continue_unwind, value$wisp_unwind)
  }
  value
}
