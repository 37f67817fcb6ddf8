#!/bin/sh
# One command for the fork-per-batch vs mclapply benchmark: every arm, both
# regimes, the memory floor curve and the fork cost against parent size, then
# rewrites the generated sections of benchmarks/fork_vs_mclapply.md and
# benchmarks/fork_overhead.md and the small CSVs
# the vignette reads (vignettes/fork-per-batch/).
#
# Usage, from anywhere, with wispack installed (R_LIBS pointing at it) with
# its test hooks, which the fork-cost stage uses (engine_selftest()):
#   WISPACK_TEST_HOOKS=true R CMD INSTALL --library=LIB .
#   sh benchmarks/run_all.sh [WORKERS]          # WORKERS defaults to 2
# Settings (environment variables, defaults in brackets):
#   REPEATS [3]            repeats of every arm; arm order rotates per repeat
#   SMALL_FITS [1,2,5,10]  fits per long-lived worker, small regime (B = WORKERS x FITS)
#   LARGE_FITS [1,2]       the same for the large regime
#   FLOOR_SMALL [20] FLOOR_LARGE [5]   fits in the memory floor curve
#   OVERHEAD_GB [1,4]      parent sizes for the fork-cost stage
#   OVERHEAD_TASKS [40] OVERHEAD_REPEATS [5]   tasks per timing and repeats there
#   SESSION_GB [4]         size of the large session of the "session" stage
#   STAGES ["machine small large floor overhead small1 report"]; also
#                          "session": benchmarks/large_session.R, the fork
#                          backend's defaults against mclapply from a lean and
#                          a SESSION_GB session (about 15 minutes)
#   FRESH [1]              1: move the previous result CSVs to *.prev first;
#                          0: append (to run the benchmark in stages)
# About 40 minutes on a 2-core machine with the defaults.
set -eu
cd "$(dirname "$0")/.."
WORKERS=${1:-2}
REPEATS=${REPEATS:-3}
SMALL_FITS=${SMALL_FITS:-1,2,5,10}
LARGE_FITS=${LARGE_FITS:-1,2}
FLOOR_SMALL=${FLOOR_SMALL:-20}
FLOOR_LARGE=${FLOOR_LARGE:-5}
OVERHEAD_GB=${OVERHEAD_GB:-1,4}
OVERHEAD_TASKS=${OVERHEAD_TASKS:-40}
OVERHEAD_REPEATS=${OVERHEAD_REPEATS:-5}
SESSION_GB=${SESSION_GB:-4}
STAGES=${STAGES:-machine small large floor overhead small1 report}
FRESH=${FRESH:-1}
R="Rscript benchmarks/fork_vs_mclapply.R"
IN_PROCESS=fork_rolling,fork_batch,fork_tpc5,mc_pre,mc_nopre,mc_chunked,mc_trim
RESULTS=benchmarks/results

if [ "$FRESH" = 1 ]; then
  for f in fork_vs_mclapply.csv fork_vs_mclapply_traces.csv memory_floor.csv; do
    if [ -f "$RESULTS/$f" ]; then mv "$RESULTS/$f" "$RESULTS/$f.prev"; fi
  done
fi
stamp() { echo "== $(date '+%H:%M:%S') $*"; }
for stage in $STAGES; do
  case $stage in
    machine) stamp machine; $R machine ;;
    # every arm, MALLOC_ARENA_MAX included, with WORKERS workers
    small) stamp "small regime, $WORKERS workers"; $R run small "$WORKERS" "$SMALL_FITS" "$REPEATS" all ;;
    # one worker (mclapply then runs in the parent: no fork at all)
    small1) stamp "small regime, 1 worker"; $R run small 1 "$SMALL_FITS" "$REPEATS" "$IN_PROCESS" ;;
    floor) stamp "memory floor"
           Rscript benchmarks/memory_floor.R small "$FLOOR_SMALL" 2
           Rscript benchmarks/memory_floor.R large "$FLOOR_LARGE" 1 ;;
    large) stamp "large regime, $WORKERS workers"; $R run large "$WORKERS" "$LARGE_FITS" "$REPEATS" "$IN_PROCESS" ;;
    overhead) stamp "fork cost against parent size"
              Rscript benchmarks/fork_overhead.R "$OVERHEAD_TASKS" "$OVERHEAD_REPEATS" "$WORKERS" "$OVERHEAD_GB" ;;
    session) stamp "lean and $SESSION_GB GB sessions"
             Rscript benchmarks/large_session.R 0 small,large "$WORKERS" 10,2 "$REPEATS"
             Rscript benchmarks/large_session.R "$SESSION_GB" small,large "$WORKERS" 10,2 "$REPEATS"
             Rscript benchmarks/large_session.R report ;;
    report) stamp report; $R report ;;
    *) echo "unknown stage $stage" >&2; exit 2 ;;
  esac
done
stamp done
