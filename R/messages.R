# Messages in the user's words (issue #27): which columns became fixed
# effects, and why a fixed effect looks like an id rather than a treatment.

# The fixed effects of prepared tokens: their level counts, whether wisp()
# took them by default (every column no role uses) and, for those it took by
# default, why some look like ids or measurements rather than treatments:
# as many levels as the animals (column `ran_column`), each level within one
# animal (a per-animal or per-sample id); numeric with many distinct values;
# or very many levels.
fixed_effect_info <- function(tokens, fixed_effects, by_default, time_series = NULL,
                              ran_column = "ran") {
  n <- vapply(fixed_effects, function(f) length(unique(tokens[[f]])), 1L)
  names(n) <- fixed_effects
  ran <- as.character(tokens$ran)
  n_ran <- length(unique(ran))
  suspects <- character()
  if (by_default) {
    for (f in setdiff(fixed_effects, time_series)) {
      values <- tokens[[f]]
      nested <- n_ran > 1L && n[[f]] >= n_ran &&
        length(unique(paste(as.character(values), ran, sep = "\r"))) == n[[f]]
      why <- if (is.numeric(values) && n[[f]] > 20L) {
        sprintf("is numeric with %s distinct values: an id or a measurement, not a treatment?",
                format(n[[f]], big.mark = ","))
      } else if (n[[f]] > 50L) {
        sprintf("has %s levels: an id, not a treatment?", format(n[[f]], big.mark = ","))
      } else if (nested) {
        sprintf("has %s, %s within one animal of '%s' (%s): an animal or sample id, not a treatment?",
                count_noun(n[[f]], "level"), if (n[[f]] == n_ran) "one per animal, each" else "each",
                ran_column, count_noun(n_ran, "animal"))
      }
      if (!is.null(why)) suspects[[f]] <- why
    }
  }
  list(names = fixed_effects, levels = n, by_default = by_default, suspects = suspects,
       time_series = time_series)
}

# "'genotype' (2 levels), 'slice' (12 levels)"; with `reference` (the
# reference level of each, named by factor), "'genotype' (2 levels,
# reference 'WT')": which level the effects are measured against is chosen
# by level order, and text levels sort ("KO" before "WT"), so it is said.
fixed_effect_list <- function(levels, reference = NULL) {
  counts <- vapply(levels, count_noun, "", "level")
  if (!is.null(reference)) {
    counts <- paste0(counts, ", reference '", unlist(reference)[names(levels)], "'")
  }
  paste0("'", names(levels), "' (", counts, ")", collapse = ", ")
}

# What the fit took as fixed effects, for wisp()'s verbose message.
fixed_effect_message <- function(info) {
  if (!length(info$names)) return("Fixed effects: none (one treatment).")
  text <- paste0("Fixed effects: ", fixed_effect_list(info$levels), ", ",
                 count_noun(prod(info$levels), "treatment"), if (info$by_default) {
                   paste0(" at most; taken from ", default_source(info),
                          " (choose them with variables$fixedeffects)")
                 } else " at most", ".")
  if (length(info$suspects)) text <- paste0(text, " ", suspect_text(info$suspects))
  text
}

suspect_text <- function(suspects) {
  cell <- grepl("cell", names(suspects), ignore.case = TRUE)
  paste0("'", names(suspects), "' ", suspects,
         ifelse(cell, sprintf(" (if it is the cells' id, map it: variables = list(cell = \"%s\"))",
                              names(suspects)), ""), collapse = " ")
}

default_source <- function(info) {
  paste0("the columns that no role uses", if (length(info$time_series)) " and the time series")
}

# For errors about the fixed effects: which columns they are, with their
# levels, which look like ids, and how to choose them.
fixed_effect_advice <- function(info) {
  if (!length(info$names)) return("")
  keep <- setdiff(info$names, names(info$suspects))
  example <- if (length(keep) && length(info$suspects)) {
    paste0(" (e.g. variables = list(fixedeffects = c(",
           paste0("\"", keep, "\"", collapse = ", "), ")))")
  } else ""
  paste0(" The fixed effects are ", fixed_effect_list(info$levels),
         if (info$by_default) paste0(", taken from ", default_source(info)) else "", ".",
         if (length(info$suspects)) paste0(" ", suspect_text(info$suspects)) else "",
         " Choose the fixed effects with `variables$fixedeffects`", example,
         if (info$by_default) ", or map a column to its role in `variables` (see ?wisp)" else "",
         ".")
}

# confint(fit, parm = "KO") and friends: the unknown names, a few valid
# ones, and how to find the one meant.
unknown_parameter_error <- function(unknown, names, call) {
  close <- unique(unlist(lapply(utils::head(unknown, 3), function(u) {
    c(grep(u, names, fixed = TRUE, value = TRUE), closest_names(u, names))
  })))
  shown <- utils::head(if (length(close)) close else names, 4)
  stop_input("unknown parameter", if (length(unknown) > 1) "s", " in `parm`: ",
             paste0("'", utils::head(unknown, 5), "'", collapse = ", "),
             if (length(unknown) > 5) ", ..." else "", ". Parameter names look like ",
             paste0("'", shown, "'", collapse = ", "),
             if (length(close)) " (names containing or close to it)" else "",
             "; ", length(names), " in all: see names(coef(fit)), and match them with e.g. ",
             "grep(\"", unknown[1], "\", names(coef(fit)), value = TRUE), pass numbers, or ",
             "choose by what they belong to: confint(fit, gene = , component = , term = , ",
             "block = ), with the labels of as.data.frame(fit).",
             call = call)
}

# A wide per-cell table (cells x genes: many numeric columns, no count
# column) is not tokens; wisp_bin() makes them from it.
wide_table_hint <- function(count.data) {
  counts_like <- vapply(count.data, function(v) {
    is.numeric(v) && !is.factor(v) && all(is.na(v) | (v >= 0 & v == round(v)))
  }, NA)
  numeric <- setdiff(names(count.data)[counts_like],
                     c("bin", "cell", "cell_id", "x", "y", "z", "depth", "position"))
  if (length(numeric) < 2L) return("")
  paste0(" count.data has no count column but ", length(numeric), " columns of whole numbers (",
         paste0("'", utils::head(numeric, 4), "'", collapse = ", "),
         if (length(numeric) > 4) ", ..." else "", "): if it is a wide table of cells x genes, ",
         "make the binned table wisp() fits (summed counts per gene and bin) with ",
         "wisp_bin(counts, cells, position = ...), from a cells x genes matrix of the counts ",
         "and a data.frame of the cells' ids, positions and metadata.")
}

# "3 animals (column 'mouse')": the random-effect levels, named by the
# user's column (the `ran` role of `variables`).
animal_count_text <- function(n, variables) {
  column <- if (is.character(variables$ran) && length(variables$ran) == 1L) variables$ran else "ran"
  sprintf("%s (column '%s')", count_noun(n, "animal"), column)
}
