# The real-data walk-through (issue #27, item 10): the original's S1
# MERFISH tutorial data (54,116 cells x 6 genes, 4 male mice, two at P12 and
# two at P18, both hemispheres; see ../shared/data/README.md), found through
# WISPACK_SHARED_DATA (default ../shared/data). The data and anything
# derived row by row from them are never committed: this script writes
# figures, a table of estimates and timings, which are fine.
#
#   Rscript benchmarks/real_data.R [bootstraps]   # default 200
#
# What it does, and writes under benchmarks/results/real_data/:
# - bins the lab's form of the data (a sparse genes x cells matrix and a
#   table of cells) with wisp_bin(), and checks that the binned fit equals
#   the fit of the tokens (the original's format);
# - times wisp() with its defaults (median of 3) and records the peak RSS;
# - the transitions chosen per gene, and each gene's fitted peak (reference
#   treatment) against the layer boundaries of S1_layer_boundary_bins.csv
#   and the layer where the marker is known to peak (peaks.csv);
# - the age and hemisphere effects on the rates, Wald intervals beside a
#   parametric bootstrap's percentile intervals (effects.csv);
# - the gene-level tests (gene_tests.csv) and residual diagnostics;
# - figures at paper width: ratecount.png, effects.png, genes.png,
#   residuals_qq.png;
# - copies of the tables and of two figures for vignette("real-data")
#   (vignettes/real-data/).

args <- commandArgs(trailingOnly = TRUE)
bootstraps <- if (length(args)) as.integer(args[1]) else 200L
suppressPackageStartupMessages(library(wispack))
data_dir <- Sys.getenv("WISPACK_SHARED_DATA", file.path("..", "shared", "data"))
path <- file.path(data_dir, "S1_laminar_countdata.csv.gz")
if (!file.exists(path)) {
  cat("Real data walk-through: NOT RUN. No", path, "(set WISPACK_SHARED_DATA).\n")
  quit(save = "no", status = 0)
}
out <- file.path("benchmarks", "results", "real_data")
dir.create(out, recursive = TRUE, showWarnings = FALSE)
source("benchmarks/headlines.R") # with_provenance(), register_headline()
commit <- bench_commit()

tokens <- utils::read.csv(path, stringsAsFactors = FALSE)
context <- if ("context" %in% names(tokens)) "context" else "cortex"
tokens$age <- paste0("P", tokens$age)
cells <- tokens[!duplicated(tokens$cell_num),
                c("cell_num", "bin", context, "mouse", "hemisphere", "age")]
genes <- sort(unique(tokens$gene))
dense <- matrix(0, nrow(cells), length(genes), dimnames = list(as.character(cells$cell_num), genes))
dense[cbind(match(tokens$cell_num, cells$cell_num), match(tokens$gene, genes))] <- tokens$count
counts <- Matrix::Matrix(t(dense), sparse = TRUE)
rm(dense)
bin_seconds <- system.time(
  binned <- wisp_bin(counts, cells, position = "bin", bins = seq(0.5, 100.5, by = 1),
                     cell = "cell_num")
)[["elapsed"]]
variables <- list(ran = "mouse", context = context, fixedeffects = c("hemisphere", "age"))
cat(sprintf("%s tokens; binned table of %s rows in %.2f s\n",
            format(nrow(tokens), big.mark = ","), format(nrow(binned), big.mark = ","),
            bin_seconds))

# The binned fit is the tokens' fit.
from_tokens <- suppressWarnings(wisp(tokens, variables = c(variables, list(species = "gene",
                                                                          cell = "cell_num")),
                                     verbose = FALSE, fit_only = TRUE))
seconds <- numeric(3)
for (r in seq_along(seconds)) {
  seconds[r] <- system.time(fit <- suppressWarnings(
    wisp(binned, variables = variables, verbose = FALSE)))[["elapsed"]]
}
same <- identical(suppressWarnings(wisp(binned, variables = variables, verbose = FALSE,
                                        fit_only = TRUE))$fitted.parameters,
                  from_tokens$fitted.parameters)
peak_rss <- as.numeric(gsub("[^0-9]", "", grep("^VmHWM", readLines("/proc/self/status"),
                                               value = TRUE))) / 1024
cat(sprintf("wisp() with its defaults: median %.2f s (range %.2f-%.2f) of 3; peak RSS %.0f MB; ",
            stats::median(seconds), min(seconds), max(seconds), peak_rss),
    "binned fit identical to the tokens' fit: ", same, "\n", sep = "")

# Transitions and peaks against the layers.
boundaries <- utils::read.csv(file.path(data_dir, "S1_layer_boundary_bins.csv"))
tops <- colMeans(boundaries[, c("V2", "V3", "V4", "V5")]) # tops of L4, L5, L6, L6b
layer_of <- function(bin) {
  ifelse(bin > tops[["V2"]], "L2/3", ifelse(bin > tops[["V3"]], "L4",
         ifelse(bin > tops[["V4"]], "L5", "L6")))
}
known <- c(Rorb = "L4", Cux2 = "L2/3-L4", Satb2 = "L2/3", Fezf2 = "L5", Bcl11b = "L5-L6",
           Nxph3 = "L6")
reference_age <- fit$fix$ref.lvl[["age"]]
reference_side <- fit$fix$ref.lvl[["hemisphere"]]
peaks <- do.call(rbind, lapply(genes, function(g) {
  grid <- seq(1, 100, by = 0.25)
  rate <- predict(fit, newdata = data.frame(bin = grid, context = fit$grouping.variables$context.lvls,
                                            species = g, hemisphere = reference_side,
                                            age = reference_age), type = "response")
  at <- grid[which.max(rate)]
  data.frame(gene = g, transitions = fit$degrees[1, g], peak.bin = at, peak.layer = layer_of(at),
             known.layer = known[[g]],
             agrees = grepl(layer_of(at), known[[g]], fixed = TRUE) ||
               (known[[g]] == "L2/3-L4" && layer_of(at) %in% c("L2/3", "L4")) ||
               (known[[g]] == "L5-L6" && layer_of(at) %in% c("L5", "L6")),
             stringsAsFactors = FALSE)
}))
utils::write.csv(with_provenance(peaks, "nb", commit), file.path(out, "peaks.csv"), row.names = FALSE)
print(peaks, row.names = FALSE)

