# The simulated experiments of the calibration benchmarks (calibration.R,
# lrt_calibration.R, slope_scale.R), in one place so that they stay the same:
# animals nested in genotype (KO, WT; `animals` per genotype) crossed with
# hemisphere within each animal; 4 genes over 40 bins with 4 cells per bin
# and one transition each; genes 1-2 without treatment effects, genes 3-4
# with effects on every rate, slope and point. Data set k of a design has
# seed 10000 x animals + k.
# Sourced from the repository root: source("benchmarks/calibration_design.R").
simulate_dataset <- function(animals, k) {
  design <- wisp_design(between = list(genotype = c("KO", "WT")),
                        within = list(hemisphere = c("left", "right")),
                        animals.per.group = animals)
  wisp_simulate(design = design, n.genes = 4, n.bins = 40, cells.per.bin = 4,
                degrees = 1L, effect.prob = c(0, 0, 1, 1), seed = 10000 * animals + k)
}
