//! What a connector holds at run time for its `format`: [`Codec::decode`] turns a payload into
//! a JSON record, [`Codec::encode`] a record into a payload. For core's formats both are plain
//! calls; for Avro a payload's writer schema comes from the registry once per new id (then
//! from the cache), and a writing codec resolves its schema and id once, at
//! [`Codec::open_writer`], before any record.
//!
//! Errors are [`SchemaError`]s: the record's fault (a wrong magic byte, an unknown schema id, a
//! truncated payload, a record that does not fit the schema — to the error policy, content
//! kept) or, with [`SchemaError::transient`] set, not its fault (the registry unreachable:
//! the task fails and retries from its checkpoint, so nothing is lost).

use std::fmt;
use std::future::Future;
use std::sync::{Arc, OnceLock};

use rivus_sdk::schema::{DeserializationSchema, SchemaError, SerializationSchema};
use rivus_sdk::{Error, Result};
use serde_json::Value;

use crate::avro::{AvroReader, Parsed};
use crate::format::{Format, SchemaFormat};
use crate::json_schema::JsonSchemaCodec;
use crate::protobuf::ProtobufCodec;
use crate::registry::{Registry, SchemaType};
use crate::schemas::{payload_schema, writer_schema};
use crate::wire;

/// Whether a codec writes a message's value or its key (the `-value`/`-key` subjects).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The message's value (`<topic>-value`).
    Value,
    /// The message's key (`<topic>-key`).
    Key,
}

/// A format ready to decode and encode (see the module docs). Cheap to clone: subtasks share
/// the registry client and its cache.
#[derive(Clone)]
pub struct Codec(Inner);

#[derive(Clone)]
enum Inner {
    Plain(rivus_pipeline_file::format::Format),
    Avro(Arc<AvroCodec>),
    JsonSchema(Arc<JsonSchemaCodec>),
    Protobuf(Arc<ProtobufCodec>),
}

struct AvroCodec {
    path: String,
    spec: SchemaFormat,
    registry: Arc<Registry>,
    given: Option<(Parsed, String)>,
    reader: AvroReader,
    writer: OnceLock<(u32, Parsed)>,
}

impl fmt::Debug for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Inner::Plain(p) => write!(f, "Codec({p})"),
            Inner::Avro(a) => f
                .debug_struct("Codec")
                .field("format", &"avro")
                .field("registry", &a.registry)
                .field("writer_id", &a.writer.get().map(|w| w.0))
                .finish(),
            Inner::JsonSchema(j) => f
                .debug_struct("Codec")
                .field("format", &"json-schema")
                .field("registry", &j.registry)
                .field("writer_id", &j.writer_id())
                .finish(),
            Inner::Protobuf(p) => f
                .debug_struct("Codec")
                .field("format", &"protobuf")
                .field("registry", &p.registry)
                .field("writer_id", &p.writer_id())
                .finish(),
        }
    }
}

impl From<rivus_pipeline_file::format::Format> for Codec {
    fn from(f: rivus_pipeline_file::format::Format) -> Self {
        Codec(Inner::Plain(f))
    }
}

/// Reads a schema given inline or from a file; errors name `{path}.{field}`.
fn schema_text(
    inline: &Option<String>,
    file: &Option<std::path::PathBuf>,
    path: &str,
    field: &str,
) -> Result<Option<(Parsed, String)>> {
    let (text, at) = match (inline, file) {
        (Some(_), Some(_)) => {
            return Err(Error::config(
                format!("{path}.{field}_file"),
                format!("give `{field}` or `{field}_file`, not both"),
            ))
        }
        (Some(t), None) => (t.clone(), format!("{path}.{field}")),
        (None, Some(f)) => (
            std::fs::read_to_string(f).map_err(|e| {
                Error::config(
                    format!("{path}.{field}_file"),
                    format!("{}: {e}", f.display()),
                )
            })?,
            format!("{path}.{field}_file"),
        ),
        (None, None) => return Ok(None),
    };
    let parsed =
        Parsed::parse(&text).map_err(|e| Error::config(at, format!("not an Avro schema: {e}")))?;
    Ok(Some((parsed, text)))
}

