# A slow, plain-R reference implementation of the count model ("nb", as the
# model vignette writes it): the table with its exposure (§4, §10), the curve
# transforms (§11.2), the random-effect warps (§7.2), the rate floor and the
# negative-binomial likelihood with exposure (§9.2), the curves' priors
# (§11.3), the held effects' penalty (§15.4) and the inner objective J
# (§13.2). It is the test oracle for the Rust implementation, so it uses no
# package code, loops where a loop reads more plainly, and follows the
# vignette's formulas. Every name starts with `reference_count_`
# (helper-reference.R holds the original model's reference).

reference_count_slope_max <- 8      # S_MAX, per bin
reference_count_tau <- 1e-3         # softness of the rate floor
reference_count_epsilon <- 1e-8     # the floor itself

reference_count_sigmoid <- function(v) 1 / (1 + exp(-v))
reference_count_logit <- function(p) log(p / (1 - p))

# The axis edges (L, U) = (0.5, B + 0.5).
reference_count_edges <- function(bins) c(lower = 0.5, upper = bins + 0.5)

# Points keep g = ceiling(B / 20) bins (the model's spacing at buffer_factor
# 0.05) from each other and from the edges: point k (from 1) of a degree-d
# curve is lower + k g + (B - (d + 1) g) q for q in (0, 1).
reference_count_gap <- function(bins) ceiling(bins * 0.05)
reference_count_point <- function(k, d, q, bins) {
  g <- reference_count_gap(bins)
  0.5 + k * g + (bins - (d + 1) * g) * q
}
reference_count_normalised <- function(k, d, p, bins) {
  g <- reference_count_gap(bins)
  (p - 0.5 - k * g) / (bins - (d + 1) * g)
}

# ---------------------------------------------------------------------------
# Data -> table (model vignette §4, §10)
# ---------------------------------------------------------------------------

# Rows = observed cell keys (ran, context, fixed-effect levels, bin) x species;
# `count` = summed counts of the species' tokens there (0 without tokens);
# `exposure` = distinct cell ids ("cells"), tokens of the species
# ("tokens", refused unless every species has the same number of tokens in
# each cell key), or 1 ("none"). Keys without any token have no rows.
reference_count_table <- function(tokens, fixed_effects = character(),
                                  exposure = c("cells", "tokens", "none")) {
  exposure <- match.arg(exposure)
  key_columns <- c("ran", "context", fixed_effects, "bin")
  key_of <- function(d) do.call(paste, c(unname(as.list(d[key_columns])), sep = "\r"))
  token_key <- key_of(tokens)
  keys <- unique(token_key)
  species <- sort(unique(as.character(tokens$species)), method = "radix")
  rows <- list()
  for (key in keys) {
    in_key <- tokens[token_key == key, , drop = FALSE]
    token_counts <- integer(0)
    for (s in species) token_counts[s] <- sum(in_key$species == s)
    if (exposure == "tokens" && length(unique(token_counts)) != 1L) {
      stop("exposure \"tokens\" needs every species to have the same number of tokens in ",
           "each cell key")
    }
    for (s in species) {
      row <- in_key[1, key_columns, drop = FALSE]
      row$species <- s
      row$count <- sum(in_key$count[in_key$species == s])
      row$exposure <- switch(exposure,
                             cells = length(unique(in_key$cell)),
                             tokens = token_counts[[s]],
                             none = 1)
      rows[[length(rows) + 1L]] <- row
    }
  }
  table <- do.call(rbind, rows)
  names(table)[names(table) == "ran"] <- "animal"
  rownames(table) <- NULL
  table
}

# ---------------------------------------------------------------------------
# Curves: values and unconstrained coordinates (model vignette §5, §11.2)
# ---------------------------------------------------------------------------

# theta = c(theta_R[1..d+1], theta_s[1..d], theta_p[1..d]) -> list(R, s, p).
reference_count_curve_from_theta <- function(theta, degree, bins) {
  d <- degree
  stopifnot(length(theta) == 3 * d + 1)
  edges <- reference_count_edges(bins)
  R <- theta[seq_len(d + 1)]
  s <- numeric(d)
  p <- numeric(d)
  q_previous <- 0
  for (k in seq_len(d)) {
    s[k] <- reference_count_slope_max * reference_count_sigmoid(theta[d + 1 + k])
    q <- q_previous + (1 - q_previous) * reference_count_sigmoid(theta[2 * d + 1 + k])
    p[k] <- reference_count_point(k, d, q, bins)
    q_previous <- q
  }
  list(R = R, s = s, p = p)
}

