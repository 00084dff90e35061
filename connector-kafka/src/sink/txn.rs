//! Exactly-once delivery with Kafka transactions: one transaction per checkpoint, committed on
//! `notify_checkpoint_complete`.
//!
//! librdkafka cannot resume another producer's transaction after a crash (Flink's Java client
//! does it by reflection; Kafka's own two-phase participation, KIP-939, is not in librdkafka),
//! so a crash between "checkpoint N stored" and "transaction N committed" needs another way to
//! finish transaction N. rivus makes each transaction self-describing and recoverable:
//!
//! - every transaction also writes a **marker** record (key: the transactional id, value: the
//!   checkpoint id) to a compacted marker topic; the marker is visible to a `read_committed`
//!   reader exactly when the transaction committed;
//! - every record sent in a transaction is also appended to the transaction's **write-ahead
//!   log** on local disk (`wal.rs`), made durable at pre-commit; the checkpoint state holds only
//!   a reference to it (path, count, length, checksum) per pending transaction;
//! - on restore, `init_transactions` fences and aborts whatever the crashed run left open, the
//!   markers tell which restored transactions committed, and the others are read back from
//!   their logs and written again in a new transaction (with their marker) and committed.
//!
//! The pending transactions and the order of commits and recoveries are core's
//! [`TwoPhaseCommit`](rivus_sdk::two_phase::TwoPhaseCommit); [`TxnManager`] is its
//! [`Committer`] for Kafka.
//!
//! Transactional ids are `<prefix>-<subtask>-<slot>` with a fixed pool of slots per subtask:
//! stable across restarts, never growing. A slot holds one transaction from its first record
//! until its checkpoint's completion; the next checkpoint's records go to another slot. Each
//! slot has one log file, `<log dir>/<transactional id>.txlog`, written anew by each of its
//! transactions and emptied once one commits.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::producer::Producer;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Message, Offset, TopicPartitionList};
use rivus_sdk::two_phase::Committer;
use rivus_sdk::{Error, Result, Share};

use super::producer::{ProducerHandle, BEGIN_TIMEOUT, INIT_TIMEOUT};
use super::wal::{self, WalReader, WalRef, WalWriter};
use crate::config::KafkaConfig;
use crate::kafka_err;
use crate::record::OutRecord;

/// A pre-committed transaction, as checkpointed: metadata only, its records are in its log.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PendingTxn {
    /// The transactional id that holds it.
    pub tid: String,
    /// The checkpoint it belongs to.
    pub checkpoint: u64,
    /// Its write-ahead log, read only if it never committed.
    pub log: WalRef,
}

/// A step in the life of a transaction, reported to a
/// [`transaction_hook`](super::KafkaSinkBuilder::transaction_hook). Crash tests stop the
/// process at one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnStep {
    /// Checkpoint `n`'s barrier arrived; the transaction is open with its records sent but
    /// neither flushed nor logged durably yet.
    PreCommit(u64),
    /// Checkpoint `n` is stored and complete; its transaction is about to be committed.
    Commit(u64),
    /// The broker committed checkpoint `n`'s transaction; the sink has not yet recorded it.
    Committed(u64),
    /// On restore: checkpoint `n`'s transaction had not committed and was written again from
    /// its log.
    Recovered(u64),
}

/// Called at each [`TxnStep`] of every transaction.
pub type TxnHook = Arc<dyn Fn(TxnStep) + Send + Sync>;

/// Settings of the transactional mode.
#[derive(Clone)]
pub(crate) struct TxnSettings {
    pub prefix: Option<String>,
    pub pool: usize,
    /// `None`: `rivus-txn-markers.<prefix>`.
    pub marker_topic: Option<String>,
    /// `None`: 15 minutes, or with the source's offsets in the transaction (`offsets_txn.rs`)
    /// twice the checkpoint interval plus 10 s.
    pub timeout: Option<Duration>,
    /// `None`: the state backend's local directory, else the system's temporary directory.
    pub log_dir: Option<PathBuf>,
    pub hook: Option<TxnHook>,
}

