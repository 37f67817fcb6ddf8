#' Simulate token-level counts from a WSPmm with a known truth
#'
#' Draws spatial count data from the warped-sigmoid Poisson-process model
#' that [wisp()] fits, so that fits can be checked against the truth. Each
#' curve has a number of transitions (its degree); treatment effects shift
#' block rates and transition points; each random level (e.g. a mouse)
#' warps its curves.
#'
#' For every real random level, context, gene, treatment and bin the
#' simulator puts `cells.per.bin` tokens (cells) whose counts add up, on
#' average, to the model's expected count `exp(pred.log) - 1`. Counts are
#' negative binomial with the given `dispersion` (Poisson when 0).
#'
#' @param n.contexts Number of contexts (cell types or regions).
#' @param n.genes Number of genes (RNA species).
#' @param n.random Number of random-effect levels (e.g. mice).
#' @param fixed.effects Named list of fixed-effect level vectors; the first
#'   level of each is the reference.
#' @param n.bins Number of spatial bins.
#' @param cells.per.bin Tokens per (random level, context, gene, treatment,
#'   bin) cell.
#' @param dispersion Negative-binomial dispersion of a token's count (its
#'   variance is `mu + dispersion * mu^2`).
#' @param degrees Transitions per (context, gene): an integer matrix
#'   `n.contexts` x `n.genes`, one integer for all, or `NULL` to draw them
#'   from 0, 1 and 2.
#' @param effect.size Size of the non-zero rate effects, on the log scale.
#' @param time.series Name of the fixed effect that is an ordered time
#'   series, or `NULL`.
#' @param seed Random seed. The caller's random number stream is left as it
#'   was.
#' @return A data.frame with columns `count`, `bin`, `context`, `species`,
#'   `ran` and one column per fixed effect, and a `truth` attribute: a list
#'   with `degrees` (context x gene matrix), `parameters` (the true parameter
#'   vector under the model's parameter names), `effects` (the true
#'   non-reference fixed effects), `warping` (the true warping factors),
#'   `pred.log` (the true log rates of the summed table) and `settings` (the
#'   arguments).
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 2, n.bins = 30, seed = 7)
#' head(counts)
#' attr(counts, "truth")$degrees
wisp_simulate <- function(n.contexts = 1L, n.genes = 3L, n.random = 3L,
                          fixed.effects = list(hemisphere = c("left", "right")),
                          n.bins = 50L, cells.per.bin = 5L, dispersion = 0.05,
                          degrees = NULL, effect.size = 0.5, time.series = NULL,
                          seed = 1L) {
  check_whole_number(n.contexts, "n.contexts", lower = 1, upper = 1000)
  check_whole_number(n.genes, "n.genes", lower = 1, upper = 10000)
  check_whole_number(n.random, "n.random", lower = 1, upper = 10000)
  check_fixed_effect_levels(fixed.effects)
  check_whole_number(n.bins, "n.bins", lower = 10, upper = 1e5)
  check_whole_number(cells.per.bin, "cells.per.bin", lower = 1, upper = 1e4)
  check_number(dispersion, "dispersion", lower = 0, upper = 100)
  check_number(effect.size, "effect.size", lower = 0, upper = 5)
  check_whole_number(seed, "seed", lower = -.Machine$integer.max)
  if (!is.null(time.series) &&
      !(is.character(time.series) && length(time.series) == 1L && time.series %in% names(fixed.effects))) {
    stop_input("`time.series` must be NULL or the name of one of `fixed.effects`.")
  }
  tokens <- n.contexts * n.genes * n.random * n.bins * cells.per.bin *
    prod(lengths(fixed.effects))
  if (tokens > 5e7) {
    stop_input("these arguments simulate ", format(tokens, big.mark = ",", scientific = FALSE),
               " tokens; at most 50,000,000 are supported.")
  }

  with_seed(seed, {
    contexts <- sprintf("context%d", seq_len(n.contexts))
    genes <- sprintf("gene%d", seq_len(n.genes))
    mice <- sprintf("mouse%d", seq_len(n.random))
    degrees <- simulation_degrees(degrees, contexts, genes)
    cells <- do.call(expand.grid, c(
      list(bin = seq_len(n.bins), context = contexts, species = genes, ran = mice),
      fixed.effects, list(stringsAsFactors = FALSE, KEEP.OUT.ATTRS = FALSE)
    ))
    cells$count <- 0
    skeleton <- model_build(cells, names(fixed.effects), time.series, degrees, bins = n.bins)
    truth <- draw_truth(skeleton, effect.size)
    pred_log <- model_predict(skeleton, truth)

    real <- skeleton$summed$ran != "none"
    summed <- skeleton$summed[real, ]
    expected <- pmax(exp(pred_log[real]) - 1, 0) / cells.per.bin
    n_cells <- nrow(summed) * cells.per.bin
    token_mean <- rep(expected, each = cells.per.bin)
    count <- if (dispersion > 0) {
      stats::rnbinom(n_cells, mu = token_mean, size = 1 / dispersion)
    } else {
      stats::rpois(n_cells, token_mean)
    }
    row <- rep(seq_len(nrow(summed)), each = cells.per.bin)
    data <- data.frame(count = count, bin = summed$bin[row], context = summed$context[row],
                       species = summed$species[row], ran = summed$ran[row],
                       stringsAsFactors = FALSE)
    treatment <- match(summed$treatment[row], skeleton$treatments)
    for (f in names(fixed.effects)) {
      levels <- skeleton$treatment_levels[[f]][treatment]
      data[[f]] <- if (is.numeric(fixed.effects[[f]])) as.numeric(levels) else levels
    }
  })

  roles <- skeleton$parameters$role
  attr(data, "truth") <- list(
    degrees = skeleton$degrees,
    parameters = stats::setNames(truth, skeleton$parameter_names),
    effects = stats::setNames(truth[roles == "beta"], skeleton$parameter_names[roles == "beta"]),
    warping = stats::setNames(truth[roles == "warp"], skeleton$parameter_names[roles == "warp"]),
    pred.log = pred_log,
    settings = list(n.contexts = n.contexts, n.genes = n.genes, n.random = n.random,
                    fixed.effects = fixed.effects, n.bins = n.bins,
                    cells.per.bin = cells.per.bin, dispersion = dispersion,
                    effect.size = effect.size, time.series = time.series, seed = seed)
  )
  data
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

check_fixed_effect_levels <- function(fixed.effects, call = sys.call(-1)) {
  ok <- is.list(fixed.effects) && length(fixed.effects) >= 1 &&
    !is.null(names(fixed.effects)) && all(nzchar(names(fixed.effects))) &&
    !anyDuplicated(names(fixed.effects)) &&
    all(vapply(fixed.effects, function(l) length(unique(l)) >= 2 && !anyNA(l), logical(1)))
  if (!ok) {
    stop_input("`fixed.effects` must be a named list of level vectors, each with at least ",
               "2 distinct levels and no NA.", call = call)
  }
  reserved <- intersect(names(fixed.effects), c("count", "bin", "context", "species", "ran"))
  if (length(reserved)) {
    stop_input("`fixed.effects` may not be named ", paste0("'", reserved, "'", collapse = ", "),
               ": those are column roles.", call = call)
  }
  invisible(fixed.effects)
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


# A feasible true parameter vector for the model's layout: block rates that
# step up or down, transitions spread over the bins, some treatment effects
# zero and some not, small warping factors.
draw_truth <- function(model, effect.size) {
  p <- model$parameters
  bins <- model$bins
  for (attempt in 1:100) {
    truth <- numeric(nrow(p))
    for (context in model$contexts) {
      for (gene in model$species) {
        d <- model$degrees[context, gene]
        rates <- numeric(d + 1)
        rates[1] <- stats::runif(1, 15, 60)
        direction <- sample(c(-1, 1), 1)
        for (k in seq_len(d)) {
          rates[k + 1] <- min(250, max(5, rates[k] * exp(direction * stats::runif(1, 0.8, 1.5))))
          direction <- -direction
        }
        points <- bins * seq_len(d) / (d + 1) + stats::runif(d, -0.1, 0.1) * bins / (d + 1)
        slopes <- stats::runif(d, 0.4, 1.0)
        curve <- p$role != "warp" & p$context %in% context & p$species %in% gene
        base <- curve & p$role == "baseline"
        values <- list(Rt = log1p(rates), tslope = slopes, tpoint = points)
        for (component in names(values)) {
          at <- base & p$component == component
          truth[at] <- values[[component]] # baselines come in block order
        }
        effect <- curve & p$role == "beta"
        rate_effect <- effect & p$component == "Rt"
        truth[rate_effect] <- sample(c(0, -effect.size, effect.size), sum(rate_effect),
                                     replace = TRUE, prob = c(0.5, 0.25, 0.25))
        point_effect <- effect & p$component == "tpoint"
        shift <- stats::runif(sum(point_effect), 1.5, 3) * sample(c(-1, 1), sum(point_effect), TRUE)
        truth[point_effect] <- ifelse(stats::runif(sum(point_effect)) < 0.25, shift, 0)
      }
    }
    warp <- p$role == "warp"
    truth[warp] <- stats::runif(sum(warp), -0.3, 0.3)
    if (model_is_feasible(model, truth)) return(truth)
  }
  stop("could not draw a feasible truth for this design; use fewer transitions or more bins",
       call. = FALSE)
}
