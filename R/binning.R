#' Bin per-cell positions and counts into the tokens wisp() takes
#'
#' Turns a lab's per-cell data (each cell's position along the spatial axis,
#' e.g. cortical depth in micrometres or a normalised 0-1 coordinate, its
#' metadata, and its counts of each gene) into the long format of [wisp()]:
#' one token per cell and gene, zero counts included, with the position
#' replaced by a bin number 1, 2, ..., `bins` and the cell's id kept in a
#' column `cell`.
#'
#' Bins are of equal width over `range` (`bins` a number), or lie between
#' the break points given (`bins` a vector); a bin holds the positions from
#' its lower break up to, not including, its upper break, and the last bin
#' includes its upper break. Bins in which no cell lies draw a warning:
#' [wisp()] takes bins as consecutive positions, so an empty bin is a gap in
#' space (use fewer bins, or a `range` that matches the tissue).
#'
#' @param counts The counts, either
#'   * a data.frame with one row per cell and gene (rows of zero counts may
#'     be left out: they are filled in), with columns named by `cell`, `gene`
#'     and `count`; without `cells`, it also holds the position and the
#'     cells' metadata, which must be the same on every row of a cell; or
#'   * a matrix with one row per cell and one column per gene (column names:
#'     the genes; row names: the cell ids, else the rows are the cells of
#'     `cells` in order). A genes x cells matrix (as Seurat and
#'     SingleCellExperiment keep counts) is recognised by its column names
#'     being the cell ids, and turned round with a message.
#' @param cells A data.frame with one row per cell: its id (column `cell`),
#'   its position (column `position`) and any metadata (animal, genotype,
#'   region, ...). Needed with a matrix; optional with a data.frame. Cells
#'   of `cells` that have no counts get zero counts for every gene.
#' @param position Name of the column with the cells' positions (numbers).
#' @param bins Number of bins of equal width over `range`, or the increasing
#'   break points of the bins (e.g. `seq(0, 1000, by = 25)` for 25 um bins).
#' @param range The positions that the equal-width bins cover, `c(lower,
#'   upper)`: e.g. `c(0, 1)` for normalised coordinates (default: the range
#'   of the positions). Positions outside it are an error.
#' @param cell,gene,count Names of the columns with the cell ids (in `cells`
#'   and in a data.frame `counts`), the genes and the counts (in a
#'   data.frame `counts`).
#' @param keep Metadata columns to keep (default: every column of `cells`, or
#'   of a data.frame `counts` without `cells`, other than the id, position,
#'   gene and count). Every kept column is a role or a fixed effect for
#'   [wisp()]: keep only those the model should see.
#' @return A data.frame with one row per cell and gene: `count`, `bin`
#'   (1..number of bins), `species` (the gene), `cell` (the id), and the kept
#'   metadata columns. Cells with an `NA` position are dropped with a
#'   warning.
#' @seealso [wisp()], whose `variables` maps the metadata columns to roles.
#' @export
#' @examples
#' set.seed(1)
#' cells <- data.frame(id = sprintf("c%d", 1:200), depth = runif(200, 0, 1000),
#'                     mouse = rep(c("m1", "m2", "m3", "m4"), 50),
#'                     genotype = rep(c("WT", "WT", "KO", "KO"), 50), region = "S1")
#' counts <- matrix(rpois(600, rep(1 + 4 * (cells$depth > 500), 3)), 200, 3,
#'                  dimnames = list(cells$id, c("Gad1", "Sst", "Vip")))
#' tokens <- wisp_bin(counts, cells, position = "depth", bins = 10, range = c(0, 1000),
#'                    cell = "id")
#' head(tokens)
#' tokens$genotype <- factor(tokens$genotype, levels = c("WT", "KO")) # WT: reference
#' fit <- wisp(tokens, variables = list(ran = "mouse", context = "region"), verbose = FALSE,
#'             model.settings = list(LRO_cost = "none"))
wisp_bin <- function(counts, cells = NULL, position = "position", bins = 40, range = NULL,
                     cell = "cell", gene = "gene", count = "count", keep = NULL) {
  call <- sys.call()
  fail <- function(...) stop_input(..., call = call)
  for (name in c("position", "cell", "gene", "count")) {
    value <- get(name)
    if (!is.character(value) || length(value) != 1L || is.na(value) || !nzchar(value)) {
      fail("`", name, "` must be one column name, not ", describe_value(value), ".")
    }
  }
  if (!is.null(cells) && (!is.data.frame(cells) || !nrow(cells))) {
    fail("`cells` must be a data.frame with one row per cell, or NULL.")
  }
  has_column <- function(frame, column, what) {
    if (!column %in% names(frame)) {
      fail("`", what, "` has no column '", column, "'", suggest_columns(column, names(frame)), ".")
    }
  }

  if (is.data.frame(counts)) {
    for (column in c(cell, gene, count)) has_column(counts, column, "counts")
    if (is.null(cells)) {
      has_column(counts, position, "counts")
      cells <- cell_table(counts, cell, setdiff(names(counts), c(gene, count)), fail)
    }
    matrix <- long_to_matrix(counts, cells, cell, gene, count, fail)
  } else if (length(dim(counts)) == 2L) {
    if (is.null(cells)) fail("a count matrix needs `cells`, the cells' positions and metadata.")
    matrix <- as.matrix(counts)
    if (!is.numeric(matrix)) fail("the count matrix must hold numbers, not ", typeof(matrix), ".")
    has_column(cells, cell, "cells")
    ids <- as.character(cells[[cell]])
    if (!is.null(colnames(matrix)) && all(ids %in% colnames(matrix)) &&
        !all(ids %in% rownames(matrix))) {
      message("wisp_bin(): the count matrix has the cells in its columns (genes x cells); ",
              "taking it turned round.")
      matrix <- t(matrix)
    }
    if (is.null(colnames(matrix)) || anyNA(colnames(matrix)) || anyDuplicated(colnames(matrix))) {
      fail("the count matrix needs its genes as distinct column names.")
    }
    if (is.null(rownames(matrix))) {
      if (nrow(matrix) != nrow(cells)) {
        fail("the count matrix has ", nrow(matrix), " rows and no row names, but `cells` has ",
             nrow(cells), " rows; name the rows by cell id.")
      }
      rownames(matrix) <- ids
    }
    missing <- setdiff(rownames(matrix), ids)
    if (length(missing)) {
      fail(length(missing), " cell(s) of the count matrix are not in `cells` (",
           row_list(missing), ").")
    }
  } else {
    fail("`counts` must be a data.frame (one row per cell and gene) or a cells x genes ",
         "matrix, not ", class(counts)[1], ".")
  }

  has_column(cells, cell, "cells")
  has_column(cells, position, "cells")
  ids <- as.character(cells[[cell]])
  if (anyNA(ids) || anyDuplicated(ids)) {
    twice <- ids[duplicated(ids) | is.na(ids)]
    fail("`cells` must have one row per cell: the id column '", cell, "' has ",
         if (anyNA(ids)) "NA values" else paste0("repeated ids (", row_list(unique(twice)), ")"),
         ".")
  }
  if (is.null(keep)) {
    keep <- setdiff(names(cells), c(cell, position, gene, count))
  } else {
    if (!is.character(keep) || anyNA(keep)) fail("`keep` must be column names of the cells.")
    for (column in keep) has_column(cells, column, "cells")
  }
  clash <- intersect(keep, c("count", "bin", "species", "cell"))
  if (length(clash)) {
    fail("the kept column '", clash[1], "' has the name of a column wisp_bin() makes; rename ",
         "it, or leave it out of `keep`.")
  }
  values <- cells[[position]]
  if (!is.numeric(values) || is.factor(values)) {
    fail("the position column '", position, "' must hold numbers, not ", class(values)[1], ".")
  }
  dropped <- is.na(values)
  if (all(dropped)) fail("every position in column '", position, "' is NA.")
  if (any(dropped)) {
    warning(sprintf("wisp_bin(): dropped %s with an NA position (%s).",
                    count_noun(sum(dropped), "cell"), row_list(ids[dropped])), call. = FALSE)
  }
  bin <- position_bins(values[!dropped], bins, range, position, ids[!dropped], fail)
  cells <- cells[!dropped, , drop = FALSE]
  ids <- ids[!dropped]

  # one row per cell (in the order of `cells`) and gene; cells without counts: zeros
  at <- match(ids, rownames(matrix))
  n_genes <- ncol(matrix)
  values <- matrix[at, , drop = FALSE]
  values[is.na(at), ] <- 0
  row <- rep(seq_along(ids), each = n_genes)
  out <- data.frame(count = as.vector(t(values)) + 0, bin = bin[row],
                    species = rep(colnames(matrix), times = length(ids)),
                    stringsAsFactors = FALSE)
  out$cell <- cells[[cell]][row]
  for (column in keep) out[[column]] <- cells[[column]][row]
  rownames(out) <- NULL
  out
}

