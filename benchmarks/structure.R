# How well the structure step finds each curve's number of transitions
# (issue #18): the selection by the count likelihood (model.settings$structure
# = "likelihood"; model vignette §12.6) against the change-point detector
# with the AIC grid search (structure = "lro", LRO_cost = "AIC": the
# default), without it (LRO_cost = "none"), and the original detector (LRO_method = "original", LRO_cost =
# "none"), on data simulated by wisp_simulate() across designs.
#
# Usage (from the repository root, wispack installed, e.g. R_LIBS=<library>):
#   Rscript benchmarks/structure.R quick    # 1 data set per design, no 12-context grid
#   Rscript benchmarks/structure.R reduced  # 3 per design (1 of 12 contexts), no 12-context grid
#   Rscript benchmarks/structure.R full     # every data set (hours on 2 shared cores)
#   Rscript benchmarks/structure.R timing [repeats]   # the 259,200-row model, max.fork 1 and 2
#   Rscript benchmarks/structure.R table    # the tables again from the CSVs
#   Rscript benchmarks/structure.R collect  # full's CSVs and tables from the RDS files
#                                           # present (a partial run: says how partial)
#
# Every recovery fit runs with max.fork = 1 (the chosen structure does not
# depend on it; the timing stage measures max.fork = 2). One RDS per (design,
# data set, method) under benchmarks/out/structure/ (skipped when present, so
# an interrupted run resumes; quick's data sets are full's first ones). full
# writes benchmarks/results/structure.csv (one row per curve and method) and
# structure_fits.csv (one row per fit: the structure step's seconds); quick
# writes them under benchmarks/out/; timing writes
# benchmarks/results/structure_timing.csv.
#
# Metrics per curve (a context x gene): the degree found against the
# simulated one (exact, over, under), and for curves with the exact degree
# the mean |found - true| of the transition points over treatments (the
# structure step's change points, fit$change.points, which start the fit).
# A curve counts as *clearly separated* (issue #18's acceptance) when, in
# every treatment, each step between block rates is at least 0.5 on the
# model's log(1 + rate) scale, each transition point is at least 10 bins from
# the next and from the ends of the axis, and every block's expected count
# per (animal, bin) is at least 3 (cells per bin x rate per cell).

args <- commandArgs(trailingOnly = TRUE)
mode <- if (length(args) >= 1) args[1] else "quick"
if (!mode %in% c("quick", "reduced", "full", "timing", "table", "collect")) {
  stop("usage: Rscript benchmarks/structure.R quick|reduced|full|timing [repeats]|table [reduced]|collect")
}
suppressPackageStartupMessages(library(wispack))
source("benchmarks/headlines.R") # with_provenance(), register_headline()

out_dir <- "benchmarks/out/structure"
# The tables of `table` are those of `full`, or of the mode named after it.
source_mode <- if (mode == "table" && length(args) >= 2) args[2] else if (mode == "collect") "full" else mode
csv_dir <- if (source_mode == "quick") "benchmarks/out" else "benchmarks/results"
csv_stem <- switch(source_mode, quick = "structure_quick", reduced = "structure_reduced",
                   "structure")
curves_csv <- file.path(csv_dir, paste0(csv_stem, ".csv"))
fits_csv <- file.path(csv_dir, paste0(csv_stem, "_fits.csv"))
# One row per (design, method): the counts behind the tables, which the
# model vignette's figure reads (copied to inst/extdata/structure.csv).
summary_csv <- file.path(csv_dir, paste0(csv_stem, "_summary.csv"))
timing_csv <- "benchmarks/results/structure_timing.csv"

# ---------------------------------------------------------------------------
# Designs

# Degrees 0-3 drawn uniformly per curve (at most `top`), from the data set's seed.
draw_degrees <- function(contexts, genes, seed, top = 3L, bottom = 0L) {
  set.seed(seed)
  matrix(sample(bottom:top, contexts * genes, replace = TRUE), contexts, genes)
}

