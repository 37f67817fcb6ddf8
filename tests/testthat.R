library(testthat)
library(wispack)

test_check("wispack")
