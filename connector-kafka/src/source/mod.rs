//! [`KafkaSource`]: reads partitions with offsets in checkpointed state (see the crate docs).

mod assigned;
mod builder;
mod claim;
mod fetcher;
mod group;
mod group_assignment;
mod group_commit;
mod lag;
mod offsets;
pub(crate) mod offsets_link;
mod owner;
mod subscription;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rdkafka::consumer::Consumer;
use rivus_sdk::error_policy::{ErrorHandler, ErrorPolicy};
use rivus_sdk::handover::{Handover, HandoverError};
use rivus_sdk::prelude::*;

pub use builder::KafkaSourceBuilder;
use builder::Settings;
pub(crate) use group_assignment::parse_tp;
pub use offsets::{StartOffsets, StopOffsets};
pub use subscription::Subscription;

use crate::config::{set_unless_given, KafkaConfig};
use crate::record::KafkaDeserializer;
use fetcher::FetchBatch;
use lag::{LagContext, SourceConsumer};

/// Checkpointed positions: `topic/partition` → next offset to read.
pub type KafkaSourceState = BTreeMap<String, i64>;

/// The source's prefetch unless set otherwise: at most 4 MiB (`queued.max.messages.kbytes`) or
/// 20 000 messages queued per partition, and the next fetch 10 ms after the queue drains below
/// that (librdkafka's `fetch.queue.backoff.ms` default, 1 s, stalls a consumer whose queue
/// is full half the time). A message queued by librdkafka costs several times its payload,
/// so the count matters as much as the bytes: a `rivus run` Kafka → Kafka or Kafka →
/// PostgreSQL job (1 M records of 100 B, two partitions) peaks at about 66 MiB with this
/// prefetch and at about 97 MiB with 50 000 / 8 MiB, in the same time. `benches/memory.rs`
/// has the whole curve (README "Memory").
pub const PREFETCH: [(&str, &str); 3] = [
    ("queued.min.messages", "20000"),
    ("queued.max.messages.kbytes", "4096"),
    ("fetch.queue.backoff.ms", "10"),
];

struct Running<T> {
    consumer: Arc<SourceConsumer>,
    handover: Arc<Handover<FetchBatch<T>>>,
    alive: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Group mode: the partitions the group gave this consumer now.
    assignment: Option<group_assignment::Assignment>,
    /// Group mode: the barriers' positions and what commits them, shared with an
    /// exactly-once Kafka sink chained into the task if there is one (see `offsets_link.rs`).
    link: Option<Arc<offsets_link::OffsetsLink>>,
    /// Group mode with checkpoints: the task committing completed checkpoints to the group
    /// (`group_commit.rs`).
    committer: Option<group_commit::Committer>,
    handler: ErrorHandler,
    commits: group_commit::CommitCounters,
    records: metrics::Counter,
    bytes: metrics::Counter,
    redelivered: metrics::Counter,
}

impl<T: Send + 'static> Running<T> {
    /// Emits one fetched record and moves its partition's offset in the state past it. A
    /// record the deserializer refused goes to the error policy — unless the refusal is not
    /// the record's fault (a schema registry out of reach): then the task fails and restarts
    /// from its checkpoint, which this record is not part of.
    ///
    /// A record below its partition's position was emitted already by this incarnation
    /// (librdkafka can hand a message over twice around a rebalance): it is dropped and
    /// counted (`rivus_kafka_records_redelivered_total`), never emitted twice.
    async fn emit(
        &self,
        ctx: &mut SourceContext<T, KafkaSourceState>,
        key: &str,
        f: fetcher::Fetched<T>,
    ) -> Result<()> {
        if !advance(ctx.state_mut(), key, f.offset) {
            self.redelivered.increment(1);
            tracing::debug!(
                partition = key,
                offset = f.offset,
                "kafka source: a record handed over again, dropped"
            );
            return Ok(());
        }
        match f.value {
            Ok(v) => match f.timestamp {
                Some(ts) => ctx.collect_with_timestamp(v, ts).await,
                None => ctx.collect(v).await,
            },
            Err(refused) => {
                let fetcher::Refused {
                    error,
                    position,
                    value,
                } = *refused;
                if error.transient {
                    return Err(rivus_sdk::Error::connector(
                        format!("kafka source: decoding {position}"),
                        error,
                    ));
                }
                self.handler.handle(position, &error, &value).await
            }
        }
    }
}