crossed <- function(levels = list(hemisphere = c("left", "right"), age = c("P12", "P18"))) levels

designs <- list(
  base = list(
    what = "1 context, 6 genes, 4 mice crossed with hemisphere x age (2 x 2), 100 bins, 8 cells",
    cells = 8, datasets = c(quick = 1L, reduced = 3L, full = 8L), grid = TRUE,
    simulate = function(seed) {
      wisp_simulate(n.contexts = 1, n.genes = 6, n.random = 4, fixed.effects = crossed(),
                    n.bins = 100, cells.per.bin = 8, degrees = draw_degrees(1, 6, seed),
                    seed = seed)
    }),
  low_counts = list(
    what = "as base, 1 cell per bin",
    cells = 1, datasets = c(quick = 1L, reduced = 3L, full = 8L), grid = TRUE,
    simulate = function(seed) {
      wisp_simulate(n.contexts = 1, n.genes = 6, n.random = 4, fixed.effects = crossed(),
                    n.bins = 100, cells.per.bin = 1, degrees = draw_degrees(1, 6, seed),
                    seed = seed)
    }),
  small_steps = list(
    what = "as base, block rates step by exp(U(0.25, 0.5)) (default exp(U(0.8, 1.5)))",
    cells = 8, datasets = c(quick = 1L, reduced = 3L, full = 8L), grid = TRUE,
    simulate = function(seed) {
      wisp_simulate(n.contexts = 1, n.genes = 6, n.random = 4, fixed.effects = crossed(),
                    n.bins = 100, cells.per.bin = 8, degrees = draw_degrees(1, 6, seed),
                    rate.step = c(0.25, 0.5), seed = seed)
    }),
  close = list(
    what = "1 context, 6 genes, 4 mice x hemisphere, 40 bins, 2-3 transitions (10-13 bins apart), 6 cells",
    cells = 6, datasets = c(quick = 1L, reduced = 3L, full = 8L), grid = TRUE,
    simulate = function(seed) {
      wisp_simulate(n.contexts = 1, n.genes = 6, n.random = 4,
                    fixed.effects = list(hemisphere = c("left", "right")), n.bins = 40,
                    cells.per.bin = 6, degrees = draw_degrees(1, 6, seed, bottom = 2L),
                    seed = seed)
    }),
  point_effects = list(
    what = "as base, point effects of 10 bins, 80 % of effects non-zero",
    cells = 8, datasets = c(quick = 1L, reduced = 3L, full = 8L), grid = TRUE,
    simulate = function(seed) {
      wisp_simulate(n.contexts = 1, n.genes = 6, n.random = 4, fixed.effects = crossed(),
                    n.bins = 100, cells.per.bin = 8, degrees = draw_degrees(1, 6, seed),
                    point.effect = 10, effect.prob = 0.8, seed = seed)
    }),
  nested = list(
    what = "2 contexts, 4 genes, 4 mice per genotype (nested) x hemisphere, 60 bins, 4 cells",
    cells = 4, datasets = c(quick = 1L, reduced = 3L, full = 8L), grid = TRUE,
    simulate = function(seed) {
      design <- wisp_design(between = list(genotype = c("WT", "KO")),
                            within = list(hemisphere = c("left", "right")),
                            animals.per.group = 4)
      wisp_simulate(design = design, n.contexts = 2, n.genes = 4, n.bins = 60,
                    cells.per.bin = 4, degrees = draw_degrees(2, 4, seed), seed = seed)
    }),
  contexts4 = list(
    what = "4 contexts, 4 genes, 4 mice crossed with hemisphere x condition, 80 bins, 4 cells",
    cells = 4, datasets = c(quick = 1L, reduced = 3L, full = 6L), grid = TRUE,
    simulate = function(seed) {
      wisp_simulate(n.contexts = 4, n.genes = 4, n.random = 4,
                    fixed.effects = list(hemisphere = c("left", "right"),
                                         condition = c("control", "drug")),
                    n.bins = 80, cells.per.bin = 4, degrees = draw_degrees(4, 4, seed),
                    seed = seed)
    }),
  large12 = list(
    what = "12 contexts, 6 genes, 5 mice crossed with hemisphere x age (2 x 3), 100 bins, 5 cells (259,200 rows)",
    cells = 5, datasets = c(quick = 1L, reduced = 1L, full = 2L), grid = c(quick = FALSE, reduced = FALSE, full = TRUE),
    simulate = function(seed) large_data(seed)
  )
)

