# wispack beside what labs use instead, on the same simulated data, for one
# question per gene: "does genotype change this gene anywhere along the axis?"
#
# Designs (wispack's own simulator, wisp_simulate(); animals nested in
# genotype WT/KO, both hemispheres of every animal, 40 bins, 4 cells per bin):
# - null:  no gene has any effect (genotype, hemisphere or interaction).
# - shape: ~30 % of the genes have two transitions (a bump) whose points KO
#          moves by the same 2 bins (a translation: rates and slopes are not
#          changed). The simulator draws every effect with a random sign, so
#          each changed gene is redrawn (new seed) until both points of its
#          genotype effect move the same way and its genotype x hemisphere
#          effect, if any, does too. The total along the axis then changes
#          only by what the bump pushes past the edges: the raw rows carry
#          that true log2 change of the total (true_total_log2fc); it is small
#          but not exactly 0.
# - total: ~30 % of the genes (one transition, so spatially varying) have
#          the same genotype effect on both block rates (redrawn until the
#          signs agree, likewise the interaction). The simulator's effects
#          are on the log(1 + rate) scale, so this is a uniform fold change
#          of 1 + rate, close to but not exactly one of the rate itself
#          (true_total_log2fc says how large). With --animals 4 this is the
#          original package's own benchmark design (2 conditions x 4
#          replicates), here with both hemispheres of every animal.
# - null_rate, shape_rate, total_rate (only when asked for): null, shape
#          and total with the rate warp as the only animal variation (no
#          point or slope warps; see `designs`): data whose between-animal
#          variation the peers' random intercepts nearly describe.
# Unchanged genes of a design have the same shape as its changed ones (one
# transition in null and total, two in shape) and no effects at all. Genes
# are simulated one at a time with the same design and cells (so the data
# are what one wisp_simulate() call would give, random effects independent
# per gene), which is what lets a changed gene be redrawn on its own.
#
# Arms, each giving one p-value per gene:
# - wispack_anova: wisp(counts) (detected structure), then the gene-level
#   anova(fit) of ONE fit, rows with term == "genotype". Where anova(fit)
#   does not exist yet (main before the gene-level anova) it is NA.
# - wispack_wald: the default Wald table of the same fit as a gene-level
#   screen: Bonferroni within the gene over its genotype-involving effects
#   (main and interaction with hemisphere), min p x number of tests.
# - mgcv: per gene, gam(y ~ genotype + hemisphere + s(bin, by = genotype,
#   k = 8) + s(animal, bs = "re"), nb(), offset log(cells), ML) against the
#   same without genotype, anova(m0, m1, test = "Chisq"), on counts summed
#   per (animal, hemisphere, bin).
# - deseq2: pseudobulk per animal x hemisphere, counts summed over bins,
#   cells as normalisation factors, LRT of ~ hemisphere + genotype against
#   ~ hemisphere. It treats the two hemispheres of one animal as
#   independent samples (no animal term is possible with genotype nested in
#   animal), so its replicates are pseudo-replicates. With 4-20 genes its
#   dispersion trend has little to share; a lab's thousands of genes would
#   help it.
# - glmmtmb: per gene, nbinom2 with splines::ns(bin, 4) x genotype,
#   hemisphere and (1 | animal), against the same without the genotype
#   terms, likelihood-ratio chi-square on the difference in parameters.
# An arm whose package is not installed is NA (with a note) and the run
# goes on.
#
# Usage (from the repository root, with wispack installed):
#   Rscript benchmarks/peers.R [--datasets N] [--animals 3,5,8]
#                              [--designs null,shape,total] [--genes G]
#                              [--arms wispack,mgcv,deseq2,glmmtmb]
#                              [--label NAME]
# Defaults (2.5-4 minutes on 2 cores): 2 data sets, 3 animals per group,
# the designs null, shape and total, 6 genes, all arms. A data set of 6 genes
# with 3 animals per group takes about 25 s, most of it glmmTMB (about 2.5 s
# a gene); more animals cost more. Resumable: each (design, animals, data set)
# result is kept in benchmarks/out/peers/<label>/ and skipped when it
# exists (the file name has the genes but not the arms: use a new --label
# for another set of arms). Writes benchmarks/results/peers_raw<suffix>.csv (one row per
# design, animals, data set, gene and arm) and peers<suffix>.csv (the
# summary), suffix "_<label>" unless the label is "final" (which also
# writes the summary's main columns to inst/extdata/peers.csv for
# vignette("inference")); prints the summary as a Markdown table. Besides
# false positives, power and BH FDR, the summary has each arm's power at
# its own 5 % size (the 0.05 quantile of its null genes' p-values as the
# threshold) and its power minus mgcv's, paired by data set. The figure:
# benchmarks/peers_figure.R.