impl std::fmt::Debug for TxnSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxnSettings")
            .field("prefix", &self.prefix)
            .field("pool", &self.pool)
            .field("marker_topic", &self.marker_topic)
            .field("timeout", &self.timeout)
            .field("log_dir", &self.log_dir)
            .field("hook", &self.hook.is_some())
            .finish()
    }
}

struct Slot {
    tid: String,
    handle: ProducerHandle,
    busy: bool,
}

/// The transactional producers of one sink subtask.
pub(crate) struct TxnManager {
    props: KafkaConfig,
    slots: Vec<Slot>,
    current: Option<(usize, WalWriter)>,
    marker_topic: String,
    /// The marker topic as a restore first read it: latest committed checkpoint per id.
    markers: Option<BTreeMap<String, u64>>,
    timeout: Duration,
    /// Longest wait for the deliveries of a transaction at pre-commit.
    flush_timeout: Duration,
    log_dir: PathBuf,
    hook: Option<TxnHook>,
    /// Tells one transaction's log from the next one written to the same file.
    nonce: u64,
}

/// The default marker topic of a sink: `rivus-txn-markers.<prefix>`, with characters Kafka
/// does not allow in topic names replaced by `_`.
pub(crate) fn marker_topic_for(prefix: &str) -> String {
    let mut t = format!("rivus-txn-markers.{}", clean_name(prefix));
    t.truncate(249);
    t
}

/// `name` with every character but ASCII letters, digits, `.`, `_` and `-` replaced by `_`
/// (safe as a topic name and as a file name).
fn clean_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn subtask_of(tid: &str) -> Option<usize> {
    let mut parts = tid.rsplitn(3, '-');
    parts.next()?;
    parts.next()?.parse().ok()
}