/// Moves `key`'s position in `state` past `offset`; false (and nothing moves) when the
/// position is past it already: the record was emitted before.
fn advance(state: &mut KafkaSourceState, key: &str, offset: i64) -> bool {
    match state.get_mut(key) {
        Some(next) if offset < *next => false,
        Some(next) => {
            *next = offset + 1;
            true
        }
        None => {
            state.insert(key.to_owned(), offset + 1);
            true
        }
    }
}

/// A Kafka source. Clone it into each subtask: `pipeline.source("kafka", 4, |_| src.clone())`.
pub struct KafkaSource<T> {
    settings: Arc<Settings>,
    deserializer: Arc<dyn KafkaDeserializer<T>>,
    subtask: usize,
    parallelism: usize,
    running: Option<Running<T>>,
}

impl<T> std::fmt::Debug for KafkaSource<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSource")
            .field("props", &self.settings.props)
            .field("subscription", &self.settings.subscription)
            .field("start", &self.settings.start)
            .field("stop", &self.settings.stop)
            .field("subtask", &self.subtask)
            .finish()
    }
}

impl<T> Clone for KafkaSource<T> {
    fn clone(&self) -> Self {
        KafkaSource {
            settings: Arc::clone(&self.settings),
            deserializer: Arc::clone(&self.deserializer),
            subtask: self.subtask,
            parallelism: self.parallelism,
            running: None,
        }
    }
}

impl KafkaSource<()> {
    /// Starts a builder for a source reading from the brokers of `config`: bootstrap servers
    /// (`"host:9092"`) or a whole [`KafkaConfig`] (TLS, SASL, librdkafka properties).
    pub fn builder(config: impl Into<KafkaConfig>) -> KafkaSourceBuilder {
        let props = config.into();
        KafkaSourceBuilder {
            s: Settings {
                props,
                subscription: Subscription::Topics(Vec::new()),
                start: StartOffsets::Committed {
                    reset_to_earliest: true,
                },
                stop: StopOffsets::Never,
                discovery: Some(Duration::from_secs(300)),
                policy: ErrorPolicy::Fail,
                max_batch: 5000,
                group_mode: false,
            },
        }
    }
}

impl<T: Send + 'static> KafkaSource<T> {
    /// What `open` created; an error before `open` (or after `close`).
    fn running(&self) -> Result<&Running<T>> {
        self.running
            .as_ref()
            .ok_or(Error::Closed("kafka source (not open)"))
    }

    /// Commits the offsets of a completed checkpoint to the group.
    async fn commit(&self, state: &KafkaSourceState) {
        let Ok(r) = self.running() else {
            return;
        };
        if self.settings.props.get("group.id").is_none() && r.assignment.is_none() {
            return;
        }
        if r.link.as_ref().is_some_and(|l| l.sink_commits()) {
            // The sink's transactions commit them, with the records.
            return;
        }
        // In group mode, only what the group gives this consumer now.
        let held = r
            .assignment
            .as_ref()
            .map(group_assignment::Assignment::current);
        group_commit::commit(&r.consumer, held, state, &r.commits).await;
    }

    fn commit_events_state(
        events: Vec<CheckpointEvent<KafkaSourceState>>,
    ) -> Option<KafkaSourceState> {
        CheckpointEvent::latest_completed(events).map(|(_, state)| state)
    }

    /// Commits what completed checkpoints cover, then waits for the consumer thread's next
    /// batch (serving checkpoints meanwhile); `None` when the source is to end.
    async fn next_batch(
        &self,
        ctx: &mut SourceContext<T, KafkaSourceState>,
        handover: &Handover<FetchBatch<T>>,
    ) -> Result<Option<FetchBatch<T>>> {
        let events = ctx.take_events();
        if self.running()?.committer.is_none() {
            if let Some(state) = Self::commit_events_state(events) {
                self.commit(&state).await;
            }
        }
        match ctx.wait_for(handover.poll_next()).await? {
            None | Some(Err(HandoverError::Closed)) => Ok(None),
            Some(Ok(b)) => Ok(Some(b)),
            Some(Err(HandoverError::Failed(e))) => Err(e),
        }
    }
}

