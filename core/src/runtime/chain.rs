//! Operator chaining: map, filter and flat_map run inside the task that feeds them, as a
//! wrapper around the next [`Output`], with no channel in between (Flink's operator chaining).

use std::marker::PhantomData;

use async_trait::async_trait;

use super::output::{Notification, Output, Snapshot};
use crate::checkpoint::CompletedCheckpoint;
use crate::error::Result;

/// Applies `op` to each record pushed, writing its results into `inner`.
///
/// `op` gets the record, its timestamp and the inner output, and returns whether the inner
/// buffer is full; map, filter and flat_map are each a one-line `op` (see `pipeline.rs`).
pub(crate) struct Chained<T, U, F> {
    op: F,
    inner: Box<dyn Output<U>>,
    _in: PhantomData<fn(T)>,
}

impl<T, U, F> Chained<T, U, F>
where
    T: Send + 'static,
    U: Send + 'static,
    F: FnMut(T, Option<i64>, &mut dyn Output<U>) -> bool + Send + 'static,
{
    pub(super) fn new(op: F, inner: Box<dyn Output<U>>) -> Self {
        Chained {
            op,
            inner,
            _in: PhantomData,
        }
    }
}

#[async_trait]
impl<T, U, F> Output<T> for Chained<T, U, F>
where
    T: Send + 'static,
    U: Send + 'static,
    F: FnMut(T, Option<i64>, &mut dyn Output<U>) -> bool + Send + 'static,
{
    #[inline]
    fn push(&mut self, value: T, ts: Option<i64>) -> bool {
        (self.op)(value, ts, &mut *self.inner)
    }

    fn buffered(&self) -> usize {
        self.inner.buffered()
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
        self.inner.flush().await
    }

    async fn watermark(&mut self, wm: i64) -> Result<()> {
        self.inner.watermark(wm).await
    }

    async fn barrier(&mut self, id: u64, snap: &mut Snapshot) -> Result<()> {
        self.inner.barrier(id, snap).await
    }

    async fn notify(&mut self, n: Notification) -> Result<()> {
        self.inner.notify(n).await
    }

    async fn end_of_input(&mut self) -> Result<()> {
        self.inner.end_of_input().await
    }

    async fn close(&mut self) -> Result<()> {
        self.inner.close().await
    }
}
