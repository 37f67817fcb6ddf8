#!/bin/sh
# The full test suite: Rust formatting, lints and unit tests, the crate
# type-checked for macOS and Windows, then R CMD build
# and an offline R CMD check --as-cran (which must end "Status: OK"; its
# testthat run is in CRAN mode), then, with NOT_CRAN=true against the
# installed package, every test file in which that run skipped a test, so
# the tests --as-cran skips run too, then the documentation site
# is built and checked in a browser. Every pass is built with the
# test hooks (WISPACK_TEST_HOOKS=true, read by tools/config.R), so no test
# skips for want of them. Usage: sh tools/test.sh
set -eu
WISPACK_TEST_HOOKS=true
export WISPACK_TEST_HOOKS
repo=$(cd "$(dirname "$0")/.." && pwd)
. "$repo/tools/setup.sh"
wispack_setup

# Each section is announced with the seconds since the suite began, so a
# log shows where its time goes.
suite_start=$(date +%s)
section() { echo "== $* [$(( $(date +%s) - suite_start )) s]"; }

# The top-level modules of the Rust core must not import one another in a
# cycle (tools/check-module-cycles.py; its self-test runs first). The
# "|| exit 1" is needed: set -e does not stop at a failure before the "&&".
section "module import cycles"
python3 "$repo/tools/check-module-cycles.py" --self-test && python3 "$repo/tools/check-module-cycles.py" || exit 1
python3 "$repo/tools/check-architecture.py" --self-test && python3 "$repo/tools/check-architecture.py" || exit 1

# benchmarks/RESULTS.md must be what tools/write-results.py writes from
# benchmarks/headlines.csv, every page it links must exist, and every
# results CSV must say its commit and engine (under a second).
section "benchmark results page"
python3 "$repo/tools/write-results.py" --check || exit 1

section "cargo fmt, clippy and test"
cd "$repo/src/rust"
cargo fmt --check
# Linted with and without the test hooks: a default build must be clean too.
cargo clippy --all-targets --locked -j 2 -- -D warnings
cargo clippy --all-targets --locked -j 2 --features test-hooks -- -D warnings
# The engine tests fork, which needs a single-threaded test harness.
cargo test --locked -j 2 --features test-hooks -- --test-threads=1

# The crate must build on macOS and Windows too: the fork engine and the
# other Unix- or Linux-only pieces are behind platform gates (see
# src/rust/src/platform.rs). Type-checking with clippy, warnings as errors,
# with and without the test hooks, finds what a gate misses; it needs only
# the targets' standard libraries (no dependency compiles C for the target,
# so no cross linker or C compiler either). A target that cannot be
# installed here is reported, not skipped silently.
section "cargo clippy for other platforms"
unchecked=""
for target in x86_64-apple-darwin x86_64-pc-windows-gnu; do
  if ! rustc --print sysroot >/dev/null 2>&1 ||
     [ ! -d "$(rustc --print sysroot)/lib/rustlib/$target" ]; then
    section "Installing the Rust target $target (rustup target add $target)"
    if ! rustup target add "$target"; then
      echo "NOT CHECKED: the Rust target $target cannot be installed on this machine" \
        "(rustup target add $target failed, or there is no rustup); the crate was not" \
        "type-checked for it."
      unchecked="$unchecked $target"
      continue
    fi
  fi
  section "cargo clippy --target $target (without and with the test hooks)"
  cargo clippy --all-targets --locked -j 2 --target "$target" -- -D warnings
  cargo clippy --all-targets --locked -j 2 --target "$target" --features test-hooks -- -D warnings
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
section "R CMD build"
R CMD build "$repo"
tarball=$(ls wispack_*.tar.gz)

