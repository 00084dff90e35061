//! # rivus-connector-es
//!
//! An Elasticsearch and OpenSearch sink and source for rivus, built the way Flink's ElasticsearchSink
//! is: the user's emitter turns each record into requests on a [`RequestIndexer`]; the requests
//! go to core's [`BulkProcessor`](rivus_sdk::bulk::BulkProcessor), which sends `_bulk` requests
//! on a count, size or time trigger with bounded concurrency and retries; item-level results are
//! read (429s are retried, other failures go to the failure policy); and every checkpoint waits
//! until nothing is pending (flush-on-checkpoint), which gives at-least-once.
//!
//! [`EsSource`] reads an index as a bounded stream: point-in-time + `search_after`, sliced
//! across subtasks, with the last sort values in checkpointed state (exactly-once).
//!
//! One connector for every flavour: the engine and its version are learnt once at open
//! ([`cluster`]) and decide the media types and the point-in-time API.
//!
//! Layers, Vector-style: [`config`] (hosts, TLS, timeouts), [`auth`] (basic, API key, bearer,
//! AWS SigV4), [`client`] (HTTP requests with the cluster's media types), [`request`]
//! (building bulk lines), [`sender`] (sending one bulk and reading its items; key changes that
//! leave fields behind are resolved in `moves`), [`failure`]
//! (custom handling of refused items), [`sink`] (the `SinkFunction`).

pub mod auth;
pub mod client;
pub mod cluster;
pub mod config;
mod error;
pub mod failure;
mod moves;
#[cfg(feature = "pipeline-file")]
pub mod pipeline_file;
pub mod request;
pub mod sender;
pub mod sink;
pub mod source;

pub use auth::{AwsCredentials, EsAuth};
pub use client::EsClient;
pub use cluster::{Cluster, Flavor};
pub use config::EsConfig;
pub use failure::{FailureAction, FailureHandler, ItemFailure};
pub use request::{BulkItem, DocRequest, Move, RequestIndexer};
pub use sink::{EsSink, EsSinkBuilder};
pub use source::{EsSource, EsSourceBuilder, EsSourceState};
