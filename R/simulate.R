#' Describe an experimental design for simulation
#'
#' Says which factors vary between animals (each animal belongs to one level
#' combination, e.g. genotype or age: animals are nested in them), which vary
#' within animals (every animal is observed under every level combination,
#' e.g. hemispheres or regions), and how many animals each between-animal
#' group has. [wisp_simulate()] draws data for this design.
#'
#' @param between Named list of between-animal factors, each a vector of at
#'   least two distinct levels (strings or numbers).
#' @param within Named list of within-animal factors, likewise.
#' @param animals.per.group Animals in each between-animal group (a level
#'   combination of `between`; the single group `"all"` when there are no
#'   between-animal factors): one whole number for every group, or one per
#'   group for an unbalanced design, in the order of the `groups` table
#'   (first factor varying slowest) or named by group label.
#' @return An object of class `"wisp_design"`, a list with `between`,
#'   `within`, `groups` (a data.frame with `group`, one column per
#'   between-animal factor and `animals`) and `animals` (a data.frame with
#'   `ran`, the animal's label, its `group` and one column per between-animal
#'   factor). Labels are `<group>_m<i>` (e.g. `WT_m1`), or `m<i>` without
#'   between-animal factors; group labels join the levels with `"_"`.
#'
#'   The reference level of a factor is the first level given here: for
#'   `c("WT", "KO")` it is `"WT"`. [wisp_simulate()] returns each factor as
#'   a factor whose levels are in this order, and [wisp()] takes the first
#'   level of a factor as its reference.
#' @seealso [wisp_simulate()]
#' @export
#' @examples
#' design <- wisp_design(between = list(genotype = c("WT", "KO")),
#'                       within = list(hemisphere = c("left", "right")),
#'                       animals.per.group = c(WT = 3, KO = 4))
#' design$animals
wisp_design <- function(between = list(), within = list(), animals.per.group = 4L) {
  check_factor_levels(between, "between", allow_empty = TRUE)
  check_factor_levels(within, "within", allow_empty = TRUE)
  if (length(between) + length(within) == 0L) {
    stop_input("A design needs at least one factor in `between` or `within`.")
  }
  both <- intersect(names(between), names(within))
  if (length(both)) {
    stop_input("Factor ", paste0("'", both, "'", collapse = ", "), " is in both `between` ",
               "and `within`; a factor varies either between or within animals.")
  }
  groups <- design_groups(between)
  n_groups <- nrow(groups)
  counts <- animals.per.group
  ok <- is.numeric(counts) && length(counts) %in% c(1L, n_groups) && !anyNA(counts) &&
    all(counts >= 1 & counts <= 10000 & counts == round(counts))
  if (!ok) {
    stop_input("`animals.per.group` must be one whole number between 1 and 10000, or one per ",
               "between-animal group (", n_groups, ": ", paste(groups$group, collapse = ", "),
               "), not ", describe_value(counts), ".")
  }
  if (length(counts) == n_groups && !is.null(names(counts))) {
    if (!setequal(names(counts), groups$group) || anyDuplicated(names(counts))) {
      stop_input("The names of `animals.per.group` must be the group labels ",
                 paste0("'", groups$group, "'", collapse = ", "), ".")
    }
    counts <- counts[groups$group]
  }
  groups$animals <- as.integer(rep_len(counts, n_groups))
  if (sum(groups$animals) > 10000) {
    stop_input("The design has ", sum(groups$animals), " animals; at most 10000 are supported.")
  }

  member <- rep(seq_len(n_groups), groups$animals)
  index <- sequence(groups$animals)
  width <- nchar(max(groups$animals))
  label <- sprintf("m%0*d", width, index)
  if (length(between)) label <- paste(groups$group[member], label, sep = "_")
  animals <- data.frame(ran = label, group = groups$group[member], stringsAsFactors = FALSE)
  for (f in names(between)) animals[[f]] <- groups[[f]][member]
  structure(list(between = between, within = within, groups = groups, animals = animals),
            class = "wisp_design")
}

# One row per level combination of the between-animal factors, the first
# factor varying slowest; the single group "all" without such factors.
design_groups <- function(between) {
  if (!length(between)) return(data.frame(group = "all", stringsAsFactors = FALSE))
  grid <- expand.grid(rev(lapply(between, unique)), KEEP.OUT.ATTRS = FALSE,
                      stringsAsFactors = FALSE)[names(between)]
  group <- do.call(paste, c(lapply(grid, as.character), sep = "_"))
  cbind(data.frame(group = group, stringsAsFactors = FALSE), grid)
}

