//! The conformance suites: [`SourceSuite`], [`BoundedSourceSuite`] and [`SinkSuite`] run a
//! connector through the cases every connector must pass (splits and parallelism, stop and
//! restore, rescaling, idle readers, failures before and after completed checkpoints, inside a
//! checkpoint and during a restore, bad records, lifecycle) and hold it to the delivery
//! guarantee it declares.
//!
//! A connector author implements [`SourceExternal`] or [`SinkExternal`] once — how to create
//! the connector and how to write to or read from the external system — and calls
//! `run_all().await`, which returns a [`SuiteReport`] (one row per case and parallelism; a
//! case that does not apply is *skipped, with the reason*, never passed) and prints it.

mod bounded;
mod dead_letters;
mod external;
mod observed;
mod records;
mod report;
mod runner;
mod sink;
mod sink_failures;
mod source;
mod source_failures;

pub use bounded::BoundedSourceSuite;
pub use dead_letters::MemoryDeadLetters;
pub use external::{SinkExternal, SourceExternal};
pub use observed::{LifecycleLog, ObservedSink, ObservedSource};
pub use records::{test_record, verify, Verdict};
pub use report::{CaseOutcome, CaseRow, SuiteReport};
pub use sink::SinkSuite;
pub use source::SourceSuite;

use std::time::Duration;

/// A failed suite case: which case and what went wrong, with the records concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuiteFailure {
    /// The case, e.g. `source::stop_and_restore`.
    pub case: String,
    /// The explanation (with the parallelism it ran at).
    pub message: String,
    /// From `run_all`: every case that ran, with its outcome.
    pub report: Option<SuiteReport>,
}

impl std::fmt::Display for SuiteFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "conformance case `{}` failed: {}",
            self.case, self.message
        )?;
        if let Some(r) = &self.report {
            write!(f, "\n{r}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SuiteFailure {}

pub(crate) fn failure(case: &str, message: impl std::fmt::Display) -> SuiteFailure {
    SuiteFailure {
        case: case.to_owned(),
        message: message.to_string(),
        report: None,
    }
}

/// How long a case waits for records to arrive before it fails.
pub(crate) const ARRIVAL_TIMEOUT: Duration = Duration::from_secs(60);