suppressPackageStartupMessages(library(wispack))

# ---------------------------------------------------------------------------
# Settings

parse_args <- function(args) {
  value <- function(name, default) {
    at <- match(paste0("--", name), args)
    if (is.na(at)) return(default)
    if (at == length(args)) stop("--", name, " needs a value")
    args[at + 1]
  }
  split <- function(x) strsplit(x, ",", fixed = TRUE)[[1]]
  known <- c("--datasets", "--animals", "--designs", "--genes", "--arms", "--label")
  flags <- args[grepl("^--", args)]
  if (length(setdiff(flags, known))) stop("unknown option(s): ", paste(setdiff(flags, known), collapse = " "))
  config <- list(datasets = as.integer(value("datasets", "2")),
                 animals = as.integer(split(value("animals", "3"))),
                 designs = split(value("designs", "null,shape,total")),
                 genes = as.integer(value("genes", "6")),
                 arms = split(value("arms", "wispack,mgcv,deseq2,glmmtmb")),
                 label = value("label", "smoke"))
  stopifnot(config$datasets >= 1, all(config$animals >= 2), config$genes >= 4,
            config$genes <= 20, all(config$designs %in% names(designs)),
            all(config$arms %in% c("wispack", "mgcv", "deseq2", "glmmtmb")),
            grepl("^[A-Za-z0-9_-]+$", config$label))
  config
}

alpha <- 0.05
n_bins <- 40L
cells_per_bin <- 4L
changed_share <- 0.3
wt <- "WT"
ko <- "KO"

# ---------------------------------------------------------------------------
# Designs: each a function of (animals per group, genes, data set index)
# returning the token data of wisp_simulate() with a `changed` attribute
# (TRUE per gene where genotype changes it) and `total_log2fc`.

experiment <- function(animals) {
  wisp_design(between = list(genotype = c(wt, ko)),
              within = list(hemisphere = c("left", "right")),
              animals.per.group = animals)
}

# Animal variation by the rate warp alone (no point or slope warps).
rate_warp_only <- c(point = 0, rate = 0.1, slope = 0)

# The simulator settings of each design's changed and unchanged genes, and
# the condition a changed gene's truth must meet (see the header).
designs <- list(
  null = list(index = 1L, degree = 1L, changed = 0,
              changed_args = NULL, accept = NULL),
  shape = list(index = 2L, degree = 2L, changed = changed_share,
               # rate.step fixed: the third block rate equals the first, a bump
               changed_args = list(effect.size = 0, slope.effect = 0, point.effect = 2,
                                   effect.prob = 0.7, rate.step = c(1, 1)),
               null_args = list(rate.step = c(1, 1)),
               accept = function(truth) same_shift(truth, "tpoint")),
  total = list(index = 3L, degree = 1L, changed = changed_share,
               changed_args = list(effect.size = 0.3, slope.effect = 0, point.effect = 0,
                                   effect.prob = 0.7),
               accept = function(truth) same_shift(truth, "Rt")),
  # Not a default: the null design with the rate warp as the only animal
  # variation (no point or slope warps), to see how much of the peers'
  # false positives the position warps cause. The rate warp scales
  # log(1 + rate) by exp(u), so it is not a random intercept on the log
  # scale either: an animal's fold change grows with the rate along the
  # axis. The simulator has no pure per-animal intercept; with no warps at
  # all (random.sd = 0) the peer arms were checked to hold their size.
  null_rate = list(index = 4L, degree = 1L, changed = 0, changed_args = NULL, accept = NULL,
                   null_args = list(random.sd = rate_warp_only)),
  # shape and total with the rate warp as the only animal variation: data
  # whose between-animal variation the peers' random intercepts (nearly)
  # describe, for comparing power where every arm holds its size.
  shape_rate = list(index = 5L, degree = 2L, changed = changed_share,
                    changed_args = list(effect.size = 0, slope.effect = 0, point.effect = 2,
                                        effect.prob = 0.7, rate.step = c(1, 1),
                                        random.sd = rate_warp_only),
                    null_args = list(rate.step = c(1, 1), random.sd = rate_warp_only),
                    accept = function(truth) same_shift(truth, "tpoint")),
  total_rate = list(index = 6L, degree = 1L, changed = changed_share,
                    changed_args = list(effect.size = 0.3, slope.effect = 0, point.effect = 0,
                                        effect.prob = 0.7, random.sd = rate_warp_only),
                    null_args = list(random.sd = rate_warp_only),
                    accept = function(truth) same_shift(truth, "Rt"))
)