#[async_trait]
impl<T: Send + 'static> RichFunction for KafkaSource<T> {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        self.subtask = ctx.subtask_index();
        self.parallelism = ctx.parallelism();
        let s = &self.settings;
        group::check_worker_mode(ctx, s.group_mode)?;
        // A refused password, certificate or topic fails here, not as a silent retry loop.
        crate::connect::probe(
            &s.props,
            &s.subscription.named_topics(),
            s.props.connect_timeout(),
        )
        .await?;
        let mut config = s.props.client_config(&[
            ("enable.auto.commit", "false"),
            ("enable.auto.offset.store", "false"),
        ]);
        // Prefetch bounded in bytes (see `PREFETCH`): set only what the user did not.
        set_unless_given(&mut config, &PREFETCH);
        if config.get("group.id").is_none() {
            // librdkafka wants a group id even for assign(); nothing is committed without one
            // set by the user.
            config.set("group.id", format!("rivus-{}", ctx.job_name()));
        }
        if s.group_mode {
            group::configure(&mut config, &s.start, ctx);
        }
        if config.get("statistics.interval.ms").is_none() {
            // The lag gauge comes from librdkafka's statistics, every 10 s.
            config.set("statistics.interval.ms", "10000");
        }
        let assignment = s.group_mode.then(group_assignment::Assignment::default);
        let link = s.group_mode.then(|| {
            ctx.task_shared()
                .get_or_insert_with(offsets_link::OffsetsLink::default)
        });
        // A sink chained into the task may keep the positions in its database.
        let kept = link.as_ref().map(|link| {
            let kept = ctx
                .task_shared()
                .get_or_insert_with(rivus_sdk::PositionsInSink::default);
            link.join_kept(Arc::clone(&kept));
            kept
        });
        let alive = Arc::new(AtomicBool::new(true));
        let lag = LagContext {
            kept,
            claim_failed: parking_lot::Mutex::new(None),
            group: rivus_sdk::context::MetricsGroup::new(vec![
                ("job".into(), ctx.job_name().to_owned()),
                ("subtask".into(), ctx.subtask_index().to_string()),
            ]),
            assignment: assignment.clone(),
            // A revocation waits for the next commit (a few checkpoints); without checkpoints
            // nothing commits, and nothing waits.
            link: link.clone().filter(|_| ctx.is_checkpointing_enabled()),
            drain_limit: ctx
                .checkpoint_interval()
                .map_or(Duration::from_secs(60), |i| {
                    (i * 3).max(Duration::from_secs(60))
                }),
        };
        let consumer = Arc::new(
            config
                .create_with_context::<_, SourceConsumer>(lag)
                .map_err(|e| s.props.build_error("consumer", e))?,
        );
        if let (Some(link), Some(a)) = (&link, &assignment) {
            let weak = Arc::downgrade(&consumer);
            let metadata = move || weak.upgrade().and_then(|c| c.group_metadata());
            link.set_source(Box::new(metadata), a.clone(), Arc::clone(&alive));
        }
        let m = ctx.metrics();
        let commits = group_commit::CommitCounters {
            ok: m
                .with_label("result", "ok")
                .counter("rivus_kafka_commits_total"),
            failed: m
                .with_label("result", "failed")
                .counter("rivus_kafka_commits_total"),
        };
        let committer = match (&link, &assignment) {
            (Some(link), Some(a)) if ctx.is_checkpointing_enabled() => {
                Some(group_commit::Committer::spawn(
                    Arc::clone(&consumer),
                    a.clone(),
                    Arc::clone(link),
                    ctx.completed_checkpoints(),
                    commits.clone(),
                ))
            }
            _ => None,
        };
        self.running = Some(Running {
            consumer,
            handover: Arc::new(Handover::new()),
            alive,
            thread: None,
            assignment,
            link,
            committer,
            handler: ErrorHandler::new(s.policy.clone(), ctx.display_name()).connector("kafka"),
            commits,
            records: m.counter("rivus_kafka_records_total"),
            bytes: m.counter("rivus_kafka_bytes_total"),
            redelivered: m.counter("rivus_kafka_records_redelivered_total"),
        });
        Ok(())
    }

    async fn close(&mut self) -> Result<()> {
        if let Some(mut r) = self.running.take() {
            if let Some(c) = r.committer.take() {
                c.stop();
            }
            r.alive.store(false, Ordering::Release);
            r.handover.close();
            let thread = r.thread.take();
            let consumer = r.consumer;
            // Joining the poll thread and dropping the consumer can block: not on a tokio worker.
            tokio::task::spawn_blocking(move || {
                if let Some(t) = thread {
                    let _ = t.join();
                }
                drop(consumer);
            })
            .await
            .map_err(|e| Error::connector("kafka source: closing the consumer", e.to_string()))?;
        }
        Ok(())
    }
}

