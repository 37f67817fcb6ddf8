# What differs between operating systems, on the R side. The Rust core says
# what this build can do (src/rust/src/platform.rs); everything here asks
# wisp_platform(), so tests can mock that one function to take another
# platform's paths (tests/testthat/helper-platform.R).
#
#                    Linux   macOS   Windows
#   fork engine      yes     yes     no: bootstrap on "future" or "serial",
#                                    grid search on threads, count fit in
#                                    this process (or on "future")
#   mclapply         yes     yes     no
#   memory columns   yes     NA      NA
#   memory limit     yes     no      no

# What this build can do here: `fork` (the fork engine and mclapply's forked
# workers), `memory_limit` (`child.memory.limit`) and `memory_figures` (the
# diagnostics columns `peak_rss_mb`, `pss_mb`, `private_dirty_mb`).
wisp_platform <- function() platform_rust()

# The workers of a count fit: its genes, structure candidates and gene-level
# tests run on the engine's forked processes. Without fork (Windows) the fit
# runs them in this process, and says so when more were asked for; the
# original's grid search takes threads there and keeps max.fork.
count_fit_workers <- function(max.fork, likelihood, platform = wisp_platform()) {
  if (likelihood != "nb" || max.fork <= 1 || platform$fork) return(max.fork)
  message("wispack: this platform has no fork(), so the count fit runs its genes in this ",
          "process (max.fork = ", max.fork, " does not apply to it); wisp(backend = ",
          "\"future\") with future::plan(future::multisession, workers = ", max.fork,
          ") fits the genes in parallel.")
  1L
}

# bs_batch()'s backend when none is chosen: the fork engine where there is
# fork; elsewhere (Windows) "future" when future.apply is installed, so the
# user's future::plan() decides the workers, and "serial" otherwise.
default_backend <- function(platform = wisp_platform(),
                            future_apply = requireNamespace("future.apply", quietly = TRUE)) {
  if (platform$fork) "fork" else if (future_apply) "future" else "serial"
}

# bs_batch()'s `backend` argument, checked against what this platform offers:
# the default (the whole vector of choices) becomes default_backend().
bootstrap_backend <- function(backend, max.fork = 1, memory_limit = NULL, call = sys.call(-1)) {
  choices <- eval(formals(bs_batch)$backend)
  platform <- wisp_platform()
  chosen <- !identical(backend, choices)
  backend <- if (chosen) match_choice(backend, "backend", choices, call = call) else
    default_backend(platform)
  if (!platform$fork && backend %in% c("fork", "mclapply")) {
    stop_input("backend = \"", backend, "\" needs fork(), which Windows does not have; use ",
               "backend = \"future\" (parallel on the workers of future::plan(), e.g. ",
               "future::plan(future::multisession, workers = ", max(2, max.fork), ")) or ",
               "backend = \"serial\".", call = call)
  }
  if (!is.null(memory_limit) && !platform$memory_limit) {
    stop_input("`child.memory.limit` needs Linux, where a worker's address space can be ",
               "read and limited; leave it NULL here.", call = call)
  }
  if (!chosen && backend == "future" && max.fork > 1 && future::nbrOfWorkers() == 1) {
    message("wispack: bootstrapping with backend = \"future\" (this platform has no fork), ",
            "whose plan has 1 worker, so max.fork = ", max.fork, " has no effect; for ",
            max.fork, " workers, call future::plan(future::multisession, workers = ",
            max.fork, ") first.")
  }
  backend
}
