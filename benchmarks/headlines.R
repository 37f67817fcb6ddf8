# Provenance of benchmark results, sourced by the benchmark scripts:
#
#   register_headline(benchmark, figure, value, unit, command)
#     inserts or replaces rows of benchmarks/headlines.csv, the registry of
#     headline figures that tools/write-results.py turns into the one-page
#     benchmarks/RESULTS.md. A row is keyed by (benchmark, figure), so a
#     script that measures only some of its figures in a run (one session
#     size, one mode) replaces those and keeps the others. figure, value and
#     unit may be vectors (one row each). commit, date and machine are filled
#     in here, so that every figure says where it came from.
#   with_provenance(rows, engine)
#     adds the `commit` and `engine` columns every CSV under
#     benchmarks/results/ carries (tools/write-results.py --check insists):
#     which checkout produced the rows, and which arm of the code (backend:
#     fork, mclapply, future, serial; or likelihood: nb, original).
#
# Usage: source("benchmarks/headlines.R") from the repository root, or
# source(file.path(bench_dir, "headlines.R")).

# The checkout the benchmark runs from; "unknown" outside a git checkout,
# and "-dirty" added where the package's code (R/, src/) or a benchmark
# script differs from the commit, because then the figures are not that
# commit's. The results a run writes (CSVs, pages) do not count.
bench_commit <- function() {
  commit <- tryCatch(suppressWarnings(system2("git", c("rev-parse", "--short", "HEAD"),
                                              stdout = TRUE, stderr = FALSE)),
                     error = function(e) character())
  if (!length(commit) || !nzchar(commit[1])) return("unknown")
  dirty <- tryCatch(suppressWarnings(system2("git", c("status", "--porcelain", "--untracked-files=no", "--",
                                                     "R", "src", "benchmarks/*.R"),
                                             stdout = TRUE, stderr = FALSE)),
                    error = function(e) character())
  if (length(dirty)) paste0(commit[1], "-dirty") else commit[1]
}

# "2 CPUs, 24 GB": nproc and MemTotal, as the fork_vs_mclapply machine
# table rounds memory.
bench_machine <- function() {
  cpus <- tryCatch(suppressWarnings(system2("nproc", stdout = TRUE, stderr = FALSE)),
                   error = function(e) character())
  cpus <- if (length(cpus)) cpus[1] else as.character(parallel::detectCores())
  mem <- tryCatch(grep("^MemTotal", readLines("/proc/meminfo"), value = TRUE),
                  error = function(e) character())
  gb <- if (length(mem)) as.numeric(sub("[^0-9]*([0-9]+).*", "\\1", mem[1])) / 1024^2 else NA
  sprintf("%s CPUs, %s GB", cpus, if (is.finite(gb)) sprintf("%.0f", gb) else "unknown")
}

# The repository root, so that the registry is found from any working
# directory inside the checkout.
bench_root <- function() {
  root <- tryCatch(suppressWarnings(system2("git", c("rev-parse", "--show-toplevel"),
                                            stdout = TRUE, stderr = FALSE)),
                   error = function(e) character())
  if (length(root) && nzchar(root[1])) root[1] else getwd()
}

with_provenance <- function(rows, engine, commit = bench_commit()) {
  rows$commit <- rep_len(commit, nrow(rows))
  rows$engine <- rep_len(as.character(engine), nrow(rows))
  rows
}

register_headline <- function(benchmark, figure, value, unit, command,
                              commit = bench_commit(), date = format(Sys.Date()),
                              machine = bench_machine(),
                              file = file.path(bench_root(), "benchmarks", "headlines.csv")) {
  stopifnot(length(benchmark) == 1, length(figure) >= 1, length(command) == 1)
  # Figures are stored as text, formatted by the caller or with 3 significant
  # digits, so that the registry shows what the page shows.
  if (is.numeric(value)) {
    value <- vapply(value, function(v) format(signif(v, 3), scientific = FALSE), "")
  }
  new <- data.frame(benchmark = benchmark, figure = figure, value = value, unit = unit,
                    command = command, commit = commit, date = date, machine = machine,
                    stringsAsFactors = FALSE)
  old <- if (file.exists(file)) utils::read.csv(file, stringsAsFactors = FALSE,
                                                colClasses = "character") else new[0, ]
  rows <- old[names(new)]
  # A figure registered before keeps its place; a new one joins its benchmark's rows.
  at <- match(paste(new$benchmark, new$figure), paste(rows$benchmark, rows$figure))
  rows[at[!is.na(at)], ] <- new[!is.na(at), ]
  rows <- rbind(rows, new[is.na(at), , drop = FALSE])
  rows <- rows[order(match(rows$benchmark, unique(rows$benchmark))), , drop = FALSE]
  utils::write.csv(rows, file, row.names = FALSE)
  # The one-page summary is generated from the registry; regenerate it so the
  # two never disagree (tools/test.sh checks that they do not).
  generator <- file.path(dirname(dirname(file)), "tools", "write-results.py")
  if (file.exists(generator) && nzchar(Sys.which("python3"))) {
    status <- system2("python3", shQuote(generator))
    if (!identical(status, 0L)) warning("tools/write-results.py failed; run it by hand")
  }
  invisible(rows)
}
