//! The registry the `rivus` command is built from: every section type a pipeline file can
//! name, by role. [`Registry::builtin`] holds this repository's connectors (each behind its
//! feature); [`Registry::source`], [`Registry::sink`] and [`Registry::destination`] add more,
//! so that a third party builds its own `rivus` with its connectors in a few lines
//! (`rivus_cli::main_with`).

mod erased;

use std::sync::Arc;

use rivus_pipeline_file::{
    CatalogEntry, DestinationSection, JsonSchema, OptionDoc, SinkSection, SourceSection,
};
use schemars::{Schema, SchemaGenerator};
use serde::de::DeserializeOwned;
use serde_json::Value;

pub(crate) use erased::{AnyDestination, AnySink, AnySource, Section};

/// Why a section's options were refused: (the path below the section, the message).
type Refusal = (String, String);

/// Parses a section's options (its table without `type`) into the erased section.
type Parse<T> = fn(toml::Value) -> Result<Arc<T>, Refusal>;

/// The JSON Schema of a section's options, its shared types added to the generator.
type SchemaOf = fn(&mut SchemaGenerator) -> Schema;

/// What can fill one role (`[source]`, `[sink]`, `[errors.destination]`).
struct Entry<T: ?Sized> {
    kind: &'static str,
    catalog: CatalogEntry,
    parse: Parse<T>,
    schema: SchemaOf,
}

impl<T: ?Sized> Entry<T> {
    /// The schema of the section's options on its own (its shared types under `$defs`).
    fn own_schema(&self) -> Value {
        let mut g = SchemaGenerator::default();
        let mut v = (self.schema)(&mut g).to_value();
        let defs: serde_json::Map<String, Value> = g
            .definitions()
            .iter()
            .map(|(k, d)| (k.clone(), d.clone()))
            .collect();
        if let (Some(o), false) = (v.as_object_mut(), defs.is_empty()) {
            o.insert("$defs".into(), Value::Object(defs));
        }
        v
    }
}

/// `S`'s schema, inline (not a reference), for [`Entry::schema`].
fn schema_of<S: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    S::json_schema(g)
}

/// One registered section type, as `rivus connectors` lists it.
#[derive(Debug, Clone)]
pub struct Listed {
    /// `[source]`, `[sink]` or `[errors.destination]`.
    pub role: Role,
    /// Its `type`.
    pub kind: &'static str,
    /// Summary and guarantee.
    pub entry: CatalogEntry,
    /// The JSON Schema of its options (its shared types under `$defs`).
    pub schema: Value,
}

impl Listed {
    /// Its options, read from its schema (`rivus connectors`).
    pub fn options(&self) -> Vec<OptionDoc> {
        rivus_pipeline_file::options(&self.schema)
    }
}

/// The section types a pipeline file can name.
pub struct Registry {
    sources: Vec<Entry<dyn AnySource>>,
    sinks: Vec<Entry<dyn AnySink>>,
    destinations: Vec<Entry<dyn AnyDestination>>,
}

/// A role's name in `rivus connectors`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A `[source]`.
    Source,
    /// A `[sink]`.
    Sink,
    /// An `[errors.destination]`.
    Destination,
}

impl Role {
    /// `source`, `sink`, `dlq` (a dead-letter destination), as `rivus connectors` lists them.
    pub fn name(self) -> &'static str {
        match self {
            Role::Source => "source",
            Role::Sink => "sink",
            Role::Destination => "dlq",
        }
    }
}

/// The options of a section, parsed by its type; errors as (path below the section, message).
fn parse<T: DeserializeOwned>(v: toml::Value) -> Result<T, Refusal> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        (path, e.into_inner().message().to_owned())
    })
}

fn parse_source<S: SourceSection>(v: toml::Value) -> Result<Arc<dyn AnySource>, Refusal> {
    Ok(Arc::new(parse::<S>(v)?))
}

fn parse_sink<S: SinkSection>(v: toml::Value) -> Result<Arc<dyn AnySink>, Refusal> {
    Ok(Arc::new(parse::<S>(v)?))
}

