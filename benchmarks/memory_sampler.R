# Starting and stopping benchmarks/memory_sampler.py on this R process's
# tree, for the benchmarks that measure memory (sourced by them). `out` is
# the summary CSV the sampler writes; `trace` an optional CSV of every tick.

start_sampler <- function(out, trace = NULL, interval = 0.01, timeout = 60) {
  unlink(paste0(out, c("", ".ready", ".stop")))
  sampler <- file.path(bench_dir, "memory_sampler.py")
  args <- c(shQuote(sampler), "--pid", Sys.getpid(), "--out", shQuote(out),
            "--interval", interval)
  if (!is.null(trace) && nzchar(trace)) args <- c(args, "--trace", shQuote(trace))
  system2("python3", args, wait = FALSE)
  deadline <- Sys.time() + timeout
  while (!file.exists(paste0(out, ".ready"))) {
    if (Sys.time() > deadline) stop("memory sampler did not start")
    Sys.sleep(0.005)
  }
}

stop_sampler <- function(out, timeout = 60) {
  file.create(paste0(out, ".stop"))
  deadline <- Sys.time() + timeout
  while (!file.exists(out)) {
    if (Sys.time() > deadline) stop("memory sampler did not finish")
    Sys.sleep(0.005)
  }
  utils::read.csv(out)
}
