# Shared small simulated data and fits; computed once per test run.
small_counts <- function() {
  wisp_simulate(n.genes = 2, n.random = 3, n.bins = 40, seed = 11)
}

# A function that calls `make()` the first time and returns that value after.
once <- function(make) {
  value <- NULL
  function() {
    if (is.null(value)) value <<- make()
    value
  }
}

small_fit <- once(function() {
  wisp(small_counts(), model.settings = list(LRO_cost = "none"), verbose = FALSE)
})
