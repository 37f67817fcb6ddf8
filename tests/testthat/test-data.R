# How wisp() reads a lab's data: the order of levels (time series, reference
# levels, labels), the roles of columns, and bins that are not 1..B.

# One gene, two animals observed at every level of one factor.
factor_counts <- function(levels, name = "age", seed = 1) {
  data <- wisp_simulate(n.genes = 1, n.random = 2, n.bins = 12, cells.per.bin = 2,
                        degrees = 1L, fixed.effects = stats::setNames(list(levels), name),
                        seed = seed)
  data[[name]] <- as.character(data[[name]])
  data
}

fit_quietly <- function(data, variables = list(), ...) {
  suppressMessages(wisp(data, variables = variables, fit_only = TRUE, verbose = FALSE,
                        model.settings = list(LRO_cost = "none"), ...))
}

# ---------------------------------------------------------------------------
# 1. Time-series levels

test_that("a time series of numbers written as text is in numeric order", {
  fit <- fit_quietly(factor_counts(c("7", "12", "18")), list(timeseries = "age"))
  expect_identical(fit$fix$lvls$age, c("7", "12", "18"))
  expect_identical(fit$fix$ref.lvl[["age"]], "7")
})

test_that("a time series of one prefix and a number is in the order of the number", {
  fit <- fit_quietly(factor_counts(c("P7", "P12", "P18")), list(timeseries = "age"))
  expect_identical(fit$fix$lvls$age, c("P7", "P12", "P18"))
  # decimals too: embryonic days
  fit <- fit_quietly(factor_counts(c("E9.5", "E14.5", "E16.5")), list(timeseries = "age"))
  expect_identical(fit$fix$lvls$age, c("E9.5", "E14.5", "E16.5"))
})

test_that("a time series that is a factor keeps its levels in order", {
  data <- factor_counts(c("young", "adult", "old"))
  data$age <- factor(data$age, levels = c("young", "adult", "old"))
  fit <- fit_quietly(data, list(timeseries = "age"))
  expect_identical(fit$fix$lvls$age, c("young", "adult", "old"))
  # weights are cumulative in that order: "old" inherits the effect of "adult"
  expect_identical(unname(fit$weight.matrix["old", "adult"]), 1)
  expect_identical(unname(fit$weight.matrix["adult", "old"]), 0)
})

test_that("a numeric time series is in numeric order", {
  data <- factor_counts(c("7", "12", "18"))
  data$age <- as.numeric(data$age)
  expect_identical(fit_quietly(data, list(timeseries = "age"))$fix$lvls$age, c("7", "12", "18"))
})

test_that("a time series whose order is unknown asks for a factor", {
  data <- factor_counts(c("young", "adult", "old"))
  expect_error(fit_quietly(data, list(timeseries = "age")), class = "wisp_input_error",
               regexp = "'age'.*factor\\(.*levels")
})

# ---------------------------------------------------------------------------
# 2. Reference levels

test_that("the first level of a factor is the reference", {
  data <- factor_counts(c("WT", "KO"), name = "genotype")
  data$genotype <- factor(data$genotype, levels = c("WT", "KO"))
  fit <- fit_quietly(data)
  expect_identical(fit$fix$ref.lvl[["genotype"]], "WT")
  expect_identical(fit$fix$lvls$genotype, c("WT", "KO"))
  effects <- names(coef(fit, "beta"))
  expect_true(all(grepl("_KO_", effects, fixed = TRUE)))
})

test_that("character levels sort, numbers as numbers: the first is the reference", {
  fit <- fit_quietly(factor_counts(c("WT", "KO"), name = "genotype"))
  expect_identical(fit$fix$ref.lvl[["genotype"]], "KO")
})

test_that("summaries and plots name the reference levels instead of 'ref'", {
  data <- factor_counts(c("WT", "KO"), name = "genotype")
  data$genotype <- factor(data$genotype, levels = c("WT", "KO"))
  fit <- fit_quietly(data)
  expect_identical(fit$treatment$names, c("WT", "KO"))
  expect_setequal(unique(fit$count.data.summed$treatment), c("WT", "KO"))
  table <- summary(fit)$coefficients
  expect_identical(unique(table$treatment[table$role == "baseline"]), "WT")
  out <- capture.output(print(summary(fit)), print(fit))
  expect_false(any(grepl("\\bref\\b", out)))
  built <- ggplot2::ggplot_build(plot(fit))
  expect_setequal(built$plot$scales$get_scales("colour")$get_labels(), c("WT", "KO"))
  expect_identical(rownames(fit$weight.matrix), c("WT", "KO"))
})

