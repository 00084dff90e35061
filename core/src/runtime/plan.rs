//! A built job's parts, handed from the [`Pipeline`](super::Pipeline) builder to the
//! [`Job`](super::Job) that runs them: its tasks, the stateful operators, the checkpoint
//! settings, and the job-wide [`Counters`] and completed-checkpoint watch.

use std::sync::Arc;
use std::time::Duration;

use super::counters::Counters;
use super::stall::{Stall, StallSettings};
use super::task::TaskSpec;
use crate::activity::Activities;
use crate::checkpoint::CheckpointConfig;

/// Everything a job needs to run, once its pipeline is complete.
pub(crate) struct Plan {
    pub name: String,
    /// This process's worker id in worker mode.
    pub worker: Option<Arc<str>>,
    pub checkpoint: Option<CheckpointConfig>,
    pub buffer_timeout: Duration,
    pub tasks: Vec<TaskSpec>,
    /// Stateful operators with their parallelism (they key checkpointed state).
    pub operators: Vec<(String, usize)>,
    pub counters: Arc<Counters>,
    pub completed: Arc<tokio::sync::watch::Sender<Option<u64>>>,
    /// The recent checkpoints (a supervisor shares its own with every attempt).
    pub history: Arc<super::CheckpointHistory>,
    /// When the job counts as stalled.
    pub stall: StallSettings,
    /// What each task is in now (a supervisor shares its own with every attempt).
    pub activities: Arc<Activities>,
    /// The current stall, if any (shared like `activities`).
    pub stalls: Arc<tokio::sync::watch::Sender<Option<Stall>>>,
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan")
            .field("name", &self.name)
            .field("checkpoint", &self.checkpoint)
            .field("tasks", &self.tasks.len())
            .field("operators", &self.operators)
            .finish()
    }
}
