# Turning the user's count data into validated token columns.

column_roles <- c("count", "bin", "context", "species", "ran")
variable_roles <- c(column_roles, "timeseries", "fixedeffects", "cell", "exposure")

#' Map the user's columns onto the model's roles and validate them
#'
#' Returns a list with `tokens` (a data.frame with columns `count, bin,
#' context, species, ran` and the fixed effects, under the user's fixed-effect
#' names; the labels as factors whose
#' levels are in model order, see sorted_levels()), `fixed_effects` (names, in
#' order), `time_series` (name or NULL) and `dropped_na` (number of tokens
#' dropped for an NA count).
#' Every problem is an error of class `wisp_input_error` naming the column.
#' @keywords internal
#' @noRd
prepare_count_data <- function(count.data, variables = list(), max_bin = 0,
                               missing_treatments = c("error", "warn"), call = sys.call(-1),
                               say = message) {
  missing_treatments <- match.arg(missing_treatments)
  fail <- function(...) stop_input(..., call = call)
  if (!is.data.frame(count.data)) {
    fail("`count.data` must be a data.frame, not ", class(count.data)[1], ".")
  }
  if (nrow(count.data) == 0L) fail("`count.data` has no rows.")
  variables <- check_variables(variables, names(count.data), fail)

  # A role left unmapped whose default column is absent gets a constant
  # column (model vignette §2), and the user is told; count and bin must exist.
  source_of <- function(role) if (!is.null(variables[[role]])) variables[[role]] else role
  sources <- vapply(column_roles, source_of, "")
  constant <- setdiff(column_roles[!sources %in% names(count.data)], c("count", "bin"))
  used <- sources[sources %in% names(count.data)]
  twice <- unique(used[duplicated(used)])
  if (length(twice)) {
    fail("column '", twice[1], "' serves more than one role (",
         paste(names(used)[used == twice[1]], collapse = " and "), "); map each role to its ",
         "own column in `variables`.")
  }
  tokens <- list()
  for (role in column_roles) {
    column <- source_of(role)
    if (column %in% names(count.data)) {
      tokens[[role]] <- count.data[[column]]
    } else if (role %in% c("count", "bin")) {
      fail("`count.data` has no column '", column, "' for the ", role,
           " role; name it in `variables`, e.g. variables = list(", role, " = \"my_column\").",
           if (role == "count" && is.null(variables$count)) wide_table_hint(count.data))
    } else {
      tokens[[role]] <- rep(column, nrow(count.data))
    }
  }
  # The optional cell-id role (per-cell exposure, as wisp_bin() makes it): the
  # mapped column, or a column named "cell" that serves no other role. It is
  # never a fixed effect by default.
  cell_column <- if (!is.null(variables$cell)) variables$cell else
    if ("cell" %in% names(count.data) &&
        !"cell" %in% c(sources, variables$timeseries, variables$fixedeffects)) "cell" else NULL
  # The optional exposure role (a binned table's cells per bin, or their
  # summed sizes): the mapped column, or the `exposure` column of a table
  # from wisp_bin(). A binned table's `cells` column is for the reader.
  binned <- inherits(count.data, "wisp_binned")
  exposure_column <- if (!is.null(variables$exposure)) variables$exposure else
    if (binned && "exposure" %in% names(count.data)) "exposure" else NULL
  if (!is.null(exposure_column) && !is.null(cell_column)) {
    fail("column '", exposure_column, "' gives each row's exposure and column '", cell_column,
         "' its cell id; a row is either a token of one cell or a sum over cells: map one of ",
         "them in `variables`.")
  }
  claimed <- unique(c(sources, variables$timeseries, cell_column, exposure_column,
                      if (binned && is.null(variables$fixedeffects)) "cells"))
  fixed_effects <- if (!is.null(variables$fixedeffects)) {
    variables$fixedeffects
  } else {
    setdiff(names(count.data), claimed)
  }
  tell_constant_roles(constant, if (is.null(variables$fixedeffects)) fixed_effects, say)
  time_series <- variables$timeseries
  if (!is.null(time_series) && !time_series %in% fixed_effects) {
    fixed_effects <- c(fixed_effects, time_series)
  }
  for (f in fixed_effects) tokens[[f]] <- count.data[[f]]
  tokens <- as.data.frame(tokens, stringsAsFactors = FALSE, optional = TRUE)
  names(tokens) <- c(column_roles, fixed_effects)
  cells <- if (is.null(cell_column)) NULL else count.data[[cell_column]]
  exposure <- if (is.null(exposure_column)) NULL else
    checked_exposure(count.data[[exposure_column]], exposure_column, fail)

  count_column <- source_of("count")
  count <- tokens$count
  if (!is.numeric(count) || is.factor(count)) {
    fail("column '", count_column, "' (count) must be numeric, not ", class(count)[1], ".")
  }
  bad <- function(mask, what) {
    rows <- which(mask)
    if (length(rows)) {
      fail("column '", count_column, "' (count) has ", length(rows), " ", what, " value",
           if (length(rows) > 1) "s", " (rows ", row_list(rows), "); counts must be ",
           "non-negative whole numbers.")
    }
  }
  bad(!is.na(count) & is.infinite(count), "infinite")
  bad(!is.na(count) & count < 0, "negative")
  bad(!is.na(count) & is.finite(count) & count != round(count), "non-integer")
  bad(!is.na(count) & is.finite(count) & count > max_exact_count, "too large (above 2^53)")
  huge <- which(!is.na(count) & count > large_count)
  if (length(huge)) {
    warning(sprintf(paste0(
      "column '%s' (count) has %d count%s above %g (rows %s); token counts are usually far ",
      "smaller: check that the column holds counts."), count_column, length(huge),
      if (length(huge) > 1) "s" else "", large_count, row_list(huge)), call. = FALSE)
  }
  dropped_na <- sum(is.na(count))
  if (dropped_na > 0) {
    warning(sprintf("Dropped %d token%s with an NA count in column '%s'.", dropped_na,
                    if (dropped_na > 1) "s" else "", count_column), call. = FALSE)
    tokens <- tokens[!is.na(count), , drop = FALSE]
    if (!is.null(cells)) cells <- cells[!is.na(count)]
    if (!is.null(exposure)) exposure <- exposure[!is.na(count)]
    if (nrow(tokens) == 0L) fail("every count in column '", count_column, "' is NA.")
  }

  bin_column <- source_of("bin")
  bin <- tokens$bin
  bad_bin <- !is.numeric(bin) | is.factor(bin)
  if (bad_bin) fail("column '", bin_column, "' (bin) must hold positive whole numbers, not ",
                    class(bin)[1], " values.")
  rows <- which(is.na(bin) | !is.finite(bin) | bin < 1 | bin != round(bin))
  if (length(rows)) {
    whole <- all(is.finite(bin) & bin == round(bin))
    fail("column '", bin_column, "' (bin) has ", length(rows), " value(s) that are not ",
         "positive whole numbers (rows ", row_list(rows), ")",
         if (whole && min(bin) == 0) paste0(
           ". The bins start at 0, but wisp() counts bins from 1: add 1 to them, e.g. ",
           "count.data$", bin_column, " <- count.data$", bin_column, " + 1"), ".")
  }
  if (max_bin > 0 && any(bin > max_bin)) {
    rows <- which(bin > max_bin)
    fail("column '", bin_column, "' (bin) has ", length(rows), " value(s) above ",
         "model.settings$max_bin = ", max_bin, " (rows ", row_list(rows), ").")
  }
  max_bins <- model_rules()$limits$max_bins
  if (max(bin) > max_bins) {
    rows <- which(bin > max_bins)
    fail("column '", bin_column, "' (bin) has ", length(rows), " value(s) above ", max_bins,
         ", the most bins a model can have (rows ", row_list(rows), "). If they are positions ",
         "(e.g. in micrometres), make bins from them with wisp_bin().")
  }
  # Values in a common step (positions, e.g. in micrometres) first: that
  # message says how to renumber them; then bins too sparse to be bins.
  check_bins_consecutive(bin, bin_column, fail, gaps = FALSE)
  occupied <- length(unique(bin))
  if (max(bin) > 1000 && occupied < max(bin) / 10) {
    fail("column '", bin_column, "' (bin) numbers bins up to ", max(bin), " but only ",
         occupied, " of them have tokens; bins must number the spatial positions 1, 2, ... ",
         "(largest values at rows ", row_list(utils::head(order(bin, decreasing = TRUE), 5)),
         "). If they are positions (e.g. in micrometres), make bins from them with wisp_bin().")
  }
  check_bins_consecutive(bin, bin_column, fail)
  tokens$bin <- as.integer(bin)

  # The order of every column of labels (see sorted_levels()), taken before
  # they become text; the tokens carry them as factors of these levels.
  levels <- list()
  for (role in c("context", "species", "ran")) {
    rows <- which(is.na(tokens[[role]]))
    if (length(rows)) {
      fail("column '", source_of(role), "' (", role, ") has ", length(rows), " NA value(s) (rows ",
           row_list(rows), ").")
    }
    levels[[role]] <- sorted_levels(tokens[[role]])
    tokens[[role]] <- as.character(tokens[[role]])
  }
  population <- model_rules()$population_level
  if (any(tokens$ran == population)) {
    fail("column '", source_of("ran"), "' (ran) has a level named \"", population, "\", which ",
         "is reserved for the population-level curve; rename it.")
  }
  for (f in fixed_effects) {
    values <- tokens[[f]]
    rows <- which(is.na(values))
    if (length(rows)) {
      fail("fixed-effect column '", f, "' has ", length(rows), " NA value(s) (rows ",
           row_list(rows), ").")
    }
    if (length(unique(values)) < 2) {
      fail("fixed-effect column '", f, "' has only one level (", format(values[1]), "); a ",
           "fixed effect needs at least 2. Drop it, or name the fixed effects in ",
           "`variables$fixedeffects`.")
    }
    if (!is.atomic(values) || is.complex(values) || !(is.numeric(values) ||
        is.character(values) || is.logical(values) || is.factor(values))) {
      fail("fixed-effect column '", f, "' must hold numbers, strings, logicals or a factor, ",
           "not ", class(values)[1], " values.")
    }
    levels[[f]] <- if (identical(f, time_series)) time_series_levels(values, f, fail) else
      sorted_levels(values)
    if (is.factor(values)) tokens[[f]] <- as.character(values)
  }
  # Labels travel to the Rust core as UTF-8.
  for (column in c("context", "species", "ran", fixed_effects)) {
    if (is.character(tokens[[column]])) tokens[[column]] <- as_utf8(tokens[[column]], column, fail)
  }
  fixed_effects <- as_utf8(fixed_effects, "fixed-effect names", fail)
  if (!is.null(time_series)) time_series <- as_utf8(time_series, "timeseries", fail)
  names(tokens) <- c(column_roles, fixed_effects)
  info <- fixed_effect_info(tokens, fixed_effects, is.null(variables$fixedeffects), time_series,
                            source_of("ran"))
  check_label_collisions(tokens, fixed_effects, fail, info)
  names(levels) <- c("context", "species", "ran", fixed_effects)
  for (column in names(levels)) {
    tokens[[column]] <- factor(as.character(tokens[[column]]),
                               levels = unique(as_utf8(levels[[column]], column, fail)))
  }
  default_ran <- is.null(variables$ran) && "ran" %in% constant && is.null(variables$fixedeffects)
  check_treatments_have_data(tokens, fixed_effects, fail, if (default_ran) fixed_effects,
                             missing = missing_treatments, info = info)

  if (!is.null(cells)) {
    bad <- which(is.na(cells))
    if (length(bad)) {
      fail("column '", cell_column, "' (cell) has ", length(bad), " NA value(s) (rows ",
           row_list(bad), "); every token needs its cell's id.")
    }
    cells <- match(as.character(cells), unique(as.character(cells))) - 1L
  }
  list(tokens = tokens, fixed_effects = fixed_effects, time_series = time_series, cells = cells,
       exposure = exposure, dropped_na = dropped_na, fixed_effect_info = info)
}

