//! The one record of a fit or bootstrap replicate: how the fit ended
//! ([`FitSummary`]) and what running it cost ([`ProcessStats`]), together an
//! [`Outcome`]. Every path produces it (the full fit, the fork engine, the
//! in-process backends, the grid search), checkpoints store it, and R gets
//! its columns from [`COLUMNS`] through one conversion in the boundary.
//!
//! To add a diagnostics column: add the field to [`FitSummary`] (or
//! [`ProcessStats`]) and its line to [`COLUMNS`] below; in R, add the name
//! and type to `diagnostic_columns` (R/schema.R). Outcomes travel as bincode,
//! so checkpoints written before the change can no longer be read
//! (`checkpoint::FILE_MAGIC` then gets a new number).

use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt;

/// How a fit ended, in the one vocabulary of both likelihoods: a fit's or
/// replicate's `code` is [`Termination::as_str`], and R maps the limits to
/// the original's `success.code` 5 (`model_rules()$termination`). Ordered
/// from best to worst, so that a count fit's code is its worst gene's.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Termination {
    /// The optimiser's convergence test held (and, for the count model,
    /// the random-effect variances settled).
    Converged,
    /// The original's `max_evals` ran out first.
    EvaluationLimit,
    /// The count model's Newton fit converged at the last variances, but
    /// `max_variance_updates` ran out before they settled.
    VarianceUpdateLimit,
    /// The count model's `newton_max_iterations` ran out first.
    IterationLimit,
    /// The optimiser could not go on (its best point is kept), or there is
    /// no fit at all; the reason says which.
    Failed(String),
}

impl Termination {
    pub(crate) const CONVERGED: &'static str = "converged";
    pub(crate) const EVALUATION_LIMIT: &'static str = "evaluation limit";
    pub(crate) const VARIANCE_UPDATE_LIMIT: &'static str = "variance update limit";
    pub(crate) const ITERATION_LIMIT: &'static str = "iteration limit";
    /// What starts the code of a failed fit, before its reason.
    pub(crate) const FAILED: &'static str = "failed: ";
    /// The codes of fits stopped by a limit.
    pub(crate) const LIMITS: [&'static str; 3] = [
        Self::EVALUATION_LIMIT,
        Self::VARIANCE_UPDATE_LIMIT,
        Self::ITERATION_LIMIT,
    ];

    /// "converged", "evaluation limit", "variance update limit",
    /// "iteration limit" or "failed: <reason>".
    pub(crate) fn as_str(&self) -> Cow<'_, str> {
        match self {
            Termination::Converged => Cow::Borrowed(Self::CONVERGED),
            Termination::EvaluationLimit => Cow::Borrowed(Self::EVALUATION_LIMIT),
            Termination::VarianceUpdateLimit => Cow::Borrowed(Self::VARIANCE_UPDATE_LIMIT),
            Termination::IterationLimit => Cow::Borrowed(Self::ITERATION_LIMIT),
            Termination::Failed(reason) => Cow::Owned(format!("{}{reason}", Self::FAILED)),
        }
    }

    /// A limit's code with what ran out, e.g. "iteration limit: 200 Newton
    /// iterations" (a count fit's per-gene note); other codes as they are.
    pub(crate) fn with_detail(&self, detail: &str) -> String {
        match self {
            Termination::Failed(_) | Termination::Converged => self.as_str().into_owned(),
            limit => format!("{}: {detail}", limit.as_str()),
        }
    }

    /// The termination a code or a note of [`Self::with_detail`] names.
    /// Notes saved before the vocabulary ("200 Newton iterations", "200
    /// variance updates", a Newton exit's bare reason) are read as what
    /// they meant.
    pub(crate) fn of_note(note: &str) -> Termination {
        let starts = |word: &str| note.starts_with(word);
        if starts(Self::CONVERGED) {
            Termination::Converged
        } else if starts(Self::EVALUATION_LIMIT) {
            Termination::EvaluationLimit
        } else if starts(Self::VARIANCE_UPDATE_LIMIT) || note.ends_with(" variance updates") {
            Termination::VarianceUpdateLimit
        } else if starts(Self::ITERATION_LIMIT) || note.ends_with(" Newton iterations") {
            Termination::IterationLimit
        } else {
            Termination::Failed(note.strip_prefix(Self::FAILED).unwrap_or(note).to_string())
        }
    }

    /// Only [`Termination::Converged`] counts as converged.
    pub(crate) fn is_converged(&self) -> bool {
        matches!(self, Termination::Converged)
    }
}

impl fmt::Display for Termination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_str())
    }
}

