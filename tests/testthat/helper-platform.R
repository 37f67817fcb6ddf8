# Pretends, for the rest of the calling test, to run on a platform with other
# abilities: wispack's R code asks wisp_platform() (R/platform.R) what this
# build can do, so replacing it takes e.g. the Windows paths on Linux. The
# Rust core is unchanged: it still forks where the real platform can.
local_platform <- function(fork, memory_limit = fork, memory_figures = memory_limit,
                           env = parent.frame()) {
  pretend <- function() {
    list(fork = fork, memory_limit = memory_limit, memory_figures = memory_figures)
  }
  if ("local_mocked_bindings" %in% getNamespaceExports("testthat")) {
    testthat::local_mocked_bindings(wisp_platform = pretend, .package = "wispack", .env = env)
  } else {
    # testthat < 3.1.7 (Debian 12 has 3.1.6): what local_mocked_bindings() does.
    namespace <- asNamespace("wispack")
    original <- get("wisp_platform", envir = namespace)
    unlockBinding("wisp_platform", namespace)
    assign("wisp_platform", pretend, envir = namespace)
    withr::defer({
      assign("wisp_platform", original, envir = namespace)
      lockBinding("wisp_platform", namespace)
    }, envir = env)
  }
  invisible()
}
