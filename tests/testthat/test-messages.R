# What wisp() and bs_batch() tell the user: missing arguments, worker
# counts, plurals, the width of the summary table, and ?wisp.

messages_fit <- once(function() {
  without_design_warning(
    wisp(wisp_simulate(n.genes = 1, n.random = 2, n.bins = 12, cells.per.bin = 2, seed = 6),
         model.settings = list(LRO_cost = "none"), verbose = FALSE))
})

test_that("bs_batch() without bootstraps.num is an input error", {
  expect_error(bs_batch(messages_fit()), class = "wisp_input_error",
               regexp = "bootstraps.num")
})

test_that("more workers than cores draws a warning that says so", {
  cores <- parallel::detectCores()
  skip_if(is.na(cores) || cores + 1 > 4096)
  # R CMD check --as-cran caps workers at 2; this test is about the cores
  old <- Sys.getenv("_R_CHECK_LIMIT_CORES_", NA)
  Sys.setenv("_R_CHECK_LIMIT_CORES_" = "false")
  on.exit(if (is.na(old)) Sys.unsetenv("_R_CHECK_LIMIT_CORES_") else
    Sys.setenv("_R_CHECK_LIMIT_CORES_" = old), add = TRUE)
  expect_warning(bs_batch(messages_fit(), 1, max.fork = cores + 1, seed = 1),
                 sprintf("max.fork = %d.*%d core", cores + 1, cores))
  expect_no_warning(bs_batch(messages_fit(), 1, max.fork = 1, seed = 1))
  counts <- wisp_simulate(n.genes = 1, n.random = 2, n.bins = 12, cells.per.bin = 2, seed = 6)
  warnings <- character()
  withCallingHandlers(
    wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE,
         max.fork = cores + 1, bootstraps.num = 2),
    warning = function(w) {
      warnings <<- c(warnings, conditionMessage(w))
      invokeRestart("muffleWarning")
    })
  expect_identical(sum(grepl("core", warnings)), 1L) # once, not again for the bootstrap
})

test_that("the future backend reports the workers of the plan", {
  skip_if_not_installed("future.apply")
  skip_on_cran()
  old_plan <- future::plan(future::multisession, workers = 2)
  on.exit(future::plan(old_plan), add = TRUE)
  boot <- bs_batch(messages_fit(), 2, backend = "future", seed = 1)
  expect_output(print(boot), "backend \"future\", 2 workers")
})

test_that("workers that cannot load wispack get a hint about their library path", {
  skip_if_not_installed("future.apply")
  skip_on_cran()
  library <- dirname(find.package("wispack"))
  skip_if(normalizePath(library) %in% normalizePath(c(.Library, .Library.site)),
          "wispack is in a default library: every worker finds it")
  # a worker that sees only R's own libraries
  cluster <- parallel::makePSOCKcluster(1)
  on.exit(parallel::stopCluster(cluster), add = TRUE)
  parallel::clusterEvalQ(cluster, .libPaths(.Library))
  old_plan <- future::plan(future::cluster, workers = cluster)
  on.exit(future::plan(old_plan), add = TRUE, after = FALSE)
  expect_error(bs_batch(messages_fit(), 1, backend = "future", seed = 1),
               class = "wisp_input_error", regexp = "\\.libPaths\\(\\).*R_LIBS")
})

test_that("messages count in the singular for one", {
  counts <- wisp_simulate(n.contexts = 1, n.genes = 1, n.random = 2, n.bins = 12,
                          cells.per.bin = 2, degrees = 1L, seed = 6)
  messages <- character()
  withCallingHandlers(
    wisp(counts, model.settings = list(LRO_cost = "none"), verbose = TRUE, fit_only = TRUE),
    message = function(m) {
      messages <<- c(messages, conditionMessage(m))
      invokeRestart("muffleMessage")
    })
  expect_true(any(grepl("1 context,", messages, fixed = TRUE)))
  expect_false(any(grepl("\\b1 [a-z ]*(contexts|genes|levels|treatments|transitions|workers)\\b",
                         messages)))
  # A flat curve has one tested effect (the rate's hemisphere effect).
  flat <- without_design_warning(wisp(counts, degrees = 0L, verbose = FALSE,
                                      model.settings = list(LRO_cost = "none")))
  expect_identical(sum(!is.na(flat$stats$parameters$p.value)), 1L)
  out <- capture.output(print(flat))
  expect_true(any(grepl("Wald tests of 1 treatment effect:", out, fixed = TRUE)))
  expect_false(any(grepl("\\b1 treatment effects\\b", out)))
})

