//! Checkpoints: what a completed checkpoint holds, how often one is taken, and where it is
//! stored (the [`StateBackend`] trait, with an in-memory and a local-directory backend), and
//! who may write there (one owner per store: [`OwnerLock`]).

mod backend;
mod damaged;
pub mod format;
mod fs;
mod owner;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

pub use backend::{MemoryStateBackend, StateBackend};
pub use damaged::OnDamaged;
pub use fs::FsStateBackend;
pub use owner::{Holder, OwnerLock};

use crate::error::{Error, Result};

/// The states of every subtask of every operator, for one checkpoint id.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CompletedCheckpoint {
    /// The job that took it.
    pub job: String,
    /// Increasing id; ids continue across restores.
    pub checkpoint_id: u64,
    /// Wall-clock time the checkpoint was triggered, ms since the Unix epoch.
    pub timestamp_ms: u64,
    /// Operator name → one state per subtask (`null` when a subtask stored nothing).
    pub operators: BTreeMap<String, Vec<Option<serde_json::Value>>>,
}

/// How checkpoints are taken.
#[derive(Clone)]
pub struct CheckpointConfig {
    /// Time between the end of one checkpoint and the trigger of the next.
    pub interval: Duration,
    /// A checkpoint not acknowledged by every task within this time is aborted.
    pub timeout: Duration,
    /// Where completed checkpoints are stored and restored from.
    pub backend: Arc<dyn StateBackend>,
    /// Take a final checkpoint when the sources end or the job is stopped, so that
    /// transactional sinks commit everything (default true).
    pub final_checkpoint: bool,
    /// The first checkpoint of a run (a start or a restart) is triggered this long after the
    /// first record leaves a source, when that is sooner than `interval` after the start
    /// (default: a tenth of the interval). An exactly-once sink's output becomes visible at a
    /// checkpoint, so results then appear soon after a start instead of one interval later,
    /// and no checkpoint is spent before there is anything in it. `None`: the first waits an
    /// interval like the others.
    pub first_checkpoint_delay: Option<Duration>,
}

impl std::fmt::Debug for CheckpointConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckpointConfig")
            .field("interval", &self.interval)
            .field("timeout", &self.timeout)
            .field("backend", &self.backend.describe())
            .field("final_checkpoint", &self.final_checkpoint)
            .field("first_checkpoint_delay", &self.first_checkpoint_delay)
            .finish()
    }
}

impl CheckpointConfig {
    /// Checkpoints every `interval` into `backend`, with a 10-minute timeout.
    pub fn new(interval: Duration, backend: Arc<dyn StateBackend>) -> Self {
        CheckpointConfig {
            interval,
            timeout: Duration::from_secs(600),
            backend,
            final_checkpoint: true,
            first_checkpoint_delay: Some(interval / 10),
        }
    }

    setters! {
        /// The same config with another delay of the first checkpoint after the first record
        /// (`None`: one interval after the start, like the others).
        with_first_checkpoint_delay(delay: Option<Duration>) => first_checkpoint_delay;

        /// The same config with another timeout.
        with_timeout(timeout: Duration) => timeout;
    }

    /// Checks the settings.
    pub fn validate(&self) -> Result<()> {
        if self.interval.is_zero() {
            return Err(Error::config("checkpoint.interval", "must be positive"));
        }
        if self.timeout.is_zero() {
            return Err(Error::config("checkpoint.timeout", "must be positive"));
        }
        Ok(())
    }
}
