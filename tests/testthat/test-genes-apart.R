# wisp(checkpoint =) and wisp(backend = "future"): every gene's structure
# selection and fit as a task of its own, put together into the fit of all
# genes at once. The expectation is always that plain fit, made by the
# default path (every curve's selection in parallel passes over the panel).
# The same backend on a real Slurm cluster is tested in test-cluster.R.

apart_counts <- function() {
  wisp_simulate(n.genes = 4, n.random = 3, n.bins = 40, seed = 21)
}

plain_apart_fit <- once(function() {
  wisp(apart_counts(), verbose = FALSE, fit_only = TRUE)
})

# What the backends must not change: everything the fit reports and keeps.
fit_parts <- function(fit) {
  fit[c("fitted.parameters", "count.data.summed", "structure.selection", "degrees",
        "change.points", "gene.qc", "random.sd", "plan")]
}

fit_checkpoint_genes <- function(path) {
  if (!file.exists(path)) return(character())
  wispack:::fit_checkpoint_open_rust(path)$species
}

test_that("a checkpointed fit, on one worker or two, is the fit of all genes at once", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  reference <- plain_apart_fit()
  for (workers in 1:2) {
    path <- tempfile(fileext = ".ckp")
    fit <- wisp(apart_counts(), verbose = FALSE, fit_only = TRUE, checkpoint = path,
                max.fork = workers)
    expect_identical(fit_parts(fit), fit_parts(reference))
    expect_setequal(fit_checkpoint_genes(path), paste0("gene", 1:4))
    # Resumed with every gene kept: nothing is fitted again, the same fit.
    messages <- capture_messages(again <- wisp(apart_counts(), verbose = TRUE,
                                               fit_only = TRUE, checkpoint = path))
    expect_match(messages, "Checkpoint: 4 of 4 genes fitted already", all = FALSE)
    expect_false(any(grepl("to fit", messages)))
    expect_identical(fit_parts(again), fit_parts(reference))
    unlink(path)
  }
})

test_that("degrees fixed for some genes, statistics and binned input keep the identity", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  counts <- apart_counts()
  # gene2's only curve fixed: the panel still makes its second pass, and so
  # must gene2's task of its own (it alone would need none).
  degrees <- list(context1 = c(gene2 = 1))
  reference <- without_design_warning(wisp(counts, verbose = FALSE, degrees = degrees))
  path <- tempfile(fileext = ".ckp")
  on.exit(unlink(path))
  fit <- without_design_warning(wisp(counts, verbose = FALSE, degrees = degrees,
                                     checkpoint = path, max.fork = 2))
  expect_identical(fit_parts(fit), fit_parts(reference))
  expect_identical(fit$stats, reference$stats)
  expect_identical(fit$gene.tests, reference$gene.tests)
  expect_identical(fit$degrees[, "gene2"], 1L)

  # A binned table (given exposures): each row sums a group's tokens per bin.
  keys <- c("context", "species", "ran", "hemisphere", "bin")
  binned <- stats::aggregate(counts["count"], counts[keys], sum)
  binned$exposure <- stats::aggregate(counts["count"], counts[keys], length)$count
  roles <- list(exposure = "exposure")
  from_bins <- wisp(binned, roles, verbose = FALSE, fit_only = TRUE)
  expect_identical(from_bins$exposure$rule, "given")
  apart <- wisp(binned, roles, verbose = FALSE, fit_only = TRUE, checkpoint = tempfile())
  expect_identical(apart$fitted.parameters, from_bins$fitted.parameters)
  expect_identical(apart$plan, from_bins$plan)
})