# The inverse: list(R, s, p) -> theta.
reference_count_theta_from_curve <- function(curve, bins) {
  d <- length(curve$s)
  edges <- reference_count_edges(bins)
  theta <- numeric(3 * d + 1)
  theta[seq_len(d + 1)] <- curve$R
  q_previous <- 0
  for (k in seq_len(d)) {
    theta[d + 1 + k] <- reference_count_logit(curve$s[k] / reference_count_slope_max)
    q <- reference_count_normalised(k, d, curve$p[k], bins)
    theta[2 * d + 1 + k] <- reference_count_logit((q - q_previous) / (1 - q_previous))
    q_previous <- q
  }
  theta
}

# "On a bound" (model vignette §11.2): a slope above 0.99 S_MAX, or two
# consecutive points (the axis ends 0.5 and B + 0.5 included) closer than the
# gap g plus 1e-3 B bins.
reference_count_on_bound <- function(curve, bins) {
  edges <- reference_count_edges(bins)
  gaps <- diff(c(edges[["lower"]], curve$p, edges[["upper"]]))
  any(curve$s > 0.99 * reference_count_slope_max) ||
    any(gaps < reference_count_gap(bins) + 1e-3 * bins)
}

# Psi(x) = R_1 + sum_k (R_{k+1} - R_k) sigma(s_k (x - p_k)), for a vector x.
reference_count_psi <- function(x, curve) {
  value <- rep(curve$R[1], length(x))
  for (k in seq_along(curve$s)) {
    value <- value + (curve$R[k + 1] - curve$R[k]) *
      reference_count_sigmoid(curve$s[k] * (x - curve$p[k]))
  }
  value
}

# ---------------------------------------------------------------------------
# Random effects: the animal's curve (model vignette §7.2)
# ---------------------------------------------------------------------------

# u = c(point =, rate =, slope =).
reference_count_warp <- function(curve, u, bins) {
  edges <- reference_count_edges(bins)
  width <- edges[["upper"]] - edges[["lower"]]
  warped <- curve
  warped$R <- curve$R * exp(u[["rate"]])
  # Point k of a degree-d curve: lower + k g + (width - (d + 1) g) q, with
  # g = ceiling(B / 20), the model's smallest spacing at buffer_factor 0.05.
  gap <- ceiling(bins * 0.05)
  d <- length(curve$s)
  free <- width - (d + 1) * gap
  for (k in seq_along(curve$s)) {
    warped$s[k] <- reference_count_slope_max *
      reference_count_sigmoid(reference_count_logit(curve$s[k] / reference_count_slope_max) +
                                u[["slope"]])
    base <- edges[["lower"]] + k * gap
    q <- (curve$p[k] - base) / free
    warped$p[k] <- base + free * reference_count_sigmoid(reference_count_logit(q) + u[["point"]])
  }
  warped
}

# ---------------------------------------------------------------------------
# Likelihood (model vignette §9.2)
# ---------------------------------------------------------------------------

# log(1 + exp(v)) without overflow.
reference_count_softplus <- function(v) {
  ifelse(v > 30, v + log1p(exp(-v)), log1p(exp(pmin(v, 30))))
}

# r(Psi) = epsilon + tau log(1 + exp(expm1(Psi) / tau)).
reference_count_rate <- function(psi) {
  reference_count_epsilon +
    reference_count_tau * reference_count_softplus(expm1(psi) / reference_count_tau)
}

