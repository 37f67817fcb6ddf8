# Writes the git commit of the checkout being built to inst/COMMIT, which
# the installed package reads (wisp_build_commit() in R/provenance.R) to
# record in every fit. Run from the package's root by tools/config.R
# (configure, configure.win: R CMD INSTALL) and by cleanup (R CMD build,
# which runs it in its copy of the checkout before it drops .git). Outside
# a git checkout of this package (a tarball), or without git, it leaves
# inst/COMMIT as it is: a tarball built from a checkout carries the file,
# one that was not has none ("unknown"). The file is generated: .gitignore
# keeps it out of the repository.

git <- Sys.which("git")
tracked <- nzchar(git) && suppressWarnings(system2(
  git, c("ls-files", "--error-unmatch", "DESCRIPTION"), stdout = FALSE, stderr = FALSE)) == 0L
if (tracked) {
  commit <- suppressWarnings(system2(git, c("rev-parse", "HEAD"), stdout = TRUE, stderr = FALSE))
  if (length(commit) == 1L && grepl("^[0-9a-f]{40}$", commit)) {
    # Tracked files that differ from the commit (git diff refreshes the
    # index in memory, so a copy's new timestamps alone are not a change).
    clean <- suppressWarnings(system2(git, c("--no-optional-locks", "diff", "--quiet", "HEAD", "--"),
                                      stdout = FALSE, stderr = FALSE)) == 0L
    dir.create("inst", showWarnings = FALSE)
    writeLines(paste0(commit, if (!clean) "-dirty"), file.path("inst", "COMMIT"))
  }
}
