# Image snapshots of every figure type on small fixed fits (helper-plots.R):
# a change that moves a line, a label or a colour shows in the SVG diff.
# Review changed snapshots with testthat::snapshot_review("plot-snapshots").

skip_if_not_installed("vdiffr")
skip_on_cran()

test_that("the rate-count plot looks as before", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  vdiffr::expect_doppelganger("ratecount", plot(plots_fit()))
  vdiffr::expect_doppelganger("ratecount with settings", plot(
    plots_fit_time(), dim.bounds = c(L2 = 8, L4 = 15, L5 = 22), splitting_factor = "hemisphere",
    counts = "mean", samples = FALSE, y.lim = c(0, 60), log.scale = FALSE, species = "gene1"))
  vdiffr::expect_doppelganger("ratecount bootstrap band", plot(plots_booted(), CI_style = FALSE,
                                                               species = "gene1"))
})

test_that("the time-series plot looks as before", {
  vdiffr::expect_doppelganger("timeseries", plot(plots_fit_time(), type = "timeseries"))
  vdiffr::expect_doppelganger("timeseries points", plot(plots_fit_time(), type = "timeseries",
                                                         component = "tpoint"))
})

test_that("the parameter plots look as before", {
  vdiffr::expect_doppelganger("parameters baseline", plot(plots_fit(), type = "parameters"))
  vdiffr::expect_doppelganger("parameters violins", plot(plots_booted(), type = "parameters",
                                                         group = "right"))
  vdiffr::expect_doppelganger("parameters random", plot(plots_fit(), type = "parameters",
                                                        group = "random"))
  vdiffr::expect_doppelganger("parameters classes", plot(
    plots_fit_time(), type = "parameters", group = "P14",
    gene.classes = c(gene1 = "class A", gene2 = "class B")))
})

test_that("the effect plot looks as before", {
  vdiffr::expect_doppelganger("effects", plot(plots_fit_time(), type = "effects"))
})

test_that("the distribution plot looks as before", {
  vdiffr::expect_doppelganger("distributions", plot(plots_booted(), type = "distributions"))
})

test_that("the decomposition looks as before", {
  vdiffr::expect_doppelganger("decomposition", plot(plots_fit(), type = "decomposition",
                                                    species = "gene2"))
})

test_that("the gene summary looks as before", {
  skip_if_not_installed("patchwork")
  vdiffr::expect_doppelganger("gene summary", wisp_gene_summary(plots_fit(), "gene1"))
})
