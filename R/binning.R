#' Bin per-cell positions and counts into the table wisp() fits
#'
#' Turns a lab's per-cell data (each cell's position along the spatial axis,
#' e.g. cortical depth in micrometres or a normalised 0-1 coordinate, its
#' metadata, and its counts of each gene) into what [wisp()] fits: by
#' default a **binned table**, one row per gene and (bin, metadata) group of
#' cells with the summed count and the exposure (the number of cells, or
#' their summed sizes), or with `format = "tokens"` the original's long
#' format, one token per cell and gene.
#'
#' The count likelihood needs only the sums, so the binned table is the
#' compact form of the same data: a panel of 10^6 cells x 500 genes becomes
#' groups x bins x genes rows, and a sparse count matrix is summed where it
#' lies (its `@i`, `@p` and `@x`, read without a copy), without ever making a
#' cells x genes table. [wisp()] gives the same fit for the binned table as
#' for the tokens. Only what needs single cells needs tokens:
#' `resample = "cells"` in [bs_batch()] and `likelihood = "original"`.
#'
#' Bins are of equal width over `range` (`bins` a number), or lie between
#' the break points given (`bins` a vector); a bin holds the positions from
#' its lower break up to, not including, its upper break, and the last bin
#' includes its upper break. Bins in which no cell lies draw a warning:
#' [wisp()] takes bins as consecutive positions, so an empty bin is a gap in
#' space (use fewer bins, or a `range` that matches the tissue).
#'
#' @param counts The counts, one of
#'   * a matrix or a sparse matrix of the Matrix package (e.g. a
#'     `dgCMatrix`), either genes x cells (as Seurat and SingleCellExperiment
#'     keep counts; recognised by its column names being the cell ids) or
#'     cells x genes. Gene names are the other dimension's names; without
#'     cell names, the cells are those of `cells`, in order;
#'   * a `SingleCellExperiment` (or any `SummarizedExperiment`): the assay
#'     `assay`, with the cells' metadata from its `colData` (unless `cells`
#'     is given) and the cell ids its column names;
#'   * a Seurat object (read with SeuratObject 4): the `counts` of its
#'     default assay, with the metadata from its `meta.data`;
#'   * a data.frame with one row per cell and gene (rows of zero counts may
#'     be left out), with columns named by `cell`, `gene` and `count`;
#'     without `cells`, it also holds the position and the cells' metadata,
#'     which must be the same on every row of a cell.
#'
#'   Counts must be non-negative whole numbers. A DelayedArray (e.g.
#'   HDF5-backed) assay is refused: convert it with `as(x, "dgCMatrix")`.
#' @param cells A data.frame with one row per cell: its id (column `cell`),
#'   its position (column `position`) and any metadata (animal, genotype,
#'   region, ...). Needed with a matrix; optional with a data.frame, a
#'   SingleCellExperiment or a Seurat object. Cells of `cells` that the
#'   counts do not have get zero counts for every gene (with a warning that
#'   says how many).
#' @param position Name of the column with the cells' positions (numbers).
#' @param bins Number of bins of equal width over `range`, or the increasing
#'   break points of the bins (e.g. `seq(0, 1000, by = 25)` for 25 um bins).
#' @param range The positions that the equal-width bins cover, `c(lower,
#'   upper)`: e.g. `c(0, 1)` for normalised coordinates (default: the range
#'   of the positions). Positions outside it are an error.
#' @param cell,gene,count Names of the columns with the cell ids (in `cells`
#'   and in a data.frame `counts`), the genes and the counts (in a
#'   data.frame `counts`). For a SingleCellExperiment or Seurat object
#'   without `cells`, the cell ids are its column names.
#' @param keep Metadata columns to keep (default: every column of `cells`, or
#'   of a data.frame `counts` without `cells`, other than the id, position,
#'   size, gene and count). Every kept column is a role or a fixed effect for
#'   [wisp()], and the binned table has a row per combination of their
#'   values that has cells: keep only those the model should see.
#' @param size Optional name of a column of `cells` with each cell's size
#'   (e.g. its volume or total count), summed into the exposure instead of 1
#'   per cell; positive numbers. Binned tables only.
#' @param format `"binned"` (default): the binned table; `"tokens"`: one row
#'   per cell and gene.
#' @param assay The assay of a SingleCellExperiment to read (default
#'   `"counts"`).
#' @param unit Optional unit of the positions (e.g. `"um"`), kept with the
#'   bin breaks.
#' @return With `format = "binned"`, a data.frame of class `wisp_binned`,
#'   one row per gene and (group of cells, bin) that has cells: `count` (the
#'   gene's summed count), `exposure` (the cells, or their summed sizes),
#'   `cells` (the number of cells), `bin` (1..number of bins), `species`
#'   (the gene) and the kept metadata columns; its attributes `breaks`,
#'   `position`, `unit` and `size` say how it was binned. With `format =
#'   "tokens"`, a data.frame with one row per cell and gene: `count`, `bin`,
#'   `species`, `cell` (the id) and the kept metadata columns, with the same
#'   attributes. Cells with an `NA` position are dropped with a warning.
#'   [wisp()] keeps the breaks (`fit$bins`), and its figures label the
#'   spatial axis in positions.
#' @seealso [wisp()], whose `variables` maps the metadata columns to roles.
#' @export
#' @examples
#' set.seed(1)
#' cells <- data.frame(id = sprintf("c%d", 1:200), depth = runif(200, 0, 1000),
#'                     mouse = rep(c("m1", "m2", "m3", "m4"), 50),
#'                     genotype = rep(c("WT", "WT", "KO", "KO"), 50), region = "S1")
#' counts <- matrix(rpois(600, rep(1 + 4 * (cells$depth > 500), 3)), 200, 3,
#'                  dimnames = list(cells$id, c("Gad1", "Sst", "Vip")))
#' binned <- wisp_bin(counts, cells, position = "depth", bins = 10, range = c(0, 1000),
#'                    cell = "id", unit = "um")
#' binned
#' binned$genotype <- factor(binned$genotype, levels = c("WT", "KO")) # WT: reference
#' fit <- wisp(binned, variables = list(ran = "mouse", context = "region"), verbose = FALSE,
#'             model.settings = list(LRO_cost = "none"))
wisp_bin <- function(counts, cells = NULL, position = "position", bins = 40, range = NULL,
                     cell = "cell", gene = "gene", count = "count", keep = NULL, size = NULL,
                     format = c("binned", "tokens"), assay = "counts", unit = NULL) {
  call <- sys.call()
  fail <- function(...) stop_input(..., call = call)
  format <- match_choice(format[1], "format", c("binned", "tokens"), call = call)
  for (name in c("position", "cell", "gene", "count", "assay")) {
    value <- get(name)
    if (!is.character(value) || length(value) != 1L || is.na(value) || !nzchar(value)) {
      fail("`", name, "` must be one column name, not ", describe_value(value), ".")
    }
  }
  if (!is.null(size) && (!is.character(size) || length(size) != 1L || is.na(size))) {
    fail("`size` must be NULL or one column name of `cells`, not ", describe_value(size), ".")
  }
  if (!is.null(size) && format == "tokens") {
    fail("`size` sums cell sizes into a binned table's exposure; tokens keep one row per ",
         "cell (use format = \"binned\", or leave `size` out).")
  }
  if (!is.null(unit) && (!is.character(unit) || length(unit) != 1L || is.na(unit))) {
    fail("`unit` must be NULL or one string (e.g. \"um\"), not ", describe_value(unit), ".")
  }
  long <- FALSE
  container <- experiment_counts(counts, cells, cell, assay, fail)
  counts <- container$counts
  cells <- container$cells
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
    counts <- long_to_matrix(counts, cells, cell, gene, count, fail)
    long <- TRUE
  } else if (length(dim(counts)) != 2L) {
    fail("`counts` must be a matrix (cells x genes or genes x cells), a sparse matrix, a ",
         "SingleCellExperiment, a Seurat object or a data.frame (one row per cell and gene), ",
         "not ", class(counts)[1], ".")
  } else if (is.null(cells)) {
    fail("a count matrix needs `cells`, the cells' positions and metadata.")
  }
  has_column(cells, cell, "cells")
  has_column(cells, position, "cells")
  if (!is.null(size)) has_column(cells, size, "cells")
  ids <- as.character(cells[[cell]])
  if (anyNA(ids) || anyDuplicated(ids)) {
    twice <- ids[duplicated(ids) | is.na(ids)]
    fail("`cells` must have one row per cell: the id column '", cell, "' has ",
         if (anyNA(ids)) "NA values" else paste0("repeated ids (", row_list(unique(twice)), ")"),
         ".")
  }
  matrix <- count_matrix(counts, ids, fail)
  if (matrix$cells_in_columns && !long && !container$experiment && !inherits(counts, "Matrix")) {
    message("wisp_bin(): the count matrix has the cells in its columns (genes x cells); ",
            "reading it so.")
  }
  # A long table leaves out the cells without counts: they are zeros.
  if (long) matrix$absent <- character()

  if (is.null(keep)) {
    keep <- setdiff(names(cells), c(cell, position, gene, count, size))
  } else {
    if (!is.character(keep) || anyNA(keep)) fail("`keep` must be column names of the cells.")
    for (column in keep) has_column(cells, column, "cells")
  }
  made <- if (format == "tokens") c("count", "bin", "species", "cell") else
    c("count", "exposure", "cells", "bin", "species")
  clash <- intersect(keep, made)
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
  breaks <- bin_breaks(values[!dropped], bins, range, position, fail)
  bin <- rep(NA_integer_, length(values))
  bin[!dropped] <- position_bins(values[!dropped], breaks, position, ids[!dropped], fail)
  if (length(matrix$absent)) {
    warning(sprintf(paste0(
      "wisp_bin(): %s of `cells` %s not in the count matrix (%s); %s zero counts for every ",
      "gene."), count_noun(length(matrix$absent), "cell"),
      if (length(matrix$absent) > 1) "are" else "is", row_list(matrix$absent),
      if (length(matrix$absent) > 1) "they get" else "it gets"), call. = FALSE)
  }
  if (format == "tokens") {
    tokens <- binned_tokens(matrix, cells, ids, bin, dropped, keep, cell)
    return(structure(tokens, breaks = breaks, position = position, unit = unit))
  }
  sizes <- if (is.null(size)) NULL else cell_sizes(cells[[size]], size, dropped, fail)
  with_memory_advice(
    binned_table(matrix, cells, bin, keep, sizes, breaks, position, unit, size, fail),
    paste0("keep fewer metadata columns (`keep`: each makes more groups), use fewer bins, or ",
           "bin the genes in parts (columns of the matrix) and rbind() the tables"), call = call)
}

