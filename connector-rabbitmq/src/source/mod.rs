//! [`RabbitSource`]: consumes queues; acks on checkpoint completion; drops redeliveries whose
//! correlation id the state expects back (see [`state`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicQosOptions, QueueDeclareOptions};

/// How a source declares its queues, when it declares them (instead of using existing ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueDeclare {
    /// The queue survives a broker restart.
    pub durable: bool,
    /// Only this connection may use the queue; it goes with the connection.
    pub exclusive: bool,
    /// The queue is deleted when its last consumer goes.
    pub auto_delete: bool,
}

impl QueueDeclare {
    /// A durable, shared queue that stays: what a pipeline that must not lose messages wants.
    pub fn durable() -> Self {
        QueueDeclare {
            durable: true,
            exclusive: false,
            auto_delete: false,
        }
    }

    fn options(self) -> QueueDeclareOptions {
        QueueDeclareOptions {
            durable: self.durable,
            exclusive: self.exclusive,
            auto_delete: self.auto_delete,
            ..QueueDeclareOptions::default()
        }
    }
}
use lapin::types::FieldTable;
use lapin::{Channel, Connection};
use rivus_sdk::backoff::Attempts;
use rivus_sdk::error_policy::{ErrorHandler, ErrorPolicy};
use rivus_sdk::prelude::*;
use rivus_sdk::schema::SchemaError;

use crate::config::AmqpConfig;

mod state;

pub use state::RabbitSourceState;

/// One delivered message, borrowed.
#[derive(Debug, Clone, Copy)]
pub struct RabbitMessage<'a> {
    /// The queue it came from.
    pub queue: &'a str,
    /// The body.
    pub body: &'a [u8],
    /// The correlation id property, if set.
    pub correlation_id: Option<&'a str>,
    /// The message id property, if set.
    pub message_id: Option<&'a str>,
    /// The routing key it was published with.
    pub routing_key: &'a str,
    /// True when the broker delivered it before (to this or another consumer).
    pub redelivered: bool,
    /// The delivery tag on this subtask's channel.
    pub delivery_tag: u64,
}

