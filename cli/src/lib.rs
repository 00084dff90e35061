//! # rivus-cli
//!
//! The `rivus` command as a library: the commands (`run`, `validate`, `check`, `test`,
//! `connectors`, `schema`, `docs`, `new`), the status line and the dashboard over the
//! pipeline engine ([`rivus_engine`]), with a [`Registry`] of the section types a pipeline
//! file can name. To run a pipeline file in a program of your own without the command, use
//! the engine itself.
//!
//! `rivus` itself is this:
//!
//! ```no_run
//! fn main() -> std::process::ExitCode {
//!     rivus_cli::main_with(rivus_cli::Registry::builtin())
//! }
//! ```
//!
//! A connector written outside this repository implements `SourceSection` or `SinkSection`
//! (of `rivus-pipeline-file`), registers them ([`Registry::source`], [`Registry::sink`]) and
//! gets a `rivus` of its own with
//! `Registry::builtin().source::<MySource>().sink::<MySink>()` — `examples/custom-rivus`
//! does it for the file connector of `examples/file-connector`. `rivus new connector NAME`
//! ([`scaffold`]) writes such a crate, with a `rivus` of its own, ready to build and certify.

mod app;
mod console;
mod http;
mod run;
pub mod scaffold;
mod status;

pub use app::main_with;
pub use rivus_engine::{Registry, Role};
