# Output in the user's words (issue #27, items 3, 8(f), 9): one account of
# how a fit ended, estimates on a bound by gene and name, readable labels of
# every estimate and selection by them.

messages_of <- function(code) {
  said <- character()
  value <- withCallingHandlers(code, message = function(m) {
    said <<- c(said, conditionMessage(m))
    invokeRestart("muffleMessage")
  })
  list(value = value, said = paste(said, collapse = "\n"))
}

# wisp_example, fitted once with its messages.
example_run <- once(function() {
  without_design_warning(messages_of(wisp(wisp_example)))
})

one_line <- function(lines) gsub("\\s+", " ", paste(lines, collapse = " "))

test_that("verbose, print() and summary() count a count fit's Newton iterations and evaluations alike", {
  run <- example_run()
  f <- run$value$fit.diagnostics
  said <- sprintf("converged after %d Newton iterations (%d likelihood evaluations)",
                  f$iterations, f$num.evals)
  expect_true(grepl(said, run$said, fixed = TRUE))
  expect_true(grepl(said, one_line(capture.output(print(run$value))), fixed = TRUE))
  expect_true(grepl(said, one_line(capture.output(print(summary(run$value)))), fixed = TRUE))
  # The evaluations are not called iterations anywhere.
  expect_false(grepl(sprintf("after %d evaluations", f$num.evals),
                     one_line(capture.output(print(run$value))), fixed = TRUE))
})

test_that("the original likelihood's fit counts its L-BFGS evaluations, not Newton iterations", {
  fit <- small_fit_original()
  f <- fit$fit.diagnostics
  printed <- one_line(capture.output(print(fit)))
  expect_true(grepl(sprintf("after %d likelihood evaluations,", f$num.evals), printed, fixed = TRUE))
  expect_false(grepl("Newton", printed))
  expect_true(grepl(sprintf("after %d likelihood evaluations,", f$num.evals),
                    one_line(capture.output(print(summary(fit)))), fixed = TRUE))
})

test_that("the data line names animals by the random-effect column, not 'random levels' or 'tokens'", {
  run <- example_run()
  expect_true(grepl("12,000 cell x gene rows, 1 context, 4 genes, 3 animals (column 'ran')",
                    run$said, fixed = TRUE))
  expect_false(grepl("random level|tokens,", run$said))
  expect_true(grepl("3 animals (column 'ran')", one_line(capture.output(print(run$value))),
                    fixed = TRUE))
})

test_that("an all-zero gene of wisp_example: the message, print() and summary() name it and its rates", {
  data <- wisp_example
  data$count[data$species == "gene3"] <- 0
  run <- without_design_warning(messages_of(wisp(data)))
  fit <- run$value
  expect_identical(fit$gene.qc$on.bound > 0, c(FALSE, FALSE, TRUE, FALSE))
  # gene3 has no transition: one block rate, 0 under each of the 4 treatments.
  expected <- "in gene 'gene3' (5: no counts; block rate 1 at 0 under every treatment; 1 more)"
  expect_true(grepl(expected, run$said, fixed = TRUE))
  expect_true(grepl(expected, one_line(capture.output(print(fit))), fixed = TRUE))
  expect_true(grepl(expected, one_line(capture.output(print(summary(fit)))), fixed = TRUE))
})

test_that("estimates on a bound that no curve shows (dispersions) read as 'more', not as NA", {
  # Two contexts; gene2's 3 estimates on a bound are none of its block rates
  # or slopes (such as dispersions at their floor), so no curve names them.
  fit <- example_run()$value
  fit$grouping.variables$context.lvls <- c("context1", "context2")
  fit$fit.diagnostics$on.bound <- 3
  fit$gene.qc$on.bound <- c(0L, 3L, 0L, 0L)
  text <- wispack:::on_bound_text(fit)
  expect_false(grepl("NA", text, fixed = TRUE))
  expect_true(grepl("in gene 'gene2' (3: 3 more)", text, fixed = TRUE))
})

