# wisp_bin(): per-cell positions and counts into the binned table (or the
# tokens) wisp() takes.

# The tokens of format = "tokens" (the original's long format).
bin_tokens <- function(...) wisp_bin(..., format = "tokens")

# A lab's cells: depth in micrometres, animal, genotype, region; counts of
# three genes, as a long table of the non-zero counts only.
lab_cells <- function(n = 240, seed = 1) {
  set.seed(seed)
  data.frame(cell_id = sprintf("cell%03d", seq_len(n)),
             depth = round(stats::runif(n, 0, 1000), 1),
             animal = rep(c("a1", "a2", "a3", "a4"), length.out = n),
             genotype = rep(c("WT", "WT", "KO", "KO"), length.out = n),
             region = "S1", stringsAsFactors = FALSE)
}

lab_matrix <- function(cells, seed = 2) {
  set.seed(seed)
  genes <- c("Gad1", "Sst", "Vip")
  rate <- outer(1 + 4 * (cells$depth > 500), c(1, 2, 0.5))
  m <- matrix(stats::rpois(length(rate), rate), nrow(cells), 3,
              dimnames = list(cells$cell_id, genes))
  m
}

lab_long <- function(cells, m) {
  long <- data.frame(cell_id = rep(rownames(m), times = ncol(m)),
                     gene_name = rep(colnames(m), each = nrow(m)),
                     n = as.vector(m), stringsAsFactors = FALSE)
  long[long$n > 0, ]
}

test_that("a long table of non-zero counts becomes one token per cell and gene", {
  cells <- lab_cells()
  m <- lab_matrix(cells)
  long <- lab_long(cells, m)
  binned <- bin_tokens(long, cells, position = "depth", bins = 10, range = c(0, 1000),
                     cell = "cell_id", gene = "gene_name", count = "n")
  expect_identical(nrow(binned), nrow(cells) * ncol(m))
  expect_named(binned, c("count", "bin", "species", "cell", "animal", "genotype", "region"))
  # zeros included: every count of the matrix, at its cell and gene
  expect_identical(binned$count, as.numeric(m[cbind(binned$cell, binned$species)]))
  expect_identical(sum(binned$count == 0), sum(m == 0))
  # bins of 100 um, 1..10, from the depth of the token's cell
  depth <- cells$depth[match(binned$cell, cells$cell_id)]
  expect_identical(binned$bin, as.integer(pmin(floor(depth / 100) + 1, 10)))
  expect_identical(binned$animal, cells$animal[match(binned$cell, cells$cell_id)])
})

test_that("a cells x genes matrix with a cell table gives the same tokens", {
  cells <- lab_cells()
  m <- lab_matrix(cells)
  from_long <- bin_tokens(lab_long(cells, m), cells, position = "depth", bins = 10,
                        range = c(0, 1000), cell = "cell_id", gene = "gene_name", count = "n")
  from_matrix <- bin_tokens(m, cells, position = "depth", bins = 10, range = c(0, 1000),
                          cell = "cell_id")
  key <- function(d) order(d$cell, d$species)
  expect_equal(from_matrix[key(from_matrix), ], from_long[key(from_long), ],
               ignore_attr = TRUE)
  # a genes x cells matrix (as Seurat keeps counts) is recognised by its names
  expect_message(transposed <- bin_tokens(t(m), cells, position = "depth", bins = 10,
                                        range = c(0, 1000), cell = "cell_id"),
                 "genes x cells")
  expect_identical(transposed, from_matrix)
})

test_that("positions and metadata may be in the long table itself", {
  cells <- lab_cells()
  m <- lab_matrix(cells)
  long <- lab_long(cells, m)
  long <- cbind(long, cells[match(long$cell_id, cells$cell_id), c("depth", "animal")])
  binned <- bin_tokens(long, position = "depth", bins = 4, cell = "cell_id", gene = "gene_name",
                     count = "n")
  expect_named(binned, c("count", "bin", "species", "cell", "animal"))
  expect_identical(sort(unique(binned$bin)), 1:4)
})

test_that("normalised coordinates bin over the range given", {
  cells <- lab_cells()
  cells$depth <- cells$depth / 1000
  binned <- bin_tokens(lab_matrix(cells), cells, position = "depth", bins = 20, range = c(0, 1),
                     cell = "cell_id")
  depth <- cells$depth[match(binned$cell, cells$cell_id)]
  expect_identical(binned$bin, as.integer(pmin(floor(depth * 20) + 1, 20)))
})