type Decoder<T> = dyn Fn(&RabbitMessage<'_>) -> Result<T, SchemaError> + Send + Sync;

/// What a [`RabbitSourceBuilder`] sets, shared by the subtasks of the built source.
#[derive(Debug)]
struct Settings {
    config: AmqpConfig,
    queues: Vec<String>,
    declare: Option<QueueDeclare>,
    prefetch: u16,
    correlation_ids: bool,
    auto_ack: bool,
    policy: ErrorPolicy,
}

/// Builds a [`RabbitSource`].
#[derive(Debug)]
pub struct RabbitSourceBuilder {
    s: Settings,
}

impl RabbitSourceBuilder {
    /// The queues to consume; queue `k` (in the given order) goes to subtask `k % parallelism`.
    pub fn queues<I: IntoIterator<Item = S>, S: Into<String>>(mut self, q: I) -> Self {
        self.s.queues = q.into_iter().map(Into::into).collect();
        self
    }

    rivus_sdk::setters! {
        /// Declares the queues with these options (default: use existing queues).
        declare(options: QueueDeclare) => s.declare = Some(options);

        /// Unacknowledged deliveries in flight per subtask (QoS prefetch, default 500). Bounds
        /// memory; must exceed what one checkpoint interval reads, or reading pauses until the
        /// checkpoint acknowledges.
        prefetch(n: u16) => s.prefetch;

        /// Drop redeliveries whose correlation id (or message id) was emitted before the restored
        /// checkpoint: exactly-once, if producers set unique ids (default false: at-least-once).
        use_correlation_ids(on: bool) => s.correlation_ids;

        /// Let the broker consider messages delivered on sending them: for jobs without
        /// checkpoints; at-most-once.
        auto_ack(on: bool) => s.auto_ack;

        /// What to do with messages the decoder rejects (they are acknowledged afterwards, never
        /// redelivered forever). Default: fail.
        error_policy(p: ErrorPolicy) => s.policy;
    }

    /// Checks the settings.
    pub fn build<T: Send + 'static>(
        self,
        decode: impl Fn(&RabbitMessage<'_>) -> Result<T, SchemaError> + Send + Sync + 'static,
    ) -> Result<RabbitSource<T>> {
        let s = self.s;
        s.config.validate()?;
        if s.queues.is_empty() || s.queues.iter().any(|q| q.trim().is_empty()) {
            return Err(Error::config("queues", "at least one non-empty queue name"));
        }
        if s.prefetch == 0 {
            return Err(Error::config(
                "prefetch",
                "must be at least 1 (0 means unbounded)",
            ));
        }
        if s.auto_ack && s.correlation_ids {
            return Err(Error::config(
                "auto_ack",
                "auto-ack cannot be combined with correlation ids",
            ));
        }
        Ok(RabbitSource {
            settings: Arc::new(s),
            decode: Arc::new(decode),
            conn: None,
            share: Share::whole(),
            channels: Vec::new(),
            pending: BTreeMap::new(),
            last_tags: Vec::new(),
            broken: false,
            settled: Settle::default(),
        })
    }
}

/// A RabbitMQ source. Clone it into each subtask.
pub struct RabbitSource<T> {
    settings: Arc<Settings>,
    decode: Arc<Decoder<T>>,
    conn: Option<Connection>,
    /// One channel per owned queue: delivery tags then arrive in order on each channel, so a
    /// multiple-ack never covers a delivery emitted after the barrier.
    channels: Vec<(String, Channel)>,
    share: Share,
    /// Checkpoint id → per channel, the highest delivery tag emitted before its barrier.
    pending: BTreeMap<u64, Vec<Option<u64>>>,
    /// Per channel, the highest delivery tag since the last checkpoint barrier.
    last_tags: Vec<Option<u64>>,
    /// The connection was lost (an ack failed): reconnect before reading on.
    broken: bool,
    settled: Settle,
}

/// When the ids a restart or a lost connection left expected may be forgotten. The broker
/// requeues a gone consumer's unacknowledged deliveries when it closes that connection — at
/// once when the process exited, within two heartbeat timeouts when its host vanished — and
/// places them ahead of every message never delivered. So once that time has passed and each
/// owned queue has then delivered a first-time message, whatever is still expected was
/// acknowledged before the crash and never comes back.
#[derive(Debug, Default)]
struct Settle {
    /// `None` with heartbeats disabled: expected ids are kept until they come back.
    at: Option<Instant>,
    fresh: Vec<bool>,
}

impl Settle {
    fn start(conn: &Connection, channels: usize) -> Self {
        let heartbeat = conn.configuration().heartbeat();
        Settle {
            at: (heartbeat > 0)
                .then(|| Instant::now() + 2 * Duration::from_secs(u64::from(heartbeat))),
            fresh: vec![false; channels],
        }
    }

    /// A first-time delivery on channel `i`: true once every channel had one after the
    /// settling time.
    fn fresh(&mut self, i: usize) -> bool {
        if self.at.is_some_and(|at| Instant::now() >= at) {
            self.fresh[i] = true;
        }
        !self.fresh.is_empty() && self.fresh.iter().all(|f| *f)
    }
}

impl<T> std::fmt::Debug for RabbitSource<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RabbitSource")
            .field("config", &self.settings.config)
            .field("queues", &self.settings.queues)
            .field("subtask", &self.share.subtask())
            .finish()
    }
}

impl<T> Clone for RabbitSource<T> {
    fn clone(&self) -> Self {
        RabbitSource {
            settings: Arc::clone(&self.settings),
            decode: Arc::clone(&self.decode),
            conn: None,
            share: self.share,
            channels: Vec::new(),
            pending: BTreeMap::new(),
            last_tags: Vec::new(),
            broken: false,
            settled: Settle::default(),
        }
    }
}

