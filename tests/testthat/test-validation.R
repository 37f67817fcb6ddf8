# Every bad input is an error of class wisp_input_error naming the column and
# the problem.

tiny_counts <- function() {
  data.frame(
    count = c(3, 5, 2, 7, 1, 0, 4, 6),
    bin = c(1, 2, 1, 2, 1, 2, 1, 2),
    context = "cortex",
    species = "Gad1",
    ran = rep(c("m1", "m2"), each = 4),
    hemisphere = rep(c("left", "left", "right", "right"), 2),
    stringsAsFactors = FALSE
  )
}

prepare <- function(data, variables = list(), ...) {
  wispack:::prepare_count_data(data, variables, ...)
}

test_that("valid data pass through with roles in order and fixed effects found", {
  prepared <- prepare(tiny_counts())
  expect_named(prepared$tokens, c("count", "bin", "context", "species", "ran", "hemisphere"))
  expect_identical(prepared$fixed_effects, "hemisphere")
  expect_identical(prepared$dropped_na, 0L)
})

test_that("roles can be mapped to other column names", {
  data <- tiny_counts()
  names(data)[names(data) == "species"] <- "gene"
  names(data)[names(data) == "ran"] <- "mouse"
  prepared <- prepare(data, list(species = "gene", ran = "mouse"))
  expect_identical(as.character(prepared$tokens$species), data$gene)
  expect_identical(prepared$fixed_effects, "hemisphere")
})

test_that("an unmapped role whose column is absent becomes a constant column", {
  data <- tiny_counts()
  data$context <- NULL
  expect_message(prepared <- prepare(data), "no column 'context'")
  expect_identical(levels(prepared$tokens$context), "context")
  # a role mapped to a column that is not there is an error, not a constant
  expect_error(prepare(data, list(context = "S1")), class = "wisp_input_error", regexp = "'S1'")
})

test_that("a role mapped to a missing column is refused", {
  expect_error(prepare(tiny_counts(), list(count = "n")), class = "wisp_input_error",
               regexp = "'n'")
  expect_error(prepare(tiny_counts(), list(fixedeffects = c("hemisphere", "age"))),
               class = "wisp_input_error", regexp = "'age'")
})

test_that("a column mapped to two roles is refused", {
  expect_error(prepare(tiny_counts(), list(species = "ran")), class = "wisp_input_error",
               regexp = "'ran' serves more than one role")
  expect_error(prepare(tiny_counts(), list(species = "hemisphere", ran = "hemisphere")),
               class = "wisp_input_error", regexp = "'hemisphere' is mapped to more than one role")
})

test_that("unknown roles are refused", {
  expect_error(prepare(tiny_counts(), list(gene = "species")), class = "wisp_input_error",
               regexp = "unknown role")
})

test_that("non-numeric counts are refused", {
  data <- tiny_counts()
  data$count <- as.character(data$count)
  expect_error(prepare(data), class = "wisp_input_error", regexp = "'count'.*numeric")
})

test_that("negative, non-integer and infinite counts are refused with their rows", {
  data <- tiny_counts()
  data$count[c(2, 5)] <- -1
  expect_error(prepare(data), class = "wisp_input_error", regexp = "2 negative values \\(rows 2, 5\\)")
  data <- tiny_counts()
  data$count[3] <- 2.5
  expect_error(prepare(data), class = "wisp_input_error", regexp = "non-integer.*rows 3")
  data <- tiny_counts()
  data$count[4] <- Inf
  expect_error(prepare(data), class = "wisp_input_error", regexp = "infinite")
})

test_that("NA counts are dropped with a warning that says how many", {
  data <- tiny_counts()
  data$count[c(1, 8)] <- NA
  expect_warning(prepared <- prepare(data), "Dropped 2 tokens with an NA count")
  expect_identical(nrow(prepared$tokens), 6L)
  expect_identical(prepared$dropped_na, 2L)
})

test_that("bins that are not positive whole numbers are refused", {
  for (value in list(0, -2, 1.5, NA)) {
    data <- tiny_counts()
    data$bin[2] <- value
    expect_error(prepare(data), class = "wisp_input_error", regexp = "'bin'.*rows 2")
  }
  data <- tiny_counts()
  data$bin <- as.character(data$bin)
  expect_error(prepare(data), class = "wisp_input_error", regexp = "'bin'")
})

test_that("bins above max_bin are refused rather than dropped", {
  expect_error(prepare(tiny_counts(), max_bin = 1), class = "wisp_input_error",
               regexp = "above model.settings\\$max_bin")
})

test_that("a random level named 'none' is refused", {
  data <- tiny_counts()
  data$ran[data$ran == "m2"] <- "none"
  expect_error(prepare(data), class = "wisp_input_error", regexp = "\"none\"")
})

test_that("a fixed effect with fewer than 2 levels is refused", {
  data <- tiny_counts()
  data$age <- "P12"
  expect_error(prepare(data), class = "wisp_input_error", regexp = "'age' has only one level")
})

test_that("a treatment combination with no data is refused (as the original likelihood needs)", {
  data <- tiny_counts()
  data$age <- c("P12", "P12", "P12", "P12", "P18", "P18", "P12", "P12")
  data <- data[!(data$hemisphere == "right" & data$age == "P18"), ]
  data <- rbind(data, transform(data[1, ], age = "P18", hemisphere = "left"))
  expect_error(prepare(data), class = "wisp_input_error",
               regexp = "hemisphere = right, age = P18")
})

