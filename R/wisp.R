#' Fit a warped-sigmoid Poisson-process mixed-effects model
#'
#' Fits a WSPmm to long-format spatial count data: per context and gene, a
#' poly-sigmoid curve over the spatial bins whose block rates, transition
#' slopes and transition points depend on the fixed effects, warped per
#' random level (e.g. per mouse). The number of transitions of each curve is
#' detected from the data first (likelihood-ratio change points, optionally
#' tuned by a grid search), or fixed with `degrees`. The fixed effects are
#' then tested: by Wald tests from the fit, with profile likelihood for the
#' transition-point effects whose curvature misleads (the default,
#' `statistics`), or from bootstrap replicates with `bootstraps.num > 0`.
#' These tests kept their promise (95 % coverage, 5 % false positives) in the
#' calibration benchmarks from 5 animals per group on every simulated
#' design of well-expressed genes; with fewer animals, or for genes with
#' fewer than 10 molecules per bin and animal (most genes of a whole panel),
#' the tests of transition points were anti-conservative, and `wisp()` says
#' so with a warning of class `wisp_design_warning` that quotes the
#' benchmark's figures (`vignette("inference", package = "wispack")`).
#'
#' The signature and argument order are those of the original `wispack`
#' (v2.4), so existing calls keep working; `degrees` is new. MCMC is not
#' offered: use the bootstrap.
#'
#' @section Likelihoods:
#' `model.settings$likelihood` chooses the model (the model vignette,
#' `vignette("model", package = "wispack")`, defines both):
#' - `"nb"` (default), the count likelihood. The summed count of a gene in
#'   an observed cell (animal × context × treatment × bin with any token)
#'   is negative binomial with mean exposure × rate and variance mean +
#'   dispersion × mean² / exposure; a gene with no token there counts 0, and
#'   a cell with no token at all is missing (no row), so unmeasured bins
#'   create no transition. The rate is `exp(Psi) - 1`, kept smoothly above
#'   0. Dispersions (per context and gene) are estimated by maximum
#'   likelihood, or fixed with `model.settings$dispersion` (0: Poisson). Each animal's curves are warped by three random effects
#'   (point, rate, slope) drawn from normal distributions whose standard
#'   deviations (per gene) are estimated by a REML-type Laplace criterion;
#'   a single animal, or a gene without transitions for point and slope, has
#'   none. The population curve is the fixed-effect curve.
#' - `"original"`, the original package's objective, kept for reproducing
#'   its results: a log(1 + count) density with zero counts ignored,
#'   population ("none") pseudo-rows, moment dispersion, free warping
#'   factors, a barrier penalty anchored at the start, and L-BFGS with the
#'   relative-change stopping rule.
#'
#' @section Exposure:
#' Under `"nb"`, `model.settings$exposure` says what a count is relative to:
#' `"cells"` (distinct cell ids in the cell, from the `cell` role of
#' `variables` or a column named `cell`), `"tokens"` (the gene's tokens in
#' the cell: right when the data list every cell × gene pair, zeros
#' included), `"given"` (the summed `exposure` column of a binned table from
#' [wisp_bin()], or of the column the `exposure` role of `variables` names:
#' each row's cells, or their summed sizes), `"none"` (a rate per bin: cell
#' density then reads as expression), or `"auto"` (default: the exposure
#' column when there is one, else cells with a cell id, else tokens when the
#' data list every cell × gene pair, else none, with a message). Per-token
#' exposure is refused with an explanation for data without zero counts, and
#' `"cells"` or `"tokens"` for data with an exposure column. A binned table
#' and the tokens of the same cells give the same fit.
#'
#' @section Constraints and convergence:
#' Under `"nb"`, transition points lie inside the bin axis, in order, at
#' least `ceiling(bins * buffer_factor)` bins from each other and from the
#' ends; slopes lie in (0, 8) per bin (8 rises from 2 % to 98 % within one
#' bin) with a weak normal prior on their logit scale (`slope_prior_sd`,
#' centred at a slope of 1 per bin) that keeps weakly identified slopes off
#' that bound; block rates are at least 0, and each step between the block
#' rates of a curve has a weak normal prior centred at 0 (`step_prior_sd`),
#' which keeps the block between two transitions pulled together from
#' running off to any height (the counts then inform only a bump, not its
#' block rate); and each treatment effect of a curve's unknowns has a weak
#' normal prior centred at 0 on the unconstrained scale (`effect_prior_sd`:
#' log rate, and the logits of slopes and of the points' positions), which
#' keeps a treatment's curve near the others where the counts cannot tell
#' them apart (e.g. the point of a transition whose step is tiny) instead of
#' anywhere along a flat ridge. Where the counts inform an unknown, the
#' priors change its estimate negligibly; the model vignette ("Priors")
#' defines them, and `benchmarks/recovery.R` measures their effect. Estimates on a bound are counted
#' in `fit.diagnostics$on.bound`; estimates the data do not inform (e.g. the
#' transitions of a gene never seen) are `NaN`. Each gene is fitted on its
#' own (in parallel with `max.fork > 1`) by damped Newton steps with the
#' exact Hessian. A fit has converged when every gradient entry times its
#' parameter's standard error is at most 1e-4 and the Newton decrement is at
#' most 1e-10 relative to the objective (`fit.diagnostics$max.gradient`
#' reports the first), and the variances have settled; `control =
#' wisp_control()` sets these limits and the most iterations (see
#' [wisp_control()]).
#'
#' @param count.data A binned table from [wisp_bin()] (one row per gene and
#'   group of cells in a bin, with the summed count and the exposure), or a
#'   data.frame with one row per token (e.g. one gene in one cell): a
#'   count, a spatial bin, and columns for context, species (gene), random
#'   level and fixed effects. Bins number consecutive positions 1, 2, ...,
#'   B; [wisp_bin()] makes them from per-cell positions such as depths in
#'   micrometres. Bin values in a common step above 1 (25, 50, ...) are an
#'   error, and bins without tokens draw a warning. A column `cell` (the
#'   cells' ids, as `wisp_bin(format = "tokens")` makes it) is not a fixed
#'   effect, nor are a binned table's `exposure` and `cells`.
#' @param variables Named list mapping roles to column names: `count`, `bin`,
#'   `context`, `species`, `ran`, `timeseries`, `fixedeffects`, `cell` (a
#'   cell id per token, for per-cell exposure; default: a column named
#'   `cell` when there is one), `exposure` (each row's exposure, for data
#'   summed over cells; default: the `exposure` column of a binned table).
#'   Unmapped
#'   roles use the column of the same name. A role mapped to a column that
#'   `count.data` does not have is an error that names the closest columns.
#'   An unmapped `context`, `species` or `ran` role whose column is absent
#'   becomes a constant (one context, gene or random level, named by the
#'   role), and `wisp()` says so: with a message (with `verbose = TRUE`), or
#'   with a warning when a
#'   column that looks like it holds the role (e.g. `mouse` or `animal` for
#'   `ran`) was taken as a fixed effect. Without `fixedeffects`, every column
#'   not used by another role is a fixed effect (with `verbose = TRUE`,
#'   `wisp()` names them and their levels; `print(fit)` shows them): set
#'   `fixedeffects` to choose them, e.g. when the data keep a slice or cell
#'   number. Errors about the treatments name the fixed effects, their
#'   levels and those that look like ids. See "Levels" for the order
#'   of levels and the reference level.
#' @param fit_only Only fit; no bootstrap or statistics.
#' @param use.median Report the medians of the bootstrap replicates as the
#'   estimates instead of the full-data fit (parameters the resampling scheme
#'   does not redraw keep their full-data estimates).
#' @param bootstraps.num Number of bootstrap replicates (0: none).
#' @param converged.resamples.only Use only converged replicates for the
#'   statistics.
#' @param max.fork Number of worker processes for the grid search and the
#'   bootstrap (on Windows, which has no fork: threads for the grid search,
#'   and the bootstrap on [bs_batch()]'s default backend there).
#' @param verbose Print progress messages (the stages, and how many
#'   change-point structures and genes have been fitted), and report
#'   progress through progressr: see "Progress".
#' @param model.settings Named list of model settings; see Details.
#' @param MCMC.settings Accepted for compatibility, at the original's
#'   defaults only (MCMC is not offered): asking for MCMC steps, or any other
#'   value of an MCMC setting, is an error that points to the bootstrap.
#' @param plot.settings Named list of settings of the figures of
#'   [plot.wisp()], kept in the fit (defaults in parentheses). Each can also
#'   be given to `plot()` as an argument of the same name, which wins over
#'   the fit's value.
#'   \describe{
#'   \item{\code{print.plots}}{(`interactive()`) wisp() prints the standard
#'     figures of [wisp_plots()] at the end of the fit; scripts and tests
#'     print nothing unless asked.}
#'   \item{\code{dim.bounds}}{(empty) positions (bins) of layer or region
#'     boundaries, drawn as dashed vertical lines in the rate-count and
#'     decomposition plots and labelled with their names, e.g.
#'     `c(L2 = 10, L4 = 22)`.}
#'   \item{\code{log.scale}}{(`FALSE`) draw rates on the log(rate + 1)
#'     scale (rate-count, decomposition and time-series plots).}
#'   \item{\code{splitting_factor}}{(empty) a fixed effect whose levels set
#'     the hue of the treatments' colours, the other factors their lightness;
#'     in the time-series plot, the factor whose levels colour the lines.}
#'   \item{\code{CI_style}}{(`TRUE`) intervals of curves as shaded bands;
#'     `FALSE`: as dot-dashed lines at their bounds.}
#'   \item{\code{splitting_factor_colors}}{(`c(120, 240)`) HCL hues, one
#'     per level of the splitting factor (recycled).}
#'   \item{\code{label_size}}{(3) size of text labels (boundary labels,
#'     significance stars) in ggplot2's text size units (mm).}
#'   \item{\code{title_size}}{(20) size of the title of every figure; the
#'     title is drawn at 0.7 times this size, in points.}
#'   \item{\code{axis_size}}{(12) size of the axis titles of every figure,
#'     in points.}
#'   \item{\code{legend_size}}{(10) size of the legend text of every figure,
#'     in points.}
#'   \item{\code{count_size}}{(1.5) size of the points of the observed counts
#'     in the rate-count and decomposition plots.}
#'   \item{\code{count_jitter}}{(0.5) how far, in bins, the points of the
#'     observed counts are jittered sideways.}
#'   \item{\code{count.alpha.ran}}{(0.25) opacity of the points of the
#'     animals' observed counts.}
#'   \item{\code{count.alpha.none}}{(0.25) opacity of the points of the
#'     mean observed count per treatment and bin (`plot(fit, counts =
#'     "mean")` and the decomposition plot), the population's counts.}
#'   \item{\code{pred.alpha.ran}}{(0.9) opacity of the dashed curves of the
#'     random levels (animals).}
#'   \item{\code{pred.alpha.none}}{(1) opacity of the solid population
#'     curves.}
#'   \item{\code{y.lim}}{(empty) two numbers, the limits of the y axis of
#'     the rate-count and decomposition plots.}
#'   }
#' @param ran.seed Seed of the bootstrap (`NULL`: drawn from R's random
#'   number generator). R's own random stream is not changed.
#' @param degrees `NULL` (find the transitions of every curve), one whole
#'   number for every curve, a context × gene matrix (with dimnames, or in
#'   the sorted order of the levels) of the number of transitions of each
#'   curve, with `NA` where they are to be found, or a list named by context
#'   whose elements are one number (every gene of that context) or a vector
#'   named by gene (genes left out are found), e.g.
#'   `list(cortex = c(Bcl11b = 2, Satb2 = 1))`. Change points found by the
#'   structure step are kept as starting points where their number matches;
#'   the best step function's are used otherwise. Fixing only some curves
#'   needs `likelihood = "nb"`; the grid search of `LRO_cost` is skipped
#'   when any curve is fixed.
#' @param control The limits of the Newton fit of the count likelihood
#'   (`likelihood = "nb"`), from [wisp_control()]: iterations and tolerances
#'   (the defaults of the package's core). Setting any of them under
#'   `likelihood = "original"` is an error: its L-BFGS fit is controlled by
#'   `model.settings$ctol` and `max_evals`.
#' @param backend Where the genes are fitted: `"fork"` (default) on
#'   `max.fork` worker processes of this machine (in this process with one),
#'   or `"future"` on whatever [future::plan()] you set (multisession,
#'   cluster, future.batchtools on Slurm, ...), one future per chunk of
#'   `chunk.size` genes. Under `likelihood = "nb"` with the default structure
#'   selection only; see "Panels".
#' @param checkpoint `NULL`, or the path of a file that makes the fit
#'   resumable: each gene's structure selection and fit is appended to it as
#'   it ends, and a rerun with the same data, settings and path fits only the
#'   genes it lacks. Same format guarantees as [bs_batch()]'s checkpoint
#'   (checksummed, durable appends; damaged stretches dropped with a warning
#'   of class `wisp_checkpoint_warning`); a checkpoint of other data or
#'   settings, or a bootstrap's, is an error. See "Panels".
#' @param chunk.size Genes per future (backend `"future"`); `NULL`: one
#'   chunk per worker of the plan.
#' @param resources Named list of resources for the futures' jobs on a
#'   future.batchtools plan (backend `"future"`), as in [bs_batch()].
#' @param statistics How the effects are tested without a bootstrap (count
#'   likelihood; [wisp_statistics()] explains both): `"profile"` (default),
#'   Wald tests and intervals, with every transition-point effect checked by
#'   three refits and given its profile-likelihood test and interval where
#'   the check flags it; or `"wald"`, Wald alone, which skips the checks.
#'   The checks are calibrated where Wald tests of points are not (small
#'   rate steps, few animals: `vignette("inference")`), at a cost: on a
#'   simulated panel of 200 genes x 4 cell types they took about 3 times
#'   the fit's own time (`benchmarks/panel.md`). `max.fork` workers run them.
#'
#' @section Panels:
#' Under the count likelihood with the default structure selection, genes
#' are independent: a gene's transitions are chosen, its animals' warps
#' estimated and its curves fitted from its own counts. With a
#' `checkpoint`, or `backend = "future"`, `wisp()` therefore runs each gene's
#' structure selection and fit as a task of its own (on `max.fork` forked
#' workers, or one future per chunk of genes, each sent only its genes'
#' summed rows), keeps each finished gene in the checkpoint, and then puts
#' the genes together: the fit is identical to the one of all genes at
#' once, whatever the backend, the chunks or the interruptions (tested).
#' With `backend = "future"`, the gene-level tests that follow run on the
#' plan too (one future per chunk of genes, making every term's reduced fits
#' of its genes: [wisp_gene_tests()]); the statistics (Wald tests and the
#' profile checks of transition points, on `max.fork` forked workers) run in
#' this session. A chunk whose future fails (its job was killed,
#' ran out of memory or time) stops the fit with an error of class
#' `wisp_system_error` that names its genes, after the others were collected
#' and checkpointed: rerun with the same `checkpoint` to fit only those.
#' `wisp(backend = "future")` needs the future package; a Slurm template for
#' future.batchtools is shipped: `system.file("templates", "slurm.tmpl",
#' package = "wispack")`.
#'
#' @details `model.settings` (defaults in parentheses; the package's Rust
#'   core holds them, see `wispack:::wisp_default_model_settings()`):
#'   `buffer_factor` (0.05) minimum spacing of transitions as a fraction of
#'   the bins, above 0 and below 0.5; `ctol` (1e-6)
#'   relative change of the objective that ends an L-BFGS fit of
#'   `likelihood = "original"`; `max_evals` (1000) objective evaluations
#'   allowed per such fit (both apply to `likelihood = "original"` only: under
#'   `"nb"` they are ignored, with a warning when given, and `control =
#'   wisp_control(newton_gradient_tolerance =, newton_max_iterations =)` does
#'   their job); `max_penalty_at_distance_factor`
#'   (0.01) size of the boundary penalty at the start, relative to the
#'   negative log-likelihood; `structure` ("auto": "likelihood" under the
#'   count likelihood, "lro" under the original) how each curve's number
#'   of transitions is found: "lro", by the change-point detector below
#'   (tuned by the grid search of `LRO_cost`), or "likelihood" (count
#'   likelihood only; in `benchmarks/structure.R` it finds the simulated
#'   number more often than "lro" with its grid, with fewer spurious
#'   transitions, in less time), curve by curve: degrees 0, 1, 2, ... are
#'   fitted in turn with the count likelihood and the full treatment design
#'   (random effects held fixed, so curves are independent and run on
#'   `max.fork` workers: at 0, then again at their estimates in one fit of
#'   the whole model with that first choice), starting from an exact
#'   segmentation of the curve's pooled counts, until two degrees in a row
#'   do not improve the BIC; the best BIC wins (model vignette §12.6). The result then keeps every candidate in
#'   `structure.selection`, and `summary()` names curves whose choice was
#'   close; `LRO_cost` ("AIC") criterion of the grid search
#'   over change-point settings (structure "lro" only): "AIC", "BIC", "NLL"
#'   or "none" (no search);
#'   `LROcutoff` (2) and `LROwindow_factor` (1.25) change-point settings used
#'   without a search; `LRO_method` ("improved") change-point detection,
#'   "improved" (fewer spurious transitions) or "original";
#'   `likelihood` ("nb") `"nb"` or `"original"` (see Likelihoods);
#'   `exposure` ("auto") see Exposure; `slope_prior_sd` (2) standard
#'   deviation of the slopes' prior on their logit scale, 0 for none;
#'   `step_prior_sd` (2) standard deviation of the prior on the steps
#'   between block rates (log scale), 0 for none; `effect_prior_sd` (1)
#'   standard deviation of the prior on the treatment effects (unconstrained
#'   scale), 0 for none;
#'   `random_sd` (NA) the random effects' standard deviations (point, rate,
#'   slope; one number for all) to fix instead of estimating them;
#'   `dispersion` (NA) the dispersion per cell to fix for every gene and
#'   context instead of estimating it: 0 fits Poisson counts (held at
#'   1e-8, where the negative binomial equals the Poisson to about 1e-8
#'   relative; reported as such), e.g. to check with
#'   [wisp_residuals()] whether the counts are overdispersed (the last six
#'   under `"nb"` only);
#'   `rise_threshold_factor` (0.8) the rise, above 0 and at most 1, as a
#'   fraction of the step between block rates, that a transition must reach
#'   within its run of
#'   bins; it sets the starting slopes (a larger factor, longer runs,
#'   gentler slopes); `rng_seed` (42) seed of the starting warping factors and of the
#'   quantile residuals that `plot(fit, type = "residuals")` draws;
#'   `warp_precision` (1e-7); `round_none` (TRUE) round the extrapolated
#'   population counts; `max_bin` (0) number of bins (0: the largest bin;
#'   at most 100,000); `trtKO` ("none") under `"nb"`, the effects to hold
#'   at 0 for a reduced model: effect names as the fit reports them
#'   (`"KO"`, `"KO:right"`) or factor names (every effect involving the
#'   factor); compare the reduced fit with the full one by [anova.wisp()].
#'   Unlike the original's `trtKO`, it drops no data.
#'
#' @section Progress:
#' With `verbose = TRUE`, `wisp()` says what it does in messages: which
#' columns it took as fixed effects, with their numbers of levels (and
#' which of them look like ids rather than treatments), each stage
#' as it starts (the structure selection with the number of curves, or the
#' grid search with the number of distinct change-point structures it fits;
#' the fit with the number of genes; with a checkpoint or
#' `backend = "future"`, one stage for every gene's structure and fit, after
#' the number of genes the checkpoint already held), how many of them have been fitted
#' (for 10 or more, at most every quarter), and a summary of each
#' stage. With the progressr package installed it also signals one
#' progress step per curve of the structure selection or structure of the
#' grid search, and per gene of the fit, as each one ends (on `max.fork` workers, in the order they
#' finish), and per bootstrap replicate (see [bs_batch()]); under
#' `likelihood = "original"` the fit is one step, since its objective
#' couples every gene. Nothing is shown until you choose how:
#' `progressr::handlers(global = TRUE)` once per session shows the progress
#' of every later call (`progressr::handlers("cli")`, ... choose the style),
#' or wrap one call in `progressr::with_progress()`; in a non-interactive
#' session (e.g. `Rscript`), also set `options(progressr.enable = TRUE)`.
#' Handlers set with [withCallingHandlers()] around the call receive the
#' progress conditions as the work goes on; an error in one stops the fit
#' (and kills its worker processes).
#'
#' @section Levels:
#' The order of the levels of every column of labels (contexts, genes,
#' random levels, fixed effects) follows one rule: a factor keeps its levels
#' in order (dropping levels without data); numbers are in numeric order;
#' text is in numeric order when every value is a number ("7", "12", "18"),
#' in the order of the number when every value is one shared non-numeric
#' prefix followed by a number ("P7", "P12", "P18"; "gene1", "gene2",
#' "gene10"; "E9.5", "E14.5"), and otherwise in C-locale byte order
#' ("KO" before "WT", "Sst" before "gene1"), whatever the locale.
#'
#' The first level of a fixed effect is its *reference level*: the baseline
#' parameters describe the curves at the reference levels, and every
#' treatment effect is a difference from them. To choose it, make the column
#' a factor with the reference first, e.g. `factor(genotype, levels =
#' c("WT", "KO"))`. Treatments are named by their non-reference levels
#' joined with ":" ("KO", "P12", "KO:P12"), the reference treatment by the
#' reference levels ("WT:P7"), in `summary()`, the plots and
#' `count.data.summed$treatment`.
#'
#' The time series (`variables$timeseries`) is cumulative in its level
#' order, so that order must be known: a factor, numbers, or text ordered by
#' a number as above. Any other text (e.g. "young", "adult", "old") is an
#' error that asks for a factor with the levels in time order.
#'
#'
#' @section Unbalanced designs:
#' Under the count likelihood a combination of fixed-effect levels without
#' tokens (e.g. no KO animal at P28) does not stop the fit: its curves
#' cannot be estimated, so the treatment effects that need them (here the
#' KO:P28 interaction) are reported as `NaN`, with a warning that names the
#' combinations, and every other effect is estimated from the treatments
#' with data. `predict()` refuses curves of such a treatment. The reference
#' combination (the first level of every fixed effect) must have data, as
#' every effect is measured from it. `likelihood = "original"` needs every
#' combination, as the original package did.
#' @return An object of class `c("wisp_nb", "wisp")` (the count likelihood)
#'   or `c("wisp_original", "wisp")` (the original's objective), whose
#'   methods are those of `"wisp"`: a list with the original's fields
#'   (`count.data.summed`, `fitted.parameters`, `param.names`,
#'   `gamma.dispersion`, `fix`, `treatment`, `weight.matrix`,
#'   `grouping.variables`, `param.idx0`, `settings`,
#'   `LRO.grid.search.results`, `variables`), `likelihood`, `fit.diagnostics`
#'   (the columns of [bs_batch()]'s `diagnostics` for the full-data fit,
#'   without `ok` and `reason`: `pen.neg.value` (the minimised objective),
#'   `neg.loglik` (minus the log-likelihood, marginal over the random effects
#'   under `"nb"`), `converged`, `code` (how the fit ended, in the words
#'   both likelihoods share: `"converged"`, `"evaluation limit"` (the
#'   original's `max_evals`), `"iteration limit"` and `"variance update
#'   limit"` (the count model's `wisp_control()` limits), or `"failed: "`
#'   and the reason; under `"nb"` the worst gene's, a failure naming its
#'   genes), `num.evals`, `iterations`,
#'   `max.gradient`, `on.bound`, `fit.seconds` and `seconds` (under `"nb"`
#'   from the start of the structure step, whose fits the fit reuses), `pid`,
#'   `peak_rss_mb`, `pss_mb`, `private_dirty_mb`; `n.params`; and under
#'   `"nb"` `df`, the degrees of freedom of [logLik()]: informed fixed
#'   effects, estimated standard deviations and dispersions), `degrees`,
#'   `change.points`, `structure.seconds` (time of the structure step, under
#'   `"nb"`), `newton.trace` (with `control = wisp_control(trace = TRUE)`:
#'   every Newton iteration of the fit), `structure.selection` (with `structure = "likelihood"`, one row
#'   per candidate fitted: `context, species, degree, BIC, delta.BIC,
#'   neg.loglik, n.params, n.obs, converged, chosen, margin` (the curve's
#'   runner-up's BIC minus the winner's), `fixed` (set by `degrees`),
#'   `failure`; `NULL` otherwise), `parameters` (what each reported value is: `role`
#'   baseline, beta, warp, sd or dispersion, with its component, context,
#'   gene, block, treatment, animal), and `plan`, the saved state of the
#'   fitted model (versioned and checksummed), so a fit saved with
#'   [saveRDS()] can be bootstrapped and predicted later, also by later
#'   versions of wispack. Under `"nb"`, `fitted.parameters` holds the fixed
#'   effects, the animals' random effects (their conditional modes, under
#'   the original's `wfactor_` names), the random effects' standard
#'   deviations (`sd_<point|rate|slope>_<gene>`) and the dispersions
#'   (`dispersion_<context>_<gene>`); `count.data.summed` holds one row per
#'   observed animal × context × gene × treatment × bin (with `exposure`;
#'   `pred` the expected count, `count.log` and `pred.log` on the log(1 +
#'   rate) scale) and the population rows (`ran == "none"`); the fit also
#'   has `exposure`, `random.sd`, `design` (which factors vary between
#'   animals, and the animals' groups) and `gene.qc`, one row per gene on
#'   its own fit (`converged`, `fitted` (whether it has estimates), Newton
#'   `iterations`, the largest scaled `gradient`, estimates `on.bound`, the
#'   `dispersion` range over contexts, the `transitions` per context,
#'   `molecules`, the mean count of the gene's rows in the summed table
#'   (molecules per bin and animal: below 10, the tests of transition
#'   points and the gene-level tests were anti-conservative in the
#'   calibration benchmark), and a `note` on why a fit stopped, in the words of `code`, e.g. `"iteration
#'   limit: 200 Newton iterations"`); [summary.wisp()] lists the genes that
#'   need a look; a gene whose fit failed, by an error or its worker's
#'   crash, is kept without estimates (`fitted` `FALSE`, `NA` estimates,
#'   its note "failed: " and the reason, a warning naming it) while
#'   the other genes are fitted, and decide alone whether the fit
#'   converged), and `bins` for data
#'   from [wisp_bin()] (the bin `breaks`, the `position` column and its
#'   `unit`; the figures label the spatial axis in positions). With statistics (`statistics`
#'   under `"nb"`, or from `bootstraps.num` replicates), `stats` (see
#'   [wisp_statistics()]) and, under `"nb"` with fixed effects, `gene.tests`:
#'   the gene-level tests of every term ([wisp_gene_tests()], as
#'   `anova(fit)` gives them; one reduced fit per term); with bootstraps, also `bootstrap`,
#'   `sample.params.bs` and `diagnostics.bs`; and `provenance`, which
#'   wispack made the fit (`package`, `version`, `commit`: the git commit it
#'   was built from or `"unknown"`, `r`, `created`; [summary.wisp()] prints
#'   it). Errors are classed conditions: see [wisp_conditions].
#' @export
#' @examples
#' counts <- wisp_simulate(n.genes = 2, n.bins = 40, seed = 3)
#' fit <- wisp(counts, model.settings = list(LRO_cost = "none"), verbose = FALSE)
#' fit$fit.diagnostics$converged
wisp <- function(count.data, variables = list(), fit_only = FALSE, use.median = FALSE,
                 bootstraps.num = 0, converged.resamples.only = TRUE, max.fork = 1,
                 verbose = TRUE, model.settings = list(), MCMC.settings = list(),
                 plot.settings = list(), ran.seed = 1234, degrees = NULL,
                 control = wisp_control(), backend = c("fork", "future"), checkpoint = NULL,
                 chunk.size = NULL, resources = NULL, statistics = c("profile", "wald")) {
  call <- match.call()
  statistics <- match_choice(statistics, "statistics", c("profile", "wald"))
  check_flag(fit_only, "fit_only")
  check_flag(use.median, "use.median")
  check_whole_number(bootstraps.num, "bootstraps.num", upper = 1e7)
  check_flag(converged.resamples.only, "converged.resamples.only")
  check_whole_number(max.fork, "max.fork", lower = 1, upper = 4096)
  check_worker_limit(max.fork, "max.fork")
  warn_workers_above_cores(max.fork, "max.fork")
  check_flag(verbose, "verbose")
  settings <- wisp_model_settings(model.settings)
  newton <- wisp_control_settings(control, settings, model.settings)
  wisp_mcmc_settings(MCMC.settings)
  plot.settings <- wisp_plot_settings(plot.settings)
  if (!is.null(ran.seed)) check_whole_number(ran.seed, "ran.seed", lower = -.Machine$integer.max)
  apart <- check_genes_apart(backend, checkpoint, chunk.size, resources, settings, call = call)
  fit.workers <- count_fit_workers(max.fork, settings$likelihood)
  say <- function(...) if (verbose) message(...)

  started <- proc.time()[["elapsed"]]
  advice <- fit_memory_advice
  prepared <- with_memory_advice(
    prepare_count_data(count.data, variables, settings$max_bin,
                       missing_treatments = if (settings$likelihood == "nb") "warn" else "error",
                       say = say),
    advice, call = call)
  if (settings$likelihood != "nb" && !is.null(prepared$exposure)) {
    stop_input("likelihood = \"", settings$likelihood, "\" models each token (one cell's ",
               "count of one gene), but these data are binned (each row sums the cells of a ",
               "bin); fit them with likelihood = \"nb\", or give the tokens of ",
               "wisp_bin(..., format = \"tokens\").", call = call)
  }
  say(fixed_effect_message(prepared$fixed_effect_info))
  progress <- stage_progress(say, verbose,
                             if (identical(apart$backend, "future")) future::nbrOfWorkers() else
                               max.fork)
  on.exit(progress$finish(), add = TRUE)
  result <- with_memory_advice(if (settings$likelihood == "nb") {
    wisp_count(prepared, settings, plot.settings, variables, call, fit.workers, say,
               degrees, progress$report, newton, apart)
  } else {
    wisp_original(prepared, settings, plot.settings, variables, call, max.fork, say,
                  started, degrees, progress$report)
  }, advice, call = call)
  # The coded tokens are not needed after the fit: free them before the
  # statistics and gene-level tests, whose peaks add to theirs on a panel.
  rm(prepared)
  result$bins <- data_bins(count.data)
  result$provenance <- wisp_provenance()
  if (!fit_only && bootstraps.num > 0) {
    result <- wisp_bootstrap_statistics(result, bootstraps.num, max.fork, use.median,
                                        converged.resamples.only, ran.seed, verbose)
  } else if (!fit_only && is.null(statistics_without_bootstrap(result))) {
    say("Statistics need a bootstrap: call wisp(..., bootstraps.num = 1000) or bs_batch() on this fit.")
  } else if (!fit_only) {
    tested_at <- proc.time()[["elapsed"]]
    # The checks run on this session's forked workers, whatever the backend
    # of the fit.
    checks <- stage_progress(say, verbose, fit.workers)
    on.exit(checks$finish(), add = TRUE)
    result <- statistics_of(result, statistics, level = 0.95, adjustment = "holm",
                            tolerance = 0.25, max.fork = fit.workers,
                            progress = function(done, total) checks$report("profile", done, total))
    say(statistics_message(result$stats, proc.time()[["elapsed"]] - tested_at))
    warn_point_tests_small_design(result, call)
    warn_point_tests_sparse_genes(result, call)
    result$gene.tests <- default_gene_tests(result, fit.workers, say, apart)
  }
  print_wisp_plots(result)
  result
}

