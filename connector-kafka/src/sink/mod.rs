//! [`KafkaSink`]: records produced with many sends in flight; a full local queue
//! back-pressures. At-least-once by flushing and checking every delivery before a checkpoint
//! completes; exactly-once with one Kafka transaction per checkpoint (see `txn.rs`), whose
//! records wait in a write-ahead log on disk (`wal.rs`), not in memory or in the checkpoint.

mod builder;
mod offsets_txn;
mod producer;
mod txn;
mod wal;

use std::sync::Arc;
use std::time::Duration;

use rivus_sdk::error_policy::ErrorHandler;
use rivus_sdk::prelude::*;

pub use producer::PRODUCER_QUEUE;
pub use txn::{PendingTxn, TxnHook, TxnStep};
pub use wal::WalRef;

use crate::record::KafkaSerializer;
use offsets_txn::OffsetsTxn;
use producer::ProducerHandle;
use rivus_sdk::two_phase::TwoPhaseCommit;
use txn::TxnManager;

pub use builder::KafkaSinkBuilder;
use builder::Settings;

/// A Kafka sink. Clone it into each subtask: `stream.sink("kafka", 2, |_| sink.clone())`.
pub struct KafkaSink<T> {
    settings: Arc<Settings>,
    serializer: Arc<dyn KafkaSerializer<T>>,
    restored: Option<Restored<Vec<PendingTxn>>>,
    running: Option<Running>,
}

/// What `open` creates: the producer of the sink's delivery guarantee, the error handler and
/// the sent-records counter.
struct Running {
    producer: Producer,
    handler: ErrorHandler,
    sent: metrics::Counter,
}

/// The producer of one delivery guarantee.
enum Producer {
    /// At-least-once (idempotent) or none: one producer, flushed on each checkpoint.
    Plain(ProducerHandle),
    /// Exactly-once: a transaction per checkpoint.
    Txn(Box<TwoPhaseCommit<TxnManager>>),
    /// Exactly-once with a group-mode Kafka source's offsets in each transaction (KIP-447),
    /// committed at the barrier.
    Offsets(Box<OffsetsTxn>),
}

impl<T> std::fmt::Debug for KafkaSink<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSink")
            .field("props", &self.settings.props)
            .field("topic", &self.settings.topic)
            .field("delivery", &self.settings.delivery)
            .finish()
    }
}

impl<T> Clone for KafkaSink<T> {
    fn clone(&self) -> Self {
        KafkaSink {
            settings: Arc::clone(&self.settings),
            serializer: Arc::clone(&self.serializer),
            restored: None,
            running: None,
        }
    }
}

impl<T: Send + 'static> KafkaSink<T> {
    fn running(&mut self) -> Result<&mut Running> {
        self.running.as_mut().ok_or(Error::Closed("kafka sink"))
    }

    async fn send_one(&mut self, value: T) -> Result<()> {
        // Borrowed, not cloned, per record: the settings, the handler and the topic.
        let KafkaSink {
            settings,
            serializer,
            running,
            ..
        } = self;
        let Running {
            producer, handler, ..
        } = running.as_mut().ok_or(Error::Closed("kafka sink"))?;
        let rec = match serializer.serialize(&value) {
            Ok(r) => r,
            // Not the record's fault (a schema registry out of reach): fail and retry.
            Err(e) if e.transient => return Err(Error::connector("kafka sink: encoding", e)),
            Err(e) => return handler.handle(&e.position, &e, &[]).await,
        };
        let Some(topic) = rec.topic.as_deref().or(settings.topic.as_deref()) else {
            let reason = "the record names no topic and the sink has no default topic";
            return handler
                .handle(
                    "(no topic)",
                    reason,
                    rec.value.as_deref().unwrap_or_default(),
                )
                .await;
        };
        let sent = match producer {
            Producer::Txn(txn) => txn.committer_mut().send(topic, &rec).await?,
            Producer::Offsets(txn) => txn.send(topic, &rec).await?,
            Producer::Plain(p) => p.send(topic, &rec).await?,
        };
        match sent {
            Ok(()) => Ok(()),
            Err(e) => {
                let position = format!(
                    "{topic}/{}",
                    rec.partition.map_or("-".into(), |p| p.to_string())
                );
                handler
                    .handle(position, e, rec.value.as_deref().unwrap_or_default())
                    .await
            }
        }
    }
}