test_that("the statistics table labels wisp_example's gene1 by context, gene, component, term, effect and block", {
  fit <- example_run()$value
  stats <- fit$stats$parameters
  gene1 <- stats[stats$gene == "gene1", ]
  # gene1 has one transition: block rates of blocks 1 and 2, a slope and a point.
  effects <- c("baseline", "right", "P18", "right:P18")
  expect_identical(gene1$context, rep("context1", 16))
  expect_identical(gene1$component, rep(c("block rate", "transition slope", "transition point"),
                                        c(8, 4, 4)))
  expect_identical(gene1$term, rep(c("baseline", "hemisphere", "age", "hemisphere:age"), 4))
  expect_identical(gene1$effect, rep(effects, 4))
  expect_identical(gene1$block, rep(c(1L, 2L, 1L, 1L), each = 4))
  expect_identical(gene1$parameter[c(1, 6, 16)],
                   c("baseline_context1_Rt_gene1_Tns/Blk1", "beta_Rt_context1_gene1_right_X_Tns/Blk2",
                     "beta_tpoint_context1_gene1_right:P18_X_Tns/Blk1"))
  # The original's columns stay, in their order (then how each was tested).
  expect_identical(setdiff(names(stats), c("context", "gene", "component", "term", "effect", "block")),
                   c("parameter", "estimate", "std.error", "df", "CI.low", "CI.high", "p.value",
                     "p.value.adj", "significance", "method", "flagged"))
})

test_that("coef() and confint() select by gene, component, term and block", {
  fit <- example_run()$value
  point <- "beta_tpoint_context1_gene1_right_X_Tns/Blk1"
  expect_identical(names(coef(fit, gene = "gene1", component = "point", term = "right")), point)
  expect_identical(names(coef(fit, gene = "gene1", component = "tpoint", term = "hemisphere")), point)
  expect_identical(names(coef(fit, gene = "gene1", component = "transition point",
                              term = "hemisphere")), point)
  expect_identical(names(coef(fit, gene = "gene2", component = "rate", term = "baseline",
                              block = 3)), "baseline_context1_Rt_gene2_Tns/Blk3")
  expect_identical(names(coef(fit, "beta", gene = "gene3")),
                   c("beta_Rt_context1_gene3_right_X_Tns/Blk1", "beta_Rt_context1_gene3_P18_X_Tns/Blk1",
                     "beta_Rt_context1_gene3_right:P18_X_Tns/Blk1"))
  ci <- confint(fit, gene = "gene1", component = "point", term = "right")
  expect_identical(rownames(ci), point)
  expect_identical(unname(ci[1, ]), unname(unlist(fit$stats$parameters[
    fit$stats$parameters$parameter == point, c("CI.low", "CI.high")])))
  # parm and the selectors together: the parameters both choose.
  expect_identical(rownames(confint(fit, parm = c(point, "baseline_context1_Rt_gene1_Tns/Blk1"),
                                    term = "baseline")), "baseline_context1_Rt_gene1_Tns/Blk1")
  expect_identical(rownames(confint(fit, parm = 1:2)),
                   c("baseline_context1_Rt_gene1_Tns/Blk1", "beta_Rt_context1_gene1_right_X_Tns/Blk1"))
})

test_that("unknown selector values and parameter names say what there is", {
  fit <- example_run()$value
  expect_error(coef(fit, gene = "gene9"), "unknown gene \"gene9\"; the fit's are \"gene1\", \"gene2\"",
               class = "wisp_input_error")
  expect_error(confint(fit, component = "height"), "unknown component \"height\".*\"block rate\"",
               class = "wisp_input_error")
  expect_error(confint(fit, term = "genotype"), "unknown term \"genotype\".*\"hemisphere\"",
               class = "wisp_input_error")
  expect_error(confint(fit, parm = "KO"),
               "Parameter names look like 'baseline_context1_Rt_gene1_Tns/Blk1'.*gene = , component = ",
               class = "wisp_input_error")
})

