//! [`Rebased`]: a connector whose configuration errors name fields below its own default
//! path (`sink.jdbc.exactly_once`), made to name them below the section's path in the file
//! (`sink.exactly_once`) — also for the errors it raises when it opens or runs.

use async_trait::async_trait;

use crate::context::{RuntimeContext, SinkContext};
use crate::error::Result;
use crate::function::{
    CheckpointListener, CheckpointedFunction, RichFunction, SinkFunction, SourceFunction,
};
use crate::guarantee::DeliveryGuarantee;
use crate::runtime::{CheckpointEvent, SourceContext};
use crate::state::Restored;

/// `inner` with every configuration error's path moved from below `from` to below `to`
/// ([`Error::rebase`](crate::Error::rebase)). Everything else passes through unchanged.
#[derive(Debug, Clone)]
pub struct Rebased<F> {
    inner: F,
    from: String,
    to: String,
}

impl<F> Rebased<F> {
    /// `inner`, its errors below `from` named below `to`.
    pub fn new(inner: F, from: impl Into<String>, to: impl Into<String>) -> Self {
        Rebased {
            inner,
            from: from.into(),
            to: to.into(),
        }
    }

    fn fix<T>(&self, r: Result<T>) -> Result<T> {
        r.map_err(|e| e.rebase(&self.from, &self.to))
    }
}

#[async_trait]
impl<F: RichFunction> RichFunction for Rebased<F> {
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
impl<F: SourceFunction> SourceFunction for Rebased<F> {
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
impl<F: CheckpointedFunction> CheckpointedFunction for Rebased<F> {
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
impl<F: CheckpointListener> CheckpointListener for Rebased<F> {
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
impl<In: Send + 'static, F: SinkFunction<In>> SinkFunction<In> for Rebased<F> {
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
