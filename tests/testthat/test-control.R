# wisp_control(): the Newton limits of the count likelihood's fit.

test_that("wisp_control() holds the core's defaults and prints them", {
  control <- wisp_control()
  expect_s3_class(control, "wisp_control")
  defaults <- wispack:::model_rules()$control
  expect_identical(names(control), names(defaults))
  for (name in setdiff(names(defaults), "trace")) {
    expect_identical(control[[name]], as.double(defaults[[name]]))
  }
  expect_identical(control$trace, FALSE)
  expect_identical(attr(control, "given"), character())
  expect_output(print(control), "newton_max_iterations +200 \\(default\\)")
  set <- wisp_control(newton_max_iterations = 5)
  expect_identical(attr(set, "given"), "newton_max_iterations")
  expect_output(print(set), "newton_max_iterations +5\n")
})

test_that("wisp_control() refuses values out of range, naming the setting", {
  for (name in c("newton_max_iterations", "max_variance_updates")) {
    for (value in list(0, 1.5, -1, NA, Inf, "10", c(1, 2), 2e9)) {
      args <- stats::setNames(list(value), name)
      expect_error(do.call(wisp_control, args), class = "wisp_input_error", regexp = name)
    }
  }
  for (name in c("newton_gradient_tolerance", "newton_decrement_tolerance", "variance_tolerance")) {
    for (value in list(0, -1e-4, NA, Inf, "1e-4", c(1e-4, 1e-4))) {
      args <- stats::setNames(list(value), name)
      expect_error(do.call(wisp_control, args), class = "wisp_input_error", regexp = name)
    }
  }
  expect_error(wisp_control(max_iterations = 1), "unused argument")
  expect_error(wisp(small_counts(), control = list2env(list())), class = "wisp_input_error",
               regexp = "wisp_control")
})

test_that("the default control gives bitwise the fit without one", {
  fit <- without_design_warning(
    wisp(small_counts(), model.settings = list(LRO_cost = "none"), verbose = FALSE,
         control = wisp_control()))
  reference <- small_fit()
  for (field in c("fitted.parameters", "count.data.summed", "stats", "gamma.dispersion",
                  "random.sd", "plan")) {
    expect_identical(fit[[field]], reference[[field]], label = field)
  }
  keep <- c("pen.neg.value", "neg.loglik", "converged", "code", "iterations", "max.gradient")
  expect_identical(fit$fit.diagnostics[keep], reference$fit.diagnostics[keep])
  # Every default given explicitly, or as a plain list, is the same fit.
  explicit <- do.call(wisp_control, unclass(wisp_control()))
  again <- wisp(small_counts(), model.settings = list(LRO_cost = "none"), verbose = FALSE,
                control = explicit, fit_only = TRUE)
  expect_identical(again$fitted.parameters, reference$fitted.parameters)
})

test_that("control values reach the fit", {
  said <- character()
  short <- withCallingHandlers(
    wisp(small_counts(), model.settings = list(LRO_cost = "none"), verbose = FALSE,
         control = wisp_control(newton_max_iterations = 1), fit_only = TRUE),
    warning = function(w) {
      said <<- c(said, conditionMessage(w))
      invokeRestart("muffleWarning")
    })
  expect_true(any(grepl("did not converge", said)))
  expect_false(short$fit.diagnostics$converged)
  expect_lt(short$fit.diagnostics$iterations, small_fit()$fit.diagnostics$iterations)
  loose <- wisp(small_counts(), model.settings = list(LRO_cost = "none"), verbose = FALSE,
                control = list(newton_gradient_tolerance = 0.5, variance_tolerance = 0.1),
                fit_only = TRUE)
  expect_false(identical(loose$fitted.parameters, small_fit()$fitted.parameters))
  expect_lte(loose$fit.diagnostics$iterations, small_fit()$fit.diagnostics$iterations)
})