#' Simulate token-level counts from the count model with a known truth
#'
#' Draws spatial transcriptomics counts from the count model ("nb") that
#' [wisp()] fits: curves per context, gene and treatment, random effects per
#' animal and gene, and negative-binomial counts per cell. Every true value
#' is kept in the `truth` attribute, so that fits can be checked against it
#' ([wisp_truth()]).
#'
#' @section The model the data are drawn from:
#' Bins are numbered 1..B on an axis with edges `L = 0.5` and `U = B + 0.5`.
#'
#' *Population curves.* Each (context, gene) has a degree d (its number of
#' transitions). For every treatment t (a level combination of the fixed
#' effects) its curve has block rates `R_1..R_(d+1)` on the log(1 + rate)
#' scale, slopes `s_1..s_d` and transition points `p_1 < ... < p_d`:
#' `Psi(x) = R_1 + sum_k (R_(k+1) - R_k) plogis(s_k (x - p_k))`. These values
#' are `z(t) = sum_i W(t, i) beta_i`, where W is the weight matrix of
#' [wisp()]'s model and beta are the baseline (reference treatment) values
#' and the treatment effects. Baselines: a first block rate uniform in
#' `rate.range` (by default 3..12 per cell), each next one up or down in
#' turn by a factor `exp(U(rate.step[1], rate.step[2]))` (by default
#' `exp(U(0.8, 1.5))`), kept in `min(1, rate.range[1])`..50; points spread evenly with a little
#' jitter (or, with `point.positions`, at `L + B q_k` for the given fractions
#' `q_k`); slopes uniform in 0.4..1. Each treatment effect is non-zero with
#' probability `effect.prob`, with a random sign: rate effects are
#' +/-`effect.size` on the log(1 + rate) scale, slope effects
#' +/-`slope.effect` times the baseline slope, point effects
#' +/-`point.effect` bins.
#'
#' *Animals.* Each animal and gene has random effects `u = (u_point, u_rate,
#' u_slope)`, independent `N(0, random.sd^2)` (none with a single animal).
#' They warp every curve of that gene for that animal, in every context and
#' treatment: `R'_k = R_k exp(u_rate)`, `s'_k = S plogis(qlogis(s_k / S) +
#' u_slope)` with `S = 8`, `p'_k = L + k g + (B - (d + 1) g) plogis(qlogis(q_k) +
#' u_point)` with `g = ceiling(B / 20)` the model's smallest spacing of points (at
#' the default `buffer_factor`), `L = 0.5` and `q_k = (p_k - L - k g) / (B -
#' (d + 1) g)`. `Psi'` is `Psi` with the warped values.
#'
#' *Counts.* Every cell of a cell key (animal, context, treatment, bin) has
#' one token per gene, zeros included. A token's count is negative binomial
#' with mean `r(Psi'(bin))` and variance `mean + phi mean^2`, phi the
#' `dispersion` of its (context, gene) (Poisson when 0), where
#' `r(Psi) = 1e-8 + 1e-3 log(1 + exp(expm1(Psi) / 1e-3))` is `exp(Psi) - 1`
#' kept above 0. The summed count of E cells is then NB with mean `E r` and
#' size `E / phi`.
#'
#' *Validity.* The truth is redrawn until, for every treatment, block rates
#' are at least `log(1 + min(0.25, rate.range[1] / 2))` (log(1.25) by
#' default), slopes lie in 0.1..4 and transition points keep a
#' gap of `max(2, B / (4 (d + 1)))` bins from each other and from the edges;
#' an animal's point effects are redrawn until its warped points keep half
#' that gap (so their distribution is slightly truncated when the SDs are
#' large).
#'
#' @param n.contexts Number of contexts (cell types or regions).
#' @param n.genes Number of genes (RNA species).
#' @param n.random Number of animals when there is no `design`: every animal
#'   is observed under every treatment.
#' @param fixed.effects Named list of fixed-effect level vectors when there
#'   is no `design` (all within-animal). The reference level is the first
#'   level given: the data hold each fixed effect as a factor with the levels
#'   in the order given, which [wisp()] follows.
#' @param design A [wisp_design()]: between- and within-animal factors and
#'   animals per group. When given, leave `n.random` and `fixed.effects`
#'   unset.
#' @param n.bins Number of spatial bins B.
#' @param cells.per.bin Cells per cell key (animal, context, treatment, bin):
#'   one whole number; a vector of `n.bins` whole numbers (cell density
#'   along the axis); or a function of `n` returning `n` whole numbers, called
#'   once for all cell keys (e.g. `function(n) rpois(n, 5)`). A key with no
#'   cells is missing (has no rows).
#' @param dispersion Negative-binomial dispersion phi of a cell's count (its
#'   variance is `mean + phi * mean^2`), one number or an `n.contexts` x
#'   `n.genes` matrix; 0 means Poisson.
#' @param degrees Transitions per (context, gene): an integer matrix
#'   `n.contexts` x `n.genes`, one integer for all, or `NULL` to draw them
#'   from 0, 1 and 2.
#' @param effect.size Size of non-zero rate effects on the log(1 + rate)
#'   scale.
#' @param slope.effect Size of non-zero slope effects, as a fraction of the
#'   curve's baseline slope.
#' @param point.effect Size of non-zero point effects, in bins.
#' @param point.positions `NULL` (baseline transition points spread evenly
#'   along the axis, with a little jitter) or increasing fractions of the axis
#'   in (0, 1), one per transition, where every curve's baseline points are
#'   put instead: e.g. `0.2` for a transition near an end, `c(0.42, 0.58)` for
#'   two transitions close together. Every curve with transitions must then
#'   have that many (`degrees`), and the points must keep the validity gap
#'   below from the edges and from each other.
#' @param effect.prob Probability that a treatment effect is non-zero: one
#'   number, or one per gene (0 makes a null gene).
#' @param rate.step Range (two numbers, `0 <= low <= high <= 3`) of the size
#'   of the steps between consecutive block rates of a baseline curve: each
#'   step multiplies the rate per cell by `exp(U(low, high))` or divides it.
#'   Small steps (e.g. `c(0.2, 0.4)`) make transitions hard to see.
#' @param rate.range Range (two numbers, `0 < low <= high <= 50`) of a
#'   baseline curve's first block rate, in expected counts per cell. The
#'   default, 3..12, simulates well-expressed genes; a low range (e.g.
#'   `c(0.05, 0.3)`) simulates the sparse genes of a whole panel, where most
#'   cells have no molecule of the gene. Rate effects are on the
#'   log(1 + rate) scale, almost the rate itself there: use a small
#'   `effect.size` with a low range.
#' @param random.sd Standard deviations of the random effects: a vector
#'   named `point`, `rate` and `slope`, or an `n.genes` x 3 matrix with
#'   those column names. 0 switches a warp off.
#' @param time.series Name of the fixed effect that is an ordered time
#'   series, or `NULL`.
#' @param dropout Missing data, a list with any of: `bins`, bins that have
#'   no data (a vector for every context, or a list named by context);
#'   `keys`, the probability that a cell key is missing; `cells`, the
#'   probability that a cell is lost (with all its tokens).
#' @param cell.ids Whether to add a `cell` column with a unique id per cell.
#' @param seed Random seed. The caller's random number stream is left as it
#'   was.
#' @return A data.frame with columns `count`, `bin`, `context`, `species`,
#'   `ran`, one column per fixed effect (a factor with its levels in the
#'   order given; and `cell` when `cell.ids = TRUE`),
#'   one row per token (a cell and a gene), and a `truth` attribute, a list:
#'   \describe{
#'   \item{`degrees`}{context x gene matrix of degrees.}
#'   \item{`parameters`}{every true value under the model's names: beta
#'     (`baseline_...`, `beta_...`), the random effects, the SDs and the
#'     dispersions.}
#'   \item{`effects`}{the true non-reference fixed effects (`beta_...`).}
#'   \item{`random.effects`}{u per gene and animal, named
#'     `wfactor_<point|rate|slope>_<animal>_X_<gene>`.}
#'   \item{`sd`, `sd.matrix`}{the random-effect SDs, named
#'     `sd_<point|rate|slope>_<gene>`, and as a gene x warp matrix (0 with a
#'     single animal).}
#'   \item{`dispersion`, `dispersion.matrix`}{phi, named
#'     `dispersion_<context>_<gene>`, and as a context x gene matrix.}
#'   \item{`curves`}{the population curves z(t): `context`, `species`,
#'     `treatment`, `component` (`Rt`, `tslope`, `tpoint`), `block`,
#'     `value`.}
#'   \item{`rates`}{one row per animal, context, gene, treatment and bin:
#'     `ran`, `context`, `species`, `treatment`, the fixed effects, `bin`,
#'     `cells` (the exposure; 0 for a missing key), `log.rate.population`
#'     (Psi), `log.rate` (the animal's Psi') and `rate` (r(Psi'), the mean
#'     count of one cell).}
#'   \item{`design`}{the [wisp_design()] (which animal is in which group).}
#'   \item{`settings`}{the arguments.}
#'   }
#' @seealso [wisp_design()], [wisp_truth()]
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 2, n.bins = 30, seed = 7)
#' head(counts)
#' attr(counts, "truth")$degrees
#'
#' # Animals nested in genotype, both hemispheres of every animal.
#' design <- wisp_design(between = list(genotype = c("WT", "KO")),
#'                       within = list(hemisphere = c("left", "right")),
#'                       animals.per.group = 3)
#' nested <- wisp_simulate(design = design, n.genes = 2, n.bins = 30,
#'                         random.sd = c(point = 0.2, rate = 0.1, slope = 0.2))
#' table(nested$ran, nested$genotype) > 0
#' attr(nested, "truth")$sd
wisp_simulate <- function(n.contexts = 1L, n.genes = 3L, n.random = 3L,
                          fixed.effects = list(hemisphere = c("left", "right")),
                          design = NULL, n.bins = 50L, cells.per.bin = 5L,
                          dispersion = 0.05, degrees = NULL, effect.size = 0.5,
                          slope.effect = 0.5, point.effect = n.bins / 20,
                          point.positions = NULL, effect.prob = 0.5, rate.step = c(0.8, 1.5),
                          rate.range = c(3, 12),
                          random.sd = c(point = 0.15, rate = 0.1, slope = 0.15),
                          time.series = NULL, dropout = list(), cell.ids = FALSE,
                          seed = 1L) {
  call <- sys.call()
  check_whole_number(n.contexts, "n.contexts", lower = 1, upper = 1000)
  check_whole_number(n.genes, "n.genes", lower = 1, upper = 10000)
  if (is.null(design)) {
    check_whole_number(n.random, "n.random", lower = 1, upper = 10000)
    check_fixed_effect_levels(fixed.effects)
    design <- wisp_design(within = fixed.effects, animals.per.group = n.random)
    design$animals$ran <- sprintf("mouse%d", seq_len(n.random))
  } else {
    if (!inherits(design, "wisp_design")) {
      stop_input("`design` must be made by wisp_design(), not ", describe_value(design), ".")
    }
    if (!missing(fixed.effects) || !missing(n.random)) {
      stop_input("`design` sets the factors and the animals: leave `fixed.effects` and ",
                 "`n.random` unset.")
    }
    check_fixed_effect_levels(c(design$between, design$within), name = "design factors")
  }
  factors <- c(design$between, design$within)
  check_whole_number(n.bins, "n.bins", lower = 10, upper = 1e5)
  contexts <- sprintf("context%d", seq_len(n.contexts))
  genes <- sprintf("gene%d", seq_len(n.genes))
  check_cells_per_bin(cells.per.bin, n.bins)
  dispersion <- simulation_matrix(dispersion, "dispersion", contexts, genes, upper = 100)
  check_number(effect.size, "effect.size", lower = 0, upper = 5)
  check_number(slope.effect, "slope.effect", lower = 0, upper = 2)
  check_number(point.effect, "point.effect", lower = 0, upper = n.bins)
  effect_prob <- effect.prob
  if (!is.numeric(effect_prob) || !length(effect_prob) %in% c(1L, n.genes) ||
      anyNA(effect_prob) || any(effect_prob < 0 | effect_prob > 1)) {
    stop_input("`effect.prob` must be one probability or one per gene (", n.genes, "), not ",
               describe_value(effect.prob), ".")
  }
  effect_prob <- rep_len(effect_prob, n.genes)
  if (!is.numeric(rate.step) || length(rate.step) != 2L || anyNA(rate.step) ||
      rate.step[1] < 0 || rate.step[2] < rate.step[1] || rate.step[2] > 3) {
    stop_input("`rate.step` must be two numbers low <= high in 0..3 (the range of the log ",
               "fold change between block rates), not ", describe_value(rate.step), ".")
  }
  if (!is.numeric(rate.range) || length(rate.range) != 2L || anyNA(rate.range) ||
      rate.range[1] <= 0 || rate.range[2] < rate.range[1] || rate.range[2] > 50) {
    stop_input("`rate.range` must be two numbers 0 < low <= high <= 50 (the range of a ",
               "curve's first block rate, in counts per cell), not ", describe_value(rate.range),
               ".")
  }
  random_sd <- simulation_random_sd(random.sd, genes)
  if (!is.null(time.series) &&
      !(is.character(time.series) && length(time.series) == 1L && time.series %in% names(factors))) {
    stop_input("`time.series` must be NULL or the name of one of the fixed effects.")
  }
  dropout <- check_dropout(dropout, contexts, n.bins)
  if (!is.logical(cell.ids) || length(cell.ids) != 1L || is.na(cell.ids)) {
    stop_input("`cell.ids` must be TRUE or FALSE, not ", describe_value(cell.ids), ".")
  }
  check_whole_number(seed, "seed", lower = -.Machine$integer.max)
  # A bound on the size, before anything is drawn: cells per bin at their
  # largest for a function, which is only known per draw.
  cells_bound <- if (is.function(cells.per.bin)) 1 else max(cells.per.bin)
  tokens <- n.contexts * n.genes * nrow(design$animals) * n.bins * cells_bound *
    prod(lengths(design$within))
  if (tokens > 5e7) {
    stop_input("these arguments simulate ", format(tokens, big.mark = ",", scientific = FALSE),
               " tokens; at most 50,000,000 are supported.")
  }

  result <- with_seed(seed, {
    degrees <- simulation_degrees(degrees, contexts, genes)
    check_degrees_fit_bins(degrees, n.bins, call = call)
    check_point_positions(point.positions, degrees, n.bins, call = call)
    units <- design_units(design)
    skeleton <- simulation_skeleton(units, names(factors), time.series, contexts, genes,
                                     degrees, n.bins)
    units$treatment <- unit_treatments(units, names(factors), skeleton)
    population <- draw_population(skeleton, effect_prob,
                                  list(rate = effect.size, slope = slope.effect,
                                       point = point.effect, step = rate.step,
                                       first_rate = rate.range, positions = point.positions))
    curves <- curve_table(population, units, design$animals$ran, contexts, genes)
    u <- draw_random_effects(curves, design$animals$ran, genes, random_sd, n.bins)
    animal <- warp_curves(curves, u, n.bins)
    psi_population <- curve_log_rates(curves, n.bins)
    psi_animal <- curve_log_rates(animal, n.bins)
    cells <- draw_cells(cells.per.bin, dropout, nrow(units), length(contexts), n.bins)
    tokens <- draw_tokens(cells, curves, r_of_psi(psi_animal), dispersion)
    list(degrees = degrees, units = units, skeleton = skeleton, population = population,
         curves = curves, u = u, psi_population = psi_population, psi_animal = psi_animal,
         cells = cells, tokens = tokens)
  })

  data <- simulation_data(result, factors, contexts, genes, cell.ids)
  settings <- list(n.contexts = n.contexts, n.genes = n.genes, n.random = nrow(design$animals),
                   fixed.effects = factors, n.bins = n.bins, cells.per.bin = cells.per.bin,
                   dispersion = dispersion, degrees = result$degrees, effect.size = effect.size,
                   slope.effect = slope.effect, point.effect = point.effect,
                   point.positions = point.positions, effect.prob = effect_prob, rate.step = rate.step,
                   rate.range = rate.range, random.sd = random_sd,
                   time.series = time.series, dropout = dropout, cell.ids = cell.ids,
                   seed = seed, slope.max = simulation_constants()$slope_max,
                   rate.floor = simulation_constants()[c("tau", "epsilon")])
  attr(data, "truth") <- simulation_truth(result, design, factors, contexts, genes,
                                          dispersion, settings)
  data
}

