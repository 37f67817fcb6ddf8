# Why slope effects are tested on the log-ratio scale (model vignette
# §15.1): on the calibration benchmark's designs, the Wald statistic of the
# true-null slope effects on the slopes' own scale (beta / se) against the
# statistic of the same hypothesis on the log-ratio scale
# (rho = log P - log N), with the fit's default priors and with every curve
# prior switched off. A calibrated statistic has mean z^2 = 1 and rejects 5 %
# at alpha = 0.05. Normal quantiles throughout (no Satterthwaite df), so the
# between-animal effects at 3 animals are compared on equal terms only.
#
# Usage (from the repository root, with wispack installed):
#   Rscript benchmarks/slope_scale.R [DATASETS]     # default 60 per design
# Writes benchmarks/results/slope_scale.csv and prints a Markdown table.

args <- commandArgs(trailingOnly = TRUE)
datasets <- if (length(args)) as.integer(args[1]) else 60L
suppressPackageStartupMessages(library(wispack))

# The data sets of the calibration benchmark (same seeds).
source("benchmarks/calibration_design.R")

priors <- list(default = list(),
               none = list(effect_prior_sd = 0, slope_prior_sd = 0, step_prior_sd = 0))

# Both statistics of every slope effect of a fit, from its estimates and
# vcov() alone.
slope_statistics <- function(fit, truth) {
  p <- fit$parameters
  estimate <- fit$fitted.parameters
  covariance <- vcov(fit)
  W <- fit$weight.matrix
  contrasts <- solve(W)
  rows <- list()
  for (species in unique(p$species)) {
    curve <- p$name[p$species == species & p$component == "tslope" &
                      p$role %in% c("baseline", "beta")]
    curve <- curve[order(match(p$treatment[match(curve, p$name)], fit$treatment$names))]
    if (length(curve) != nrow(W)) next
    slopes <- drop(W %*% estimate[curve])
    slope_covariance <- W %*% covariance[curve, curve] %*% t(W)
    for (j in 2:length(curve)) {
      w <- contrasts[j, ]
      positive <- sum((w * slopes)[w > 0])
      negative <- -sum((w * slopes)[w < 0])
      g <- ifelse(w > 0, w / positive, ifelse(w < 0, w / negative, 0))
      rows[[length(rows) + 1]] <- data.frame(
        parameter = curve[j], truth = unname(truth$effects[curve[j]]),
        z_value = unname(estimate[curve[j]] / sqrt(covariance[curve[j], curve[j]])),
        z_ratio = log(positive / negative) / sqrt(drop(t(g) %*% slope_covariance %*% g)))
    }
  }
  do.call(rbind, rows)
}

rows <- list()
for (animals in c(3L, 5L, 8L)) {
  for (k in seq_len(datasets)) {
    data <- simulate_dataset(animals, k)
    truth <- attr(data, "truth")
    for (prior in names(priors)) {
      fit <- wisp(data, degrees = truth$degrees, verbose = FALSE, fit_only = TRUE,
                  model.settings = c(list(LRO_cost = "none"), priors[[prior]]))
      s <- slope_statistics(fit, truth)
      s$animals <- animals
      s$prior <- prior
      rows[[length(rows) + 1]] <- s
    }
  }
}
rows <- do.call(rbind, rows)
null <- rows[rows$truth == 0 & is.finite(rows$z_value) & is.finite(rows$z_ratio), ]
summary <- do.call(rbind, lapply(split(null, list(null$prior, null$animals)), function(r) {
  data.frame(animals = r$animals[1], prior = r$prior[1], nulls = nrow(r),
             mean_z2_value = mean(r$z_value^2), mean_z2_ratio = mean(r$z_ratio^2),
             reject_value = mean(abs(r$z_value) > stats::qnorm(0.975)),
             reject_ratio = mean(abs(r$z_ratio) > stats::qnorm(0.975)))
}))
summary <- summary[order(summary$prior, summary$animals), ]
dir.create("benchmarks/results", showWarnings = FALSE)
source("benchmarks/headlines.R") # with_provenance(), register_headline()
utils::write.csv(with_provenance(summary, "nb"), "benchmarks/results/slope_scale.csv", row.names = FALSE)
cat(sprintf("\n%d data sets per design; R %s; %s\n\n", datasets, getRversion(), format(Sys.time(), "%Y-%m-%d %H:%M")))
cat("| animals/group | curve priors | true-null slope effects | mean z² (slope scale) | mean z² (log ratio) | rejected at 0.05 (slope scale) | rejected (log ratio) |\n")
cat("|---:|---|---:|---:|---:|---:|---:|\n")
for (i in seq_len(nrow(summary))) {
  s <- summary[i, ]
  se <- function(p) sqrt(p * (1 - p) / s$nulls)
  cat(sprintf("| %d | %s | %d | %.2f | %.2f | %.3f ± %.3f | %.3f ± %.3f |\n", s$animals, s$prior, s$nulls,
              s$mean_z2_value, s$mean_z2_ratio, s$reject_value, se(s$reject_value),
              s$reject_ratio, se(s$reject_ratio)))
}

# Headline figures for benchmarks/RESULTS.md (benchmarks/headlines.R).
d <- summary[summary$prior == "default", ]
register_headline("slope_scale",
                  c(sprintf("mean z² of true-null slope effects, slope scale, %d animals per group", d$animals),
                    sprintf("mean z² of true-null slope effects, log ratio, %d animals per group", d$animals)),
                  sprintf("%.2f", c(d$mean_z2_value, d$mean_z2_ratio)), "mean z²",
                  paste("Rscript benchmarks/slope_scale.R", datasets))
