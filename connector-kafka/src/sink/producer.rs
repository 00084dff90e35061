//! One librdkafka producer with its delivery reports: send with back-pressure on a full local
//! queue, flush and check that every delivery succeeded. Used by the plain and the
//! transactional sink alike.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use std::time::Duration;

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientConfig, ClientContext};
use rivus_sdk::{Error, Result};

use crate::config::set_unless_given;
use crate::record::OutRecord;

/// How much longer than a call's own timeout the sink waits for a blocking librdkafka call.
const CALL_GRACE: Duration = Duration::from_secs(5);
/// How long a flush waits without any delivery report before it gives up (see
/// [`ProducerHandle::flush`]).
pub(crate) const DELIVERY_STALL: Duration = Duration::from_secs(10);
/// How long each metadata request of [`ProducerHandle::warm_up`] may take, and how many it
/// makes at most.
const WARM_UP_TIMEOUT: Duration = Duration::from_secs(5);
const WARM_UP_REQUESTS: u32 = 5;
/// How long an abort may take when a producer closes.
const ABORT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `begin_transaction` may take (it is local to the producer).
pub(crate) const BEGIN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `init_transactions` may take: fencing the previous producer of the id.
pub(crate) const INIT_TIMEOUT: Duration = Duration::from_secs(60);

/// The sink's producer queue unless set otherwise: at most 50 000 records
/// (`queue.buffering.max.messages`, librdkafka's default 100 000) and 16 MiB
/// (`queue.buffering.max.kbytes`, default 1 GiB) waiting for the broker, per producer. This
/// queue is what the sink holds in memory, and what a checkpoint waits for. Measured with
/// `benches/exactly_once.rs` (1 KiB records, 2 subtasks): the default queue cost 253 MiB peak
/// RSS at 141 k records/s at least once; 16 MiB, 69 MiB at 161 k/s.
pub const PRODUCER_QUEUE: [(&str, &str); 2] = [
    ("queue.buffering.max.messages", "50000"),
    ("queue.buffering.max.kbytes", "16384"),
];

/// Counts delivery reports; keeps the first failure; wakes a sender waiting for room in the
/// local queue.
pub(crate) struct Deliveries {
    /// Records handed to librdkafka so far.
    sent: AtomicU64,
    failed: AtomicU64,
    first_error: Mutex<Option<String>>,
    /// Delivery reports so far.
    delivered: AtomicU64,
    /// A sender found the queue full, or a flush waits: wake it when `delivered` reaches this
    /// (`u64::MAX`: no one waits).
    wake_at: AtomicU64,
    room: tokio::sync::Notify,
}

pub(crate) struct SinkClientContext(Arc<Deliveries>);

impl ClientContext for SinkClientContext {}

impl ProducerContext for SinkClientContext {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        let delivered = self.0.delivered.fetch_add(1, Ordering::Relaxed) + 1;
        if delivered >= self.0.wake_at.load(Ordering::Acquire)
            && self.0.wake_at.swap(u64::MAX, Ordering::AcqRel) != u64::MAX
        {
            self.0.room.notify_waiters();
        }
        if let Err((e, m)) = result {
            use rdkafka::Message;
            self.0.failed.fetch_add(1, Ordering::Relaxed);
            let mut first = self.0.first_error.lock();
            if first.is_none() {
                *first = Some(format!("{}/{}: {e}", m.topic(), m.partition()));
            }
        }
    }
}

/// A producer and its delivery reports.
#[derive(Clone)]
pub(crate) struct ProducerHandle {
    pub producer: Arc<ThreadedProducer<SinkClientContext>>,
    deliveries: Arc<Deliveries>,
    /// Times a send found the local queue full and waited (back-pressure).
    queue_full: metrics::Counter,
}

impl ProducerHandle {
    /// A producer; `queue_full` counts the sends that waited for room.
    pub(super) fn create(
        config: &ClientConfig,
        queue_full: metrics::Counter,
    ) -> std::result::Result<Self, KafkaError> {
        // The queue bound (see `PRODUCER_QUEUE`): set only what the user did not.
        let mut config = config.clone();
        set_unless_given(&mut config, &PRODUCER_QUEUE);
        let deliveries = Arc::new(Deliveries {
            sent: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            first_error: Mutex::new(None),
            delivered: AtomicU64::new(0),
            wake_at: AtomicU64::new(u64::MAX),
            room: tokio::sync::Notify::new(),
        });
        let producer = config.create_with_context(SinkClientContext(Arc::clone(&deliveries)))?;
        Ok(ProducerHandle {
            producer: Arc::new(producer),
            deliveries,
            queue_full,
        })
    }