# log P(Y = y) for Y ~ NB(mean mu = E * rate, size k = E / phi), i.e.
# variance mu + phi mu^2 / E; Poisson(mu) when phi = 0. The vignette's
#   lgamma(y + k) - lgamma(k) - lgamma(y + 1) + k log(k / (k + mu)) + y log(mu / (k + mu))
# is evaluated, for whole y, through the identities
#   lgamma(y + k) - lgamma(k) = y log k + sum_{j = 0}^{y - 1} log1p(j / k),
#   k log(k / (k + mu)) = -k log1p(mu / k),  y log k - y log(k + mu) = -y log1p(mu / k),
# i.e. as sum_j log1p(j / k) - lgamma(y + 1) - (k + y) log1p(mu / k) + y log mu:
# the same number, without the cancellation of two lgamma values near
# 1e9 when k is large (a dispersion held at log phi = -18.4 gives k of 1e8 E).
reference_count_nb_logpmf <- function(y, rate, exposure, phi) {
  n <- max(length(y), length(rate), length(exposure), length(phi))
  y <- rep_len(y, n)
  rate <- rep_len(rate, n)
  exposure <- rep_len(exposure, n)
  phi <- rep_len(phi, n)
  if (any(y < 0 | y != round(y))) stop("counts must be whole numbers >= 0")
  mu <- exposure * rate
  value <- numeric(n)
  poisson <- phi == 0
  value[poisson] <- y[poisson] * log(mu[poisson]) - mu[poisson] - lgamma(y[poisson] + 1)
  nb <- which(!poisson)
  if (length(nb)) {
    k <- exposure[nb] / phi[nb]
    # sum_{j = 0}^{y - 1} log1p(j / k) per row (0 for y = 0)
    owner <- rep(seq_along(nb), y[nb])
    j <- sequence(y[nb]) - 1
    ratio_sum <- numeric(length(nb))
    if (length(owner)) {
      sums <- rowsum(log1p(j / k[owner]), owner)
      ratio_sum[as.integer(rownames(sums))] <- sums[, 1]
    }
    value[nb] <- ratio_sum - lgamma(y[nb] + 1) - (k + y[nb]) * log1p(mu[nb] / k) +
      ifelse(y[nb] == 0, 0, y[nb] * log(mu[nb]))
  }
  value
}

# ---------------------------------------------------------------------------
# The inner objective (model vignette §13.2)
# ---------------------------------------------------------------------------

# The population curve of (context, species, treatment) from the long table
# `curves` (columns context, species, treatment, component in Rt / tslope /
# tpoint, block, value), as list(R, s, p).
reference_count_curve_of <- function(curves, context, species, treatment) {
  at <- which(curves$context == context & curves$species == species &
                curves$treatment == treatment)
  if (!length(at)) stop("no curve for ", context, " / ", species, " / ", treatment)
  component <- curves$component[at]
  block <- curves$block[at]
  value <- curves$value[at]
  values <- function(name) {
    mine <- component == name
    value[mine][order(block[mine])]
  }
  list(R = values("Rt"), s = values("tslope"), p = values("tpoint"))
}

# u of (species, animal) from the table `u` (columns species, animal, point,
# rate, slope); 0 when `u` is NULL or has no such row.
reference_count_u_of <- function(u, species, animal) {
  zero <- c(point = 0, rate = 0, slope = 0)
  if (is.null(u)) return(zero)
  at <- which(u$species == species & u$animal == animal)
  if (length(at) == 0L) return(zero)
  if (length(at) > 1L) stop("u has two rows for ", species, " / ", animal)
  c(point = u$point[at], rate = u$rate[at], slope = u$slope[at])
}