# KO minus WT of a component's values, per hemisphere (rows) and block.
genotype_shift <- function(truth, component) {
  curves <- truth$curves[truth$curves$component == component, ]
  cells <- unique(truth$rates[c("treatment", "genotype", "hemisphere")])
  curves$genotype <- cells$genotype[match(curves$treatment, cells$treatment)]
  curves$hemisphere <- cells$hemisphere[match(curves$treatment, cells$treatment)]
  sapply(sort(unique(curves$block)), function(b) {
    sapply(c("left", "right"), function(h) {
      at <- curves$block == b & curves$hemisphere == h
      curves$value[at & curves$genotype == ko] - curves$value[at & curves$genotype == wt]
    })
  })
}

# The genotype effect is the same for every block (transition point or block
# rate) within each hemisphere, and not 0 in the reference hemisphere: a pure
# translation of the bump (tpoint) or one shift of every log(1 + rate) (Rt).
same_shift <- function(truth, component) {
  shift <- genotype_shift(truth, component)
  all(abs(shift - shift[, 1]) < 1e-9) && abs(shift["left", 1]) > 1e-9
}

# True log2 ratio KO / WT of the expected total count along the axis (the
# population curves, per hemisphere); the one larger in size. The rate of a
# log rate is the simulator's own (its smooth floor at 0), hence the :::.
total_log2fc <- function(truth) {
  rates <- truth$rates
  rates$expected <- wispack:::r_of_psi(rates$log.rate.population) * rates$cells
  totals <- tapply(rates$expected, rates[c("genotype", "hemisphere")], sum)
  ratio <- log2(totals[ko, ] / totals[wt, ])
  ratio[which.max(abs(ratio))]
}

# Seed of gene g of data set k: one per (design, animals, k, g), the same
# whichever other settings are run; redraws take the next seeds of a stream.
gene_seeds <- function(design, animals, k, g, n = 500L) {
  master <- designs[[design]]$index * 1e7 + animals * 1e5 + k * 100 + g
  old <- if (exists(".Random.seed", globalenv())) get(".Random.seed", globalenv())
  on.exit(if (!is.null(old)) assign(".Random.seed", old, globalenv()))
  set.seed(master)
  sample.int(.Machine$integer.max, n)
}

simulate_gene <- function(design, animals, k, g, changed) {
  spec <- designs[[design]]
  args <- if (changed) spec$changed_args else c(list(effect.prob = 0), spec$null_args)
  for (seed in gene_seeds(design, animals, k, g)) {
    data <- do.call(wisp_simulate, c(list(design = experiment(animals), n.genes = 1L,
                                          n.bins = n_bins, cells.per.bin = cells_per_bin,
                                          degrees = spec$degree, seed = seed), args))
    if (!changed || spec$accept(attr(data, "truth"))) {
      attr(data, "seed") <- seed
      return(data)
    }
  }
  stop("no draw met the ", design, " design's condition for gene ", g)
}

simulate_experiment <- function(design, animals, genes, k) {
  n_changed <- round(designs[[design]]$changed * genes)
  parts <- lapply(seq_len(genes), function(g) simulate_gene(design, animals, k, g, g <= n_changed))
  data <- do.call(rbind, lapply(seq_len(genes), function(g) {
    d <- parts[[g]]
    d$species <- sprintf("gene%02d", g)
    attributes(d)[c("truth", "seed")] <- NULL
    d
  }))
  names <- sprintf("gene%02d", seq_len(genes))
  attr(data, "changed") <- setNames(seq_len(genes) <= n_changed, names)
  attr(data, "total_log2fc") <- setNames(vapply(parts, function(d) {
    unname(total_log2fc(attr(d, "truth")))
  }, numeric(1)), names)
  attr(data, "seeds") <- setNames(vapply(parts, attr, integer(1), "seed"), names)
  data
}

# Counts summed per (animal, hemisphere, genotype, bin, gene), with the
# number of cells summed as the exposure: what the GAM and GLMM arms fit.
summed_counts <- function(data) {
  data$cells <- 1
  s <- aggregate(cbind(y = count, cells) ~ species + ran + genotype + hemisphere + bin,
                 data = data, FUN = sum)
  s$animal <- factor(s$ran)
  s$genotype <- factor(s$genotype, levels = c(wt, ko))
  s$hemisphere <- factor(s$hemisphere, levels = c("left", "right"))
  s
}

