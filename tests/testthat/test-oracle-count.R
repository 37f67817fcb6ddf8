# The independent oracle, connected: the Rust count objective J and its
# gradient (the test hook count_objective_rust(), in the optimiser's
# coordinates) against the plain-R reference of helper-reference-count.R, at
# the estimate and at random points around it, on small simulated models of
# every kind the fit offers. The reference builds its own table from the
# tokens, its own treatments and weight matrix from the factors (model
# vignette §3), decodes the coordinates itself (§11.2) and differentiates
# its own J by finite differences: nothing but the coordinates' order and
# the fitted standard deviations comes from the package.

# Treatment of each token and the weight matrix, by the rules of model
# vignette §3 (no time series): a treatment is named by its non-reference
# levels joined with ":" in factor order, the reference by all its levels;
# the order is the reference, then by the number of non-reference factors,
# then by which factors (the first factor's first), the last factor's
# levels varying fastest; W[p, i] = 1 when, for every factor, i is at the
# reference or p has i's level.
oracle_treatments <- function(tokens, factors) {
  levels <- stats::setNames(lapply(factors, function(f) levels(tokens[[f]])), factors)
  combos <- unique(tokens[factors])
  index <- vapply(factors, function(f) match(as.character(combos[[f]]), levels[[f]]), integer(nrow(combos)))
  index <- matrix(index, nrow(combos), dimnames = list(NULL, factors))
  name <- apply(index, 1, function(k) {
    non_reference <- k > 1L
    chosen <- if (any(non_reference)) which(non_reference) else seq_along(k)
    paste(vapply(chosen, function(f) levels[[f]][k[f]], ""), collapse = ":")
  })
  non_reference <- index > 1L
  keys <- c(list(rowSums(non_reference)), lapply(seq_along(factors), function(f) -non_reference[, f]),
            lapply(seq_along(factors), function(f) index[, f]))
  ord <- do.call(order, keys)
  index <- index[ord, , drop = FALSE]
  name <- name[ord]
  weights <- matrix(0, length(name), length(name), dimnames = list(name, name))
  for (p in seq_along(name)) {
    for (i in seq_along(name)) {
      weights[p, i] <- as.numeric(all(index[i, ] == 1L | index[p, ] == index[i, ]))
    }
  }
  token_index <- vapply(factors, function(f) match(as.character(tokens[[f]]), levels[[f]]),
                        integer(nrow(tokens)))
  token_index <- matrix(token_index, nrow(tokens))
  token_name <- name[match(apply(token_index, 1, paste, collapse = "\r"),
                           apply(index, 1, paste, collapse = "\r"))]
  list(names = name, weights = weights, of_token = token_name)
}

# One small model: simulated tokens and its fit. spec: seed, genes, contexts,
# bins, animals (per group), nested (animals in genotype; hemisphere within
# when `within`), exposure, dispersion (NA: estimated), priors (slope, step,
# effect SDs), held (trtKO).
oracle_model <- function(spec) {
  cells <- if (spec$exposure == "none") 1L else 2L
  if (spec$nested) {
    design <- wisp_design(between = list(genotype = c("WT", "KO")),
                          within = if (spec$within) list(hemisphere = c("left", "right")) else list(),
                          animals.per.group = spec$animals)
    tokens <- wisp_simulate(design = design, n.genes = spec$genes, n.contexts = spec$contexts,
                            n.bins = spec$bins, cells.per.bin = cells, cell.ids = TRUE,
                            seed = spec$seed, random.sd = c(point = 0.2, rate = 0.15, slope = 0.2))
  } else {
    tokens <- wisp_simulate(n.genes = spec$genes, n.contexts = spec$contexts,
                            n.random = spec$animals, n.bins = spec$bins, cells.per.bin = cells,
                            cell.ids = TRUE, seed = spec$seed,
                            random.sd = c(point = 0.2, rate = 0.15, slope = 0.2))
  }
  settings <- list(exposure = spec$exposure, slope_prior_sd = spec$priors[1],
                   step_prior_sd = spec$priors[2], effect_prior_sd = spec$priors[3])
  if (!is.na(spec$dispersion)) settings$dispersion <- spec$dispersion
  if (!is.null(spec$held)) settings$trtKO <- spec$held
  fit <- suppressWarnings(wisp(tokens, model.settings = settings, max.fork = 1, verbose = FALSE))
  list(tokens = tokens, fit = fit, spec = spec)
}