# J = -sum_rows loglik(Y | curves, u, phi) + sum_{species, animal, warp} u^2 / (2 sigma^2)
#     + P(theta) (+ the held effects' penalty).
# rows: data.frame(animal, context, species, treatment, bin, count, exposure);
# curves: long table (see reference_count_curve_of); u: data.frame(species,
# animal, point, rate, slope) or NULL; log_phi: context x species matrix
# (-Inf = Poisson); sigma: species x (point, rate, slope) matrix. A u whose
# sigma is 0 must be 0 and adds nothing. priors: NULL (none) or a list for
# reference_count_prior(). Rows are taken a block (animal, context, species,
# treatment) at a time: one warped curve per block.
reference_count_objective <- function(rows, curves, u, log_phi, sigma,
                                      bins = max(rows$bin), priors = NULL) {
  loglik <- numeric(nrow(rows))
  psi <- numeric(nrow(rows))
  block <- paste(rows$animal, rows$context, rows$species, rows$treatment, sep = "\r")
  population <- list()
  for (key in unique(block)) {
    at <- which(block == key)
    first <- at[1]
    curve_key <- paste(rows$context[first], rows$species[first], rows$treatment[first],
                       sep = "\r")
    if (is.null(population[[curve_key]])) {
      population[[curve_key]] <- reference_count_curve_of(curves, rows$context[first],
                                                          rows$species[first],
                                                          rows$treatment[first])
    }
    animal_curve <- reference_count_warp(population[[curve_key]],
                                         reference_count_u_of(u, rows$species[first],
                                                              rows$animal[first]),
                                         bins)
    psi[at] <- reference_count_psi(rows$bin[at], animal_curve)
    phi <- exp(log_phi[rows$context[first], rows$species[first]])
    loglik[at] <- reference_count_nb_logpmf(rows$count[at], reference_count_rate(psi[at]),
                                            rows$exposure[at], phi)
  }
  penalty <- 0
  if (!is.null(u)) {
    for (j in seq_len(nrow(u))) {
      for (w in c("point", "rate", "slope")) {
        value <- u[[w]][j]
        s <- sigma[u$species[j], w]
        if (s == 0) {
          if (value != 0) stop("u_", w, " of ", u$animal[j], " / ", u$species[j],
                               " must be 0: its sigma is 0")
        } else {
          penalty <- penalty + value^2 / (2 * s^2)
        }
      }
    }
  }
  prior <- if (is.null(priors)) 0 else reference_count_prior(curves, u, bins, priors)
  nll <- -sum(loglik)
  list(value = nll + penalty + prior, nll = nll, penalty = penalty, prior = prior,
       loglik = loglik, psi = psi)
}

# ---------------------------------------------------------------------------
# The curves' priors (model vignette §11.3) and held effects (§15.4)
# ---------------------------------------------------------------------------

# Precision p of the held effects' penalty (p / 2) sum v' A v (§15.4).
reference_count_held_precision <- 1e8

# The curves' priors and the held effects' penalty of every species in
# `curves`, each written from its definition:
#   P_slope  = sum_curves sum_k (theta^s_k + ubar_slope - logit(1 / S_MAX))^2 / (2 sd_slope^2),
#   P_step   = sum_curves sum_k ((R_{k+1} - R_k) e^ubar_rate)^2 / (2 sd_step^2),
#              (P_slope and P_step times (T - h) / T when h of the T
#              treatments' effects are held: each distinct curve counted once),
#   P_effect = sum_contexts sum_i sum_{j != reference} beta_j^2 / (2 sd_effect^2),
#              beta = W^-1 v, v the T treatments' values of unknown i of theta
#              (rates times e^ubar_rate),
#   held     = p / 2 sum_contexts sum_i sum_{j held} beta_j^2, beta = W^-1 v on
#              theta itself,
# with ubar the mean of the species' animals' warps (rows of `u`; 0 without
# u) and theta the unconstrained coordinates of §11.2 (R, slope logits,
# stick-breaking logits). priors: list(slope_sd, step_sd, effect_sd, weights,
# held): an SD of 0 (or NULL) leaves that prior out; weights is W (T x T,
# rows and columns named by treatment, the reference first), needed by the
# effect prior and the held effects; held names the held effects (columns of
# W; NULL or empty: none).
# With h of T effects held, the T curves are T - h distinct ones: the
# share of each curve's slope and step priors (`curve_share` in priors, when
# given, overrides it: for the penalty's gradient, taken without `held`).
reference_count_curve_share <- function(priors) {
  if (!is.null(priors$curve_share)) return(priors$curve_share)
  weights <- priors$weights
  if (length(priors$held) && !is.null(weights)) {
    (nrow(weights) - length(priors$held)) / nrow(weights)
  } else {
    1
  }
}

