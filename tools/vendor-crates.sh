#!/usr/bin/env sh
# Developer-time helper (not part of the built package). Re-run after every
# change to src/rust/Cargo.toml or Cargo.lock:
#   sh tools/vendor-crates.sh
# Writes src/rust/vendor.tar.xz byte-identically for the same Cargo.lock, and
# inst/AUTHORS (authors and licences of every vendored crate).
set -eu
cd "$(dirname "$0")/../src/rust"
[ -f Cargo.lock ] || cargo generate-lockfile
rm -rf vendor
cargo vendor --locked --versioned-dirs vendor > /dev/null
# Reproducible archive: fixed member order, times and owners; xz without threads.
tar --sort=name --mtime='1970-01-01 00:00Z' --owner=0 --group=0 --numeric-owner \
    --no-xattrs --format=gnu -cf - vendor | xz -T1 -6 -c > vendor.tar.xz
sha256sum vendor.tar.xz
cargo metadata --format-version 1 --locked --offline \
    --config 'source.crates-io.replace-with="vendored-sources"' \
    --config 'source.vendored-sources.directory="vendor"' > ../../metadata.json.tmp
rm -rf vendor
cd ../..
Rscript -e '
meta <- jsonlite::fromJSON("metadata.json.tmp", simplifyVector = FALSE)
crates <- Filter(function(p) p$id != meta$resolve$root, meta$packages)
crates <- crates[order(vapply(crates, function(p) p$name, ""), vapply(crates, function(p) p$version, ""))]
describe <- function(p) {
  authors <- unlist(p$authors)
  authors <- if (length(authors)) gsub("\\s*<[^>]*>", "", authors) else paste("the", p$name, "developers")
  sprintf("%s %s\n  Authors: %s\n  License: %s\n  Repository: %s\n", p$name, p$version,
          paste(authors, collapse = ", "),
          if (is.null(p$license)) "see the crate" else p$license,
          if (is.null(p$repository)) "unknown" else p$repository)
}
dir.create("inst", showWarnings = FALSE)
writeLines(c("wispack bundles the following Rust crates in src/rust/vendor.tar.xz.",
             "Their authors and licences are listed below.", "",
             vapply(crates, describe, "")), "inst/AUTHORS")
cat("inst/AUTHORS:", length(crates), "crates\n")'
rm -f metadata.json.tmp
