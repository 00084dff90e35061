//! Protobuf in Confluent's wire format: after the five-byte header, the path of the message
//! type inside its `.proto` file (the "message indexes": a zig-zag varint count, then each
//! index; a lone `0` stands for the first message), then the message. Schemas are `.proto`
//! sources, compiled at run time (`protox`; Google's well-known types resolve by themselves)
//! and read and written as dynamic messages (`prost-reflect`) in the proto3 JSON mapping:
//! field names as in the `.proto` file, every field present, 64-bit integers as numbers,
//! enums by name, bytes as base64, `Timestamp` as RFC 3339.

use std::collections::HashMap;
use std::fmt;

use protox::prost::Message as _;
use protox::prost_reflect::{
    DeserializeOptions, DynamicMessage, FileDescriptor, MessageDescriptor, SerializeOptions,
};
use rivus_sdk::schema::SchemaError;
use rivus_sdk::{Error, Result};
use serde_json::Value;

use crate::format::SchemaFormat;
use crate::registry::{Registry, SchemaType};
use crate::schemas::{payload_schema, Registered};
use crate::{wire, Role};

/// Compiled schemas kept by id at most.
const KEPT: usize = 1000;
/// The name the in-memory `.proto` source is compiled under.
const SOURCE: &str = "schema.proto";

/// One `.proto` file as the registry keeps it — source, or (as Confluent's serializers may
/// register it) a base64-encoded `FileDescriptorProto` — under `name` when it is source.
fn file(name: &str, text: &str) -> std::result::Result<protox::file::File, String> {
    match protox::file::File::from_source(name, text) {
        Ok(f) => Ok(f),
        Err(source_error) => {
            use base64::Engine as _;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text.trim())
                .map_err(|_| source_error.to_string())?;
            protox::file::File::decode_file_descriptor_proto(&bytes[..]).map_err(|e| {
                format!("neither .proto source ({source_error}) nor a file descriptor: {e}")
            })
        }
    }
}

/// Compiles one schema with the files it imports: `references` (`(import name, text)`: a
/// registry's schema references) and Google's well-known types.
fn compile(
    text: &str,
    references: &[(String, String)],
) -> std::result::Result<FileDescriptor, String> {
    let main = file(SOURCE, text)?;
    let name = main.name().to_owned();
    let mut files = HashMap::from([(name.clone(), main)]);
    for (import, text) in references {
        let f = file(import, text).map_err(|e| format!("referenced `{import}`: {e}"))?;
        // A descriptor carries its own name; the import uses the reference's.
        files.entry(import.clone()).or_insert(f);
    }
    struct Memory(HashMap<String, protox::file::File>);
    impl protox::file::FileResolver for Memory {
        fn open_file(&self, name: &str) -> std::result::Result<protox::file::File, protox::Error> {
            self.0
                .get(name)
                .cloned()
                .ok_or_else(|| protox::Error::file_not_found(name))
        }
    }
    let mut chain = protox::file::ChainFileResolver::new();
    chain.add(Memory(files));
    chain.add(protox::file::GoogleFileResolver::new());
    let mut compiler = protox::Compiler::with_file_resolver(chain);
    compiler.open_file(&name).map_err(|e| e.to_string())?;
    compiler
        .descriptor_pool()
        .get_file_by_name(&name)
        .ok_or_else(|| "the compiled file is missing".to_owned())
}

/// The message at `path` (indexes of top-level, then nested, message types).
fn by_path(file: &FileDescriptor, path: &[i64]) -> Option<MessageDescriptor> {
    let (first, rest) = path.split_first()?;
    let mut m = file.messages().nth(usize::try_from(*first).ok()?)?;
    for i in rest {
        let next = m.child_messages().nth(usize::try_from(*i).ok()?)?;
        m = next;
    }
    Some(m)
}

/// The path of the message named `name` (full or simple name), or of the first message.
fn path_of(file: &FileDescriptor, name: Option<&str>) -> Option<(MessageDescriptor, Vec<i64>)> {
    fn walk(
        ms: impl Iterator<Item = MessageDescriptor>,
        prefix: &[i64],
        name: &str,
    ) -> Option<(MessageDescriptor, Vec<i64>)> {
        for (i, m) in ms.enumerate() {
            let mut p = prefix.to_vec();
            p.push(i as i64);
            if m.full_name() == name || m.name() == name {
                return Some((m, p));
            }
            if let Some(found) = walk(m.child_messages(), &p, name) {
                return Some(found);
            }
        }
        None
    }
    match name {
        Some(n) => walk(file.messages(), &[], n),
        None => file.messages().next().map(|m| (m, vec![0])),
    }
}