test_that("a fit killed half-way and rerun with its checkpoint is the uninterrupted fit", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  reference <- plain_apart_fit()
  path <- tempfile(fileext = ".ckp")
  on.exit(unlink(path))
  # The worker of the third gene is killed (as by the kernel's OOM killer):
  # the fit stops with an error naming it, after the others were kept.
  with_faults(list(kill = 3L))
  on.exit(no_faults(), add = TRUE)
  expect_error(expect_no_trace(wisp(apart_counts(), verbose = FALSE, fit_only = TRUE,
                                    checkpoint = path, max.fork = 2)),
               class = "wisp_system_error", regexp = "gene3 failed: killed by signal 9")
  no_faults()
  expect_setequal(fit_checkpoint_genes(path), c("gene1", "gene2", "gene4"))
  messages <- capture_messages(resumed <- wisp(apart_counts(), verbose = TRUE, fit_only = TRUE,
                                               checkpoint = path, max.fork = 2))
  expect_match(messages, "Checkpoint: 3 of 4 genes fitted already", all = FALSE)
  expect_match(messages, "gene by gene: 1 gene to fit", all = FALSE)
  expect_identical(fit_parts(resumed), fit_parts(reference))
  expect_setequal(fit_checkpoint_genes(path), paste0("gene", 1:4))
})

test_that("a damaged checkpoint loses only its damaged genes; foreign files are refused", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  reference <- plain_apart_fit()
  path <- tempfile(fileext = ".ckp")
  on.exit(unlink(path))
  wisp(apart_counts(), verbose = FALSE, fit_only = TRUE, checkpoint = path)
  bytes <- readBin(path, "raw", file.size(path))
  at <- 8 + 60 # inside the first frame's payload
  bytes[at] <- as.raw(bitwXor(as.integer(bytes[at]), 0xff))
  writeBin(bytes, path)
  expect_warning(resumed <- wisp(apart_counts(), verbose = FALSE, fit_only = TRUE,
                                 checkpoint = path),
                 class = "wisp_checkpoint_warning", regexp = "1 damaged stretch")
  expect_identical(fit_parts(resumed), fit_parts(reference))

  other <- apart_counts()
  other$count[1] <- other$count[1] + 1
  expect_error(wisp(other, verbose = FALSE, fit_only = TRUE, checkpoint = path),
               class = "wisp_input_error", regexp = "fit of other data or settings")
  expect_error(wisp(apart_counts(), verbose = FALSE, fit_only = TRUE, checkpoint = path,
                    model.settings = list(slope_prior_sd = 1)),
               class = "wisp_input_error", regexp = "fit of other data or settings")
  boot_path <- tempfile()
  on.exit(unlink(boot_path), add = TRUE)
  bs_batch(reference, 1, seed = 3, checkpoint = boot_path)
  expect_error(wisp(apart_counts(), verbose = FALSE, fit_only = TRUE, checkpoint = boot_path),
               class = "wisp_input_error", regexp = "a bootstrap's checkpoint, not a fit's")
  expect_error(bs_batch(reference, 1, seed = 3, checkpoint = path),
               class = "wisp_input_error", regexp = "a fit's checkpoint, not a bootstrap's")
})

test_that("backend = \"future\" gives the fork backend's fit, chunk by chunk", {
  skip_if_not_installed("future")
  reference <- plain_apart_fit()
  future::plan(future::sequential)
  expect_identical(fit_parts(wisp(apart_counts(), verbose = FALSE, fit_only = TRUE,
                                  backend = "future")), fit_parts(reference))
  local_multisession(2)
  path <- tempfile(fileext = ".ckp")
  on.exit(unlink(path), add = TRUE)
  fit <- wisp(apart_counts(), verbose = FALSE, fit_only = TRUE, backend = "future",
              chunk.size = 1, checkpoint = path)
  expect_identical(fit_parts(fit), fit_parts(reference))
  expect_setequal(fit_checkpoint_genes(path), paste0("gene", 1:4))
})