# The reference's problem for one species of a model: its rows, templates
# of its curves, u and log phi, sigma, priors, and the map from the hook's
# coordinate names to the reference's.
oracle_problem <- function(model, species_index) {
  fit <- model$fit
  tokens <- model$tokens
  spec <- model$spec
  gene <- fit$grouping.variables$species.lvls[species_index + 1L]
  contexts <- fit$grouping.variables$context.lvls
  animals <- setdiff(fit$grouping.variables$ran.lvls, "none")
  factors <- setdiff(names(tokens), c("count", "bin", "context", "species", "ran", "cell"))
  treatments <- oracle_treatments(tokens, factors)
  tokens$treatment <- treatments$of_token
  rows <- reference_count_table(tokens[tokens$species == gene, ], "treatment",
                                exposure = spec$exposure)
  bins <- max(tokens$bin)
  degrees <- stats::setNames(fit$degrees[contexts, gene, drop = TRUE], contexts)
  curves <- do.call(rbind, lapply(contexts, function(context) {
    d <- degrees[[context]]
    do.call(rbind, lapply(treatments$names, function(t) {
      data.frame(context = context, species = gene, treatment = t,
                 component = c(rep("Rt", d + 1), rep("tslope", d), rep("tpoint", d)),
                 block = c(seq_len(d + 1), seq_len(d), seq_len(d)), value = NA_real_,
                 stringsAsFactors = FALSE)
    }))
  }))
  u <- data.frame(species = gene, animal = animals, point = 0, rate = 0, slope = 0,
                  stringsAsFactors = FALSE)
  sigma <- fit$random.sd[gene, , drop = FALSE]
  # A fixed dispersion is held at log phi, floored at -18.4 (0: Poisson,
  # model vignette §9.2); an estimated one is a coordinate.
  fixed <- if (is.na(spec$dispersion)) NA else max(log(spec$dispersion), -18.4)
  log_phi <- matrix(fixed, length(contexts), 1, dimnames = list(contexts, gene))
  priors <- list(slope_sd = spec$priors[1], step_sd = spec$priors[2], effect_sd = spec$priors[3],
                 weights = treatments$weights, held = spec$held)
  list(gene = gene, contexts = contexts, animals = animals, treatments = treatments,
       rows = rows, bins = bins, degrees = degrees, curves = curves, u = u, sigma = sigma,
       log_phi = log_phi, priors = priors)
}

# "theta[curve,i]" (curve = c T + t, from 0), "rho[c]", "u[r,w]" -> the
# reference's names (see reference_count_pack).
oracle_names <- function(problem, names) {
  t_count <- length(problem$treatments$names)
  vapply(names, function(name) {
    n <- as.integer(regmatches(name, gregexpr("[0-9]+", name))[[1]])
    if (startsWith(name, "theta[")) {
      context <- problem$contexts[n[1] %/% t_count + 1L]
      treatment <- problem$treatments$names[n[1] %% t_count + 1L]
      label <- reference_count_theta_labels(problem$degrees[[context]])[n[2] + 1L]
      paste0("theta_", context, "_", problem$gene, "_", treatment, "_", label)
    } else if (startsWith(name, "rho[")) {
      paste0("rho_", problem$contexts[n[1] + 1L], "_", problem$gene)
    } else {
      warp <- sub("^u\\[[0-9]+,([a-z]+)\\]$", "\\1", name)
      paste0("u_", warp, "_", problem$animals[n[1] + 1L], "_X_", problem$gene)
    }
  }, "", USE.NAMES = FALSE)
}

