# A slow, plain-R reference implementation of the original likelihood's model
# as the model vignette writes it (§2-§8, §9.1 and §11.1), with wispack's
# deliberate differences (§16): every penalty coefficient is kappa / x0_i,
# treatment names join levels with ":", any number of levels per factor.
# It is the test oracle for the Rust core, so it is written for clarity, uses no
# package code, and follows the vignette's formulas.

# ---------------------------------------------------------------------------
# Levels, treatments, weights (model vignette §2-§3)
# ---------------------------------------------------------------------------

# Sorted unique values as strings: numeric columns sort numerically, others in
# byte (C-locale) order, so the result does not depend on the session locale.
reference_levels <- function(x) {
  x <- x[!is.na(x)]
  if (is.numeric(x)) {
    as.character(sort(unique(x)))
  } else {
    sort(unique(as.character(x)), method = "radix")
  }
}

# Level vectors as strings in model order: numeric vectors are sorted
# numerically, character vectors are taken in the order given (first =
# reference).
reference_ordered_levels <- function(fixed_levels) {
  lapply(fixed_levels, function(l) {
    if (is.numeric(l)) as.character(sort(unique(l))) else as.character(l)
  })
}

# Treatment names: "ref", then for every non-empty subset of factors (by subset
# size, then factor order) every Cartesian combination of the factors'
# non-reference levels, the first factor varying slowest. Attribute
# "components" holds, per treatment, the named non-reference levels.
reference_treatments <- function(fixed_levels) {
  fixed_levels <- reference_ordered_levels(fixed_levels)
  factors <- names(fixed_levels)
  treatment_names <- "ref"
  components <- list(setNames(character(0), character(0)))
  n_factors <- length(factors)
  for (size in seq_len(n_factors)) {
    subsets <- utils::combn(n_factors, size, simplify = FALSE)
    for (subset in subsets) {
      combos <- list(character(0))
      for (f in subset) {
        treatment_levels <- fixed_levels[[f]][-1]
        extended <- list()
        for (combo in combos) {
          for (level in treatment_levels) {
            extended[[length(extended) + 1]] <- c(combo, level)
          }
        }
        combos <- extended
      }
      for (combo in combos) {
        treatment_names <- c(treatment_names, paste(combo, collapse = ":"))
        components[[length(components) + 1]] <- setNames(combo, factors[subset])
      }
    }
  }
  attr(treatment_names, "components") <- components
  treatment_names
}

# W[p, i] = 1 when effect i applies to treatment p (model vignette §3).
# Time ranks are 1-based positions in the ordered levels of `time_series`.
reference_weights <- function(fixed_levels, time_series = NULL) {
  fixed_levels <- reference_ordered_levels(fixed_levels)
  treatments <- reference_treatments(fixed_levels)
  components <- attr(treatments, "components")
  n <- length(treatments)
  ranks <- NULL
  if (!is.null(time_series)) {
    ranks <- setNames(seq_along(fixed_levels[[time_series]]), fixed_levels[[time_series]])
  }
  W <- matrix(0, n, n, dimnames = list(as.vector(treatments), as.vector(treatments)))
  for (p in seq_len(n)) {
    for (i in seq_len(n)) {
      applies <- TRUE
      effect <- components[[i]]
      predicted <- components[[p]]
      for (f in names(effect)) {
        present <- f %in% names(predicted) && predicted[[f]] == effect[[f]]
        if (!present && !is.null(time_series) && f == time_series &&
            f %in% names(predicted)) {
          present <- ranks[[predicted[[f]]]] >= ranks[[effect[[f]]]]
        }
        if (!present) applies <- FALSE
      }
      W[p, i] <- if (applies) 1 else 0
    }
  }
  W
}

# ---------------------------------------------------------------------------
# Parameter layout and names (model vignette §8)
# ---------------------------------------------------------------------------

# The real ran levels that carry warping factors: all of them when there are
# at least two, none when there is a single level (it plays "none").
reference_warped_levels <- function(ran_levels) {
  ran_levels <- setdiff(ran_levels, "none")
  if (length(ran_levels) >= 2) ran_levels else character(0)
}