# An empty local repository and no network: check must not try to reach CRAN.
mkdir -p emptyrepo/src/contrib
: > emptyrepo/src/contrib/PACKAGES
gzip -k emptyrepo/src/contrib/PACKAGES
echo "options(repos = c(CRAN = \"file://$work/emptyrepo\"))" > Rprofile.offline
mkdir empty-home
# Checked inside a new network namespace, i.e. with no network at all (its
# loopback is brought up so future's multisession workers can connect).
offline=""
if unshare -n sh -c 'ip link set lo up' 2>/dev/null; then offline="yes"; fi
run_offline() {
  if [ -n "$offline" ]; then
    unshare -n sh -c 'ip link set lo up && exec "$@"' sh "$@"
  else
    "$@"
  fi
}
section "R CMD check --as-cran --no-manual ${offline:+(without network)}"
set +e
# tests/testthat.R saves its results to WISPACK_CHECK_TEST_RESULTS: the
# NOT_CRAN pass below reads which test files had skips.
check_tests="$work/check-test-results.rds"
run_offline env HOME="$work/empty-home" R_PROFILE_USER="$work/Rprofile.offline" \
  _R_CHECK_CRAN_INCOMING_REMOTE_=false _R_CHECK_SYSTEM_CLOCK_=FALSE \
  WISPACK_CHECK_TEST_RESULTS="$check_tests" \
  R CMD check --as-cran --no-manual "$tarball" 2>&1 | tee check.log
set -e
if ! grep "^Status:" check.log | tail -n 1 | grep -q "^Status: OK$"; then
  echo "R CMD check did not end with 'Status: OK'" >&2
  for log in wispack.Rcheck/00install.out wispack.Rcheck/tests/testthat.Rout.fail; do
    [ -f "$log" ] && tail -n 60 "$log" >&2
  done
  exit 1
fi
written=$(find "$work/empty-home" -mindepth 1 | head -n 20)
if [ -n "$written" ]; then
  echo "Building or checking wrote under HOME:" >&2
  echo "$written" >&2
  exit 1
fi

section "testthat with NOT_CRAN=true against the installed package"
# The files whose every test ran and passed in R CMD check (a failure there
# stops the suite above) are not run again: only those in which CRAN mode
# skipped a test, with test-cluster.R and test-real-data.R, whose verdicts
# are reported on lines of their own. A file is run whole, and none of its
# tests may skip.
# This pass runs outside the network namespace: test-cluster.R starts a
# one-node Slurm cluster with tools/slurm-cluster.sh (daemons on 127.0.0.1)
# and writes to $WISPACK_SLURM_STATUS whether it could; the verdict is
# written there at the end ("passed", "failed" or "unavailable: <reason>").
# The real data of ../shared/data (never committed): tests find it through
# WISPACK_SHARED_DATA, and report its absence as a line of their own.
WISPACK_SHARED_DATA=${WISPACK_SHARED_DATA:-$repo/../shared/data}
export WISPACK_SHARED_DATA
WISPACK_SLURM_SCRIPT="$repo/tools/slurm-cluster.sh"
WISPACK_SLURM_STATUS=${WISPACK_SLURM_STATUS:-$work/slurm-status}
export WISPACK_SLURM_SCRIPT WISPACK_SLURM_STATUS
rm -f "$WISPACK_SLURM_STATUS"
slurm_was_running=""
if sh "$WISPACK_SLURM_SCRIPT" status >/dev/null 2>&1; then slurm_was_running="yes"; fi
# The tests stop the cluster they start; this stops it too if R dies first.
trap '[ -n "$slurm_was_running" ] || sh "$WISPACK_SLURM_SCRIPT" stop >/dev/null 2>&1; rm -rf "$work"' EXIT
cd "$repo/tests/testthat"
NOT_CRAN=true R_LIBS="$work/wispack.Rcheck" WISPACK_CHECK_TEST_RESULTS="$check_tests" Rscript -e '
saved <- Sys.getenv("WISPACK_CHECK_TEST_RESULTS")
if (!file.exists(saved)) stop("R CMD check saved no test results at ", saved, " (tests/testthat.R)")
in_check <- readRDS(saved)
always <- c("test-cluster.R", "test-real-data.R")
rerun <- sort(union(unique(in_check$file[in_check$skipped]), always))
not_rerun <- setdiff(unique(in_check$file), rerun)
cat(sprintf("testthat in R CMD check (CRAN mode): %d passed, %d skipped, in %d files; the %d files with a skip run again below, the other %d not (each of their tests ran and passed there)\n",
            sum(in_check$nb) - sum(in_check$failed), sum(in_check$skipped),
            length(unique(in_check$file)), length(rerun), length(not_rerun)))