#[async_trait]
impl<T: Send + 'static> SourceFunction for KafkaSource<T> {
    type Out = T;
    type State = KafkaSourceState;

    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        if self.settings.group_mode {
            DeliveryGuarantee::AtLeastOnce
        } else {
            DeliveryGuarantee::ExactlyOnce
        }
    }

    /// Group mode: an exactly-once Kafka sink chained into the task commits the offsets in
    /// its transactions (KIP-447), which makes the job exactly-once across workers.
    fn offers_positions_to_sink(&self) -> bool {
        self.settings.group_mode
    }

    /// Pools the offsets of every previous subtask; `run` keeps those of the partitions this
    /// subtask owns now, so the source rescales freely.
    fn restore_state(&mut self, restored: Restored<KafkaSourceState>) -> Result<KafkaSourceState> {
        self.subtask = restored.subtask;
        self.parallelism = restored.parallelism;
        let mut all = KafkaSourceState::new();
        for s in restored.union() {
            all.extend(s);
        }
        Ok(all)
    }

    async fn run(&mut self, ctx: &mut SourceContext<T, KafkaSourceState>) -> Result<()> {
        if self.settings.group_mode {
            return self.run_group(ctx).await;
        }
        self.run_assigned(ctx).await
    }

    async fn on_checkpoint_events(
        &mut self,
        events: Vec<CheckpointEvent<KafkaSourceState>>,
    ) -> Result<()> {
        let Some((id, state)) = CheckpointEvent::latest_completed(events) else {
            return Ok(());
        };
        match self.running.as_mut().and_then(|r| r.committer.as_mut()) {
            // Group mode: its task commits; the last checkpoint is committed before closing.
            Some(c) => c.handled(id, Duration::from_secs(30)).await,
            None => self.commit(&state).await,
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_below_its_partitions_position_is_not_emitted_again() {
        let mut state = KafkaSourceState::new();
        assert!(advance(&mut state, "t/0", 7), "a partition's first record");
        assert_eq!(state["t/0"], 8);
        assert!(advance(&mut state, "t/0", 8));
        assert!(!advance(&mut state, "t/0", 8), "the same offset again");
        assert!(!advance(&mut state, "t/0", 3), "an older one");
        assert_eq!(state["t/0"], 9, "nothing moved");
        assert!(
            advance(&mut state, "t/0", 20),
            "a gap (compaction) moves on"
        );
        assert!(advance(&mut state, "t/1", 0), "other partitions are apart");
        assert_eq!(state["t/0"], 21);
    }
}