impl RabbitSource<()> {
    /// Starts a builder for a source consuming from the broker at a URI
    /// (`amqp://user:password@host:5672/%2f`, `amqps://` for TLS) or an [`AmqpConfig`] (TLS
    /// files, timeouts, reconnect backoff).
    pub fn builder(config: impl Into<AmqpConfig>) -> RabbitSourceBuilder {
        RabbitSourceBuilder {
            s: Settings {
                config: config.into(),
                queues: Vec::new(),
                declare: None,
                prefetch: 500,
                correlation_ids: false,
                auto_ack: false,
                policy: ErrorPolicy::Fail,
            },
        }
    }
}

type Tagged = std::pin::Pin<
    Box<
        dyn futures::Stream<Item = (usize, String, lapin::Result<lapin::message::Delivery>)> + Send,
    >,
>;
type Deliveries = futures::stream::SelectAll<Tagged>;

fn amqp(what: &str, e: impl std::fmt::Display) -> Error {
    crate::error::amqp(format!("rabbitmq source: {what}"), e)
}

#[async_trait]
impl<T: Send + 'static> RichFunction for RabbitSource<T> {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        if !self.settings.auto_ack && !ctx.is_checkpointing_enabled() {
            // The broker would stop delivering once `prefetch` deliveries wait for an
            // acknowledgement that only a completed checkpoint sends.
            return Err(Error::config(
                "checkpoint",
                "the RabbitMQ source acknowledges deliveries when a checkpoint completes, and \
                 this job takes no checkpoints: enable checkpointing, or set \
                 source.rabbitmq.auto_ack = true (at-most-once)",
            ));
        }
        self.share = ctx.share();
        self.connect().await
    }

    async fn close(&mut self) -> Result<()> {
        self.channels.clear();
        if let Some(conn) = self.conn.take() {
            // Unacknowledged deliveries return to their queues when the connection closes.
            crate::config::close_quietly(&conn, "rivus source closed").await;
        }
        Ok(())
    }
}