impl TxnManager {
    /// Creates the pool of subtask `share.subtask()` and fences (aborts) what a crashed run
    /// left open: its own ids, and those of the `previous_parallelism` subtasks of the last
    /// run that this one owns now. `log_dir` holds the slots' logs; a pre-commit waits at
    /// most `flush_timeout` for its deliveries.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn open(
        props: &KafkaConfig,
        s: &TxnSettings,
        default_prefix: String,
        log_dir: PathBuf,
        flush_timeout: Duration,
        share: Share,
        previous_parallelism: usize,
        queue_full: metrics::Counter,
    ) -> Result<Self> {
        let prefix = s.prefix.clone().unwrap_or(default_prefix);
        let (me, p) = (share.subtask(), share.parallelism());
        // One marker topic per sink: a reader of markers waits (read_committed) behind open
        // transactions on the topic, so other jobs' transactions must not be there.
        let marker_topic = s
            .marker_topic
            .clone()
            .unwrap_or_else(|| marker_topic_for(&prefix));
        ensure_marker_topic(props, &marker_topic).await?;
        let timeout = s.timeout.unwrap_or(Duration::from_secs(900));
        let timeout_ms = timeout.as_millis().to_string();
        let make = |tid: &str| -> Result<ProducerHandle> {
            let cfg = props.client_config(&[
                ("transactional.id", tid),
                ("enable.idempotence", "true"),
                ("transaction.timeout.ms", &timeout_ms),
            ]);
            ProducerHandle::create(&cfg, queue_full.clone())
                .map_err(|e| props.build_error("transactional producer", e))
        };
        let init = |h: ProducerHandle, tid: String| async move {
            h.blocking(
                format!("fencing transactional id {tid}"),
                INIT_TIMEOUT,
                |pr| pr.init_transactions(Duration::from_secs(60)),
            )
            .await?;
            Ok::<_, Error>(h)
        };
        // Each fencing is a round trip to the transaction coordinator: all slots at once.
        let tids: Vec<String> = (0..s.pool).map(|k| format!("{prefix}-{me}-{k}")).collect();
        let handles = tids
            .iter()
            .map(|tid| make(tid))
            .collect::<Result<Vec<_>>>()?;
        let handles = futures::future::try_join_all(
            handles
                .into_iter()
                .zip(&tids)
                .map(|(h, tid)| init(h, tid.clone())),
        )
        .await?;
        let slots: Vec<Slot> = tids
            .into_iter()
            .zip(handles)
            .map(|(tid, handle)| Slot {
                tid,
                handle,
                busy: false,
            })
            .collect();
        // Subtasks that no longer exist may have left transactions open: fence them too.
        for old in (p..previous_parallelism).filter(|s| share.owns(*s)) {
            for k in 0..s.pool {
                let tid = format!("{prefix}-{old}-{k}");
                init(make(&tid)?, tid).await?.shutdown().await;
            }
        }
        let nonce = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            ^ ((me as u64) << 48);
        Ok(TxnManager {
            props: props.clone(),
            slots,
            current: None,
            marker_topic,
            markers: None,
            timeout,
            flush_timeout,
            log_dir,
            hook: s.hook.clone(),
            nonce,
        })
    }

    fn step(&self, step: TxnStep) {
        if let Some(hook) = &self.hook {
            hook(step);
        }
    }

    async fn begin(&mut self) -> Result<usize> {
        let slot = self.slots.iter().position(|s| !s.busy).ok_or_else(|| {
            Error::connector(
                "kafka sink",
                format!(
                    "all {} transactional producers hold uncommitted transactions (checkpoints keep failing?); raise the pool size",
                    self.slots.len()
                ),
            )
        })?;
        self.slots[slot]
            .handle
            .blocking("begin_transaction", BEGIN_TIMEOUT, |p| {
                p.begin_transaction()
            })
            .await?;
        self.slots[slot].busy = true;
        Ok(slot)
    }

    fn log_path(&self, tid: &str) -> PathBuf {
        self.log_dir.join(format!("{}.txlog", clean_name(tid)))
    }

    /// Writes a record into the current transaction (starting one if needed).
    pub(super) async fn send(
        &mut self,
        topic: &str,
        rec: &OutRecord,
    ) -> Result<std::result::Result<(), KafkaError>> {
        if self.current.is_none() {
            let slot = self.begin().await?;
            self.nonce = self.nonce.wrapping_add(1);
            let tid = &self.slots[slot].tid;
            let log = WalWriter::create(self.log_path(tid), tid, self.nonce).await?;
            self.current = Some((slot, log));
        }
        let (slot, log) = self.current.as_mut().expect("a transaction is open");
        let r = self.slots[*slot].handle.send(topic, rec).await?;
        if r.is_ok() {
            log.append(topic, rec).await?;
        }
        Ok(r)
    }

    async fn write_marker(&self, slot: usize, tid: &str, checkpoint: u64) -> Result<()> {
        let marker = OutRecord {
            key: Some(tid.as_bytes().to_vec()),
            value: Some(checkpoint.to_string().into_bytes()),
            ..Default::default()
        };
        self.slots[slot]
            .handle
            .send(&self.marker_topic, &marker)
            .await?
            .map_err(|e| kafka_err("kafka sink: writing the transaction marker", e))
    }

    /// Checkpoint `checkpoint`'s barrier: flushes the current transaction and adds its
    /// marker, and makes its log durable. Returns it, to keep pending until the checkpoint
    /// completes (`None`: nothing was sent since the last one).
    pub(super) async fn pre_commit(&mut self, checkpoint: u64) -> Result<Option<PendingTxn>> {
        self.pre_commit_with(checkpoint, true).await
    }

    /// The end of the input: pre-commits the current transaction to commit it at once. No
    /// checkpoint refers to it, so its log need not be durable: after a crash the input is
    /// read again from the last checkpoint.
    pub(super) async fn pre_commit_last(&mut self) -> Result<Option<PendingTxn>> {
        self.pre_commit_with(u64::MAX, false).await
    }

    async fn pre_commit_with(
        &mut self,
        checkpoint: u64,
        durable: bool,
    ) -> Result<Option<PendingTxn>> {
        let Some((slot, log)) = self.current.take() else {
            return Ok(None);
        };
        self.step(TxnStep::PreCommit(checkpoint));
        let tid = self.slots[slot].tid.clone();
        self.write_marker(slot, &tid, checkpoint).await?;
        // The broker's acknowledgements and the disk's, at the same time.
        let (_, log) = tokio::try_join!(
            self.slots[slot].handle.flush(self.flush_timeout),
            log.seal(durable)
        )?;
        Ok(Some(PendingTxn {
            tid,
            checkpoint,
            log,
        }))
    }

    /// Commits slot `slot`'s transaction. Its records were flushed at the pre-commit, so the
    /// commit is one round trip to the coordinator: it waits at most `flush_timeout` (not the
    /// transaction timeout), and a commit that times out fails the job, whose restart
    /// finds the transaction's marker committed or writes it again from its log.
    async fn commit_slot(&mut self, slot: usize, tid: &str, checkpoint: u64) -> Result<()> {
        let timeout = self.flush_timeout.min(self.timeout);
        self.slots[slot]
            .handle
            .blocking("commit_transaction", timeout, move |p| {
                p.commit_transaction(timeout)
            })
            .await
            .map_err(|e| {
                Error::connector(
                    format!("kafka sink: committing {tid} (checkpoint {checkpoint})"),
                    e,
                )
            })?;
        self.slots[slot].busy = false;
        Ok(())
    }

    /// Writes a restored transaction again from its log, with its original marker, and
    /// commits it. A log that does not match its reference fails the restore before anything
    /// is committed.
    async fn write_again(&mut self, t: &PendingTxn) -> Result<()> {
        let mut log = WalReader::open(&t.log, &t.tid).await?;
        let slot = self.begin().await?;
        while let Some((topic, out)) = log.next().await? {
            self.slots[slot]
                .handle
                .send(&topic, &out)
                .await?
                .map_err(|e| kafka_err("kafka sink: recovering a transaction", e))?;
        }
        self.write_marker(slot, &t.tid, t.checkpoint).await?;
        self.slots[slot].handle.flush(self.flush_timeout).await?;
        self.commit_slot(slot, &t.tid, t.checkpoint).await?;
        wal::discard(&t.log.path).await;
        Ok(())
    }

    /// Aborts what is open (a restore writes pending transactions again) and drops producers.
    pub(super) async fn close(self) {
        for slot in self.slots {
            slot.handle.abort_and_shutdown(slot.busy).await;
        }
    }
}