test_that("both likelihoods end their fits in one vocabulary, and the limits are success.code 5", {
  quiet_fit <- function(settings = list(), control = wisp_control()) {
    suppressWarnings(wisp(small_counts(), model.settings = c(list(LRO_cost = "none"), settings),
                          verbose = FALSE, control = control, fit_only = TRUE))
  }
  # Each limit set low enough to be reached names itself, per gene with what
  # ran out; the genes keep their estimates.
  newton <- quiet_fit(control = wisp_control(newton_max_iterations = 1))
  expect_identical(newton$fit.diagnostics$code, "iteration limit")
  expect_identical(newton$gene.qc$note, rep("iteration limit: 1 Newton iteration", 2))
  expect_identical(newton$gene.qc$fitted, c(TRUE, TRUE))
  variances <- quiet_fit(control = wisp_control(max_variance_updates = 1))
  expect_identical(variances$fit.diagnostics$code, "variance update limit")
  expect_identical(unique(variances$gene.qc$note), "variance update limit: 1 variance update")
  original <- quiet_fit(list(likelihood = "original", max_evals = 5))
  expect_identical(original$fit.diagnostics$code, "evaluation limit")
  expect_false(any(vapply(list(newton, variances, original),
                          function(f) f$fit.diagnostics$converged, TRUE)))
  expect_identical(sort(c(newton$fit.diagnostics$code, variances$fit.diagnostics$code,
                          original$fit.diagnostics$code)),
                   sort(wispack:::model_rules()$termination$limits))
  # Replicates of the stopped fit stop at the same limit, which the
  # original's diagnostics.bs calls 5 (its "maxeval reached"), as for
  # "evaluation limit".
  boot <- bs_batch(newton, 3, resample = "parametric", seed = 1, progress = FALSE)
  expect_identical(boot$diagnostics$code, rep("iteration limit", 3))
  with_boot <- suppressWarnings(wisp_statistics(newton, boot = boot))
  expect_identical(with_boot$diagnostics.bs$success.code, rep(5L, 3))
})

test_that("the Newton limits do not apply to the original, nor ctol and max_evals to \"nb\"", {
  counts <- small_counts()
  expect_error(
    wisp(counts, model.settings = list(likelihood = "original", LRO_cost = "none"),
         control = wisp_control(newton_max_iterations = 5), verbose = FALSE),
    class = "wisp_input_error", regexp = "newton_max_iterations.*likelihood = \"nb\" only.*ctol")
  # The default control is fine under the original's objective.
  original <- wisp(counts, model.settings = list(likelihood = "original", LRO_cost = "none"),
                   control = wisp_control(), verbose = FALSE)
  expect_identical(original$fitted.parameters, small_fit_original()$fitted.parameters)
  expect_warning(
    wisp(counts, model.settings = list(LRO_cost = "none", ctol = 1e-8), verbose = FALSE,
         fit_only = TRUE),
    "ctol is ignored under likelihood = \"nb\".*wisp_control\\(newton_gradient_tolerance =, newton_max_iterations =\\)")
  expect_warning(
    wisp(counts, model.settings = list(LRO_cost = "none", ctol = 1e-8, max_evals = 10),
         verbose = FALSE, fit_only = TRUE),
    "ctol and max_evals are ignored")
})

test_that("the fit's plan keeps its control: bootstrap replicates use it", {
  counts <- wisp_simulate(n.genes = 1, n.bins = 30, seed = 3)
  short <- suppressWarnings(wisp(counts, model.settings = list(LRO_cost = "none"),
                                 control = wisp_control(newton_max_iterations = 1),
                                 fit_only = TRUE, verbose = FALSE))
  boot <- bs_batch(short, 2, seed = 1, progress = FALSE)
  expect_true(all(boot$diagnostics$iterations <= 1))
  expect_false(any(boot$diagnostics$converged))
})