# The counts and the cells' metadata of a SingleCellExperiment (any
# SummarizedExperiment) or a Seurat object; other counts as they are. A
# DelayedArray is refused: reading it whole would be the copy binning avoids.
experiment_counts <- function(counts, cells, cell, assay, fail) {
  metadata <- function(frame, ids) {
    frame <- as.data.frame(frame, stringsAsFactors = FALSE, optional = TRUE)
    if (cell %in% names(frame)) {
      fail("the cells' metadata already have a column '", cell, "'; name the cell-id column ",
           "wisp_bin() makes with `cell`.")
    }
    frame[[cell]] <- ids
    rownames(frame) <- NULL
    frame
  }
  experiment <- inherits(counts, c("SummarizedExperiment", "Seurat"))
  if (inherits(counts, "SummarizedExperiment")) {
    if (!requireNamespace("SummarizedExperiment", quietly = TRUE)) {
      fail("reading a ", class(counts)[1], " needs the SummarizedExperiment package.")
    }
    if (!assay %in% SummarizedExperiment::assayNames(counts)) {
      fail("the ", class(counts)[1], " has no assay '", assay, "' (assays: ",
           paste0("'", SummarizedExperiment::assayNames(counts), "'", collapse = ", "), ").")
    }
    ids <- colnames(counts)
    if (is.null(ids)) fail("the ", class(counts)[1], " has no column names (cell ids).")
    if (is.null(cells)) cells <- metadata(SummarizedExperiment::colData(counts), ids)
    counts <- SummarizedExperiment::assay(counts, assay, withDimnames = TRUE)
  } else if (inherits(counts, "Seurat")) {
    if (!requireNamespace("SeuratObject", quietly = TRUE)) {
      fail("reading a Seurat object needs the SeuratObject package.")
    }
    default <- SeuratObject::DefaultAssay(counts)
    assay_object <- tryCatch(methods::slot(counts, "assays")[[default]], error = function(e) NULL)
    if (inherits(assay_object, "Assay5")) {
      fail(
        "this Seurat object keeps its assay '", default, "' in Seurat 5's format (Assay5), ",
        "which the installed SeuratObject (", utils::packageVersion("SeuratObject"), ") ",
        "cannot read; convert it with SeuratObject::JoinLayers() and ",
        "as(object[[\"", default, "\"]], \"Assay\") in Seurat 5, or give its counts matrix ",
        "and meta.data.")
    }
    if (is.null(cells)) cells <- metadata(counts@meta.data, rownames(counts@meta.data))
    counts <- SeuratObject::GetAssayData(counts, slot = "counts", assay = default)
  }
  if (inherits(counts, "DelayedArray")) {
    fail("the counts are a ", class(counts)[1], " (held on disk or delayed); read them into ",
         "memory first with as(counts, \"dgCMatrix\").")
  }
  list(counts = counts, cells = cells, experiment = experiment)
}

