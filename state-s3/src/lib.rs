//! Checkpoint storage on an S3-compatible object store (AWS S3, SeaweedFS, MinIO, Ceph):
//! [`S3StateBackend`] keeps each completed checkpoint as one object, written whole or not at
//! all, and lets one process at a time own a job's checkpoints through a lease object that it
//! renews while it runs.
//!
//! A worker restarted on another machine resumes from the same store; a second process of the
//! same job is refused at start, naming the holder; a process whose lease another has taken
//! over (after it stalled past the lease) can no longer write a checkpoint.
//!
//! ```no_run
//! # async fn f() -> rivus_sdk::Result<()> {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use rivus_sdk::checkpoint::CheckpointConfig;
//! use rivus_state_s3::{S3Config, S3StateBackend};
//!
//! // Endpoint, region and keys from AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, ...
//! let backend = S3StateBackend::new(S3Config::from_env("s3://checkpoints/orders")?)?;
//! let checkpoints = CheckpointConfig::new(Duration::from_secs(10), Arc::new(backend));
//! # Ok(()) }
//! ```

mod backend;
mod config;
mod error;
mod lease;

pub use backend::S3StateBackend;
pub use config::S3Config;
