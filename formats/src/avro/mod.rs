//! Avro in Confluent's wire format: a parsed schema with its named types, reading a payload
//! with its writer's schema (resolved against an optional reader schema by Avro's rules) into
//! a JSON record, and writing a JSON record with the job's schema.

mod decode;
mod from_json;
mod project;
mod to_json;

use std::collections::HashMap;
use std::sync::Arc;

use apache_avro::schema::{Names, ResolvedSchema};
use apache_avro::Schema;
use parking_lot::Mutex;
use serde_json::Value;

/// Zig-zag varints, which Confluent's Protobuf framing uses too.
pub(crate) use decode::long as read_zigzag;
pub(crate) use from_json::long as zigzag;
pub use from_json::Misfit;
pub use to_json::{decimal, to_json};

/// Parsed schemas kept by id at most.
const PARSED: usize = 1000;

/// A schema and its named types (records, enums, fixed), for `Ref`s.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The schema.
    pub schema: Schema,
    /// Its named types, by full name.
    pub names: Names,
}

impl Parsed {
    /// Parses the schema's JSON text.
    pub fn parse(text: &str) -> Result<Self, String> {
        Self::parse_with(text, &[])
    }

    /// Parses the schema's JSON text, whose named types may be defined by `references`
    /// (`(full name, schema text)`: a registry's schema references).
    pub fn parse_with(text: &str, references: &[(String, String)]) -> Result<Self, String> {
        let (schema, others) = if references.is_empty() {
            (
                Schema::parse_str(text).map_err(|e| e.to_string())?,
                Vec::new(),
            )
        } else {
            Schema::parse_str_with_list(text, references.iter().map(|r| r.1.as_str()))
                .map_err(|e| e.to_string())?
        };
        // Resolved before the schemas that use them: a reference's own references come after
        // it in the list.
        let order: Vec<&Schema> = others.iter().rev().chain([&schema]).collect();
        let names = ResolvedSchema::try_from(order)
            .map_err(|e| e.to_string())?
            .get_names()
            .iter()
            .map(|(n, s)| (n.clone(), (*s).clone()))
            .collect();
        Ok(Parsed { schema, names })
    }

    /// The full name of a named top-level schema (for the record-name subject strategies).
    pub fn full_name(&self) -> Option<String> {
        match &self.schema {
            Schema::Record(r) => Some(r.name.fullname(None)),
            Schema::Enum(e) => Some(e.name.fullname(None)),
            Schema::Fixed(f) => Some(f.name.fullname(None)),
            _ => None,
        }
    }

    /// `record` as the Avro binary of this schema (no header).
    pub fn write(&self, record: &Value, out: &mut Vec<u8>) -> Result<(), String> {
        from_json::write(record, &self.schema, &self.names, out).map_err(|m| m.to_string())
    }
}

/// Reads payloads by their writer's schema, into a reader schema when one is set.
#[derive(Debug, Default)]
pub struct AvroReader {
    reader: Option<Parsed>,
    parsed: Mutex<HashMap<u32, Arc<Parsed>>>,
}

impl AvroReader {
    /// A reader that resolves every writer's schema against `reader` when given.
    pub fn new(reader: Option<Parsed>) -> Self {
        AvroReader {
            reader,
            parsed: Mutex::default(),
        }
    }

    /// The parsed writer's schema of `id`, if parsed before.
    pub fn writer(&self, id: u32) -> Option<Arc<Parsed>> {
        self.parsed.lock().get(&id).cloned()
    }

    /// Parses and keeps the writer's schema of `id` (with the schemas it references).
    pub fn learn(
        &self,
        id: u32,
        text: &str,
        references: &[(String, String)],
    ) -> Result<Arc<Parsed>, String> {
        Ok(self.keep(id, Parsed::parse_with(text, references)?))
    }

    /// Keeps `parsed` as the writer's schema of `id` (a codec that writes it reads it back
    /// without asking the registry).
    pub fn keep(&self, id: u32, parsed: Parsed) -> Arc<Parsed> {
        let p = Arc::new(parsed);
        let mut m = self.parsed.lock();
        if m.len() >= PARSED {
            m.clear();
        }
        m.insert(id, Arc::clone(&p));
        p
    }

