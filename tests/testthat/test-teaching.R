# Teaching figures: the curves they draw are the model's formulas, computed
# here term by term (model vignette §5, §7.1, §7.2).

skip_if_not_installed("ggplot2")

# Psi(x) by hand: R_1 plus each step times the logistic written out.
hand_psi <- function(x, rates, slopes, points) {
  vapply(x, function(xi) {
    value <- rates[1]
    for (k in seq_along(slopes)) {
      value <- value + (rates[k + 1] - rates[k]) / (1 + exp(-slopes[k] * (xi - points[k])))
    }
    value
  }, 0)
}

test_that("the poly-sigmoid figure draws Psi and marks its rates, points and tangents", {
  rates <- c(1, 3, 0.5)
  slopes <- c(0.8, 0.4)
  points <- c(12, 28)
  p <- wisp_demo_polysigmoid(rates, slopes, points, bins = 40)
  expect_no_warning(built <- ggplot2::ggplot_build(p))
  curve <- p$layers[[1]]$data
  expect_equal(range(curve$x), c(0.5, 40.5))
  expect_equal(curve$psi, hand_psi(curve$x, rates, slopes, points), tolerance = 1e-12)
  # At each point the curve is halfway between the rates around it (up to
  # the other transition's tail), and the tangents have slope s (R' - R) / 4.
  segments <- Filter(function(l) inherits(l$geom, "GeomSegment"), p$layers)
  tangents <- segments[[2]]$data
  expect_equal((tangents$yend - tangents$y) / (tangents$xend - tangents$x),
               slopes * diff(rates) / 4)
  blocks <- segments[[1]]$data
  expect_equal(blocks$y, rates)
  expect_equal(blocks$x, c(0.5, points))
  expect_identical(p$labels$x, "bin position x")
  # A flat curve (no transition) draws too.
  flat <- wisp_demo_polysigmoid(rates = 2, slopes = numeric(), points = numeric())
  expect_no_warning(ggplot2::ggplot_build(flat))
  expect_true(all(flat$layers[[1]]$data$psi == 2))
})

test_that("the count model's warp figure applies the random effects of model vignette 7.2", {
  rates <- c(1, 3, 0.5)
  slopes <- c(0.8, 0.4)
  points <- c(12, 28)
  bins <- 40
  u <- 0.7
  p <- wisp_demo_warp("nb", u = u, rates = rates, slopes = slopes, points = points, bins = bins)
  expect_no_warning(ggplot2::ggplot_build(p))
  curves <- p$data
  g <- ceiling(bins / 20)
  free <- bins - 3 * g
  for (effect in c("point", "rate", "slope")) {
    for (value in c(-u, 0, u)) {
      rows <- curves[curves$effect == paste(effect, "effect") & curves$u == value, ]
      r <- rates * if (effect == "rate") exp(value) else 1
      s <- if (effect == "slope") 8 / (1 + exp(-(log(slopes / (8 - slopes)) + value))) else slopes
      q <- (points - 0.5 - (1:2) * g) / free
      pt <- if (effect == "point") {
        0.5 + (1:2) * g + free / (1 + exp(-(log(q / (1 - q)) + value)))
      } else {
        points
      }
      expect_equal(rows$psi, hand_psi(rows$x, r, s, pt), tolerance = 1e-10,
                   label = paste(effect, value))
    }
  }
  # The simulator's warps (R/simulate.R) agree.
  curves_sim <- list(rate = matrix(rates, 1), slope = matrix(slopes, 1),
                     point = matrix(points, 1), gene = 1L, animal = 1L, degree = 2L)
  u_array <- array(c(0.3, -0.2, 0.5), c(1, 1, 3))
  warped <- wispack:::warp_curves(curves_sim, u_array, bins)
  mine <- wispack:::demo_nb_warp(rates, slopes, points, bins, g,
                                 u = c(point = 0.3, rate = -0.2, slope = 0.5))
  expect_equal(mine$rates, as.vector(warped$rate))
  expect_equal(mine$slopes, as.vector(warped$slope))
  expect_equal(mine$points, as.vector(warped$point))
})

test_that("the original's warp figure draws omega of model vignette 7.1", {
  w <- c(-2, -0.5, 0, 1, 2)
  p <- wisp_demo_warp("original", w = w, bound = 100)
  expect_no_warning(ggplot2::ggplot_build(p))
  curves <- p$data
  expect_setequal(unique(curves$w), w)
  for (value in w) {
    rows <- curves[curves$w == value, ]
    z <- rows$z
    # phi(X) = 1 - exp(w^2)^(-X / b), as the original's C++ writes it.
    phi <- function(X) 1 - exp(value^2)^(-X / 100)
    expected <- if (value > 0) z + phi(z) * (100 - z) else z - phi(100 - z) * z
    expect_equal(rows$omega, expected, tolerance = 1e-12, label = paste("w =", value))
  }
  # Positive factors pull towards the bound, negative ones towards 0; the
  # ends stay put.
  at <- function(value, zz) curves$omega[curves$w == value & abs(curves$z - zz) < 1e-9]
  expect_gt(at(2, 50), 50)
  expect_lt(at(-2, 50), 50)
  expect_equal(c(at(2, 0), at(2, 100), at(-2, 0), at(-2, 100)), c(0, 100, 0, 100))
})

test_that("the teaching figures refuse curves the model cannot have", {
  expect_error(wisp_demo_polysigmoid(rates = c(1, 2), slopes = c(1, 1)), class = "wisp_input_error",
               regexp = "`slopes` must be 1 positive number")
  expect_error(wisp_demo_polysigmoid(points = c(28, 12)), class = "wisp_input_error",
               regexp = "increasing")
  expect_error(wisp_demo_warp(u = -1), class = "wisp_input_error", regexp = "`u`")
  expect_error(wisp_demo_warp(slopes = c(9, 0.4)), class = "wisp_input_error",
               regexp = "slopes below 8")
  expect_error(wisp_demo_warp("original", bound = 0), class = "wisp_input_error",
               regexp = "`bound`")
  expect_error(wisp_demo_warp("other"), class = "wisp_input_error", regexp = "`model`")
})

test_that("the teaching figures look as they did (vdiffr snapshots)", {
  skip_on_cran()
  skip_if_not_installed("vdiffr")
  vdiffr::expect_doppelganger("demo-polysigmoid", wisp_demo_polysigmoid())
  vdiffr::expect_doppelganger("demo-warp-nb", wisp_demo_warp())
  vdiffr::expect_doppelganger("demo-warp-original", wisp_demo_warp("original"))
})
