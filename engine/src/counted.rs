//! The sink every pipeline ends in: counts what it writes, marks the calls into the
//! connector's sink (the status API's busy share), and delegates everything to it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::Value;

use rivus_sdk::prelude::*;
use rivus_sdk::Restored;

/// Live counts of a run, read by the status line and the status API.
#[derive(Debug, Default)]
pub struct Counts {
    /// Records read by the sources.
    pub read: AtomicU64,
    /// Records written by the sinks.
    pub written: AtomicU64,
    /// Records handed to the error policy.
    pub errors: AtomicU64,
    /// Errors by where they happened (`source`, `transform`, `sink`).
    pub by_kind: parking_lot::Mutex<BTreeMap<String, u64>>,
    /// Each component output's figures, by output (`orders`, `by_amount.big`).
    pub outputs: parking_lot::Mutex<BTreeMap<String, Arc<Flow>>>,
}

impl Counts {
    /// Counts one record that went to the error policy.
    pub(crate) fn error(&self, kind: &str) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        *self.by_kind.lock().entry(kind.to_owned()).or_default() += 1;
    }

    /// The figures of the output (or sink) `name`, the same for every attempt of the job.
    pub(crate) fn output(&self, name: &str) -> Arc<Flow> {
        Arc::clone(self.outputs.lock().entry(name.to_owned()).or_default())
    }
}

/// What passed one output of a component (a sink: what it wrote), and — a sink — how many of
/// its subtasks are in a call to their connector now, which the status API samples to say how
/// busy each sink is: the slow branch of a graph is the one whose sink is always in a call.
#[derive(Debug, Default)]
pub struct Flow {
    /// Records that passed it.
    pub records: AtomicU64,
    /// A sink's subtasks in a call to their connector now.
    pub in_call: AtomicU64,
}

impl Flow {
    /// Marks a call to the connector until the guard drops (also when the call is cancelled).
    fn busy(&self) -> InCall<'_> {
        self.in_call.fetch_add(1, Ordering::Relaxed);
        InCall(self)
    }
}

struct InCall<'a>(&'a Flow);

impl Drop for InCall<'_> {
    fn drop(&mut self) {
        self.0.in_call.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A sink that counts what `S` writes.
pub(crate) struct Counted<S> {
    pub inner: S,
    pub counts: Arc<Counts>,
    /// This sink's own figures.
    pub flow: Arc<Flow>,
}

#[async_trait]
impl<S: SinkFunction<Value>> RichFunction for Counted<S> {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        self.inner.open(ctx).await
    }

    async fn close(&mut self) -> Result<()> {
        self.inner.close().await
    }
}

#[async_trait]
impl<S: SinkFunction<Value>> CheckpointedFunction for Counted<S> {
    type State = S::State;

    async fn initialize_state(&mut self, restored: Restored<S::State>) -> Result<()> {
        self.inner.initialize_state(restored).await
    }

    async fn snapshot_state(&mut self, checkpoint_id: u64) -> Result<S::State> {
        let _busy = self.flow.busy();
        self.inner.snapshot_state(checkpoint_id).await
    }
}

#[async_trait]
impl<S: SinkFunction<Value>> CheckpointListener for Counted<S> {
    async fn notify_checkpoint_complete(&mut self, id: u64) -> Result<()> {
        let _busy = self.flow.busy();
        self.inner.notify_checkpoint_complete(id).await
    }

    async fn notify_checkpoint_aborted(&mut self, id: u64) -> Result<()> {
        self.inner.notify_checkpoint_aborted(id).await
    }
}

#[async_trait]
impl<S: SinkFunction<Value>> SinkFunction<Value> for Counted<S> {
    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        self.inner.delivery_guarantee()
    }

    fn commits_source_positions(&self) -> bool {
        self.inner.commits_source_positions()
    }

    async fn invoke(&mut self, value: Value, ctx: &SinkContext) -> Result<()> {
        {
            let _busy = self.flow.busy();
            self.inner.invoke(value, ctx).await?;
        }
        self.counts.written.fetch_add(1, Ordering::Relaxed);
        self.flow.records.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    async fn invoke_batch(&mut self, values: Vec<Value>, ctx: &mut SinkContext) -> Result<()> {
        let n = values.len() as u64;
        {
            let _busy = self.flow.busy();
            self.inner.invoke_batch(values, ctx).await?;
        }
        self.counts.written.fetch_add(n, Ordering::Relaxed);
        self.flow.records.fetch_add(n, Ordering::Relaxed);
        Ok(())
    }

    async fn finish(&mut self) -> Result<()> {
        let _busy = self.flow.busy();
        self.inner.finish().await
    }
}
