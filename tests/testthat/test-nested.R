# Animals nested in a between-animal factor (issue #15, item 4): each animal
# has one genotype, so "animal KO_m1 under WT" does not exist. Only the
# animal x treatment combinations that were observed have fitted values,
# residuals, curves in the rate-count plot and predictions, under both
# likelihoods.

nested_counts <- once(function() {
  design <- wisp_design(between = list(genotype = c("WT", "KO")),
                        within = list(hemisphere = c("left", "right")), animals.per.group = 3)
  wisp_simulate(design = design, n.genes = 2, n.bins = 24, seed = 4)
})

nested_fit <- once(function() {
  wisp(nested_counts(), model.settings = list(LRO_cost = "none"), verbose = FALSE)
})

nested_fit_original <- once(function() {
  wisp(nested_counts(), model.settings = list(likelihood = "original", LRO_cost = "none"),
       verbose = FALSE)
})

# The genotype of each animal, from the data.
animal_genotypes <- function(counts) {
  pairs <- unique(data.frame(ran = counts$ran, genotype = as.character(counts$genotype),
                             stringsAsFactors = FALSE))
  stats::setNames(pairs$genotype, pairs$ran)
}

# The genotype level of each treatment of a fit, by treatment name.
treatment_genotypes <- function(fit) {
  stats::setNames(vapply(fit$treatment$components, function(l) l[["genotype"]], ""),
                  fit$treatment$names)
}

# Rows of fit$count.data.summed whose animal was observed under their
# treatment: population rows, and an animal's rows under its own genotype.
own_genotype_rows <- function(fit, counts) {
  d <- fit$count.data.summed
  animal <- animal_genotypes(counts)
  d$ran == "none" | unname(animal[d$ran]) == unname(treatment_genotypes(fit)[d$treatment])
}

test_that("with nested animals, fitted values, residuals and plots hold observed combinations only", {
  counts <- nested_counts()
  genotypes <- animal_genotypes(counts)
  expect_identical(anyDuplicated(names(genotypes)), 0L) # one genotype per animal
  # Rows of the observed combinations, from the data: each animal in its
  # two hemispheres, every gene and bin; plus the population curves of the
  # 4 treatments.
  n_genes <- length(unique(counts$species))
  n_bins <- length(unique(counts$bin))
  n_treatments <- nrow(unique(counts[c("genotype", "hemisphere")]))
  observed <- nrow(unique(counts[c("ran", "hemisphere")])) * n_genes * n_bins +
    n_treatments * n_genes * n_bins
  for (fit in list(nested_fit(), nested_fit_original())) {
    label <- fit_label(fit)
    d <- fit$count.data.summed
    keep <- own_genotype_rows(fit, counts)
    expect_identical(sum(keep), as.integer(observed), label = label)
    expect_identical(fitted(fit), d$pred[keep], label = label)
    expect_identical(fitted(fit, type = "link"), d$pred.log[keep], label = label)
    expect_identical(residuals(fit), d$count[keep] - d$pred[keep], label = label)
    expect_identical(residuals(fit, type = "log"), d$count.log[keep] - d$pred.log[keep],
                     label = label)
    expect_identical(predict(fit), d$pred.log[keep], label = label)

    # The rate-count plot draws each animal's curve under its own genotype's
    # treatments only: 6 animals x 2 hemispheres.
    p <- plot(fit)
    curves <- p$layers[[2]]$data
    expect_identical(p$layers[[2]]$aes_params$linetype, "dashed")
    pairs <- unique(data.frame(ran = curves$ran, treatment = as.character(curves$treatment),
                               stringsAsFactors = FALSE))
    expect_identical(nrow(pairs), nrow(unique(counts[c("ran", "hemisphere")])), label = label)
    expect_identical(unname(treatment_genotypes(fit)[pairs$treatment]),
                     unname(genotypes[pairs$ran]), label = label)
    # The residual plot (a QQ plot) has one point per observed count of
    # an animal under its own treatments (not the original's "none" rows).
    residual_points <- plot(fit, type = "residuals")$data
    expect_identical(nrow(residual_points), sum(keep & !is.na(d$count.log) & d$ran != "none"),
                     label = label)
  }
  # The original's summed table keeps every combination, as the original
  # package had it (7 random levels, "none" included, x 4 treatments).
  expect_identical(nrow(nested_fit_original()$count.data.summed),
                   as.integer((length(genotypes) + 1) * n_treatments * n_genes * n_bins))
})

test_that("predict() refuses an animal under a treatment it was never observed in", {
  counts <- nested_counts()
  genotypes <- animal_genotypes(counts)
  ko_animal <- names(genotypes)[genotypes == "KO"][1]
  for (fit in list(nested_fit(), nested_fit_original())) {
    label <- fit_label(fit)
    of_genotype <- treatment_genotypes(fit)
    wt_treatment <- names(of_genotype)[of_genotype == "WT"][1]
    ko_treatment <- names(of_genotype)[of_genotype == "KO"][1]
    grid <- data.frame(bin = c(1, 7.5, 24), context = "context1", species = "gene1",
                       treatment = wt_treatment, ran = ko_animal, stringsAsFactors = FALSE)
    expect_error(predict(fit, grid), class = "wisp_input_error",
                 regexp = paste0(ko_animal, " under \"", wt_treatment, "\""), label = label)
    # The same through the fixed-effect columns.
    by_levels <- data.frame(bin = 3, context = "context1", species = "gene1",
                            genotype = "WT", hemisphere = "left", ran = ko_animal)
    expect_error(predict(fit, by_levels), class = "wisp_input_error", regexp = ko_animal,
                 label = label)
    # The animal under its own genotype, and the population under any, are fine.
    d <- fit$count.data.summed
    own <- d$ran == ko_animal & d$treatment == ko_treatment & d$species == "gene1"
    expect_equal(predict(fit, d[own, c("bin", "context", "species", "treatment", "ran")]),
                 d$pred.log[own], tolerance = 1e-12, label = label)
    population <- d$ran == "none" & d$treatment == wt_treatment & d$species == "gene1"
    expect_equal(predict(fit, transform(d[population, c("bin", "context", "species",
                                                        "treatment")])),
                 d$pred.log[population], tolerance = 1e-12, label = label)
  }
})
