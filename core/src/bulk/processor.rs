//! The [`BulkProcessor`]: buffer, triggers, bounded in-flight bulks, retries, flush.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::time::Instant;

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

use super::{BulkConfig, BulkListener, BulkSender, NoopListener, SendOutcome};
use crate::error::{Error, Result};

type SizeFn<R> = dyn Fn(&R) -> usize + Send + Sync;

struct Buffer<R> {
    items: Vec<R>,
    bytes: usize,
    last_send: Instant,
}

struct Shared<R> {
    name: String,
    config: BulkConfig,
    sender: Arc<dyn BulkSender<R>>,
    listener: Arc<dyn BulkListener>,
    size_of: Arc<SizeFn<R>>,
    buffer: Mutex<Buffer<R>>,
    permits: Arc<Semaphore>,
    in_flight: AtomicUsize,
    idle: Notify,
    /// A full buffer was taken, or a slot freed.
    room: Notify,
    next_id: AtomicU64,
    failure: Mutex<Failure>,
}

#[derive(Default)]
struct Failure {
    first: Option<Error>,
    message: Option<String>,
}

/// Buffers requests of type `R` and sends them in bulks through a [`BulkSender`].
///
/// A bulk is sent when `max_actions` requests or `max_bytes` bytes are buffered, when the
/// flush interval passes, or on [`flush`](BulkProcessor::flush). At most `concurrent_requests`
/// bulks are in flight; [`add`](BulkProcessor::add) waits for a free slot, so memory stays
/// bounded by `(concurrent_requests + 1) × bulk size`. Requests the sender marks retryable are
/// retried under the backoff policy. The first failure that outlives its retries stops the
/// processor and is returned by the next `add` or `flush` — never swallowed.
pub struct BulkProcessor<R: Send + 'static> {
    shared: Arc<Shared<R>>,
    timer: Option<JoinHandle<()>>,
}

impl<R: Send + 'static> std::fmt::Debug for BulkProcessor<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BulkProcessor")
            .field("name", &self.shared.name)
            .field("config", &self.shared.config)
            .field("in_flight", &self.in_flight())
            .finish()
    }
}