impl Codec {
    /// The codec of `format`; `path` names the option in errors (`sink.format`). Schema files
    /// are read and parsed here: a bad one is refused before the job starts.
    pub fn new(format: &Format, path: &str) -> Result<Codec> {
        match format {
            Format::Plain(p) => Ok(Codec(Inner::Plain(*p))),
            Format::JsonSchema(spec) | Format::Protobuf(spec) => {
                let registry = Registry::new(&spec.registry, &format!("{path}.registry"))?;
                let given = match (&spec.schema, &spec.schema_file) {
                    (Some(_), Some(_)) => {
                        return Err(Error::config(
                            format!("{path}.schema_file"),
                            "give `schema` or `schema_file`, not both",
                        ))
                    }
                    (Some(t), None) => Some(t.clone()),
                    (None, Some(f)) => Some(std::fs::read_to_string(f).map_err(|e| {
                        Error::config(
                            format!("{path}.schema_file"),
                            format!("{}: {e}", f.display()),
                        )
                    })?),
                    (None, None) => None,
                };
                Ok(Codec(if matches!(format, Format::Protobuf(_)) {
                    Inner::Protobuf(Arc::new(ProtobufCodec::new(spec, registry, given, path)?))
                } else {
                    Inner::JsonSchema(Arc::new(JsonSchemaCodec::new(spec, registry, given, path)?))
                }))
            }
            Format::Avro(spec) => {
                let registry = Registry::new(&spec.registry, &format!("{path}.registry"))?;
                let given = schema_text(&spec.schema, &spec.schema_file, path, "schema")?;
                let reader = schema_text(
                    &spec.reader_schema,
                    &spec.reader_schema_file,
                    path,
                    "reader_schema",
                )?;
                let writers = [given.is_some(), spec.use_latest, spec.schema_id.is_some()];
                if writers.iter().filter(|w| **w).count() > 1 {
                    return Err(Error::config(
                        format!("{path}.schema"),
                        "give one of `schema`/`schema_file`, `use_latest` and `schema_id`",
                    ));
                }
                Ok(Codec(Inner::Avro(Arc::new(AvroCodec {
                    path: path.to_owned(),
                    spec: (**spec).clone(),
                    registry: Arc::new(registry),
                    given,
                    reader: AvroReader::new(reader.map(|r| r.0)),
                    writer: OnceLock::new(),
                }))))
            }
        }
    }

