# Regenerates data/wisp_example.rda, the example data shipped with wispack:
# simulated counts from the package's own simulator, so the truth is known.
# Run from the repository root with wispack installed:
#   Rscript data-raw/wisp_example.R
library(wispack)
wisp_example <- wisp_simulate(
  n.contexts = 1, n.genes = 4, n.random = 3,
  fixed.effects = list(hemisphere = c("left", "right"), age = c("P12", "P18")),
  n.bins = 50, cells.per.bin = 5, dispersion = 0.05,
  degrees = matrix(c(1L, 2L, 0L, 2L), 1), effect.size = 0.5, seed = 2026
)
save(wisp_example, file = "data/wisp_example.rda", compress = "xz", version = 2)