reference_count_prior <- function(curves, u, bins, priors) {
  used <- function(sd) !is.null(sd) && sd > 0
  weights <- priors$weights
  held <- priors$held
  share <- reference_count_curve_share(priors)
  total <- 0
  for (species in unique(curves$species)) {
    mine <- if (is.null(u)) NULL else u[u$species == species, , drop = FALSE]
    ubar_rate <- if (is.null(mine) || nrow(mine) == 0L) 0 else mean(mine$rate)
    ubar_slope <- if (is.null(mine) || nrow(mine) == 0L) 0 else mean(mine$slope)
    part <- curves[curves$species == species, , drop = FALSE]
    keys <- unique(part[c("context", "treatment")])
    theta <- list()
    for (i in seq_len(nrow(keys))) {
      curve <- reference_count_curve_of(part, keys$context[i], species, keys$treatment[i])
      d <- length(curve$s)
      theta[[paste(keys$context[i], keys$treatment[i], sep = "\r")]] <-
        reference_count_theta_from_curve(curve, bins)
      if (used(priors$slope_sd) && d > 0) {
        slope_logits <- reference_count_theta_from_curve(curve, bins)[d + 1 + seq_len(d)]
        centre <- reference_count_logit(1 / reference_count_slope_max)
        total <- total + share * sum((slope_logits + ubar_slope - centre)^2) /
          (2 * priors$slope_sd^2)
      }
      if (used(priors$step_sd) && d > 0) {
        total <- total + share * sum((diff(curve$R) * exp(ubar_rate))^2) / (2 * priors$step_sd^2)
      }
    }
    effects <- used(priors$effect_sd) && !is.null(weights) && nrow(weights) > 1L
    holding <- length(held) > 0L && !is.null(weights)
    if (!effects && !holding) next
    treatments <- rownames(weights)
    for (context in unique(keys$context)) {
      rows <- lapply(treatments, function(t) theta[[paste(context, t, sep = "\r")]])
      if (any(vapply(rows, is.null, TRUE))) stop("context ", context, " lacks a treatment's curve")
      m <- length(rows[[1]])
      d <- (m - 1) / 3
      for (i in seq_len(m)) {
        v <- vapply(rows, function(theta) theta[i], 0)
        if (effects) {
          scale <- if (i <= d + 1) exp(ubar_rate) else 1
          beta <- solve(weights, v * scale)
          total <- total + sum(beta[-1]^2) / (2 * priors$effect_sd^2)
        }
        if (holding) {
          beta <- stats::setNames(solve(weights, v), colnames(weights))
          total <- total + reference_count_held_precision / 2 * sum(beta[held]^2)
        }
      }
    }
  }
  total
}

# ---------------------------------------------------------------------------
# Finite-difference gradient (for checking analytic gradients)
# ---------------------------------------------------------------------------

# Central differences of f at x with relative step `step`.
reference_count_numeric_gradient <- function(f, x, step = 1e-5) {
  gradient <- numeric(length(x))
  for (i in seq_along(x)) {
    h <- step * max(1, abs(x[i]))
    up <- x
    down <- x
    up[i] <- x[i] + h
    down[i] <- x[i] - h
    gradient[i] <- (f(up) - f(down)) / (2 * h)
  }
  stats::setNames(gradient, names(x))
}

# The optimiser's coordinates as one named vector: theta of every curve
# ("theta_<context>_<species>_<treatment>_<R|s|p><k>"), rho = log phi of every
# (context, species) with phi > 0 ("rho_<context>_<species>"), and every u
# whose sigma is not 0 ("u_<warp>_<animal>_X_<species>").
reference_count_pack <- function(curves, u, log_phi, sigma, bins) {
  x <- numeric(0)
  keys <- unique(curves[c("context", "species", "treatment")])
  for (i in seq_len(nrow(keys))) {
    curve <- reference_count_curve_of(curves, keys$context[i], keys$species[i], keys$treatment[i])
    d <- length(curve$s)
    theta <- reference_count_theta_from_curve(curve, bins)
    names(theta) <- paste0("theta_", keys$context[i], "_", keys$species[i], "_",
                           keys$treatment[i], "_", reference_count_theta_labels(d))
    x <- c(x, theta)
  }
  for (context in rownames(log_phi)) {
    for (species in colnames(log_phi)) {
      if (is.finite(log_phi[context, species])) {
        x[paste0("rho_", context, "_", species)] <- log_phi[context, species]
      }
    }
  }
  for (j in seq_len(if (is.null(u)) 0L else nrow(u))) {
    for (w in c("point", "rate", "slope")) {
      if (sigma[u$species[j], w] != 0) {
        x[paste0("u_", w, "_", u$animal[j], "_X_", u$species[j])] <- u[[w]][j]
      }
    }
  }
  x
}

# R1..R{d+1}, s1..sd, p1..pd.
reference_count_theta_labels <- function(d) {
  c(sprintf("R%d", seq_len(d + 1)), sprintf("s%d", seq_len(d)), sprintf("p%d", seq_len(d)))
}