#[async_trait::async_trait]
impl Committer for TxnManager {
    type Txn = PendingTxn;

    fn writer_of(&self, txn: &PendingTxn) -> Option<usize> {
        subtask_of(&txn.tid)
    }

    async fn commit(&mut self, t: &PendingTxn) -> Result<()> {
        let slot = self
            .slots
            .iter()
            .position(|s| s.tid == t.tid)
            .ok_or_else(|| {
                Error::connector(
                    "kafka sink",
                    format!("transaction {} is not one of this subtask's", t.tid),
                )
            })?;
        self.step(TxnStep::Commit(t.checkpoint));
        self.commit_slot(slot, &t.tid, t.checkpoint).await?;
        self.step(TxnStep::Committed(t.checkpoint));
        wal::discard(&t.log.path).await;
        Ok(())
    }

    /// Committed if its marker is (read once per restore); else written again from its log.
    async fn recover_and_commit(&mut self, t: &PendingTxn) -> Result<()> {
        if self.markers.is_none() {
            self.markers = Some(read_markers(&self.props, &self.marker_topic).await?);
        }
        let markers = self.markers.as_ref().expect("read");
        if markers.get(&t.tid).is_some_and(|c| *c >= t.checkpoint) {
            return Ok(());
        }
        tracing::warn!(tid = %t.tid, checkpoint = t.checkpoint, records = t.log.records,
            log = %t.log.path.display(),
            "kafka sink: transaction of a completed checkpoint never committed; writing it again from its log");
        self.write_again(t).await?;
        self.step(TxnStep::Recovered(t.checkpoint));
        Ok(())
    }