# A column of exposures (each row's cells, or their summed sizes): positive,
# finite numbers.
checked_exposure <- function(values, column, fail) {
  if (!is.numeric(values) || is.factor(values)) {
    fail("column '", column, "' (exposure) must hold numbers, not ", class(values)[1], ".")
  }
  rows <- which(is.na(values) | !is.finite(values) | values <= 0)
  if (length(rows)) {
    fail("column '", column, "' (exposure) has ", length(rows), " value(s) that are not ",
         "positive numbers (rows ", row_list(rows), "); an exposure is the number of cells ",
         "(or their summed sizes) behind a row.")
  }
  as.double(values)
}

# Counts above `large_count` draw a warning; above `max_exact_count` doubles
# no longer hold every whole number, so they are refused. (Bins above the
# core's `max_bins` are refused too: the summed table has a row per bin.)
large_count <- 1e7
max_exact_count <- 2^53

# Strings in UTF-8; strings that are not valid in their declared encoding
# are an input error.
as_utf8 <- function(x, what, fail) {
  x <- enc2utf8(as.character(x))
  bad <- which(!validUTF8(x))
  if (length(bad)) {
    fail("'", what, "' has ", length(bad), " string(s) that are not valid text in their ",
         "encoding (rows ", row_list(bad), "); convert them with iconv() first.")
  }
  x
}

