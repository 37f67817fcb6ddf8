# The figure of benchmarks/peers.R: per design (columns) and measure (rows:
# false-positive rate, power, power at the arm's own 5 % size, BH FDR), each arm's estimate against the
# animals per group, with +/- 2 Monte Carlo SE. The dashed line is the
# nominal 0.05 (false positives and FDR). Colours: Okabe-Ito, which stay
# apart for the common colour-vision deficiencies; arms also differ in
# point shape, so the figure reads in grey too.
#
# Usage (from the repository root, with ggplot2 installed):
#   Rscript benchmarks/peers_figure.R [SUMMARY_CSV] OUTPUT(.pdf|.png|.svg)
# SUMMARY_CSV defaults to benchmarks/results/peers.csv; the format follows
# OUTPUT's extension (ggsave).

suppressPackageStartupMessages(library(ggplot2))

arm_labels <- c(wispack_anova = "wispack anova(fit)", wispack_wald = "wispack Wald (Bonferroni)",
                mgcv = "mgcv GAM (NB, animal RE)", deseq2 = "DESeq2 pseudobulk LRT",
                glmmtmb = "glmmTMB NB spline GLMM")
okabe_ito <- c("#0072B2", "#56B4E9", "#E69F00", "#D55E00", "#009E73")
design_labels <- c(null = "Null", shape = "Shape (point shift)", total = "Total (fold change)",
                   null_rate = "Null, rate warp only", shape_rate = "Shape, rate warp only",
                   total_rate = "Total, rate warp only")
measure_labels <- c(false_positive = "False-positive rate", power = "Power (p < 0.05)",
                    power_at_size = "Power at own 5 % size", fdr_bh = "BH false-discovery rate")

# The summary in long form: one row per design, animals, arm and measure;
# measures with no genes behind them (power of the null design) dropped.
long_summary <- function(s) {
  parts <- lapply(names(measure_labels), function(m) {
    data.frame(design = s$design, animals = s$animals, arm = s$arm, measure = m,
               value = s[[m]], se = s[[paste0(m, "_se")]], stringsAsFactors = FALSE)
  })
  d <- do.call(rbind, parts)
  d <- d[!is.na(d$value), ]
  d$se[is.na(d$se)] <- 0
  d$arm <- factor(d$arm, levels = names(arm_labels), labels = arm_labels)
  d$design <- droplevels(factor(d$design, levels = names(design_labels), labels = design_labels))
  d$measure <- factor(d$measure, levels = names(measure_labels), labels = measure_labels)
  d
}

peers_figure <- function(s) {
  d <- long_summary(s)
  nominal <- data.frame(measure = factor(measure_labels[c("false_positive", "fdr_bh")],
                                         levels = measure_labels), y = 0.05)
  dodge <- position_dodge(width = 0.6)
  ggplot(d, aes(factor(animals), value, colour = arm, shape = arm)) +
    geom_hline(data = nominal, aes(yintercept = y), linetype = "dashed", colour = "grey40",
               linewidth = 0.4) +
    geom_errorbar(aes(ymin = pmax(0, value - 2 * se), ymax = pmin(1, value + 2 * se)),
                  width = 0, linewidth = 0.5, position = dodge) +
    geom_point(size = 2, position = dodge) +
    facet_grid(measure ~ design) +
    scale_colour_manual(values = setNames(okabe_ito, arm_labels), drop = TRUE) +
    scale_shape_manual(values = setNames(c(16, 1, 17, 15, 18), arm_labels), drop = TRUE) +
    scale_y_continuous(limits = c(0, 1), breaks = seq(0, 1, 0.25)) +
    labs(x = "Animals per genotype", y = NULL, colour = NULL, shape = NULL,
         caption = "Points: estimate; bars: \u00b1 2 Monte Carlo SE; dashed: nominal 0.05") +
    theme_bw(base_size = 11) +
    theme(legend.position = "bottom", panel.grid.minor = element_blank(),
          strip.background = element_rect(fill = "grey95"),
          strip.text = element_text(size = 10), plot.caption = element_text(size = 8)) +
    guides(colour = guide_legend(nrow = 2))
}

main <- function(args) {
  if (length(args) == 1L) args <- c(file.path("benchmarks", "results", "peers.csv"), args)
  if (length(args) != 2L) stop("usage: Rscript benchmarks/peers_figure.R [SUMMARY_CSV] OUTPUT")
  s <- utils::read.csv(args[1], stringsAsFactors = FALSE)
  ggsave(args[2], peers_figure(s), width = 7.5, height = 7, units = "in", dpi = 300)
  cat("Wrote", args[2], "\n")
}

if (sys.nframe() == 0L) main(commandArgs(trailingOnly = TRUE))
