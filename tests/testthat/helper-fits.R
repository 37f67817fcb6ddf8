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

# The default fit (count likelihood, "nb").
small_fit <- once(function() {
  wisp(small_counts(), model.settings = list(LRO_cost = "none"), verbose = FALSE)
})

# The same data under the original package's objective.
small_fit_original <- once(function() {
  wisp(small_counts(), model.settings = list(likelihood = "original", LRO_cost = "none"),
       verbose = FALSE)
})

# The likelihood of a fit, to label expectations that loop over both.
fit_label <- function(fit) if (is.null(fit$likelihood)) "original" else fit$likelihood

# Evaluates `expr` with wisp()'s design warning (Wald tests of points below
# 5 animals per group, tested in test-inference.R) muffled, for tests that
# check that nothing else is said.
without_design_warning <- function(expr) {
  withCallingHandlers(expr, wisp_design_warning = function(w) invokeRestart("muffleWarning"))
}

# `x` after a round trip through saveRDS() and readRDS(), as a user who
# saved a fit reloads it.
saved_and_reloaded <- function(x) {
  path <- tempfile(fileext = ".rds")
  on.exit(unlink(path))
  saveRDS(x, path)
  readRDS(path)
}

# Holm's adjustment within each gene (the family of wisp_statistics()), by
# stats::p.adjust on each gene's p-values: `p` named by parameter.
holm_by_gene <- function(fit, p, method = "holm") {
  gene <- fit$parameters$species[match(names(p), fit$parameters$name)]
  adjusted <- p
  for (g in unique(gene)) adjusted[gene == g] <- stats::p.adjust(p[gene == g], method)
  adjusted
}