test_that("with two factors the reference treatment joins the reference levels", {
  data <- wisp_simulate(n.genes = 1, n.random = 2, n.bins = 12, cells.per.bin = 2,
                        degrees = 1L, seed = 2,
                        fixed.effects = list(genotype = c("WT", "KO"), age = c(7, 12)))
  data$genotype <- factor(as.character(data$genotype), levels = c("WT", "KO"))
  fit <- fit_quietly(data)
  expect_identical(fit$treatment$names, c("WT:7", "KO", "12", "KO:12"))
})

test_that("predict() still accepts treatment = \"ref\" for the reference", {
  data <- factor_counts(c("WT", "KO"), name = "genotype")
  data$genotype <- factor(data$genotype, levels = c("WT", "KO"))
  fit <- fit_quietly(data)
  grid <- data.frame(bin = 1:12, context = "context1", species = "gene1")
  expect_identical(predict(fit, transform(grid, treatment = "ref")),
                   predict(fit, transform(grid, treatment = "WT")))
  expect_identical(predict(fit, transform(grid, genotype = "WT")),
                   predict(fit, transform(grid, treatment = "WT")))
})

test_that("wisp_simulate() makes factors whose first given level is the reference", {
  data <- wisp_simulate(n.genes = 1, n.random = 2, n.bins = 12, cells.per.bin = 2,
                        degrees = 1L, fixed.effects = list(genotype = c("WT", "KO")), seed = 1)
  expect_identical(levels(data$genotype), c("WT", "KO"))
  truth <- attr(data, "truth")
  expect_true(all(grepl("_KO_", names(truth$effects), fixed = TRUE)))
  fit <- fit_quietly(data)
  expect_identical(fit$fix$ref.lvl[["genotype"]], "WT")
  expect_true(all(names(coef(fit, "beta")) %in% names(truth$parameters)))
})

# ---------------------------------------------------------------------------
# Natural order of labels

test_that("labels of one prefix and a number are in the order of the number", {
  data <- wisp_simulate(n.genes = 10, n.random = 2, n.bins = 10, cells.per.bin = 1,
                        degrees = 0L, fixed.effects = list(hemisphere = c("left", "right")),
                        seed = 4)
  data$ran <- ifelse(data$ran == "mouse1", "m2", "m10")
  fit <- fit_quietly(data)
  expect_identical(fit$grouping.variables$species.lvls, paste0("gene", 1:10))
  expect_identical(fit$grouping.variables$ran.lvls, c("none", "m2", "m10"))
  expect_identical(levels(summary(fit)$coefficients$species), NULL) # plain text
  expect_identical(unique(summary(fit)$coefficients$species), paste0("gene", 1:10))
})

test_that("the level order rule: numbers, prefix and number, else byte order", {
  sorted <- wispack:::sorted_levels
  expect_identical(sorted(c("12", "7", "18")), c("7", "12", "18"))
  expect_identical(sorted(c("gene10", "gene2", "gene1")), c("gene1", "gene2", "gene10"))
  expect_identical(sorted(c("Sst", "Gad1", "gene2", "Vip")), c("Gad1", "Sst", "Vip", "gene2"))
  expect_identical(sorted(factor(c("b", "a"), levels = c("z", "b", "a"))), c("b", "a"))
  expect_identical(sorted(c(10, 2, 1)), c("1", "2", "10"))
})

# ---------------------------------------------------------------------------
# 3. Roles mapped to columns that are not there

lab_counts <- function() {
  data <- factor_counts(c("WT", "KO"), name = "genotype")
  names(data)[match(c("count", "species", "ran", "context"), names(data))] <-
    c("cnt", "gene_name", "animal", "region")
  data
}

lab_roles <- list(count = "cnt", species = "gene_name", ran = "animal", context = "region")

test_that("the lab's columns fit when every role is mapped", {
  fit <- fit_quietly(lab_counts(), lab_roles)
  expect_identical(fit$fix$names, "genotype")
})

test_that("a role mapped to a misspelled column is an error naming the closest columns", {
  for (case in list(c("species", "gene_nam", "gene_name"), c("ran", "animl", "animal"),
                    c("context", "regoin", "region"))) {
    roles <- lab_roles
    roles[[case[1]]] <- case[2]
    expect_error(fit_quietly(lab_counts(), roles), class = "wisp_input_error",
                 regexp = sprintf("'%s'.*did you mean '%s'", case[2], case[3]))
  }
})

test_that("an unmapped role without its column becomes a constant, and wisp() says so when verbose", {
  data <- lab_counts()
  data$region <- NULL
  roles <- lab_roles[c("count", "species", "ran")]
  said <- character()
  fit <- withCallingHandlers(wisp(data, roles, fit_only = TRUE, verbose = TRUE,
                                  model.settings = list(LRO_cost = "none")),
                             message = function(m) {
                               said <<- c(said, conditionMessage(m))
                               invokeRestart("muffleMessage")
                             })
  expect_true(any(grepl("no column 'context'.*one context", said)))
  expect_identical(fit$grouping.variables$context.lvls, "context")
  # verbose = FALSE is quiet: the default (one context) is fine (issue #27)
  expect_no_message(wisp(data, roles, fit_only = TRUE, verbose = FALSE,
                         model.settings = list(LRO_cost = "none")))
})