# One row per parameter, in vector order: what the parameter is and its name.
# ran_levels = real levels only; degrees = matrix [context, species].
reference_layout <- function(contexts, species, ran_levels, treatments, degrees) {
  rows <- list()
  add <- function(...) rows[[length(rows) + 1]] <<- data.frame(..., stringsAsFactors = FALSE)
  for (m in c("Rt", "tslope", "tpoint")) {
    for (c in contexts) {
      for (s in species) {
        d <- degrees[c, s]
        if (d == 0 && m != "Rt") next
        blocks <- if (m == "Rt") d + 1 else d
        for (k in seq_len(blocks)) {
          for (i in seq_along(treatments)) {
            name <- if (i == 1) {
              paste0("baseline_", c, "_", m, "_", s, "_Tns/Blk", k)
            } else {
              paste0("beta_", m, "_", c, "_", s, "_", treatments[i], "_X_Tns/Blk", k)
            }
            add(kind = "beta", component = m, context = c, species = s, block = k,
                treatment = i, ran = NA_character_, warp = NA_character_, name = name)
          }
        }
      }
    }
  }
  for (s in species) {
    for (r in reference_warped_levels(ran_levels)) {
      for (w in c("point", "rate", "slope")) {
        add(kind = "wfactor", component = NA_character_, context = NA_character_,
            species = s, block = NA_integer_, treatment = NA_integer_, ran = r, warp = w,
            name = paste0("wfactor_", w, "_", r, "_X_", s))
      }
    }
  }
  do.call(rbind, rows)
}

reference_parameter_names <- function(contexts, species, ran_levels, treatments, degrees) {
  reference_layout(contexts, species, ran_levels, treatments, degrees)$name
}

# A degree matrix [context, species] from one value or a vector (filled by
# column, i.e. contexts vary fastest).
reference_degrees <- function(contexts, species, values) {
  matrix(as.integer(values), length(contexts), length(species),
         dimnames = list(contexts, species))
}

# ---------------------------------------------------------------------------
# Summed-count table (model vignette §4) and dispersion (§9.1)
# ---------------------------------------------------------------------------

# The empty table for a design: every (ran, context, species, treatment, bin)
# row in nesting order, with no counts yet.
reference_skeleton <- function(contexts, species, ran_levels, fixed_levels,
                               time_series = NULL, bins) {
  treatments <- reference_treatments(fixed_levels)
  all_ran <- if (length(ran_levels) >= 2) c("none", ran_levels) else ran_levels
  n <- length(all_ran) * length(contexts) * length(species) * length(treatments) * bins
  ran <- context <- spec <- treatment <- character(n)
  bin <- integer(n)
  row <- 0
  for (r in all_ran) for (c in contexts) for (s in species) for (t in treatments) {
    for (b in seq_len(bins)) {
      row <- row + 1
      ran[row] <- r; context[row] <- c; spec[row] <- s; treatment[row] <- t; bin[row] <- b
    }
  }
  summed <- data.frame(ran = ran, context = context, species = spec,
                       treatment = treatment, bin = bin,
                       count = rep(NA_real_, n), count_log = rep(NA_real_, n),
                       observed = rep(FALSE, n), stringsAsFactors = FALSE)
  list(summed = summed,
       dispersion = matrix(0, length(species), length(contexts),
                           dimnames = list(species, contexts)),
       contexts = contexts, species = species, ran_levels = all_ran,
       treatments = as.vector(treatments), weights = reference_weights(fixed_levels, time_series),
       bins = bins, fixed_levels = fixed_levels)
}

# Round half away from zero (as C++/Rust round do), for non-negative x.
reference_round <- function(x) {
  whole <- floor(x)
  if (x - whole >= 0.5) whole + 1 else whole
}

# Method-of-moments gamma dispersion of one pool of raw counts.
reference_dispersion_of <- function(counts) {
  n <- length(counts)
  if (n == 0) return(0)
  m <- sum(counts) / n
  v <- sum((counts - m)^2) / n
  if (v > m) (v / m - 1) / m else 0
}