    /// The format's name (`json`, `avro`, ...).
    pub fn name(&self) -> &'static str {
        match &self.0 {
            Inner::Plain(p) => match p {
                rivus_pipeline_file::format::Format::Json => "json",
                rivus_pipeline_file::format::Format::Text => "text",
                rivus_pipeline_file::format::Format::Bytes => "bytes",
            },
            Inner::Avro(_) => "avro",
            Inner::JsonSchema(_) => "json-schema",
            Inner::Protobuf(_) => "protobuf",
        }
    }

    /// Registry requests this codec's client has sent (0 without a registry).
    pub fn registry_requests(&self) -> u64 {
        match &self.0 {
            Inner::Plain(_) => 0,
            Inner::Avro(a) => a.registry.requests(),
            Inner::JsonSchema(j) => j.registry.requests(),
            Inner::Protobuf(p) => p.registry.requests(),
        }
    }

    /// The schema id records are written with, once resolved.
    pub fn writer_id(&self) -> Option<u32> {
        match &self.0 {
            Inner::Plain(_) => None,
            Inner::Avro(a) => a.writer.get().map(|w| w.0),
            Inner::JsonSchema(j) => j.writer_id(),
            Inner::Protobuf(p) => p.writer_id(),
        }
    }

    /// Resolves the schema written to `topic` (a Kafka topic, a queue, a key — what the
    /// subject strategy names) as its value or key: registers it, or finds the registered
    /// one. Nothing to do for core's formats. Call before the first [`encode`](Self::encode).
    pub async fn open_writer(&self, topic: &str, role: Role) -> Result<()> {
        let a = match &self.0 {
            Inner::Plain(_) => return Ok(()),
            Inner::JsonSchema(j) => return j.open_writer(topic, role).await,
            Inner::Protobuf(p) => return p.open_writer(topic, role).await,
            Inner::Avro(a) => a,
        };
        if a.writer.get().is_some() {
            return Ok(());
        }
        let path = &a.path;
        let name = a.given.as_ref().and_then(|g| g.0.full_name());
        let given = a.given.as_ref().map(|g| (g.1.as_str(), name.as_deref()));
        let (subject, id, schema) = writer_schema(
            &a.spec,
            &a.registry,
            (topic, role),
            SchemaType::Avro,
            given,
            path,
        )
        .await?;
        let parsed = match &a.given {
            Some((parsed, _)) if a.spec.schema_id.is_none() && !a.spec.use_latest => parsed.clone(),
            _ => Parsed::parse_with(&schema.text, &schema.references).map_err(|e| {
                Error::config(format!("{path}.schema_id"), format!("schema id {id}: {e}"))
            })?,
        };
        tracing::info!(%subject, id, registry = a.registry.url(), "avro: writing with the registered schema");
        a.reader.keep(id, parsed.clone());
        let _ = a.writer.set((id, parsed));
        Ok(())
    }

    /// [`open_writer`](Self::open_writer) from synchronous code, once (later calls return at
    /// once): for connectors whose encoders are plain closures, at their first record. A
    /// registry that cannot be reached, or refuses the schema, is a transient error: the task
    /// fails (and restarts), the record is not handed to the error policy.
    pub fn prepare_blocking(
        &self,
        topic: &str,
        role: Role,
    ) -> std::result::Result<(), SchemaError> {
        let open = match &self.0 {
            Inner::Plain(_) => true,
            Inner::Avro(a) => a.writer.get().is_some(),
            Inner::JsonSchema(j) => j.is_open(),
            Inner::Protobuf(p) => p.is_open(),
        };
        if open {
            return Ok(());
        }
        on_helper_thread(self.open_writer(topic, role))
            .map_err(|e| SchemaError::unavailable(self.name(), "(unassigned)", e))
    }

    /// The MIME type of payloads written in this format.
    pub fn content_type(&self) -> &'static str {
        match &self.0 {
            Inner::Plain(p) => p.content_type(),
            Inner::Avro(_) => "application/vnd.confluent.avro",
            Inner::JsonSchema(_) => "application/vnd.confluent.json",
            Inner::Protobuf(_) => "application/vnd.confluent.protobuf",
        }
    }

    /// Appends the payload of `record` to `out` — never its metadata (`@metadata`, see
    /// [`rivus_sdk::metadata`]).
    pub fn encode(
        &self,
        record: &Value,
        out: &mut Vec<u8>,
    ) -> std::result::Result<(), SchemaError> {
        if let Inner::Plain(p) = &self.0 {
            return p.encode(record, out);
        }
        let record = &*rivus_sdk::metadata::without(record);
        match &self.0 {
            Inner::Plain(p) => p.encode(record, out),
            Inner::JsonSchema(j) => j.encode(record, out),
            Inner::Protobuf(p) => p.encode(record, out),
            Inner::Avro(a) => {
                let Some((id, parsed)) = a.writer.get() else {
                    return Err(SchemaError::unavailable(
                        "avro",
                        "(unassigned)",
                        "the writer's schema is not resolved yet (open_writer was not called)",
                    ));
                };
                wire::header(*id, out);
                parsed.write(record, out).map_err(|m| {
                    SchemaError::new("avro", "(unassigned)", format!("schema id {id}: {m}"))
                })
            }
        }
    }

    /// Decodes one payload; `position` names it in errors.
    pub async fn decode(
        &self,
        data: &[u8],
        position: &(dyn fmt::Display + Sync),
    ) -> std::result::Result<Value, SchemaError> {
        match self.decode_learned(data, position) {
            Ok(decoded) => decoded,
            Err(id) => {
                self.learn(id, &position.to_string()).await?;
                self.decode_learned(data, position)
                    .unwrap_or_else(|id| Err(self.dropped(id, position)))
            }
        }
    }

    /// [`decode`](Self::decode) from a thread that may not wait on async code (a consumer
    /// thread, or inside a runtime): a new schema id is fetched on a helper thread.
    pub fn decode_blocking(
        &self,
        data: &[u8],
        position: &dyn fmt::Display,
    ) -> std::result::Result<Value, SchemaError> {
        match self.decode_learned(data, position) {
            Ok(decoded) => decoded,
            Err(id) => {
                let shown = position.to_string();
                on_helper_thread(self.learn(id, &shown))?;
                self.decode_learned(data, position)
                    .unwrap_or_else(|id| Err(self.dropped(id, position)))
            }
        }
    }

    /// A schema learned a moment ago but dropped from a full cache since: not the record's
    /// fault.
    fn dropped(&self, id: u32, position: &dyn fmt::Display) -> SchemaError {
        SchemaError::unavailable(
            self.name(),
            position,
            format!("schema id {id} left the cache"),
        )
    }

    /// Fetches and keeps the schema of `id` (one registry request).
    async fn learn(&self, id: u32, position: &str) -> std::result::Result<(), SchemaError> {
        match &self.0 {
            Inner::Plain(_) => Ok(()),
            Inner::Avro(a) => a.learn(id, position).await.map(drop),
            Inner::JsonSchema(j) => j.learn(id, position).await.map(drop),
            Inner::Protobuf(p) => p.learn(id, position).await.map(drop),
        }
    }

    /// Decodes with the schemas learned so far; `Err(id)` when the payload names a schema not
    /// learned yet (one lookup per record on the hot path).
    fn decode_learned(
        &self,
        data: &[u8],
        position: &dyn fmt::Display,
    ) -> std::result::Result<std::result::Result<Value, SchemaError>, u32> {
        if let Inner::Plain(p) = &self.0 {
            return Ok(p.decode(data, position));
        }
        let format = self.name();
        let (id, body) = match wire::split(data) {
            Ok(split) => split,
            Err(e) => return Ok(Err(SchemaError::new(format, position, e))),
        };
        Ok(match &self.0 {
            Inner::Plain(p) => p.decode(data, position),
            Inner::Avro(a) => {
                let writer = a.reader.writer(id).ok_or(id)?;
                a.reader
                    .read(&writer, body)
                    .map_err(|e| SchemaError::new(format, position, format!("schema id {id}: {e}")))
            }
            Inner::JsonSchema(j) => {
                let v = j.known(id).ok_or(id)?;
                JsonSchemaCodec::read(&v, id, body, position)
            }
            Inner::Protobuf(p) => ProtobufCodec::read(&p.known(id).ok_or(id)?, id, body, position),
        })
    }
}

