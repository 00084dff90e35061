//! The conformance suites: [`SourceSuite`], [`BoundedSourceSuite`] and [`SinkSuite`] run a
//! connector through the
//! cases every connector must pass (splits and parallelism, stop and restore, rescaling, idle
//! readers, failures between write and commit, bad records, lifecycle) and hold it to the
//! delivery guarantee it declares.
//!
//! A connector author implements [`SourceExternal`] or [`SinkExternal`] once — how to create
//! the connector and how to write to or read from the external system — and calls
//! `run_all().await`.

mod bounded;
mod observed;
mod records;
mod sink;
mod source;

pub use bounded::BoundedSourceSuite;
pub use observed::{LifecycleLog, ObservedSink, ObservedSource};
pub use records::{test_record, verify, Verdict};
pub use sink::{SinkExternal, SinkSuite};
pub use source::{SourceExternal, SourceSuite};

use std::time::Duration;

/// A failed suite case: which case and what went wrong, with the records concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuiteFailure {
    /// The case, e.g. `source::stop_and_restore`.
    pub case: String,
    /// The explanation.
    pub message: String,
}

impl std::fmt::Display for SuiteFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "conformance case `{}` failed: {}",
            self.case, self.message
        )
    }
}

impl std::error::Error for SuiteFailure {}

pub(crate) fn failure(case: &str, message: impl std::fmt::Display) -> SuiteFailure {
    SuiteFailure {
        case: case.to_owned(),
        message: message.to_string(),
    }
}

/// How long a case waits for records to arrive before it fails.
pub(crate) const ARRIVAL_TIMEOUT: Duration = Duration::from_secs(60);
