//! [`SectionContext`]: what a section is told about the file around it.

use std::time::Duration;

use rivus_sdk::error_policy::ErrorPolicy;

/// What every section gets when it is built, checked or run: the job settings a connector may
/// need. Not where the section stands: a section names its fields relative to itself
/// (`tls.ca_file`), and the caller that placed it prefixes its path once
/// ([`Error::under`](rivus_sdk::Error::under), [`SourcePlan::under`](super::SourcePlan::under)).
#[derive(Debug, Clone)]
pub struct SectionContext {
    /// The job's name (keys its checkpoints; the Kafka source's default group).
    pub job: String,
    /// Subtasks of the section's stage.
    pub parallelism: usize,
    /// `rivus run --worker ID`: this process is one worker of the job.
    pub worker: Option<String>,
    /// What to do with records the connector cannot read or write.
    pub policy: ErrorPolicy,
    /// The checkpoint interval, `None` without checkpoints.
    pub checkpoint_interval: Option<Duration>,
    /// `rivus validate`: build without creating or contacting anything.
    pub dry: bool,
    /// Sources add each record's metadata (`@metadata`, see [`rivus_sdk::metadata`]):
    /// something in the file reads it.
    pub metadata: bool,
}

impl SectionContext {
    /// A context for a section of job `job`: parallelism 1, no worker, the `fail` policy, no
    /// checkpoints.
    pub fn new(job: impl Into<String>) -> Self {
        SectionContext {
            job: job.into(),
            parallelism: 1,
            worker: None,
            policy: ErrorPolicy::Fail,
            checkpoint_interval: None,
            dry: false,
            metadata: false,
        }
    }
}
