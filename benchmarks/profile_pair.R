# Two builds' profile checks on the same simulated data sets, paired: does
# a change to how the checks search (not what they test) move the point
# effects' calibration? Data sets of benchmarks/profile_calibration.R
# (its designs and seeds; the profile run there with a tolerance that flags
# every effect, the combined procedure at the default tolerance 0.25
# evaluated from the checks' deviances, as its summary does), each fitted
# and checked by each build in its own process (R_LIBS picks the build).
#
#   R_LIBS=<build A> Rscript benchmarks/profile_pair.R run A [datasets] [designs] [animals]
#   R_LIBS=<build B> Rscript benchmarks/profile_pair.R run B [datasets] [designs] [animals]
#   Rscript benchmarks/profile_pair.R compare A B
#
# defaults: 100 data sets; designs small_steps,close,ends,sparse; 3 animals
# per group. Resumable (benchmarks/out/profile_pair/<label>/). `compare`
# writes benchmarks/results/profile_pair.csv: per design, both builds'
# false-positive rate (true-null point effects, p < 0.05) and coverage of
# the 95 % intervals, the paired differences with Monte Carlo SEs clustered
# by data set, the share of effects whose flag and whose call agree, the
# held fits per effect and the checks' seconds.

args <- commandArgs(trailingOnly = TRUE)
mode <- if (length(args)) args[1] else "compare"
out_root <- file.path("benchmarks", "out", "profile_pair")
alpha <- 0.05
workers <- 1L
# profile_calibration.R's designs, simulator, per-data-set run and its
# summary's rule for the default procedure from the recorded checks (its
# definitions only: the script itself runs its modes at top level).
for (e in parse("benchmarks/profile_calibration.R")) {
  if (is.call(e) && identical(e[[1]], as.name("<-")) && is.name(e[[2]]) &&
      as.character(e[[2]]) %in% c("designs", "simulate_design", "one_dataset", "combined")) {
    eval(e, globalenv())
  }
}

if (mode == "run") {
  suppressPackageStartupMessages(library(wispack))
  label <- args[2]
  datasets <- if (length(args) >= 3) as.integer(args[3]) else 100L
  chosen <- if (length(args) >= 4) strsplit(args[4], ",")[[1]] else
    c("small_steps", "close", "ends", "sparse")
  animals <- if (length(args) >= 5) as.integer(args[5]) else 3L
  out <- file.path(out_root, label)
  dir.create(out, recursive = TRUE, showWarnings = FALSE)
  for (k in seq_len(datasets)) for (design_name in chosen) {
    path <- file.path(out, sprintf("%s_a%d_k%03d.rds", design_name, animals, k))
    if (file.exists(path)) next
    rows <- tryCatch(one_dataset(design_name, animals, k), error = function(e) {
      message("  failed: ", conditionMessage(e))
      NULL
    })
    saveRDS(rows, path)
  }
  quit(save = "no")
}

if (mode != "compare" || length(args) < 3) {
  stop("usage: profile_pair.R run LABEL [datasets] [designs] [animals] | compare A B")
}
read_rows <- function(label) {
  files <- list.files(file.path(out_root, label), "\\.rds$", full.names = TRUE)
  do.call(rbind, lapply(files, readRDS))
}
a <- read_rows(args[2])
b <- read_rows(args[3])
key <- function(x) paste(x$design, x$animals, x$dataset, x$parameter)
b <- b[match(key(a), key(b)), ]
keep <- !is.na(b$parameter)
a <- a[keep, ]
b <- b[keep, ]

# Mean and Monte Carlo SE clustered by data set.
clustered <- function(x, cluster) {
  ok <- !is.na(x)
  x <- x[ok]
  cluster <- cluster[ok]
  m <- mean(x)
  c(m, sqrt(sum(tapply(x - m, cluster, sum)^2)) / length(x))
}
ca <- combined(a, 0.25)
cb <- combined(b, 0.25)
rows <- list()
for (design_name in unique(a$design)) {
  i <- a$design == design_name
  null <- i & a$truth == 0
  fp_a <- as.numeric(ca$p[null] < alpha)
  fp_b <- as.numeric(cb$p[null] < alpha)
  cover_a <- as.numeric(ca$low[i] <= a$truth[i] & a$truth[i] <= ca$high[i])
  cover_b <- as.numeric(cb$low[i] <= b$truth[i] & b$truth[i] <= cb$high[i])
  fp_diff <- clustered(fp_b - fp_a, a$dataset[null])
  cover_diff <- clustered(cover_b - cover_a, a$dataset[i])
  first <- i & !duplicated(paste(a$design, a$dataset))
  rows[[design_name]] <- data.frame(
    design = design_name, animals = paste(unique(a$animals[i]), collapse = ","),
    datasets = sum(first), effects = sum(i),
    fp_a = mean(fp_a, na.rm = TRUE), fp_b = mean(fp_b, na.rm = TRUE),
    fp_diff = fp_diff[1], fp_diff_se = fp_diff[2],
    cover_a = mean(cover_a, na.rm = TRUE), cover_b = mean(cover_b, na.rm = TRUE),
    cover_diff = cover_diff[1], cover_diff_se = cover_diff[2],
    flags_agree = mean(ca$flagged[i] == cb$flagged[i]),
    calls_agree = mean((ca$p[i] < alpha) == (cb$p[i] < alpha), na.rm = TRUE),
    fits_a = mean(a$fits[i]), fits_b = mean(b$fits[i]),
    profile_s_a = sum(a$profile.seconds[first]), profile_s_b = sum(b$profile.seconds[first]),
    label_a = args[2], label_b = args[3], stringsAsFactors = FALSE)
}
result <- do.call(rbind, rows)
source("benchmarks/headlines.R") # bench_commit()
result$commit <- bench_commit()
result$engine <- "fork"
dir.create(file.path("benchmarks", "results"), showWarnings = FALSE)
utils::write.csv(result, file.path("benchmarks", "results", "profile_pair.csv"), row.names = FALSE)
print(result, digits = 3)
ends <- abs(c(a$profile.low - b$profile.low, a$profile.high - b$profile.high))
cat(sprintf("profile interval ends, |A - B| in bins: median %.3g, 90 %% %.3g, 99 %% %.3g\n",
            stats::median(ends, na.rm = TRUE), stats::quantile(ends, 0.9, na.rm = TRUE),
            stats::quantile(ends, 0.99, na.rm = TRUE)))
