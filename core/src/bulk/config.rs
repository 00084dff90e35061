//! Settings of a [`BulkProcessor`](super::BulkProcessor), validated at start.

use std::time::Duration;

use crate::backoff::BackoffPolicy;
use crate::error::{Error, Result};

/// When a [`BulkProcessor`](super::BulkProcessor) sends, how many bulks may be in flight, and
/// how failures are retried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BulkConfig {
    /// Send once this many requests are buffered (0: no count trigger).
    pub max_actions: usize,
    /// Send once the buffered requests' estimated size reaches this many bytes (0: no size
    /// trigger).
    pub max_bytes: usize,
    /// Send whatever is buffered at least this often (`None`: no timer).
    pub flush_interval: Option<Duration>,
    /// Bulks in flight at once (at least 1). `add` waits while this many are outstanding,
    /// which is what back-pressures a fast producer.
    pub concurrent_requests: usize,
    /// Retries for bulks or items the sender marks retryable.
    pub backoff: BackoffPolicy,
}

impl Default for BulkConfig {
    /// 1000 actions, 5 MiB, a 1 s timer, 1 bulk in flight, default exponential backoff.
    fn default() -> Self {
        BulkConfig {
            max_actions: 1000,
            max_bytes: 5 << 20,
            flush_interval: Some(Duration::from_secs(1)),
            concurrent_requests: 1,
            backoff: BackoffPolicy::default(),
        }
    }
}

impl BulkConfig {
    /// Checks the settings. They sit at a sink's `bulk` field: errors name `bulk.max_actions`
    /// and so on, relative to the sink.
    pub fn validate(&self) -> Result<()> {
        if self.max_actions == 0 && self.max_bytes == 0 {
            return Err(Error::config(
                "bulk.max_actions",
                "max_actions and max_bytes are both 0: the buffer would grow without bound; set at least one",
            ));
        }
        if self.concurrent_requests == 0 {
            return Err(Error::config(
                "bulk.concurrent_requests",
                "must be at least 1",
            ));
        }
        if self.flush_interval == Some(Duration::ZERO) {
            return Err(Error::config(
                "bulk.flush_interval",
                "must be positive (leave it unset to disable the timer)",
            ));
        }
        Ok(())
    }
}
