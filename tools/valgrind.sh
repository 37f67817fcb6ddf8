#!/bin/sh
# Memory checking with valgrind memcheck (slow; separate from tools/test.sh).
#   sh tools/valgrind.sh cargo       # every cargo test binary (~30 min)
#   sh tools/valgrind.sh r [FILTER]  # the testthat suite, or the files matching
#                                    # FILTER, under R -d valgrind (~1 h of one
#                                    # core; README shows a two-shard split)
# Needs valgrind (apt-get install valgrind); R mode also needs the packages of
# tools/setup.sh. Exits non-zero on any memcheck error in package code.
#
# Forked children stay under valgrind (fork does not exec, so they are checked
# too; --trace-children only concerns exec). Children end with _exit, so their
# heap is still in use at exit: only definite leaks are reported and counted.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
# The tests need the test hooks (fault injection, synthetic engine tasks).
WISPACK_TEST_HOOKS=true
export WISPACK_TEST_HOOKS
what=${1:-cargo}
memcheck="--tool=memcheck --track-origins=yes --num-callers=40"
leaks="--leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite"

case "$what" in
cargo)
  cd "$repo/src/rust"
  cargo test --locked --no-run -j 2 --features test-hooks 2>&1 | tee /tmp/wispack-valgrind-build.log
  binaries=$(sed -n 's/.*Executable .* (\(.*\))$/\1/p' /tmp/wispack-valgrind-build.log)
  logdir=$(mktemp -d)
  tests_failed=0
  for binary in $binaries; do
    echo "== valgrind $binary"
    # Every error counts here, leaks included: the binaries are ours.
    WISPACK_UNDER_VALGRIND=true valgrind $memcheck $leaks \
      --log-file="$logdir/memcheck.%p" "$binary" --test-threads=1 || tests_failed=1
  done
  # Each process, forked children included, writes its own log and summary.
  # Workers killed by SIGKILL (injected faults, timeouts) end before valgrind
  # can write a summary; they are counted apart.
  processes=$(ls "$logdir" | wc -l)
  summaries=$(grep -l "ERROR SUMMARY" "$logdir"/memcheck.* | wc -l)
  dirty=$(grep -h "ERROR SUMMARY" "$logdir"/memcheck.* | grep -vc "ERROR SUMMARY: 0 errors" || true)
  echo "== memcheck logs: $logdir: $processes processes, $summaries with a summary" \
    "($((processes - summaries)) killed before it), $dirty with errors"
  grep -l "ERROR SUMMARY: [1-9]" "$logdir"/memcheck.* || true
  if [ "$dirty" != 0 ]; then
    echo "== memcheck found errors in the logs listed above" >&2
    exit 1
  fi
  if [ "$tests_failed" = 1 ]; then
    echo "== no memcheck errors, but tests failed under valgrind" >&2
    exit 1
  fi
  echo "== memcheck: no errors in the cargo test binaries"
  ;;
r)
  filter=${2:-}
  # A release build of this checkout, installed where nothing else looks;
  # WISPACK_VALGRIND_LIB reuses a library that already has it.
  lib=${WISPACK_VALGRIND_LIB:-}
  if [ -z "$lib" ]; then
    lib=$(mktemp -d)
    MAKEFLAGS=-j2 R CMD INSTALL --no-test-load --library="$lib" "$repo"
  fi
  logdir=$(mktemp -d)
  cd "$repo/tests/testthat"
  # Timing expectations cannot hold 20-50 times slower; the tests skip them
  # when WISPACK_UNDER_VALGRIND is set. Every other expectation must pass.
  status=0
  WISPACK_UNDER_VALGRIND=true NOT_CRAN=true R_LIBS="$lib" \
    R -d "valgrind $memcheck $leaks --log-file=$logdir/memcheck.%p" --vanilla -e "
      library(testthat)
      results <- as.data.frame(test_dir('.', package = 'wispack', load_package = 'installed',
        filter = if (nzchar('$filter')) '$filter' else NULL, reporter = 'summary',
        stop_on_failure = FALSE))
      cat(sprintf('\n%d expectations, %d failed, %d errors, %d skipped\n', sum(results\$nb),
        sum(results\$failed), sum(results\$error), sum(results\$skipped)))
      if (sum(results\$failed) + sum(results\$error) > 0) quit(status = 1)
    " || status=$?
  echo "== memcheck logs: $logdir ($(ls "$logdir" | wc -l) processes)"
  # R itself is checked too; an error or definite leak counts as the
  # package's when any frame of its stack is in wispack.so.
  awk '
    function close_record() {
      if (is_error && in_package) { print header " [" file "]"; found++ }
      is_error = 0; in_package = 0
    }
    FNR == 1 { close_record() }
    /^==[0-9]+== [^ ]/ {
      close_record(); header = $0; file = FILENAME
      is_error = ($0 ~ /Invalid|uninitialised|Mismatched|overlap|definitely lost|Syscall param|Argument/)
      next
    }
    /^==[0-9]+==    (at|by) / { if ($0 ~ /wispack/) in_package = 1; next }
    /^==[0-9]+== *$/ { close_record() }
    END { close_record(); printf "== memcheck records in package code: %d\n", found; exit(found > 0) }
  ' "$logdir"/memcheck.* || status=1
  printf "== error summaries: "
  grep -h "ERROR SUMMARY" "$logdir"/memcheck.* | sed 's/^==[0-9]*== //' | sort | uniq -c |
    tr '\n' ';'
  echo
  exit "$status"
  ;;
*)
  echo "usage: sh tools/valgrind.sh cargo | r [FILTER]" >&2
  exit 2
  ;;
esac
