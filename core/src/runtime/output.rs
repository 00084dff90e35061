//! The [`Output`] a task writes into: the end of an operator chain. It is either a channel
//! output to the next task (partitioned forward, round-robin or by key) or a sink; chained
//! operators wrap it (see `chain.rs`).

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use tokio::sync::mpsc;

use super::event::{Batch, Event};
use crate::checkpoint::CompletedCheckpoint;
use crate::error::{Error, Result};

/// Operator states captured at a barrier: (operator name, state).
pub(crate) type Snapshot = Vec<(String, serde_json::Value)>;

/// A checkpoint notification delivered to every task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Notification {
    Complete(u64),
    Abort(u64),
}

/// The end of a chain inside one task. `push` is synchronous and cheap (it buffers); everything
/// that may wait is async and happens once per batch or per control event.
#[async_trait]
pub(crate) trait Output<T: Send + 'static>: Send {
    /// Buffers one record; returns true when the buffer is full and should be flushed.
    fn push(&mut self, value: T, ts: Option<i64>) -> bool;
    /// Records buffered and not yet flushed.
    fn buffered(&self) -> usize;
    /// The name of the sink at the end of the chain, if any (names the task in errors).
    fn sink_name(&self) -> Option<&str> {
        None
    }
    /// Joins the functions at the end of the chain (sinks) to the task's shared values.
    fn share_task(&mut self, _shared: &crate::TaskShared) {}
    /// Restores and opens the functions at the end of the chain (sinks).
    async fn open(&mut self, restore: Option<&CompletedCheckpoint>) -> Result<()>;
    /// Sends what is buffered downstream (waiting when downstream is slow).
    async fn flush(&mut self) -> Result<()>;
    /// Forwards a watermark after the records before it.
    async fn watermark(&mut self, wm: i64) -> Result<()>;
    /// Handles checkpoint barrier `id`: flush, snapshot sinks into `snap`, forward the barrier.
    async fn barrier(&mut self, id: u64, snap: &mut Snapshot) -> Result<()>;
    /// Delivers a checkpoint notification to sinks.
    async fn notify(&mut self, n: Notification) -> Result<()>;
    /// The input ended: flush, finish sinks, close channels.
    async fn end_of_input(&mut self) -> Result<()>;
    /// Closes the functions at the end of the chain; called once, also after a failure.
    async fn close(&mut self) -> Result<()>;
}

/// How a channel output spreads records over the downstream subtasks.
pub(crate) enum Partitioner<T> {
    /// Whole batches, round-robin (one downstream: plain forwarding).
    RoundRobin { next: usize },
    /// By hash of a key: records with equal keys reach the same subtask, in order.
    Hash(Arc<dyn Fn(&T) -> u64 + Send + Sync>),
}

/// Hashes a key for [`Partitioner::Hash`].
pub(crate) fn hash_key<K: Hash + ?Sized>(key: &K) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    h.finish()
}

/// Writes batches into the bounded channels of the downstream subtasks.
pub(crate) struct ChannelOutput<T> {
    senders: Vec<mpsc::Sender<Event<T>>>,
    partitioner: Partitioner<T>,
    buf: Batch<T>,
    batch_size: usize,
    records_out: metrics::Counter,
    backpressure: metrics::Counter,
}

