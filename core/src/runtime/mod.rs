//! The pipeline runtime: tasks connected by bounded channels carrying batches, operator
//! chaining, checkpoint barriers with alignment, a checkpoint coordinator, graceful stop.
//!
//! Build a job with [`Pipeline`], run it with [`Job::run`].

mod chain;
mod control;
mod coordinator;
mod event;
mod input_gate;
mod job;
mod output;
mod pipeline;
mod sink_output;
mod source_context;
mod task;

pub use job::{Job, JobHandle, JobSummary};
pub use pipeline::{Pipeline, Stream};
pub use source_context::{CheckpointEvent, Collect, SourceContext, Waited};