/// The message indexes of `path` as Confluent writes them.
fn indexes(path: &[i64], out: &mut Vec<u8>) {
    if path == [0] {
        out.push(0);
        return;
    }
    crate::avro::zigzag(path.len() as i64, out);
    for i in path {
        crate::avro::zigzag(*i, out);
    }
}

/// Reads the message indexes from the front of `body`.
fn read_indexes(body: &mut &[u8]) -> std::result::Result<Vec<i64>, String> {
    let n = crate::avro::read_zigzag(body)?;
    if n == 0 {
        return Ok(vec![0]);
    }
    if !(0..=100).contains(&n) {
        return Err(format!("{n} message indexes"));
    }
    (0..n).map(|_| crate::avro::read_zigzag(body)).collect()
}

const TO_JSON: SerializeOptions = SerializeOptions::new()
    .stringify_64_bit_integers(false)
    .use_proto_field_name(true)
    .skip_default_fields(false);

/// The writer's `.proto` source given in the file with its message and that message's path;
/// the writer's message and its indexes header; files by id.
pub(crate) type ProtobufCodec =
    Registered<(MessageDescriptor, Vec<i64>), (MessageDescriptor, Vec<u8>), FileDescriptor>;

impl ProtobufCodec {
    /// Checks the settings and compiles a given schema; errors name `{path}.…`.
    pub(crate) fn new(
        spec: &SchemaFormat,
        registry: Registry,
        given: Option<String>,
        path: &str,
    ) -> Result<Self> {
        let given = match given {
            Some(text) => {
                let file =
                    compile(&text, &[]).map_err(|e| Error::config(format!("{path}.schema"), e))?;
                let (m, p) = path_of(&file, spec.message.as_deref()).ok_or_else(|| {
                    Error::config(
                        format!("{path}.message"),
                        format!(
                            "no message {} in the schema",
                            spec.message.as_deref().unwrap_or("at all")
                        ),
                    )
                })?;
                Some((text, m, p))
            }
            None => None,
        };
        Registered::with_given(
            spec,
            registry,
            given.map(|(text, m, p)| (text, (m, p))),
            path,
            "a reader schema is for Avro; Protobuf messages are read by their writer's schema",
        )
    }

    /// Registers (or finds) the writer's schema; see `Codec::open_writer`.
    pub(crate) async fn open_writer(&self, topic: &str, role: Role) -> Result<()> {
        let name = self.given.as_ref().map(|g| g.1 .0.full_name().to_owned());
        let Some((subject, id, schema)) = self
            .resolve_writer(topic, role, SchemaType::Protobuf, name)
            .await?
        else {
            return Ok(());
        };
        let bad = |e: String| {
            Error::config(
                format!("{}.schema", self.path),
                format!("schema id {id}: {e}"),
            )
        };
        let file = compile(&schema.text, &schema.references).map_err(bad)?;
        let (m, p) = path_of(&file, self.spec.message.as_deref())
            .ok_or_else(|| bad("the message is not in the registered schema".into()))?;
        let mut header = Vec::new();
        indexes(&p, &mut header);
        tracing::info!(%subject, id, message = m.full_name(), registry = self.registry.url(), "protobuf: writing with the registered schema");
        self.readers.lock().insert(id, file);
        let _ = self.writer.set((id, (m, header)));
        Ok(())
    }

    pub(crate) fn encode(
        &self,
        record: &Value,
        out: &mut Vec<u8>,
    ) -> std::result::Result<(), SchemaError> {
        let Some((id, (m, header))) = self.writer.get() else {
            return Err(SchemaError::unavailable(
                "protobuf",
                "(unassigned)",
                "the writer's schema is not resolved yet (open_writer was not called)",
            ));
        };
        let msg =
            DynamicMessage::deserialize_with_options(m.clone(), record, &DeserializeOptions::new())
                .map_err(|e| {
                    SchemaError::new(
                        "protobuf",
                        "(unassigned)",
                        format!("schema id {id} ({}): {e}", m.full_name()),
                    )
                })?;
        wire::header(*id, out);
        out.extend_from_slice(header);
        msg.encode(out)
            .map_err(|e| SchemaError::new("protobuf", "(unassigned)", e))
    }

