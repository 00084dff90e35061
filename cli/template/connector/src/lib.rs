//! A rivus connector written exactly as a third party would, against the public API only:
//!
//! - [`FileSource`]: every file of a directory is a split; lines are records; the byte offset
//!   reached in each file is checkpointed state, so a restored job continues after the last
//!   checkpointed line. Unbounded: it keeps watching the files for new lines. Exactly-once.
//! - [`FileSink`]: subtask `i` appends lines to `part-<i>`; at a checkpoint it fsyncs and
//!   records the file's length; on restore it truncates the file back to that length, so lines
//!   written after the last checkpoint are removed before they are written again. Exactly-once.
//! - [`pipeline_file`]: both as `type = "file"` sections of a pipeline file, for a `rivus`
//!   built with this connector (`examples/custom-rivus`).

pub mod pipeline_file;
mod sink;
mod source;

pub use sink::FileSink;
pub use source::{Decode, FileSource};