# One row per cell of a long table: the id and every other column, which
# must be the same on every row of the cell.
cell_table <- function(long, cell, columns, fail) {
  ids <- as.character(long[[cell]])
  first <- !duplicated(ids)
  for (column in setdiff(columns, cell)) {
    distinct <- !duplicated(paste(ids, as.character(long[[column]]), sep = "\r"))
    varies <- unique(ids[distinct][duplicated(ids[distinct])])
    if (length(varies)) {
      fail("column '", column, "' differs between the rows of cell", if (length(varies) > 1) "s",
           " ", row_list(varies), "; a cell's position and metadata must be the same on each of ",
           "its rows (give them in `cells`, one row per cell, or leave the column out).")
    }
  }
  long[first, columns, drop = FALSE]
}

# The cells x genes count matrix of a long table (rows: the cells of `cells`
# that have counts; absent cell-gene pairs: 0).
long_to_matrix <- function(long, cells, cell, gene, count, fail) {
  values <- long[[count]]
  if (!is.numeric(values) || is.factor(values)) {
    fail("the count column '", count, "' must hold numbers, not ", class(values)[1], ".")
  }
  ids <- as.character(long[[cell]])
  genes <- as.character(long[[gene]])
  if (anyNA(ids) || anyNA(genes)) fail("the cell and gene columns must not hold NA.")
  known <- as.character(cells[[cell]])
  unknown <- setdiff(ids, known)
  if (length(unknown)) {
    fail(length(unknown), " cell(s) of `counts` are not in `cells` (", row_list(unknown), ").")
  }
  twice <- duplicated(paste(ids, genes, sep = "\r"))
  if (any(twice)) {
    fail("cell ", ids[twice][1], " and gene ", genes[twice][1], " are on more than one row ",
         "of `counts` (", count_noun(sum(twice), "repeated pair"), "); give one row per cell ",
         "and gene.")
  }
  cell_ids <- unique(ids)
  gene_ids <- sorted_levels(genes)
  matrix <- matrix(0, length(cell_ids), length(gene_ids), dimnames = list(cell_ids, gene_ids))
  matrix[cbind(match(ids, cell_ids), match(genes, gene_ids))] <- values
  matrix
}