# The inverse of reference_count_pack(), filling a copy of the templates.
reference_count_unpack <- function(x, curves, u, log_phi, bins) {
  keys <- unique(curves[c("context", "species", "treatment")])
  value <- curves$value
  for (i in seq_len(nrow(keys))) {
    at <- curves$context == keys$context[i] & curves$species == keys$species[i] &
      curves$treatment == keys$treatment[i]
    d <- sum(at & curves$component == "tslope")
    prefix <- paste0("theta_", keys$context[i], "_", keys$species[i], "_", keys$treatment[i], "_")
    theta <- x[paste0(prefix, reference_count_theta_labels(d))]
    curve <- reference_count_curve_from_theta(unname(theta), d, bins)
    for (component in c("Rt", "tslope", "tpoint")) {
      rows <- which(at & curves$component == component)
      rows <- rows[order(curves$block[rows])]
      value[rows] <- switch(component, Rt = curve$R, tslope = curve$s, tpoint = curve$p)
    }
  }
  curves$value <- value
  for (context in rownames(log_phi)) {
    for (species in colnames(log_phi)) {
      name <- paste0("rho_", context, "_", species)
      if (name %in% names(x)) log_phi[context, species] <- x[[name]]
    }
  }
  for (j in seq_len(if (is.null(u)) 0L else nrow(u))) {
    for (w in c("point", "rate", "slope")) {
      name <- paste0("u_", w, "_", u$animal[j], "_X_", u$species[j])
      if (name %in% names(x)) u[[w]][j] <- x[[name]]
    }
  }
  list(curves = curves, u = u, log_phi = log_phi)
}

# Gradient of J in the optimiser's coordinates (see reference_count_pack) by
# central finite differences.
reference_count_gradient <- function(rows, curves, u, log_phi, sigma, bins = max(rows$bin),
                                     step = 1e-5) {
  x <- reference_count_pack(curves, u, log_phi, sigma, bins)
  f <- function(x) {
    parts <- reference_count_unpack(x, curves, u, log_phi, bins)
    reference_count_objective(rows, parts$curves, parts$u, parts$log_phi, sigma, bins)$value
  }
  reference_count_numeric_gradient(f, x, step)
}

# The gradient of the held effects' penalty (p / 2) sum_{j held} beta_j^2,
# beta = W^-1 v, in the curves' coordinates theta (named as by
# reference_count_pack): d / d v_t = p sum_{j held} beta_j [W^-1]_{j, t}.
# Analytic because the penalty is of order p = 1e8 away from the
# constraint, where finite differences of J would lose ~1e-8 of it to
# rounding. priors: as for reference_count_prior().
reference_count_held_gradient <- function(curves, bins, priors) {
  weights <- priors$weights
  inverse <- solve(weights)
  held <- match(priors$held, colnames(weights))
  gradient <- numeric(0)
  for (species in unique(curves$species)) {
    part <- curves[curves$species == species, , drop = FALSE]
    for (context in unique(part$context)) {
      theta <- lapply(rownames(weights), function(t) {
        reference_count_theta_from_curve(reference_count_curve_of(part, context, species, t), bins)
      })
      m <- length(theta[[1]])
      labels <- reference_count_theta_labels((m - 1) / 3)
      for (i in seq_len(m)) {
        v <- vapply(theta, function(x) x[i], 0)
        beta <- drop(inverse %*% v)
        for (t in seq_along(v)) {
          name <- paste0("theta_", context, "_", species, "_", rownames(weights)[t], "_",
                         labels[i])
          gradient[name] <- reference_count_held_precision *
            sum(beta[held] * inverse[held, t])
        }
      }
    }
  }
  gradient
}

# Central differences at steps h and h / 2 combined by Richardson
# extrapolation, (4 D(h / 2) - D(h)) / 3, whose error is O(h^4): accurate to
# about 1e-9 relative with h = 1e-3, where plain central differences trade
# truncation (h^2) against rounding (1 / h).
reference_count_richardson_gradient <- function(f, x, step = 1e-3) {
  central <- function(i, h) {
    up <- x
    down <- x
    up[i] <- x[i] + h
    down[i] <- x[i] - h
    (f(up) - f(down)) / (2 * h)
  }
  gradient <- numeric(length(x))
  for (i in seq_along(x)) {
    h <- step * max(1, abs(x[i]))
    gradient[i] <- (4 * central(i, h / 2) - central(i, h)) / 3
  }
  stats::setNames(gradient, names(x))
}
