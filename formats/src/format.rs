//! The `format` option of pipeline files: a name (`"json"`, `"text"`, `"bytes"`, core's
//! formats) or a table for a format with a schema:
//!
//! ```toml
//! format = { type = "avro", registry = { url = "${RIVUS_SCHEMA_REGISTRY_URL}" }, schema_file = "order.avsc" }
//! ```
//!
//! Writing: the schema (`schema` inline, `schema_file`, or the subject's latest version with
//! `use_latest`, or a fixed `schema_id`) is registered under its subject (`auto_register`,
//! default true) or must be registered already. Reading: each payload names its writer's
//! schema; `reader_schema`/`reader_schema_file` resolve it into one shape.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Deserializer};

use crate::registry::RegistryConfig;

/// How payloads are read and written.
#[derive(Debug, Clone, PartialEq)]
pub enum Format {
    /// Core's `json`, `text` or `bytes`.
    Plain(rivus_pipeline_file::format::Format),
    /// Avro in Confluent's wire format, through a schema registry.
    Avro(Box<SchemaFormat>),
    /// JSON validated by a JSON Schema, in Confluent's wire format, through a schema registry.
    JsonSchema(Box<SchemaFormat>),
    /// Protobuf in Confluent's wire format, through a schema registry.
    Protobuf(Box<SchemaFormat>),
}

impl Default for Format {
    fn default() -> Self {
        Format::Plain(rivus_pipeline_file::format::Format::Json)
    }
}

impl From<rivus_pipeline_file::format::Format> for Format {
    fn from(f: rivus_pipeline_file::format::Format) -> Self {
        Format::Plain(f)
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Format::Plain(p) => p.fmt(f),
            Format::Avro(_) => f.write_str("avro"),
            Format::JsonSchema(_) => f.write_str("json-schema"),
            Format::Protobuf(_) => f.write_str("protobuf"),
        }
    }
}

/// Which subject a schema is registered under.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SubjectStrategy {
    /// `{topic}-value` / `{topic}-key` (Confluent's default).
    #[default]
    Topic,
    /// The record's full name (`shop.Order`).
    Record,
    /// `{topic}-{record's full name}`.
    TopicRecord,
}

/// The settings of a format with a schema (`type = "avro"`, `"protobuf"` or `"json-schema"`).
#[derive(Clone, Default, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SchemaFormat {
    /// The registry.
    pub registry: RegistryConfig,
    /// How the subject is named (writing, and `use_latest`).
    #[serde(default)]
    pub subject_strategy: SubjectStrategy,
    /// An explicit subject instead of the strategy's.
    pub subject: Option<String>,
    /// The writer's schema, inline.
    pub schema: Option<String>,
    /// The writer's schema, from a file (`.avsc`, `.proto`, `.json`).
    pub schema_file: Option<PathBuf>,
    /// Protobuf: the message type written (full or simple name; default: the file's first).
    pub message: Option<String>,
    /// Register the writer's schema under the subject (default); when false it must be
    /// registered already.
    #[serde(default = "yes")]
    pub auto_register: bool,
    /// Write with the subject's latest registered version (no schema given).
    #[serde(default)]
    pub use_latest: bool,
    /// Write with the schema registered under this id (no schema given).
    pub schema_id: Option<u32>,
    /// Read every payload into this schema (Avro's resolution rules), inline.
    pub reader_schema: Option<String>,
    /// The same, from a file.
    pub reader_schema_file: Option<PathBuf>,
}

fn yes() -> bool {
    true
}

impl SchemaFormat {
    /// The subject a writer of `topic` registers under: the explicit `subject`, else the
    /// strategy's (`name` is the schema's record name, for the record strategies).
    pub fn subject_for(
        &self,
        topic: &str,
        role: crate::Role,
        name: Option<&str>,
        path: &str,
    ) -> rivus_sdk::Result<String> {
        let suffix = match role {
            crate::Role::Value => "value",
            crate::Role::Key => "key",
        };
        Ok(match (&self.subject, self.subject_strategy, name) {
            (Some(s), _, _) => s.clone(),
            (None, SubjectStrategy::Topic, _) => format!("{topic}-{suffix}"),
            (None, SubjectStrategy::Record, Some(n)) => n.to_owned(),
            (None, SubjectStrategy::TopicRecord, Some(n)) => format!("{topic}-{n}"),
            (None, _, None) => {
                return Err(rivus_sdk::Error::config(
                    format!("{path}.subject_strategy"),
                    "the record-name strategies need a named schema (an Avro record, a JSON \
                     Schema with a `title`) given in `schema` or `schema_file`",
                ))
            }
        })
    }
}

impl fmt::Debug for SchemaFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchemaFormat")
            .field("registry", &self.registry)
            .field("subject_strategy", &self.subject_strategy)
            .field("subject", &self.subject)
            .field("schema_file", &self.schema_file)
            .field("message", &self.message)
            .field("auto_register", &self.auto_register)
            .field("use_latest", &self.use_latest)
            .field("schema_id", &self.schema_id)
            .finish_non_exhaustive()
    }
}