/// How one fit ended. Every likelihood reports these fields. A new field
/// becomes a diagnostics column with one line in [`COLUMNS`] and one entry
/// in R's `diagnostic_columns` (R/schema.R).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct FitSummary {
    /// The estimates, in the model's parameter order.
    pub(crate) parameters: Vec<f64>,
    /// The minimised value at `parameters` (here nll + boundary penalty).
    pub(crate) objective: f64,
    /// The negative log-likelihood at `parameters`, without any penalty.
    pub(crate) nll: f64,
    /// How the fit ended: a [`Termination`] in words ("converged",
    /// "iteration limit", "failed: ...").
    pub(crate) code: String,
    /// Whether `code` counts as convergence.
    pub(crate) converged: bool,
    /// Optimiser iterations.
    pub(crate) iterations: usize,
    /// Distinct points at which the objective was evaluated.
    pub(crate) evaluations: usize,
    /// The final gradient criterion: max |∂objective/∂θ| at `parameters`.
    pub(crate) max_gradient: f64,
    /// Estimates on a bound of their box constraints (0 without such bounds).
    pub(crate) on_bound: usize,
    /// Wall-clock seconds of the optimisation, its setup included.
    pub(crate) seconds: f64,
}

/// Where a fit ran and what it cost; `None` where it is not known. New
/// fields become columns as for [`FitSummary`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct ProcessStats {
    /// Wall-clock seconds of the whole replicate (resampling, start, fit).
    pub(crate) seconds: Option<f64>,
    /// The process that ran it.
    pub(crate) pid: Option<i32>,
    /// That process's peak resident set size, MiB.
    pub(crate) peak_rss_mb: Option<f64>,
    /// Its proportional set size, MiB.
    pub(crate) pss_mb: Option<f64>,
    /// Memory it wrote since it was forked, MiB.
    pub(crate) private_dirty_mb: Option<f64>,
}

/// One fit or replicate: its number, how it ended (or why it failed), and
/// what it cost. A checkpoint entry holds one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Outcome {
    /// Replicate number from 1 (0 for the full-data fit).
    pub(crate) replicate: usize,
    /// The fit, or why there is none ("error: ...", "killed by signal 9 ...").
    pub(crate) fit: Result<FitSummary, String>,
    pub(crate) process: ProcessStats,
}

impl Outcome {
    /// A replicate that produced no fit, for `reason`, with nothing known
    /// about its process.
    pub(crate) fn failed(replicate: usize, reason: impl Into<String>) -> Self {
        Self {
            replicate,
            fit: Err(reason.into()),
            process: ProcessStats::default(),
        }
    }
}

/// The R type of a column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ColumnType {
    Logical,
    Integer,
    Double,
    Character,
}

/// One value of a column; `None` is NA.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Cell {
    Logical(Option<bool>),
    Integer(Option<i32>),
    Double(Option<f64>),
    Character(Option<String>),
}

/// A diagnostics column: its R name, type and value for an outcome.
pub(crate) struct Column {
    pub(crate) name: &'static str,
    pub(crate) column_type: ColumnType,
    pub(crate) cell: fn(&Outcome) -> Cell,
}

fn fit_value<T>(outcome: &Outcome, field: impl Fn(&FitSummary) -> T) -> Option<T> {
    outcome.fit.as_ref().ok().map(field)
}

fn count(value: usize) -> i32 {
    i32::try_from(value).unwrap_or(i32::MAX)
}

/// The diagnostics columns, in order. `ok` and `reason` describe the
/// outcome; then the fit summary; then the process statistics.
pub(crate) const COLUMNS: &[Column] = &[
    Column {
        name: "ok",
        column_type: ColumnType::Logical,
        cell: |o| Cell::Logical(Some(o.fit.is_ok())),
    },
    Column {
        name: "reason",
        column_type: ColumnType::Character,
        cell: |o| Cell::Character(o.fit.as_ref().err().cloned()),
    },
    Column {
        name: "pen.neg.value",
        column_type: ColumnType::Double,
        cell: |o| Cell::Double(fit_value(o, |f| f.objective)),
    },
    Column {
        name: "neg.loglik",
        column_type: ColumnType::Double,
        cell: |o| Cell::Double(fit_value(o, |f| f.nll)),
    },
    Column {
        name: "converged",
        column_type: ColumnType::Logical,
        cell: |o| Cell::Logical(fit_value(o, |f| f.converged)),
    },
    Column {
        name: "code",
        column_type: ColumnType::Character,
        cell: |o| Cell::Character(fit_value(o, |f| f.code.clone())),
    },
    Column {
        name: "num.evals",
        column_type: ColumnType::Integer,
        cell: |o| Cell::Integer(fit_value(o, |f| count(f.evaluations))),
    },
    Column {
        name: "iterations",
        column_type: ColumnType::Integer,
        cell: |o| Cell::Integer(fit_value(o, |f| count(f.iterations))),
    },
    Column {
        name: "max.gradient",
        column_type: ColumnType::Double,
        cell: |o| Cell::Double(fit_value(o, |f| f.max_gradient)),
    },
    Column {
        name: "on.bound",
        column_type: ColumnType::Integer,
        cell: |o| Cell::Integer(fit_value(o, |f| count(f.on_bound))),
    },
    Column {
        name: "fit.seconds",
        column_type: ColumnType::Double,
        cell: |o| Cell::Double(fit_value(o, |f| f.seconds)),
    },
    Column {
        name: "seconds",
        column_type: ColumnType::Double,
        cell: |o| Cell::Double(o.process.seconds),
    },
    Column {
        name: "pid",
        column_type: ColumnType::Integer,
        cell: |o| Cell::Integer(o.process.pid),
    },
    Column {
        name: "peak_rss_mb",
        column_type: ColumnType::Double,
        cell: |o| Cell::Double(o.process.peak_rss_mb),
    },
    Column {
        name: "pss_mb",
        column_type: ColumnType::Double,
        cell: |o| Cell::Double(o.process.pss_mb),
    },
    Column {
        name: "private_dirty_mb",
        column_type: ColumnType::Double,
        cell: |o| Cell::Double(o.process.private_dirty_mb),
    },
];