large_data <- function(seed) {
  wisp_simulate(n.contexts = 12, n.genes = 6, n.random = 5,
                fixed.effects = list(hemisphere = c("left", "right"),
                                     age = c("P7", "P12", "P18")),
                n.bins = 100, cells.per.bin = 5, degrees = draw_degrees(12, 6, seed),
                seed = seed)
}

methods <- list(
  likelihood = list(structure = "likelihood"),
  lro_aic = list(structure = "lro", LRO_cost = "AIC"),
  lro_none = list(structure = "lro", LRO_cost = "none"),
  original = list(structure = "lro", LRO_method = "original", LRO_cost = "none")
)

dataset_seed <- function(design_index, i) 1000L * design_index + i

# ---------------------------------------------------------------------------
# Truth and scoring

# Per curve: the simulated degree and whether it is clearly separated.
curve_truth <- function(truth, cells) {
  curves <- truth$curves
  bins <- truth$settings$n.bins
  keys <- unique(curves[c("context", "species")])
  rows <- lapply(seq_len(nrow(keys)), function(i) {
    one <- curves[curves$context == keys$context[i] & curves$species == keys$species[i], ]
    d <- truth$degrees[keys$context[i], keys$species[i]]
    per_treatment <- split(one, one$treatment)
    step <- min(vapply(per_treatment, function(t) {
      rt <- t$value[t$component == "Rt"][order(t$block[t$component == "Rt"])]
      if (length(rt) < 2) Inf else min(abs(diff(rt)))
    }, 0))
    spacing <- min(vapply(per_treatment, function(t) {
      p <- sort(t$value[t$component == "tpoint"])
      if (!length(p)) Inf else min(diff(c(0.5, p, bins + 0.5)))
    }, 0))
    lowest <- cells * expm1(min(one$value[one$component == "Rt"]))
    data.frame(context = keys$context[i], species = keys$species[i], true_degree = d,
               min_step = step, min_spacing = spacing, min_count = lowest,
               clear = step >= 0.5 && spacing >= 10 && lowest >= 3, stringsAsFactors = FALSE)
  })
  do.call(rbind, rows)
}

# Mean |found - true| of the points of one curve, over treatments and
# transitions (NA unless the degree is exact and positive).
position_error <- function(found, truth_curves, context, species, degree) {
  if (degree == 0) return(NA_real_)
  true <- truth_curves[truth_curves$context == context & truth_curves$species == species &
                         truth_curves$component == "tpoint", ]
  mine <- found[found$context == context & found$species == species, ]
  at <- match(paste(true$treatment, true$block), paste(mine$treatment, mine$transition))
  if (anyNA(at)) return(NA_real_)
  mean(abs(mine$bin[at] - true$value))
}