fn parse_destination<D: DestinationSection>(
    v: toml::Value,
) -> Result<Arc<dyn AnyDestination>, Refusal> {
    Ok(Arc::new(parse::<D>(v)?))
}

/// Adds `entry`, replacing one of the same type.
fn put<T: ?Sized>(list: &mut Vec<Entry<T>>, entry: Entry<T>) {
    list.retain(|e| e.kind != entry.kind);
    list.push(entry);
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// The sections of the `rivus` command itself: the `generator` and `dead-letters`
    /// sources and the `stdout` sink.
    pub fn new() -> Self {
        use crate::sections::{DeadLettersSection, GeneratorSection, StdoutSection};
        Registry {
            sources: Vec::new(),
            sinks: Vec::new(),
            destinations: Vec::new(),
        }
        .source::<DeadLettersSection>()
        .source::<GeneratorSection>()
        .sink::<StdoutSection>()
    }

    /// Every connector of this repository compiled in (one feature each), and the command's
    /// own sections.
    pub fn builtin() -> Self {
        let r = Self::new();
        #[cfg(feature = "elasticsearch")]
        let r = r
            .sink::<rivus_connector_es::pipeline_file::EsSinkSection>()
            .sink::<rivus_connector_es::pipeline_file::OpenSearchSinkSection>();
        #[cfg(feature = "files")]
        let r = r
            .source::<rivus_connector_files::pipeline_file::FilesSourceSection>()
            .sink::<rivus_connector_files::pipeline_file::FilesSection>();
        #[cfg(feature = "delta")]
        let r = r.sink::<rivus_connector_delta::pipeline_file::DeltaSection>();
        #[cfg(feature = "iceberg")]
        let r = r.sink::<rivus_connector_iceberg::pipeline_file::IcebergSection>();
        #[cfg(feature = "jdbc")]
        let r = r
            .source::<rivus_connector_jdbc::pipeline_file::JdbcSourceSection>()
            .sink::<rivus_connector_jdbc::pipeline_file::JdbcSinkSection>();
        #[cfg(feature = "postgres-cdc")]
        let r = r.source::<rivus_connector_cdc::pipeline_file::PostgresCdcSection>();
        #[cfg(feature = "kafka")]
        let r = r
            .source::<rivus_connector_kafka::pipeline_file::KafkaSourceSection>()
            .sink::<rivus_connector_kafka::pipeline_file::KafkaSinkSection>()
            .destination::<rivus_connector_kafka::pipeline_file::KafkaDestinationSection>();
        #[cfg(feature = "rabbitmq")]
        let r = r
            .source::<rivus_connector_rabbitmq::pipeline_file::RabbitSourceSection>()
            .sink::<rivus_connector_rabbitmq::pipeline_file::RabbitSinkSection>()
            .destination::<rivus_connector_rabbitmq::pipeline_file::RabbitDestinationSection>();
        #[cfg(feature = "redis")]
        let r = r
            .source::<rivus_connector_redis::pipeline_file::RedisStreamsSection>()
            .sink::<rivus_connector_redis::pipeline_file::RedisSinkSection>()
            .destination::<rivus_connector_redis::pipeline_file::RedisDestinationSection>();
        r
    }

    /// Adds a source type (`[source] type = S::TYPE`); one of the same type is replaced.
    pub fn source<S: SourceSection>(mut self) -> Self {
        put(
            &mut self.sources,
            Entry {
                kind: S::TYPE,
                catalog: S::CATALOG,
                parse: parse_source::<S>,
                schema: schema_of::<S>,
            },
        );
        self
    }

    /// Adds a sink type (`[sink] type = S::TYPE`); one of the same type is replaced.
    pub fn sink<S: SinkSection>(mut self) -> Self {
        put(
            &mut self.sinks,
            Entry {
                kind: S::TYPE,
                catalog: S::CATALOG,
                parse: parse_sink::<S>,
                schema: schema_of::<S>,
            },
        );
        self
    }

    /// Adds a dead-letter destination type (`[errors.destination] type = D::TYPE`); one of
    /// the same type is replaced.
    pub fn destination<D: DestinationSection>(mut self) -> Self {
        put(
            &mut self.destinations,
            Entry {
                kind: D::TYPE,
                catalog: D::CATALOG,
                parse: parse_destination::<D>,
                schema: schema_of::<D>,
            },
        );
        self
    }

    /// Every registered type with its catalog entry and options: sources, sinks, then
    /// destinations, each sorted by type.
    pub fn catalog(&self) -> Vec<Listed> {
        fn of<T: ?Sized>(role: Role, l: &[Entry<T>]) -> Vec<Listed> {
            let mut v: Vec<Listed> = l
                .iter()
                .map(|e| Listed {
                    role,
                    kind: e.kind,
                    entry: e.catalog,
                    schema: e.own_schema(),
                })
                .collect();
            v.sort_by_key(|e| e.kind);
            v
        }
        [
            of(Role::Source, &self.sources),
            of(Role::Sink, &self.sinks),
            of(Role::Destination, &self.destinations),
        ]
        .concat()
    }

    /// The schemas of the registered `[source]`, `[sink]` and `[errors.destination]`
    /// sections, each role a `oneOf` by `type`, their shared types added to `g`.
    pub(crate) fn section_schemas(&self, g: &mut SchemaGenerator) -> [Value; 3] {
        fn one_of<T: ?Sized>(g: &mut SchemaGenerator, l: &[Entry<T>]) -> Value {
            let mut sorted: Vec<&Entry<T>> = l.iter().collect();
            sorted.sort_by_key(|e| e.kind);
            let choices: Vec<Value> = sorted
                .into_iter()
                .map(|e| {
                    let mut own = (e.schema)(g).to_value();
                    // A transparent wrapper refers to the section it wraps: inline it, so
                    // that the `type` key can join its options.
                    let target = own.get("$ref").and_then(Value::as_str).and_then(|r| {
                        let name = r.strip_prefix("#/$defs/")?;
                        g.definitions().get(name).cloned()
                    });
                    if let Some(t) = target {
                        own = t;
                    }
                    rivus_pipeline_file::section_schema(e.kind, own)
                })
                .collect();
            serde_json::json!({ "oneOf": choices })
        }
        [
            one_of(g, &self.sources),
            one_of(g, &self.sinks),
            one_of(g, &self.destinations),
        ]
    }

    /// The `[source]` table at `path`, parsed by its type.
    pub fn parse_source(
        &self,
        path: &str,
        table: toml::Table,
    ) -> Result<Section<dyn AnySource>, String> {
        resolve(&self.sources, path, table)
    }

    /// The `[sink]` table at `path`, parsed by its type.
    pub fn parse_sink(
        &self,
        path: &str,
        table: toml::Table,
    ) -> Result<Section<dyn AnySink>, String> {
        resolve(&self.sinks, path, table)
    }

    /// The `[errors.destination]` table at `path`, parsed by its type.
    pub fn parse_destination(
        &self,
        path: &str,
        table: toml::Table,
    ) -> Result<Section<dyn AnyDestination>, String> {
        resolve(&self.destinations, path, table)
    }
}