test_that("empty input and non-data-frames are refused", {
  expect_error(prepare(tiny_counts()[0, ]), class = "wisp_input_error", regexp = "no rows")
  expect_error(prepare(as.matrix(tiny_counts())), class = "wisp_input_error", regexp = "data.frame")
})

test_that("NA in grouping columns is refused", {
  data <- tiny_counts()
  data$species[3] <- NA
  expect_error(prepare(data), class = "wisp_input_error", regexp = "'species'.*rows 3")
  data <- tiny_counts()
  data$hemisphere[6] <- NA
  expect_error(prepare(data), class = "wisp_input_error", regexp = "'hemisphere'.*rows 6")
})

test_that("model settings are validated by name, type and range", {
  settings <- wispack:::wisp_model_settings
  expect_identical(settings()$LRO_cost, "AIC")
  expect_error(settings(list(ctoll = 1)), class = "wisp_input_error", regexp = "ctoll")
  expect_error(settings(list(ctol = -1)), class = "wisp_input_error", regexp = "ctol")
  expect_error(settings(list(LRO_cost = "AICc")), class = "wisp_input_error", regexp = "LRO_cost")
  expect_error(settings(list(buffer_factor = 0.7)), class = "wisp_input_error", regexp = "buffer_factor")
  expect_warning(settings(list(ctol = 2)), "ctol")
  expect_identical(settings(list(max_evals = 50))$max_evals, 50L)
})

test_that("asking for MCMC points to the bootstrap", {
  expect_error(wispack:::wisp_mcmc_settings(list(MCMC.steps = 1000)),
               class = "wisp_input_error", regexp = "bootstrap")
  expect_silent(wispack:::wisp_mcmc_settings(list()))
})

test_that("plot settings are validated by name, type and range", {
  plot_settings <- wispack:::wisp_plot_settings
  # The original's settings are accepted and kept (each one's effect on the
  # figures is tested in test-plots.R).
  expect_silent(settings <- plot_settings(list(print.plots = TRUE, CI_style = FALSE,
                                               dim.bounds = c(L4 = 10, L5 = 20),
                                               splitting_factor = "genotype",
                                               splitting_factor_colors = c(120L, 240L),
                                               label_size = 4, count.alpha.none = 0.5)))
  expect_identical(settings$dim.bounds, c(L4 = 10, L5 = 20))
  expect_identical(settings$splitting_factor, "genotype")
  expect_true("dim.bounds" %in% names(plot_settings(list())))
  expect_silent(fit <- wisp(small_counts(), plot.settings = list(dim.bounds = c(10, 20)),
                            fit_only = TRUE, verbose = FALSE))
  expect_identical(fit$plot.settings$dim.bounds, c(10, 20))
  expect_error(plot_settings(list(title_size = "big")), class = "wisp_input_error",
               regexp = "title_size")
  expect_error(plot_settings(list(count.alpha.ran = 2)), class = "wisp_input_error",
               regexp = "count.alpha.ran")
  expect_error(plot_settings(list(count.alpha.none = -1)), class = "wisp_input_error",
               regexp = "count.alpha.none")
  expect_error(plot_settings(list(dim.bounds = c("L4"))), class = "wisp_input_error",
               regexp = "plot.settings\\$dim.bounds")
  expect_error(plot_settings(list(y.lim = c(3, 1))), class = "wisp_input_error", regexp = "y.lim")
  expect_error(plot_settings(list(splitting_factor = c("a", "b"))), class = "wisp_input_error",
               regexp = "splitting_factor")
  expect_error(plot_settings(list(splitting_factor_colors = 400)), class = "wisp_input_error",
               regexp = "hues")
  expect_error(plot_settings(list(CI_style = NA)), class = "wisp_input_error", regexp = "CI_style")
  expect_error(plot_settings(list(print.plots = "yes")), class = "wisp_input_error",
               regexp = "print.plots")
  expect_identical(plot_settings(list(title_size = 14))$title_size, 14)
  mcmc <- wispack:::wisp_mcmc_settings
  expect_error(mcmc(list(MCMC.step.size = 0.1)), class = "wisp_input_error", regexp = "bootstrap")
  expect_silent(mcmc(list(MCMC.prior = 1L, MCMC.steps = 0)))
})

test_that("rise_threshold_factor lies in (0, 1] under both likelihoods", {
  limit <- wispack:::model_rules()$limits$rise_threshold_factor
  settings <- wispack:::wisp_model_settings
  for (likelihood in c("nb", "original")) {
    for (value in c(0, -0.5, 1.0001, 2, 10)) {
      expect_error(settings(list(likelihood = likelihood, rise_threshold_factor = value)),
                   class = "wisp_input_error", regexp = "rise_threshold_factor")
    }
    expect_silent(settings(list(likelihood = likelihood, rise_threshold_factor = limit)))
    expect_silent(settings(list(likelihood = likelihood, rise_threshold_factor = 0.05)))
  }
  expect_error(settings(list(rise_threshold_factor = 2)), "at most 1")
})
