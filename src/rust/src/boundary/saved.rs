//! Saved-state hooks for tests.

use super::RResult;
#[cfg(feature = "test-hooks")]
use crate::saved;
use extendr_api::prelude::*;

/// Recomputes the checksum of a saved state whose payload a test changed
/// (test hook).
/// @keywords internal
/// @noRd
#[extendr]
#[cfg_attr(not(feature = "test-hooks"), allow(unused_variables))]
fn saved_reseal_rust(bytes: Raw) -> RResult<Raw> {
    #[cfg(feature = "test-hooks")]
    return saved::reseal(bytes.as_slice()).map(|b| Raw::from_bytes(&b));
    #[cfg(not(feature = "test-hooks"))]
    Err(super::without_test_hooks("saved_reseal_rust()"))
}

extendr_module! {
    mod saved;
    fn saved_reseal_rust;
}
