//! Records an operator rejects, dealt with inside the task that rejected them: a chained
//! output passes the `Ok` records on and keeps the `Err` ones until its next flush, where an
//! [`ErrorHandler`] skips or dead-letters them (or fails the job) before anything after them is
//! flushed and before a checkpoint barrier passes — so a rejected record is dealt with before
//! the checkpoint covering it completes, and no marker travels with the records to the sinks.

use async_trait::async_trait;

use super::output::{Notification, Output, Snapshot};
use crate::checkpoint::CompletedCheckpoint;
use crate::error::Result;
use crate::error_policy::ErrorHandler;

/// A record an operator could not handle: where it was, why, and its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// Where it was rejected (`transform transforms.clean, record {"id": 7, …}`).
    pub position: String,
    /// Why.
    pub reason: String,
    /// The record, as it came to the operator.
    pub payload: Vec<u8>,
}

/// Rejected records kept before the output asks to be flushed: memory stays bounded.
const KEEP: usize = 256;

/// Passes `Ok` records to `inner`, hands `Err` ones to `handler` at each flush.
pub(crate) struct Rejecting<T: Send + 'static> {
    handler: ErrorHandler,
    kept: Vec<Rejected>,
    inner: Box<dyn Output<T>>,
}

impl<T: Send + 'static> Rejecting<T> {
    pub(super) fn new(handler: ErrorHandler, inner: Box<dyn Output<T>>) -> Self {
        Rejecting {
            handler,
            kept: Vec::new(),
            inner,
        }
    }

    /// Hands the kept records to the error policy, in order.
    async fn hand_over(&mut self) -> Result<()> {
        for r in std::mem::take(&mut self.kept) {
            self.handler
                .handle(&r.position, &r.reason, &r.payload)
                .await?;
        }
        Ok(())
    }
}

#[async_trait]
impl<T: Send + 'static> Output<std::result::Result<T, Rejected>> for Rejecting<T> {
    #[inline]
    fn push(&mut self, value: std::result::Result<T, Rejected>, ts: Option<i64>) -> bool {
        match value {
            Ok(v) => self.inner.push(v, ts),
            Err(r) => {
                self.kept.push(r);
                self.kept.len() >= KEEP
            }
        }
    }

    fn buffered(&self) -> usize {
        self.inner.buffered() + self.kept.len()
    }

    fn sink_name(&self) -> Option<&str> {
        self.inner.sink_name()
    }

    fn share_task(&mut self, shared: &crate::TaskShared) {
        self.inner.share_task(shared)
    }

    async fn open(&mut self, restore: Option<&CompletedCheckpoint>) -> Result<()> {
        self.inner.open(restore).await
    }

    async fn flush(&mut self) -> Result<()> {
        self.hand_over().await?;
        self.inner.flush().await
    }

    async fn watermark(&mut self, wm: i64) -> Result<()> {
        self.inner.watermark(wm).await
    }

    async fn barrier(&mut self, id: u64, snap: &mut Snapshot) -> Result<()> {
        self.hand_over().await?;
        self.inner.barrier(id, snap).await
    }

    async fn notify(&mut self, n: Notification) -> Result<()> {
        self.inner.notify(n).await
    }

    async fn end_of_input(&mut self) -> Result<()> {
        self.hand_over().await?;
        self.inner.end_of_input().await
    }

    async fn close(&mut self) -> Result<()> {
        self.inner.close().await
    }
}