test_that("a future that dies stops the fit naming its genes; a rerun fits only those", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  skip_if_not_installed("future")
  reference <- plain_apart_fit()
  path <- tempfile(fileext = ".ckp")
  on.exit(unlink(path), add = TRUE)
  local_multisession(2)
  old <- options(wispack.inject_faults = list(kill = 3L))
  expect_error(wisp(apart_counts(), verbose = FALSE, fit_only = TRUE, backend = "future",
                    chunk.size = 2, checkpoint = path),
               class = "wisp_system_error",
               regexp = "futures of some genes failed: gene3, gene4 .*same `checkpoint`")
  options(old)
  expect_setequal(fit_checkpoint_genes(path), c("gene1", "gene2"))
  future::plan(future::sequential) # a fresh plan: one of the workers is dead
  messages <- capture_messages(resumed <- wisp(apart_counts(), verbose = TRUE, fit_only = TRUE,
                                               backend = "future", checkpoint = path))
  expect_match(messages, "Checkpoint: 2 of 4 genes fitted already", all = FALSE)
  expect_match(messages, "gene by gene: 2 genes to fit", all = FALSE)
  expect_identical(fit_parts(resumed), fit_parts(reference))
})

test_that("what cannot be fitted gene by gene says so", {
  counts <- apart_counts()
  expect_error(wisp(counts, verbose = FALSE, checkpoint = tempfile(),
                    model.settings = list(likelihood = "original")),
               class = "wisp_input_error", regexp = "couples every gene")
  expect_error(wisp(counts, verbose = FALSE, backend = "future",
                    model.settings = list(structure = "lro")),
               class = "wisp_input_error", regexp = "default structure selection")
  expect_error(wisp(counts, verbose = FALSE, backend = "slurm"), class = "wisp_input_error",
               regexp = "`backend` must be one of \"fork\", \"future\"")
  expect_error(wisp(counts, verbose = FALSE, chunk.size = 2), class = "wisp_input_error",
               regexp = "need backend = \"future\"")
  expect_error(wisp(counts, verbose = FALSE, checkpoint = c("a", "b")),
               class = "wisp_input_error", regexp = "one file path")
})

test_that("the gene-level tests on futures are the fork backend's, and a dead future is a note", {
  skip_on_cran() # slow: runs in the full (NOT_CRAN) pass only
  skip_if_not_installed("future")
  counts <- wisp_simulate(n.genes = 4, n.random = 3, n.bins = 40, seed = 21,
                          fixed.effects = list(genotype = c("WT", "KO")))
  reference <- without_design_warning(wisp(counts, verbose = FALSE, max.fork = 2))
  expect_gt(nrow(reference$gene.tests), 0)
  local_multisession(2)
  said <- character()
  fit <- without_design_warning(withCallingHandlers(
    wisp(counts, verbose = TRUE, backend = "future", chunk.size = 1),
    message = function(m) {
      said <<- c(said, conditionMessage(m))
      invokeRestart("muffleMessage")
    }))
  # The profile checks run on this session's forked workers (max.fork = 1
  # here), not on the plan's two.
  checks <- grep("^Profile checks of transition points", said, value = TRUE)
  expect_length(checks, 1L)
  expect_match(trimws(checks), "genes? to check\\.$")
  expect_identical(fit_parts(fit), fit_parts(reference))
  expect_identical(fit$stats, reference$stats)
  expect_identical(fit$gene.tests, reference$gene.tests)
  expect_identical(wisp_gene_tests(reference, backend = "future"), reference$gene.tests)

  old <- options(wispack.inject_faults = list(kill = 3L))
  dead <- wisp_gene_tests(reference, backend = "future", chunk.size = 2)
  options(old)
  lost <- dead$gene %in% c("gene3", "gene4")
  expect_true(all(is.na(dead$statistic[lost])))
  expect_match(dead$note[lost], "^the reduced fit failed: future failed: .*wispack-tests-3-4")
  expect_identical(dead$statistic[!lost], reference$gene.tests$statistic[!lost])
  expect_error(wisp_gene_tests(reference, backend = "future", method = "bootstrap"),
               class = "wisp_input_error", regexp = "runs on backend = \"fork\"")
})
