//! Batching of requests to an external system: [`BulkProcessor`] buffers requests and sends
//! them in bulk on a count, size or time trigger, with bounded concurrency, retries with
//! backoff and a `flush()` for flush-on-checkpoint. The Elasticsearch sink, Redis pipelines and
//! SQL batches all use this one implementation.

mod config;
mod processor;
mod sender;

pub use config::BulkConfig;
pub use processor::BulkProcessor;
pub use sender::{BulkListener, BulkSender, NoopListener, SendOutcome};
