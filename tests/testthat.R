library(testthat)
library(wispack)

results <- test_check("wispack")
# The package's own test command (tools/test.sh) sets this to learn which
# test files had skips here, and runs those again with NOT_CRAN=true.
saved <- Sys.getenv("WISPACK_CHECK_TEST_RESULTS")
if (nzchar(saved)) saveRDS(as.data.frame(results), saved)
