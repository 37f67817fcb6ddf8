//! Structure detection and initial values (issue 4): under construction.
