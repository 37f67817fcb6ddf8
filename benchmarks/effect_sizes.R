# Coverage of the gene-level effect sizes' intervals (the `log.fc` and
# `shift` columns of anova(fit) / fit$gene.tests, 95 % Wald intervals by the
# delta method) on the simulated experiments of the gene-level tests
# (gene_designs.R: six designs, five of them not used to tune anything;
# animals nested in genotype, hemisphere within animal; 8 genes per data
# set, genes 1-6 without any effect, genes 7-8 with effects of every term).
#
# The truth of each reported contrast comes from the simulator, not from the
# fitting code: `log.fc` from the true population log-rates of every bin
# (attr(data, "truth")$rates, log.rate.population), summed over bins and
# contexts as expected counts per cell; `shift` from the true transition
# points of every treatment (truth$curves, component tpoint). A gene reports
# the largest of its contrasts (two treatment pairs for genotype and for
# hemisphere, one for their interaction; for shifts, also every context and
# transition), so which contrast was reported is found by recomputing every
# contrast's estimate from predict() and from the fitted points of every
# treatment and matching the reported value; the interval then covers, or
# not, that contrast's truth. A shift is scored only where the fit chose the
# simulated number of transitions (else its points are not the simulated
# ones).
#
# Usage (repository root, wispack installed):
#   Rscript benchmarks/effect_sizes.R quick   # 6 data sets per design, 3 and 5 animals
#   Rscript benchmarks/effect_sizes.R full    # 25 data sets, 2, 3, 5 and 8 animals
# Resumable (benchmarks/out/effect_sizes/<mode>/); writes
# benchmarks/results/effect_sizes.csv (coverage with Monte Carlo SEs) and
# benchmarks/results/effect_sizes_rows_<mode>.csv.gz (every interval with
# its truth), and prints Markdown tables.

args <- commandArgs(trailingOnly = TRUE)
mode <- if (length(args)) args[1] else "quick"
stopifnot(mode %in% c("quick", "full"))
suppressPackageStartupMessages(library(wispack))
source("benchmarks/gene_designs.R") # gene_designs, simulate_gene_design()
source("benchmarks/headlines.R") # with_provenance(), register_headline()
workers <- as.integer(Sys.getenv("WISPACK_BENCH_WORKERS", "2"))
dir <- file.path("benchmarks", "out", "effect_sizes", mode)
dir.create(dir, recursive = TRUE, showWarnings = FALSE)
config <- list(quick = list(datasets = 6L, animals = c(3L, 5L)),
               full = list(datasets = 25L, animals = c(2L, 3L, 5L, 8L)))[[mode]]
datasets <- Sys.getenv("WISPACK_BENCH_DATASETS")
if (nzchar(datasets)) config$datasets <- as.integer(datasets)
genes <- 8L
changed <- 2L

# The contrasts of each term over the four treatments of genotype (KO, WT;
# KO the reference) x hemisphere (left, right; left the reference), written
# out by hand for this design: a main effect compares a level with the
# reference at each level of the other factor; the interaction is the
# difference of differences.
treatments <- c("KO:left", "WT", "right", "WT:right")
term_contrasts <- list(
  genotype = rbind(c(-1, 1, 0, 0), c(0, 0, -1, 1)),
  hemisphere = rbind(c(-1, 0, 1, 0), c(0, -1, 0, 1)),
  `genotype:hemisphere` = rbind(c(1, -1, -1, 1))
)
term_contrasts <- lapply(term_contrasts, function(m) {
  colnames(m) <- treatments
  m
})

# The reported contrast among `estimates` (one per candidate), or NA when
# none matches the reported value.
reported <- function(estimates, value) {
  hit <- which(abs(estimates - value) <= 1e-6 * max(1, abs(value)))
  if (length(hit)) hit[1] else NA_integer_
}

