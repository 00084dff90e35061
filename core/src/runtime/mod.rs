//! The pipeline runtime: a graph of sources, operators and sinks run as tasks connected by
//! bounded channels carrying batches, operator chaining, checkpoint barriers with alignment, a checkpoint coordinator, graceful stop.
//!
//! Build a job with [`Pipeline`], run it once with [`Job::run`], or with restarts from the
//! newest checkpoint with a [`Supervisor`].

mod chain;
mod checkpoint_history;
mod control;
mod coordinator;
mod counters;
mod event;
mod input_gate;
mod job;
mod output;
mod panic;
mod pipeline;
mod plan;
mod reject;
mod restart;
mod sink_output;
mod source_context;
mod split;
mod stall;
mod stream;
mod supervisor;
mod task;

pub use checkpoint_history::{CheckpointHistory, CheckpointRecord, HISTORY_LEN};
pub use job::{Job, JobHandle, JobSummary};
pub use pipeline::Pipeline;
pub use reject::Rejected;
pub use restart::RestartStrategy;
pub use source_context::{CheckpointEvent, Collect, SourceContext, Waited};
pub use split::Routes;
pub use stall::{Stall, StallSettings};
pub use stream::Stream;
pub use supervisor::{RestartStatus, Supervisor};
