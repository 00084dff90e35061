//! # rivus-connector-es
//!
//! An Elasticsearch (and OpenSearch) sink for rivus, built the way Flink's ElasticsearchSink
//! is: the user's emitter turns each record into requests on a [`RequestIndexer`]; the requests
//! go to core's [`BulkProcessor`](rivus_core::bulk::BulkProcessor), which sends `_bulk` requests
//! on a count, size or time trigger with bounded concurrency and retries; item-level results are
//! read (429s are retried, other failures go to the failure policy); and every checkpoint waits
//! until nothing is pending (flush-on-checkpoint), which gives at-least-once.
//!
//! [`EsSource`] reads an index as a bounded stream: point-in-time + `search_after`, sliced
//! across subtasks, with the last sort values in checkpointed state (exactly-once).
//!
//! Layers, Vector-style: [`config`] (hosts, auth, TLS, timeouts → a client), [`request`]
//! (building bulk lines), [`sender`] (sending one bulk and reading its items), [`failure`]
//! (custom handling of refused items), [`sink`] (the `SinkFunction`).

pub mod config;
mod error;
pub mod failure;
#[cfg(feature = "pipeline-file")]
pub mod pipeline_file;
pub mod request;
pub mod sender;
pub mod sink;
pub mod source;

pub use config::{EsAuth, EsConfig};
pub use failure::{FailureAction, FailureHandler, ItemFailure};
pub use request::{BulkItem, DocRequest, RequestIndexer};
pub use sink::{EsSink, EsSinkBuilder};
pub use source::{EsSource, EsSourceBuilder, EsSourceState};