one_dataset <- function(design_name, animals, k) {
  data <- simulate_gene_design(design_name, animals, k, genes, changed)
  truth <- attr(data, "truth")
  fit <- suppressWarnings(wisp(data, verbose = FALSE, max.fork = workers))
  if (!all(fit$treatment$names %in% treatments)) stop("unexpected treatments: ", toString(fit$treatment$names))
  tests <- as.data.frame(unclass(fit$gene.tests))
  contexts <- fit$grouping.variables$context.lvls
  bins <- seq_len(max(truth$rates$bin))
  population <- unique(truth$rates[c("context", "species", "treatment", "bin",
                                     "log.rate.population")])
  # True and estimated log totals of expected counts per cell, per gene and
  # treatment (summed over the bins and contexts).
  true_rate <- wispack:::rate_at(population$log.rate.population, "nb")
  true_log_total <- log(tapply(true_rate, list(population$species, population$treatment), sum))
  rows <- list()
  for (g in unique(tests$gene)) {
    grid <- expand.grid(bin = bins, context = contexts, species = g, treatment = treatments,
                        stringsAsFactors = FALSE)
    expected <- predict(fit, grid, type = "response")
    log_total <- log(tapply(expected, grid$treatment, sum))[treatments]
    points <- wispack:::treatment_values(fit, g, contexts, "tpoint")
    true_points <- truth$curves[truth$curves$species == g & truth$curves$component == "tpoint", ]
    degrees_match <- all(truth$degrees[contexts, g] == fit$degrees[contexts, g])
    for (term in names(term_contrasts)) {
      row <- tests[tests$gene == g & tests$term == term, ]
      if (nrow(row) != 1L) next
      m <- term_contrasts[[term]]
      # log.fc
      estimates <- drop(m %*% log_total)
      at <- reported(estimates, row$log.fc)
      lfc_truth <- if (is.na(at)) NA_real_ else sum(m[at, ] * true_log_total[g, treatments])
      # shift: every context and transition, every contrast
      # (no points where the fit chose no transition)
      blocks <- if (is.null(points)) data.frame() else unique(points[c("context", "block")])
      candidates <- do.call(rbind, lapply(seq_len(nrow(blocks)), function(b) {
        here <- points[points$context == blocks$context[b] & points$block == blocks$block[b], ]
        z <- here$value[match(treatments, here$treatment)]
        there <- true_points[true_points$context == blocks$context[b] &
                               true_points$block == blocks$block[b], ]
        z_true <- there$value[match(treatments, there$treatment)]
        data.frame(estimate = drop(m %*% z), truth = if (length(z_true) == 4L)
          drop(m %*% z_true) else NA_real_)
      }))
      at_shift <- if (is.null(candidates)) NA_integer_ else reported(candidates$estimate, row$shift)
      shift_truth <- if (is.na(at_shift) || !degrees_match) NA_real_ else candidates$truth[at_shift]
      rows[[length(rows) + 1L]] <- data.frame(
        design = design_name, animals = animals, dataset = k, gene = g, term = term,
        null = !g %in% paste0("gene", seq(genes - changed + 1L, genes)),
        quantity = c("log.fc", "shift"),
        estimate = c(row$log.fc, row$shift),
        lower = c(row$log.fc.lower, row$shift.lower),
        upper = c(row$log.fc.upper, row$shift.upper),
        truth = c(lfc_truth, shift_truth),
        matched = c(!is.na(at), !is.na(at_shift)),
        degrees.match = degrees_match, contrasts = c(nrow(m), nrow(m) * max(1L, nrow(blocks))),
        stringsAsFactors = FALSE)
    }
  }
  do.call(rbind, rows)
}