    /// Readies an idempotent producer before its first record: asks for `topic`'s metadata
    /// (the cluster's, without one), blocking, until a broker by id answers (at most
    /// [`WARM_UP_REQUESTS`] requests). librdkafka acquires an idempotent producer's id when a
    /// metadata answer arrives while a broker is connected, else on a timer 500 ms after the
    /// client started; the first answers come over the bootstrap connection, which it drops
    /// as it learns the brokers, so only an answer from a broker by id gets the id at once.
    /// Without this, a source that is ready at once (a generator) saw its first records wait
    /// half a second in the producer. Failures are left to the sends, which report them.
    pub(super) async fn warm_up(&self, topic: Option<String>) {
        let deadline = WARM_UP_TIMEOUT * WARM_UP_REQUESTS;
        let _ = self
            .blocking("readying the producer (metadata)", deadline, move |p| {
                for _ in 0..WARM_UP_REQUESTS {
                    let m = p
                        .client()
                        .fetch_metadata(topic.as_deref(), WARM_UP_TIMEOUT)?;
                    if m.orig_broker_id() >= 0 {
                        break;
                    }
                }
                Ok(())
            })
            .await;
    }

    /// Sends `rec` to `topic`, waiting while librdkafka's local queue is full. The inner error
    /// is a record the client refuses (too large, unknown partition): for the error policy.
    /// The outer one: the queue stayed full with no delivery report for [`DELIVERY_STALL`]
    /// (the brokers do not answer) — retryable, the job restarts.
    pub(super) async fn send(
        &self,
        topic: &str,
        rec: &OutRecord,
    ) -> Result<std::result::Result<(), KafkaError>> {
        let mut record: BaseRecord<'_, [u8], [u8], ()> = BaseRecord::to(topic);
        if !rec.headers.is_empty() {
            // Headers cost a C allocation per record: only when there are some.
            let mut headers = OwnedHeaders::new_with_capacity(rec.headers.len());
            for (k, v) in &rec.headers {
                headers = headers.insert(Header {
                    key: k,
                    value: Some(v),
                });
            }
            record = record.headers(headers);
        }
        if let Some(k) = &rec.key {
            record = record.key(k.as_slice());
        }
        if let Some(v) = &rec.value {
            record = record.payload(v.as_slice());
        }
        if let Some(p) = rec.partition {
            record = record.partition(p);
        }
        if let Some(ts) = rec.timestamp {
            record = record.timestamp(ts);
        }
        let mut stalled: Option<(u64, tokio::time::Instant)> = None;
        let sent = loop {
            match self.producer.send(record) {
                Ok(()) => break Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    // The broker is slower than us: wait until deliveries made room for a
                    // burst (at most 100 ms, then try again). This is the back-pressure.
                    record = back;
                    let d = &self.deliveries;
                    let room = d.room.notified();
                    tokio::pin!(room);
                    room.as_mut().enable();
                    // An eighth of what is queued: the sender goes on with a burst instead of
                    // being woken for every report (each wake-up would take the CPU from
                    // librdkafka's threads to send one record).
                    let burst = (self.producer.in_flight_count().max(8) / 8) as u64;
                    let target = d.delivered.load(Ordering::Relaxed) + burst;
                    d.wake_at.store(target, Ordering::Release);
                    match self.producer.send(record) {
                        Ok(()) => break Ok(()),
                        Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                            record = back;
                            self.queue_full.increment(1);
                            let delivered = d.delivered.load(Ordering::Acquire);
                            let now = tokio::time::Instant::now();
                            match stalled {
                                Some((seen, since)) if seen == delivered => {
                                    if now.duration_since(since) >= DELIVERY_STALL {
                                        return Err(Error::connector(
                                            "kafka sink: send",
                                            format!(
                                                "the producer's queue stayed full with no \
                                                 delivery report for {DELIVERY_STALL:?}"
                                            ),
                                        ));
                                    }
                                }
                                _ => stalled = Some((delivered, now)),
                            }
                            let _waiting = rivus_sdk::activity::waiting("kafka: send (queue full)");
                            let _ = tokio::time::timeout(Duration::from_millis(100), room).await;
                        }
                        Err((e, _)) => break Err(e),
                    }
                }
                Err((e, _)) => break Err(e),
            }
        };
        if sent.is_ok() {
            self.deliveries.sent.fetch_add(1, Ordering::Release);
        }
        Ok(sent)
    }

    /// Waits for every outstanding delivery; fails if one failed since the last check, if
    /// they are not all reported within `timeout`, or if no report at all came for
    /// [`DELIVERY_STALL`] — records librdkafka keeps without answering (after the broker froze
    /// for longer than `request.timeout.ms` and came back fenced, some of a transactional
    /// producer's records were never reported). The error is retryable: the job restarts with
    /// new producers from its last checkpoint, what the stalled transaction held is aborted and
    /// read again.
    ///
    /// rdkafka's own `flush` polls in steps of 100 ms, and with the threaded producer's own
    /// poll thread taking the events, each flush took 100–200 ms however little was in flight.
    /// Here librdkafka is only told to send what lingers at once (a flush with no wait), and
    /// the delivery reports themselves wake the waiter.
    pub(super) async fn flush(&self, timeout: Duration) -> Result<()> {
        let _waiting = rivus_sdk::activity::waiting("kafka: flush (delivery reports)");
        let d = &self.deliveries;
        let target = d.sent.load(Ordering::Acquire);
        // A flush without waiting: librdkafka sends what lingers now; it reports a time-out
        // while anything is in flight, which is what the loop below waits for.
        let _ = self.producer.flush(Duration::ZERO);
        let deadline = tokio::time::Instant::now() + timeout;
        let (mut seen, mut progressed) = (
            d.delivered.load(Ordering::Acquire),
            tokio::time::Instant::now(),
        );
        loop {
            let room = d.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            if d.delivered.load(Ordering::Acquire) >= target {
                break;
            }
            d.wake_at.store(target, Ordering::Release);
            if d.delivered.load(Ordering::Acquire) >= target {
                break;
            }
            let now = tokio::time::Instant::now();
            let delivered = d.delivered.load(Ordering::Acquire);
            if delivered != seen {
                (seen, progressed) = (delivered, now);
            } else if now.duration_since(progressed) >= DELIVERY_STALL {
                return Err(Error::connector(
                    "kafka sink: flush",
                    format!(
                        "no delivery report for {DELIVERY_STALL:?}: {} of {target} records \
                         outstanding",
                        target.saturating_sub(delivered)
                    ),
                ));
            }
            if now >= deadline {
                return Err(Error::connector(
                    format!("kafka sink: flush within {timeout:?}"),
                    format!(
                        "{} of {target} records still without a delivery report",
                        target.saturating_sub(d.delivered.load(Ordering::Acquire))
                    ),
                ));
            }
            // The reports wake the waiter; the bound only guards against a lost wake-up.
            let _ =
                tokio::time::timeout((deadline - now).min(Duration::from_millis(100)), room).await;
        }
        self.check()
    }

    /// Fails if a delivery failed since the last check.
    pub(super) fn check(&self) -> Result<()> {
        if let Some(e) = self.deliveries.first_error.lock().take() {
            let n = self.deliveries.failed.swap(0, Ordering::Relaxed);
            return Err(Error::connector(
                "kafka sink: delivery",
                format!("{n} records failed, first: {e}"),
            ));
        }
        Ok(())
    }

    /// Runs a blocking producer call (transactions) off the async workers.
    pub(super) async fn blocking<R: Send + 'static>(
        &self,
        what: impl std::fmt::Display,
        deadline: Duration,
        f: impl FnOnce(&ThreadedProducer<SinkClientContext>) -> std::result::Result<R, KafkaError>
            + Send
            + 'static,
    ) -> Result<R> {
        let producer = Arc::clone(&self.producer);
        let _waiting = rivus_sdk::activity::waiting(format!("kafka: {what}"));
        let call = tokio::task::spawn_blocking(move || f(&producer));
        // librdkafka's own timeout (`deadline`, given to the call) should end it; this bounds
        // the wait also if it does not, so that the job fails and restarts instead of hanging
        // (the thread is left to finish; the process does not wait for it at exit).
        match tokio::time::timeout(deadline + CALL_GRACE, call).await {
            Err(_) => Err(Error::connector(
                format!("kafka sink: {what}"),
                format!("no answer from the brokers within {deadline:?}"),
            )),
            Ok(joined) => joined
                .map_err(|e| Error::connector(format!("kafka sink: {what}"), e.to_string()))?
                .map_err(|e| crate::kafka_err(format!("kafka sink: {what}"), e)),
        }
    }

    /// Closes a transactional producer: aborts its transaction if one is `open` (what no
    /// commit covers is written again or read again), then shuts down.
    pub(super) async fn abort_and_shutdown(self, open: bool) {
        if open {
            let _ = self
                .blocking("abort_transaction", ABORT_TIMEOUT, |p| {
                    p.abort_transaction(ABORT_TIMEOUT)
                })
                .await;
        }
        self.shutdown().await;
    }

    /// Flushes briefly and drops the producer on a blocking thread (dropping can block).
    pub(super) async fn shutdown(self) {
        let closing = tokio::task::spawn_blocking(move || {
            let _ = self.producer.flush(Duration::from_secs(10));
            drop(self);
        });
        // Dropping a producer whose records a broker never answered can wait for good: a
        // restart must not wait with it (the thread is left to finish).
        if tokio::time::timeout(Duration::from_secs(15), closing)
            .await
            .is_err()
        {
            tracing::warn!("kafka sink: a producer did not close within 15 s; left to close");
        }
    }
}