test_that("a 'cortex' column without a context role warns that it may hold the context", {
  data <- lab_counts()
  names(data)[names(data) == "region"] <- "cortex"
  expect_warning(
    try(wisp(data, lab_roles[c("count", "species", "ran")], fit_only = TRUE, verbose = FALSE,
             model.settings = list(LRO_cost = "none")), silent = TRUE),
    "no column 'context'.*variables = list\\(context = \"cortex\"\\)")
})

test_that("an unmapped role whose data look like they are in another column warns", {
  # 'animal' is left to be a fixed effect while there is no 'ran' column
  data <- lab_counts()
  data$animal <- NULL
  data$mouse <- lab_counts()$animal
  expect_warning(
    try(wisp(data, lab_roles[c("count", "species", "context")], fit_only = TRUE,
             verbose = FALSE, model.settings = list(LRO_cost = "none")), silent = TRUE),
    "variables = list\\(ran = \"mouse\"\\)")
})

test_that("with no ran role, the missing-combination error says the animals became a fixed effect", {
  # animals nested in genotype: as fixed effects, their combinations are missing
  data <- wisp_simulate(n.genes = 1, n.bins = 12, cells.per.bin = 2, degrees = 1L, seed = 3,
                        design = wisp_design(between = list(genotype = c("WT", "KO")),
                                             animals.per.group = 2))
  names(data)[names(data) == "ran"] <- "animal"
  expect_error(suppressWarnings(suppressMessages(wisp(data, verbose = FALSE))),
               class = "wisp_input_error",
               regexp = "'animal' was taken as a fixed effect.*variables = list\\(ran = \"animal\"\\)")
})

# ---------------------------------------------------------------------------
# 5. Bins that are not 1..B

test_that("bins in micrometres are refused with a pointer to wisp_bin()", {
  data <- factor_counts(c("WT", "KO"), name = "genotype")
  data$bin <- data$bin * 25
  expect_error(fit_quietly(data), class = "wisp_input_error",
               regexp = "steps of 25.*wisp_bin\\(\\)")
})

test_that("bins in micrometres up to 1200 in steps of 50 point to wisp_bin() too", {
  data <- factor_counts(c("WT", "KO"), name = "genotype")
  data$bin <- data$bin * 50 + 600 # 650 .. 1200
  expect_error(fit_quietly(data), class = "wisp_input_error",
               regexp = "steps of 50.*wisp_bin\\(\\).*\\(bin - 600\\) / 50")
  # positions in no common step, sparse up to 1200: the same pointer
  data <- factor_counts(c("WT", "KO"), name = "genotype")
  data$bin <- c(1:11, 1200)[data$bin]
  expect_error(fit_quietly(data), class = "wisp_input_error",
               regexp = "bins up to 1200.*wisp_bin\\(\\)")
})

test_that("0-based bins are refused with the advice to add 1", {
  data <- factor_counts(c("WT", "KO"), name = "genotype")
  data$bin <- data$bin - 1
  expect_error(fit_quietly(data), class = "wisp_input_error",
               regexp = "'bin'.*start at 0.*counts bins from 1.*bin \\+ 1")
})

test_that("a wide per-cell table (cells x genes) points to wisp_bin()", {
  wide <- data.frame(Gad1 = c(0, 2, 1), Sst = c(3, 0, 0), Vip = c(1, 1, 0),
                     depth = c(10, 250, 700), mouse = "m1")
  expect_error(fit_quietly(wide), class = "wisp_input_error",
               regexp = "no column 'count'.*'Gad1', 'Sst', 'Vip'.*cells x genes.*wisp_bin\\(counts, cells")
  # Two genes are enough; positions and ids are not taken for genes.
  expect_error(fit_quietly(wide[c("Gad1", "Sst", "depth", "mouse")]), class = "wisp_input_error",
               regexp = "2 columns of whole numbers \\('Gad1', 'Sst'\\)")
  expect_identical(wispack:::wide_table_hint(wide[c("depth", "Gad1")]), "")
})

test_that("bins with gaps draw a warning that names them", {
  data <- factor_counts(c("WT", "KO"), name = "genotype")
  data <- data[!data$bin %in% c(5, 6), ]
  expect_warning(fit_quietly(data), "bins 5, 6 .*no tokens")
})

test_that("a cell column is the cells' id, not a fixed effect", {
  data <- factor_counts(c("WT", "KO"), name = "genotype")
  data$cell <- sprintf("c%d", seq_len(nrow(data)))
  fit <- fit_quietly(data)
  expect_identical(fit$fix$names, "genotype")
})
