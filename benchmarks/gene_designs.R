# The simulated experiments of the gene-level benchmarks (gene_tests.R,
# effect_sizes.R), in one place so that they stay the same. Animals nested
# in genotype (KO, WT), hemisphere within animal, 40 bins, 4 cells per bin;
# `genes` genes per data set, the last `changed` of them with effects of
# every term on every rate, slope and point, the others with none:
#   base        the calibration benchmark's design (one transition,
#               log-rate steps 0.8-1.5);
#   small_steps log-rate steps of 0.4-0.8 between blocks;
#   two_points  two transitions per curve;
#   unequal     unequal groups: KO has `animals`, WT twice as many;
#   ends        one transition near an end of the axis (baseline point at
#               0.2 of the axis, bin 8.5 of 40);
#   close       two transitions close together (baseline points at 0.42
#               and 0.58 of the axis, 6.4 bins apart).
# Data set k of a design has the seed 1e6 x (its place in gene_designs) +
# 1e4 x animals + k, so new designs go at the end.
# Sourced from the repository root: source("benchmarks/gene_designs.R").
gene_designs <- c("base", "small_steps", "two_points", "unequal", "ends", "close")

simulate_gene_design <- function(design_name, animals, k, genes, changed) {
  per_group <- if (design_name == "unequal") c(animals, 2L * animals) else animals
  design <- wisp_design(between = list(genotype = c("KO", "WT")),
                        within = list(hemisphere = c("left", "right")),
                        animals.per.group = per_group)
  effect_prob <- c(rep(0, genes - changed), rep(1, changed))
  seed <- 1e6 * match(design_name, gene_designs) + 1e4 * animals + k
  wisp_simulate(design = design, n.genes = genes, n.bins = 40, cells.per.bin = 4,
                degrees = if (design_name %in% c("two_points", "close")) 2L else 1L,
                point.positions = switch(design_name, ends = 0.2, close = c(0.42, 0.58)),
                rate.step = if (design_name == "small_steps") c(0.4, 0.8) else c(0.8, 1.5),
                effect.prob = effect_prob, seed = seed)
}