run_one <- function(design_name, i, method_name) {
  file <- file.path(out_dir, sprintf("%s_%02d_%s.rds", design_name, i, method_name))
  if (file.exists(file)) return(readRDS(file))
  design <- designs[[design_name]]
  seed <- dataset_seed(match(design_name, names(designs)), i)
  data <- design$simulate(seed)
  truth <- attr(data, "truth")
  started <- proc.time()[["elapsed"]]
  fit <- wisp(data, fit_only = TRUE, max.fork = 1, verbose = FALSE,
              model.settings = methods[[method_name]])
  seconds <- proc.time()[["elapsed"]] - started
  curves <- curve_truth(truth, design$cells)
  curves$found_degree <- fit$degrees[cbind(curves$context, curves$species)]
  curves$position_error <- vapply(seq_len(nrow(curves)), function(k) {
    if (curves$found_degree[k] != curves$true_degree[k]) return(NA_real_)
    position_error(fit$change.points, truth$curves, curves$context[k], curves$species[k],
                   curves$true_degree[k])
  }, 0)
  close <- if (is.null(fit$structure.selection)) NA_integer_ else
    sum(fit$structure.selection$chosen & fit$structure.selection$margin < 2)
  result <- list(
    curves = with_provenance(cbind(design = design_name, dataset = i, method = method_name, curves,
                                   stringsAsFactors = FALSE), "serial"),
    fit = with_provenance(data.frame(design = design_name, dataset = i, method = method_name, seed = seed,
                                     tokens = nrow(data), curves = nrow(curves),
                                     structure_seconds = fit$structure.seconds, wisp_seconds = seconds,
                                     converged = fit$fit.diagnostics$converged, close_choices = close,
                                     stringsAsFactors = FALSE), "serial")
  )
  dir.create(out_dir, recursive = TRUE, showWarnings = FALSE)
  saveRDS(result, file)
  result
}

# ---------------------------------------------------------------------------
# Tables

# Whole percent, but one decimal where rounding would hide a miss (99.6, not 100).
percent <- function(a, b) {
  if (b == 0) return("–")
  digits <- if (a < b && round(100 * a / b) == 100) 1 else 0
  sprintf("%d / %d (%.*f %%)", a, b, digits, 100 * a / b)
}

summary_rows <- function(curves, fits) {
  groups <- unique(curves[c("design", "method")])
  rows <- lapply(seq_len(nrow(groups)), function(g) {
    in_group <- curves$design == groups$design[g] & curves$method == groups$method[g]
    one <- curves[in_group, ]
    timing <- fits$structure_seconds[fits$design == groups$design[g] &
                                       fits$method == groups$method[g]]
    data.frame(design = groups$design[g], method = groups$method[g],
               datasets = length(unique(one$dataset)), curves = nrow(one),
               exact = sum(one$found_degree == one$true_degree),
               over = sum(one$found_degree > one$true_degree),
               under = sum(one$found_degree < one$true_degree),
               found = sum(one$found_degree), true = sum(one$true_degree),
               clear = sum(one$clear),
               clear_exact = sum(one$clear & one$found_degree == one$true_degree),
               position_error = stats::median(one$position_error, na.rm = TRUE),
               structure_seconds = stats::median(timing), stringsAsFactors = FALSE)
  })
  do.call(rbind, rows)
}