# Bin numbers of positions: equal-width bins over `range`, or the bins
# between the break points `bins`.
position_bins <- function(values, bins, range, position, ids, fail) {
  if (!is.numeric(bins) || anyNA(bins) || !length(bins) || any(!is.finite(bins))) {
    fail("`bins` must be a number of bins or increasing break points.")
  }
  if (length(bins) == 1L) {
    if (bins < 1 || bins != round(bins) || bins > model_rules()$limits$max_bins) {
      fail("`bins` must be a whole number between 1 and ", model_rules()$limits$max_bins,
           " (or break points), not ", describe_value(bins), ".")
    }
    if (is.null(range)) range <- base::range(values)
    if (!is.numeric(range) || length(range) != 2L || anyNA(range) || any(!is.finite(range)) ||
        range[2] <= range[1]) {
      if (is.null(range) || identical(diff(range), 0)) {
        fail("every position in column '", position, "' is the same; give `range`.")
      }
      fail("`range` must be two increasing numbers, c(lower, upper).")
    }
    breaks <- seq(range[1], range[2], length.out = bins + 1L)
  } else {
    breaks <- bins
    if (any(diff(breaks) <= 0)) fail("the break points in `bins` must increase.")
    if (length(breaks) - 1L > model_rules()$limits$max_bins) {
      fail("`bins` makes more than ", model_rules()$limits$max_bins, " bins.")
    }
  }
  outside <- values < breaks[1] | values > breaks[length(breaks)]
  if (any(outside)) {
    fail(count_noun(sum(outside), "cell"), " lie outside the bins, ", breaks[1], " to ",
         breaks[length(breaks)], " (", row_list(ids[outside]), "); widen `range` or `bins`, ",
         "or drop those cells.")
  }
  bin <- findInterval(values, breaks, rightmost.closed = TRUE)
  n <- length(breaks) - 1L
  empty <- setdiff(seq_len(n), bin)
  if (length(empty)) {
    warning(sprintf(paste0(
      "wisp_bin(): bin%s %s of 1..%d %s no cells. wisp() takes bins as consecutive positions, ",
      "so an empty bin is a gap in space: use fewer bins, or a `range` that matches the tissue."),
      if (length(empty) > 1) "s" else "", row_list(empty, 10), n,
      if (length(empty) > 1) "have" else "has"), call. = FALSE)
  }
  as.integer(bin)
}
