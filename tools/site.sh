#!/bin/sh
# Builds the documentation site (pkgdown 2.0.7, Debian's r-cran-pkgdown) into
# DEST (default: docs/ in the repository, which git and R CMD build ignore)
# from the installed wispack: the first on R's library path, so point
# R_LIBS at the library to use, e.g.
#   R_LIBS=.wispack-lib sh tools/site.sh            # after sh tools/main.sh
#   R_LIBS=/tmp/lib sh tools/site.sh /tmp/site --render
# Articles reuse the vignettes R CMD build rendered, where the installed
# package has them and they match vignettes/ (tools/site.R says which);
# --render knits every vignette afresh (about two minutes more). The site
# needs no network, to build or to view: pkgdown's CDN scripts, styles and
# fonts are replaced (pkgdown/templates/head.html) by copies in DEST/vendor/,
# taken here from Debian packages (tools/setup.sh installs them) or from
# pkgdown/assets/vendor/ (small files no Debian package has). Open
# DEST/index.html; tools/check-site.py checks the result in a browser.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
render=""
dest=""
for arg in "$@"; do
  case "$arg" in
    --render) render="--render" ;;
    -*) echo "usage: sh tools/site.sh [--render] [DEST]" >&2; exit 2 ;;
    *) dest="$arg" ;;
  esac
done
dest=${dest:-$repo/docs}

# A directory that is neither empty nor an earlier site is not replaced.
if [ -d "$dest" ] && [ -n "$(ls -A "$dest")" ] && [ ! -f "$dest/pkgdown.yml" ]; then
  echo "$dest exists and is not a pkgdown site: give another directory" >&2
  exit 1
fi
rm -rf "$dest"
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)

# The Debian files the head template links, checked before the slow part.
mathjax=/usr/share/javascript/mathjax
clipboard=/usr/share/javascript/clipboard/clipboard.js
fontawesome=$(Rscript -e 'cat(system.file("fontawesome", package = "fontawesome"))')
for need in "$mathjax/MathJax.js:libjs-mathjax" "$clipboard:node-clipboard" \
            "$fontawesome/css/all.min.css:r-cran-fontawesome"; do
  if [ ! -f "${need%:*}" ]; then
    echo "${need%:*} is missing: install the Debian package ${need##*:}" \
      "(. tools/setup.sh; wispack_setup)" >&2
    exit 1
  fi
done

Rscript "$repo/tools/site.R" "$repo" "$dest" $render

# pkgdown has copied pkgdown/assets/vendor/ (toc, headroom, search); now the
# Debian-packaged parts. MathJax: the TeX-AMS_CHTML configuration (the
# CommonHTML output; the HTML-CSS one loads a font from about:blank, which
# Chromium reports as an error), the inputs, the outputs its menu offers and
# the TeX web fonts: about 8 MB of the package's 54 MB.
vendor="$dest/vendor"
mkdir -p "$vendor/clipboard" "$vendor/fontawesome" "$vendor/mathjax/config" \
  "$vendor/mathjax/jax/output" "$vendor/mathjax/fonts/HTML-CSS/TeX"
cp "$clipboard" "$vendor/clipboard/"
cp -R "$fontawesome/css" "$fontawesome/webfonts" "$vendor/fontawesome/"
cp "$mathjax/MathJax.js" "$vendor/mathjax/"
cp "$mathjax/config/TeX-AMS_CHTML.js" "$vendor/mathjax/config/"
cp -R "$mathjax/extensions" "$vendor/mathjax/"
cp -R "$mathjax/jax/input" "$mathjax/jax/element" "$vendor/mathjax/jax/"
for output in HTML-CSS CommonHTML PreviewHTML NativeMML; do
  cp -R "$mathjax/jax/output/$output" "$vendor/mathjax/jax/output/"
done
for format in woff otf; do
  cp -R "$mathjax/fonts/HTML-CSS/TeX/$format" "$vendor/mathjax/fonts/HTML-CSS/TeX/"
done
echo "Site written to $dest (open $dest/index.html)"