/// The estimates of `outcomes`, one row after another (NaN rows for
/// failures and for estimates of another length).
pub(crate) fn estimate_rows(outcomes: &[Outcome], parameter_count: usize) -> Vec<f64> {
    let mut rows = Vec::with_capacity(outcomes.len() * parameter_count);
    for outcome in outcomes {
        match &outcome.fit {
            Ok(fit) if fit.parameters.len() == parameter_count => {
                rows.extend_from_slice(&fit.parameters)
            }
            _ => rows.extend(std::iter::repeat_n(f64::NAN, parameter_count)),
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminations_read_as_one_vocabulary_and_back() {
        let failed = Termination::Failed("line search".to_string());
        let all = [
            (Termination::Converged, "converged"),
            (Termination::EvaluationLimit, "evaluation limit"),
            (Termination::VarianceUpdateLimit, "variance update limit"),
            (Termination::IterationLimit, "iteration limit"),
            (failed.clone(), "failed: line search"),
        ];
        for (termination, code) in &all {
            assert_eq!(termination.as_str(), *code);
            assert_eq!(termination.to_string(), *code);
            assert_eq!(&Termination::of_note(code), termination);
            assert_eq!(termination.is_converged(), code == &"converged");
        }
        // Worst last: a count fit's code is its worst gene's.
        let mut sorted: Vec<Termination> = all.iter().rev().map(|(t, _)| t.clone()).collect();
        sorted.sort();
        assert_eq!(sorted, all.map(|(t, _)| t).to_vec());
        let note = Termination::IterationLimit.with_detail("200 Newton iterations");
        assert_eq!(note, "iteration limit: 200 Newton iterations");
        assert_eq!(Termination::of_note(&note), Termination::IterationLimit);
        assert_eq!(failed.with_detail("ignored"), "failed: line search");
        // Notes of plans saved before the vocabulary.
        assert_eq!(
            Termination::of_note("200 Newton iterations"),
            Termination::IterationLimit
        );
        assert_eq!(
            Termination::of_note("50 variance updates"),
            Termination::VarianceUpdateLimit
        );
        assert_eq!(
            Termination::of_note("no step lowered the objective"),
            Termination::Failed("no step lowered the objective".into())
        );
        assert_eq!(Termination::LIMITS.len(), 3);
    }

    pub(crate) fn summary() -> FitSummary {
        FitSummary {
            parameters: vec![1.5, -2.0],
            objective: 12.5,
            nll: 12.0,
            code: "converged".into(),
            converged: true,
            iterations: 9,
            evaluations: 14,
            max_gradient: 1e-3,
            on_bound: 0,
            seconds: 0.25,
        }
    }

    #[test]
    fn every_cell_has_its_column_type_for_fits_and_failures() {
        let fitted = Outcome {
            replicate: 1,
            fit: Ok(summary()),
            process: ProcessStats {
                seconds: Some(0.5),
                pid: Some(7),
                ..ProcessStats::default()
            },
        };
        let failed = Outcome::failed(2, "no result");
        for outcome in [&fitted, &failed] {
            for column in COLUMNS {
                let matches = matches!(
                    ((column.cell)(outcome), column.column_type),
                    (Cell::Logical(_), ColumnType::Logical)
                        | (Cell::Integer(_), ColumnType::Integer)
                        | (Cell::Double(_), ColumnType::Double)
                        | (Cell::Character(_), ColumnType::Character)
                );
                assert!(matches, "column {}", column.name);
            }
        }
        let names: Vec<&str> = COLUMNS.iter().map(|c| c.name).collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len());
        let cell =
            |name: &str, o: &Outcome| (COLUMNS.iter().find(|c| c.name == name).unwrap().cell)(o);
        assert_eq!(
            cell("reason", &failed),
            Cell::Character(Some("no result".into()))
        );
        assert_eq!(cell("neg.loglik", &failed), Cell::Double(None));
        assert_eq!(cell("iterations", &fitted), Cell::Integer(Some(9)));
        assert_eq!(cell("seconds", &fitted), Cell::Double(Some(0.5)));
    }

    #[test]
    fn estimate_rows_fill_failures_with_nan() {
        let outcomes = [
            Outcome {
                replicate: 1,
                fit: Ok(summary()),
                process: ProcessStats::default(),
            },
            Outcome::failed(2, "x"),
        ];
        let rows = estimate_rows(&outcomes, 2);
        assert_eq!(&rows[..2], &[1.5, -2.0]);
        assert!(rows[2..].iter().all(|v| v.is_nan()));
    }
}