# ---------------------------------------------------------------------------
# Arms: each returns data.frame(gene, p.value, cpu, note). CPU seconds are
# user + sys of this process and its children (forked workers) around the
# arm's work; arms that fit all genes at once share their time equally.

cpu_now <- function() {
  t <- proc.time()
  sum(t[c("user.self", "sys.self", "user.child", "sys.child")], na.rm = TRUE)
}

# The value of `expr` (or its error, as an "arm_error") with its CPU time
# and its warnings (a peer's convergence warnings go into the row's note:
# its p-value is kept, as a lab would keep it).
timed <- function(expr) {
  start <- cpu_now()
  warnings <- character()
  value <- tryCatch(withCallingHandlers(expr, warning = function(w) {
    warnings <<- c(warnings, conditionMessage(w))
    invokeRestart("muffleWarning")
  }), error = function(e) structure(conditionMessage(e), class = "arm_error"))
  list(value = value, cpu = cpu_now() - start,
       warning = if (length(warnings)) paste("warning:", unique(warnings)[1]) else "")
}

failed <- function(value) inherits(value, "arm_error")

short <- function(x) substr(gsub("[\r\n]+", " ", x), 1, 200)

na_rows <- function(genes, note, cpu = NA_real_) {
  data.frame(gene = genes, p.value = NA_real_, cpu = cpu, note = short(note),
             stringsAsFactors = FALSE)
}

# One wisp() fit feeds both wispack arms; its time is charged to both (each
# arm would need it alone), the anova's and the Wald screen's on top.
arm_wispack <- function(data, genes) {
  fit <- timed(suppressWarnings(wisp(data, verbose = FALSE)))
  if (failed(fit$value)) {
    note <- paste("wisp() failed:", fit$value)
    rows <- na_rows(genes, note, fit$cpu / length(genes))
    return(list(wispack_anova = rows, wispack_wald = rows))
  }
  fit_cpu <- fit$cpu
  fit <- fit$value
  # Kept with every p-value of the fit: a fit that did not converge is a
  # result of the arm, not a reason to drop it.
  unconverged <- if (isFALSE(all(fit$fit.diagnostics$converged))) "fit not converged" else ""
  gene_anova <- timed(anova(fit))
  anova_rows <- if (failed(gene_anova$value)) {
    na_rows(genes, paste("anova(fit) failed:", gene_anova$value),
            (fit_cpu + gene_anova$cpu) / length(genes))
  } else {
    a <- gene_anova$value
    a <- a[a$term == "genotype", ]
    data.frame(gene = genes, p.value = a$p.value[match(genes, a$gene)],
               cpu = (fit_cpu + gene_anova$cpu) / length(genes),
               note = ifelse(genes %in% a$gene, "", "no genotype row"), stringsAsFactors = FALSE)
  }
  wald <- timed(wald_screen(fit, genes))
  wald_rows <- if (failed(wald$value)) {
    na_rows(genes, paste("Wald screen failed:", wald$value), (fit_cpu + wald$cpu) / length(genes))
  } else {
    data.frame(gene = genes, p.value = wald$value, cpu = (fit_cpu + wald$cpu) / length(genes),
               note = "", stringsAsFactors = FALSE)
  }
  mark <- function(rows) {
    rows$note <- trimws(paste(unconverged, rows$note), whitespace = "[ ]")
    rows
  }
  list(wispack_anova = mark(anova_rows), wispack_wald = mark(wald_rows))
}

# Bonferroni within each gene over the Wald p-values of its effects that
# involve genotype: the beta rows of fit$parameters whose treatment (e.g.
# "KO" or "KO:right") names a non-reference genotype level.
wald_screen <- function(fit, genes) {
  p <- fit$parameters
  involves <- vapply(strsplit(p$treatment, ":", fixed = TRUE), function(t) ko %in% t, logical(1))
  tested <- p$name[p$role == "beta" & involves]
  s <- fit$stats$parameters
  s <- s[s$parameter %in% tested & !is.na(s$p.value), ]
  s$species <- p$species[match(s$parameter, p$name)]
  vapply(genes, function(g) {
    pv <- s$p.value[s$species == g]
    if (!length(pv)) NA_real_ else min(1, min(pv) * length(pv))
  }, numeric(1))
}