# Constants of the count model, from the Rust core: the slope bound S_max
# (model vignette §11.2) and the rate floor's tau and epsilon (§9.2),
# recorded in the truth's settings (the rate itself comes from the core too).
simulation_constants <- function() {
  core <- model_rules()$count_model
  list(slope_max = core$slope_max, tau = core$rate_floor_width, epsilon = core$rate_floor)
}

# Evaluates `code` with R's RNG seeded, then restores the caller's stream.
with_seed <- function(seed, code) {
  had_seed <- exists(".Random.seed", envir = globalenv(), inherits = FALSE)
  if (had_seed) old_seed <- get(".Random.seed", envir = globalenv(), inherits = FALSE)
  on.exit({
    if (had_seed) {
      assign(".Random.seed", old_seed, envir = globalenv())
    } else if (exists(".Random.seed", envir = globalenv(), inherits = FALSE)) {
      rm(".Random.seed", envir = globalenv())
    }
  })
  set.seed(seed)
  code
}

# ---------------------------------------------------------------------------
# Argument checks

check_factor_levels <- function(x, name, allow_empty = FALSE, call = sys.call(-1)) {
  ok <- is.list(x) && (length(x) >= 1 || allow_empty) &&
    (length(x) == 0 || (!is.null(names(x)) && all(nzchar(names(x))) &&
                          !anyDuplicated(names(x)) &&
                          all(vapply(x, function(l) {
                            (is.character(l) || is.numeric(l)) && !anyNA(l) &&
                              length(unique(l)) >= 2
                          }, logical(1)))))
  if (!ok) {
    stop_input("`", name, "` must be a named list of level vectors (strings or numbers), ",
               "each with at least 2 distinct levels and no NA.", call = call)
  }
  reserved <- intersect(names(x), c("count", "bin", "context", "species", "ran", "cell"))
  if (length(reserved)) {
    stop_input("`", name, "` may not be named ", paste0("'", reserved, "'", collapse = ", "),
               ": those are column roles.", call = call)
  }
  invisible(x)
}

