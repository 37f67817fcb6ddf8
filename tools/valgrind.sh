#!/bin/sh
# Memory checking with valgrind memcheck (slow; separate from tools/test.sh).
#   sh tools/valgrind.sh cargo   # the cargo test binaries
#   sh tools/valgrind.sh r [FILTER]
#                                # testthat files matching FILTER (default:
#                                # "reliability|checkpoint|validation") under
#                                # R -d valgrind, against the installed package
# Needs valgrind (apt-get install valgrind). Exits non-zero on any memcheck
# error. Forked children are not followed (--trace-children=no): the parent
# process, where results are decoded and written, is checked.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
what=${1:-cargo}
# The suppression-free, error-exit settings shared by both modes.
memcheck="--tool=memcheck --error-exitcode=42 --trace-children=no --track-origins=yes"

case "$what" in
cargo)
  cd "$repo/src/rust"
  cargo test --locked --no-run -j 2 2>&1 | tee /tmp/wispack-valgrind-build.log
  binaries=$(sed -n 's/.*Executable .* (\(.*\))$/\1/p' /tmp/wispack-valgrind-build.log)
  for binary in $binaries; do
    echo "== valgrind $binary"
    # Rust's std leaks nothing by design; definite leaks are errors.
    valgrind $memcheck --leak-check=full --errors-for-leak-kinds=definite \
      "$binary" --test-threads=1
  done
  ;;
r)
  filter=${2:-reliability|checkpoint|validation}
  cd "$repo/tests/testthat"
  log=$(mktemp)
  # R itself is checked too, so only errors with a package frame (wispack.so)
  # are counted as the package's.
  NOT_CRAN=true R -d "valgrind $memcheck --log-file=$log.%p" --vanilla -e "
    library(testthat)
    results <- as.data.frame(test_dir('.', package = 'wispack', load_package = 'installed',
      filter = '$filter', reporter = 'summary', stop_on_failure = FALSE))
    if (sum(results\$failed) + sum(results\$error) > 0) quit(status = 1)
  " || status=$?
  echo "== memcheck logs: $log.*"
  grep -h "ERROR SUMMARY" "$log".* || true
  if grep -l "wispack" "$log".* | xargs -r grep -l "^==[0-9]*== [A-Z].*\(Invalid\|uninitialised\|Mismatched\)" ; then
    echo "memcheck errors in package code (see the logs above)" >&2
    exit 1
  fi
  exit "${status:-0}"
  ;;
*)
  echo "usage: sh tools/valgrind.sh cargo | r [FILTER]" >&2
  exit 2
  ;;
esac