test_that("print(summary(fit)) keeps p.adj and the marks beside the estimates at width 80", {
  counts <- wisp_simulate(n.contexts = 2, n.genes = 2, n.random = 3, n.bins = 20,
                          cells.per.bin = 2, degrees = 1L, seed = 7)
  fit <- suppressWarnings(wisp(counts, model.settings = list(LRO_cost = "none"),
                               bootstraps.num = 10, ran.seed = 1, verbose = FALSE))
  old <- options(width = 80)
  on.exit(options(old), add = TRUE)
  out <- capture.output(print(summary(fit), max.rows = 100))
  expect_true(all(nchar(out) <= 80 | grepl("^Call", out)))
  headers <- out[grepl("estimate", out)]
  expect_gt(length(headers), 0)
  expect_true(all(grepl("p.adj", headers, fixed = TRUE) & grepl("sig", headers, fixed = TRUE)))
  # every coefficient is shown once, with its context
  expect_identical(sum(grepl("(block rate|transition slope|transition point) +[0-9]+ ", out)),
                   nrow(summary(fit)$coefficients))
  expect_true(any(grepl("context2", out, fixed = TRUE)))
})

test_that("?wisp documents every entry of plot.settings, each with what it does", {
  rd <- tools::Rd_db("wispack")[["wisp.Rd"]]
  skip_if(is.null(rd), "no installed help pages")
  tag <- function(x) attr(x, "Rd_tag")
  text <- function(x) paste(as.character(structure(x, class = "Rd")), collapse = "")
  arguments <- Filter(function(x) identical(tag(x), "\\arguments"), rd)[[1]]
  item <- Filter(function(x) identical(tag(x), "\\item") && text(x[[1]]) == "plot.settings",
                 arguments)[[1]]
  # one \item{\code{name}}{what it does} per setting, in a list of its own
  lists <- Filter(function(x) tag(x) %in% c("\\describe", "\\itemize"), item[[2]])
  entries <- unlist(lapply(lists, function(l) {
    items <- Filter(function(x) identical(tag(x), "\\item"), l)
    stats::setNames(vapply(items, function(i) text(i[[2]]), ""),
                    vapply(items, function(i) gsub("\\\\code\\{|\\}", "", text(i[[1]])), ""))
  }))
  for (name in names(wispack:::wisp_default_plot_settings())) {
    entry <- if (name %in% names(entries)) entries[[name]] else ""
    expect_gt(nchar(entry), 20, label = name)
  }
})

# ---------------------------------------------------------------------------
# Messages in the user's words (issue #27): the fixed effects wisp() took,
# and errors that name them.

words_counts <- function(cells.per.bin = 2, n.genes = 1) {
  data <- wisp_simulate(n.genes = n.genes, n.random = 3, n.bins = 12,
                        cells.per.bin = cells.per.bin, degrees = 1L,
                        fixed.effects = list(genotype = c("WT", "KO")), seed = 1)
  data$genotype <- as.character(data$genotype)
  data
}

said_by <- function(code) {
  said <- character()
  value <- withCallingHandlers(code, message = function(m) {
    said <<- c(said, conditionMessage(m))
    invokeRestart("muffleMessage")
  })
  list(value = value, said = said)
}

test_that("wisp() says which columns it took as fixed effects, and print(fit) shows them", {
  data <- words_counts()
  # a per-sample id (slice) left in the data, crossed with genotype
  data$slice <- paste0(data$ran, "-s", data$bin %% 2)
  run <- said_by(wisp(data, fit_only = TRUE, model.settings = list(LRO_cost = "none")))
  said <- paste(run$said, collapse = "\n")
  expect_match(said, "Fixed effects: 'genotype' \\(2 levels\\), 'slice' \\(6 levels\\)")
  expect_match(said, "no role uses.*variables\\$fixedeffects")
  expect_match(said, "'slice' has 6 levels, each within one animal of 'ran'")
  expect_output(print(run$value), "Fixed effects: 'genotype' \\(2 levels, reference 'KO'\\), 'slice' \\(6 levels, reference 'mouse1-s0'\\)")
  # chosen explicitly: no advice, no suspicion
  run <- said_by(wisp(data, list(fixedeffects = "genotype"), fit_only = TRUE,
                      model.settings = list(LRO_cost = "none")))
  expect_true(any(grepl("Fixed effects: 'genotype' (2 levels), 2 treatments at most.",
                        run$said, fixed = TRUE)))
})

