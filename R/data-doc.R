#' Example spatial count data
#'
#' Simulated token-level counts of 4 genes in one context, for 3 mice, two
#' hemispheres and two ages, over 50 spatial bins (5 cells per bin), made by
#' [wisp_simulate()] with a known truth (see `data-raw/wisp_example.R` in the
#' source repository).
#'
#' @format A data.frame with 12,000 rows and columns `count` (transcripts in
#'   a cell), `bin` (1-50), `context`, `species` (gene), `ran` (mouse),
#'   `hemisphere` (left, right) and `age` (P12, P18). Its `truth` attribute
#'   holds the simulated degrees, parameters and effects.
#' @examples
#' head(wisp_example)
#' attr(wisp_example, "truth")$degrees
#' @docType data
#' @keywords datasets
#' @name wisp_example
NULL
