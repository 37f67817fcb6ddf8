# wisp_bin(): per-cell positions and counts into the tokens wisp() takes.

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
  binned <- wisp_bin(long, cells, position = "depth", bins = 10, range = c(0, 1000),
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
  from_long <- wisp_bin(lab_long(cells, m), cells, position = "depth", bins = 10,
                        range = c(0, 1000), cell = "cell_id", gene = "gene_name", count = "n")
  from_matrix <- wisp_bin(m, cells, position = "depth", bins = 10, range = c(0, 1000),
                          cell = "cell_id")
  key <- function(d) order(d$cell, d$species)
  expect_equal(from_matrix[key(from_matrix), ], from_long[key(from_long), ],
               ignore_attr = TRUE)
  # a genes x cells matrix (as Seurat keeps counts) is recognised by its names
  expect_message(transposed <- wisp_bin(t(m), cells, position = "depth", bins = 10,
                                        range = c(0, 1000), cell = "cell_id"),
                 "genes x cells")
  expect_identical(transposed, from_matrix)
})

test_that("positions and metadata may be in the long table itself", {
  cells <- lab_cells()
  m <- lab_matrix(cells)
  long <- lab_long(cells, m)
  long <- cbind(long, cells[match(long$cell_id, cells$cell_id), c("depth", "animal")])
  binned <- wisp_bin(long, position = "depth", bins = 4, cell = "cell_id", gene = "gene_name",
                     count = "n")
  expect_named(binned, c("count", "bin", "species", "cell", "animal"))
  expect_identical(sort(unique(binned$bin)), 1:4)
})

test_that("normalised coordinates bin over the range given", {
  cells <- lab_cells()
  cells$depth <- cells$depth / 1000
  binned <- wisp_bin(lab_matrix(cells), cells, position = "depth", bins = 20, range = c(0, 1),
                     cell = "cell_id")
  depth <- cells$depth[match(binned$cell, cells$cell_id)]
  expect_identical(binned$bin, as.integer(pmin(floor(depth * 20) + 1, 20)))
})

test_that("bins without cells draw a warning that names them", {
  cells <- lab_cells()
  cells <- cells[cells$depth < 300 | cells$depth >= 500, ]
  expect_warning(wisp_bin(lab_matrix(cells), cells, position = "depth", bins = 10,
                          range = c(0, 1000), cell = "cell_id"),
                 "bins 4, 5 .*no cells")
})

test_that("the binned tokens fit, with the cell column kept out of the fixed effects", {
  cells <- lab_cells()
  binned <- wisp_bin(lab_matrix(cells), cells, position = "depth", bins = 10,
                     range = c(0, 1000), cell = "cell_id", keep = c("animal", "genotype", "region"))
  fit <- suppressWarnings(wisp(binned, variables = list(context = "region", ran = "animal"),
                               fit_only = TRUE, verbose = FALSE,
                               model.settings = list(LRO_cost = "none")))
  expect_identical(fit$fix$names, "genotype")
  expect_identical(fit$grouping.variables$species.lvls, c("Gad1", "Sst", "Vip"))
  expect_identical(nobs(fit) > 0, TRUE)
})

test_that("bad input to wisp_bin() is an input error naming the problem", {
  cells <- lab_cells()
  m <- lab_matrix(cells)
  bin <- function(...) wisp_bin(m, cells, position = "depth", cell = "cell_id", ...)
  expect_error(bin(bins = 0), class = "wisp_input_error", regexp = "bins")
  expect_error(wisp_bin(m, cells, position = "dpth", cell = "cell_id"),
               class = "wisp_input_error", regexp = "did you mean 'depth'")
  expect_error(bin(range = c(0, 500)), class = "wisp_input_error", regexp = "outside")
  expect_error(wisp_bin(m, cells[-1, ], position = "depth", cell = "cell_id"),
               class = "wisp_input_error", regexp = "cell001")
  long <- lab_long(cells, m)
  expect_error(wisp_bin(rbind(long, long[1, ]), cells, position = "depth", cell = "cell_id",
                        gene = "gene_name", count = "n"),
               class = "wisp_input_error", regexp = "more than one row")
})
