//! # rivus-connector-rabbitmq
//!
//! RabbitMQ for rivus, on [lapin](https://docs.rs/lapin):
//!
//! - [`RabbitSource`]: consumes queues (spread over the parallel subtasks) with a prefetch
//!   window; acknowledges a checkpoint's deliveries (one multiple-ack) when the checkpoint
//!   completes — at-least-once; with correlation ids, messages redelivered after a restart
//!   are recognised from restored state and dropped — exactly-once, at any parallelism. Without
//!   checkpoints: auto-ack, at-most-once.
//! - [`RabbitSink`]: publishes with publisher confirms and a bounded window of unconfirmed
//!   messages; every confirm is awaited before a checkpoint completes — at-least-once; nacks
//!   are retried with backoff, unroutable (mandatory) and finally refused messages go to the
//!   error policy.

mod config;
mod dead_letters;
mod error;
#[cfg(feature = "pipeline-file")]
pub mod pipeline_file;
mod sink;
mod source;

pub use config::AmqpConfig;
pub use dead_letters::RabbitDeadLetterQueue;
pub use sink::{OutMessage, RabbitSink, RabbitSinkBuilder};
pub use source::{
    QueueDeclare, RabbitMessage, RabbitSource, RabbitSourceBuilder, RabbitSourceState,
};