impl<T: Send + 'static> ChannelOutput<T> {
    pub(super) fn new(
        senders: Vec<mpsc::Sender<Event<T>>>,
        partitioner: Partitioner<T>,
        batch_size: usize,
        metrics: &crate::context::MetricsGroup,
    ) -> Self {
        ChannelOutput {
            senders,
            partitioner,
            buf: Batch::with_capacity(batch_size),
            batch_size,
            records_out: metrics.counter("rivus_records_out_total"),
            backpressure: metrics.counter("rivus_backpressure_microseconds_total"),
        }
    }

    async fn send(&mut self, target: usize, ev: Event<T>) -> Result<()> {
        let tx = &self.senders[target];
        match tx.try_send(ev) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(ev)) => {
                let waited = Instant::now();
                let _idle = crate::activity::idle("waiting for downstream");
                let r = tx.send(ev).await.map_err(|_| Error::Cancelled);
                self.backpressure
                    .increment(waited.elapsed().as_micros() as u64);
                r
            }
            // The downstream task is gone: it failed or was cancelled, and reports why.
            Err(mpsc::error::TrySendError::Closed(_)) => Err(Error::Cancelled),
        }
    }

    async fn broadcast(&mut self, make: impl Fn() -> Event<T>) -> Result<()> {
        for i in 0..self.senders.len() {
            self.send(i, make()).await?;
        }
        Ok(())
    }
}

#[async_trait]
impl<T: Send + 'static> Output<T> for ChannelOutput<T> {
    #[inline]
    fn push(&mut self, value: T, ts: Option<i64>) -> bool {
        self.buf.push(value, ts);
        self.buf.len() >= self.batch_size
    }

    fn buffered(&self) -> usize {
        self.buf.len()
    }

    async fn open(&mut self, _: Option<&CompletedCheckpoint>) -> Result<()> {
        Ok(())
    }

    async fn flush(&mut self) -> Result<()> {
        if self.buf.is_empty() || self.senders.is_empty() {
            return Ok(());
        }
        let batch = self.buf.take(self.batch_size);
        self.records_out.increment(batch.len() as u64);
        let n = self.senders.len();
        match &mut self.partitioner {
            Partitioner::RoundRobin { next } => {
                let target = *next % n;
                *next = next.wrapping_add(1);
                self.send(target, Event::Records(batch)).await
            }
            Partitioner::Hash(key) => {
                let key = Arc::clone(key);
                let per = batch.len() / n + 1;
                let mut parts: Vec<Batch<T>> = (0..n).map(|_| Batch::with_capacity(per)).collect();
                for (v, ts) in batch.into_iter() {
                    let target = (key(&v) % n as u64) as usize;
                    parts[target].push(v, ts);
                }
                for (i, part) in parts.into_iter().enumerate() {
                    if !part.is_empty() {
                        self.send(i, Event::Records(part)).await?;
                    }
                }
                Ok(())
            }
        }
    }

    async fn watermark(&mut self, wm: i64) -> Result<()> {
        self.flush().await?;
        self.broadcast(|| Event::Watermark(wm)).await
    }

    async fn barrier(&mut self, id: u64, _: &mut Snapshot) -> Result<()> {
        self.flush().await?;
        self.broadcast(|| Event::Barrier(id)).await
    }

    async fn notify(&mut self, _: Notification) -> Result<()> {
        Ok(())
    }

    async fn end_of_input(&mut self) -> Result<()> {
        self.flush().await?;
        self.broadcast(|| Event::End).await?;
        self.senders.clear();
        Ok(())
    }

    async fn close(&mut self) -> Result<()> {
        self.senders.clear();
        Ok(())
    }
}

/// Drops every record: the end of a discarded stream.
pub(crate) struct Discard;

#[async_trait]
impl<T: Send + 'static> Output<T> for Discard {
    fn push(&mut self, _: T, _: Option<i64>) -> bool {
        false
    }

    fn buffered(&self) -> usize {
        0
    }

    async fn open(&mut self, _: Option<&CompletedCheckpoint>) -> Result<()> {
        Ok(())
    }

    async fn flush(&mut self) -> Result<()> {
        Ok(())
    }

    async fn watermark(&mut self, _: i64) -> Result<()> {
        Ok(())
    }

    async fn barrier(&mut self, _: u64, _: &mut Snapshot) -> Result<()> {
        Ok(())
    }

    async fn notify(&mut self, _: Notification) -> Result<()> {
        Ok(())
    }

    async fn end_of_input(&mut self) -> Result<()> {
        Ok(())
    }

    async fn close(&mut self) -> Result<()> {
        Ok(())
    }
}
