# Calibration of the gene-level tests of anova(fit) (wisp_gene_tests()) on
# simulated experiments, including designs the package was not tuned on:
#   base        the calibration benchmark's design (calibration_design.R:
#               animals nested in genotype, hemisphere within animal, one
#               transition, log-rate steps 0.8-1.5);
#   small_steps log-rate steps of 0.4-0.8 between blocks: weakly placed
#               transitions, where the Wald tests of points were worst;
#   two_points  two transitions per curve;
#   unequal     unequal groups: KO has `animals`, WT twice as many;
#   ends        one transition near an end of the axis (baseline point at
#               0.2 of the axis, bin 8.5 of 40);
#   close       two transitions close together (baseline points at 0.42
#               and 0.58 of the axis, 6.4 bins apart where two_points has
#               13).
# Each data set has 8 genes: genes 1-6 without any treatment effect (every
# term is a true null for them), genes 7-8 with effects on every rate,
# slope and point of every term. wisp() runs with its defaults (it chooses
# the numbers of transitions), then anova(fit). Also recorded: the
# gene-level screen a user could build from the default Wald table, the
# smallest Bonferroni-adjusted p-value of a gene's effects of the term.
#
# The panel mode simulates panels of 100 genes, 30 of them changed (with
# effects of every term), for the Benjamini-Hochberg false-discovery rate.
#
# Usage (repository root, wispack installed):
#   Rscript benchmarks/gene_tests.R quick   # 8 data sets per design and size
#   Rscript benchmarks/gene_tests.R full    # 40, and 2 animals per group too
#   Rscript benchmarks/gene_tests.R panel   # 10 panels of 100 genes, 3 and 5 animals
# Resumable (benchmarks/out/gene_tests/<mode>/); writes
# benchmarks/results/gene_tests.csv (rates with Monte Carlo SEs) and
# benchmarks/results/gene_tests_rows_<mode>.csv.gz (every test: its LR, df and
# denominator df, so that any reference can be scored again without
# refitting), copies the rates to inst/extdata/gene_tests.csv (read by
# vignette("inference")) and prints a Markdown table.
#
# Each test is scored against both references: the F reference of the
# default (`method = "F"`: LR / df against F(df, den.df), den.df the
# multivariate Satterthwaite df of a between-animal term, Inf within) and
# the chi-square on df (`method = "chisq"`).

args <- commandArgs(trailingOnly = TRUE)
mode <- if (length(args)) args[1] else "quick"
stopifnot(mode %in% c("quick", "full", "panel"))
suppressPackageStartupMessages(library(wispack))
alpha <- 0.05
workers <- as.integer(Sys.getenv("WISPACK_BENCH_WORKERS", "2"))
dir <- file.path("benchmarks", "out", "gene_tests", mode)
dir.create(dir, recursive = TRUE, showWarnings = FALSE)
commit <- tryCatch(system("git rev-parse --short HEAD", intern = TRUE), error = function(e) NA)

source("benchmarks/gene_designs.R") # gene_designs, simulate_gene_design()
designs <- gene_designs
config <- list(quick = list(datasets = 8L, animals = c(3L, 5L, 8L), genes = 8L, changed = 2L),
               full = list(datasets = 40L, animals = c(2L, 3L, 5L, 8L), genes = 8L, changed = 2L),
               panel = list(datasets = 10L, animals = c(3L, 5L), genes = 100L, changed = 30L))[[mode]]
if (mode == "panel") designs <- "base"
# WISPACK_BENCH_DATASETS overrides the number of data sets (e.g. to
# summarise a run stopped part-way: finished data sets are kept).
datasets <- Sys.getenv("WISPACK_BENCH_DATASETS")
if (nzchar(datasets)) config$datasets <- as.integer(datasets)

# The smallest Bonferroni-adjusted Wald p-value of the gene's effects of a
# term (effects whose treatment is among the term's), per gene.
wald_screen <- function(fit, term_effects) {
  s <- fit$stats$parameters
  p <- fit$parameters[match(s$parameter, fit$parameters$name), ]
  vapply(fit$grouping.variables$species.lvls, function(g) {
    rows <- p$species %in% g & p$treatment %in% term_effects & !is.na(s$p.value)
    if (!any(rows)) return(NA_real_)
    min(1, min(s$p.value[rows]) * sum(rows))
  }, 0)
}

one_dataset <- function(design_name, animals, k) {
  data <- simulate_gene_design(design_name, animals, k, config$genes, config$changed)
  started <- proc.time()
  fit <- suppressWarnings(wisp(data, verbose = FALSE, max.fork = workers))
  fit_seconds <- (proc.time() - started)[["elapsed"]]
  started <- proc.time()
  tests <- as.data.frame(unclass(anova(fit, method = "F", max.fork = workers)))
  test_seconds <- (proc.time() - started)[["elapsed"]]
  terms <- wispack:::design_terms(fit)
  names(terms) <- vapply(terms, `[[`, "", "term")
  tests$wald.screen <- NA_real_
  for (term in names(terms)) {
    rows <- tests$term == term
    tests$wald.screen[rows] <- wald_screen(fit, terms[[term]]$effects)[tests$gene[rows]]
  }
  changed <- paste0("gene", seq(config$genes - config$changed + 1, config$genes))
  tests$null <- !tests$gene %in% changed
  tests$design <- design_name
  tests$animals <- animals
  tests$dataset <- k
  tests$fit.seconds <- fit_seconds
  tests$test.seconds <- test_seconds
  tests
}

