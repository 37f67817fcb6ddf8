# The package's main job: fit the bundled example data, print the fixed
# effects with their Wald statistics against the simulated truth, bootstrap
# the fit on the fork engine and write the rate-count plot.
library(wispack)
options(width = 160)

cat("wispack", format(utils::packageVersion("wispack")), "\n\n")
cat("Example data: ", nrow(wisp_example), " tokens of ",
    length(unique(wisp_example$species)), " genes, ",
    length(unique(wisp_example$ran)), " mice, hemisphere x age.\n\n", sep = "")

workers <- min(2L, parallel::detectCores())
# The count likelihood's fit reports its statistics (no bootstrap needed): Wald
# tests, with profile likelihood for the transition points that need it.
fit <- wisp(wisp_example, max.fork = workers)
cat("\n")
print(summary(fit))

truth <- attr(wisp_example, "truth")
effects <- fit$stats$parameters
effects <- effects[match(names(truth$effects), effects$parameter), ]
cat("\nTrue rate effects against the estimates (Wald 95 % intervals):\n")
rate <- fit$parameters$component[match(effects$parameter, fit$parameters$name)] == "Rt"
print(data.frame(parameter = effects$parameter[rate], truth = unname(truth$effects[rate]),
                 estimate = round(effects$estimate[rate], 3),
                 CI.low = round(effects$CI.low[rate], 3), CI.high = round(effects$CI.high[rate], 3),
                 significance = effects$significance[rate]), row.names = FALSE)
covered <- effects$CI.low <= truth$effects & truth$effects <= effects$CI.high
cat(sprintf("\n%d of %d true effects lie inside their 95 %% intervals.\n", sum(covered, na.rm = TRUE),
            sum(!is.na(covered))))

# A parametric bootstrap on the fork engine, attached to the fit: percentile
# intervals beside the Wald ones.
boot <- bs_batch(fit, 200, resample = "parametric", max.fork = workers, seed = 1)
print(boot)
booted <- suppressWarnings(wisp_statistics(fit, boot = boot))
compare <- merge(fit$stats$parameters[c("parameter", "CI.low", "CI.high")],
                 booted$stats$parameters[c("parameter", "CI.low", "CI.high")],
                 by = "parameter", suffixes = c(".wald", ".bootstrap"))
cat("\nWald and bootstrap 95 % intervals of the first rate effects:\n")
print(head(compare[grepl("^beta_Rt", compare$parameter), ], 6), row.names = FALSE, digits = 3)

output <- file.path(getwd(), "wisp_example_ratecount.png")
plot <- plot(fit, type = "ratecount")
ggplot2::ggsave(output, plot, width = 10, height = 7, dpi = 100)
cat("\nRate-count plot written to", output, "\n")

# Where to read next: the vignettes, from the library this session loaded
# wispack from (tools/main.sh installs into ./.wispack-lib).
library_path <- dirname(find.package("wispack"))
vignettes <- utils::vignette(package = "wispack")$results
if (nrow(vignettes)) {
  cat("\nRead next, the vignettes of wispack (start with the first):\n")
  first <- order(vignettes[, "Item"] != "wispack")
  calls <- sprintf("vignette(\"%s\", package = \"wispack\")", vignettes[first, "Item"])
  # Titles without the formats vignette() appends, " (source, html)".
  titles <- sub(" \\([^()]*\\)$", "", vignettes[first, "Title"])
  cat(sprintf("  %-*s  %s\n", max(nchar(calls)), calls, titles), sep = "")
  cat("or browseVignettes(\"wispack\") for all of them in a browser.\n")
  if (!library_path %in% normalizePath(.Library, mustWork = FALSE)) {
    cat(sprintf(paste0("wispack is installed in %s: start R with R_LIBS=%s, or run\n",
                       "  .libPaths(c(\"%s\", .libPaths()))\nfirst.\n"),
                library_path, library_path, library_path))
  }
} else {
  cat("\nThis installation of wispack (", library_path, ") has no vignettes: install it ",
      "from a tarball built by R CMD build, as sh tools/main.sh does.\n", sep = "")
}