print_tables <- function(curves, fits) {
  s <- summary_rows(curves, fits)
  order <- order(match(s$design, names(designs)), match(s$method, names(methods)))
  s <- s[order, ]
  one_of <- function(column) vapply(seq_len(nrow(s)), function(k) {
    values <- fits[[column]][fits$design == s$design[k] & fits$method == s$method[k]]
    if (is.null(values) || !length(values)) "unknown" else paste(sort(unique(values)), collapse = "+")
  }, "")
  s$commit <- one_of("commit")
  s$engine <- one_of("engine")
  utils::write.csv(s, summary_csv, row.names = FALSE)
  cat("\n| design | method | data sets | exact degree | over | under | transitions found / true | clearly separated: exact | point error (bins, median) | structure step (s, median) |\n")
  cat("|---|---|---:|---|---:|---:|---|---|---:|---:|\n")
  for (k in seq_len(nrow(s))) {
    r <- s[k, ]
    cat(sprintf("| %s | %s | %d | %s | %d | %d | %d / %d | %s | %.2f | %.2f |\n", r$design,
                r$method, r$datasets, percent(r$exact, r$curves), r$over, r$under, r$found,
                r$true, percent(r$clear_exact, r$clear), r$position_error,
                r$structure_seconds))
  }
  cat("\nAll designs together (data sets where every method ran):\n\n")
  cat("| method | exact degree | over | under | clearly separated: exact |\n|---|---|---:|---:|---|\n")
  complete <- Reduce(intersect, lapply(names(methods), function(m) {
    unique(paste(curves$design, curves$dataset)[curves$method == m])
  }))
  for (m in intersect(names(methods), unique(curves$method))) {
    one <- curves[curves$method == m & paste(curves$design, curves$dataset) %in% complete, ]
    all_one <- curves[curves$method == m, ]
    cat(sprintf("| %s | %s | %d | %d | %s |\n", m,
                percent(sum(one$found_degree == one$true_degree), nrow(one)),
                sum(one$found_degree > one$true_degree), sum(one$found_degree < one$true_degree),
                percent(sum(one$clear & one$found_degree == one$true_degree), sum(one$clear))))
    if (nrow(all_one) != nrow(one)) {
      cat(sprintf("| %s (every data set it ran on) | %s | %d | %d | %s |\n", m,
                  percent(sum(all_one$found_degree == all_one$true_degree), nrow(all_one)),
                  sum(all_one$found_degree > all_one$true_degree),
                  sum(all_one$found_degree < all_one$true_degree),
                  percent(sum(all_one$clear & all_one$found_degree == all_one$true_degree),
                          sum(all_one$clear))))
    }
  }
  cat("\nBy true degree, structure = \"likelihood\" (all data sets):\n\n| true degree | curves | exact | over | under |\n|---:|---:|---|---:|---:|\n")
  one <- curves[curves$method == "likelihood", ]
  for (d in sort(unique(one$true_degree))) {
    at <- one$true_degree == d
    cat(sprintf("| %d | %d | %s | %d | %d |\n", d, sum(at),
                percent(sum(one$found_degree[at] == d), sum(at)), sum(one$found_degree[at] > d),
                sum(one$found_degree[at] < d)))
  }
  close <- fits[fits$method == "likelihood", ]
  cat(sprintf("\nClose choices (BIC margin < 2) flagged by structure = \"likelihood\": %d of %d curves.\n",
              sum(close$close_choices), sum(close$curves)))
}

# ---------------------------------------------------------------------------
# Stages

run_modes <- c("quick", "reduced", "full")
if (mode %in% run_modes) {
  for (design_name in names(designs)) {
    design <- designs[[design_name]]
    grid <- if (length(design$grid) == 1) design$grid else design$grid[[mode]]
    for (i in seq_len(design$datasets[[mode]])) {
      for (method_name in names(methods)) {
        if (method_name == "lro_aic" && !grid) next
        started <- proc.time()[["elapsed"]]
        r <- run_one(design_name, i, method_name)
        cat(sprintf("%s %s data set %d %s: %d/%d exact (%.1f s)\n", format(Sys.time(), "%H:%M:%S"),
                    design_name, i, method_name,
                    sum(r$curves$found_degree == r$curves$true_degree), nrow(r$curves),
                    proc.time()[["elapsed"]] - started))
      }
    }
  }
}