test_that("as.data.frame(fit) has one row per estimate, labels first", {
  fit <- example_run()$value
  table <- as.data.frame(fit)
  expect_identical(names(table)[1:9], c("context", "gene", "component", "term", "effect", "block",
                                        "animal", "role", "parameter"))
  expect_identical(table$parameter, names(coef(fit)))
  expect_identical(table$estimate, unname(coef(fit)))
  warp <- table[table$parameter == "wfactor_point_mouse2_X_gene4", ]
  expect_identical(unlist(warp[c("gene", "component", "animal", "role")], use.names = FALSE),
                   c("gene4", "transition point", "mouse2", "warp"))
  expect_true(is.na(warp$p.value))
  effects <- as.data.frame(fit, type = "beta", gene = "gene1", component = "rate")
  expect_identical(effects$effect, rep(c("right", "P18", "right:P18"), 2))
  expect_identical(effects$significance, c("***", "***", "ns", "***", "ns", "***"))
  expect_identical(as.data.frame(summary(fit)), summary(fit)$coefficients)
  tests <- as.data.frame(fit$gene.tests)
  expect_identical(class(tests), "data.frame")
  expect_null(attr(tests, "method"))
  expect_identical(names(tests)[1:2], c("gene", "term"))
})

test_that("print() says each fixed effect's reference level, also when it is not the first in the data", {
  run <- example_run()
  printed <- one_line(capture.output(print(run$value)))
  # wisp_example's hemisphere is left/right and its age P12/P18: by hand.
  expect_true(grepl("Fixed effects: 'hemisphere' (2 levels, reference 'left'), 'age' (2 levels, reference 'P12')",
                    printed, fixed = TRUE))
  data <- wisp_example
  data$hemisphere <- factor(data$hemisphere, levels = c("right", "left"))
  fit <- without_design_warning(wisp(data, verbose = FALSE, fit_only = TRUE))
  expect_true(grepl("'hemisphere' (2 levels, reference 'right')",
                    one_line(capture.output(print(fit))), fixed = TRUE))
})

test_that("as.data.frame() of a bootstrap with its fit is one labelled row per replicate and estimate", {
  fit <- example_run()$value
  boot <- bs_batch(fit, 2, resample = "parametric", max.fork = 1, seed = 1, progress = FALSE)
  long <- as.data.frame(boot, fit = fit)
  n <- length(boot$t0)
  expect_identical(nrow(long), 2L * n)
  expect_identical(names(long), c("replicate", "context", "gene", "component", "term", "effect",
                                  "block", "animal", "role", "parameter", "estimate", "fitted",
                                  "code"))
  # Replicate 2's rate effect of 'right' in gene1's block 2, read from boot$t by name.
  name <- "beta_Rt_context1_gene1_right_X_Tns/Blk2"
  row <- long[long$replicate == 2L & long$parameter == name, ]
  expect_identical(nrow(row), 1L)
  expect_identical(row$estimate, unname(boot$t[2, match(name, names(boot$t0))]))
  expect_identical(row$fitted, unname(fit$fitted.parameters[name]))
  expect_identical(c(row$gene, row$component, row$term, row$effect, row$code),
                   c("gene1", "block rate", "hemisphere", "right", "converged"))
  expect_identical(row$block, 2L)
  # Without the fit: the wide form, as before.
  expect_identical(nrow(as.data.frame(boot)), 2L)
  # Another fit's parameters are refused.
  other <- without_design_warning(wisp(wisp_simulate(n.genes = 1, n.bins = 20, seed = 3),
                                       verbose = FALSE, fit_only = TRUE,
                                       model.settings = list(LRO_cost = "none")))
  expect_error(as.data.frame(boot, fit = other), class = "wisp_input_error",
               regexp = "not the fit this bootstrap was made from")
})