# Distinct values of a fixed effect must stay distinct as the strings the
# model receives, and the treatments must be few enough to enumerate. (The
# names built from labels, of treatments and parameters, are checked by the
# Rust core when it builds the design: R/model.R, src/rust/src/model/design.rs.)
check_label_collisions <- function(tokens, fixed_effects, fail, info = NULL) {
  for (f in fixed_effects) {
    values <- tokens[[f]]
    distinct <- if (is.numeric(values)) sort(unique(values)) else unique(as.character(values))
    labels <- as.character(distinct)
    if (anyDuplicated(labels)) {
      fail("fixed-effect column '", f, "' has distinct values that print the same (",
           labels[anyDuplicated(labels)], "); round them or make them strings.")
    }
  }
  count <- prod(vapply(fixed_effects, function(f) length(unique(tokens[[f]])), 1))
  limit <- model_rules()$limits$max_treatments
  if (count > limit) {
    fail("the fixed effects define ", format(count, big.mark = ","), " treatments (level ",
         "combinations); at most ", format(limit, big.mark = ","), " are supported.",
         if (!is.null(info)) fixed_effect_advice(info))
  }
  invisible()
}

check_variables <- function(variables, columns, fail) {
  if (!is.list(variables)) fail("`variables` must be a list mapping roles to column names.")
  if (length(variables) && (is.null(names(variables)) || any(!nzchar(names(variables))))) {
    fail("`variables` must be a named list, e.g. list(count = \"n\", species = \"gene\").")
  }
  unknown <- setdiff(names(variables), variable_roles)
  if (length(unknown)) {
    fail("`variables` has unknown role(s) ", paste0("'", unknown, "'", collapse = ", "),
         "; roles are ", paste(variable_roles, collapse = ", "), ".")
  }
  for (role in names(variables)) {
    value <- variables[[role]]
    single <- role != "fixedeffects"
    if (!is.character(value) || anyNA(value) || (single && length(value) != 1L)) {
      fail("`variables$", role, "` must be ", if (single) "one column name" else "column names", ".")
    }
    missing <- setdiff(value, columns)
    if (length(missing)) {
      fail("`variables$", role, "` names column", if (length(missing) > 1) "s", " ",
           paste0("'", missing, "'", collapse = ", "), " that count.data does not have",
           suggest_columns(missing[1], columns), ".")
    }
  }
  mapped <- unlist(variables[intersect(names(variables), c(column_roles, "timeseries"))])
  mapped <- mapped[mapped %in% columns]
  twice <- unique(mapped[duplicated(mapped)])
  if (length(twice)) {
    fail("column '", twice[1], "' is mapped to more than one role in `variables` (",
         paste(names(mapped)[mapped == twice[1]], collapse = " and "), ").")
  }
  clash <- intersect(variables$fixedeffects, mapped[names(mapped) %in% column_roles])
  if (length(clash)) fail("column '", clash[1], "' cannot be both a fixed effect and a ",
                          names(mapped)[mapped == clash[1]][1], " column.")
  variables
}