impl PartialEq for RegistryConfig {
    fn eq(&self, other: &Self) -> bool {
        (
            &self.url,
            &self.username,
            &self.password,
            &self.token,
            &self.ca_file,
        ) == (
            &other.url,
            &other.username,
            &other.password,
            &other.token,
            &other.ca_file,
        )
    }
}

/// What the file may write: `"json"`, `"text"`, `"bytes"`, or a table with `type` (`"avro"`,
/// `"protobuf"`, `"json-schema"`) and the [`SchemaFormat`] settings.
impl schemars::JsonSchema for Format {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Format".into()
    }

    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let plain = g.subschema_for::<rivus_pipeline_file::format::Format>();
        // The settings' own schema, with the `type` key that picks the format.
        let mut table = <SchemaFormat as schemars::JsonSchema>::json_schema(g).to_value();
        if let Some(o) = table.as_object_mut() {
            if let Some(p) = o.get_mut("properties").and_then(|p| p.as_object_mut()) {
                p.insert(
                    "type".into(),
                    serde_json::json!({ "enum": ["avro", "protobuf", "json-schema"] }),
                );
            }
            if let Some(r) = o.get_mut("required").and_then(|r| r.as_array_mut()) {
                r.insert(0, "type".into());
            }
        }
        schemars::json_schema!({
            "description": "how payloads are written: \"json\", \"text\", \"bytes\", or a table with `type` (\"avro\", \"protobuf\", \"json-schema\") and the registry's settings",
            "oneOf": [plain, table]
        })
    }
}

impl<'de> Deserialize<'de> for Format {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        let v = serde_json::Value::deserialize(d)?;
        match v {
            serde_json::Value::String(_) => {
                rivus_pipeline_file::format::Format::deserialize(v.clone())
                    .map(Format::Plain)
                    .map_err(|_| {
                        D::Error::custom(format!(
                        "unknown format {v}: expected \"json\", \"text\", \"bytes\", or a table \
                         {{ type = \"avro\", registry = {{ url = ... }}, ... }}"
                    ))
                    })
            }
            serde_json::Value::Object(mut o) => {
                let kind = o.remove("type").ok_or_else(|| {
                    D::Error::custom(
                        "a format table needs `type` (\"avro\", \"protobuf\", \"json-schema\")",
                    )
                })?;
                match kind.as_str() {
                    Some("avro") => serde_json::from_value::<SchemaFormat>(o.into())
                        .map(|s| Format::Avro(Box::new(s)))
                        .map_err(|e| D::Error::custom(format!("format (avro): {e}"))),
                    Some("protobuf") => serde_json::from_value::<SchemaFormat>(o.into())
                        .map(|s| Format::Protobuf(Box::new(s)))
                        .map_err(|e| D::Error::custom(format!("format (protobuf): {e}"))),
                    Some("json-schema") => serde_json::from_value::<SchemaFormat>(o.into())
                        .map(|s| Format::JsonSchema(Box::new(s)))
                        .map_err(|e| D::Error::custom(format!("format (json-schema): {e}"))),
                    Some(name @ ("json" | "text" | "bytes")) if o.is_empty() => {
                        rivus_pipeline_file::format::Format::deserialize(serde_json::Value::from(name))
                            .map(Format::Plain)
                            .map_err(D::Error::custom)
                    }
                    _ => Err(D::Error::custom(format!(
                        "unknown format type {kind}: expected \"avro\", \"protobuf\" or \"json-schema\" (or \"json\", \"text\", \"bytes\" as a name)"
                    ))),
                }
            }
            other => Err(D::Error::custom(format!(
                "a format is a name or a table, not {other}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct S {
        format: Format,
    }

    fn parse(toml_text: &str) -> Result<Format, String> {
        let v: serde_json::Value = toml_to_json(toml_text);
        serde_json::from_value::<S>(v)
            .map(|s| s.format)
            .map_err(|e| e.to_string())
    }

    /// The tests parse JSON with the shape TOML gives.
    fn toml_to_json(text: &str) -> serde_json::Value {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn names_and_tables() {
        assert_eq!(
            parse(r#"{"format":"text"}"#).unwrap(),
            Format::Plain(rivus_pipeline_file::format::Format::Text)
        );
        let f = parse(
            r#"{"format":{"type":"avro","registry":{"url":"http://r:8081"},"schema_file":"o.avsc"}}"#,
        )
        .unwrap();
        let Format::Avro(s) = f else { panic!("{f:?}") };
        assert!(s.auto_register);
        assert_eq!(s.subject_strategy, SubjectStrategy::Topic);
        let e = parse(r#"{"format":"avrox"}"#).unwrap_err();
        assert!(e.contains("unknown format"), "{e}");
        let e =
            parse(r#"{"format":{"type":"avro","registry":{"url":"u"},"shema":"x"}}"#).unwrap_err();
        assert!(e.contains("shema"), "{e}");
        let e = parse(r#"{"format":{"type":"xml"}}"#).unwrap_err();
        assert!(e.contains("xml"), "{e}");
    }
}
