//! The WSPmm model core: summed table, design, curve and objective.
//! (Under construction: see issue 3.)
