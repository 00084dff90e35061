//! Payload formats with schemas for rivus's connectors: Avro, Protobuf and JSON Schema in Confluent's wire format, the
//! schemas kept in a Confluent-compatible schema registry, beside core's `json`, `text` and
//! `bytes` (see [`Format`]).
//!
//! - `format.rs`: the `format` option of pipeline files — a name or a table with a registry;
//! - `codec.rs`: what a connector holds at run time: decode a payload, encode a record;
//! - `registry.rs`: the registry's REST client with its schema cache;
//! - `schemas.rs`: which registered schema a writer uses, and the one a payload names;
//! - `wire.rs`: the five-byte header;
//! - `avro/`: the Avro binary ↔ JSON records, with the logical types;
//! - `json_schema.rs`: JSON records validated by a JSON Schema;
//! - `protobuf.rs`: `.proto` schemas compiled at run time, dynamic messages ↔ JSON records.

pub mod avro;
mod codec;
mod format;
mod json_schema;
mod protobuf;
pub mod registry;
mod schemas;
pub mod wire;

pub use codec::{Codec, Role};
pub use format::{Format, SchemaFormat, SubjectStrategy};
pub use registry::{Registry, RegistryConfig};
