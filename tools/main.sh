#!/bin/sh
# Sets everything up and runs the package's main job: builds the source
# tarball with its vignettes (R CMD build, offline, from the vendored crates;
# the build needs knitr, rmarkdown and pandoc, which tools/setup.sh installs),
# installs that tarball into ./.wispack-lib, so that vignette("wispack",
# package = "wispack") and the vignettes the package's messages point to are
# there, and runs tools/main.R. Usage: sh tools/main.sh
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
. "$repo/tools/setup.sh"
wispack_setup
library="$repo/.wispack-lib"
mkdir -p "$library"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "== Building wispack with its vignettes (R CMD build; a few minutes)"
(cd "$work" && R CMD build "$repo") > "$library/build.log" 2>&1 ||
  { tail -n 40 "$library/build.log" >&2; exit 1; }
tarball=$(ls "$work"/wispack_*.tar.gz)
echo "== Installing $(basename "$tarball") into $library"
R CMD INSTALL --library="$library" "$tarball" > "$library/install.log" 2>&1 ||
  { tail -n 40 "$library/install.log" >&2; exit 1; }
R_LIBS="$library" Rscript "$repo/tools/main.R"