#[async_trait]
impl<T: Send + 'static> RichFunction for KafkaSink<T> {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        let s = Arc::clone(&self.settings);
        // A refused password, certificate or topic fails here, not as a silent retry loop.
        let topics: Vec<String> = s.topic.iter().cloned().collect();
        crate::connect::probe(&s.props, &topics, s.props.connect_timeout()).await?;
        // A format with a schema registers (or finds) its schema before the first record.
        self.serializer.open(s.topic.as_deref()).await?;
        let handler = ErrorHandler::new(s.policy.clone(), ctx.display_name()).connector("kafka");
        let sent = ctx.metrics().counter("rivus_kafka_records_sent_total");
        let queue_full = ctx
            .metrics()
            .counter("rivus_kafka_producer_queue_full_total");
        let producer = match s.delivery {
            DeliveryGuarantee::ExactlyOnce if ctx.source_positions_offered() => {
                let prefix = s
                    .txn
                    .prefix
                    .clone()
                    .unwrap_or_else(|| format!("{}-{}", ctx.job_name(), ctx.task_name()));
                let tid = match ctx.worker() {
                    Some(w) => format!("{prefix}-worker-{w}-{}", ctx.subtask_index()),
                    None => format!("{prefix}-group-{}", ctx.subtask_index()),
                };
                let interval = ctx.checkpoint_interval().unwrap_or(Duration::from_secs(10));
                let timeout = s
                    .txn
                    .timeout
                    .unwrap_or(interval * 2 + Duration::from_secs(10));
                let link = ctx
                    .task_shared()
                    .get_or_insert_with(crate::source::offsets_link::OffsetsLink::default);
                Producer::Offsets(Box::new(
                    OffsetsTxn::open(
                        &s.props,
                        tid,
                        link,
                        timeout,
                        s.flush_timeout,
                        s.txn.hook.clone(),
                        queue_full,
                    )
                    .await?,
                ))
            }
            DeliveryGuarantee::ExactlyOnce if ctx.worker().is_some() => {
                return Err(Error::config(
                    "delivery",
                    format!(
                        "worker `{}`: exactly-once across workers needs a Kafka source in group \
                         mode chained into this sink (same parallelism, no key_by or rebalance \
                         between), whose offsets then commit in the sink's transactions; with \
                         another source use at-least-once",
                        ctx.worker().unwrap_or_default()
                    ),
                ));
            }
            DeliveryGuarantee::ExactlyOnce => {
                let restored = self.restored.take().unwrap_or_else(|| {
                    Restored::fresh(ctx.task_name(), ctx.subtask_index(), ctx.parallelism())
                });
                let prefix = format!("{}-{}", ctx.job_name(), ctx.task_name());
                let log_dir = s.txn.log_dir.clone().unwrap_or_else(|| {
                    ctx.local_dir()
                        .map_or_else(std::env::temp_dir, ToOwned::to_owned)
                        .join("kafka-txn-log")
                });
                let mut txns = TwoPhaseCommit::new(
                    TxnManager::open(
                        &s.props,
                        &s.txn,
                        prefix,
                        log_dir,
                        s.flush_timeout,
                        restored.share(),
                        restored.previous_parallelism(),
                        queue_full,
                    )
                    .await?,
                );
                txns.recover(restored).await?;
                Producer::Txn(Box::new(txns))
            }
            DeliveryGuarantee::AtLeastOnce | DeliveryGuarantee::AtMostOnce => {
                let overrides: &[(&str, &str)] = if s.delivery == DeliveryGuarantee::AtLeastOnce {
                    &[("enable.idempotence", "true")]
                } else {
                    &[]
                };
                let cfg = s.props.client_config(overrides);
                let producer = ProducerHandle::create(&cfg, queue_full)
                    .map_err(|e| s.props.build_error("producer", e))?;
                if s.delivery == DeliveryGuarantee::AtLeastOnce {
                    producer.warm_up(s.topic.clone()).await;
                }
                Producer::Plain(producer)
            }
        };
        self.running = Some(Running {
            producer,
            handler,
            sent,
        });
        Ok(())
    }

    async fn close(&mut self) -> Result<()> {
        match self.running.take().map(|r| r.producer) {
            Some(Producer::Txn(t)) => t.into_committer().close().await,
            Some(Producer::Offsets(t)) => t.close().await,
            Some(Producer::Plain(p)) => p.shutdown().await,
            None => {}
        }
        Ok(())
    }
}

