//! The job-wide record counts that sources and sinks add to and the job summary reports.

use std::sync::atomic::AtomicU64;

/// Job-wide record counts, reported in the [`JobSummary`](super::JobSummary).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub read: AtomicU64,
    pub written: AtomicU64,
}
