//! The lifecycle contract every connector implements — Flink's `RichFunction`,
//! `SourceFunction`, `SinkFunction`, `CheckpointedFunction` and `CheckpointListener`, in async
//! Rust.
//!
//! Call order for one parallel instance (a *subtask*):
//! 1. restore: [`SourceFunction::restore_state`] or [`CheckpointedFunction::initialize_state`],
//!    told whether this is a restore;
//! 2. [`RichFunction::open`], before any record;
//! 3. [`SourceFunction::run`] / [`SinkFunction::invoke_batch`], with snapshots and
//!    checkpoint notifications between records;
//! 4. [`SinkFunction::finish`] at end of input: every upstream subtask ended its input (not
//!    after a failure, this subtask's or any upstream one's — a transactional sink may commit
//!    in `finish`);
//! 5. [`RichFunction::close`], exactly once — also after an error or cancellation, if `open`
//!    was called.

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::context::{RuntimeContext, SinkContext};
use crate::error::Result;
use crate::guarantee::DeliveryGuarantee;
use crate::runtime::{CheckpointEvent, SourceContext};
use crate::state::Restored;

/// Open/close around the life of a function instance.
#[async_trait]
pub trait RichFunction: Send {
    /// Called once before the first record: connect, create clients, start threads.
    async fn open(&mut self, _ctx: &RuntimeContext) -> Result<()> {
        Ok(())
    }

    /// Called exactly once at the end, after success, failure or cancellation. Release
    /// everything; do not assume `finish` ran.
    async fn close(&mut self) -> Result<()> {
        Ok(())
    }
}

/// A source of records: reads an external system and emits through its [`SourceContext`].
///
/// A source keeps its read positions (offsets, entry ids, last key) in its typed
/// [`State`](SourceFunction::State) inside the context (`ctx.state_mut()`), updated together
/// with each emitted record. When a checkpoint is triggered, the runtime takes the snapshot
/// inside `ctx.collect` (or while the source waits in `ctx.wait_for`), so the state always
/// matches exactly the records emitted before the barrier — Flink's mailbox model.
///
/// Completed and aborted checkpoints reach the source through
/// [`SourceContext::take_events`], with the state snapshot taken for that checkpoint: that is
/// where a source commits offsets or acknowledges messages to its broker.
#[async_trait]
pub trait SourceFunction: RichFunction {
    /// The record type emitted.
    type Out: Send + 'static;
    /// The checkpointed position of one subtask.
    type State: Serialize + DeserializeOwned + Default + Clone + Send + 'static;

    /// What this source promises when used with checkpoints.
    fn delivery_guarantee(&self) -> DeliveryGuarantee;

    /// Whether a sink chained into this source's task may commit the source's positions in
    /// the sink's own transaction, as the record of what was read (Kafka's consumer-group
    /// offsets in a Kafka transaction, KIP-447). With such a sink the job's guarantee is the
    /// sink's, also across workers (see [`SinkFunction::commits_source_positions`]). Default
    /// false.
    fn offers_positions_to_sink(&self) -> bool {
        false
    }

    /// Chooses this subtask's starting state from what was restored.
    ///
    /// `restored` holds the states of every subtask of the previous run (the union, so a source
    /// can redistribute positions when the parallelism changed). The default takes its own
    /// subtask's state when the parallelism is unchanged, starts from `Default` on a fresh
    /// start, and refuses to guess when the parallelism changed: override it to support
    /// rescaling.
    fn restore_state(&mut self, restored: Restored<Self::State>) -> Result<Self::State> {
        restored.own_or_default()
    }

    /// Reads and emits until the input ends (a bounded source returns `Ok`), the context says
    /// to stop ([`SourceContext::is_stopping`]), or an error happens.
    ///
    /// Every wait on the outside world should go through [`SourceContext::wait_for`], so that
    /// checkpoints and stop requests are served while the source is idle.
    async fn run(&mut self, ctx: &mut SourceContext<Self::Out, Self::State>) -> Result<()>;

    /// Receives the checkpoint events that `run` did not take: those pending when it
    /// returned and those of the final checkpoint, taken after it. Called before `close`, and
    /// only when `run` succeeded. Commit offsets or acknowledge messages here as in `run`.
    async fn on_checkpoint_events(
        &mut self,
        _events: Vec<CheckpointEvent<Self::State>>,
    ) -> Result<()> {
        Ok(())
    }
}

/// Snapshot and restore of a function's state (for sinks and operators, which the runtime calls
/// between records).
#[async_trait]
pub trait CheckpointedFunction: Send {
    /// The checkpointed state of one subtask; `()` for stateless functions.
    type State: Serialize + DeserializeOwned + Send + 'static;

    /// Called once before `open`, with the states restored from the newest complete
    /// checkpoint (empty on a fresh start).
    async fn initialize_state(&mut self, _restored: Restored<Self::State>) -> Result<()> {
        Ok(())
    }

    /// Called when checkpoint `checkpoint_id`'s barrier reaches this function: make everything
    /// received so far durable (flush, pre-commit) and return the state to store.
    async fn snapshot_state(&mut self, checkpoint_id: u64) -> Result<Self::State>;
}

/// Notification that a checkpoint completed or was aborted.
#[async_trait]
pub trait CheckpointListener: Send {
    /// Checkpoint `checkpoint_id` is durably stored: commit what was pre-committed for it (and
    /// for any earlier checkpoint that was not notified: notifications can be subsumed).
    async fn notify_checkpoint_complete(&mut self, _checkpoint_id: u64) -> Result<()> {
        Ok(())
    }

    /// Checkpoint `checkpoint_id` will never complete.
    async fn notify_checkpoint_aborted(&mut self, _checkpoint_id: u64) -> Result<()> {
        Ok(())
    }
}

/// A destination for records.
#[async_trait]
pub trait SinkFunction<In: Send + 'static>:
    RichFunction + CheckpointedFunction + CheckpointListener
{
    /// What this sink promises when used with checkpoints.
    fn delivery_guarantee(&self) -> DeliveryGuarantee;

    /// Whether this sink commits the positions of a source chained into its task in its own
    /// transaction, together with the records, when the source offers them
    /// ([`SourceFunction::offers_positions_to_sink`]). Then what is written and what counts
    /// as read change in one step: the job's guarantee is this sink's, also when several
    /// workers share the source. Default false.
    fn commits_source_positions(&self) -> bool {
        false
    }

    /// Writes (or buffers) one record.
    async fn invoke(&mut self, value: In, ctx: &SinkContext) -> Result<()>;

    /// Writes (or buffers) a batch of records, in order. The runtime always calls this; the
    /// default calls [`invoke`](SinkFunction::invoke) for each record. Override it when the
    /// external system takes batches.
    async fn invoke_batch(&mut self, values: Vec<In>, ctx: &mut SinkContext) -> Result<()> {
        for (i, v) in values.into_iter().enumerate() {
            ctx.set_index(i);
            self.invoke(v, ctx).await?;
        }
        Ok(())
    }

    /// Called once when the input ended normally (every upstream subtask finished; never
    /// after a failure anywhere upstream): flush what is buffered.
    async fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}
