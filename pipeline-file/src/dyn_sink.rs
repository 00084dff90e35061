//! [`DynSink`]: any sink of JSON records behind one type, its state kept as the JSON value the
//! runtime stores anyway — so a registry of pipeline-file sections can hold every connector's
//! sink, and wrappers (the CLI's counting sink) need no generic over it.

use async_trait::async_trait;
use serde_json::Value;

use rivus_sdk::context::{RuntimeContext, SinkContext};
use rivus_sdk::error::{Error, Result};
use rivus_sdk::function::{CheckpointListener, CheckpointedFunction, RichFunction, SinkFunction};
use rivus_sdk::guarantee::DeliveryGuarantee;
use rivus_sdk::state::Restored;

/// The object-safe face of a [`SinkFunction<Value>`], state as JSON.
#[async_trait]
trait ErasedSink: Send {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()>;
    async fn close(&mut self) -> Result<()>;
    async fn initialize_state(&mut self, restored: Restored<Value>) -> Result<()>;
    async fn snapshot_state(&mut self, checkpoint_id: u64, operator: &str) -> Result<Value>;
    async fn notify_checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<()>;
    async fn notify_checkpoint_aborted(&mut self, checkpoint_id: u64) -> Result<()>;
    fn delivery_guarantee(&self) -> DeliveryGuarantee;
    fn commits_source_positions(&self) -> bool;
    async fn invoke(&mut self, value: Value, ctx: &SinkContext) -> Result<()>;
    async fn invoke_batch(&mut self, values: Vec<Value>, ctx: &mut SinkContext) -> Result<()>;
    async fn finish(&mut self) -> Result<()>;
}

#[async_trait]
impl<S: SinkFunction<Value>> ErasedSink for S {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        RichFunction::open(self, ctx).await
    }

    async fn close(&mut self) -> Result<()> {
        RichFunction::close(self).await
    }

    async fn initialize_state(&mut self, restored: Restored<Value>) -> Result<()> {
        let operator = restored.operator().to_owned();
        let mut failed = None;
        let typed = restored.map(|v| match serde_json::from_value::<S::State>(v) {
            Ok(s) => Some(s),
            Err(e) => {
                failed.get_or_insert(e);
                None
            }
        });
        if let Some(source) = failed {
            return Err(Error::State { operator, source });
        }
        CheckpointedFunction::initialize_state(self, typed.flatten()).await
    }

    async fn snapshot_state(&mut self, checkpoint_id: u64, operator: &str) -> Result<Value> {
        let state = CheckpointedFunction::snapshot_state(self, checkpoint_id).await?;
        serde_json::to_value(state).map_err(|source| Error::State {
            operator: operator.to_owned(),
            source,
        })
    }

    async fn notify_checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<()> {
        CheckpointListener::notify_checkpoint_complete(self, checkpoint_id).await
    }

    async fn notify_checkpoint_aborted(&mut self, checkpoint_id: u64) -> Result<()> {
        CheckpointListener::notify_checkpoint_aborted(self, checkpoint_id).await
    }

    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        SinkFunction::delivery_guarantee(self)
    }

    fn commits_source_positions(&self) -> bool {
        SinkFunction::commits_source_positions(self)
    }

    async fn invoke(&mut self, value: Value, ctx: &SinkContext) -> Result<()> {
        SinkFunction::invoke(self, value, ctx).await
    }

    async fn invoke_batch(&mut self, values: Vec<Value>, ctx: &mut SinkContext) -> Result<()> {
        SinkFunction::invoke_batch(self, values, ctx).await
    }

    async fn finish(&mut self) -> Result<()> {
        SinkFunction::finish(self).await
    }
}

/// Any [`SinkFunction<Value>`], its concrete type hidden. Its state is the inner sink's state
/// as a JSON value — exactly what the runtime stores for the inner sink, so checkpoints
/// taken with and without the box restore into each other.
pub struct DynSink {
    inner: Box<dyn ErasedSink>,
    /// The task's name, for state errors (known from `open`).
    task: String,
}