test_that("bins without cells draw a warning that names them", {
  cells <- lab_cells()
  cells <- cells[cells$depth < 300 | cells$depth >= 500, ]
  expect_warning(bin_tokens(lab_matrix(cells), cells, position = "depth", bins = 10,
                          range = c(0, 1000), cell = "cell_id"),
                 "bins 4, 5 .*no cells")
})

test_that("the binned tokens fit, with the cell column kept out of the fixed effects", {
  cells <- lab_cells()
  binned <- bin_tokens(lab_matrix(cells), cells, position = "depth", bins = 10,
                     range = c(0, 1000), cell = "cell_id", keep = c("animal", "genotype", "region"))
  fit <- suppressWarnings(wisp(binned, variables = list(context = "region", ran = "animal"),
                               fit_only = TRUE, verbose = FALSE,
                               model.settings = list(LRO_cost = "none")))
  expect_identical(fit$fix$names, "genotype")
  expect_identical(fit$grouping.variables$species.lvls, c("Gad1", "Sst", "Vip"))
  expect_identical(nobs(fit) > 0, TRUE)
})

test_that("bad input to bin_tokens() is an input error naming the problem", {
  cells <- lab_cells()
  m <- lab_matrix(cells)
  bin <- function(...) bin_tokens(m, cells, position = "depth", cell = "cell_id", ...)
  expect_error(bin(bins = 0), class = "wisp_input_error", regexp = "bins")
  expect_error(bin_tokens(m, cells, position = "dpth", cell = "cell_id"),
               class = "wisp_input_error", regexp = "did you mean 'depth'")
  expect_error(bin(range = c(0, 500)), class = "wisp_input_error", regexp = "outside")
  expect_error(bin_tokens(m, cells[-1, ], position = "depth", cell = "cell_id"),
               class = "wisp_input_error", regexp = "cell001")
  long <- lab_long(cells, m)
  expect_error(bin_tokens(rbind(long, long[1, ]), cells, position = "depth", cell = "cell_id",
                        gene = "gene_name", count = "n"),
               class = "wisp_input_error", regexp = "more than one row")
})

# The binned table -----------------------------------------------------------

# A lab with hemispheres within animals, animals nested in genotype, cells
# with no counts at all and cells of the metadata that the matrix lacks.
panel_cells <- function(n = 480, seed = 3) {
  set.seed(seed)
  data.frame(cell_id = sprintf("k%04d", seq_len(n)),
             depth = round(stats::runif(n, 0, 800), 1),
             mouse = rep(sprintf("m%d", 1:6), length.out = n),
             genotype = rep(c("WT", "WT", "WT", "KO", "KO", "KO"), length.out = n),
             hemisphere = rep(c("left", "left", "left", "left", "left", "left",
                                "right", "right", "right", "right", "right", "right"),
                              length.out = n),
             region = "S1", volume = round(stats::runif(n, 0.5, 2), 2),
             stringsAsFactors = FALSE)
}

panel_matrix <- function(cells, seed = 4) {
  set.seed(seed)
  genes <- c("Gad1", "Sst", "Vip", "Pvalb")
  rate <- outer(0.3 + 3 * (cells$depth > 400), c(1, 2, 0.2, 0.6))
  m <- matrix(stats::rpois(length(rate), rate), nrow(cells), length(genes),
              dimnames = list(cells$cell_id, genes))
  m[1:12, ] <- 0 # cells that expressed none of the genes
  m
}

test_that("the binned table sums each group's cells per bin, as a direct tally does", {
  cells <- panel_cells()
  m <- panel_matrix(cells)
  binned <- wisp_bin(m, cells, position = "depth", bins = 8, range = c(0, 800),
                     cell = "cell_id", keep = c("mouse", "genotype", "hemisphere", "region"))
  expect_s3_class(binned, "wisp_binned")
  expect_named(binned, c("count", "exposure", "cells", "bin", "species", "mouse", "genotype",
                         "hemisphere", "region"))
  # the tally by hand: every cell's bin (100 um wide), its group, per gene
  bin <- pmin(floor(cells$depth / 100) + 1, 8)
  group <- paste(cells$mouse, cells$hemisphere, bin)
  for (gene in colnames(m)) {
    rows <- binned[binned$species == gene, ]
    key <- paste(rows$mouse, rows$hemisphere, rows$bin)
    expect_setequal(key, unique(group))
    expect_identical(rows$count, as.numeric(tapply(m[, gene], group, sum)[key]))
    expect_identical(rows$cells, as.integer(table(group)[key]))
  }
  expect_identical(binned$exposure, as.numeric(binned$cells))
  expect_identical(sum(binned$count), sum(m) + 0)
  expect_identical(attr(binned, "breaks"), seq(0, 800, by = 100))
  # sizes sum into the exposure instead
  sized <- wisp_bin(m, cells, position = "depth", bins = 8, range = c(0, 800),
                    cell = "cell_id", keep = c("mouse", "genotype", "hemisphere", "region"),
                    size = "volume")
  key <- paste(sized$mouse, sized$hemisphere, sized$bin)
  expect_equal(sized$exposure, as.numeric(tapply(cells$volume, group, sum)[key]))
  expect_identical(sized$count, binned$count)
  expect_output(print(binned), "binned table of 480 cells: 4 genes in 12 groups")
})