started <- Sys.time()
for (k in seq_len(config$datasets)) {
  for (design_name in designs) {
    for (animals in config$animals) {
      path <- file.path(dir, sprintf("%s_a%d_k%03d.rds", design_name, animals, k))
      if (file.exists(path)) next
      message(format(Sys.time(), "[%H:%M:%S] "), design_name, ", ", animals,
              " animals per group, data set ", k, "/", config$datasets)
      saveRDS(one_dataset(design_name, animals, k), path)
    }
  }
}
message("elapsed: ", format(round(difftime(Sys.time(), started, units = "mins"), 1)))

files <- list.files(dir, "\\.rds$", full.names = TRUE)
kept <- as.integer(sub(".*_k([0-9]+)\\.rds$", "\\1", files)) <= config$datasets
rows <- do.call(rbind, lapply(files[kept], readRDS))
if (is.null(rows$den.df)) stop("these per-data-set files predate den.df: remove ", dir)
# Both references from the same statistics; BH per data set and term.
rows$p.F <- ifelse(is.finite(rows$den.df),
                   stats::pf(rows$statistic / rows$df, rows$df, rows$den.df, lower.tail = FALSE),
                   stats::pchisq(rows$statistic, rows$df, lower.tail = FALSE))
rows$p.chisq <- stats::pchisq(rows$statistic, rows$df, lower.tail = FALSE)
by_set <- interaction(rows$design, rows$animals, rows$dataset, rows$term, drop = TRUE)
rows$p.adj.F <- stats::ave(rows$p.F, by_set, FUN = function(p) stats::p.adjust(p, "BH"))
rows$p.adj.chisq <- stats::ave(rows$p.chisq, by_set, FUN = function(p) stats::p.adjust(p, "BH"))
raw <- rows[c("design", "animals", "dataset", "gene", "term", "null", "df", "den.df",
              "statistic", "wald.screen")]
raw$den.df <- signif(raw$den.df, 5)
raw$statistic <- signif(raw$statistic, 7)
raw$wald.screen <- signif(raw$wald.screen, 4)
raw$commit <- commit
raw$engine <- "fork"
local({
  file <- gzfile(file.path("benchmarks", "results", sprintf("gene_tests_rows_%s.csv.gz", mode)), "w")
  on.exit(close(file))
  utils::write.csv(raw, file, row.names = FALSE)
})
rate <- function(x) {
  x <- x[!is.na(x)]
  c(rate = mean(x), se = sqrt(mean(x) * (1 - mean(x)) / max(length(x), 1)), n = length(x))
}
# The false-discovery proportion of BH calls of one data set and term.
fdp <- function(r, adjusted) {
  called <- !is.na(r[[adjusted]]) & r[[adjusted]] < alpha
  if (!any(called)) 0 else mean(r$null[called])
}
keys <- unique(rows[c("design", "animals", "term")])
table <- do.call(rbind, lapply(seq_len(nrow(keys)), function(i) {
  key <- keys[i, ]
  r <- rows[rows$design == key$design & rows$animals == key$animals & rows$term == key$term, ]
  size <- rate(r$p.F[r$null] < alpha)
  power <- rate(r$p.F[!r$null] < alpha)
  size_chisq <- rate(r$p.chisq[r$null] < alpha)
  power_chisq <- rate(r$p.chisq[!r$null] < alpha)
  screen <- rate(r$wald.screen[r$null] < alpha)
  fdps <- vapply(split(r, r$dataset), fdp, 0, adjusted = "p.adj.F")
  fdps_chisq <- vapply(split(r, r$dataset), fdp, 0, adjusted = "p.adj.chisq")
  data.frame(mode = mode, design = key$design, animals = key$animals, term = key$term,
             datasets = length(unique(r$dataset)), null.tests = size[["n"]],
             fpr = size[["rate"]], fpr.se = size[["se"]],
             power = power[["rate"]], power.se = power[["se"]],
             median.den.df = stats::median(r$den.df[r$null], na.rm = TRUE),
             fpr.chisq = size_chisq[["rate"]], fpr.chisq.se = size_chisq[["se"]],
             power.chisq = power_chisq[["rate"]], power.chisq.se = power_chisq[["se"]],
             bh.fdr.chisq = mean(fdps_chisq),
             bh.fdr.chisq.se = stats::sd(fdps_chisq) / sqrt(length(fdps_chisq)),
             wald.screen.fpr = screen[["rate"]], wald.screen.se = screen[["se"]],
             bh.fdr = mean(fdps), bh.fdr.se = stats::sd(fdps) / sqrt(length(fdps)),
             median.test.seconds = stats::median(r$test.seconds),
             median.fit.seconds = stats::median(r$fit.seconds),
             commit = commit, engine = "fork", stringsAsFactors = FALSE)
}))
table <- table[order(table$design, table$term, table$animals), ]
out <- file.path("benchmarks", "results", "gene_tests.csv")
old <- if (file.exists(out)) utils::read.csv(out, stringsAsFactors = FALSE) else NULL
if (!is.null(old)) {
  # Rows of other modes keep their figures; columns they predate are NA.
  old <- old[old$mode != mode, , drop = FALSE]
  for (column in setdiff(names(table), names(old))) old[[column]] <- rep(NA, nrow(old))
  old <- old[names(table)]
}
utils::write.csv(rbind(old, table), out, row.names = FALSE)
# The vignette's table reads the installed copy, with only the columns it
# shows (the installed package is close to R CMD check's 5 MB note).
shipped <- utils::read.csv(out, stringsAsFactors = FALSE)
shipped <- shipped[c("mode", "design", "animals", "term", "datasets", "null.tests", "fpr",
                     "fpr.se", "fpr.chisq", "fpr.chisq.se", "power", "power.se",
                     "wald.screen.fpr", "wald.screen.se")]