check_fixed_effect_levels <- function(fixed.effects, name = "fixed.effects",
                                      call = sys.call(-1)) {
  check_factor_levels(fixed.effects, name, call = call)
}

check_cells_per_bin <- function(cells, n_bins, call = sys.call(-1)) {
  if (is.function(cells)) return(invisible(cells))
  whole <- is.numeric(cells) && !anyNA(cells) && all(cells >= 0 & cells <= 1e4) &&
    all(cells == round(cells))
  if (!(whole && (length(cells) == 1L && cells >= 1 || length(cells) == n_bins && any(cells > 0)))) {
    stop_input("`cells.per.bin` must be a whole number between 1 and 10000, a vector of ",
               "n.bins (", n_bins, ") whole numbers (not all 0), or a function of n, not ",
               describe_value(cells), ".", call = call)
  }
  invisible(cells)
}

# A number for every (context, gene), or a context x gene matrix.
simulation_matrix <- function(x, name, contexts, genes, upper, call = sys.call(-1)) {
  shape <- c(length(contexts), length(genes))
  ok <- is.numeric(x) && !anyNA(x) && all(x >= 0 & x <= upper) &&
    (length(x) == 1L && !is.matrix(x) || is.matrix(x) && identical(dim(x), shape))
  if (!ok) {
    stop_input("`", name, "` must be one number between 0 and ", upper, " or an n.contexts x ",
               "n.genes (", shape[1], " x ", shape[2], ") matrix of them, not ",
               describe_value(x), ".", call = call)
  }
  matrix(as.double(x), shape[1], shape[2], dimnames = list(contexts, genes))
}