stems <- sub("^test-?", "", sub("[.][rR]$", "", rerun))
if (!all(grepl("^[A-Za-z0-9_-]+$", stems))) stop("test file names to filter on: ", toString(rerun))
results <- as.data.frame(testthat::test_dir(".", package = "wispack",
  load_package = "installed", reporter = "summary", stop_on_failure = FALSE,
  filter = paste0("^(", paste(stems, collapse = "|"), ")$")))
missing <- setdiff(rerun, results$file)
if (length(missing)) stop("files with skips in R CMD check did not run here: ", toString(missing))
# Where Slurm cannot be set up, the cluster tests skip, and that is reported
# as a result of its own rather than counted as a skipped test.
status_file <- Sys.getenv("WISPACK_SLURM_STATUS")
slurm <- if (file.exists(status_file)) readLines(status_file, n = 1L) else "not run"
cluster <- results$file == "test-cluster.R"
unavailable <- startsWith(slurm, "unavailable: ")
# Where the real data are absent, their test skips; reported as a line.
real <- results$file == "test-real-data.R"
real_absent <- any(real & results$skipped)
counted_skips <- results$skipped & !(cluster & unavailable) & !(real & real_absent)
failed <- sum(results$failed) + sum(results$error)
skipped <- sum(counted_skips)
passed <- sum(results$nb) - sum(results$failed)
if (skipped > 0) {
  cat("Skipped tests in the full run:\n")
  print(results[counted_skips, c("file", "test")])
}
cat(sprintf("testthat (NOT_CRAN=true): %d passed, %d failed, %d skipped, in the %d files with skips in CRAN mode\n",
            passed, failed, skipped, length(unique(results$file))))
if (unavailable) {
  cat("Slurm cluster test: NOT RUN. Slurm cannot be set up here:", sub("^unavailable: ", "", slurm), "\n")
} else {
  slurm <- if (slurm == "ran" && any(cluster) && sum(results$failed[cluster]) == 0 &&
               !any(results$error[cluster]) && !any(results$skipped[cluster])) "passed" else "failed"
  cat(sprintf("Slurm cluster test: %s (%d tests in test-cluster.R, %.0f s)\n",
              toupper(slurm), sum(cluster), sum(results$real[cluster])))
}
if (real_absent) {
  cat("Real data test: NOT RUN. No real data at WISPACK_SHARED_DATA =",
      Sys.getenv("WISPACK_SHARED_DATA"), "\n")
} else {
  cat(sprintf("Real data test: %s (%d tests in test-real-data.R, %.0f s)\n",
              if (any(real) && sum(results$failed[real]) == 0 && !any(results$error[real]))
                "PASSED" else "FAILED", sum(real), sum(results$real[real])))
}
writeLines(slurm, status_file)
if (failed > 0 || skipped > 0) quit(status = 1)
'

# The documentation site, built from the package R CMD check installed (the
# articles reuse the vignettes R CMD build rendered: tools/site.R) and
# checked in headless Chromium (tools/check-site.py, its self-test first):
# no missing image or file, broken internal link or anchor, JavaScript
# error or remote resource. Both run without network where the namespace
# can be made. About a minute.
section "documentation site ${offline:+(without network)}"
run_offline python3 "$repo/tools/check-site.py" --self-test || exit 1
run_offline env R_LIBS="$work/wispack.Rcheck" HOME="$work/empty-home" \
  sh "$repo/tools/site.sh" "$work/site" || exit 1
# The screenshots are kept (the directory is printed): WISPACK_SITE_SCREENSHOTS
# or a new temporary directory.
screenshots=${WISPACK_SITE_SCREENSHOTS:-$(mktemp -d "${TMPDIR:-/tmp}/wispack-site-shots.XXXXXX")}
run_offline python3 "$repo/tools/check-site.py" "$work/site" --screenshots "$screenshots" || exit 1

section "done"
if [ -n "$unchecked" ]; then
  echo "All tests passed, but the crate was NOT type-checked for:$unchecked (see above)."
else
  echo "All tests passed."
fi