impl DynSink {
    /// Boxes `sink`.
    pub fn new<S: SinkFunction<Value> + 'static>(sink: S) -> Self {
        DynSink {
            inner: Box::new(sink),
            task: "sink".to_owned(),
        }
    }
}

impl std::fmt::Debug for DynSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynSink").finish_non_exhaustive()
    }
}

#[async_trait]
impl RichFunction for DynSink {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        self.task = ctx.task_name().to_owned();
        self.inner.open(ctx).await
    }

    async fn close(&mut self) -> Result<()> {
        self.inner.close().await
    }
}

#[async_trait]
impl CheckpointedFunction for DynSink {
    type State = Value;

    async fn initialize_state(&mut self, restored: Restored<Value>) -> Result<()> {
        self.inner.initialize_state(restored).await
    }

    async fn snapshot_state(&mut self, checkpoint_id: u64) -> Result<Value> {
        self.inner.snapshot_state(checkpoint_id, &self.task).await
    }
}

#[async_trait]
impl CheckpointListener for DynSink {
    async fn notify_checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<()> {
        self.inner.notify_checkpoint_complete(checkpoint_id).await
    }

    async fn notify_checkpoint_aborted(&mut self, checkpoint_id: u64) -> Result<()> {
        self.inner.notify_checkpoint_aborted(checkpoint_id).await
    }
}

#[async_trait]
impl SinkFunction<Value> for DynSink {
    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        self.inner.delivery_guarantee()
    }

    fn commits_source_positions(&self) -> bool {
        self.inner.commits_source_positions()
    }

    async fn invoke(&mut self, value: Value, ctx: &SinkContext) -> Result<()> {
        self.inner.invoke(value, ctx).await
    }

    async fn invoke_batch(&mut self, values: Vec<Value>, ctx: &mut SinkContext) -> Result<()> {
        self.inner.invoke_batch(values, ctx).await
    }

    async fn finish(&mut self) -> Result<()> {
        self.inner.finish().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts what it received; its state is the count.
    #[derive(Default)]
    struct Counter(u64);

    #[async_trait]
    impl RichFunction for Counter {}

    #[async_trait]
    impl CheckpointedFunction for Counter {
        type State = u64;

        async fn initialize_state(&mut self, restored: Restored<u64>) -> Result<()> {
            self.0 = restored.union().sum();
            Ok(())
        }

        async fn snapshot_state(&mut self, _id: u64) -> Result<u64> {
            Ok(self.0)
        }
    }

    #[async_trait]
    impl CheckpointListener for Counter {}

    #[async_trait]
    impl SinkFunction<Value> for Counter {
        fn delivery_guarantee(&self) -> DeliveryGuarantee {
            DeliveryGuarantee::ExactlyOnce
        }

        async fn invoke(&mut self, _value: Value, _ctx: &SinkContext) -> Result<()> {
            self.0 += 1;
            Ok(())
        }
    }

    #[tokio::test]
    async fn the_boxed_state_is_the_inner_state_as_json() {
        let mut sink = DynSink::new(Counter::default());
        let restored = Restored::from_checkpoint("sink", 0, 1, 4, vec![Some(Value::from(41))]);
        CheckpointedFunction::initialize_state(&mut sink, restored)
            .await
            .unwrap();
        let state = CheckpointedFunction::snapshot_state(&mut sink, 5)
            .await
            .unwrap();
        assert_eq!(state, Value::from(41));
        assert_eq!(
            SinkFunction::delivery_guarantee(&sink),
            DeliveryGuarantee::ExactlyOnce
        );

        let bad = Restored::from_checkpoint("sink", 0, 1, 4, vec![Some(Value::from("x"))]);
        let mut other = DynSink::new(Counter::default());
        let err = CheckpointedFunction::initialize_state(&mut other, bad)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("state of `sink`"), "{err}");
    }
}
