#!/bin/sh
# Installs what building, checking and testing wispack needs on Debian 12:
# R and the R packages (all from Debian apt, since CRAN is not needed),
# pandoc, qpdf and checkbashisms for R CMD check --as-cran, python3 for
# tools/check-module-cycles.py, and for the documentation site pkgdown, the
# scripts and fonts its pages load (MathJax, clipboard.js, Font Awesome;
# tools/site.sh) and Chromium with Selenium (tools/check-site.py). Idempotent, and
# quick when everything is already there. Rust (cargo, rustc >= 1.85, with
# rustfmt and clippy) must be installed already, e.g. with rustup.
# Sourced by tools/main.sh and tools/test.sh; it also puts cargo on the PATH.
# wispack_setup_benchmarks (separate, not run by wispack_setup) installs the
# peers that benchmarks/peers.R compares wispack with; they are benchmark
# dependencies only, not in DESCRIPTION.

wispack_apt_packages="r-base-dev r-cran-testthat r-cran-knitr r-cran-rmarkdown
  r-cran-roxygen2 r-cran-jsonlite r-cran-future r-cran-future.apply
  r-cran-progressr r-cran-future.batchtools r-cran-ggplot2 r-cran-patchwork r-cran-statmod r-cran-vdiffr r-bioc-singlecellexperiment r-cran-seuratobject pandoc qpdf pngquant devscripts xz-utils
  util-linux iproute2 python3
  r-cran-pkgdown r-cran-fontawesome r-cran-xml2 libjs-mathjax node-clipboard
  chromium chromium-driver python3-selenium"

# The peers of benchmarks/peers.R (mgcv comes with r-base-dev's recommended
# packages): DESeq2 for pseudobulk, glmmTMB for a spline GLMM.
wispack_benchmark_apt_packages="r-bioc-deseq2 r-cran-glmmtmb"

# Installs the Debian packages among $1 that are missing.
wispack_apt_install() {
  missing=""
  for package in $1; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
      missing="$missing $package"
    fi
  done
  if [ -n "$missing" ]; then
    echo "== Installing from Debian:$missing"
    as_root=""
    [ "$(id -u)" -eq 0 ] || as_root="sudo"
    $as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y -qq --no-install-recommends $missing
  fi
}

wispack_setup() {
  wispack_apt_install "$wispack_apt_packages"

  # rustup installs into ~/.cargo/bin; keep the toolchain reachable even if
  # HOME is changed later (the check runs with an empty HOME).
  PATH="$PATH:$HOME/.cargo/bin"
  export PATH
  if [ -d "$HOME/.rustup" ] && [ -z "${RUSTUP_HOME:-}" ]; then
    RUSTUP_HOME="$HOME/.rustup"
    export RUSTUP_HOME
  fi
  if ! command -v cargo >/dev/null 2>&1; then
    echo "cargo was not found: install Rust >= 1.85 first (https://rustup.rs)." >&2
    return 1
  fi
  echo "== $(cargo --version); $(rustc --version); $(R --version | head -n 1)"
}

# The benchmark-only peers; run it before benchmarks/peers.R:
#   . tools/setup.sh && wispack_setup_benchmarks
wispack_setup_benchmarks() {
  wispack_apt_install "$wispack_benchmark_apt_packages"
}