arm_mgcv <- function(summed, genes) {
  if (!requireNamespace("mgcv", quietly = TRUE)) return(na_rows(genes, "mgcv not installed"))
  rows <- lapply(genes, function(g) {
    d <- summed[summed$species == g, ]
    run <- timed({
      m1 <- mgcv::gam(y ~ genotype + hemisphere + s(bin, by = genotype, k = 8) +
                        s(animal, bs = "re") + offset(log(cells)),
                      family = mgcv::nb(), data = d, method = "ML")
      m0 <- mgcv::gam(y ~ hemisphere + s(bin, k = 8) + s(animal, bs = "re") + offset(log(cells)),
                      family = mgcv::nb(), data = d, method = "ML")
      a <- anova(m0, m1, test = "Chisq")
      a[["Pr(>Chi)"]][2]
    })
    if (failed(run$value)) return(na_rows(g, paste("gam failed:", run$value), run$cpu))
    data.frame(gene = g, p.value = run$value, cpu = run$cpu, note = short(run$warning),
               stringsAsFactors = FALSE)
  })
  do.call(rbind, rows)
}

# Pseudobulk: one sample per animal x hemisphere, counts summed over bins;
# the normalisation factors are the cells summed (the same for every gene),
# scaled to geometric mean 1 as DESeq2 expects.
arm_deseq2 <- function(summed, genes) {
  if (!requireNamespace("DESeq2", quietly = TRUE)) {
    return(na_rows(genes, "DESeq2 not installed (apt-get install r-bioc-deseq2)"))
  }
  run <- timed({
    summed$sample <- paste(summed$ran, summed$hemisphere, sep = "_")
    counts <- xtabs(y ~ species + sample, data = summed)
    counts <- matrix(as.integer(counts), nrow(counts), dimnames = dimnames(counts))[genes, ]
    samples <- unique(summed[c("sample", "genotype", "hemisphere")])
    samples <- samples[match(colnames(counts), samples$sample), ]
    cells <- tapply(summed$cells[summed$species == genes[1]],
                    summed$sample[summed$species == genes[1]], sum)[colnames(counts)]
    factors <- matrix(cells / exp(mean(log(cells))), nrow(counts), ncol(counts), byrow = TRUE,
                      dimnames = dimnames(counts))
    deseq2_lrt(counts, samples, factors)
  })
  if (failed(run$value)) return(na_rows(genes, paste("DESeq2 failed:", run$value), run$cpu / length(genes)))
  data.frame(gene = genes, p.value = run$value$p[genes], cpu = run$cpu / length(genes),
             note = run$value$note, stringsAsFactors = FALSE)
}

# DESeq2's default dispersion trend needs more genes than a data set here
# has; where it fails, the mean trend, then gene-wise estimates alone.
deseq2_lrt <- function(counts, samples, factors) {
  make <- function() {
    dds <- suppressMessages(DESeq2::DESeqDataSetFromMatrix(counts, samples, ~ hemisphere + genotype))
    DESeq2::normalizationFactors(dds) <- factors
    dds
  }
  note <- "hemispheres as independent samples"
  for (fit_type in c("parametric", "mean")) {
    dds <- tryCatch(suppressWarnings(suppressMessages(
      DESeq2::DESeq(make(), test = "LRT", reduced = ~ hemisphere, fitType = fit_type, quiet = TRUE))),
      error = function(e) NULL)
    if (!is.null(dds)) {
      r <- DESeq2::results(dds, independentFiltering = FALSE, cooksCutoff = FALSE)
      return(list(p = setNames(r$pvalue, rownames(r)),
                  note = paste0(note, "; fitType ", fit_type)))
    }
  }
  dds <- suppressMessages(DESeq2::estimateDispersionsGeneEst(make()))
  DESeq2::dispersions(dds) <- pmax(S4Vectors::mcols(dds)$dispGeneEst, 1e-8)
  dds <- suppressMessages(DESeq2::nbinomLRT(dds, reduced = ~ hemisphere))
  r <- DESeq2::results(dds, independentFiltering = FALSE, cooksCutoff = FALSE)
  list(p = setNames(r$pvalue, rownames(r)), note = paste0(note, "; gene-wise dispersions"))
}