impl AvroCodec {
    /// Fetches and parses the writer's schema of `id`.
    async fn learn(
        &self,
        id: u32,
        position: &str,
    ) -> std::result::Result<Arc<Parsed>, SchemaError> {
        let r = payload_schema(&self.registry, id, SchemaType::Avro, "avro", position).await?;
        self.reader
            .learn(id, &r.text, &r.references)
            .map_err(|e| SchemaError::new("avro", position, format!("schema id {id}: {e}")))
    }
}

/// Runs `f` (a registry request) to completion from synchronous code, on a helper thread
/// with its own runtime: this works on a plain thread and inside any runtime alike.
fn on_helper_thread<F: Future + Send>(f: F) -> F::Output
where
    F::Output: Send,
{
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a current-thread runtime")
                .block_on(f)
        })
        .join()
        .expect("the registry request's thread panicked")
    })
}

impl DeserializationSchema<Value> for Codec {
    fn deserialize(
        &self,
        data: &[u8],
        position: &dyn fmt::Display,
    ) -> std::result::Result<Value, SchemaError> {
        self.decode_blocking(data, position)
    }
}

impl SerializationSchema<Value> for Codec {
    fn serialize(&self, value: &Value, out: &mut Vec<u8>) -> std::result::Result<(), SchemaError> {
        self.encode(value, out)
    }
}
