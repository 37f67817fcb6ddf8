# Builds the pkgdown site; run by tools/site.sh (which also copies the
# Debian-packaged scripts, styles and fonts into the site's vendor/), not on
# its own. Usage: Rscript tools/site.R REPO DEST [--render]
#
# The code comes from the installed wispack (the first on .libPaths(), e.g.
# R_LIBS=wispack.Rcheck): pkgdown runs with devel = FALSE and install =
# FALSE, so nothing is compiled. The pages come from a staged copy of the
# sources pkgdown reads (DESCRIPTION, NAMESPACE, man/, README.md, NEWS.md,
# inst/CITATION, _pkgdown.yml, pkgdown/, vignettes/) in a temporary
# directory, so the working tree is never written to.
#
# Articles: knitting the vignettes is most of the time of a site build (about
# two minutes here). R CMD build has already knitted them with the same
# code, and the installed package keeps the result (doc/NAME.html) beside the
# source it was made from (doc/NAME.Rmd). Where that source is the same as
# vignettes/NAME.Rmd, the staged NAME.Rmd is the vignette's YAML header over
# the body of doc/NAME.html as one raw HTML block: pkgdown renders it in its
# own page (navbar, table of contents, code linked to the reference by
# downlit) without running any R code. Where the installed package has no
# such copy (an install from the source directory), or it differs from the
# working tree, or with --render, the vignette is knitted afresh.
# The reference pages are built without running their examples: R CMD check
# runs them.

args <- commandArgs(trailingOnly = TRUE)
render_all <- "--render" %in% args
args <- setdiff(args, "--render")
if (length(args) != 2L) {
  stop("usage: Rscript tools/site.R REPO DEST [--render]", call. = FALSE)
}
repo <- normalizePath(args[[1]], mustWork = TRUE)
dest <- args[[2]]
dir.create(dest, recursive = TRUE, showWarnings = FALSE)
dest <- normalizePath(dest, mustWork = TRUE)

installed <- find.package("wispack", quiet = TRUE)
if (length(installed) == 0L) {
  stop("wispack is not installed on .libPaths() (", paste(.libPaths(), collapse = ", "),
       "): install it, or point R_LIBS at a library that has it.", call. = FALSE)
}
cat("Using the installed wispack", as.character(packageVersion("wispack")),
    "at", installed, "\n")

stage <- file.path(tempfile("wispack-site-"), "wispack")
dir.create(stage, recursive = TRUE)
on.exit(unlink(dirname(stage), recursive = TRUE), add = TRUE)
for (entry in c("DESCRIPTION", "NAMESPACE", "README.md", "NEWS.md", "_pkgdown.yml",
                "man", "pkgdown", "vignettes")) {
  from <- file.path(repo, entry)
  if (file.exists(from)) file.copy(from, stage, recursive = TRUE)
}
if (file.exists(file.path(repo, "inst", "CITATION"))) {
  dir.create(file.path(stage, "inst"))
  invisible(file.copy(file.path(repo, "inst", "CITATION"), file.path(stage, "inst")))
}

# The body of a vignette as R CMD build rendered it (rmarkdown's
# html_vignette), without what pkgdown's page gives itself: the title block,
# the table of contents, scripts and styles. Backticks are written as an
# entity, so that neither knitr (inline `r` code, chunk fences) nor pandoc
# (the end of the raw block) can read anything in it.
vignette_body <- function(html_file) {
  doc <- xml2::read_html(html_file)
  body <- xml2::xml_find_first(doc, "//body")
  xml2::xml_remove(xml2::xml_find_all(body, paste(
    "./h1[contains(@class, 'title')]",
    "./h3[contains(@class, 'subtitle')]",
    "./h4[contains(@class, 'author') or contains(@class, 'date')]",
    "./div[@id = 'TOC']", ".//script", ".//style", sep = " | ")))
  html <- paste(vapply(xml2::xml_children(body), as.character, ""), collapse = "\n")
  gsub("`", "&#96;", html, fixed = TRUE)
}

front_matter <- function(rmd_lines) {
  fences <- which(rmd_lines == "---")
  if (length(fences) < 2L || fences[[1]] != 1L) {
    stop("no YAML header in a vignette", call. = FALSE)
  }
  rmd_lines[seq_len(fences[[2]])]
}

doc_dir <- file.path(installed, "doc")
reused <- character()
knitted <- character()
for (rmd in list.files(file.path(stage, "vignettes"), pattern = "\\.Rmd$", full.names = TRUE)) {
  name <- sub("\\.Rmd$", "", basename(rmd))
  built_rmd <- file.path(doc_dir, paste0(name, ".Rmd"))
  built_html <- file.path(doc_dir, paste0(name, ".html"))
  source_lines <- readLines(rmd, warn = FALSE, encoding = "UTF-8")
  why <- if (render_all) {
    "--render"
  } else if (!file.exists(built_html) || !file.exists(built_rmd)) {
    "the installed package has no rendered copy"
  } else if (!identical(readLines(built_rmd, warn = FALSE, encoding = "UTF-8"), source_lines)) {
    "vignettes/ differs from the installed copy"
  } else {
    ""
  }
  if (nzchar(why)) {
    cat(sprintf("Article %s: knitted afresh (%s)\n", name, why))
    knitted <- c(knitted, name)
    next
  }
  lines <- c(front_matter(source_lines), "",
             paste0("<!-- The body of doc/", name, ".html of the installed package (tools/site.R). -->"),
             "", "```{=html}", vignette_body(built_html), "```", "")
  writeLines(enc2utf8(lines), rmd, useBytes = TRUE)
  reused <- c(reused, name)
}
if (length(reused) > 0L) {
  cat("Articles from the installed package's rendered vignettes:",
      paste(reused, collapse = ", "), "\n")
}

options(pkgdown.internet = FALSE)  # no "View on CRAN" look-up: builds offline
pkgdown::build_site(stage, examples = FALSE, devel = FALSE, new_process = FALSE,
                    install = FALSE, preview = FALSE,
                    override = list(destination = dest))

# pkgdown 2.0.7 writes the logo's <img> with an empty src into every page
# header when the package has no logo (its data holds list(src = NULL),
# which the templates take as a logo): an image that cannot load, which
# tools/check-site.py rightly reports. It is taken out.
for (page in list.files(dest, pattern = "\\.html$", recursive = TRUE, full.names = TRUE)) {
  html <- readLines(page, warn = FALSE, encoding = "UTF-8")
  fixed <- gsub('<img src="" class="logo" alt="">', "", html, fixed = TRUE)
  if (!identical(fixed, html)) writeLines(fixed, page, useBytes = TRUE)
}
invisible()
