# A slow, plain-R reference implementation of the count model ("nb", as the
# model vignette writes it): the table with its exposure (§4, §10), the curve
# transforms (§11.2), the random-effect warps (§7.2), the rate floor and the
# negative-binomial likelihood with exposure (§9.2) and the inner objective J
# (§13.2, without the priors of §11.3). It is the test oracle for the Rust
# implementation, so it uses no package code, loops where a loop reads more
# plainly, and follows the vignette's formulas. Every name starts with
# `reference_count_` (helper-reference.R holds the original model's
# reference).

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

# Psi(x) = R_1 + sum_k (R_{k+1} - R_k) sigma(s_k (x - p_k)).
reference_count_psi <- function(x, curve) {
  value <- numeric(length(x))
  for (i in seq_along(x)) {
    value[i] <- curve$R[1]
    for (k in seq_along(curve$s)) {
      value[i] <- value[i] + (curve$R[k + 1] - curve$R[k]) *
        reference_count_sigmoid(curve$s[k] * (x[i] - curve$p[k]))
    }
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
# variance mu + phi mu^2 / E; Poisson(mu) when phi = 0.
reference_count_nb_logpmf <- function(y, rate, exposure, phi) {
  n <- max(length(y), length(rate), length(exposure), length(phi))
  y <- rep_len(y, n)
  rate <- rep_len(rate, n)
  exposure <- rep_len(exposure, n)
  phi <- rep_len(phi, n)
  value <- numeric(n)
  for (i in seq_len(n)) {
    mu <- exposure[i] * rate[i]
    if (phi[i] == 0) {
      value[i] <- y[i] * log(mu) - mu - lgamma(y[i] + 1)
    } else {
      k <- exposure[i] / phi[i]
      value[i] <- lgamma(y[i] + k) - lgamma(k) - lgamma(y[i] + 1) +
        k * log(k / (k + mu)) + y[i] * log(mu / (k + mu))
    }
  }
  value
}

# ---------------------------------------------------------------------------
# The inner objective (model vignette §13.2, without the priors)
# ---------------------------------------------------------------------------

# The population curve of (context, species, treatment) from the long table
# `curves` (columns context, species, treatment, component in Rt / tslope /
# tpoint, block, value), as list(R, s, p).
reference_count_curve_of <- function(curves, context, species, treatment) {
  at <- curves$context == context & curves$species == species & curves$treatment == treatment
  if (!any(at)) stop("no curve for ", context, " / ", species, " / ", treatment)
  part <- curves[at, , drop = FALSE]
  values <- function(component) {
    rows <- part[part$component == component, , drop = FALSE]
    rows$value[order(rows$block)]
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

# J = -sum_rows loglik(Y | curves, u, phi) + sum_{species, animal, warp} u^2 / (2 sigma^2).
# rows: data.frame(animal, context, species, treatment, bin, count, exposure);
# curves: long table (see reference_count_curve_of); u: data.frame(species,
# animal, point, rate, slope) or NULL; log_phi: context x species matrix
# (-Inf = Poisson); sigma: species x (point, rate, slope) matrix. A u whose
# sigma is 0 must be 0 and adds nothing.
reference_count_objective <- function(rows, curves, u, log_phi, sigma,
                                      bins = max(rows$bin)) {
  loglik <- numeric(nrow(rows))
  psi <- numeric(nrow(rows))
  for (i in seq_len(nrow(rows))) {
    row <- rows[i, ]
    curve <- reference_count_curve_of(curves, row$context, row$species, row$treatment)
    animal_curve <- reference_count_warp(curve, reference_count_u_of(u, row$species, row$animal),
                                         bins)
    psi[i] <- reference_count_psi(row$bin, animal_curve)
    phi <- exp(log_phi[row$context, row$species])
    loglik[i] <- reference_count_nb_logpmf(row$count, reference_count_rate(psi[i]),
                                           row$exposure, phi)
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
  nll <- -sum(loglik)
  list(value = nll + penalty, nll = nll, penalty = penalty, loglik = loglik, psi = psi)
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
      curves$value[rows] <- switch(component, Rt = curve$R, tslope = curve$s, tpoint = curve$p)
    }
  }
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
