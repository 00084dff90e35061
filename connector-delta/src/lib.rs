//! Delta Lake for rivus: [`DeltaSink`] appends records to a Delta table on an S3-compatible
//! store or a local disk, exactly once. The records go into Parquet files through the files
//! sink (its rolling by size, its two-phase commit of each file, its error policy); the files
//! each checkpoint made visible are added to the table's log in one commit per writer,
//! carrying an application transaction (`txn`) that makes a repeated commit a no-op. With
//! `apply_changes` the files are change files, merged into the table by key at each completed
//! checkpoint. The log is Delta's own Rust kernel (`delta_kernel`).
//!
//! - `sink.rs`: the builder;
//! - `table/`: the table — read or created at open, appends (`mod.rs`), the commit loop
//!   (`commit.rs`), added columns (`evolve.rs`), changes applied by key (`changes.rs`), the
//!   orphan files (`orphans.rs`);
//! - `merge.rs`: applying a checkpoint's changes by key (copy-on-write);
//! - `partition.rs`: a partitioned table's directories and partition values;
//! - `checkpoint.rs`: the log's checkpoints, every `delta.checkpointInterval` versions;
//! - `columns.rs`: a Delta schema as the files' columns and back;
//! - `store.rs`: where the table is;
//! - `error.rs`: errors with context.

mod checkpoint;
mod columns;
mod error;
mod merge;
mod partition;
#[cfg(feature = "pipeline-file")]
pub mod pipeline_file;
mod sink;
mod store;
mod table;

pub use rivus_connector_files::Orphan;
pub use sink::{DeltaSink, DeltaSinkBuilder};