test_that("a sparse, dense, long, SingleCellExperiment or Seurat input gives the same table", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  cells <- panel_cells()
  m <- panel_matrix(cells)
  keep <- c("mouse", "genotype", "hemisphere", "region")
  bin <- function(counts, cells_table = cells, ...) {
    wisp_bin(counts, cells_table, position = "depth", bins = 8, range = c(0, 800),
             cell = "cell_id", keep = keep, ...)
  }
  dense <- bin(m)
  genes_by_cells <- Matrix::Matrix(t(m), sparse = TRUE)
  expect_s4_class(genes_by_cells, "dgCMatrix")
  expect_identical(bin(genes_by_cells), dense)
  expect_identical(bin(Matrix::Matrix(m, sparse = TRUE)), dense)
  expect_identical(bin(methods::as(genes_by_cells, "TsparseMatrix")), dense)
  storage.mode(m) <- "integer"
  expect_identical(bin(m), dense)
  long <- data.frame(cell_id = rep(rownames(m), times = ncol(m)),
                     gene = rep(colnames(m), each = nrow(m)), count = as.vector(m))
  # a long table leaves out zeros (and so cells without counts); its genes are sorted
  expect_identical(bin(long[long$count > 0, ]), bin(m[, sort(colnames(m))]))

  sce <- SingleCellExperiment::SingleCellExperiment(
    assays = list(counts = genes_by_cells),
    colData = data.frame(cells[, c("depth", keep)], row.names = cells$cell_id))
  expect_identical(bin(sce, NULL), dense)
  expect_error(bin(sce, NULL, assay = "logcounts"), class = "wisp_input_error",
               regexp = "no assay 'logcounts'.*'counts'")

  meta <- cells[, c("depth", keep)]
  rownames(meta) <- cells$cell_id
  seurat <- suppressWarnings(SeuratObject::CreateSeuratObject(genes_by_cells, meta.data = meta))
  from_seurat <- bin(seurat, NULL)
  expect_identical(from_seurat, dense)
  expect_error(wisp_bin(seurat, position = "cortical_depth"), class = "wisp_input_error",
               regexp = "no column 'cortical_depth'")
  seurat5 <- seurat
  seurat5@assays[["RNA"]] <- structure(list(), class = "Assay5")
  expect_error(bin(seurat5, NULL), class = "wisp_input_error", regexp = "Seurat 5.*Assay5")
})

test_that("wisp() gives the same fit for the binned table as for the tokens", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  cells <- panel_cells()
  m <- panel_matrix(cells)
  absent <- cells$cell_id[c(20, 40)] # in the metadata, not in the matrix: zero counts
  m <- m[!rownames(m) %in% absent, ]
  keep <- c("mouse", "genotype", "hemisphere", "region")
  expect_warning(binned <- wisp_bin(m, cells, position = "depth", bins = 8, range = c(0, 800),
                                    cell = "cell_id", keep = keep),
                 "2 cells of `cells` are not in the count matrix.*zero counts")
  expect_warning(tokens <- bin_tokens(m, cells, position = "depth", bins = 8,
                                      range = c(0, 800), cell = "cell_id", keep = keep),
                 "not in the count matrix")
  expect_true(all(tokens$count[tokens$cell %in% absent] == 0))
  prepare <- function(d) {
    d$genotype <- factor(d$genotype, levels = c("WT", "KO"))
    d
  }
  fit <- function(d, ...) {
    suppressWarnings(wisp(prepare(d), variables = list(ran = "mouse", context = "region"),
                          verbose = FALSE, ...))
  }
  from_binned <- fit(binned)
  from_tokens <- fit(tokens)
  expect_identical(from_binned$exposure$rule, "given")
  expect_identical(from_tokens$exposure$rule, "cells")
  expect_identical(from_binned$fitted.parameters, from_tokens$fitted.parameters)
  expect_identical(from_binned$fix$names, c("genotype", "hemisphere"))
  expect_identical(from_binned$gene.tests$statistic, from_tokens$gene.tests$statistic)
  expect_identical(from_binned$count.data.summed[c("count", "exposure")],
                   from_tokens$count.data.summed[c("count", "exposure")])
  # the figures speak in positions: bin b's centre, 100 um bins from 0
  expect_identical(from_binned$bins$breaks, seq(0, 800, by = 100))
  figure <- plot(from_binned, type = "ratecount", species = "Gad1")
  expect_identical(figure$labels$x, "depth")
  expect_identical(ggplot2::layer_scales(figure)$x$get_labels(c(1, 4.5, 8)),
                   c("50", "400", "750"))
  expect_identical(plot(from_tokens, type = "ratecount", species = "Gad1")$labels$x, "depth")
  # the saved plan of a binned fit (format 3) drives the bootstrap alike
  boot <- function(f) bs_batch(f, 3, resample = "parametric", seed = 7, progress = FALSE)
  expect_identical(boot(from_binned)$replicates, boot(from_tokens)$replicates)
  # crossed: hemisphere as a fixed effect and the animal levels, with fixed degrees
  crossed_binned <- fit(binned, degrees = 1, fit_only = TRUE)
  crossed_tokens <- fit(tokens, degrees = 1, fit_only = TRUE)
  expect_identical(crossed_binned$fitted.parameters, crossed_tokens$fitted.parameters)
})

