//! Files for rivus: [`FilesSink`] writes records as Parquet, JSON lines or CSV files to an
//! S3-compatible store or a local disk, exactly once (see the README for the commit protocol);
//! [`FilesSource`] reads them back.
//!
//! - `location.rs`: where the files go;
//! - `staging/`: how a file in progress becomes durable, then visible (the two-phase commit);
//! - `encode/`: records to bytes, per format;
//! - `path.rs`: partition directories and file names;
//! - `publish.rs`: a table kept over the files (Delta Lake), told what each checkpoint made
//!   visible;
//! - `sink/`: the sink — open files per partition, rolling, checkpoints, commits;
//! - `source/`: the source — files listed once or continuously, split by key, read once.

pub mod encode;
mod error;
mod location;
mod orphan;
mod path;
#[cfg(feature = "pipeline-file")]
pub mod pipeline_file;
mod publish;
mod sink;
mod source;
mod staging;

pub use encode::{
    AvroCodec, Column, ColumnType, Compression, FileFormat, ParquetCompression, SchemaSource,
};
pub use location::{Location, S3Options};
pub use orphan::Orphan;
pub use path::PathTemplate;
pub use publish::{Layout, Publish};
pub use rivus_sdk::SchemaEvolution;
pub use sink::{FilesSink, FilesSinkBuilder, FilesState};
pub use source::{FilesSource, FilesSourceBuilder, FilesSourceState, ReadFormat};
pub use staging::Recoverable;