# A count matrix as the binning kernel reads it: dense (a base matrix) or
# column-compressed sparse, with the cells in its columns or rows, its gene
# names, the metadata row of each of its cells, and the ids of the metadata's
# cells that it lacks.
count_matrix <- function(counts, ids, fail) {
  if (inherits(counts, "sparseMatrix")) {
    if (!inherits(counts, "CsparseMatrix") || !methods::is(counts, "generalMatrix") ||
        !methods::is(counts, "dMatrix")) {
      counts <- methods::as(methods::as(methods::as(counts, "CsparseMatrix"),
                                        "generalMatrix"), "dMatrix")
    }
  } else {
    counts <- as.matrix(counts)
    if (!is.numeric(counts) && !is.logical(counts)) {
      fail("the count matrix must hold numbers, not ", typeof(counts), ".")
    }
    if (is.logical(counts)) storage.mode(counts) <- "integer"
  }
  names <- dimnames(counts)
  if (is.null(names)) names <- list(NULL, NULL)
  in_columns <- !is.null(names[[2]]) && all(names[[2]] %in% ids) &&
    !(!is.null(names[[1]]) && all(names[[1]] %in% ids))
  genes <- if (in_columns) names[[1]] else names[[2]]
  cell_ids <- if (in_columns) names[[2]] else names[[1]]
  n_cells <- if (in_columns) ncol(counts) else nrow(counts)
  side <- if (in_columns) "row" else "column"
  if (is.null(genes) || anyNA(genes) || any(!nzchar(genes))) {
    fail("the count matrix needs its genes as ", side, " names (the cells are in its ",
         if (in_columns) "columns" else "rows", ").")
  }
  if (anyDuplicated(genes)) {
    fail("the count matrix names gene '", genes[anyDuplicated(genes)], "' more than once.")
  }
  if (is.null(cell_ids)) {
    if (n_cells != length(ids)) {
      fail("the count matrix has ", n_cells, " cells and no cell names, but `cells` has ",
           length(ids), " rows; name the matrix's cells by cell id.")
    }
    cell_ids <- ids
  }
  if (anyNA(cell_ids) || anyDuplicated(cell_ids)) {
    twice <- cell_ids[duplicated(cell_ids) | is.na(cell_ids)]
    fail("the count matrix must name each cell once; it has ",
         if (anyNA(cell_ids)) "NA cell names" else
           paste0("repeated cell names (", row_list(unique(twice)), ")"), ".")
  }
  row <- match(cell_ids, ids)
  if (anyNA(row)) {
    missing <- cell_ids[is.na(row)]
    fail(length(missing), " cell(s) of the count matrix are not in `cells` (",
         row_list(missing), ").")
  }
  list(counts = counts, cells_in_columns = in_columns, genes = genes,
       metadata_row = row - 1L, absent = setdiff(ids, cell_ids))
}

