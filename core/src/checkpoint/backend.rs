//! The [`StateBackend`] trait and the in-memory backend.

use std::sync::Arc;

use parking_lot::Mutex;

use async_trait::async_trait;

use super::{CompletedCheckpoint, Holder, OwnerLock};
use crate::error::Result;

/// Durable storage for completed checkpoints.
#[async_trait]
pub trait StateBackend: Send + Sync {
    /// Stores `checkpoint` durably; returns its stored size in bytes. Only after this returns
    /// may the checkpoint be reported complete.
    async fn store(&self, checkpoint: &CompletedCheckpoint) -> Result<u64>;

    /// The newest complete checkpoint of `job`, if any. One that cannot be read is refused,
    /// naming it, unless the backend was told to restore an older one ([`super::OnDamaged`]).
    async fn latest(&self, job: &str) -> Result<Option<CompletedCheckpoint>>;

    /// A short description for logs (`fs:/var/lib/rivus/orders`, `memory`).
    fn describe(&self) -> String;

    /// Takes the store for `holder` for as long as the returned lock lives, or refuses with
    /// [`Error::Owner`](crate::Error::Owner) naming the process that holds it. A job takes
    /// its store before it restores, so two processes of one job never both write. The
    /// default: a store only this process sees, nothing to take.
    async fn lock(&self, holder: &Holder) -> Result<OwnerLock> {
        let _ = holder;
        Ok(OwnerLock::none())
    }

    /// A directory on this machine where functions keep files that their checkpointed state
    /// refers to (a sink's write-ahead log), kept as long as the checkpoints are. `None`
    /// (the default): the backend has no such place, and a function picks its own.
    fn local_dir(&self) -> Option<std::path::PathBuf> {
        None
    }
}

/// Keeps checkpoints in memory. Clones share storage, so a job restarted in the same process
/// (as tests do) restores from it; nothing survives the process.
#[derive(Debug, Clone, Default)]
pub struct MemoryStateBackend {
    stored: Arc<Mutex<Vec<CompletedCheckpoint>>>,
}

impl MemoryStateBackend {
    /// An empty backend.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every checkpoint stored so far, oldest first.
    pub fn checkpoints(&self) -> Vec<CompletedCheckpoint> {
        self.stored.lock().clone()
    }
}

#[async_trait]
impl StateBackend for MemoryStateBackend {
    async fn store(&self, checkpoint: &CompletedCheckpoint) -> Result<u64> {
        let size = serde_json::to_vec(checkpoint)
            .map(|v| v.len() as u64)
            .unwrap_or(0);
        self.stored.lock().push(checkpoint.clone());
        Ok(size)
    }

    async fn latest(&self, job: &str) -> Result<Option<CompletedCheckpoint>> {
        Ok(self
            .stored
            .lock()
            .iter()
            .filter(|c| c.job == job)
            .max_by_key(|c| c.checkpoint_id)
            .cloned())
    }

    fn describe(&self) -> String {
        "memory".to_owned()
    }
}