started <- Sys.time()
for (k in seq_len(config$datasets)) {
  for (design_name in gene_designs) {
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
rows$covered <- rows$lower <= rows$truth & rows$truth <= rows$upper
unmatched <- sum(!rows$matched & !is.na(rows$estimate))
if (unmatched > 0) warning(unmatched, " reported effect sizes matched none of their recomputed contrasts")
local({
  file <- gzfile(file.path("benchmarks", "results", sprintf("effect_sizes_rows_%s.csv.gz", mode)), "w")
  on.exit(close(file))
  raw <- rows
  for (column in c("estimate", "lower", "upper", "truth")) raw[[column]] <- signif(raw[[column]], 6)
  utils::write.csv(with_provenance(raw, "fork"), file, row.names = FALSE)
})

rate <- function(x) {
  x <- x[!is.na(x)]
  c(rate = mean(x), se = sqrt(mean(x) * (1 - mean(x)) / max(length(x), 1)), n = length(x))
}
summarise <- function(r) {
  cov <- rate(r$covered)
  data.frame(intervals = cov[["n"]], coverage = cov[["rate"]], coverage.se = cov[["se"]],
             median.width = stats::median(r$upper - r$lower, na.rm = TRUE),
             unscored = sum(is.na(r$covered)))
}
keys <- unique(rows[c("quantity", "term", "null", "animals")])
keys <- keys[order(keys$quantity, keys$term, -keys$null, keys$animals), ]
table <- do.call(rbind, lapply(seq_len(nrow(keys)), function(i) {
  key <- keys[i, ]
  r <- rows[rows$quantity == key$quantity & rows$term == key$term & rows$null == key$null &
              rows$animals == key$animals, ]
  cbind(mode = mode, key, designs = length(unique(r$design)),
        datasets = length(unique(paste(r$design, r$dataset))), summarise(r))
}))
by_design <- do.call(rbind, lapply(split(rows, list(rows$quantity, rows$design, rows$null), drop = TRUE),
                                   function(r) cbind(quantity = r$quantity[1], design = r$design[1],
                                                     null = r$null[1], summarise(r))))
table <- with_provenance(table, "fork")
out <- file.path("benchmarks", "results", "effect_sizes.csv")
old <- if (file.exists(out)) utils::read.csv(out, stringsAsFactors = FALSE) else NULL
if (!is.null(old)) old <- old[old$mode != mode, names(table), drop = FALSE]
utils::write.csv(rbind(old, table), out, row.names = FALSE)

fmt <- function(x, se) sprintf("%.3f (%.3f)", x, se)
cat("| quantity | term | genes | animals | intervals | coverage (SE) | median width | unscored |\n")
cat("|---|---|---|---|---|---|---|---|\n")
for (i in seq_len(nrow(table))) {
  t <- table[i, ]
  cat(sprintf("| %s | %s | %s | %d | %d | %s | %.3f | %d |\n", t$quantity, t$term,
              if (t$null) "no effect" else "changed", t$animals, t$intervals,
              fmt(t$coverage, t$coverage.se), t$median.width, t$unscored))
}
cat("\n| quantity | design | genes | intervals | coverage (SE) | unscored |\n|---|---|---|---|---|---|\n")
for (i in seq_len(nrow(by_design))) {
  t <- by_design[i, ]
  cat(sprintf("| %s | %s | %s | %d | %s | %d |\n", t$quantity, t$design,
              if (t$null) "no effect" else "changed", t$intervals, fmt(t$coverage, t$coverage.se),
              t$unscored))
}

if (mode == "full") {
  pooled <- function(q, null) {
    r <- rows[rows$quantity == q & rows$null == null, ]
    mean(r$covered, na.rm = TRUE)
  }
  register_headline("effect_sizes",
                    c("log.fc 95 % intervals: coverage on changed genes",
                      "log.fc 95 % intervals: coverage on genes without effects",
                      "shift 95 % intervals: coverage on changed genes",
                      "shift 95 % intervals: coverage on genes without effects"),
                    sprintf("%.3f", c(pooled("log.fc", FALSE), pooled("log.fc", TRUE),
                                      pooled("shift", FALSE), pooled("shift", TRUE))),
                    "rate", "Rscript benchmarks/effect_sizes.R full")
}