impl<R: Send + 'static> BulkProcessor<R> {
    /// A processor named `name` (used in logs and metrics) sending through `sender`.
    /// Fails if `config` is invalid. Must be called inside a tokio runtime when a flush interval
    /// is set.
    pub fn new(
        name: impl Into<String>,
        config: BulkConfig,
        sender: impl BulkSender<R>,
    ) -> Result<Self> {
        Self::with_parts(
            name,
            config,
            Arc::new(sender),
            Arc::new(NoopListener),
            Arc::new(|_: &R| 0),
        )
    }

    /// Like [`new`](BulkProcessor::new), with a listener and a function estimating each
    /// request's size in bytes (for the `max_bytes` trigger).
    pub fn with_parts(
        name: impl Into<String>,
        config: BulkConfig,
        sender: Arc<dyn BulkSender<R>>,
        listener: Arc<dyn BulkListener>,
        size_of: Arc<SizeFn<R>>,
    ) -> Result<Self> {
        let name = name.into();
        config.validate()?;
        let shared = Arc::new(Shared {
            permits: Arc::new(Semaphore::new(config.concurrent_requests)),
            name,
            sender,
            listener,
            size_of,
            buffer: Mutex::new(Buffer {
                items: Vec::new(),
                bytes: 0,
                last_send: Instant::now(),
            }),
            in_flight: AtomicUsize::new(0),
            idle: Notify::new(),
            room: Notify::new(),
            next_id: AtomicU64::new(1),
            failure: Mutex::new(Failure::default()),
            config,
        });
        let timer = shared.config.flush_interval.map(|every| {
            let weak = Arc::downgrade(&shared);
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(every);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    let Some(shared) = weak.upgrade() else { return };
                    let due = {
                        let b = shared.buffer.lock();
                        !b.items.is_empty() && b.last_send.elapsed() >= every
                    };
                    if due && shared.check_failed().is_ok() {
                        shared.dispatch().await;
                    }
                }
            })
        });
        Ok(BulkProcessor { shared, timer })
    }

    /// Adds a request; sends a bulk if a trigger is reached, waiting while the maximum number
    /// of bulks is in flight. Returns the first asynchronous failure, if one happened.
    pub async fn add(&self, request: R) -> Result<()> {
        self.shared.check_failed()?;
        let full = {
            let mut b = self.shared.buffer.lock();
            b.bytes += (self.shared.size_of)(&request);
            b.items.push(request);
            self.shared.full(&b)
        };
        if full {
            self.shared.make_room().await;
        }
        Ok(())
    }

    /// Adds requests in order, taking the buffer's lock once per bulk instead of once per
    /// request; sends bulks as triggers are reached, like [`add`](BulkProcessor::add).
    pub async fn add_all(&self, requests: impl IntoIterator<Item = R>) -> Result<()> {
        self.shared.check_failed()?;
        let mut requests = requests.into_iter().peekable();
        while requests.peek().is_some() {
            let full = {
                let mut b = self.shared.buffer.lock();
                let mut full = false;
                while !full {
                    let Some(r) = requests.next() else { break };
                    b.bytes += (self.shared.size_of)(&r);
                    b.items.push(r);
                    full = self.shared.full(&b);
                }
                full
            };
            if full {
                self.shared.make_room().await;
                self.shared.check_failed()?;
            }
        }
        Ok(())
    }

    /// Sends what is buffered and waits until no bulk is in flight (flush-on-checkpoint).
    /// Returns the first failure, if one happened.
    pub async fn flush(&self) -> Result<()> {
        self.shared.check_failed()?;
        self.shared.dispatch().await;
        loop {
            let idle = self.shared.idle.notified();
            if self.shared.in_flight.load(Ordering::Acquire) == 0 {
                break;
            }
            idle.await;
        }
        self.shared.check_failed()
    }

    /// Requests buffered and not yet sent.
    pub fn buffered(&self) -> usize {
        self.shared.buffer.lock().items.len()
    }

    /// Bulks being sent (including those waiting to retry).
    pub fn in_flight(&self) -> usize {
        self.shared.in_flight.load(Ordering::Acquire)
    }

    /// Flushes, then stops the timer.
    pub async fn close(mut self) -> Result<()> {
        let r = self.flush().await;
        if let Some(t) = self.timer.take() {
            t.abort();
        }
        r
    }
}

impl<R: Send + 'static> Drop for BulkProcessor<R> {
    fn drop(&mut self) {
        if let Some(t) = self.timer.take() {
            t.abort();
        }
    }
}

