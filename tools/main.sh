#!/bin/sh
# Sets everything up and runs the package's main job: installs wispack
# (offline, from the vendored crates) into ./.wispack-lib and runs
# tools/main.R. Usage: sh tools/main.sh
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
. "$repo/tools/setup.sh"
wispack_setup
library="$repo/.wispack-lib"
mkdir -p "$library"
echo "== Installing wispack into $library"
R CMD INSTALL --library="$library" "$repo" > "$library/install.log" 2>&1 ||
  { tail -n 40 "$library/install.log" >&2; exit 1; }
R_LIBS="$library" Rscript "$repo/tools/main.R"
