//! # rivus-connector-kafka
//!
//! Apache Kafka for rivus, on [rdkafka](https://docs.rs/rdkafka) (librdkafka):
//!
//! - [`KafkaSource`]: topics, a pattern or explicit partitions, spread deterministically over
//!   the parallel subtasks; start from earliest, latest, committed group offsets, a timestamp or
//!   given offsets; unbounded or bounded (stop at the latest offsets seen at start, or at given
//!   offsets). A consumer thread polls and hands batches over through core's
//!   [`Handover`](rivus_sdk::handover::Handover); offsets live in checkpointed state and are
//!   committed to the group when a checkpoint completes. Exactly-once with checkpoints.
//! - [`KafkaSink`]: fixed or per-record topic, key, headers, partition and timestamp;
//!   many sends in flight, a full local queue back-pressures; at-least-once by flushing and
//!   checking every delivery before a checkpoint completes; exactly-once with one transaction
//!   per checkpoint whose records wait in a write-ahead log on disk until it commits.
//!
//! Layering follows rdkafka's: [`config`] wraps client properties (secrets redacted), the
//! source and sink sit on rdkafka's `BaseConsumer` and `ThreadedProducer`.

pub mod config;
pub mod connect;
mod dead_letters;
mod error;
#[cfg(feature = "pipeline-file")]
pub mod pipeline_file;
pub mod record;
pub mod security;
mod sink;
mod source;

pub use config::KafkaConfig;
pub use dead_letters::KafkaDeadLetterQueue;
pub(crate) use error::kafka_err;
pub use record::{
    KafkaDeserializer, KafkaRecord, KafkaSerializer, OutRecord, ValueDeserializer, ValueSerializer,
};
pub use security::SaslAuth;
pub use sink::{KafkaSink, KafkaSinkBuilder, PendingTxn, TxnHook, TxnStep, WalRef, PRODUCER_QUEUE};
pub use source::{
    KafkaSource, KafkaSourceBuilder, KafkaSourceState, StartOffsets, StopOffsets, Subscription,
    PREFETCH,
};