/// Finds the entry of the table's `type` and parses the rest of the table with it; errors
/// name the path of the field (`sink.tls.ca_file: unknown field ...`).
fn resolve<T: ?Sized>(
    entries: &[Entry<T>],
    path: &str,
    mut table: toml::Table,
) -> Result<Section<T>, String> {
    let kind = match table.remove("type") {
        Some(toml::Value::String(s)) => s,
        Some(_) => return Err(format!("{path}.type: must be a string")),
        None => return Err(format!("{path}: missing field `type`")),
    };
    let Some(entry) = entries.iter().find(|e| e.kind == kind) else {
        let mut known: Vec<&str> = entries.iter().map(|e| e.kind).collect();
        known.sort_unstable();
        let known: Vec<String> = known.iter().map(|k| format!("`{k}`")).collect();
        return Err(format!(
            "{path}.type: unknown variant `{kind}`, expected one of {}",
            known.join(", ")
        ));
    };
    let reads_metadata = table.values().any(names_metadata);
    let options = (entry.parse)(toml::Value::Table(table)).map_err(|(at, message)| {
        if at == "." || at.is_empty() {
            format!("{path}: {message}")
        } else {
            format!("{path}.{at}: {message}")
        }
    })?;
    Ok(Section {
        kind: entry.kind,
        path: path.to_owned(),
        options,
        reads_metadata,
    })
}

