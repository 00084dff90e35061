//! Apache Iceberg for rivus: [`IcebergSink`] appends records to an Iceberg table of a catalog,
//! exactly once, its files on an S3-compatible store or a local disk. The records go into
//! Parquet files through the files sink (its rolling by size, its two-phase commit of each
//! file, its error policy), each column carrying its Iceberg field id; the files each
//! checkpoint made visible are appended to the table in one snapshot per writer, whose commit
//! records the writer's checkpoint in the table's properties so that a restore never appends
//! them twice. The table metadata is Apache Iceberg's Rust library (`iceberg`).
//!
//! - `sink.rs`: the builder;
//! - `catalog.rs`: the catalog (REST or SQL) and the table's name;
//! - `table/`: the table — loaded or created at open (`mod.rs`), appends (`commit.rs`),
//!   added columns (`evolve.rs`), orphan files (`orphans.rs`);
//! - `partition.rs`: a partitioned table's layout of the files, and a file's partition;
//! - `columns.rs`: an Iceberg schema as the files' columns and back;
//! - `pipeline_file.rs`: `[sink] type = "iceberg"` (feature `pipeline-file`);
//! - `storage.rs`: the table's files through rivus's store client;
//! - `error.rs`: errors with context.

mod catalog;
mod columns;
mod error;
mod partition;
#[cfg(feature = "pipeline-file")]
pub mod pipeline_file;
mod sink;
mod storage;
mod table;

pub use catalog::CatalogOptions;
pub use rivus_connector_files::Orphan;
pub use sink::{IcebergSink, IcebergSinkBuilder};
