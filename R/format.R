# Text for the user: counts of things in words, and tables that fit the
# console.

# "1 context", "2 contexts".
count_noun <- function(n, singular, plural = paste0(singular, "s")) {
  paste(format(n, big.mark = ","), ifelse(n == 1, singular, plural))
}

# Prints a data.frame of text and numbers (as print.data.frame does with
# row.names = FALSE) without wrapping its columns: when the table is wider
# than `width`, the columns named in `split` are taken out, one more at a
# time, and the rows are printed in blocks, one per value of them, under a
# heading that names it. Every block keeps the same column widths.
print_fitted_table <- function(table, split = character(), width = getOption("width")) {
  lines <- function(frame) {
    columns <- lapply(names(frame), function(name) {
      values <- frame[[name]]
      values <- ifelse(is.na(values), "NA", as.character(values))
      format(c(name, values), justify = "right")
    })
    paste0(" ", do.call(paste, c(columns, sep = " ")))
  }
  whole <- lines(table)
  split <- intersect(split, names(table))
  if (!nrow(table) || max(nchar(whole, type = "width")) <= width || !length(split)) {
    cat(whole, sep = "\n")
    return(invisible(table))
  }
  for (k in seq_along(split)) {
    groups <- split[seq_len(k)]
    rest <- table[setdiff(names(table), groups)]
    formatted <- lines(rest)
    if (max(nchar(formatted, type = "width")) <= width || k == length(split)) break
  }
  heading <- do.call(paste, c(lapply(groups, function(g) paste(g, table[[g]])), sep = ", "))
  blocks <- split(seq_len(nrow(table)), factor(heading, levels = unique(heading)))
  for (label in names(blocks)) {
    if (label != names(blocks)[1]) cat("\n")
    cat(label, ":\n", sep = "")
    cat(formatted[c(1L, blocks[[label]] + 1L)], sep = "\n")
  }
  invisible(table)
}
