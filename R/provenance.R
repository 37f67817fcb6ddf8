# Which wispack made a fit or a bootstrap: recorded in every "wisp" object
# (`fit$provenance`, both likelihoods) and "wisp_bootstrap" object
# (`boot$provenance`), and shown in the footer of summary().

#' The provenance of an object made now
#'
#' @return A list: `package` ("wispack"), `version` (the installed version,
#'   as `packageVersion("wispack")`), `commit` (the git commit the
#'   installed package was built from, see wisp_build_commit()), `r`
#'   (`R.version.string`) and `created` (`Sys.time()`).
#' @keywords internal
#' @noRd
wisp_provenance <- function() {
  list(package = "wispack", version = as.character(utils::packageVersion("wispack")),
       commit = wisp_build_commit(), r = R.version.string, created = Sys.time())
}

#' The git commit the installed package was built from
#'
#' `tools/commit.R` (run by `configure` and by `cleanup`, so by `R CMD
#' INSTALL` from a git checkout and by `R CMD build` of one) writes the
#' commit to `inst/COMMIT`, which the tarball and the installed package
#' carry; with `-dirty` when tracked files differed from it. Without the
#' file (a package installed from a tarball not built from a checkout):
#' "unknown".
#' @keywords internal
#' @noRd
wisp_build_commit <- function() {
  file <- system.file("COMMIT", package = "wispack")
  if (!nzchar(file)) return("unknown")
  line <- tryCatch(readLines(file, n = 1L, warn = FALSE), error = function(e) character())
  if (length(line) == 1L && grepl("^[0-9a-f]{40}(-dirty)?$", line)) line else "unknown"
}

# One line naming the package, version and (short) commit of a provenance
# record, "wispack 0.1.0 (commit abc1234)"; NULL without one (fits made
# before wispack recorded it).
provenance_line <- function(provenance) {
  if (!is.list(provenance) || is.null(provenance$version)) return(NULL)
  commit <- if (is.character(provenance$commit) && length(provenance$commit) == 1L) {
    provenance$commit
  } else "unknown"
  short <- if (grepl("^[0-9a-f]{40}", commit)) {
    paste0(substr(commit, 1L, 7L), if (grepl("-dirty$", commit)) "-dirty" else "")
  } else commit
  sprintf("%s %s (commit %s)", if (is.null(provenance$package)) "wispack" else provenance$package,
          provenance$version, short)
}
