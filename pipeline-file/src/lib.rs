//! # rivus-pipeline-file
//!
//! What a connector implements to be named in a pipeline file, and what every section shares.
//! Connectors build it behind their `pipeline-file` feature, so that a user of their Rust API
//! alone compiles none of it (nor JSON Schema code).
//!
//! A pipeline file has three kinds of connector section — `[source]`, `[sink]` and
//! `[errors.destination]` — each chosen by its `type`. A connector offers one by implementing
//! [`SourceSection`], [`SinkSection`] or [`DestinationSection`] on a serde type of its
//! options (unknown fields refused) that also derives [`JsonSchema`]: its options, their types
//! and their descriptions (doc comments) are said there once, and `rivus connectors`, `rivus
//! schema` and editors read them from it. The section says how to build the connector, how to
//! reach its endpoint (`rivus check`), a summary and guarantee for `rivus connectors`, and
//! optional hooks run before and after the job. The `rivus` command is a registry of such sections; a connector written
//! outside this repository registers its own the same way.
//!
//! Everything a section needs from the file around it (the field path for errors, the job's
//! name, parallelism, worker id, error policy, checkpoint interval) comes in a
//! [`SectionContext`].

mod catalog;
mod context;
mod dyn_sink;
pub mod format;
mod plan;
mod renamed;
mod schema;
mod section;
mod under;
mod values;

pub use catalog::{CatalogEntry, Health, OptionDoc};
pub use context::SectionContext;
pub use dyn_sink::DynSink;
pub use format::Format;
pub use plan::{SinkPlan, SourcePlan};
pub use renamed::renamed;
pub use schema::{option_tree, options, schema_of, section_schema, DurationText, JsonSchema};
pub use section::{DestinationSection, SectionMetrics, SinkSection, SourceSection};
pub use values::{duration, field_text, opt_duration, parse_duration, text_of};
