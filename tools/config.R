# Run by ./configure (./configure.win on Windows): checks the Rust toolchain
# and writes src/Makevars from src/Makevars.in (src/Makevars.win from
# src/Makevars.win.in on Windows, which builds for the GNU target
# x86_64-pc-windows-gnu with Rtools).
#
# Placeholders in src/Makevars.in and src/Makevars.win.in:
#   @CARGO_FLAGS@  "-j 2 --offline" when building from the vendored crates
#   @VENDORED@     "yes" when src/rust/vendor.tar.xz is there, else "no"
#   @PROFILE@      "--release", or empty for DEBUG=true builds
#   @LIBDIR@       the cargo output directory, "release" or "debug"
#   @CLEAN_TARGET@ the target directory to delete after linking (kept for DEBUG builds)
#   @FEATURES@     "--features test-hooks" when WISPACK_TEST_HOOKS=true, else empty
#   @EXPORTS@      on Linux (GNU ld), link flags that export R_init_wispack only
#                  (src/wispack-exports.map) and drop the code nothing reaches:
#                  the library shrinks from ~4.1 to ~2.5 MB. R finds the .Call
#                  routines through their registration, not by symbol.
#
# WISPACK_TEST_HOOKS=true compiles the entry points that only tests and
# benchmarks use (fault injection, synthetic engine tasks, timing loops).
# tools/test.sh sets it; a default install leaves them out.

is_windows <- .Platform$OS.type == "windows"

find_tool <- function(tool) {
  # rustup installs into ~/.cargo/bin, which R CMD INSTALL does not always
  # have on PATH (src/Makevars adds it). On Windows, rustup puts its
  # directory on the PATH itself, and src/Makevars.win relies on that.
  path <- Sys.which(tool)
  if (!nzchar(path) && !is_windows) {
    candidate <- file.path(Sys.getenv("HOME"), ".cargo", "bin", tool)
    if (file.exists(candidate)) path <- candidate
  }
  if (!nzchar(path)) {
    stop(paste(
      sprintf("'%s' was not found on the PATH.", tool),
      "wispack needs the Rust toolchain (rustc and cargo) to build.",
      "Install it from https://rustup.rs or with your system's package manager",
      "(Debian 12: the 'rustc-web' and 'cargo-web' packages), then try again.",
      sep = "\n"
    ), call. = FALSE)
  }
  unname(path)
}

version_of <- function(path) {
  out <- system2(path, "--version", stdout = TRUE)
  list(text = out[1], number = regmatches(out[1], regexpr("[0-9]+\\.[0-9]+(\\.[0-9]+)?", out[1])))
}

sysreqs <- read.dcf("DESCRIPTION", fields = "SystemRequirements")[1, 1]
minimum_rustc <- sub(".*rustc >= ([0-9.]+).*", "\\1", sysreqs)

cargo <- version_of(find_tool("cargo"))
rustc <- version_of(find_tool("rustc"))
message("Using ", cargo$text)
message("Using ", rustc$text)
if (utils::compareVersion(rustc$number, minimum_rustc) < 0) {
  stop(sprintf("wispack needs rustc >= %s; found %s. Update Rust (e.g. `rustup update`).",
               minimum_rustc, rustc$number), call. = FALSE)
}

if (is_windows) {
  # R's toolchain on Windows (Rtools) links the GNU target; rustup installs
  # the MSVC one by default.
  sysroot <- system2(find_tool("rustc"), c("--print", "sysroot"), stdout = TRUE)[1]
  if (!dir.exists(file.path(sysroot, "lib", "rustlib", "x86_64-pc-windows-gnu"))) {
    stop(paste(
      "wispack builds for the Rust target x86_64-pc-windows-gnu, which is not installed.",
      "Install it with `rustup target add x86_64-pc-windows-gnu`, then try again.",
      sep = "\n"
    ), call. = FALSE)
  }
}

is_debug <- nzchar(Sys.getenv("DEBUG"))
# The vendored crates are always used when present, so an install never needs
# the network; a checkout without the tarball fetches crates with cargo.
offline <- file.exists("src/rust/vendor.tar.xz")
if (offline) message("Building offline from the vendored crates (src/rust/vendor.tar.xz).")
if (is_debug) message("Creating a DEBUG build.")
test_hooks <- tolower(Sys.getenv("WISPACK_TEST_HOOKS")) %in% c("true", "yes", "1")
if (test_hooks) message("Building with the test hooks (WISPACK_TEST_HOOKS=true).")

replacements <- c(
  "@CARGO_FLAGS@" = if (offline) "-j 2 --offline" else "-j 2",
  "@VENDORED@" = if (offline) "yes" else "no",
  "@PROFILE@" = if (is_debug) "" else "--release",
  "@LIBDIR@" = if (is_debug) "debug" else "release",
  "@CLEAN_TARGET@" = if (is_debug) "" else "$(TARGET_DIR)",
  "@FEATURES@" = if (test_hooks) "--features test-hooks" else "",
  "@EXPORTS@" = if (Sys.info()[["sysname"]] == "Linux")
    "-Wl,--version-script=wispack-exports.map -Wl,--gc-sections" else ""
)
makevars <- if (is_windows) "src/Makevars.win" else "src/Makevars"
text <- readLines(paste0(makevars, ".in"))
for (key in names(replacements)) text <- gsub(key, replacements[[key]], text, fixed = TRUE)
con <- file(makevars, open = "wb")
writeLines(text, con, sep = "\n")
close(con)
message("Wrote ", makevars, ".")

# The git commit of a checkout, for the provenance of fits (inst/COMMIT).
source(file.path("tools", "commit.R"), local = new.env())