impl<R: Send + 'static> Shared<R> {
    fn full(&self, b: &Buffer<R>) -> bool {
        (self.config.max_actions > 0 && b.items.len() >= self.config.max_actions)
            || (self.config.max_bytes > 0 && b.bytes >= self.config.max_bytes)
    }

    fn check_failed(&self) -> Result<()> {
        let mut f = self.failure.lock();
        if let Some(e) = f.first.take() {
            return Err(e);
        }
        match &f.message {
            Some(m) => Err(Error::connector(
                format!("bulk processor `{}`", self.name),
                format!("stopped after an earlier failure: {m}"),
            )),
            None => Ok(()),
        }
    }

    fn fail(&self, e: Error) {
        let mut f = self.failure.lock();
        if f.message.is_none() {
            f.message = Some(e.to_string());
            f.first = Some(e);
        }
    }

    /// Waits until the (full) buffer is taken: by this task when a slot is free, or by a
    /// sender that just finished its bulk — that sender goes straight on with it, so the next
    /// bulk leaves without waiting for this task to be scheduled.
    async fn make_room(self: &Arc<Self>) {
        loop {
            let room = self.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            if !self.full(&self.buffer.lock()) || self.has_failed() {
                return;
            }
            if let Ok(permit) = Arc::clone(&self.permits).try_acquire_owned() {
                self.send_buffer(permit);
                return;
            }
            room.await;
        }
    }

    fn has_failed(&self) -> bool {
        self.failure.lock().message.is_some()
    }

    /// Takes the buffer's requests and their size.
    fn take(&self) -> (Vec<R>, usize) {
        Self::take_from(&mut self.buffer.lock())
    }

    /// Like [`take`](Self::take), when a trigger is reached (under one lock).
    fn take_if_full(&self) -> Option<(Vec<R>, usize)> {
        let mut b = self.buffer.lock();
        self.full(&b).then(|| Self::take_from(&mut b))
    }

    fn take_from(b: &mut Buffer<R>) -> (Vec<R>, usize) {
        b.last_send = Instant::now();
        let bytes = std::mem::take(&mut b.bytes);
        (std::mem::take(&mut b.items), bytes)
    }

    /// Sends what is buffered on a new task holding `permit`.
    fn send_buffer(self: &Arc<Self>, permit: OwnedSemaphorePermit) {
        let (items, bytes) = self.take();
        self.room.notify_waiters();
        if items.is_empty() {
            return;
        }
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        let shared = Arc::clone(self);
        tokio::spawn(async move { shared.send_bulks(items, bytes, permit).await });
    }

    /// Takes the buffer and sends it as one bulk once a slot is free.
    async fn dispatch(self: &Arc<Self>) {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        self.send_buffer(permit);
    }

    /// Sends `items`, then the buffer each time it is full when a bulk ends; gives the slot
    /// back when it is not (or after a failure).
    async fn send_bulks(
        self: Arc<Self>,
        mut items: Vec<R>,
        mut bytes: usize,
        permit: OwnedSemaphorePermit,
    ) {
        loop {
            if !self.send_with_retries(items, bytes).await {
                break;
            }
            let Some(next) = self.take_if_full() else {
                break;
            };
            (items, bytes) = next;
            self.room.notify_waiters();
        }
        drop(permit);
        if self.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.idle.notify_waiters();
        }
        self.room.notify_waiters();
    }

    /// Sends one bulk with retries; false when it failed for good (the processor stopped).
    async fn send_with_retries(&self, items: Vec<R>, bytes: usize) -> bool {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let actions = items.len();
        self.listener.before_bulk(id, actions, bytes);
        let started = Instant::now();
        let labels = [("processor", self.name.clone())];
        metrics::counter!("rivus_bulk_requests_total", &labels).increment(1);
        metrics::counter!("rivus_bulk_actions_total", &labels).increment(actions as u64);
        let mut items = items;
        let mut retries = 0u32;
        let error = loop {
            match self.sender.send(items).await {
                SendOutcome::Done => break None,
                SendOutcome::Failed(e) => break Some(e),
                SendOutcome::Retry {
                    items: again,
                    reason,
                } => {
                    retries += 1;
                    match self.config.backoff.delay(retries) {
                        Some(wait) => {
                            metrics::counter!("rivus_bulk_retries_total", &labels).increment(1);
                            tracing::debug!(processor = %self.name, bulk = id, retry = retries,
                                items = again.len(), ?wait, %reason, "retrying bulk");
                            tokio::time::sleep(wait).await;
                            items = again;
                        }
                        None => {
                            break Some(Error::connector(
                                format!("bulk processor `{}`: bulk {id}", self.name),
                                format!(
                                    "{} requests still failing after {} retries: {reason}",
                                    again.len(),
                                    retries - 1
                                ),
                            ))
                        }
                    }
                }
            }
        };
        metrics::histogram!("rivus_bulk_latency_seconds", &labels)
            .record(started.elapsed().as_secs_f64());
        self.listener
            .after_bulk(id, actions, retries, error.as_ref());
        match error {
            Some(e) => {
                metrics::counter!("rivus_bulk_failures_total", &labels).increment(1);
                tracing::error!(processor = %self.name, bulk = id, error = %e, "bulk failed");
                self.fail(e);
                false
            }
            None => true,
        }
    }
}
