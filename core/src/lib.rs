//! # rivus-sdk
//!
//! The contract every rivus connector implements and the runtime that drives it, on the model
//! of Apache Flink's connector architecture:
//!
//! - [`function`]: the lifecycle traits — [`RichFunction`] (open/close), [`SourceFunction`]
//!   (run), [`SinkFunction`] (invoke), [`CheckpointedFunction`] (snapshot/restore),
//!   [`CheckpointListener`] (checkpoint complete/aborted).
//! - [`runtime`]: a pipeline builder and runner with operator chaining, bounded channels
//!   between tasks (back-pressure), checkpoint barriers with alignment, and graceful stop.
//! - [`checkpoint`]: completed checkpoints and the state backends that store them.
//! - Shared primitives connectors reuse: [`handover::Handover`], [`bulk::BulkProcessor`],
//!   [`backoff::BackoffPolicy`] and [`backoff::Attempts`], [`Share`] (split ownership),
//!   [`error_policy::ErrorPolicy`], [`positions_store`] (a source's positions kept in a sink's
//!   database),
//!   [`schema`] (bytes, UTF-8, JSON), [`two_phase::TwoPhaseCommit`] (the exactly-once sinks'
//!   pre-commit, commit and recovery).
//!
//! ```
//! use rivus_sdk::prelude::*;
//! # async fn demo() -> rivus_sdk::Result<()> { Ok(()) }
//! ```

#[macro_use]
mod setters;

pub mod activity;
pub mod backoff;
pub mod bulk;
pub mod calendar;
pub mod change;
pub mod checkpoint;
pub mod context;
pub mod error;
pub mod error_policy;
pub mod evolution;
pub mod function;
pub mod guarantee;
pub mod handover;
pub mod metadata;
pub mod options;
pub mod positions_store;
pub mod runtime;
pub mod schema;
pub mod secrets;
pub mod share;

pub mod state;
pub mod task_shared;
pub mod template;
pub mod tls;
pub mod two_phase;

pub use async_trait::async_trait;
pub use context::{CompletedCheckpoints, RuntimeContext, SinkContext};
pub use error::{Error, Fault, Result};
pub use evolution::SchemaEvolution;
pub use function::{
    CheckpointListener, CheckpointedFunction, RichFunction, SinkFunction, SourceFunction,
};
pub use guarantee::DeliveryGuarantee;
pub use positions_store::{PositionStore, Positions, PositionsInSink};
pub use runtime::{
    CheckpointEvent, CheckpointHistory, CheckpointRecord, Job, JobHandle, JobSummary, Pipeline,
    Rejected, RestartStatus, RestartStrategy, Routes, SourceContext, Stall, StallSettings, Stream,
    Supervisor, Waited,
};
pub use share::Share;
pub use state::Restored;
pub use task_shared::TaskShared;

/// The names a connector or pipeline author usually needs.
pub mod prelude {
    pub use crate::async_trait;
    pub use crate::checkpoint::{CheckpointConfig, FsStateBackend, MemoryStateBackend};
    pub use crate::{
        CheckpointEvent, CheckpointListener, CheckpointedFunction, DeliveryGuarantee, Error, Job,
        JobHandle, JobSummary, Pipeline, Rejected, RestartStrategy, Restored, Result, RichFunction,
        Routes, RuntimeContext, Share, SinkContext, SinkFunction, SourceContext, SourceFunction,
        Stream, Supervisor, Waited,
    };
}