reference_table <- function(tokens, fixed_effects, time_series = NULL,
                            bins = max(tokens$bin), round_none = TRUE) {
  fixed_levels <- lapply(fixed_effects, function(f) reference_levels(tokens[[f]]))
  names(fixed_levels) <- fixed_effects
  real_ran <- reference_levels(tokens$ran)
  table <- reference_skeleton(reference_levels(tokens$context),
                              reference_levels(tokens$species), real_ran,
                              fixed_levels, time_series, bins)
  summed <- table$summed
  components <- attr(reference_treatments(fixed_levels), "components")

  # The value every fixed-effect column takes for each treatment.
  assignment <- lapply(components, function(comp) {
    values <- vapply(fixed_levels, function(l) l[1], "")
    values[names(comp)] <- comp
    values
  })
  names(assignment) <- table$treatments

  token_bin <- trunc(tokens$bin)
  usable <- !is.na(tokens$count)
  token_ran <- as.character(tokens$ran)
  token_context <- as.character(tokens$context)
  token_species <- as.character(tokens$species)
  token_fixed <- lapply(fixed_effects, function(f) as.character(tokens[[f]]))

  # The pseudo-level exists only with >= 2 real levels (a lone real level may
  # itself be called "none").
  is_none <- length(real_ran) >= 2 & summed$ran == "none"

  # Real ran levels: sum the matching tokens; no tokens means NA.
  for (row in seq_len(nrow(summed))) {
    if (is_none[row]) next
    match <- usable & token_ran == summed$ran[row] &
      token_context == summed$context[row] & token_species == summed$species[row] &
      token_bin == summed$bin[row]
    values <- assignment[[summed$treatment[row]]]
    for (f in seq_along(fixed_effects)) match <- match & token_fixed[[f]] == values[[f]]
    pool <- which(match)
    if (length(pool) > 0) {
      summed$count[row] <- sum(tokens$count[pool])
      summed$observed[row] <- TRUE
    }
  }

  # "none": the log1p-mean of the observed real rows of the same cell.
  for (row in which(is_none)) {
    same_cell <- !is_none & summed$observed &
      summed$context == summed$context[row] & summed$species == summed$species[row] &
      summed$treatment == summed$treatment[row] & summed$bin == summed$bin[row]
    counts <- summed$count[same_cell]
    value <- 0
    if (length(counts) > 0) {
      log_sum <- 0
      for (count in counts) log_sum <- log_sum + log(count + 1)
      value <- exp(log_sum / length(counts)) - 1
      if (round_none) value <- reference_round(value)
    }
    summed$count[row] <- value
    summed$observed[row] <- TRUE
  }

  summed$count_log <- ifelse(summed$observed, log(summed$count + 1), NA_real_)
  table$summed <- summed

  for (s in table$species) {
    for (c in table$contexts) {
      pool <- summed$observed & summed$species == s & summed$context == c
      table$dispersion[s, c] <- reference_dispersion_of(summed$count[pool])
    }
  }
  table
}

# ---------------------------------------------------------------------------
# Curve, warping (model vignette §5-§7.1)
# ---------------------------------------------------------------------------

# omega(z; b, w). 1 - exp(-u) is evaluated as -expm1(-u): with the
# pseudo-infinite bound u is ~1e-10 and the literal form loses ~6 digits.
reference_warp <- function(z, bound, w) {
  phi <- function(X) -expm1(-w^2 * X / bound)
  if (w > 0) z + phi(z) * (bound - z) else z - phi(bound - z) * z
}

reference_sigmoid <- function(u) {
  if (u > 0) 1 / (1 + exp(-u)) else exp(u) / (1 + exp(u))
}

reference_psi <- function(x, Rt, tslope, tpoint) {
  infinite <- which(is.infinite(Rt))
  if (length(infinite) > 0) return(Rt[infinite[1]])
  value <- Rt[1]
  for (k in seq_along(tpoint)) {
    value <- value + (Rt[k + 1] - Rt[k]) * reference_sigmoid(tslope[k] * (x - tpoint[k]))
  }
  value
}