arm_glmmtmb <- function(summed, genes) {
  if (!requireNamespace("glmmTMB", quietly = TRUE)) {
    return(na_rows(genes, "glmmTMB not installed (apt-get install r-cran-glmmtmb)"))
  }
  rows <- lapply(genes, function(g) {
    d <- summed[summed$species == g, ]
    run <- timed({
      m1 <- glmmTMB::glmmTMB(y ~ hemisphere + genotype * splines::ns(bin, 4) + (1 | animal) +
                               offset(log(cells)), family = glmmTMB::nbinom2(), data = d)
      m0 <- glmmTMB::glmmTMB(y ~ hemisphere + splines::ns(bin, 4) + (1 | animal) +
                               offset(log(cells)), family = glmmTMB::nbinom2(), data = d)
      l1 <- stats::logLik(m1)
      l0 <- stats::logLik(m0)
      if (!is.finite(l1) || !is.finite(l0)) stop("non-finite log-likelihood (no convergence)")
      df <- attr(l1, "df") - attr(l0, "df")
      stats::pchisq(max(0, 2 * (as.numeric(l1) - as.numeric(l0))), df, lower.tail = FALSE)
    })
    if (failed(run$value)) return(na_rows(g, paste("glmmTMB failed:", run$value), run$cpu))
    data.frame(gene = g, p.value = run$value, cpu = run$cpu, note = short(run$warning),
               stringsAsFactors = FALSE)
  })
  do.call(rbind, rows)
}

# Every chosen arm on one data set: one row per gene and arm.
run_arms <- function(data, arms) {
  genes <- names(attr(data, "changed"))
  summed <- summed_counts(data)
  out <- list()
  if ("wispack" %in% arms) out <- c(out, arm_wispack(data, genes))
  if ("mgcv" %in% arms) out$mgcv <- arm_mgcv(summed, genes)
  if ("deseq2" %in% arms) out$deseq2 <- arm_deseq2(summed, genes)
  if ("glmmtmb" %in% arms) out$glmmtmb <- arm_glmmtmb(summed, genes)
  do.call(rbind, Map(function(rows, arm) cbind(arm = arm, rows, stringsAsFactors = FALSE),
                     out, names(out)))
}

run_dataset <- function(design, animals, k, genes, arms, path) {
  if (file.exists(path)) return(invisible(readRDS(path)))
  data <- simulate_experiment(design, animals, genes, k)
  rows <- run_arms(data, arms)
  rows$design <- design
  rows$animals <- animals
  rows$dataset <- k
  rows$changed <- attr(data, "changed")[rows$gene]
  rows$true_total_log2fc <- attr(data, "total_log2fc")[rows$gene]
  rows$seed <- attr(data, "seeds")[rows$gene]
  names(rows)[names(rows) == "cpu"] <- "cpu_seconds"
  rows <- rows[c("design", "animals", "dataset", "gene", "seed", "changed", "true_total_log2fc",
                 "arm", "p.value", "cpu_seconds", "note")]
  saveRDS(rows, path)
  invisible(rows)
}

# ---------------------------------------------------------------------------
# Summary

rate_se <- function(x) {
  x <- x[!is.na(x)]
  n <- length(x)
  p <- if (n) mean(x) else NA_real_
  c(rate = p, se = if (n) sqrt(p * (1 - p) / n) else NA_real_, n = n)
}

# BH across the genes of each data set; the false-discovery proportion
# (0 when nothing is called) averaged over data sets, with its SE.
fdr_se <- function(r) {
  fdp <- vapply(split(r, r$dataset), function(d) {
    d <- d[!is.na(d$p.value), ]
    if (!nrow(d)) return(NA_real_)
    called <- stats::p.adjust(d$p.value, "BH") < alpha
    if (!any(called)) 0 else sum(called & !d$changed) / sum(called)
  }, numeric(1))
  fdp <- fdp[!is.na(fdp)]
  c(fdr = if (length(fdp)) mean(fdp) else NA_real_,
    se = if (length(fdp) > 1) stats::sd(fdp) / sqrt(length(fdp)) else NA_real_)
}

arm_package <- c(wispack_anova = "wispack", wispack_wald = "wispack", mgcv = "mgcv",
                 deseq2 = "DESeq2", glmmtmb = "glmmTMB")

package_version_of <- function(package) {
  if (requireNamespace(package, quietly = TRUE)) format(utils::packageVersion(package)) else NA
}

# Power at the arm's own 5 % false-positive rate: changed genes whose
# p-value is at or below the 0.05 quantile of the null genes' p-values of
# the same design and group size. An arm whose nominal tests are liberal is
# then compared at the size it really has.
size_adjusted_power <- function(r) {
  null_p <- r$p.value[!r$changed & !is.na(r$p.value)]
  if (length(null_p) < 20L || !any(r$changed)) return(c(rate = NA_real_, se = NA_real_))
  threshold <- stats::quantile(null_p, alpha, type = 1, names = FALSE)
  rate_se(r$p.value[r$changed] <= threshold)[c("rate", "se")]
}