# The reference's J at the hook's coordinates x (named by
# `reference_names`), and its gradient: central differences with Richardson
# extrapolation of J without the held effects' penalty, plus that penalty's
# analytic gradient (finite differences would lose its rounding, ~1e-16 of
# 1e7, over the step).
oracle_reference <- function(problem, reference_names) {
  unpack <- function(x) {
    parts <- reference_count_unpack(stats::setNames(x, reference_names), problem$curves,
                                    problem$u, problem$log_phi, problem$bins)
    if (anyNA(parts$curves$value) || anyNA(parts$log_phi)) stop("x does not set every unknown")
    parts
  }
  free <- replace(problem$priors, "held", list(NULL))
  free$curve_share <- reference_count_curve_share(problem$priors)
  unheld <- function(x) {
    parts <- unpack(x)
    reference_count_objective(problem$rows, parts$curves, parts$u, parts$log_phi, problem$sigma,
                              bins = problem$bins, priors = free)$value
  }
  held <- length(problem$priors$held) > 0L
  list(
    value = function(x) {
      parts <- unpack(x)
      reference_count_objective(problem$rows, parts$curves, parts$u, parts$log_phi,
                                problem$sigma, bins = problem$bins, priors = problem$priors)$value
    },
    gradient = function(x) {
      gradient <- reference_count_richardson_gradient(unheld, x)
      if (held) {
        penalty <- reference_count_held_gradient(unpack(x)$curves, problem$bins, problem$priors)
        theta <- startsWith(reference_names, "theta_")
        gradient[theta] <- gradient[theta] + penalty[reference_names[theta]]
      }
      unname(gradient)
    }
  )
}

# A random point around the estimate x: every coordinate moved by N(0, sd^2),
# the block rates kept at 0.25 or more. The fit keeps them at 0 or more
# (model vignette §11.2); below about 0.02 the rate floor bends on a scale
# of 1e-3, finer than the reference's finite-difference step.
oracle_point <- function(x, names, sd) {
  moved <- x + stats::rnorm(length(x), sd = sd)
  rate <- grepl("_R[0-9]+$", names)
  moved[rate] <- pmax(moved[rate], 0.25)
  moved
}

# 24 models: seeds 101.., 1-2 genes and contexts, 15-30 bins, 2-4 animals
# per group; crossed (hemisphere within animal) and nested (genotype between
# animals, hemisphere within or not); every exposure; estimated and fixed
# dispersions (Poisson among them); priors at their defaults, off, and
# mixed; some with held effects.
oracle_specs <- function() {
  n <- 24L
  exposure <- rep(c("cells", "tokens", "none"), length.out = n)
  dispersion <- rep(c(NA, NA, 0.1, NA, 0, 0.02), length.out = n)
  priors <- rep(list(c(2, 2, 1), c(0, 0, 0), c(1.5, 0, 0.7), c(0, 1, 0), c(0, 0, 2)),
                length.out = n)
  nested <- rep(c(FALSE, TRUE, TRUE, FALSE), length.out = n)
  within <- rep(c(TRUE, TRUE, FALSE), length.out = n)
  lapply(seq_len(n), function(i) {
    spec <- list(seed = 100L + i, genes = 1L + (i %% 2L), contexts = 1L + (i %/% 3L) %% 2L,
                 bins = c(15L, 20L, 24L, 30L)[(i %% 4L) + 1L],
                 animals = if (nested[i]) 2L + (i %% 2L) else 2L + (i %% 3L),
                 nested = nested[i], within = within[i], exposure = exposure[i],
                 dispersion = dispersion[i], priors = priors[[i]], held = NULL)
    if (i %in% c(6L, 16L)) spec$held <- if (spec$nested) "KO" else "right"
    if (i == 11L && spec$nested && spec$within) spec$held <- "KO:right"
    spec
  })
}