impl<T: Send + 'static> RabbitSource<T> {
    /// Connects and opens one channel (with its prefetch) per owned queue.
    async fn connect(&mut self) -> Result<()> {
        let conn = self.settings.config.connect().await?;
        let owned: Vec<String> = self
            .share
            .pick(self.settings.queues.iter())
            .cloned()
            .collect();
        self.channels.clear();
        for q in owned {
            let ch = conn
                .create_channel()
                .await
                .map_err(|e| amqp("opening a channel", e))?;
            if !self.settings.auto_ack {
                ch.basic_qos(self.settings.prefetch, BasicQosOptions::default())
                    .await
                    .map_err(|e| amqp("setting prefetch", e))?;
            }
            self.channels.push((q, ch));
        }
        self.last_tags = vec![None; self.channels.len()];
        self.settled = Settle::start(&conn, self.channels.len());
        self.conn = Some(conn);
        Ok(())
    }

    /// Declares (if asked) and consumes every owned queue, as one stream of deliveries.
    async fn consume(&self) -> Result<Deliveries> {
        let s = &self.settings;
        let mut consumers = Vec::new();
        for (i, (q, ch)) in self.channels.iter().enumerate() {
            if let Some(opts) = s.declare {
                ch.queue_declare(q.as_str().into(), opts.options(), FieldTable::default())
                    .await
                    .map_err(|e| amqp(&format!("declaring queue {q}"), e))?;
            }
            let tag = format!("rivus-{}-{q}", self.share.subtask());
            let c = ch
                .basic_consume(
                    q.as_str().into(),
                    tag.as_str().into(),
                    BasicConsumeOptions {
                        no_ack: s.auto_ack,
                        ..Default::default()
                    },
                    FieldTable::default(),
                )
                .await
                .map_err(|e| amqp(&format!("consuming {q}"), e))?;
            let q = q.clone();
            let tagged: Tagged = Box::pin(c.map(move |d| (i, q.clone(), d)));
            consumers.push(tagged);
        }
        Ok(futures::stream::select_all(consumers))
    }

    /// After a lost connection: every delivery not acknowledged comes back (redelivered), so
    /// the ids not acknowledged are expected back (and then dropped as duplicates) and old
    /// delivery tags are void.
    /// Reconnects with backoff, serving checkpoints while it waits; `None` when stopped.
    async fn reconnect(
        &mut self,
        ctx: &mut SourceContext<T, RabbitSourceState>,
        why: &str,
    ) -> Result<Option<Deliveries>> {
        tracing::warn!(
            subtask = self.share.subtask(),
            reason = why,
            "rabbitmq source: connection lost, reconnecting"
        );
        metrics::counter!("rivus_rabbitmq_reconnects_total").increment(1);
        ctx.state_mut().connection_lost();
        self.pending.clear();
        // The old channels' tags are void: a checkpoint triggered while reconnecting must not
        // file them, or its completion would acknowledge the new channel's deliveries of the
        // same numbers — taken after its barrier, and lost at the next crash.
        self.last_tags.iter_mut().for_each(|t| *t = None);
        self.channels.clear();
        self.broken = false;
        if let Some(c) = self.conn.take() {
            crate::config::close_quietly(&c, "reconnecting").await;
        }
        let mut attempts = Attempts::new(
            "rabbitmq source: reconnect",
            &self.settings.config.reconnect,
        );
        loop {
            let err = match self.connect().await {
                Ok(()) => match self.consume().await {
                    Ok(d) => return Ok(Some(d)),
                    Err(e) => e,
                },
                Err(e) => e,
            };
            if !ctx.backoff(&mut attempts, err).await? {
                return Ok(None);
            }
            // Nothing to acknowledge on a closed connection; the triggered checkpoints find
            // no tags.
            self.on_events(ctx.take_events()).await?;
        }
    }

    /// Files the deliveries since the last barrier under each triggered checkpoint and acks
    /// (one multiple-ack per channel) everything of checkpoints up to a completed one.
    /// Returns the snapshot of the newest completed checkpoint whose acknowledgements were all
    /// sent: the ids taken before its barrier may be forgotten.
    async fn on_events(
        &mut self,
        events: Vec<CheckpointEvent<RabbitSourceState>>,
    ) -> Result<Option<RabbitSourceState>> {
        let mut acknowledged = None;
        for ev in events {
            match ev {
                CheckpointEvent::Triggered(id) => {
                    let tags: Vec<Option<u64>> =
                        self.last_tags.iter_mut().map(Option::take).collect();
                    if tags.iter().any(Option::is_some) {
                        self.pending.insert(id, tags);
                    }
                }
                CheckpointEvent::Completed { id, state } => {
                    let upto: Vec<u64> = self.pending.range(..=id).map(|(c, _)| *c).collect();
                    for (i, (_, ch)) in self.channels.iter().enumerate() {
                        let tag = upto
                            .iter()
                            .filter_map(|c| self.pending.get(c)?.get(i).copied().flatten())
                            .max();
                        if let Some(tag) = tag {
                            if let Err(e) =
                                ch.basic_ack(tag, BasicAckOptions { multiple: true }).await
                            {
                                // The deliveries come back after the reconnect.
                                tracing::warn!(error = %e, "rabbitmq source: acknowledging failed");
                                self.broken = true;
                            }
                        }
                    }
                    for c in upto {
                        self.pending.remove(&c);
                    }
                    if !self.broken {
                        acknowledged = Some(state);
                    }
                }
                CheckpointEvent::Aborted(_) => {}
            }
        }
        Ok(acknowledged)
    }

    /// Serves the checkpoint events taken so far, forgetting the ids they acknowledged.
    async fn serve_events(&mut self, ctx: &mut SourceContext<T, RabbitSourceState>) -> Result<()> {
        if let Some(at) = self.on_events(ctx.take_events()).await? {
            ctx.state_mut().acknowledged(&at);
        }
        Ok(())
    }
}