# "; did you mean 'gene_name'? (columns: ...)": the columns closest to a
# name that is not there, by edit distance (case ignored), or else all of
# them.
suggest_columns <- function(name, columns) {
  close <- closest_names(name, columns)
  listed <- paste0("'", utils::head(columns, 12), "'", collapse = ", ")
  if (length(columns) > 12) listed <- paste0(listed, ", ...")
  if (length(close)) {
    paste0("; did you mean ", paste0("'", close, "'", collapse = " or "), "? (columns: ", listed, ")")
  } else {
    paste0(" (its columns: ", listed, ")")
  }
}

closest_names <- function(name, candidates, n = 3L, limit = max(2L, ceiling(nchar(name) / 3))) {
  if (!length(candidates)) return(character())
  lower <- tolower(candidates)
  distance <- utils::adist(tolower(name), lower)[1, ]
  near <- order(distance)[sort(distance) <= limit]
  # one name inside the other ("gene" in "gene_name"), for names long enough to mean it
  inside <- which(nchar(lower) >= 3L & nchar(name) >= 3L &
                    (grepl(tolower(name), lower, fixed = TRUE) |
                       vapply(lower, grepl, NA, x = tolower(name), fixed = TRUE)))
  candidates[utils::head(unique(c(near, inside)), n)]
}