# Parts of the "wisp" object that both likelihoods assemble alike
# (wisp_count_result() in count.R, wisp_result() in original.R).

# The fit's `treatment` field (both likelihoods): the treatments' names and,
# per treatment, its level of every factor.
treatment_description <- function(model) {
  list(names = model$treatments,
       components = lapply(seq_along(model$treatments), function(i) {
         vapply(model$treatment_levels, function(l) l[i], "")
       }))
}

fixed_effect_description <- function(model) {
  levels <- model$fixed_levels
  list(names = names(levels), lvls = levels,
       treat.lvl = lapply(levels, function(l) l[-1]),
       ref.lvl = vapply(levels, function(l) l[1], ""))
}

# The original's 0-based index lists: beta[[component]][[context]][[species]]
# (block-major, treatment-minor) and w.factor[[point|rate|slope]] (species,
# then random level). The parameters are split by curve in one pass: a panel
# has 10^5 parameters in 10^4 curves, and selecting each curve's from all of
# them took a minute.
parameter_indices <- function(model) {
  p <- model$parameters
  index0 <- seq_len(nrow(p)) - 1L
  components <- c(Rt = "Rt", tslope = "tslope", tpoint = "tpoint")
  contexts <- model$contexts
  species <- model$species
  on_curve <- which(p$role != "warp" & p$component %in% components &
                      p$context %in% contexts & p$species %in% species)
  # Curve number k + K (c - 1) + K C (s - 1): component k, context c, species s.
  sizes <- c(length(components), length(contexts), length(species))
  curve <- match(p$component[on_curve], components) +
    sizes[1] * (match(p$context[on_curve], contexts) - 1L) +
    sizes[1] * sizes[2] * (match(p$species[on_curve], species) - 1L)
  by_curve <- unname(split(index0[on_curve], factor(curve, levels = seq_len(prod(sizes)))))
  beta <- lapply(seq_along(components), function(k) {
    stats::setNames(lapply(seq_along(contexts), function(c) {
      stats::setNames(by_curve[k + sizes[1] * (c - 1L) + sizes[1] * sizes[2] *
                                 (seq_along(species) - 1L)], species)
    }), contexts)
  })
  names(beta) <- names(components)
  w.factor <- lapply(c(point = "point", rate = "rate", slope = "slope"), function(kind) {
    index0[p$role == "warp" & p$component == kind]
  })
  list(beta = beta, w.factor = w.factor)
}