    /// Nothing left: [`TxnManager::open`] fenced every transactional id this subtask owns,
    /// which aborts what they held open.
    async fn abort_others(&mut self, _restored: &[PendingTxn], _share: Share) -> Result<u64> {
        Ok(0)
    }
}

async fn ensure_marker_topic(props: &KafkaConfig, topic: &str) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = props
        .client_config(&[])
        .create()
        .map_err(|e| props.build_error("admin client", e))?;
    let t = NewTopic::new(topic, 1, TopicReplication::Fixed(-1)).set("cleanup.policy", "compact");
    let _waiting = rivus_sdk::activity::waiting("kafka: creating the marker topic");
    // Bounded: a request the brokers never answer fails (retryable) instead of waiting for
    // librdkafka's socket timeout.
    let options = AdminOptions::new().request_timeout(Some(Duration::from_secs(10)));
    let r = admin
        .create_topics(&[t], &options)
        .await
        .map_err(|e| kafka_err(format!("kafka sink: creating marker topic {topic}"), e))?;
    match r.first() {
        Some(Err((_, RDKafkaErrorCode::TopicAlreadyExists))) | Some(Ok(_)) | None => Ok(()),
        Some(Err((_, code))) => Err(Error::connector(
            format!("kafka sink: creating marker topic {topic}"),
            code.to_string(),
        )),
    }
}

/// Latest committed checkpoint per transactional id, from the marker topic.
async fn read_markers(props: &KafkaConfig, topic: &str) -> Result<BTreeMap<String, u64>> {
    let cfg = props.client_config(&[
        ("isolation.level", "read_committed"),
        ("enable.partition.eof", "true"),
        ("enable.auto.commit", "false"),
        ("group.id", "rivus-marker-reader"),
    ]);
    let topic = topic.to_owned();
    let _waiting = rivus_sdk::activity::waiting("kafka: reading transaction markers");
    tokio::task::spawn_blocking(
        move || -> std::result::Result<BTreeMap<String, u64>, KafkaError> {
            let c: BaseConsumer = cfg.create()?;
            let (low, high) = c.fetch_watermarks(&topic, 0, Duration::from_secs(30))?;
            let mut out = BTreeMap::new();
            if high <= low {
                return Ok(out);
            }
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset(&topic, 0, Offset::Beginning)?;
            c.assign(&tpl)?;
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while std::time::Instant::now() < deadline {
                match c.poll(Duration::from_millis(500)) {
                    Some(Ok(m)) => {
                        let key = m.key().map(|k| String::from_utf8_lossy(k).into_owned());
                        let cp = m
                            .payload()
                            .and_then(|v| std::str::from_utf8(v).ok()?.parse::<u64>().ok());
                        if let (Some(k), Some(cp)) = (key, cp) {
                            let e = out.entry(k).or_insert(cp);
                            *e = (*e).max(cp);
                        }
                    }
                    Some(Err(KafkaError::PartitionEOF(_))) => return Ok(out),
                    Some(Err(e)) => return Err(e),
                    None => {}
                }
            }
            Err(KafkaError::MessageConsumption(
                RDKafkaErrorCode::RequestTimedOut,
            ))
        },
    )
    .await
    .map_err(|e| Error::connector("kafka sink: reading transaction markers", e.to_string()))?
    .map_err(|e| Error::connector("kafka sink: reading transaction markers", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tids_name_their_subtask_and_names_are_cleaned() {
        assert_eq!(subtask_of("job-sink-2-0"), Some(2));
        assert_eq!(subtask_of("my-prefix-with-dashes-11-4"), Some(11));
        assert_eq!(
            marker_topic_for("job 1-sink/x"),
            "rivus-txn-markers.job_1-sink_x"
        );
        assert_eq!(clean_name("a/../b c"), "a_.._b_c");
    }
}
