#' wispack: warped-sigmoid Poisson-process mixed-effects models
#'
#' Fits warped-sigmoid Poisson-process mixed-effects models (WSPmm) to spatial
#' transcriptomics counts, with a Rust core, and bootstraps them in parallel
#' in short-lived forked worker processes.
#'
#' The fork engine is the foundation of the bootstrap. Its behaviour can be
#' exercised with synthetic tasks through the internal [engine_selftest()].
#'
#' @keywords internal
#' @importFrom stats coef confint fitted logLik nobs predict residuals vcov
"_PACKAGE"