simulation_random_sd <- function(x, genes, call = sys.call(-1)) {
  warps <- c("point", "rate", "slope")
  named <- if (is.matrix(x)) colnames(x) else names(x)
  ok <- is.numeric(x) && !anyNA(x) && all(x >= 0 & x <= 3) && !is.null(named) &&
    setequal(named, warps) && !anyDuplicated(named) &&
    (!is.matrix(x) && length(x) == 3L || is.matrix(x) && identical(dim(x), c(length(genes), 3L)))
  if (!ok) {
    stop_input("`random.sd` must be a vector named point, rate and slope, or an n.genes x 3 ",
               "matrix with those column names, with values between 0 and 3, not ",
               describe_value(x), ".", call = call)
  }
  if (!is.matrix(x)) x <- matrix(x[warps], length(genes), 3L, byrow = TRUE, dimnames = list(NULL, warps))
  x <- x[, warps, drop = FALSE]
  storage.mode(x) <- "double"
  dimnames(x) <- list(genes, warps)
  x
}

check_dropout <- function(dropout, contexts, n_bins, call = sys.call(-1)) {
  fail <- function(...) stop_input(..., call = call)
  if (is.null(dropout)) dropout <- list()
  if (!is.list(dropout) || (length(dropout) && (is.null(names(dropout)) ||
                                                !all(names(dropout) %in% c("bins", "keys", "cells"))))) {
    fail("`dropout` must be a list with any of `bins`, `keys` and `cells`.")
  }
  probability <- function(x, name) {
    if (!is.numeric(x) || length(x) != 1L || is.na(x) || x < 0 || x >= 1) {
      fail("`dropout$", name, "` must be a probability in [0, 1), not ", describe_value(x), ".")
    }
    x
  }
  bin_set <- function(x, what) {
    if (!is.numeric(x) || anyNA(x) || any(x < 1 | x > n_bins | x != round(x))) {
      fail("`dropout$bins` ", what, " must hold bin numbers between 1 and ", n_bins, ".")
    }
    sort(unique(as.integer(x)))
  }
  bins <- dropout$bins
  by_context <- stats::setNames(rep(list(integer()), length(contexts)), contexts)
  if (is.list(bins)) {
    if (is.null(names(bins)) || !all(names(bins) %in% contexts)) {
      fail("`dropout$bins` as a list must be named by context (", paste(contexts, collapse = ", "),
           ").")
    }
    for (context in names(bins)) by_context[[context]] <- bin_set(bins[[context]], context)
  } else if (!is.null(bins)) {
    by_context[] <- list(bin_set(bins, ""))
  }
  list(bins = by_context, keys = probability(if (is.null(dropout$keys)) 0 else dropout$keys, "keys"),
       cells = probability(if (is.null(dropout$cells)) 0 else dropout$cells, "cells"))
}

simulation_degrees <- function(degrees, contexts, genes) {
  if (is.null(degrees)) {
    degrees <- matrix(sample(0:2, length(contexts) * length(genes), replace = TRUE,
                             prob = c(0.2, 0.4, 0.4)), length(contexts))
  } else if (!is.matrix(degrees)) {
    check_whole_number(degrees, "degrees", upper = 6)
    degrees <- matrix(as.integer(degrees), length(contexts), length(genes))
  } else if (!identical(dim(degrees), c(length(contexts), length(genes))) ||
             anyNA(degrees) || any(degrees < 0 | degrees > 6 | degrees != round(degrees))) {
    stop_input("`degrees` must be a whole-number matrix of n.contexts x n.genes between 0 and 6.")
  }
  storage.mode(degrees) <- "integer"
  dimnames(degrees) <- list(contexts, genes)
  degrees
}

# Transition points of a degree-d curve keep this gap (in bins) from each
# other and from the edges of the axis; an animal's warped points half of it.
curve_gap <- function(degree, bins) max(2, bins / (4 * (degree + 1)))

# Baseline points put at fractions of the axis: one per transition of every
# curve with transitions, increasing, in (0, 1), and keeping the gap.
check_point_positions <- function(positions, degrees, bins, call) {
  if (is.null(positions)) return(invisible(NULL))
  if (!is.numeric(positions) || !length(positions) || anyNA(positions) ||
      any(positions <= 0 | positions >= 1) || is.unsorted(positions, strictly = TRUE)) {
    stop_input("`point.positions` must be NULL or increasing fractions of the axis in (0, 1), ",
               "not ", describe_value(positions), ".", call = call)
  }
  d <- length(positions)
  used <- setdiff(unique(as.vector(degrees)), 0L)
  if (any(used != d)) {
    stop_input("`point.positions` has ", d, " position", if (d > 1) "s", " but some curves have ",
               paste(setdiff(used, d), collapse = ", "), " transitions; set `degrees = ", d,
               "`.", call = call)
  }
  edges <- c(0.5, 0.5 + bins * positions, bins + 0.5)
  gap <- curve_gap(d, bins)
  if (any(diff(edges) < gap)) {
    stop_input("`point.positions` put transition points closer than ", gap, " bins to each ",
               "other or to the edges of ", bins, " bins.", call = call)
  }
  invisible(positions)
}

# Evenly spread baseline points (jittered by 10 % of their spacing) must have
# room for the gap, or no truth can be drawn.
check_degrees_fit_bins <- function(degrees, bins, call) {
  for (d in setdiff(unique(as.vector(degrees)), 0L)) {
    if (0.8 * bins / (d + 1) < curve_gap(d, bins)) {
      stop_input("n.bins = ", bins, " is too few for curves with ", d, " transitions (their ",
                 "points need gaps of at least ", curve_gap(d, bins), " bins); use more bins ",
                 "or lower `degrees`.", call = call)
    }
  }
  invisible(degrees)
}

# ---------------------------------------------------------------------------
# Design and model skeleton

