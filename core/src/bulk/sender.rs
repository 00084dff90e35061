//! What a connector implements to use the [`BulkProcessor`](super::BulkProcessor): the sender
//! that performs one bulk request, and an optional listener.

use async_trait::async_trait;

use crate::error::Error;

/// The result of sending one bulk.
#[derive(Debug)]
pub enum SendOutcome<R> {
    /// Every request took effect (or was handed to the error policy by the sender).
    Done,
    /// These requests failed in a way worth retrying (a whole-request network error, or items
    /// rejected with HTTP 429 inside a successful response); they are retried with backoff.
    Retry {
        /// The requests to send again.
        items: Vec<R>,
        /// Why, for logs and the final error.
        reason: String,
    },
    /// The bulk failed for good: the processor stops and surfaces this error.
    Failed(Error),
}

/// Sends one bulk of requests to the external system.
#[async_trait]
pub trait BulkSender<R>: Send + Sync + 'static {
    /// Sends `items` as one request and reports which of them, if any, to retry.
    async fn send(&self, items: Vec<R>) -> SendOutcome<R>;
}

/// Observes bulks before and after they are sent (for logs, metrics, tests).
pub trait BulkListener: Send + Sync + 'static {
    /// Called before bulk `id` with `actions` requests of about `bytes` bytes is sent.
    fn before_bulk(&self, _id: u64, _actions: usize, _bytes: usize) {}
    /// Called after bulk `id` is done: `retries` retries were made; `error` is set when it
    /// finally failed.
    fn after_bulk(&self, _id: u64, _actions: usize, _retries: u32, _error: Option<&Error>) {}
}

/// A listener that does nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopListener;

impl BulkListener for NoopListener {}