# Column names that often hold a role's labels.
role_synonyms <- list(
  context = c("region", "area", "layer", "celltype", "cell_type", "structure", "roi", "cortex"),
  species = c("gene", "genes", "gene_name", "gene_id", "feature", "target", "transcript"),
  ran = c("animal", "mouse", "mice", "subject", "individual", "donor", "rat", "brain",
          "animal_id", "mouse_id", "subject_id")
)

# Says which roles became constants because their default column is absent:
# a message, or a warning naming the column that probably holds the role when
# one that wisp() took as a fixed effect looks like it.
tell_constant_roles <- function(roles, default_fixed_effects, say = message) {
  what <- c(context = "context", species = "gene (species)", ran = "random level (animal)")
  for (role in roles) {
    likely <- default_fixed_effects[tolower(default_fixed_effects) %in% role_synonyms[[role]] |
                                      utils::adist(role, tolower(default_fixed_effects))[1, ] <= 1]
    text <- paste0("count.data has no column '", role, "' and `variables$", role, "` is not set, ",
                   "so every token is in one ", what[[role]], ", named \"", role, "\"")
    if (length(likely)) {
      warning(text, "; the column '", likely[1], "' is taken as a fixed effect instead. If it ",
              "holds the ", role, " role, map it: variables = list(", role, " = \"", likely[1],
              "\").", call. = FALSE)
    } else {
      say(text, ". If another column holds them, map it: variables = list(", role,
          " = \"<column>\").")
    }
  }
  invisible()
}

# Bins number consecutive positions 1, 2, ..., B. Values in a common step
# larger than 1 (25, 50, ..., 1000: positions in micrometres) are refused,
# and bins that no token uses draw a warning.
check_bins_consecutive <- function(bin, column, fail, gaps = TRUE) {
  used <- sort(unique(bin))
  if (length(used) >= 2L) {
    step <- Reduce(greatest_common_divisor, diff(used))
    if (step > 1) {
      fail("column '", column, "' (bin) holds ", length(used), " values from ", used[1], " to ",
           used[length(used)], " in steps of ", step, ": positions (e.g. in micrometres) rather ",
           "than bin numbers. wisp() takes bins as consecutive positions 1, 2, ..., B, so it ",
           "would see ", used[length(used)], " bins, most of them empty, and fit spurious ",
           "transitions. Make bins from the positions with wisp_bin(), or renumber them: ",
           column, " = ", if (used[1] == step) column else
             paste0("(", column, " - ", used[1] - step, ")"), " / ", step, ".")
    }
  }
  empty <- setdiff(seq_len(max(used)), used)
  if (gaps && length(empty)) {
    warning(sprintf(paste0(
      "column '%s' (bin): bin%s %s of 1..%d %s no tokens. wisp() takes bins as consecutive ",
      "positions, so an empty bin is a gap in space; if the bins are not 1, 2, ..., B, make them ",
      "with wisp_bin()."), column, if (length(empty) > 1) "s" else "", row_list(empty, 10),
      max(used), if (length(empty) > 1) "have" else "has"), call. = FALSE)
  }
  invisible()
}