for (column in setdiff(names(shipped), c("mode", "design", "animals", "term", "datasets",
                                         "null.tests"))) {
  shipped[[column]] <- signif(shipped[[column]], 4)
}
utils::write.csv(shipped, file.path("inst", "extdata", "gene_tests.csv"), row.names = FALSE)
fmt <- function(x, se) sprintf("%.3f (%.3f)", x, se)
cat("| design | animals | term | null tests | FPR, F (SE) | FPR, chi-square (SE) | power, F (SE) | Wald screen FPR (SE) | BH FDR, F (SE) |\n")
cat("|---|---|---|---|---|---|---|---|---|\n")
for (i in seq_len(nrow(table))) {
  t <- table[i, ]
  cat(sprintf("| %s | %d | %s | %d | %s | %s | %s | %s | %s |\n", t$design, t$animals, t$term,
              t$null.tests, fmt(t$fpr, t$fpr.se), fmt(t$fpr.chisq, t$fpr.chisq.se),
              fmt(t$power, t$power.se), fmt(t$wald.screen.fpr, t$wald.screen.se),
              fmt(t$bh.fdr, t$bh.fdr.se)))
}
# Pooled over the designs, per term and group size (every cell has as many
# null tests).
cat("\n| term | animals | null tests | FPR, F (SE) | FPR, chi-square (SE) | median den.df |\n")
cat("|---|---|---|---|---|---|\n")
for (key in split(rows[rows$null, ], list(rows$term[rows$null], rows$animals[rows$null]), drop = TRUE)) {
  f <- rate(key$p.F < alpha)
  x <- rate(key$p.chisq < alpha)
  cat(sprintf("| %s | %d | %d | %s | %s | %.1f |\n", key$term[1], key$animals[1], f[["n"]],
              fmt(f[["rate"]], f[["se"]]), fmt(x[["rate"]], x[["se"]]),
              stats::median(key$den.df, na.rm = TRUE)))
}

# Headline figures for benchmarks/RESULTS.md (benchmarks/headlines.R).
if (mode == "full") {
  source("benchmarks/headlines.R") # register_headline()
  datasets <- Sys.getenv("WISPACK_BENCH_DATASETS")
  between <- rows[rows$null & rows$term == "genotype" & rows$animals %in% c(3, 5), ]
  two <- rows[rows$null & rows$term == "genotype" & rows$animals == 2, ]
  register_headline("gene_tests", c("p < 0.05 on true-null genes, every test", "power on the changed genes",
                                    "genotype (between animals), 3-5 animals per group: p < 0.05 on true-null genes, F reference",
                                    "genotype (between animals), 3-5 animals per group: p < 0.05 on true-null genes, chi-square",
                                    "genotype (between animals), 2 animals per group: p < 0.05 on true-null genes, F reference"),
                    sprintf("%.3f", c(sum(table$fpr * table$null.tests) / sum(table$null.tests),
                                      mean(rows$p.F[!rows$null] < alpha),
                                      mean(between$p.F < alpha, na.rm = TRUE),
                                      mean(between$p.chisq < alpha, na.rm = TRUE),
                                      mean(two$p.F < alpha, na.rm = TRUE))), "rate",
                    paste0(if (nzchar(datasets)) paste0("WISPACK_BENCH_DATASETS=", datasets, " "),
                           "Rscript benchmarks/gene_tests.R full"),
                    commit = if (length(commit) && !is.na(commit[1])) commit[1] else "unknown")
}
