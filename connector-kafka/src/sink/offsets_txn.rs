//! Exactly-once with the source's offsets in the transaction (Kafka → Kafka in group mode,
//! KIP-447; see `offsets_link.rs`): one transactional producer per subtask; at each
//! checkpoint's barrier the records sent since the previous one, the group-mode source's
//! offsets at that barrier and the consumer's group metadata commit as one transaction.
//!
//! Nothing waits for the checkpoint to complete: the group's committed offsets, not the
//! checkpoint, say where each partition resumes, so there is nothing to keep pending, no log
//! and no marker (compare `txn.rs`). A crash aborts the open transaction — at once when the
//! worker comes back (`init_transactions` fences its transactional id), else when
//! `transaction.timeout.ms` runs out — and its records are read again from the committed
//! offsets by whichever worker holds their partitions then.

use std::sync::Arc;
use std::time::Duration;

use rdkafka::error::KafkaError;
use rdkafka::producer::Producer;
use rdkafka::{Offset, TopicPartitionList};
use rivus_sdk::{Error, Result};

use super::producer::{ProducerHandle, BEGIN_TIMEOUT, INIT_TIMEOUT};
use super::txn::{TxnHook, TxnStep};
use crate::config::KafkaConfig;
use crate::record::OutRecord;
use crate::source::offsets_link::OffsetsLink;
use crate::source::parse_tp;

/// The transactions of one sink subtask that carry the source's offsets.
pub(crate) struct OffsetsTxn {
    handle: ProducerHandle,
    tid: String,
    link: Arc<OffsetsLink>,
    /// A transaction is begun and not yet committed.
    open: bool,
    /// The source side of the link was found (checked at the first record).
    linked: bool,
    timeout: Duration,
    flush_timeout: Duration,
    hook: Option<TxnHook>,
}

impl OffsetsTxn {
    /// Creates the producer of transactional id `tid` and fences its earlier incarnation
    /// (aborting what it left open).
    pub(super) async fn open(
        props: &KafkaConfig,
        tid: String,
        link: Arc<OffsetsLink>,
        timeout: Duration,
        flush_timeout: Duration,
        hook: Option<TxnHook>,
        queue_full: metrics::Counter,
    ) -> Result<Self> {
        let timeout_ms = timeout.as_millis().to_string();
        let cfg = props.client_config(&[
            ("transactional.id", &tid),
            ("enable.idempotence", "true"),
            ("transaction.timeout.ms", &timeout_ms),
        ]);
        let handle = ProducerHandle::create(&cfg, queue_full)
            .map_err(|e| props.build_error("transactional producer", e))?;
        handle
            .blocking(
                format!("fencing transactional id {tid}"),
                INIT_TIMEOUT,
                |p| p.init_transactions(INIT_TIMEOUT),
            )
            .await?;
        link.set_sink_commits();
        tracing::info!(%tid, "kafka sink: the source's offsets commit in this sink's transactions");
        Ok(OffsetsTxn {
            handle,
            tid,
            link,
            open: false,
            linked: false,
            timeout,
            flush_timeout,
            hook,
        })
    }

    fn step(&self, step: TxnStep) {
        if let Some(hook) = &self.hook {
            hook(step);
        }
    }

    async fn begin(&mut self) -> Result<()> {
        if !self.open {
            self.handle
                .blocking("begin_transaction", BEGIN_TIMEOUT, |p| {
                    p.begin_transaction()
                })
                .await?;
            self.open = true;
        }
        Ok(())
    }

    /// Writes a record into the open transaction (beginning one if needed).
    pub(super) async fn send(
        &mut self,
        topic: &str,
        rec: &OutRecord,
    ) -> Result<std::result::Result<(), KafkaError>> {
        if !self.linked {
            if !self.link.has_source() {
                return Err(Error::config(
                    "delivery",
                    "exactly-once with the group's offsets needs the Kafka source (group mode) \
                     in this sink's task; none opened",
                ));
            }
            self.linked = true;
        }
        self.begin().await?;
        self.handle.send(topic, rec).await
    }

    /// Checkpoint `checkpoint`'s barrier: flush, add the source's offsets at this barrier
    /// with the group's metadata, commit.
    pub(super) async fn commit_at(&mut self, checkpoint: u64) -> Result<()> {
        let tid = self.tid.clone();
        let what = move |step: &str| format!("kafka sink: {step} ({tid}, checkpoint {checkpoint})");
        if self.link.is_broken() {
            return Err(Error::connector(
                what("committing"),
                "the group revoked partitions before a transaction covered them; this \
                 transaction aborts and the job restarts from the group's offsets",
            ));
        }
        let barrier = self.link.take_barrier(checkpoint).ok_or_else(|| {
            Error::connector(
                what("committing"),
                "the source's positions at this barrier are missing (is the Kafka source in \
                 group mode chained into this sink?)",
            )
        })?;
        let (metadata, assignment) = self.link.source().ok_or_else(|| {
            Error::connector(
                what("committing"),
                "the source's consumer is closed or has no group metadata",
            )
        })?;
        // Only what this consumer holds now (a draining partition too): a partition that
        // moved is its new owner's to commit.
        let held = assignment.current();
        let mut offsets = TopicPartitionList::new();
        for (key, offset) in &barrier.positions {
            if !held.contains(key) {
                continue;
            }
            if let Some((topic, p)) = parse_tp(key) {
                offsets
                    .add_partition_offset(&topic, p, Offset::Offset(*offset))
                    .map_err(|e| crate::kafka_err(what("offsets"), e))?;
            }
        }
        if !self.open && offsets.count() == 0 {
            self.link.committed(barrier.seen);
            return Ok(());
        }
        self.step(TxnStep::PreCommit(checkpoint));
        self.begin().await?;
        self.handle.flush(self.flush_timeout).await?;
        if offsets.count() > 0 {
            let timeout = self.flush_timeout.min(self.timeout);
            self.handle
                .blocking(
                    what("sending offsets to the transaction"),
                    timeout,
                    move |p| p.send_offsets_to_transaction(&offsets, &metadata, timeout),
                )
                .await?;
        }
        self.step(TxnStep::Commit(checkpoint));
        // Flushed above: the commit is one round trip, bounded like the flush.
        let timeout = self.flush_timeout.min(self.timeout);
        let committed = self
            .handle
            .blocking(what("commit_transaction"), timeout, move |p| {
                p.commit_transaction(timeout)
            })
            .await;
        self.open = false;
        committed?;
        self.step(TxnStep::Committed(checkpoint));
        self.link.committed(barrier.seen);
        Ok(())
    }

    /// Aborts what is open (no checkpoint's offsets cover it: it is read again) and drops the
    /// producer.
    pub(super) async fn close(self) {
        self.handle.abort_and_shutdown(self.open).await;
    }
}