# One token per cell (in the order of `cells`) and gene; cells without counts:
# zeros. Densifies the matrix: tokens are cells x genes rows anyway.
binned_tokens <- function(matrix, cells, ids, bin, dropped, keep, cell) {
  counts <- matrix$counts
  if (matrix$cells_in_columns) counts <- Matrix_t(counts)
  counts <- as.matrix(counts)
  at <- rep(NA_integer_, length(ids))
  at[matrix$metadata_row + 1L] <- seq_len(nrow(counts))
  at <- at[!dropped]
  values <- counts[at, , drop = FALSE]
  values[is.na(at), ] <- 0
  cells <- cells[!dropped, , drop = FALSE]
  n_genes <- length(matrix$genes)
  row <- rep(seq_len(nrow(cells)), each = n_genes)
  out <- data.frame(count = as.vector(t(values)) + 0, bin = bin[!dropped][row],
                    species = rep(matrix$genes, times = nrow(cells)),
                    stringsAsFactors = FALSE)
  out$cell <- cells[[cell]][row]
  for (column in keep) out[[column]] <- cells[[column]][row]
  rownames(out) <- NULL
  out
}

Matrix_t <- function(x) if (inherits(x, "Matrix")) Matrix::t(x) else t(x)

# The binned table: the groups of cells that share every kept column's
# value, and per (group, bin) with cells and gene the summed count (the
# Rust core sums the matrix where it lies).
binned_table <- function(matrix, cells, bin, keep, sizes, breaks, position, unit, size, fail) {
  n_bins <- length(breaks) - 1L
  group <- rep(1L, nrow(cells))
  for (column in keep) {
    values <- cells[[column]]
    if (anyNA(values)) {
      fail("the kept column '", column, "' has ", sum(is.na(values)), " NA value(s) (rows ",
           row_list(which(is.na(values))), "); give every cell a value, or leave it out of ",
           "`keep`.")
    }
    codes <- match(values, unique(values))
    key <- (group - 1) * max(codes) + codes
    group <- match(key, unique(key))
  }
  slot <- ifelse(is.na(bin), -1L, (group - 1L) * n_bins + bin - 1L)
  counts <- matrix$counts
  sparse <- inherits(counts, "CsparseMatrix")
  summed <- bin_counts_rust(
    if (sparse) counts@x else counts, if (sparse) counts@i else NULL,
    if (sparse) counts@p else NULL, nrow(counts), ncol(counts), matrix$cells_in_columns,
    as.integer(slot), sizes, as.integer(matrix$metadata_row), as.double(max(group) * n_bins))
  if (!is.null(summed$bad)) {
    bad <- summed$bad
    at <- if (matrix$cells_in_columns) colnames(counts)[bad[1]] else rownames(counts)[bad[1]]
    if (is.null(at)) at <- paste0("number ", bad[1])
    fail("the count matrix has ", summed$value, " for gene '", matrix$genes[bad[2]],
         "' in cell ", at, "; counts must be non-negative whole numbers.")
  }
  genes <- matrix$genes
  n_genes <- length(genes)
  slots <- summed$slots
  first <- match(seq_len(max(group)), group)
  row_group <- rep(first[slots %/% n_bins + 1], each = n_genes)
  out <- data.frame(count = summed$counts, exposure = rep(summed$exposure, each = n_genes),
                    cells = rep(as.integer(summed$cells), each = n_genes),
                    bin = rep(as.integer(slots %% n_bins + 1), each = n_genes),
                    species = rep(genes, times = length(slots)), stringsAsFactors = FALSE)
  for (column in keep) out[[column]] <- cells[[column]][row_group]
  rownames(out) <- NULL
  structure(out, class = c("wisp_binned", "data.frame"), breaks = breaks, position = position,
            unit = unit, size = size, cell.count = sum(summed$cells))
}

