//! R entry points for checkpoint files.

use super::{outcome_columns, outcome_from_bytes, RResult};
use crate::checkpoint::{self, Entry};
use crate::error::Error;
use crate::outcome::Outcome;
use extendr_api::prelude::*;
use std::path::Path;

fn checkpoint_path(path: &str) -> RResult<&Path> {
    if path.is_empty() {
        return Err(Error::input("the checkpoint path is empty"));
    }
    Ok(Path::new(path))
}

/// Opens (creating or repairing) a checkpoint file and returns its entries:
/// `key`, `seed` and `replicate` columns, the diagnostics columns, the
/// `estimates` as a list (NULL for failed replicates), and the damaged byte
/// ranges that were found (and dropped).
/// @keywords internal
/// @noRd
#[extendr]
fn checkpoint_open_rust(path: &str) -> RResult<List> {
    let contents = checkpoint::open(checkpoint_path(path)?)?;
    let entries = &contents.entries;
    let outcomes: Vec<Outcome> = entries.iter().map(|e| e.outcome.clone()).collect();
    let damage = &contents.damage;
    Ok(list!(
        existed = contents.existed,
        key = entries
            .iter()
            .map(|e| format!("{:016x}", e.plan_hash))
            .collect::<Vec<_>>(),
        seed = entries.iter().map(|e| e.seed).collect::<Vec<_>>(),
        replicate = outcomes
            .iter()
            .map(|o| i32::try_from(o.replicate).unwrap_or(i32::MAX))
            .collect::<Vec<_>>(),
        diagnostics = outcome_columns(&outcomes),
        estimates = List::from_values(outcomes.iter().map(|o| match &o.fit {
            Ok(fit) => r!(fit.parameters.clone()),
            Err(_) => r!(NULL),
        })),
        damage_offset = damage.iter().map(|d| d.offset as f64).collect::<Vec<_>>(),
        damage_length = damage.iter().map(|d| d.length as f64).collect::<Vec<_>>(),
        damage_at_end = damage.iter().map(|d| d.at_end).collect::<Vec<_>>()
    ))
}

/// Appends one replicate's outcome (bytes from `bootstrap_replicate_rust` or
/// `outcome_failure_rust`) to a checkpoint made by `checkpoint_open_rust`,
/// durably.
/// @keywords internal
/// @noRd
#[extendr]
fn checkpoint_append_rust(path: &str, key: &str, seed: f64, outcome: Raw) -> RResult<()> {
    let plan_hash = u64::from_str_radix(key, 16).map_err(|_| Error::input("bad checkpoint key"))?;
    let entry = Entry {
        plan_hash,
        seed,
        outcome: outcome_from_bytes(&outcome)?,
    };
    let mut appender = checkpoint::Appender::new(checkpoint_path(path)?)?;
    appender.append(&entry)?;
    Ok(())
}

extendr_module! {
    mod checkpoint;
    fn checkpoint_open_rust;
    fn checkpoint_append_rust;
}