test_that("wisp_control(trace = TRUE) keeps every Newton iteration of the fit", {
  counts <- small_counts()
  settings <- list(LRO_cost = "none")
  plain <- suppressWarnings(wisp(counts, model.settings = settings, fit_only = TRUE,
                                 verbose = FALSE))
  traced <- suppressWarnings(wisp(counts, model.settings = settings, fit_only = TRUE,
                                  control = wisp_control(trace = TRUE), verbose = FALSE))
  # Tracing observes the fit; it does not change it.
  expect_identical(traced$fitted.parameters, plain$fitted.parameters)
  expect_null(plain$newton.trace)
  trace <- traced$newton.trace
  expect_named(trace, c("species", "run", "iteration", "value", "lambda", "decrement",
                        "scaled_gradient", "evaluations"))
  expect_setequal(unique(trace$species), traced$grouping.variables$species.lvls)
  for (run in split(trace, list(trace$species, trace$run), drop = TRUE)) {
    # Iterations count from 0, and a damped Newton step is taken only when
    # it lowers the objective.
    expect_identical(run$iteration, seq.int(0L, nrow(run) - 1L))
    expect_true(all(diff(run$value) <= 0))
    expect_true(all(diff(run$evaluations) > 0))
    expect_true(is.na(run$lambda[nrow(run)]))
  }
  # The last row of each gene is its estimate: the objective there, evaluated
  # afresh by the core at the fitted values, is the traced value.
  for (s in seq_along(traced$grouping.variables$species.lvls)) {
    gene <- traced$grouping.variables$species.lvls[s]
    rows <- trace[trace$species == gene, ]
    last <- rows[rows$run == max(rows$run), ]
    at <- wispack:::count_objective_rust(traced$plan, s - 1L, NULL)
    expect_equal(last$value[nrow(last)], at$value, tolerance = 1e-10)
  }
  expect_error(wisp_control(trace = NA), class = "wisp_input_error", regexp = "trace")
  expect_error(suppressWarnings(wisp(counts, model.settings = list(likelihood = "original",
                                                                    LRO_cost = "none"),
                                     control = wisp_control(trace = TRUE), verbose = FALSE)),
               class = "wisp_input_error", regexp = "trace")
})

test_that("fit$gene.qc gives each gene's own fit, and summary() lists the genes to look at", {
  fit <- small_fit()
  qc <- fit$gene.qc
  expect_identical(qc$gene, fit$grouping.variables$species.lvls)
  expect_true(all(qc$converged))
  expect_identical(sum(qc$on.bound), as.integer(fit$fit.diagnostics$on.bound))
  # the gene's transitions and dispersion, as the fit's own tables give them
  chosen <- fit$structure.selection[fit$structure.selection$chosen, ]
  expect_identical(qc$transitions, as.character(chosen$degree[match(qc$gene, chosen$species)]))
  dispersion <- fit$fitted.parameters[paste0("dispersion_context1_", qc$gene)]
  expect_identical(qc$dispersion, formatC(unname(dispersion), digits = 2, format = "g"))
  # molecules per bin and animal: the mean of the gene's counts summed per
  # animal, treatment and bin, from the tokens
  counts <- small_counts()
  summed <- stats::aggregate(count ~ species + ran + hemisphere + bin, data = counts, FUN = sum)
  expect_equal(qc$molecules, as.vector(tapply(summed$count, summed$species, mean)[qc$gene]))
  expect_true(all(qc$molecules >= 10))
  expect_output(print(summary(fit)), "Genes: 2 fitted, all converged")
  expect_false(grepl("molecules per bin", paste(capture.output(print(summary(fit))),
                                                collapse = " ")))
  # one Newton iteration: no gene converges, and each says why it stopped
  short <- suppressWarnings(wisp(small_counts(), model.settings = list(LRO_cost = "none"),
                                 verbose = FALSE, fit_only = TRUE,
                                 control = wisp_control(newton_max_iterations = 1)))
  expect_false(any(short$gene.qc$converged))
  expect_true(all(nzchar(short$gene.qc$note)))
  expect_output(print(summary(short)), "Genes: 2 fitted, 0 converged.*gene1")
  # a gene never seen does not stop the others: its estimates sit on bounds
  silent <- small_counts()
  silent$count[silent$species == "gene2"] <- 0
  quiet <- suppressWarnings(wisp(silent, model.settings = list(LRO_cost = "none"),
                                 verbose = FALSE, fit_only = TRUE))
  expect_identical(quiet$gene.qc$on.bound[1], fit$gene.qc$on.bound[1])
  expect_gt(quiet$gene.qc$on.bound[2], 0)
  expect_identical(quiet$gene.qc$note[2], "no counts: every count of the gene is 0")
  # (and, with no molecules at all, it is the sparse gene summary() names)
  expect_identical(quiet$gene.qc$molecules[2], 0)
  expect_output(print(summary(quiet)),
                "estimates on a bound; 1 gene with fewer than 10 molecules[^:]*:.*gene2")
})