greatest_common_divisor <- function(a, b) if (b == 0) a else greatest_common_divisor(b, a %% b)

# A combination of fixed-effect levels (a treatment) without tokens cannot
# be estimated. Under the original likelihood every one needs data
# (`missing = "error"`). The count likelihood (`"warn"`) fits the others and
# reports the effects that need the missing ones as NaN, with a warning; the
# reference combination must have data, as every effect is measured from
# it. `default_fixed_effects`: the fixed effects taken by default while the
# ran role is a constant, one of which likely identifies the animals.
check_treatments_have_data <- function(tokens, fixed_effects, fail,
                                       default_fixed_effects = NULL,
                                       missing = c("error", "warn"), info = NULL) {
  missing <- match.arg(missing)
  if (!length(fixed_effects)) return(invisible())
  levels <- lapply(fixed_effects, function(f) sorted_levels(tokens[[f]]))
  names(levels) <- fixed_effects
  grid <- expand.grid(levels, stringsAsFactors = FALSE, KEEP.OUT.ATTRS = FALSE)
  key <- function(frame) do.call(paste, c(lapply(frame, as.character), sep = "\r"))
  present <- unique(key(tokens[fixed_effects]))
  absent <- which(!key(grid) %in% present)
  if (length(absent)) {
    combos <- vapply(absent, function(i) {
      paste(sprintf("%s = %s", fixed_effects, unlist(grid[i, ])), collapse = ", ")
    }, "")
    animal <- NULL
    if (length(default_fixed_effects)) {
      named <- default_fixed_effects[tolower(default_fixed_effects) %in% role_synonyms$ran]
      most <- default_fixed_effects[which.max(vapply(default_fixed_effects, function(f) {
        length(unique(tokens[[f]]))
      }, 1))]
      animal <- c(named, most)[1]
    }
    listed <- paste0(paste0("(", utils::head(combos, 5), ")", collapse = "; "),
                     if (length(combos) > 5) sprintf(" and %d more", length(combos) - 5) else "")
    reference_missing <- 1L %in% absent
    suspects <- !is.null(info) && length(info$suspects) > 0L
    advice <- if (!is.null(info) && is.null(animal)) fixed_effect_advice(info) else ""
    if (missing == "warn" && !reference_missing && is.null(animal)) {
      warning("no tokens for the treatment combination", if (length(combos) > 1) "s", " ",
              listed, ": ", if (length(combos) > 1) "their" else "its", " curves cannot be ",
              "estimated, and the treatment effects that need them (e.g. interactions) are ",
              "reported as NaN; the others are estimated from the treatments with data.",
              advice, call. = FALSE)
      return(invisible())
    }
    why <- if (missing == "error") {
      paste0("; every combination of fixed-effect levels needs data under likelihood = ",
             "\"original\" (the count likelihood, the default, fits the others)")
    } else if (reference_missing && suspects) {
      # An id column taken as a fixed effect: the reference level is not the
      # thing to change.
      paste0(", among them the reference (", combos[absent == 1L], "), from which every ",
             "effect is measured")
    } else if (reference_missing) {
      paste0(", among them the reference (", combos[absent == 1L], "), from which every ",
             "effect is measured; if the fixed effects are the right ones, make a level with ",
             "data the first level of its factor (e.g. factor(x, levels = c(...)))")
    } else ""
    fail("no tokens for the treatment combination", if (length(combos) > 1) "s", " ",
         listed, why, ".", advice,
         if (!is.null(animal)) paste0(
           " No column is mapped to the random-effect role (ran) and count.data has no column ",
           "'ran', so every other column is a fixed effect: '", animal, "' was taken as a ",
           "fixed effect. If it identifies the animals, map it: variables = list(ran = \"",
           animal, "\")."))
  }
  invisible()
}

row_list <- function(rows, show = 5) {
  text <- paste(utils::head(rows, show), collapse = ", ")
  if (length(rows) > show) text <- paste0(text, ", ...")
  text
}
