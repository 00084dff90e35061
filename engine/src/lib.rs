//! # rivus-engine
//!
//! The pipeline engine: a pipeline file (TOML) read against a [`Registry`] of connector
//! sections, checked (every error names the path of the bad field), built into a job — a graph
//! of sources, transforms (VRL among them), routers and sinks under one checkpoint — and run,
//! restarted from its newest checkpoint after a failure. The `rivus` command is this engine
//! with a command line, a status line and a dashboard; a program of your own embeds it in a
//! few lines:
//!
//! ```no_run
//! use rivus_engine::{Pipeline, Registry};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let pipeline = Pipeline::from_file("orders.toml".as_ref(), &Registry::builtin())?;
//! let summary = pipeline.run().await?;
//! println!("{}: {} records written", pipeline.name(), summary.records_written);
//! # Ok(()) }
//! ```
//!
//! A connector written outside this repository implements
//! [`SourceSection`](rivus_pipeline_file::SourceSection) or
//! [`SinkSection`](rivus_pipeline_file::SinkSection) and joins the registry:
//! `Registry::builtin().sink::<MySink>()`.

mod build;
mod catalog;
mod check;
mod config;
mod counted;
mod pipeline;
mod reference;
mod registry;
mod remap;
mod route;
mod sections;
mod sinks;
mod sources;
mod store;
mod testing;
mod transform;

pub use build::Built;
pub use catalog::catalog_text;
pub use check::Reach;
pub use config::schema;
pub use counted::{Counts, Flow};
pub use pipeline::{Attempts, FileError, Orphans, Pipeline};
pub use reference::write_reference;
pub use registry::{Listed, Registry, Role};
pub use rivus_pipeline_file::parse_duration;
pub use testing::Report as TestReport;