# Wald beside a parametric bootstrap, on the rate effects of age and hemisphere.
boot_seconds <- system.time(
  boot <- bs_batch(fit, bootstraps, resample = "parametric", max.fork = 2, seed = 1,
                   progress = FALSE)
)[["elapsed"]]
percentile <- wisp_statistics(fit, method = "percentile", boot = boot)
wald <- fit$stats$parameters
boot_p <- percentile$stats$parameters
p <- fit$parameters
rate_effects <- which(p$role == "beta" & p$component == "Rt")
name <- p$name[rate_effects]
w <- wald[match(name, wald$parameter), ]
b <- boot_p[match(name, boot_p$parameter), ]
effects <- data.frame(gene = p$species[rate_effects], block = p$block[rate_effects],
                      treatment = p$treatment[rate_effects],
                      estimate = unname(fit$fitted.parameters[name]),
                      wald.low = w$CI.low, wald.high = w$CI.high, wald.p = w$p.value,
                      boot.low = b$CI.low, boot.high = b$CI.high, boot.p = b$p.value,
                      stringsAsFactors = FALSE)
effects$contains.estimate.wald <- effects$wald.low <= effects$estimate &
  effects$estimate <= effects$wald.high
effects$contains.estimate.boot <- effects$boot.low <= effects$estimate &
  effects$estimate <= effects$boot.high
utils::write.csv(with_provenance(effects, "nb", commit), file.path(out, "effects.csv"), row.names = FALSE)
cat(sprintf("parametric bootstrap: %d replicates in %.0f s\n", bootstraps, boot_seconds))
print(utils::head(effects[order(effects$gene, effects$block), ], 20), digits = 3, row.names = FALSE)

tests <- as.data.frame(unclass(fit$gene.tests))
utils::write.csv(with_provenance(tests, "nb", commit), file.path(out, "gene_tests.csv"), row.names = FALSE)
print(tests[, c("gene", "term", "df", "statistic", "p.value", "p.adj", "log.fc")],
      digits = 3, row.names = FALSE)
checked <- wisp_residuals(fit, seed = 1)
cat(sprintf("quantile residuals: mean %.3f, sd %.3f; KS p = %.3g\n",
            mean(checked$residuals$residual), stats::sd(checked$residuals$residual),
            checked$normality$p.value))

save_png <- function(plot, file, width = 180, height = 120) {
  ggplot2::ggsave(file.path(out, file), plot, width = width, height = height, units = "mm",
                  dpi = 150)
}
ratecount_figure <- plot(fit, type = "ratecount")
effects_figure <- plot(fit, type = "effects")
save_png(ratecount_figure, "ratecount.png", height = 150)
save_png(effects_figure, "effects.png", height = 150)
save_png(plot(fit, type = "genes"), "genes.png", width = 120, height = 90)
save_png(plot(checked), "residuals_qq.png", width = 120, height = 100)

summary_row <- data.frame(commit = commit, tokens = nrow(tokens), binned_rows = nrow(binned),
                          bin_s = bin_seconds, fit_median_s = stats::median(seconds),
                          fit_min_s = min(seconds), fit_max_s = max(seconds),
                          peak_rss_mb = round(peak_rss), binned_equals_tokens = same,
                          transitions = sum(fit$degrees), rorb_transitions = fit$degrees[1, "Rorb"],
                          peaks_in_known_layer = sum(peaks$agrees), bootstraps = bootstraps,
                          bootstrap_s = boot_seconds)
summary_row$engine <- "nb"
utils::write.csv(summary_row, file.path(out, "summary.csv"), row.names = FALSE)
print(summary_row, row.names = FALSE)

# vignette("real-data") shows these results: the tables and two figures,
# palette-compressed to 32 colours where pngquant exists (the installed size's 5 MB).
article <- file.path("vignettes", "real-data")
dir.create(article, showWarnings = FALSE)
for (file in c("summary.csv", "peaks.csv", "gene_tests.csv", "effects.csv")) {
  file.copy(file.path(out, file), file.path(article, file), overwrite = TRUE)
}
# At screen resolution (about 700 pixels wide): the article embeds them.
figures <- list(ratecount.png = ratecount_figure, effects.png = effects_figure)
for (file in names(figures)) {
  target <- file.path(article, file)
  ggplot2::ggsave(target, figures[[file]], width = 180, height = 150, units = "mm", dpi = 96)
  if (nzchar(Sys.which("pngquant"))) {
    # 32 colours, as the vignettes' own figures: the installed package is
    # close to R CMD check's 5 MB note.
    system2("pngquant", c("--force", "--speed=1", "32",
                          "--output", shQuote(target), shQuote(target)))
  }
}

# Headline figures for benchmarks/RESULTS.md (benchmarks/headlines.R).
register_headline("real_data",
                  c("wisp() with its defaults on the S1 data",
                    "genes peaking in the layer their marker is known for"),
                  c(sprintf("%.2f", summary_row$fit_median_s),
                    sprintf("%d / %d", summary_row$peaks_in_known_layer, nrow(peaks))),
                  c("s", "genes"),
                  paste("WISPACK_SHARED_DATA=../shared/data Rscript benchmarks/real_data.R", bootstraps))
