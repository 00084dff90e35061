//! # rivus-cli
//!
//! The `rivus` command as a library: declarative pipelines (`run`, `validate`, `check`,
//! `connectors`, `--http`, workers, restarts) over a [`Registry`] of the section types a
//! pipeline file can name.
//!
//! `rivus` itself is `rivus_cli::main_with(Registry::builtin())`. A connector written outside
//! this repository implements [`SourceSection`](rivus_core::pipeline_file::SourceSection) /
//! [`SinkSection`](rivus_core::pipeline_file::SinkSection) and gets its own `rivus`:
//!
//! ```no_run
//! use rivus_cli::Registry;
//! # #[derive(serde::Deserialize)] struct MySink {}
//! # #[rivus_core::async_trait]
//! # impl rivus_core::pipeline_file::SinkSection for MySink {
//! #     const TYPE: &'static str = "mine";
//! #     const CATALOG: rivus_core::pipeline_file::CatalogEntry = rivus_core::pipeline_file::CatalogEntry {
//! #         summary: "", guarantee: "", options: &[] };
//! #     fn build(&self, _: &rivus_core::pipeline_file::SectionContext)
//! #         -> rivus_core::Result<rivus_core::pipeline_file::SinkPlan> { unimplemented!() }
//! #     async fn check(&self, _: &rivus_core::pipeline_file::SectionContext)
//! #         -> rivus_core::pipeline_file::Health { unimplemented!() }
//! # }
//! fn main() -> std::process::ExitCode {
//!     rivus_cli::main_with(Registry::builtin().sink::<MySink>())
//! }
//! ```

mod app;
mod build;
mod catalog;
mod check;
mod config;
mod counted;
mod http;
mod registry;
mod run;
mod sections;
mod sinks;
mod sources;
mod status;
mod transform;

pub use app::main_with;
pub use registry::{Registry, Role};
