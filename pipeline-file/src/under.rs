//! [`Under`]: a function placed at a section of a pipeline file, its errors named there — a
//! connector raises paths relative to itself (`exactly_once`), and the errors it raises when
//! it opens, runs or checkpoints name the field in the user's file (`sink.exactly_once`).
//! The plans apply it ([`SourcePlan::attach`](super::SourcePlan::attach),
//! [`SinkPlan::make`](super::SinkPlan::make)); connectors never do.

use async_trait::async_trait;

use rivus_sdk::context::{RuntimeContext, SinkContext};
use rivus_sdk::error::Result;
use rivus_sdk::function::{
    CheckpointListener, CheckpointedFunction, RichFunction, SinkFunction, SourceFunction,
};
use rivus_sdk::guarantee::DeliveryGuarantee;
use rivus_sdk::runtime::{CheckpointEvent, SourceContext};
use rivus_sdk::state::Restored;

/// `inner` with every error placed under `path` ([`Error::under`](rivus_sdk::Error::under)).
/// Everything else passes through unchanged.
#[derive(Debug, Clone)]
pub(crate) struct Under<F> {
    inner: F,
    path: String,
}

impl<F> Under<F> {
    /// `inner`, its errors placed under `path`.
    pub(crate) fn new(inner: F, path: impl Into<String>) -> Self {
        Under {
            inner,
            path: path.into(),
        }
    }

    fn fix<T>(&self, r: Result<T>) -> Result<T> {
        r.map_err(|e| e.under(&self.path))
    }
}

#[async_trait]
impl<F: RichFunction> RichFunction for Under<F> {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        let r = self.inner.open(ctx).await;
        self.fix(r)
    }

    async fn close(&mut self) -> Result<()> {
        let r = self.inner.close().await;
        self.fix(r)
    }
}

#[async_trait]
impl<F: SourceFunction> SourceFunction for Under<F> {
    type Out = F::Out;
    type State = F::State;

    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        self.inner.delivery_guarantee()
    }

    fn offers_positions_to_sink(&self) -> bool {
        self.inner.offers_positions_to_sink()
    }

    fn restore_state(&mut self, restored: Restored<F::State>) -> Result<F::State> {
        let r = self.inner.restore_state(restored);
        self.fix(r)
    }

    async fn run(&mut self, ctx: &mut SourceContext<F::Out, F::State>) -> Result<()> {
        let r = self.inner.run(ctx).await;
        self.fix(r)
    }

    async fn on_checkpoint_events(&mut self, events: Vec<CheckpointEvent<F::State>>) -> Result<()> {
        let r = self.inner.on_checkpoint_events(events).await;
        self.fix(r)
    }
}

#[async_trait]
impl<F: CheckpointedFunction> CheckpointedFunction for Under<F> {
    type State = F::State;

    async fn initialize_state(&mut self, restored: Restored<F::State>) -> Result<()> {
        let r = self.inner.initialize_state(restored).await;
        self.fix(r)
    }

    async fn snapshot_state(&mut self, checkpoint_id: u64) -> Result<F::State> {
        let r = self.inner.snapshot_state(checkpoint_id).await;
        self.fix(r)
    }
}

#[async_trait]
impl<F: CheckpointListener> CheckpointListener for Under<F> {
    async fn notify_checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<()> {
        let r = self.inner.notify_checkpoint_complete(checkpoint_id).await;
        self.fix(r)
    }

    async fn notify_checkpoint_aborted(&mut self, checkpoint_id: u64) -> Result<()> {
        let r = self.inner.notify_checkpoint_aborted(checkpoint_id).await;
        self.fix(r)
    }
}

#[async_trait]
impl<In: Send + 'static, F: SinkFunction<In>> SinkFunction<In> for Under<F> {
    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        self.inner.delivery_guarantee()
    }

    fn commits_source_positions(&self) -> bool {
        self.inner.commits_source_positions()
    }

    async fn invoke(&mut self, value: In, ctx: &SinkContext) -> Result<()> {
        let r = self.inner.invoke(value, ctx).await;
        self.fix(r)
    }

    async fn invoke_batch(&mut self, values: Vec<In>, ctx: &mut SinkContext) -> Result<()> {
        let r = self.inner.invoke_batch(values, ctx).await;
        self.fix(r)
    }

    async fn finish(&mut self) -> Result<()> {
        let r = self.inner.finish().await;
        self.fix(r)
    }
}
