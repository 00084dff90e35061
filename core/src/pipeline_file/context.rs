//! [`SectionContext`]: what a section is told about the file around it.

use std::time::Duration;

use crate::error::Error;
use crate::error_policy::ErrorPolicy;

/// What every section gets when it is built, checked or run: where it stands in the file and
/// the job settings a connector may need.
#[derive(Debug, Clone)]
pub struct SectionContext {
    /// The section's field path in the file (`source`, `sink`, `errors.destination`): every
    /// configuration error names a field below it (`sink.tls.ca_file`).
    pub path: String,
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
}

impl SectionContext {
    /// A context for the section at `path` of job `job`: parallelism 1, no worker, the
    /// `fail` policy, no checkpoints.
    pub fn new(path: impl Into<String>, job: impl Into<String>) -> Self {
        SectionContext {
            path: path.into(),
            job: job.into(),
            parallelism: 1,
            worker: None,
            policy: ErrorPolicy::Fail,
            checkpoint_interval: None,
            dry: false,
        }
    }

    /// The path of `field` of this section (`sink` + `tls.ca_file` → `sink.tls.ca_file`).
    pub fn field(&self, field: &str) -> String {
        format!("{}.{field}", self.path)
    }

    /// A configuration error at `field` of this section.
    pub fn error(&self, field: &str, message: impl std::fmt::Display) -> Error {
        Error::config(self.field(field), message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_field_below_the_section() {
        let ctx = SectionContext::new("errors.destination", "j");
        assert_eq!(ctx.field("topic"), "errors.destination.topic");
        let e = ctx.error("topic", "must not be empty").to_string();
        assert!(e.contains("errors.destination.topic"), "{e}");
    }
}
