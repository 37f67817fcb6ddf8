# Shared small simulated data and fits; computed once per test run.
small_counts <- function() {
  wisp_simulate(n.genes = 2, n.random = 3, n.bins = 40, seed = 11)
}

small_fit_cache <- new.env()
small_fit <- function() {
  if (is.null(small_fit_cache$fit)) {
    small_fit_cache$fit <- wisp(small_counts(), model.settings = list(LRO_cost = "none"),
                                verbose = FALSE)
  }
  small_fit_cache$fit
}