# Warped components of every (ran, context, species, treatment) block, in
# table order.
reference_blocks <- function(table, x, degrees, warp_precision = 1e-7) {
  inf_warp <- warp_precision / .Machine$double.eps
  layout <- reference_layout(table$contexts, table$species, table$ran_levels,
                             table$treatments, degrees)
  stopifnot(length(x) == nrow(layout))
  warped <- reference_warped_levels(table$ran_levels)
  blocks <- list()
  for (r in table$ran_levels) for (c in table$contexts) for (s in table$species) {
    for (t in seq_along(table$treatments)) {
      d <- degrees[c, s]
      warp_of <- function(kind) {
        if (!(r %in% warped)) return(0)
        x[layout$kind == "wfactor" & layout$species == s & layout$ran == r &
            layout$warp == kind]
      }
      component <- function(m, blocks_n, bound, w) {
        values <- numeric(blocks_n)
        for (k in seq_len(blocks_n)) {
          z <- 0
          for (i in seq_along(table$treatments)) {
            beta <- x[layout$kind == "beta" & layout$component == m &
                        layout$context == c & layout$species == s &
                        layout$block == k & layout$treatment == i]
            z <- z + table$weights[t, i] * beta
          }
          values[k] <- reference_warp(z, bound, w)
        }
        values
      }
      blocks[[length(blocks) + 1]] <- list(
        ran = r, context = c, species = s, treatment = table$treatments[t], degree = d,
        Rt = component("Rt", d + 1, inf_warp, warp_of("rate")),
        tslope = component("tslope", d, inf_warp, warp_of("slope")),
        tpoint = component("tpoint", d, table$bins, warp_of("point")))
    }
  }
  blocks
}

# pred.log for every summed row.
reference_predict <- function(table, x, degrees, warp_precision = 1e-7,
                              blocks = reference_blocks(table, x, degrees, warp_precision)) {
  summed <- table$summed
  pred <- rep(NA_real_, nrow(summed))
  for (block in blocks) {
    rows <- which(summed$ran == block$ran & summed$context == block$context &
                    summed$species == block$species & summed$treatment == block$treatment)
    for (row in rows) {
      pred[row] <- reference_psi(summed$bin[row], block$Rt, block$tslope, block$tpoint)
    }
  }
  pred
}

# ---------------------------------------------------------------------------
# Likelihood (model vignette §9.1), distances and penalty (§11.1)
# ---------------------------------------------------------------------------

reference_nll <- function(table, pred_log) {
  summed <- table$summed
  log_lik <- 0
  for (row in which(summed$observed)) {
    mu <- pred_log[row]
    if (!is.finite(mu) || mu < -0.01) return(1e100)
    y <- summed$count_log[row]
    phi <- table$dispersion[summed$species[row], summed$context[row]]
    lambda <- exp(mu) - 1
    v <- (lambda + phi * lambda^2) / (lambda + 1)^2
    mu <- max(mu, 0)
    term <- 0
    if (v == 0) {
      # Poisson log pmf at y; 0 * log(0) is taken as its limit 0.
      term <- (if (y == 0) 0 else y * log(mu)) - mu - lgamma(y + 1)
    } else if (y > 0 && mu > 0) {
      shape <- mu^2 / v
      rate <- shape / mu
      term <- shape * log(rate) + lgamma(y + shape) - lgamma(y + 1) - lgamma(shape) -
        (y + shape) * log(rate + 1)
    }
    log_lik <- log_lik + term
  }
  nll <- -log_lik
  if (is.na(nll) || nll > 1e100) nll <- 1e100
  nll
}

reference_distances <- function(table, blocks, buffer_factor = 0.05) {
  buffer <- ceiling(table$bins * buffer_factor)
  distances <- numeric(0)
  for (block in blocks) {
    d <- block$degree
    if (d > 0) {
      points <- c(0, block$tpoint, table$bins)
      gaps <- numeric(d + 1)
      for (k in seq_len(d + 1)) gaps[k] <- (points[k + 1] - points[k]) - buffer
      distances <- c(distances, block$tslope, gaps, block$Rt + 0.01)
    } else {
      distances <- c(distances, block$Rt[1] + 0.01)
    }
  }
  distances[is.nan(distances)] <- 0
  distances
}

reference_evaluate <- function(table, x, degrees, warp_precision, buffer_factor) {
  blocks <- reference_blocks(table, x, degrees, warp_precision)
  pred_log <- reference_predict(table, x, degrees, warp_precision, blocks)
  list(pred_log = pred_log, nll = reference_nll(table, pred_log),
       distances = reference_distances(table, blocks, buffer_factor))
}

