//! # rivus-cli
//!
//! The `rivus` command as a library: declarative pipelines (`run`, `validate`, `check`,
//! `connectors`, `--http`, workers, restarts) over a [`Registry`] of the section types a
//! pipeline file can name.
//!
//! `rivus` itself is this:
//!
//! ```no_run
//! fn main() -> std::process::ExitCode {
//!     rivus_cli::main_with(rivus_cli::Registry::builtin())
//! }
//! ```
//!
//! A connector written outside this repository implements
//! [`SourceSection`](rivus_pipeline_file::SourceSection) or
//! [`SinkSection`](rivus_pipeline_file::SinkSection) and gets a `rivus` of its own with
//! `Registry::builtin().source::<MySource>().sink::<MySink>()` — `examples/custom-rivus`
//! does it for the file connector of `examples/file-connector`. `rivus new connector NAME`
//! ([`scaffold`]) writes such a crate, with a `rivus` of its own, ready to build and certify.

mod app;
mod build;
mod catalog;
mod check;
mod config;
mod console;
mod counted;
mod http;
mod reference;
mod registry;
mod remap;
mod route;
mod run;
pub mod scaffold;
mod sections;
mod sinks;
mod sources;
mod status;
mod store;
mod testing;
mod transform;

pub use app::main_with;
pub use registry::{Registry, Role};
