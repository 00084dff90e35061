//! The `rivus` facade: the names a pipeline author uses from [`rivus_sdk`] and, behind one
//! feature flag each, the connectors (`kafka`, `rabbitmq`, `elasticsearch`, `redis`, `jdbc`,
//! `postgres-cdc`, `files`, `delta`, `iceberg`), the S3 checkpoint store (`s3`) and the
//! formats with schemas (`formats`). The rest of the core — what a connector author implements
//! against — is under [`core`].
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use rivus::prelude::*;
//!
//! let checkpoints = CheckpointConfig::new(Duration::from_secs(10), Arc::new(MemoryStateBackend::new()));
//! # let _ = checkpoints;
//! ```

pub use rivus_sdk::{
    async_trait, prelude, CheckpointEvent, CheckpointListener, CheckpointedFunction,
    DeliveryGuarantee, Error, Job, JobHandle, JobSummary, Pipeline, RestartStrategy, Restored,
    Result, RichFunction, Routes, RuntimeContext, SinkContext, SinkFunction, SourceContext,
    SourceFunction, Stream, Supervisor, Waited,
};

/// Checkpoint settings and the state backends that keep them.
pub use rivus_sdk::checkpoint;
/// What to do with a record that cannot be processed: fail, skip, or a dead letter.
pub use rivus_sdk::error_policy;
/// Reading and writing record payloads: bytes, UTF-8, JSON.
pub use rivus_sdk::schema;

/// The core crate under its own name, for paths like `rivus::core::runtime`.
pub use rivus_sdk as core;

/// The Kafka connector (feature `kafka`).
#[cfg(feature = "kafka")]
pub use rivus_connector_kafka as kafka;

/// The Elasticsearch connector (feature `elasticsearch`).
#[cfg(feature = "elasticsearch")]
pub use rivus_connector_es as elasticsearch;

/// The RabbitMQ connector (feature `rabbitmq`).
#[cfg(feature = "rabbitmq")]
pub use rivus_connector_rabbitmq as rabbitmq;

/// The Redis connector (feature `redis`).
#[cfg(feature = "redis")]
pub use rivus_connector_redis as redis;

/// The SQL connector: PostgreSQL, MySQL/MariaDB, SQLite (feature `jdbc`).
#[cfg(feature = "jdbc")]
pub use rivus_connector_jdbc as jdbc;

/// Change data capture from PostgreSQL (feature `postgres-cdc`).
#[cfg(feature = "postgres-cdc")]
pub use rivus_connector_cdc as cdc;

/// Delta Lake tables on S3-compatible stores and local disks (feature `delta`).
#[cfg(feature = "delta")]
pub use rivus_connector_delta as delta;
/// Files on S3-compatible stores and local disks: Parquet, JSON lines, CSV (feature `files`).
#[cfg(feature = "files")]
pub use rivus_connector_files as files;
/// Apache Iceberg tables of a SQL catalog (feature `iceberg`).
#[cfg(feature = "iceberg")]
pub use rivus_connector_iceberg as iceberg;

/// Checkpoints on an S3-compatible object store, one owner per job (feature `s3`).
#[cfg(feature = "s3")]
pub use rivus_state_s3 as s3;

/// Avro, Protobuf and JSON Schema in Confluent's wire format through a schema registry
/// (feature `formats`).
#[cfg(feature = "formats")]
pub use rivus_formats as formats;
