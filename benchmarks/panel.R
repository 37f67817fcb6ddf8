# Whole panels (issue #26): simulated MERFISH-like panels held as a lab holds
# them (a sparse cells x genes dgCMatrix and a per-cell metadata table),
# binned by wisp_bin() and fitted by wisp() with its default statistics and
# gene-level tests. Per panel, in a fresh R process (so that each peak is
# its own and includes the input matrix): the time of wisp_bin() and of
# wisp(), and the peak summed PSS of the process tree (the R process and its
# forked workers; benchmarks/memory_sampler.py, every 0.5 s: faster polling of
# smaps_rollup contends for the page-table lock of a large process and slows it).
#
#   Rscript benchmarks/panel.R [quick|full] [max.fork]
#     quick: the 200-gene, 4-type, 96,000-cell panel of issue #26 and a
#            50-gene x 12-type panel of 10^6 cells (about 10 minutes on 2 cores)
#     full:  50, 100, 200 and 500 genes x 12 types x 10^6 cells, 100 bins
#     some:  PANEL_GENES="100,500" Rscript benchmarks/panel.R some: those of full
#   Rscript benchmarks/panel.R one GENES TYPES CELLS BINS MAX_FORK OUT.csv
#     (one panel; what the modes run in child processes)
#
# Writes benchmarks/results/panel_<mode>.csv (one row per panel) and prints it.

args <- commandArgs(trailingOnly = TRUE)
mode <- if (length(args)) args[1] else "quick"
bench_dir <- local({
  file <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
  if (length(file)) dirname(normalizePath(file)) else "benchmarks"
})

# A panel: cells of `types` cell types in 8 mice (4 per genotype), both
# hemispheres, depth 0-1000 um; per gene and type a sigmoid step of the rate
# along depth (log-fold 0.4-1.2 at a point 250-750 um), a genotype effect on
# a fifth of the genes, and a per-mouse shift of the point (warping); rates
# set so that about 10 % of the cell x gene counts are non-zero.
simulate_panel <- function(genes, types, cells, seed = 1) {
  set.seed(seed)
  mice <- sprintf("mouse%d", 1:8)
  metadata <- data.frame(
    cell = sprintf("cell%07d", seq_len(cells)),
    depth = stats::runif(cells, 0, 1000),
    type = sprintf("type%02d", sample.int(types, cells, replace = TRUE)),
    mouse = sample(mice, cells, replace = TRUE),
    hemisphere = sample(c("left", "right"), cells, replace = TRUE),
    stringsAsFactors = FALSE)
  metadata$genotype <- ifelse(metadata$mouse %in% mice[1:4], "WT", "KO")
  type <- match(metadata$type, sort(unique(metadata$type)))
  mouse <- match(metadata$mouse, mice)
  warp <- stats::rnorm(8, 0, 20)[mouse]
  ko <- metadata$genotype == "KO"
  i <- vector("list", genes)
  x <- vector("list", genes)
  for (g in seq_len(genes)) {
    base <- exp(stats::runif(types, log(0.04), log(0.12)))[type]
    point <- stats::runif(types, 250, 750)[type] + warp
    step <- stats::runif(types, 0.4, 1.2)[type]
    effect <- if (g %% 5 == 0) 0.5 else 0
    rate <- base * exp(step / (1 + exp(-(metadata$depth - point) / 40)) + effect * ko)
    y <- stats::rpois(cells, rate)
    nonzero <- which(y > 0)
    i[[g]] <- nonzero - 1L
    x[[g]] <- as.double(y[nonzero])
  }
  p <- c(0L, cumsum(lengths(i)))
  counts <- methods::new("dgCMatrix", i = unlist(i, use.names = FALSE), p = as.integer(p),
                         x = unlist(x, use.names = FALSE), Dim = c(as.integer(cells), as.integer(genes)),
                         Dimnames = list(metadata$cell, sprintf("gene%03d", seq_len(genes))))
  list(counts = counts, cells = metadata)
}

source(file.path(bench_dir, "memory_sampler.R"))