/// Whether an option of a section names the record's metadata: a template field `{%…}`, or a
/// field written `%…` (see `rivus_sdk::metadata`).
fn names_metadata(v: &toml::Value) -> bool {
    match v {
        toml::Value::String(s) => s.starts_with('%') || s.contains("{%"),
        toml::Value::Array(items) => items.iter().any(names_metadata),
        toml::Value::Table(t) => t.values().any(names_metadata),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> toml::Table {
        text.parse().unwrap()
    }

    #[test]
    fn an_unknown_type_names_the_types_held() {
        let e = Registry::new()
            .parse_source("source", table("type = \"mongo\""))
            .err()
            .unwrap();
        assert_eq!(
            e,
            "source.type: unknown variant `mongo`, expected one of `dead-letters`, `generator`"
        );
    }

    #[test]
    fn errors_name_the_field_below_the_section() {
        let e = Registry::new()
            .parse_source("source", table("type = \"generator\"\ncoutn = 3"))
            .err()
            .unwrap();
        assert!(e.starts_with("source.coutn: unknown field `coutn`"), "{e}");
        let e = Registry::new()
            .parse_sink("sink", table("count = 3"))
            .err()
            .unwrap();
        assert_eq!(e, "sink: missing field `type`");
    }

    /// What serde accepts for the section `kind` of `role`: the fields it lists when told of
    /// an unknown one.
    fn accepted_fields(r: &Registry, role: Role, kind: &str) -> Vec<String> {
        let t = table(&format!("type = \"{kind}\"\nzz_not_an_option = 1"));
        let e = match role {
            Role::Source => r.parse_source("source", t).err(),
            Role::Sink => r.parse_sink("sink", t).err(),
            Role::Destination => r.parse_destination("errors.destination", t).err(),
        }
        .expect("an unknown option is refused");
        assert!(e.contains("unknown field `zz_not_an_option`"), "{e}");
        match e.split_once("expected one of ") {
            Some((_, list)) => list
                .split(", ")
                .map(|f| f.trim_matches('`').to_owned())
                .collect(),
            // Two fields: "expected `a` or `b`"; one: "expected `a`".
            None => match e.split_once("expected `") {
                Some((_, rest)) => rest
                    .split("` or `")
                    .map(|f| f.trim_end_matches('`').to_owned())
                    .collect(),
                None => Vec::new(),
            },
        }
    }

    /// `rivus connectors` lists exactly the options each section accepts.
    #[test]
    fn every_catalog_lists_exactly_the_options_its_section_accepts() {
        let r = Registry::builtin();
        for l in r.catalog() {
            let (role, kind) = (l.role, l.kind);
            let mut listed: Vec<String> = l.options().iter().map(|o| o.name.clone()).collect();
            let mut accepted = accepted_fields(&r, role, kind);
            listed.sort();
            accepted.sort();
            assert_eq!(listed, accepted, "{} {kind}", role.name());
        }
    }

    #[test]
    fn a_later_registration_replaces_one_of_the_same_type() {
        let r = Registry::new().sink::<crate::sections::StdoutSection>();
        let sinks: Vec<_> = r
            .catalog()
            .into_iter()
            .filter(|l| l.role == Role::Sink)
            .collect();
        assert_eq!(sinks.len(), 1);
    }
}