if (mode %in% c(run_modes, "collect")) {
  mode <- source_mode
  files <- list.files(out_dir, pattern = "\\.rds$", full.names = TRUE)
  keep <- vapply(basename(files), function(f) {
    parts <- regmatches(f, regexec("^(.*)_([0-9]{2})_(.*)\\.rds$", f))[[1]]
    parts[2] %in% names(designs) && as.integer(parts[3]) <= designs[[parts[2]]]$datasets[[mode]] &&
      parts[4] %in% names(methods)
  }, TRUE)
  planned <- sum(vapply(names(designs), function(d) {
    grid <- if (length(designs[[d]]$grid) == 1) designs[[d]]$grid else designs[[d]]$grid[[mode]]
    designs[[d]]$datasets[[mode]] * (length(methods) - !grid)
  }, 0))
  if (sum(keep) < planned) {
    cat(sprintf("PARTIAL: %d of the %d fits of mode %s present\n", sum(keep), planned, mode))
  }
  results <- lapply(files[keep], readRDS)
  known <- function(rows) if (is.null(rows$commit)) with_provenance(rows, "unknown", "unknown") else rows
  curves <- do.call(rbind, lapply(results, function(r) known(r$curves)))
  fits <- do.call(rbind, lapply(results, function(r) known(r$fit)))
  dir.create(csv_dir, recursive = TRUE, showWarnings = FALSE)
  utils::write.csv(curves, curves_csv, row.names = FALSE)
  utils::write.csv(fits, fits_csv, row.names = FALSE)
  print_tables(curves, fits)
  if (mode == "full") {
    # Headline figures for benchmarks/RESULTS.md, with the commits that fitted them.
    one <- curves[curves$method == "likelihood", ]
    register_headline("structure",
                      c("curves with the exact degree, structure = \"likelihood\" (the default)",
                        "over-detections, structure = \"likelihood\" (the default)"),
                      c(sprintf("%d / %d", sum(one$found_degree == one$true_degree), nrow(one)),
                        sprintf("%d", sum(one$found_degree > one$true_degree))),
                      "curves", "R_LIBS=<library> nice Rscript benchmarks/structure.R full",
                      commit = paste(sort(unique(fits$commit[fits$method == "likelihood"])), collapse = "+"))
  }
}

if (mode == "table") {
  print_tables(utils::read.csv(curves_csv, stringsAsFactors = FALSE),
               utils::read.csv(fits_csv, stringsAsFactors = FALSE))
}

if (mode == "timing") {
  repeats <- if (length(args) >= 2) as.integer(args[2]) else 3L
  data <- large_data(dataset_seed(match("large12", names(designs)), 1L))
  cat(sprintf("%d tokens; load average %s\n", nrow(data),
              paste(readLines("/proc/loadavg", warn = FALSE), collapse = " ")))
  rows <- list()
  for (r in seq_len(repeats)) {
    for (workers in c(2L, 1L)) {
      started <- proc.time()[["elapsed"]]
      fit <- wisp(data, fit_only = TRUE, max.fork = workers, verbose = FALSE,
                  model.settings = methods$likelihood)
      rows[[length(rows) + 1]] <- data.frame(
        repeat_no = r, max_fork = workers, structure_seconds = fit$structure.seconds,
        wisp_seconds = proc.time()[["elapsed"]] - started,
        summed_rows = nrow(fit$count.data.summed),
        observed_rows = sum(!is.na(fit$count.data.summed$count)),
        transitions = sum(fit$degrees), candidates = nrow(fit$structure.selection),
        load = readLines("/proc/loadavg", warn = FALSE)[1], stringsAsFactors = FALSE)
      print(rows[[length(rows)]])
    }
  }
  rows <- do.call(rbind, rows)
  utils::write.csv(with_provenance(rows, ifelse(rows$max_fork > 1, "fork", "serial")), timing_csv,
                   row.names = FALSE)
  cat("\n| max.fork | structure step (s), median (range) | wisp() (s), median (range) |\n|---:|---|---|\n")
  for (w in c(1L, 2L)) {
    one <- rows[rows$max_fork == w, ]
    cat(sprintf("| %d | %.1f (%.1f–%.1f) | %.1f (%.1f–%.1f) |\n", w,
                stats::median(one$structure_seconds), min(one$structure_seconds),
                max(one$structure_seconds), stats::median(one$wisp_seconds),
                min(one$wisp_seconds), max(one$wisp_seconds)))
  }
}
