# The real MERFISH data of ../shared/data (the original's S1 tutorial data:
# 54,116 cells x 6 genes of 4 mice, two per age, both hemispheres), which
# nobody on the team simulated. Found through WISPACK_SHARED_DATA (the test
# command sets it to ../shared/data beside the repository). It is not ours
# to redistribute, so nothing of it is committed; where it is absent the
# test skips, and tools/test.sh reports that as a line of its own ("Real
# data test: NOT RUN"), not as a skipped test.

shared_data_file <- function(name) {
  dir <- Sys.getenv("WISPACK_SHARED_DATA", "")
  if (!nzchar(dir)) return(NULL)
  path <- file.path(dir, name)
  if (file.exists(path)) path else NULL
}

test_that("on the real S1 data, the binned table of wisp_bin() fits as the tokens do", {
  skip_on_cran()
  path <- shared_data_file("S1_laminar_countdata.csv.gz")
  if (is.null(path)) {
    skip(paste0("no real data: WISPACK_SHARED_DATA (", Sys.getenv("WISPACK_SHARED_DATA"),
                ") has no S1_laminar_countdata.csv.gz"))
  }
  tokens <- utils::read.csv(path, stringsAsFactors = FALSE)
  context <- if ("context" %in% names(tokens)) "context" else "cortex"
  expect_identical(nrow(tokens), 324696L)
  # The lab's form: a cells x genes matrix and a table of the cells.
  cells <- tokens[!duplicated(tokens$cell_num),
                  c("cell_num", "bin", context, "mouse", "hemisphere", "age")]
  genes <- sort(unique(tokens$gene))
  counts <- matrix(0, nrow(cells), length(genes),
                   dimnames = list(as.character(cells$cell_num), genes))
  counts[cbind(match(tokens$cell_num, cells$cell_num), match(tokens$gene, genes))] <- tokens$count
  sparse <- Matrix::Matrix(t(counts), sparse = TRUE)
  binned <- wisp_bin(sparse, cells, position = "bin", bins = seq(0.5, 100.5, by = 1),
                     cell = "cell_num")
  # The tally by hand: per mouse, hemisphere and bin, the summed count of
  # each gene and the number of cells.
  key <- paste(tokens$mouse, tokens$hemisphere, tokens$bin, tokens$gene)
  rows <- paste(binned$mouse, binned$hemisphere, binned$bin, binned$species)
  expect_setequal(rows, unique(key))
  expect_identical(binned$count, as.numeric(tapply(tokens$count, key, sum)[rows]))
  cell_key <- paste(cells$mouse, cells$hemisphere, cells$bin)
  expect_identical(binned$cells,
                   as.integer(table(cell_key)[paste(binned$mouse, binned$hemisphere, binned$bin)]))
  variables <- list(species = "gene", ran = "mouse", context = context,
                    fixedeffects = c("hemisphere", "age"), cell = "cell_num")
  from_tokens <- suppressWarnings(wisp(tokens, variables = variables, verbose = FALSE,
                                       fit_only = TRUE))
  variables$cell <- NULL
  variables$species <- "species"
  from_binned <- suppressWarnings(wisp(binned, variables = variables, verbose = FALSE,
                                       fit_only = TRUE))
  expect_identical(from_tokens$exposure$rule, "cells")
  expect_identical(from_binned$exposure$rule, "given")
  expect_identical(from_binned$fitted.parameters, from_tokens$fitted.parameters)
  expect_true(all(from_binned$gene.qc$converged))
  # Rorb peaks in L4 (bins 65-78.5 of the atlas' boundaries): its largest
  # fitted rate of the reference treatment lies in L4 or next to it.
  curve <- predict(from_binned, newdata = data.frame(
    bin = 1:100, context = from_binned$grouping.variables$context.lvls[1], species = "Rorb",
    hemisphere = "left", age = from_binned$fix$ref.lvl[["age"]]), type = "response")
  expect_gt(which.max(curve), 55)
  expect_lt(which.max(curve), 90)
})