#[async_trait]
impl<T: Send + 'static> SourceFunction for RabbitSource<T> {
    type Out = T;
    type State = RabbitSourceState;

    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        if self.settings.auto_ack {
            DeliveryGuarantee::AtMostOnce
        } else if self.settings.correlation_ids {
            DeliveryGuarantee::ExactlyOnce
        } else {
            DeliveryGuarantee::AtLeastOnce
        }
    }

    /// Every subtask expects the ids of every previous subtask (a redelivery may reach any
    /// consumer of the queue), so deduplication works at any parallelism.
    fn restore_state(
        &mut self,
        restored: Restored<RabbitSourceState>,
    ) -> Result<RabbitSourceState> {
        Ok(RabbitSourceState::restored(restored.union()))
    }

    async fn on_checkpoint_events(
        &mut self,
        events: Vec<CheckpointEvent<RabbitSourceState>>,
    ) -> Result<()> {
        // After `run`: the final snapshot is taken; forgetting ids would change nothing.
        self.on_events(events).await.map(|_| ())
    }

    async fn run(&mut self, ctx: &mut SourceContext<T, RabbitSourceState>) -> Result<()> {
        let s = Arc::clone(&self.settings);
        let handler = ErrorHandler::new(
            s.policy.clone(),
            format!("rabbitmq-source[{}]", self.share.subtask()),
        )
        .connector("rabbitmq");
        if self.channels.is_empty() {
            ctx.wait_for(std::future::pending::<()>()).await?;
            return Ok(());
        }
        let mut deliveries = self.consume().await?;
        let dropped = metrics::counter!("rivus_rabbitmq_duplicates_dropped_total");
        loop {
            // Return for checkpoint events too: the broker sends nothing more until the
            // completed checkpoints are acknowledged (prefetch).
            let waited = ctx.wait_for_or_event(deliveries.next()).await?;
            // Checkpoints taken before this point (inside the last `collect` or during the
            // wait) cover exactly what was emitted so far: file them before the new delivery.
            self.serve_events(ctx).await?;
            let lost = match &waited {
                Waited::Ready(None) => Some("the broker closed the channel".to_owned()),
                Waited::Ready(Some((_, _, Err(e)))) => Some(e.to_string()),
                _ if self.broken => Some("an acknowledgement failed".to_owned()),
                _ => None,
            };
            if let Some(why) = lost {
                drop(waited);
                match self.reconnect(ctx, &why).await? {
                    Some(d) => deliveries = d,
                    None => return Ok(()),
                }
                continue;
            }
            let next = match waited {
                Waited::Stopped => return Ok(()),
                Waited::Event => continue,
                Waited::Ready(Some((i, queue, Ok(d)))) => (i, queue, d),
                Waited::Ready(_) => unreachable!("a lost connection is handled above"),
            };
            let (i, queue, d) = next;
            if !s.auto_ack {
                self.last_tags[i] = Some(d.delivery_tag);
            }
            let msg = RabbitMessage {
                queue: &queue,
                body: &d.data,
                correlation_id: d.properties.correlation_id().as_ref().map(|s| s.as_str()),
                message_id: d.properties.message_id().as_ref().map(|s| s.as_str()),
                routing_key: d.routing_key.as_str(),
                redelivered: d.redelivered,
                delivery_tag: d.delivery_tag,
            };
            let id = if s.correlation_ids {
                msg.correlation_id.or(msg.message_id).map(str::to_owned)
            } else {
                None
            };
            if let Some(id) = &id {
                let st = ctx.state_mut();
                if d.redelivered && st.duplicate(id) {
                    dropped.increment(1);
                    continue;
                }
                if !d.redelivered && !st.expected.is_empty() && self.settled.fresh(i) {
                    let n = st.forget_expected();
                    tracing::debug!(
                        subtask = self.share.subtask(),
                        ids = n,
                        "rabbitmq source: every owned queue delivers first-time messages \
                         again; the ids still expected were acknowledged before the restart"
                    );
                }
            }
            match (self.decode)(&msg) {
                Ok(v) => {
                    if let Some(id) = id {
                        ctx.state_mut().taken(id);
                    }
                    ctx.collect(v).await?;
                }
                // Not the message's fault (a schema registry out of reach): the task fails
                // and the unacknowledged message is delivered again after the restart.
                Err(e) if e.transient => {
                    return Err(Error::connector(
                        format!("rabbitmq source: decoding {queue}#{}", d.delivery_tag),
                        e,
                    ))
                }
                Err(e) => {
                    handler
                        .handle(format!("{queue}#{}", d.delivery_tag), &e, &d.data)
                        .await?
                }
            }
        }
    }
}