# One row per animal and within-animal level combination ("unit"): the
# animal's label, group and between-animal levels, and the within levels.
# Factors are factors whose levels are in the order given, so that the model
# (and wisp() on the simulated data) takes the first given level as the
# reference.
design_units <- function(design) {
  animals <- design$animals
  within <- design$within
  units <- animals
  if (length(within)) {
    grid <- expand.grid(rev(lapply(within, unique)), KEEP.OUT.ATTRS = FALSE,
                        stringsAsFactors = FALSE)[names(within)]
    animal <- rep(seq_len(nrow(animals)), each = nrow(grid))
    level <- rep(seq_len(nrow(grid)), times = nrow(animals))
    units <- cbind(animals[animal, , drop = FALSE], grid[level, , drop = FALSE])
    rownames(units) <- NULL
  }
  factors <- c(design$between, within)
  for (f in names(factors)) {
    units[[f]] <- factor(as.character(units[[f]]), levels = unique(as.character(factors[[f]])))
  }
  units
}

# The model that wisp() would build for these animals and treatments: its
# weight matrix, treatments and parameter layout. One token per unit,
# context and gene is enough to name everything.
simulation_skeleton <- function(units, factor_names, time_series, contexts, genes, degrees,
                                bins) {
  n <- nrow(units)
  unit <- rep(seq_len(n), times = length(contexts) * length(genes))
  tokens <- data.frame(count = 0, bin = 1L,
                       context = rep(rep(contexts, each = n), times = length(genes)),
                       species = rep(genes, each = n * length(contexts)),
                       ran = units$ran[unit], stringsAsFactors = FALSE)
  for (f in factor_names) tokens[[f]] <- units[[f]][unit]
  model_build(tokens, factor_names, time_series, degrees, bins = bins)
}

# The model's treatment name of every unit.
unit_treatments <- function(units, factor_names, model) {
  key <- function(columns) do.call(paste, c(lapply(unname(columns), as.character), sep = "\r"))
  model$treatments[match(key(units[factor_names]), key(model$treatment_levels[factor_names]))]
}

# ---------------------------------------------------------------------------
# The truth

# beta for every curve (context, gene): baselines and treatment effects, with
# the per-treatment values z = W beta valid for every treatment.
draw_population <- function(model, effect_prob, sizes) {
  p <- model$parameters
  treatments <- model$treatments
  key <- paste(p$component, p$context, p$species, p$block, p$treatment, sep = "\r")
  beta <- stats::setNames(numeric(nrow(p)), p$name)
  z <- list()
  for (context in model$contexts) {
    z[[context]] <- list()
    for (gene in model$species) {
      d <- model$degrees[context, gene]
      curve <- draw_curve(d, model$weights, model$bins, effect_prob[match(gene, model$species)],
                          sizes)
      components <- c(rep("Rt", d + 1), rep("tslope", d), rep("tpoint", d))
      blocks <- c(seq_len(d + 1), seq_len(d), seq_len(d))
      at <- match(paste(rep(components, each = length(treatments)), context, gene,
                        rep(blocks, each = length(treatments)), treatments, sep = "\r"), key)
      beta[at] <- as.vector(curve)
      values <- model$weights %*% curve
      dimnames(values) <- list(treatments, paste0(components, blocks))
      z[[context]][[gene]] <- values
    }
  }
  list(beta = beta[p$role != "warp"], z = z, degrees = model$degrees, bins = model$bins,
       treatments = treatments)
}

# One curve's beta: a (treatments x values) matrix, columns R_1..R_{d+1},
# s_1..s_d, p_1..p_d, row 1 the baseline and the others treatment effects.
draw_curve <- function(d, weights, bins, effect_prob, sizes) {
  n_treatments <- nrow(weights)
  n_values <- 3 * d + 1
  gap <- curve_gap(d, bins)
  for (attempt in 1:200) {
    rates <- numeric(d + 1)
    rates[1] <- stats::runif(1, sizes$first_rate[1], sizes$first_rate[2])
    direction <- sample(c(-1, 1), 1)
    for (k in seq_len(d)) {
      step <- stats::runif(1, sizes$step[1], sizes$step[2])
      rates[k + 1] <- min(50, max(lowest_rate(sizes$first_rate),
                                  rates[k] * exp(direction * step)))
      direction <- -direction
    }
    slopes <- stats::runif(d, 0.4, 1)
    points <- if (is.null(sizes$positions)) {
      0.5 + bins * seq_len(d) / (d + 1) + stats::runif(d, -0.1, 0.1) * bins / (d + 1)
    } else {
      0.5 + bins * sizes$positions
    }
    n_effects <- (n_treatments - 1) * n_values
    nonzero <- stats::runif(n_effects) < effect_prob
    sign <- sample(c(-1, 1), n_effects, replace = TRUE)
    scale <- c(rep(sizes$rate, d + 1), sizes$slope * slopes, rep(sizes$point, d))
    effects <- matrix(nonzero * sign, n_treatments - 1, n_values) *
      rep(scale, each = n_treatments - 1)
    curve <- rbind(c(log1p(rates), slopes, points), effects)
    if (curve_values_valid(weights %*% curve, d, bins, gap, rate_floor(sizes$first_rate))) {
      return(curve)
    }
  }
  stop_input("Could not draw valid curves with ", d, " transitions in ", bins, " bins: the ",
             "treatment effects push rates below ", format(expm1(rate_floor(sizes$first_rate))),
             " (use a smaller `effect.size` with a low `rate.range`), slopes outside 0.1..4 ",
             "or transition ",
             "points closer than ", gap, " bins. Use smaller effects, fewer transitions or more ",
             "bins.", call = NULL)
}

# The lowest block rate a baseline curve's steps may reach (per cell), and
# the lowest any treatment's rate may be (on the log(1 + rate) scale): 1 and
# 0.25 per cell, or lower for sparse genes (a low `rate.range`).
lowest_rate <- function(first_rate) min(1, first_rate[1])
rate_floor <- function(first_rate) log1p(min(0.25, first_rate[1] / 2))

# Rates >= `floor`, slopes in [0.1, 4], points `gap` apart and from the edges.
curve_values_valid <- function(values, d, bins, gap, floor) {
  if (any(values[, seq_len(d + 1)] < floor)) return(FALSE)
  if (d == 0) return(TRUE)
  slopes <- values[, d + 1 + seq_len(d), drop = FALSE]
  points <- values[, 2 * d + 1 + seq_len(d), drop = FALSE]
  all(slopes >= 0.1 & slopes <= 4) && points_spaced(points, bins, gap)
}