run_one <- function(genes, types, cells, bins, max_fork, out) {
  suppressPackageStartupMessages({
    library(Matrix)
    library(wispack)
  })
  started <- proc.time()[["elapsed"]]
  panel <- simulate_panel(genes, types, cells)
  simulate_seconds <- proc.time()[["elapsed"]] - started
  nonzero <- length(panel$counts@x) / (as.double(genes) * cells)
  matrix_mb <- as.numeric(utils::object.size(panel$counts)) / 2^20
  sampler <- tempfile(fileext = ".csv")
  # every 0.5 s: faster polling of smaps_rollup contends for the page-table
  # lock of a large process and slows it; PANEL_TRACE=file.csv: the summed
  # PSS over time too (where the peak is)
  start_sampler(sampler, trace = Sys.getenv("PANEL_TRACE"), interval = 0.5)
  t0 <- proc.time()[["elapsed"]]
  binned <- wisp_bin(panel$counts, panel$cells, position = "depth", bins = bins,
                     range = c(0, 1000), keep = c("type", "mouse", "genotype", "hemisphere"),
                     unit = "um")
  bin_seconds <- proc.time()[["elapsed"]] - t0
  binned$genotype <- factor(binned$genotype, levels = c("WT", "KO"))
  t1 <- proc.time()[["elapsed"]]
  # PANEL_STATISTICS=wald: wisp(statistics = "wald"); unset, the default.
  statistics <- Sys.getenv("PANEL_STATISTICS")
  fit <- suppressWarnings(do.call(wisp, c(
    list(binned, variables = list(context = "type", ran = "mouse"), max.fork = max_fork,
         verbose = nzchar(Sys.getenv("PANEL_VERBOSE"))),
    if (nzchar(statistics)) list(statistics = statistics))))
  fit_seconds <- proc.time()[["elapsed"]] - t1
  memory <- stop_sampler(sampler)
  tests <- fit$gene.tests
  genotype <- tests[tests$term == "genotype", ]
  truth <- as.integer(sub("gene", "", genotype$gene)) %% 5 == 0
  called <- !is.na(genotype$p.adj) & genotype$p.adj < 0.05
  row <- data.frame(
    genes = genes, types = types, cells = cells, bins = bins, max_fork = max_fork,
    nonzero_fraction = round(nonzero, 4), matrix_mb = round(matrix_mb, 1),
    binned_rows = nrow(binned), simulate_s = round(simulate_seconds, 1),
    bin_s = round(bin_seconds, 2), fit_s = round(fit_seconds, 1),
    fit_structure_s = round(fit$structure.seconds %||% NA_real_, 1),
    parameters = length(fit$fitted.parameters),
    converged_genes = sum(fit$gene.qc$converged),
    reduced_fits_converged = round(mean(fit$gene.tests$converged), 3),
    peak_pss_mb = round(memory$peak_pss_mb, 0),
    genotype_fdr = if (any(called)) round(mean(!truth[called]), 3) else NA_real_,
    genotype_power = round(mean(called[truth]), 3),
    statistics = fit$stats$method,
    r = paste(R.version$major, R.version$minor, sep = "."), stringsAsFactors = FALSE)
  utils::write.csv(row, out, row.names = FALSE)
  print(row)
}

`%||%` <- function(a, b) if (is.null(a) || !length(a)) b else a

if (mode == "one") {
  a <- as.numeric(args[2:6])
  run_one(a[1], a[2], a[3], a[4], a[5], args[7])
  quit(save = "no")
}

max_fork <- if (length(args) >= 2) as.integer(args[2]) else 2L
panels <- switch(mode,
  quick = data.frame(genes = c(200, 50), types = c(4, 12), cells = c(96000, 1e6),
                     bins = c(50, 100)),
  full = data.frame(genes = c(50, 100, 200, 500), types = 12, cells = 1e6, bins = 100),
  # PANEL_GENES="100,500": only those panels of the full mode
  some = data.frame(genes = as.numeric(strsplit(Sys.getenv("PANEL_GENES", "100,500"), ",")[[1]]),
                    types = 12, cells = 1e6, bins = 100),
  stop("mode must be quick, full, some or one"))
rows <- list()
for (k in seq_len(nrow(panels))) {
  p <- panels[k, ]
  out <- tempfile(fileext = ".csv")
  cat(sprintf("== %d genes x %d types, %s cells, %d bins, max.fork = %d\n", p$genes, p$types,
              format(p$cells, big.mark = ","), p$bins, max_fork))
  status <- system2(file.path(R.home("bin"), "Rscript"),
                    c(shQuote(file.path(bench_dir, "panel.R")), "one", p$genes, p$types,
                      p$cells, p$bins, max_fork, shQuote(out)))
  if (status == 0 && file.exists(out)) rows[[k]] <- utils::read.csv(out)
}
result <- do.call(rbind, rows)
result$mode <- mode
source(file.path(bench_dir, "headlines.R")) # with_provenance(), register_headline()
result <- with_provenance(result, ifelse(result$max_fork > 1, "fork", "serial"))
dir.create(file.path(bench_dir, "results"), showWarnings = FALSE)
file <- file.path(bench_dir, "results", paste0("panel_", mode, ".csv"))
utils::write.csv(result, file, row.names = FALSE)
print(result)
# Every mode's rows, for the main vignette's "A whole panel" (read from the
# installed package).
parts <- lapply(list.files(file.path(bench_dir, "results"), "^panel_.*\\.csv$", full.names = TRUE),
                utils::read.csv, stringsAsFactors = FALSE)
columns <- Reduce(intersect, lapply(parts, names))
shipped <- do.call(rbind, lapply(parts, `[`, columns))
utils::write.csv(shipped, file.path(dirname(bench_dir), "inst", "extdata", "panel.csv"),
                 row.names = FALSE)
if (nrow(result) >= 2) {
  same <- result[result$types == result$types[nrow(result)], ]
  if (nrow(same) >= 2) {
    slope <- stats::coef(stats::lm(log(fit_s) ~ log(genes), same))[2]
    cat(sprintf("scaling exponent of wisp() time in genes: %.2f\n", slope))
  }
}

# Headline figures for benchmarks/RESULTS.md (benchmarks/headlines.R).
if (mode %in% c("quick", "some", "full")) {
  sizes <- sprintf("%d genes x %d types x %d bins", result$genes, result$types, result$bins)
  command <- if (mode == "some") {
    sprintf("PANEL_GENES=\"%s\" Rscript benchmarks/panel.R some", Sys.getenv("PANEL_GENES", "100,500"))
  } else paste("Rscript benchmarks/panel.R", mode)
  register_headline("panel", c(paste0(sizes, ": wisp()"), paste0(sizes, ": peak summed PSS")),
                    c(sprintf("%.1f", result$fit_s), sprintf("%.0f", result$peak_pss_mb)),
                    rep(c("s", "MB"), each = nrow(result)), command)
}