reference_objective <- function(table, x, degrees, start = x, warp_precision = 1e-7,
                                buffer_factor = 0.05,
                                max_penalty_at_distance_factor = 0.01) {
  at_x <- reference_evaluate(table, x, degrees, warp_precision, buffer_factor)
  at_start <- if (identical(start, x)) at_x else
    reference_evaluate(table, start, degrees, warp_precision, buffer_factor)
  n <- length(at_x$distances)
  kappa <- sqrt(n / (at_start$nll * max_penalty_at_distance_factor))
  penalty <- 0
  for (i in seq_len(n)) {
    a <- kappa / at_start$distances[i]
    scaled <- max(a * at_x$distances[i], 1e-30)
    penalty <- penalty + 1 / scaled^2
  }
  list(pred_log = at_x$pred_log, nll = at_x$nll, distances = at_x$distances,
       penalty = penalty, value = at_x$nll + penalty)
}

# ---------------------------------------------------------------------------
# Simulation from a plausible truth (for comparisons against the package)
# ---------------------------------------------------------------------------

# A feasible parameter vector: baseline rates around log(1 + 10) (alternately
# below and above it from block to block), slopes
# 0.5-1, tpoints spread evenly over the bins, small effects, warps in
# (-0.1, 0.1). Retries until every boundary distance is positive.
reference_truth <- function(table, degrees, seed = 1) {
  set.seed(seed)
  layout <- reference_layout(table$contexts, table$species, table$ran_levels,
                             table$treatments, degrees)
  for (attempt in 1:50) {
    x <- numeric(nrow(layout))
    for (j in seq_len(nrow(layout))) {
      p <- layout[j, ]
      baseline <- identical(p$kind, "beta") && p$treatment == 1
      if (p$kind == "wfactor") {
        x[j] <- stats::runif(1, -0.1, 0.1)
      } else if (p$component == "Rt") {
        # Alternating low and high blocks, so the curve has visible steps.
        low <- p$block %% 2 == 1
        x[j] <- if (!baseline) {
          stats::rnorm(1, 0, 0.1)
        } else if (low) {
          log(1 + stats::runif(1, 3, 8))
        } else {
          log(1 + stats::runif(1, 12, 30))
        }
      } else if (p$component == "tslope") {
        x[j] <- if (baseline) stats::runif(1, 0.5, 1) else stats::rnorm(1, 0, 0.03)
      } else {
        d <- degrees[p$context, p$species]
        x[j] <- if (baseline) {
          table$bins * p$block / (d + 1) + stats::runif(1, -0.5, 0.5)
        } else {
          stats::rnorm(1, 0, 0.3)
        }
      }
    }
    names(x) <- layout$name
    distances <- reference_distances(table, reference_blocks(table, x, degrees))
    if (all(distances > 0)) return(x)
  }
  stop("no feasible truth found")
}

# Tokens drawn from the curve: each real (ran, context, species, treatment, bin)
# cell gets 1-3 tokens whose Poisson counts sum to a Poisson(exp(Psi) - 1)
# total; cells of ran levels after the first are left empty with probability
# `empty`. Fixed-effect columns keep the type of `fixed_levels`.
reference_simulate_tokens <- function(table, x, degrees, empty = 0, seed = 1) {
  set.seed(seed)
  pred <- reference_predict(table, x, degrees)
  summed <- table$summed
  components <- attr(reference_treatments(table$fixed_levels), "components")
  names(components) <- table$treatments
  real <- which(summed$ran != "none")
  first_ran <- summed$ran[real[1]]
  pieces <- list()
  for (row in real) {
    if (summed$ran[row] != first_ran && stats::runif(1) < empty) next
    n_tokens <- sample(1:3, 1)
    rate <- (exp(pred[row]) - 1) / n_tokens
    piece <- data.frame(count = stats::rpois(n_tokens, rate), bin = summed$bin[row],
                        context = summed$context[row], species = summed$species[row],
                        ran = summed$ran[row], stringsAsFactors = FALSE)
    for (f in names(table$fixed_levels)) {
      levels <- table$fixed_levels[[f]]
      comp <- components[[summed$treatment[row]]]
      reference_level <- reference_ordered_levels(table$fixed_levels)[[f]][1]
      value <- if (f %in% names(comp)) comp[[f]] else reference_level
      piece[[f]] <- if (is.numeric(levels)) as.numeric(value) else value
    }
    pieces[[length(pieces) + 1]] <- piece
  }
  tokens <- do.call(rbind, pieces)
  rownames(tokens) <- NULL
  tokens
}