test_that("too many treatments: the error names the fixed effects, their levels and the id column", {
  data <- words_counts(cells.per.bin = 60)
  data$cell_num <- seq_len(nrow(data))
  expect_error(wisp(data, verbose = FALSE, fit_only = TRUE),
               class = "wisp_input_error",
               regexp = paste0("8,640 treatments.*'genotype' \\(2 levels\\), 'cell_num' \\(4,320 ",
                               "levels\\).*'cell_num' is numeric with 4,320 distinct values.*",
                               "variables = list\\(cell = \"cell_num\"\\).*",
                               "variables\\$fixedeffects.*fixedeffects = c\\(\"genotype\"\\)"))
})

test_that("a per-sample id as a fixed effect: the missing-treatment error says so, not 'reorder levels'", {
  data <- words_counts()
  data$slice <- paste0(data$ran, "-", data$genotype) # nested in animal and genotype
  # the reference (WT with slice "mouse1-KO", the first level) has no data
  data$genotype <- factor(data$genotype, levels = c("WT", "KO"))
  err <- expect_error(wisp(data, verbose = FALSE, fit_only = TRUE),
                      class = "wisp_input_error",
                      regexp = paste0("no tokens for the treatment combinations.*'slice' \\(6 ",
                                      "levels\\).*each within one animal.*sample id.*",
                                      "fixedeffects = c\\(\"genotype\"\\)"))
  expect_no_match(conditionMessage(err), "first level")
  expect_error(wisp(data, verbose = FALSE, fit_only = TRUE,
                    model.settings = list(likelihood = "original")),
               class = "wisp_input_error", regexp = "likelihood = \"original\".*'slice' has 6 levels")
  # with the reference present, the warning about the missing ones says it too
  data$genotype <- factor(data$genotype, levels = c("KO", "WT"))
  expect_warning(try(wisp(data, verbose = FALSE, fit_only = TRUE,
                          model.settings = list(LRO_cost = "none")), silent = TRUE),
                 regexp = "no tokens.*'slice' has 6 levels.*variables\\$fixedeffects")
})

test_that("an all-zero gene: the on-bound message names it", {
  data <- words_counts(n.genes = 2)
  data$count[data$species == "gene2"] <- 0
  run <- said_by(wisp(data, fit_only = TRUE, model.settings = list(LRO_cost = "none")))
  skip_if(run$value$fit.diagnostics$on.bound == 0, "no estimate on a bound")
  expect_true(any(grepl("on a bound, in gene 'gene2' \\(.*no counts; block rate 1 at 0 under every treatment",
                        run$said)))
})

test_that("the stage messages are a start line and at most a few progress lines", {
  lines <- function(total) {
    said <- character()
    progress <- wispack:::stage_progress(function(...) said <<- c(said, paste0(...)), FALSE, 1)
    for (done in 0:total) progress$report("fit", done, total)
    said
  }
  # A short stage says only that it starts; a long one at most every quarter.
  expect_identical(lines(3), "Fit: 3 genes to fit.")
  expect_identical(lines(9), "Fit: 9 genes to fit.")
  expect_identical(lines(12), c("Fit: 12 genes to fit.", "  3 of 12 genes fitted",
                                "  6 of 12 genes fitted", "  9 of 12 genes fitted",
                                "  12 of 12 genes fitted"))
  expect_lte(length(lines(100)), 5L)
  expect_identical(utils::tail(lines(100), 1), "  100 of 100 genes fitted")
})

test_that("the exposure line has no nested parentheses", {
  run <- said_by(wisp(words_counts(), fit_only = TRUE, model.settings = list(LRO_cost = "none")))
  line <- grep("^Exposure:", run$said, value = TRUE)
  expect_identical(trimws(line), "Exposure: tokens (the data list every cell x gene pair, zeros included).")
})

test_that("confint() with an unknown parameter shows what the names look like", {
  fit <- messages_fit()
  expect_error(confint(fit, parm = "KO", method = "wald"), class = "wisp_input_error",
               regexp = "unknown parameter in `parm`: 'KO'. Parameter names look like 'b.*names\\(coef\\(fit\\)\\).*grep\\(\"KO\"")
})