#[async_trait]
impl<T: Send + 'static> CheckpointedFunction for KafkaSink<T> {
    /// The pre-committed, uncommitted transactions (exactly-once only): a reference to each
    /// one's log, never its records.
    type State = Vec<PendingTxn>;

    async fn initialize_state(&mut self, restored: Restored<Vec<PendingTxn>>) -> Result<()> {
        self.restored = Some(restored);
        Ok(())
    }

    async fn snapshot_state(&mut self, checkpoint_id: u64) -> Result<Vec<PendingTxn>> {
        let (delivery, flush_timeout) = (self.settings.delivery, self.settings.flush_timeout);
        match &mut self.running()?.producer {
            Producer::Txn(txn) => {
                let pre_committed = txn.committer_mut().pre_commit(checkpoint_id).await?;
                txn.pre_committed(checkpoint_id, pre_committed);
                Ok(txn.state())
            }
            Producer::Offsets(txn) => {
                txn.commit_at(checkpoint_id).await?;
                Ok(Vec::new())
            }
            Producer::Plain(p) if delivery == DeliveryGuarantee::AtLeastOnce => {
                p.flush(flush_timeout).await?;
                Ok(Vec::new())
            }
            Producer::Plain(_) => Ok(Vec::new()),
        }
    }
}

#[async_trait]
impl<T: Send + 'static> CheckpointListener for KafkaSink<T> {
    async fn notify_checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<()> {
        if let Producer::Txn(txn) = &mut self.running()?.producer {
            txn.commit_up_to(checkpoint_id).await?;
        }
        Ok(())
    }
}

#[async_trait]
impl<T: Send + 'static> SinkFunction<T> for KafkaSink<T> {
    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        self.settings.delivery
    }

    /// Exactly-once: a group-mode Kafka source chained into the task has its offsets
    /// committed in this sink's transactions (KIP-447).
    fn commits_source_positions(&self) -> bool {
        self.settings.delivery == DeliveryGuarantee::ExactlyOnce
    }

    async fn invoke(&mut self, value: T, _: &SinkContext) -> Result<()> {
        self.send_one(value).await?;
        self.running()?.sent.increment(1);
        Ok(())
    }

    async fn invoke_batch(&mut self, values: Vec<T>, _: &mut SinkContext) -> Result<()> {
        let n = values.len() as u64;
        for v in values {
            self.send_one(v).await?;
        }
        self.running()?.sent.increment(n);
        Ok(())
    }

    /// Flushes; with transactions, commits what no checkpoint will (a job without checkpoints).
    /// With the source's offsets in the transaction, only a barrier commits (the offsets are
    /// known there); what is open at the end aborts at close and is read again.
    async fn finish(&mut self) -> Result<()> {
        let flush_timeout = self.settings.flush_timeout;
        match &mut self.running()?.producer {
            Producer::Txn(txn) => {
                let last = txn.committer_mut().pre_commit_last().await?;
                txn.pre_committed(u64::MAX, last);
                txn.commit_all().await.map(drop)
            }
            Producer::Offsets(_) => Ok(()),
            Producer::Plain(p) => p.flush(flush_timeout).await,
        }
    }
}