# Cell sizes for the exposure: positive numbers (dropped cells: any value).
cell_sizes <- function(values, column, dropped, fail) {
  if (!is.numeric(values) || is.factor(values)) {
    fail("the size column '", column, "' must hold numbers, not ", class(values)[1], ".")
  }
  bad <- which(!dropped & (is.na(values) | !is.finite(values) | values <= 0))
  if (length(bad)) {
    fail("the size column '", column, "' has ", length(bad), " value(s) that are not positive ",
         "numbers (rows ", row_list(bad), ").")
  }
  values <- as.double(values)
  values[dropped] <- 1
  values
}

#' @export
print.wisp_binned <- function(x, ...) {
  breaks <- attr(x, "breaks")
  unit <- attr(x, "unit")
  genes <- length(unique(x$species))
  grouping <- setdiff(names(x), c("count", "exposure", "cells", "bin", "species"))
  groups <- if (length(grouping)) nrow(unique(as.data.frame(unclass(x))[grouping])) else 1L
  cells <- attr(x, "cell.count")
  cat(sprintf("A binned table%s: %s in %s%s over %s bins; %s rows.\n",
              if (is.null(cells)) "" else paste0(" of ", format(cells, big.mark = ","), " cells"),
              count_noun(genes, "gene"), count_noun(groups, "group"),
              if (length(grouping)) paste0(" (by ", paste(grouping, collapse = ", "), ")") else "",
              length(unique(x$bin)), format(nrow(x), big.mark = ",")))
  if (!is.null(breaks)) {
    cat(sprintf("Bins: %d of %s along '%s' from %s to %s%s.\n", length(breaks) - 1L,
                if (length(unique(round(diff(breaks), 10))) == 1L) "equal width" else "set widths",
                attr(x, "position"), format(breaks[1]), format(breaks[length(breaks)]),
                if (is.null(unit)) "" else paste0(" ", unit)))
  }
  cat(sprintf("Exposure: %s.\n", if (is.null(attr(x, "size"))) "the cells in each row" else
    paste0("the summed '", attr(x, "size"), "' of the cells in each row")))
  print(utils::head(as.data.frame(unclass(x), stringsAsFactors = FALSE), 6), ...)
  if (nrow(x) > 6) cat("... and", format(nrow(x) - 6, big.mark = ","), "more rows\n")
  invisible(x)
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

# The break points of the bins: equal-width bins over `range`, or the breaks
# `bins` gives.
bin_breaks <- function(values, bins, range, position, fail) {
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
    return(seq(range[1], range[2], length.out = bins + 1L))
  }
  if (any(diff(bins) <= 0)) fail("the break points in `bins` must increase.")
  if (length(bins) - 1L > model_rules()$limits$max_bins) {
    fail("`bins` makes more than ", model_rules()$limits$max_bins, " bins.")
  }
  bins
}

