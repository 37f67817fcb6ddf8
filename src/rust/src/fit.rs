//! L-BFGS fitting of the model (issue 3): under construction.