    /// Decodes `payload`, written with `writer`, into a JSON record (in the reader schema's
    /// shape when one is set).
    pub fn read(&self, writer: &Parsed, mut payload: &[u8]) -> Result<Value, String> {
        let record = decode::read(&writer.schema, &writer.names, &mut payload)?;
        match &self.reader {
            Some(r) => project::project(record, &r.schema, &r.names),
            None => Ok(record),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ORDER: &str = r#"{
        "type": "record", "name": "Order", "namespace": "shop",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "customer", "type": "string"},
            {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
            {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
            {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
            {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
            {"name": "note", "type": ["null", "string"], "default": null},
            {"name": "tags", "type": {"type": "array", "items": "string"}},
            {"name": "attrs", "type": {"type": "map", "values": "long"}},
            {"name": "blob", "type": "bytes"},
            {"name": "next", "type": ["null", "Status"], "default": null}
        ]
    }"#;

    fn order() -> Value {
        json!({
            "id": 7, "customer": "ada", "amount": "12.30",
            "placed": "2024-01-01T00:00:00.250Z", "day": "2024-01-02",
            "ref": "67e55044-10b1-426f-9247-bb680e5fe0c8", "status": "PAID",
            "note": "fragile", "tags": ["a", "b"], "attrs": {"x": 1},
            "blob": "AAEC", "next": "NEW"
        })
    }

    #[test]
    fn a_record_round_trips_with_logical_types() {
        let p = Parsed::parse(ORDER).unwrap();
        let mut out = Vec::new();
        p.write(&order(), &mut out).unwrap();
        let back = AvroReader::new(None).read(&p, &out).unwrap();
        assert_eq!(back, order());
        assert_eq!(p.full_name().as_deref(), Some("shop.Order"));
    }

    #[test]
    fn our_binary_agrees_with_apache_avro_both_ways() {
        let p = Parsed::parse(ORDER).unwrap();
        let mut ours = Vec::new();
        p.write(&order(), &mut ours).unwrap();
        let theirs = apache_avro::reader::datum::GenericDatumReader::builder(&p.schema)
            .build()
            .unwrap()
            .read_value(&mut &ours[..])
            .unwrap();
        assert_eq!(to_json(theirs.clone(), &p.schema, &p.names), order());
        let written = apache_avro::writer::datum::GenericDatumWriter::builder(&p.schema)
            .build()
            .unwrap()
            .write_value_to_vec(theirs)
            .unwrap();
        assert_eq!(written, ours, "byte for byte");
        // Negative decimals and numbers at the varint boundaries too.
        let mut r = order();
        r["amount"] = json!("-0.01");
        r["id"] = json!(i64::MIN);
        r["attrs"] = json!({"a": 63, "b": -64, "c": i64::MAX});
        let mut ours = Vec::new();
        p.write(&r, &mut ours).unwrap();
        let theirs = apache_avro::reader::datum::GenericDatumReader::builder(&p.schema)
            .build()
            .unwrap()
            .read_value(&mut &ours[..])
            .unwrap();
        assert_eq!(to_json(theirs, &p.schema, &p.names), r);
    }

    #[test]
    fn every_truncation_of_a_payload_is_an_error() {
        let p = Parsed::parse(ORDER).unwrap();
        let mut out = Vec::new();
        p.write(&order(), &mut out).unwrap();
        let reader = AvroReader::new(None);
        for n in 0..out.len() {
            assert!(reader.read(&p, &out[..n]).is_err(), "cut at {n}");
        }
        // A huge block count in a few bytes is refused, not allocated.
        let arr = Parsed::parse(r#"{"type":"array","items":"long"}"#).unwrap();
        let mut bomb = Vec::new();
        from_json::long(1 << 40, &mut bomb);
        assert!(reader.read(&arr, &bomb).unwrap_err().contains("block"));
    }

    #[test]
    fn missing_nullable_fields_become_null_and_misfits_name_the_field() {
        let p = Parsed::parse(ORDER).unwrap();
        let mut r = order();
        r.as_object_mut().unwrap().remove("note");
        let mut out = Vec::new();
        p.write(&r, &mut out).unwrap();
        let back = AvroReader::new(None).read(&p, &out).unwrap();
        assert_eq!(back["note"], Value::Null);

        let mut bad = order();
        bad["tags"][1] = json!(5);
        let e = p.write(&bad, &mut Vec::new()).unwrap_err();
        assert!(e.starts_with("tags[1]: expected string"), "{e}");
        let mut bad = order();
        bad["amount"] = json!("12.345");
        let e = p.write(&bad, &mut Vec::new()).unwrap_err();
        assert!(e.starts_with("amount: ") && e.contains("scale 2"), "{e}");
        let mut bad = order();
        bad["surprise"] = json!(1);
        let e = p.write(&bad, &mut Vec::new()).unwrap_err();
        assert!(e.contains("`surprise`"), "{e}");
        let mut bad = order();
        bad["status"] = json!("LOST");
        let e = p.write(&bad, &mut Vec::new()).unwrap_err();
        assert!(e.starts_with("status: ") && e.contains("NEW, PAID"), "{e}");
    }

    #[test]
    fn an_old_writer_is_read_into_a_newer_reader_schema() {
        let v1 =
            Parsed::parse(r#"{"type":"record","name":"U","fields":[{"name":"id","type":"long"}]}"#)
                .unwrap();
        let v2 = Parsed::parse(
            r#"{"type":"record","name":"U","fields":[{"name":"id","type":"long"},
                {"name":"email","type":"string","default":"none"}]}"#,
        )
        .unwrap();
        let mut out = Vec::new();
        v1.write(&json!({"id": 1}), &mut out).unwrap();
        let r = AvroReader::new(Some(v2));
        assert_eq!(
            r.read(&v1, &out).unwrap(),
            json!({"id": 1, "email": "none"})
        );
        // A truncated payload is an error, not a panic.
        assert!(AvroReader::new(None).read(&v1, &[]).is_err());
    }
}