# Power minus mgcv's on the same data sets (paired: the mean over data sets
# of the difference in the share of changed genes called, and its SE).
power_minus_mgcv <- function(r, rows) {
  g <- rows[rows$arm == "mgcv" & rows$design == r$design[1] & rows$animals == r$animals[1], ]
  if (!nrow(g) || identical(r$arm[1], "mgcv") || !any(r$changed)) return(c(NA_real_, NA_real_))
  called <- function(d) tapply(d$p.value[d$changed] < alpha, d$dataset[d$changed], mean,
                               na.rm = TRUE)
  a <- called(r)
  b <- called(g)
  both <- intersect(names(a), names(b))
  d <- a[both] - b[both]
  d <- d[!is.na(d)]
  if (length(d) < 2L) return(c(NA_real_, NA_real_))
  c(mean(d), stats::sd(d) / sqrt(length(d)))
}

summarise_rows <- function(rows, provenance) {
  keys <- unique(rows[c("design", "animals", "arm")])
  out <- lapply(seq_len(nrow(keys)), function(i) {
    r <- merge(rows, keys[i, ])
    fp <- rate_se(r$p.value[!r$changed] < alpha)
    power <- rate_se(r$p.value[r$changed] < alpha)
    adjusted <- size_adjusted_power(r)
    paired <- power_minus_mgcv(r, rows)
    fdr <- fdr_se(r)
    data.frame(keys[i, ], false_positive = fp[["rate"]], false_positive_se = fp[["se"]],
               null_genes = sum(!r$changed), power = power[["rate"]], power_se = power[["se"]],
               power_at_size = adjusted[["rate"]], power_at_size_se = adjusted[["se"]],
               power_minus_mgcv = paired[1], power_minus_mgcv_se = paired[2],
               changed_genes = sum(r$changed), fdr_bh = fdr[["fdr"]], fdr_bh_se = fdr[["se"]],
               cpu_per_gene = stats::median(r$cpu_seconds, na.rm = TRUE),
               datasets = length(unique(r$dataset)), genes = nrow(r),
               na_p = sum(is.na(r$p.value)),
               package = arm_package[[r$arm[1]]],
               version = package_version_of(arm_package[[r$arm[1]]]),
               versions = provenance$versions,
               wispack_commit = provenance$wispack_commit, commit = provenance$commit,
               stringsAsFactors = FALSE)
  })
  s <- do.call(rbind, out)
  s[order(match(s$design, names(designs)), s$animals, match(s$arm, names(arm_package))), ]
}

print_table <- function(s) {
  fmt <- function(p, se) ifelse(is.na(p), "–", sprintf("%.3f ± %.3f", p, se))
  cat(paste0("\n| design | animals/group | arm | false positives | power | power at 5 % size ",
             "| power - mgcv's (paired) | BH FDR | CPU s/gene | NA |\n"))
  cat("|---|---:|---|---|---|---|---|---|---:|---:|\n")
  for (i in seq_len(nrow(s))) {
    x <- s[i, ]
    cat(sprintf("| %s | %d | %s | %s | %s | %s | %s | %s | %.2f | %d |\n", x$design, x$animals,
                x$arm, fmt(x$false_positive, x$false_positive_se), fmt(x$power, x$power_se),
                fmt(x$power_at_size, x$power_at_size_se),
                fmt(x$power_minus_mgcv, x$power_minus_mgcv_se),
                fmt(x$fdr_bh, x$fdr_bh_se), x$cpu_per_gene, x$na_p))
  }
}

# The commit of this script's checkout, and the one the installed wispack
# was built from (from a fit's provenance: they may differ).
provenance_of <- function() {
  commit <- tryCatch(system2("git", c("rev-parse", "--short", "HEAD"), stdout = TRUE,
                             stderr = FALSE), error = function(e) NA_character_, warning = function(w) NA_character_)
  built <- tryCatch({
    d <- wisp_simulate(n.genes = 1, n.bins = 20, seed = 1)
    sub("^([0-9a-f]{7})[0-9a-f]*", "\\1",
        suppressWarnings(wisp(d, verbose = FALSE, fit_only = TRUE))$provenance$commit)
  }, error = function(e) NA_character_)
  peers <- unique(arm_package)
  versions <- paste(peers, vapply(peers, function(p) as.character(package_version_of(p)), ""),
                    collapse = "; ")
  # A script edited since that commit says so: its rows are not the commit's.
  edited <- tryCatch(length(system2("git", c("status", "--porcelain", "--", "benchmarks/peers.R"),
                                    stdout = TRUE, stderr = FALSE)) > 0, error = function(e) FALSE,
                     warning = function(w) FALSE)
  if (length(commit) && edited) commit <- paste0(commit[1], "-dirty")
  list(commit = if (length(commit)) commit[1] else NA_character_, wispack_commit = built,
       versions = versions)
}

