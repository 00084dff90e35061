//! The sink at the end of a chain: buffers records into batches for
//! [`SinkFunction::invoke_batch`], snapshots the sink at barriers and passes notifications on.

use std::marker::PhantomData;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::counters::Counters;

use async_trait::async_trait;

use super::event::Batch;
use super::output::{Notification, Output, Snapshot};
use crate::checkpoint::CompletedCheckpoint;
use crate::context::{RuntimeContext, SinkContext};
use crate::error::{Error, Result};
use crate::function::SinkFunction;
use crate::state::Restored;

pub(crate) struct SinkOutput<In, S> {
    sink: S,
    rctx: RuntimeContext,
    buf: Batch<In>,
    batch_size: usize,
    watermark: Option<i64>,
    opened: bool,
    records_in: metrics::Counter,
    counters: Arc<Counters>,
    _in: PhantomData<fn(In)>,
}

impl<In: Send + 'static, S: SinkFunction<In>> SinkOutput<In, S> {
    pub(super) fn new(
        sink: S,
        rctx: RuntimeContext,
        batch_size: usize,
        counters: Arc<Counters>,
    ) -> Self {
        let records_in = rctx.metrics().counter("rivus_records_in_total");
        SinkOutput {
            sink,
            rctx,
            buf: Batch::with_capacity(batch_size),
            batch_size,
            watermark: None,
            opened: false,
            records_in,
            counters,
            _in: PhantomData,
        }
    }
}

/// Builds the [`Restored`] view of `operator`'s states in `restore`, deserialized as `St`.
pub(crate) fn restored_states<St: serde::de::DeserializeOwned>(
    operator: &str,
    subtask: usize,
    parallelism: usize,
    restore: Option<&CompletedCheckpoint>,
) -> Result<Restored<St>> {
    let Some(cp) = restore else {
        return Ok(Restored::fresh(operator, subtask, parallelism));
    };
    let previous = match cp.operators.get(operator) {
        None => Vec::new(),
        Some(states) => states
            .iter()
            .map(|v| match v {
                None => Ok(None),
                Some(v) => serde_json::from_value(v.clone())
                    .map(Some)
                    .map_err(|e| Error::State {
                        operator: operator.to_owned(),
                        source: e,
                    }),
            })
            .collect::<Result<Vec<_>>>()?,
    };
    Ok(Restored::from_checkpoint(
        operator,
        subtask,
        parallelism,
        cp.checkpoint_id,
        previous,
    ))
}

#[async_trait]
impl<In: Send + 'static, S: SinkFunction<In>> Output<In> for SinkOutput<In, S> {
    #[inline]
    fn push(&mut self, value: In, ts: Option<i64>) -> bool {
        self.buf.push(value, ts);
        self.buf.len() >= self.batch_size
    }

    fn buffered(&self) -> usize {
        self.buf.len()
    }

    fn sink_name(&self) -> Option<&str> {
        Some(self.rctx.task_name())
    }

    fn share_task(&mut self, shared: &crate::TaskShared) {
        self.rctx.set_task_shared(shared.clone());
    }

    async fn open(&mut self, restore: Option<&CompletedCheckpoint>) -> Result<()> {
        self.rctx
            .set_restored_from(restore.map(|c| c.checkpoint_id));
        let restored = restored_states(
            self.rctx.task_name(),
            self.rctx.subtask_index(),
            self.rctx.parallelism(),
            restore,
        )?;
        let _in = crate::activity::waiting("open");
        self.sink.initialize_state(restored).await?;
        self.opened = true;
        self.sink.open(&self.rctx).await
    }

    async fn flush(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let batch = self.buf.take(self.batch_size);
        self.records_in.increment(batch.len() as u64);
        self.counters
            .written
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        let mut ctx = SinkContext::for_batch(batch.timestamps, self.watermark);
        let _in = crate::activity::waiting("invoke");
        self.sink.invoke_batch(batch.values, &mut ctx).await
    }

    async fn watermark(&mut self, wm: i64) -> Result<()> {
        self.flush().await?;
        self.watermark = Some(wm);
        Ok(())
    }

    async fn barrier(&mut self, id: u64, snap: &mut Snapshot) -> Result<()> {
        self.flush().await?;
        let state = {
            let _in = crate::activity::waiting("snapshot_state");
            self.sink.snapshot_state(id).await?
        };
        let value = serde_json::to_value(state).map_err(|e| Error::State {
            operator: self.rctx.task_name().to_owned(),
            source: e,
        })?;
        snap.push((self.rctx.task_name().to_owned(), value));
        Ok(())
    }

    async fn notify(&mut self, n: Notification) -> Result<()> {
        match n {
            Notification::Complete(id) => {
                let _in = crate::activity::waiting("notify_checkpoint_complete");
                self.sink.notify_checkpoint_complete(id).await
            }
            Notification::Abort(id) => {
                let _in = crate::activity::waiting("notify_checkpoint_aborted");
                self.sink.notify_checkpoint_aborted(id).await
            }
        }
    }

    async fn end_of_input(&mut self) -> Result<()> {
        self.flush().await?;
        let _in = crate::activity::waiting("finish");
        self.sink.finish().await
    }

    async fn close(&mut self) -> Result<()> {
        if std::mem::take(&mut self.opened) {
            let _in = crate::activity::waiting("close");
            self.sink.close().await
        } else {
            Ok(())
        }
    }
}
