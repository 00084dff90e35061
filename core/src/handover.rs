//! `Handover`: the one-slot hand-off between a client's poll loop (often a blocking thread, like
//! Kafka's consumer thread) and the async loop that emits records, with error propagation,
//! close from either side and producer wake-up — Flink's `Handover`, in async Rust.

use std::sync::{Condvar, Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::error::Error;

/// Why [`Handover::poll_next`] returned no element.
#[derive(Debug, thiserror::Error)]
pub enum HandoverError {
    /// The handover was closed (normally, by either side).
    #[error("handover closed")]
    Closed,
    /// The producer reported an error; it is handed to the consumer once.
    #[error(transparent)]
    Failed(Error),
}

/// Why [`Handover::produce`] did not hand the element over. The element is given back.
#[derive(Debug, PartialEq, Eq)]
pub enum ProduceError<T> {
    /// The handover is closed or an error was reported: stop producing.
    Closed(T),
    /// [`Handover::wakeup_producer`] was called while waiting: the producer should do its
    /// periodic work (commit offsets, reassign partitions) and then produce the element again.
    Wakeup(T),
}

struct Slot<T> {
    next: Option<T>,
    error: Option<Error>,
    closed: bool,
    wakeup: bool,
}

/// A one-element blocking hand-off from one producer to one consumer.
///
/// The producer calls [`produce`](Handover::produce) (blocking, for a dedicated thread) or
/// [`produce_async`](Handover::produce_async); it waits while the previous element has not been
/// taken, so the producer never runs more than one element ahead: back-pressure without a queue.
/// The consumer awaits [`poll_next`](Handover::poll_next).
pub struct Handover<T> {
    slot: Mutex<Slot<T>>,
    producer_cv: Condvar,
    producer_async: Notify,
    consumer: Notify,
}

impl<T> Default for Handover<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> std::fmt::Debug for Handover<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.lock();
        f.debug_struct("Handover")
            .field("full", &s.next.is_some())
            .field("closed", &s.closed)
            .field("error", &s.error.is_some())
            .finish()
    }
}

impl<T> Handover<T> {
    /// An empty, open handover.
    pub fn new() -> Self {
        Handover {
            slot: Mutex::new(Slot {
                next: None,
                error: None,
                closed: false,
                wakeup: false,
            }),
            producer_cv: Condvar::new(),
            producer_async: Notify::new(),
            consumer: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slot<T>> {
        // A panic while holding the lock cannot leave the slot inconsistent (each update is a
        // single assignment), so a poisoned lock is still usable.
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wake_producers(&self) {
        self.producer_cv.notify_all();
        self.producer_async.notify_waiters();
    }

    /// Takes the next element, waiting until one is produced, an error is reported, or the
    /// handover is closed. A reported error is returned once, then `Closed`.
    pub async fn poll_next(&self) -> Result<T, HandoverError> {
        loop {
            let notified = self.consumer.notified();
            {
                let mut s = self.lock();
                if let Some(v) = s.next.take() {
                    drop(s);
                    self.wake_producers();
                    return Ok(v);
                }
                if let Some(e) = s.error.take() {
                    s.closed = true;
                    return Err(HandoverError::Failed(e));
                }
                if s.closed {
                    return Err(HandoverError::Closed);
                }
            }
            notified.await;
        }
    }

    /// Takes the next element if one is waiting, without blocking.
    pub fn try_poll(&self) -> Option<T> {
        let v = self.lock().next.take();
        if v.is_some() {
            self.wake_producers();
        }
        v
    }

    fn offer(&self, s: &mut Slot<T>, element: T) -> Result<Option<T>, ProduceError<T>> {
        if s.closed || s.error.is_some() {
            return Err(ProduceError::Closed(element));
        }
        if s.wakeup {
            s.wakeup = false;
            return Err(ProduceError::Wakeup(element));
        }
        if s.next.is_some() {
            return Ok(Some(element));
        }
        s.next = Some(element);
        self.consumer.notify_one();
        Ok(None)
    }

    /// Hands `element` over, blocking the calling thread while the slot is full.
    /// Call it from a dedicated thread, never from an async task.
    pub fn produce(&self, element: T) -> Result<(), ProduceError<T>> {
        let mut element = element;
        let mut s = self.lock();
        loop {
            match self.offer(&mut s, element)? {
                None => return Ok(()),
                Some(back) => {
                    element = back;
                    s = self.producer_cv.wait(s).unwrap_or_else(|p| p.into_inner());
                }
            }
        }
    }

    /// Hands `element` over, waiting asynchronously while the slot is full.
    pub async fn produce_async(&self, element: T) -> Result<(), ProduceError<T>> {
        let mut element = element;
        loop {
            let notified = self.producer_async.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            match self.offer(&mut self.lock(), element)? {
                None => return Ok(()),
                Some(back) => element = back,
            }
            notified.await;
        }
    }

    /// Reports a producer-side error: the consumer receives it on its next `poll_next`, and
    /// further `produce` calls fail. Only the first error is kept.
    pub fn report_error(&self, error: Error) {
        {
            let mut s = self.lock();
            if s.error.is_none() && !s.closed {
                s.error = Some(error);
            }
        }
        self.consumer.notify_one();
        self.wake_producers();
    }

    /// Closes the handover: both sides wake and see `Closed`. An element still in the slot is
    /// dropped.
    pub fn close(&self) {
        {
            let mut s = self.lock();
            s.closed = true;
            s.next = None;
        }
        self.consumer.notify_one();
        self.wake_producers();
    }

    /// Wakes a producer waiting in `produce`, which returns [`ProduceError::Wakeup`] with its
    /// element. If no producer is waiting, the next `produce` call returns it instead.
    pub fn wakeup_producer(&self) {
        self.lock().wakeup = true;
        self.wake_producers();
    }

    /// True once closed (by either side, or after an error was taken).
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }
}