points_spaced <- function(points, bins, gap) {
  edges <- cbind(0.5, points, bins + 0.5)
  all(edges[, -1, drop = FALSE] - edges[, -ncol(edges), drop = FALSE] >= gap)
}

# One row per unit (animal x within levels), context and gene (genes
# fastest): the population values of that curve at the unit's treatment,
# padded to the largest degree with transitions of zero height.
curve_table <- function(population, units, animals, contexts, genes) {
  n_units <- nrow(units)
  n <- n_units * length(contexts) * length(genes)
  unit <- rep(seq_len(n_units), each = length(contexts) * length(genes))
  context <- rep(rep(seq_along(contexts), each = length(genes)), times = n_units)
  gene <- rep(seq_along(genes), times = n_units * length(contexts))
  # by name: the model sorts labels as strings ("context10" before "context2")
  degree <- population$degrees[cbind(contexts[context], genes[gene])]
  top <- max(degree)
  rate <- matrix(0, n, top + 1)
  slope <- matrix(1, n, top)
  point <- matrix(0.5 + population$bins / 2, n, top)
  for (c in seq_along(contexts)) {
    for (g in seq_along(genes)) {
      rows <- which(context == c & gene == g)
      d <- degree[rows[1]]
      values <- population$z[[contexts[c]]][[genes[g]]][units$treatment[unit[rows]], ,
                                                        drop = FALSE]
      rate[rows, seq_len(d + 1)] <- values[, seq_len(d + 1)]
      rate[rows, d + 1 + seq_len(top - d)] <- values[, d + 1]
      slope[rows, seq_len(d)] <- values[, d + 1 + seq_len(d)]
      point[rows, seq_len(d)] <- values[, 2 * d + 1 + seq_len(d)]
    }
  }
  list(unit = unit, animal = match(units$ran[unit], animals), context = context, gene = gene,
       degree = degree, rate = rate, slope = slope, point = point)
}

# u[gene, animal, warp] ~ N(0, random_sd[gene, warp]^2); none (all 0) for a
# single animal. Point effects are redrawn for the (gene, animal) pairs whose
# warped points come closer than half the population gap.
draw_random_effects <- function(curves, animals, genes, random_sd, bins) {
  warps <- c("point", "rate", "slope")
  u <- array(0, c(length(genes), length(animals), 3L), dimnames = list(genes, animals, warps))
  if (length(animals) < 2L) return(u)
  for (w in seq_along(warps)) {
    u[, , w] <- stats::rnorm(length(genes) * length(animals)) * random_sd[, w]
  }
  for (attempt in 1:100) {
    bad <- crowded_pairs(curves, u, bins)
    if (!nrow(bad)) return(u)
    u[cbind(bad, 1L)] <- stats::rnorm(nrow(bad)) * random_sd[bad[, 1], "point"]
  }
  stop_input("Could not draw random point effects that keep the transition points apart; ",
             "use a smaller `random.sd[\"point\"]` or more bins.", call = NULL)
}

# The (gene, animal) pairs with a warped curve whose points are too close.
crowded_pairs <- function(curves, u, bins) {
  warped <- warp_curves(curves, u, bins)
  crowded <- logical(length(curves$unit))
  for (d in setdiff(unique(curves$degree), 0L)) {
    rows <- which(curves$degree == d)
    edges <- cbind(0.5, warped$point[rows, seq_len(d), drop = FALSE], bins + 0.5)
    gaps <- edges[, -1, drop = FALSE] - edges[, -ncol(edges), drop = FALSE]
    crowded[rows] <- apply(gaps < curve_gap(d, bins) / 2, 1, any)
  }
  unique(cbind(curves$gene[crowded], curves$animal[crowded]))
}

# The animal curves (model vignette §7.2): rates times exp(u_rate), slopes and
# normalised points shifted on the logit scale.
warp_curves <- function(curves, u, bins) {
  pick <- function(w) u[cbind(curves$gene, curves$animal, w)]
  slope_max <- simulation_constants()$slope_max
  curves$rate <- curves$rate * exp(pick(2L))
  if (!ncol(curves$slope)) return(curves)
  curves$slope <- slope_max * stats::plogis(stats::qlogis(curves$slope / slope_max) + pick(3L))
  # Point k (from 1) of a degree-d curve lives at 0.5 + k g + (B - (d + 1) g) q
  # with q in (0, 1) and g the model's smallest spacing (the points keep g
  # from each other and from the ends); the warp shifts q on the logit scale.
  gap <- simulation_point_gap(bins)
  shift <- pick(1L)
  for (d in setdiff(unique(curves$degree), 0L)) {
    rows <- which(curves$degree == d)
    free <- bins - (d + 1) * gap
    for (k in seq_len(d)) {
      base <- 0.5 + k * gap
      q <- (curves$point[rows, k] - base) / free
      curves$point[rows, k] <- base + free * stats::plogis(stats::qlogis(q) + shift[rows])
    }
  }
  curves
}

# The model's smallest spacing of transition points at its default
# buffer_factor (from the core; 0.05: ceiling(B / 20) bins).
simulation_point_gap <- function(bins) ceiling(bins * model_rules()$defaults$buffer_factor)

# Psi(x) at every bin x = 1..B for every curve: a (curves x bins) matrix.
curve_log_rates <- function(curves, bins) {
  x <- seq_len(bins)
  psi <- matrix(curves$rate[, 1], length(curves$unit), bins)
  for (k in seq_len(ncol(curves$slope))) {
    step <- curves$rate[, k + 1] - curves$rate[, k]
    psi <- psi + step * stats::plogis(curves$slope[, k] * outer(-curves$point[, k], x, "+"))
  }
  psi
}

# The rate floor (model vignette §9.2): exp(psi) - 1, smoothly kept above 0,
# as the count likelihood's fit computes it.
r_of_psi <- function(psi) rate_at(psi, "nb")

# ---------------------------------------------------------------------------
# Cells and tokens