# ---------------------------------------------------------------------------
# Main

main <- function(args) {
  config <- parse_args(args)
  dir <- file.path("benchmarks", "out", "peers", config$label)
  dir.create(dir, recursive = TRUE, showWarnings = FALSE)
  started <- Sys.time()
  for (k in seq_len(config$datasets)) {
    for (animals in config$animals) {
      for (design in config$designs) {
        path <- file.path(dir, sprintf("%s_a%d_g%d_k%03d.rds", design, animals, config$genes, k))
        message(format(Sys.time(), "[%H:%M:%S] "), design, ", ", animals,
                " animals per group, data set ", k, "/", config$datasets)
        run_dataset(design, animals, k, config$genes, config$arms, path)
      }
    }
  }
  files <- list.files(dir, "\\.rds$", full.names = TRUE)
  rows <- do.call(rbind, lapply(files, readRDS))
  rows <- rows[rows$design %in% config$designs & rows$animals %in% config$animals &
                 rows$dataset <= config$datasets, ]
  provenance <- provenance_of()
  rows$commit <- provenance$commit
  rows$engine <- rows$arm
  summary <- summarise_rows(rows, provenance)
  suffix <- if (config$label == "final") "" else paste0("_", config$label)
  dir.create(file.path("benchmarks", "results"), showWarnings = FALSE)
  utils::write.csv(rows, file.path("benchmarks", "results", sprintf("peers_raw%s.csv", suffix)),
                   row.names = FALSE)
  summary$engine <- summary$arm
  utils::write.csv(summary, file.path("benchmarks", "results", sprintf("peers%s.csv", suffix)),
                   row.names = FALSE)
  if (config$label == "final") {
    # What vignette("inference") shows ("Compared with other tools").
    shipped <- summary[c("design", "animals", "arm", "false_positive", "false_positive_se",
                         "power", "power_se", "power_at_size", "power_at_size_se",
                         "power_minus_mgcv", "power_minus_mgcv_se", "fdr_bh", "fdr_bh_se",
                         "cpu_per_gene", "datasets", "genes", "na_p", "package", "version",
                         "wispack_commit")]
    utils::write.csv(shipped, file.path("inst", "extdata", "peers.csv"), row.names = FALSE)
    source(file.path("benchmarks", "headlines.R")) # register_headline()
    pick <- function(arm, designs, column) summary[[column]][summary$arm == arm &
                                                               summary$design %in% designs]
    warped <- intersect(c("shape", "total"), config$designs)
    if (all(c("shape", "total") %in% config$designs) && 3L %in% config$animals) register_headline(
      "peers",
      c("anova(fit) false-positive rate of genotype, largest over designs and group sizes",
        "mgcv GAM false-positive rate, largest, designs with warped animals",
        "anova(fit) power at its own 5 % size, shift of transitions (shape), 3 animals",
        "mgcv GAM power at its own 5 % size, shift of transitions (shape), 3 animals"),
      round(c(max(pick("wispack_anova", config$designs, "false_positive")),
              max(pick("mgcv", warped, "false_positive")),
              pick("wispack_anova", "shape", "power_at_size")[pick("wispack_anova", "shape", "animals") == 3],
              pick("mgcv", "shape", "power_at_size")[pick("mgcv", "shape", "animals") == 3]), 3),
      "rate",
      paste("Rscript benchmarks/peers.R", paste(args, collapse = " ")))
  }
  cat(sprintf("\nLabel %s; %d data sets per design; %d genes each; %.1f min this run; R %s; %s\n",
              config$label, config$datasets, config$genes,
              as.numeric(difftime(Sys.time(), started, units = "mins")), getRversion(),
              format(Sys.time(), "%Y-%m-%d")))
  print_table(summary)
  notes <- unique(rows$note[nzchar(rows$note)])
  if (length(notes)) cat("\nNotes:\n", paste("-", notes, collapse = "\n"), "\n", sep = "")
  invisible(summary)
}

if (sys.nframe() == 0L) main(commandArgs(trailingOnly = TRUE))