test_that("what needs single cells says so on a binned table", {
  cells <- panel_cells(240)
  binned <- wisp_bin(panel_matrix(cells), cells, position = "depth", bins = 8,
                     range = c(0, 800), cell = "cell_id", keep = c("mouse", "genotype", "region"))
  variables <- list(ran = "mouse", context = "region")
  expect_error(wisp(binned, variables = variables, verbose = FALSE,
                    model.settings = list(likelihood = "original")),
               class = "wisp_input_error", regexp = "binned.*format = \"tokens\"")
  expect_error(wisp(binned, variables = variables, verbose = FALSE,
                    model.settings = list(exposure = "cells")),
               class = "wisp_input_error", regexp = "own exposure column")
  fit <- suppressWarnings(wisp(binned, variables = variables, fit_only = TRUE, verbose = FALSE,
                               degrees = 1))
  expect_error(bs_batch(fit, 2, resample = "cells"), class = "wisp_input_error",
               regexp = "only their sums")
  # exposure = "none" ignores the column: a rate per (animal, bin)
  unit <- suppressWarnings(wisp(binned, variables = variables, fit_only = TRUE, verbose = FALSE,
                                degrees = 1, model.settings = list(exposure = "none")))
  expect_identical(unique(unit$count.data.summed$exposure[!is.na(unit$count.data.summed$exposure)]), 1)
})

test_that("bad input to the binned path is an input error naming the problem", {
  cells <- panel_cells(120)
  m <- panel_matrix(cells)
  bin <- function(counts, cells_table = cells, ...) {
    wisp_bin(counts, cells_table, position = "depth", bins = 4, range = c(0, 800),
             cell = "cell_id", ...)
  }
  unnamed <- m
  colnames(unnamed) <- NULL
  expect_error(bin(unnamed), class = "wisp_input_error", regexp = "genes as column names")
  stranger <- rbind(m, stranger = 1)
  expect_error(bin(stranger), class = "wisp_input_error", regexp = "not in `cells`.*stranger")
  twice <- m
  rownames(twice)[2] <- rownames(twice)[1]
  expect_error(bin(twice), class = "wisp_input_error", regexp = "repeated cell names.*k0001")
  sparse <- Matrix::Matrix(t(m), sparse = TRUE)
  sparse@x[3] <- -1
  expect_error(bin(sparse), class = "wisp_input_error", regexp = "-1 for gene .* in cell k")
  sparse@x[3] <- 2.5
  expect_error(bin(sparse), class = "wisp_input_error", regexp = "2.5 for gene")
  expect_error(bin(m, size = "weight"), class = "wisp_input_error", regexp = "no column 'weight'")
  cells$volume[5] <- 0
  expect_error(bin(m, size = "volume"), class = "wisp_input_error", regexp = "'volume'.*rows 5")
  expect_error(bin(m, format = "tokens", size = "volume"), class = "wisp_input_error",
               regexp = "format = \"binned\"")
  delayed <- DelayedArray::DelayedArray(t(m))
  expect_error(bin(delayed), class = "wisp_input_error", regexp = "as\\(counts, \"dgCMatrix\"\\)")
})