# Bin numbers of positions between the break points.
position_bins <- function(values, breaks, position, ids, fail) {
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

# The bins of a fit's data, from the attributes wisp_bin() gives them:
# `breaks`, `position` (the column the positions came from) and `unit`;
# NULL for data binned elsewhere.
data_bins <- function(count.data) {
  breaks <- attr(count.data, "breaks")
  if (!is.numeric(breaks) || length(breaks) < 2L || anyNA(breaks)) return(NULL)
  list(breaks = as.numeric(breaks), position = attr(count.data, "position"),
       unit = attr(count.data, "unit"))
}

# Positions of (fractional) bins b: bin b's centre, linear between centres.
bin_positions <- function(bins, b) {
  breaks <- bins$breaks
  centres <- (breaks[-1] + breaks[-length(breaks)]) / 2
  if (length(centres) == 1L) return(rep(centres, length(b)))
  stats::approx(seq_along(centres), centres, b, rule = 2)$y
}

# The spatial axis of a fit's figures: in positions (the bin centres, e.g.
# "depth (um)") when the data came from wisp_bin(), else in bins.
bin_axis_title <- function(fit) {
  bins <- fit$bins
  if (is.null(bins) || is.null(bins$position)) return("bin")
  paste0(bins$position, if (!is.null(bins$unit)) paste0(" (", bins$unit, ")"))
}

bin_axis_scale <- function(fit) {
  bins <- fit$bins
  if (is.null(bins)) return(NULL)
  ggplot2::scale_x_continuous(labels = function(b) {
    ifelse(is.na(b), NA_character_, format(signif(bin_positions(bins, b), 4), trim = TRUE))
  })
}