test_that("the Rust count objective and gradient match the plain-R reference at random points", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  set.seed(20261201)
  checked <- list(models = 0L, points = 0L, coordinates = 0L, value = 0, gradient = 0)
  kinds <- list(exposure = character(), dispersion = numeric(), nested = logical(),
                priors = character(), held = character())
  for (spec in oracle_specs()) {
    model <- oracle_model(spec)
    fit <- model$fit
    label <- paste0("seed ", spec$seed)
    # The treatments and W by the vignette's rules are the fit's.
    treatments <- oracle_treatments(model$tokens, setdiff(names(model$tokens),
                                                          c("count", "bin", "context", "species",
                                                            "ran", "cell")))
    expect_identical(treatments$weights, unclass(fit$weight.matrix) + 0, label = label)
    for (s in seq_along(fit$grouping.variables$species.lvls) - 1L) {
      problem <- oracle_problem(model, s)
      at <- wispack:::count_objective_rust(fit$plan, s, NULL)
      reference_names <- oracle_names(problem, at$names)
      expect_false(anyDuplicated(reference_names) > 0, label = label)
      # The hook's u are the reported random effects, so the animals' order is right.
      u_names <- grepl("^u_", reference_names)
      reported <- sub("^u_", "wfactor_", reference_names[u_names])
      expect_identical(at$x[u_names], unname(fit$fitted.parameters[reported]), label = label)
      reference <- oracle_reference(problem, reference_names)
      n <- length(at$x)
      # The estimate, and one random point: nearby or further out by turns.
      spread <- c(0.15, 0.3)[(spec$seed + s) %% 2L + 1L]
      points <- list(at$x, oracle_point(at$x, reference_names, spread))
      for (k in seq_along(points)) {
        x <- points[[k]]
        rust <- if (k == 1L) at else wispack:::count_objective_rust(fit$plan, s, x)
        where <- paste(label, "species", s, "point", k)
        value <- reference$value(x)
        expect_equal(rust$value, value, tolerance = 1e-8, label = where)
        checked$value <- max(checked$value, abs(rust$value - value) / abs(value))
        if (k == 1L) next # the gradient is ~0 at the estimate: see the random points
        gradient <- reference$gradient(x)
        scale <- pmax(abs(gradient), 1)
        error <- max(abs(rust$gradient - gradient) / scale)
        expect_lt(error, 1e-6, label = paste(where, "gradient"))
        checked$gradient <- max(checked$gradient, error)
        checked$points <- checked$points + 1L
        checked$coordinates <- checked$coordinates + n
      }
    }
    checked$models <- checked$models + 1L
    kinds$exposure <- c(kinds$exposure, fit$exposure$rule)
    kinds$dispersion <- c(kinds$dispersion, spec$dispersion)
    kinds$nested <- c(kinds$nested, spec$nested)
    kinds$priors <- c(kinds$priors, paste(spec$priors, collapse = "/"))
    kinds$held <- c(kinds$held, if (is.null(spec$held)) "none" else spec$held)
  }
  # Every kind was covered.
  expect_setequal(kinds$exposure, c("cells", "tokens", "none"))
  expect_true(all(c(NA, 0, 0.1) %in% kinds$dispersion))
  expect_setequal(kinds$nested, c(TRUE, FALSE))
  expect_true(all(c("2/2/1", "0/0/0") %in% kinds$priors))
  expect_gt(sum(kinds$held != "none"), 0)
  expect_gte(checked$models, 20L)
  if (nzchar(Sys.getenv("WISPACK_ORACLE_REPORT"))) {
    message(sprintf("oracle: %d models, %d random points, %d coordinates; largest relative ",
                    checked$models, checked$points, checked$coordinates),
            sprintf("value error %.2g, gradient error %.2g", checked$value, checked$gradient))
  }
})
