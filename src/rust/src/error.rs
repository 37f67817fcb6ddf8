//! Errors that reach R, each with the kind R raises it as (`?wisp_conditions`).
//!
//! The core's numerical code reports plain `String`s, which are problems with
//! what it was given; the boundary marks them [`ErrorKind::Input`]. Decoding,
//! the fork engine and file I/O say what kind of failure they hit.

use std::fmt;

/// What went wrong, as R's condition classes distinguish it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ErrorKind {
    /// Arguments, data or settings the caller can fix: `wisp_input_error`.
    Input,
    /// Stored bytes that fail their checksum, do not decode, or break the
    /// model's invariants: `wisp_corrupt_error`, a `wisp_input_error`.
    Corrupt,
    /// The machine failed: fork, pipe, poll, file I/O, memory:
    /// `wisp_system_error`.
    System,
    /// The user interrupted (Ctrl-C): `wisp_interrupted`.
    Interrupted,
}

impl ErrorKind {
    /// The name R's `rust_result()` maps to a condition class.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ErrorKind::Input => "input",
            ErrorKind::Corrupt => "corrupt",
            ErrorKind::System => "system",
            ErrorKind::Interrupted => "interrupted",
        }
    }
}

/// An error with its kind.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Error {
    pub(crate) kind: ErrorKind,
    pub(crate) message: String,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    pub(crate) fn input(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Input, message)
    }

    pub(crate) fn corrupt(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Corrupt, message)
    }

    pub(crate) fn system(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::System, message)
    }

    pub(crate) fn interrupted(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Interrupted, message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

pub(crate) type Result<T> = std::result::Result<T, Error>;