# Cells per cell key (unit, context, bin; bins fastest, units slowest) after
# dropout.
draw_cells <- function(cells_per_bin, dropout, n_units, n_contexts, bins) {
  n <- n_units * n_contexts * bins
  bin <- rep(seq_len(bins), times = n_units * n_contexts)
  context <- rep(rep(seq_len(n_contexts), each = bins), times = n_units)
  unit <- rep(seq_len(n_units), each = n_contexts * bins)
  cells <- if (is.function(cells_per_bin)) {
    drawn <- cells_per_bin(n)
    if (!is.numeric(drawn) || length(drawn) != n || anyNA(drawn) || any(drawn < 0) ||
        any(drawn != round(drawn))) {
      stop_input("The function `cells.per.bin` must return n (here ", n, ") whole numbers >= 0.",
                 call = NULL)
    }
    as.integer(drawn)
  } else if (length(cells_per_bin) == 1L) {
    rep(as.integer(cells_per_bin), n)
  } else {
    as.integer(cells_per_bin)[bin]
  }
  for (c in seq_len(n_contexts)) {
    cells[context == c & bin %in% dropout$bins[[c]]] <- 0L
  }
  if (dropout$keys > 0) cells[stats::runif(n) < dropout$keys] <- 0L
  if (dropout$cells > 0) cells <- stats::rbinom(n, cells, 1 - dropout$cells)
  list(cells = as.integer(cells), unit = unit, context = context, bin = bin)
}

# One token per cell and gene; its count is NB(mean = rate, size = 1/phi),
# Poisson where phi = 0.
draw_tokens <- function(cells, curves, rates, dispersion) {
  n_genes <- ncol(dispersion)
  n_contexts <- nrow(dispersion)
  key <- rep(seq_along(cells$cells), cells$cells)
  cell <- rep(seq_along(key), each = n_genes)
  gene <- rep(seq_len(n_genes), times = length(key))
  key <- key[cell]
  context <- cells$context[key]
  row <- ((cells$unit[key] - 1L) * n_contexts + (context - 1L)) * n_genes + gene
  mean <- rates[cbind(row, cells$bin[key])]
  phi <- dispersion[cbind(context, gene)]
  count <- numeric(length(mean))
  nb <- phi > 0
  count[nb] <- stats::rnbinom(sum(nb), size = 1 / phi[nb], mu = mean[nb])
  count[!nb] <- stats::rpois(sum(!nb), mean[!nb])
  list(key = key, cell = cell, gene = gene, count = count)
}

# The token data.frame in the columns wisp() takes.
simulation_data <- function(result, factors, contexts, genes, cell_ids) {
  tokens <- result$tokens
  cells <- result$cells
  unit <- cells$unit[tokens$key]
  data <- data.frame(count = tokens$count, bin = cells$bin[tokens$key],
                     context = contexts[cells$context[tokens$key]],
                     species = genes[tokens$gene], ran = result$units$ran[unit],
                     stringsAsFactors = FALSE)
  for (f in names(factors)) data[[f]] <- result$units[[f]][unit]
  if (cell_ids) data$cell <- tokens$cell
  data
}

simulation_truth <- function(result, design, factors, contexts, genes, dispersion, settings) {
  p <- result$skeleton$parameters
  warps <- c("point", "rate", "slope")
  warp <- p$role == "warp"
  random_effects <- stats::setNames(result$u[cbind(match(p$species[warp], genes),
                                                   match(p$ran[warp], design$animals$ran),
                                                   match(p$component[warp], warps))],
                                    p$name[warp])
  sd <- settings$random.sd
  if (nrow(design$animals) < 2L) sd[] <- 0
  sd_vector <- stats::setNames(as.vector(t(sd)),
                               paste0("sd_", warps, "_", rep(genes, each = 3L)))
  dispersion_vector <- stats::setNames(as.vector(dispersion),
                                       paste0("dispersion_", contexts, "_",
                                              rep(genes, each = length(contexts))))
  beta <- result$population$beta
  effects <- beta[p$role[!warp] == "beta"]
  list(
    degrees = result$degrees,
    parameters = c(beta, random_effects, sd_vector, dispersion_vector),
    effects = effects,
    random.effects = random_effects,
    sd = sd_vector,
    sd.matrix = sd,
    dispersion = dispersion_vector,
    dispersion.matrix = dispersion,
    curves = population_curves(result$population),
    rates = simulation_rates(result, factors, contexts, genes),
    design = design,
    settings = settings
  )
}

# The population values z(t) in long form.
population_curves <- function(population) {
  rows <- list()
  for (context in names(population$z)) {
    for (gene in names(population$z[[context]])) {
      values <- population$z[[context]][[gene]]
      d <- population$degrees[context, gene]
      rows[[length(rows) + 1L]] <- data.frame(
        context = context, species = gene,
        treatment = rep(rownames(values), times = ncol(values)),
        component = rep(c(rep("Rt", d + 1), rep("tslope", d), rep("tpoint", d)),
                        each = nrow(values)),
        block = rep(c(seq_len(d + 1), seq_len(d), seq_len(d)), each = nrow(values)),
        value = as.vector(values), stringsAsFactors = FALSE)
    }
  }
  do.call(rbind, rows)
}

# True log rates of every (unit, context, gene, bin), with the exposure.
simulation_rates <- function(result, factors, contexts, genes) {
  curves <- result$curves
  bins <- ncol(result$psi_animal)
  n <- length(curves$unit)
  row <- rep(seq_len(n), each = bins)
  bin <- rep(seq_len(bins), times = n)
  units <- result$units
  unit <- curves$unit[row]
  rates <- data.frame(ran = units$ran[unit], context = contexts[curves$context[row]],
                      species = genes[curves$gene[row]], treatment = units$treatment[unit],
                      stringsAsFactors = FALSE)
  for (f in names(factors)) rates[[f]] <- units[[f]][unit]
  key <- ((unit - 1L) * length(contexts) + (curves$context[row] - 1L)) * bins + bin
  rates$bin <- bin
  rates$cells <- result$cells$cells[key]
  rates$log.rate.population <- as.vector(t(result$psi_population))
  rates$log.rate <- as.vector(t(result$psi_animal))
  rates$rate <- r_of_psi(rates$log.rate)
  rates
}
