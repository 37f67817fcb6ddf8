# Calibration of anova(reduced, full): the likelihood-ratio test of a factor
# as a whole, with its parametric-bootstrap p-value, on the designs of
# benchmarks/calibration.R (animals nested in genotype, 3, 5 or 8 per group,
# crossed with hemisphere within animals). For each data set, one gene with
# no treatment effect (gene 1: the test of genotype is a true null) and one
# with effects on every rate, slope and point (gene 3) are fitted alone,
# with their simulated number of transitions; the reduced model holds every
# genotype effect (main and interaction with hemisphere) at 0.
#
# Reports, per design and gene, the rejection rate at alpha = 0.05 (size for
# the null gene, power for the other) with its Monte Carlo standard error,
# and the smallest p-value (never 0).
#
# Usage (from the repository root, with wispack installed):
#   Rscript benchmarks/lrt_calibration.R quick   # 6 data sets per design, 39 replicates
#   Rscript benchmarks/lrt_calibration.R full    # 30 data sets per design, 99 replicates
# Resumable: each (data set, gene) result is kept in
# benchmarks/out/lrt_calibration/<mode>/. Writes
# benchmarks/results/lrt_calibration.csv (the table) and
# lrt_calibration_tests.csv (every test), and prints a Markdown table.

args <- commandArgs(trailingOnly = TRUE)
mode <- if (length(args)) args[1] else "quick"
stopifnot(mode %in% c("quick", "full"))
suppressPackageStartupMessages(library(wispack))

config <- list(quick = list(datasets = 6L, replicates = 39L),
               full = list(datasets = 30L, replicates = 99L))[[mode]]
animals_per_group <- c(3L, 5L, 8L)
alpha <- 0.05
workers <- 2L
dir <- file.path("benchmarks", "out", "lrt_calibration", mode)
dir.create(dir, recursive = TRUE, showWarnings = FALSE)

# The data sets of the calibration benchmark (same seeds).
source("benchmarks/calibration_design.R")

one_test <- function(data, truth, gene, k) {
  subset <- data[data$species == gene, ]
  degrees <- truth$degrees[, gene, drop = FALSE]
  full <- wisp(subset, degrees = degrees, verbose = FALSE, fit_only = TRUE,
               model.settings = list(LRO_cost = "none"))
  reduced <- wisp(subset, degrees = degrees, verbose = FALSE, fit_only = TRUE,
                  model.settings = list(LRO_cost = "none", trtKO = "genotype"))
  result <- anova(reduced, full, bootstraps = config$replicates, seed = k, max.fork = workers)
  data.frame(gene = gene, null = gene == "gene1", lr = result$LR[2], df = result$Df[2],
             p = result[["Pr(>LR)"]][2],
             failed = sum(is.na(attr(result, "replicates"))),
             negative = sum(attr(result, "replicates") < 0, na.rm = TRUE))
}

started <- Sys.time()
for (k in seq_len(config$datasets)) {
  for (animals in animals_per_group) {
    path <- file.path(dir, sprintf("a%d_k%03d.rds", animals, k))
    if (file.exists(path)) next
    message(format(Sys.time(), "[%H:%M:%S] "), animals, " animals per group, data set ", k, "/",
            config$datasets)
    data <- simulate_dataset(animals, k)
    truth <- attr(data, "truth")
    rows <- do.call(rbind, lapply(c("gene1", "gene3"), function(g) one_test(data, truth, g, k)))
    rows$animals <- animals
    rows$dataset <- k
    saveRDS(rows, path)
  }
}

results <- do.call(rbind, lapply(list.files(dir, "\\.rds$", full.names = TRUE), readRDS))
table <- do.call(rbind, lapply(split(results, list(results$animals, results$null)), function(d) {
  rate <- mean(d$p < alpha)
  data.frame(animals = d$animals[1], gene = if (d$null[1]) "null (gene 1)" else "effects (gene 3)",
             datasets = nrow(d), rejection = rate, se = sqrt(rate * (1 - rate) / nrow(d)),
             min_p = min(d$p), median_lr = stats::median(d$lr),
             negative_replicates = sum(d$negative), failed_replicates = sum(d$failed))
}))
table <- table[order(table$gene != "null (gene 1)", table$animals), ]
source("benchmarks/headlines.R") # with_provenance(), register_headline()
dir.create(file.path("benchmarks", "results"), showWarnings = FALSE)
utils::write.csv(with_provenance(table, "nb"), file.path("benchmarks", "results", "lrt_calibration.csv"),
                 row.names = FALSE)
# Every test's statistic, df and p-value, for checks of other references
# (a chi-square, say) without refitting.
utils::write.csv(with_provenance(results, "nb"), file.path("benchmarks", "results", "lrt_calibration_tests.csv"),
                 row.names = FALSE)
cat(sprintf("\n%s mode, %d replicates per test, %.1f min this run\n\n", mode, config$replicates,
            as.numeric(difftime(Sys.time(), started, units = "mins"))))
cat("| animals/group | gene | data sets | rejected at 0.05 | smallest p | median LR | replicates < 0 | failed |\n")
cat("|---:|---|---:|---|---:|---:|---:|---:|\n")
for (i in seq_len(nrow(table))) {
  r <- table[i, ]
  cat(sprintf("| %d | %s | %d | %.3f ± %.3f | %.3f | %.1f | %d | %d |\n", r$animals, r$gene,
              r$datasets, r$rejection, r$se, r$min_p, r$median_lr, r$negative_replicates,
              r$failed_replicates))
}

# Headline figures for benchmarks/RESULTS.md (benchmarks/headlines.R).
if (mode == "full") {
  pooled <- function(rows) sum(rows$rejection * rows$datasets) / sum(rows$datasets)
  null <- table$gene == "null (gene 1)"
  register_headline("lrt_calibration",
                    c("rejections at 0.05 of the null gene, every design",
                      "rejections at 0.05 of the gene with effects, every design"),
                    sprintf("%.3f", c(pooled(table[null, ]), pooled(table[!null, ]))), "rate",
                    "R_LIBS=<library with wispack> Rscript benchmarks/lrt_calibration.R full")
}