    /// The compiled schema of `id`, if known.
    pub(crate) fn known(&self, id: u32) -> Option<FileDescriptor> {
        self.readers.lock().get(&id).cloned()
    }

    /// Fetches and compiles the schema of `id`.
    pub(crate) async fn learn(
        &self,
        id: u32,
        position: &str,
    ) -> std::result::Result<FileDescriptor, SchemaError> {
        let r = payload_schema(
            &self.registry,
            id,
            SchemaType::Protobuf,
            "protobuf",
            position,
        )
        .await?;
        let file = compile(&r.text, &r.references)
            .map_err(|e| SchemaError::new("protobuf", position, format!("schema id {id}: {e}")))?;
        let mut m = self.readers.lock();
        if m.len() >= KEPT {
            m.clear();
        }
        m.insert(id, file.clone());
        Ok(file)
    }

    /// Decodes a payload's body (message indexes, then the message) with its file.
    pub(crate) fn read(
        file: &FileDescriptor,
        id: u32,
        mut body: &[u8],
        position: &dyn fmt::Display,
    ) -> std::result::Result<Value, SchemaError> {
        let bad =
            |m: String| SchemaError::new("protobuf", position, format!("schema id {id}: {m}"));
        let path = read_indexes(&mut body).map_err(bad)?;
        let m = by_path(file, &path)
            .ok_or_else(|| bad(format!("no message at index path {path:?}")))?;
        let msg = DynamicMessage::decode(m.clone(), body)
            .map_err(|e| bad(format!("{}: {e}", m.full_name())))?;
        msg.serialize_with_options(serde_json::value::Serializer, &TO_JSON)
            .map_err(|e| bad(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROTO: &str = r#"
        syntax = "proto3";
        package shop;
        import "google/protobuf/timestamp.proto";
        message Order {
          int64 id = 1;
          string customer = 2;
          repeated string tags = 3;
          Status status = 4;
          google.protobuf.Timestamp placed = 5;
          bytes blob = 6;
          message Line { string sku = 1; int32 qty = 2; }
          repeated Line lines = 7;
        }
        enum Status { NEW = 0; PAID = 1; }
        message Other { string x = 1; }
    "#;

    #[test]
    fn messages_are_found_by_name_and_index_path() {
        let f = compile(PROTO, &[]).unwrap();
        let (m, p) = path_of(&f, None).unwrap();
        assert_eq!((m.full_name(), p.as_slice()), ("shop.Order", &[0][..]));
        let (m, p) = path_of(&f, Some("Line")).unwrap();
        assert_eq!(
            (m.full_name(), p.as_slice()),
            ("shop.Order.Line", &[0, 0][..])
        );
        let (_, p) = path_of(&f, Some("shop.Other")).unwrap();
        assert_eq!(p, [1]);
        assert_eq!(by_path(&f, &[0, 0]).unwrap().name(), "Line");
        let mut out = Vec::new();
        indexes(&[0], &mut out);
        assert_eq!(out, [0]);
        out.clear();
        indexes(&[1, 2], &mut out);
        assert_eq!(out, [4, 2, 4]);
        assert_eq!(read_indexes(&mut &out[..]).unwrap(), [1, 2]);
        assert!(compile("syntax = \"proto3\"; message {", &[]).is_err());
    }

    #[test]
    fn records_round_trip_in_the_json_mapping() {
        let f = compile(PROTO, &[]).unwrap();
        let (m, _) = path_of(&f, None).unwrap();
        let record = serde_json::json!({
            "id": 9007199254740993i64, "customer": "ada", "tags": ["a"], "status": "PAID",
            "placed": "2024-01-01T00:00:00.250Z", "blob": "AAEC",
            "lines": [{"sku": "x", "qty": 2}]
        });
        let msg = DynamicMessage::deserialize_with_options(
            m.clone(),
            &record,
            &DeserializeOptions::new(),
        )
        .unwrap();
        let mut body = vec![0];
        msg.encode(&mut body).unwrap();
        let back = ProtobufCodec::read(&f, 1, &body, &"t").unwrap();
        assert_eq!(back, record);
        let bad = serde_json::json!({"id": 1, "colour": "red"});
        assert!(
            DynamicMessage::deserialize_with_options(m, &bad, &DeserializeOptions::new()).is_err()
        );
    }
}
