//! Payload formats of pipeline files (`format = "json" | "text" | "bytes"`): how a connector
//! that carries opaque payloads (a Kafka value, a RabbitMQ body, a Redis value) turns them into
//! the JSON records a pipeline file works on, and back.
//!
//! - `json` (the default): the payload is parsed; a record is written as JSON.
//! - `text`: the payload is UTF-8 text, carried as a JSON string and written back unchanged;
//!   a payload that is not UTF-8 goes to the error policy (content kept).
//! - `bytes`: pass-through. A UTF-8 payload is carried as a JSON string, any other as
//!   `{"$base64": "..."}`; both are written back byte for byte.
//!
//! A sink in `text` or `bytes` format writes a string record as its text and any other record
//! as JSON, so a JSON-producing source can feed a text sink.

use std::fmt;

use base64::Engine as _;
use serde::Deserialize;
use serde_json::Value;

use rivus_sdk::schema::{DeserializationSchema, SchemaError, SerializationSchema};

/// The key of the object that carries a payload that is not UTF-8 in `bytes` format.
pub const BASE64_KEY: &str = "$base64";

/// How payloads are read and written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// Parsed as JSON, written as JSON.
    #[default]
    Json,
    /// UTF-8 text, carried as a string.
    Text,
    /// Any bytes, passed through unchanged.
    Bytes,
}

impl Format {
    /// The MIME type of payloads written in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Json => "application/json",
            Format::Text => "text/plain; charset=utf-8",
            Format::Bytes => "application/octet-stream",
        }
    }

    /// The schema that reads and writes payloads in this format.
    pub fn schema(self) -> FormatSchema {
        FormatSchema(self)
    }

    /// Reads one payload; `position` names it in errors.
    pub fn decode(self, data: &[u8], position: &dyn fmt::Display) -> Result<Value, SchemaError> {
        match self {
            Format::Json => serde_json::from_slice(data).map_err(|e| {
                SchemaError::new(
                    "json",
                    position,
                    format_args!("{} (line {}, column {})", e, e.line(), e.column()),
                )
            }),
            Format::Text => match std::str::from_utf8(data) {
                Ok(s) => Ok(Value::String(s.to_owned())),
                Err(e) => Err(SchemaError::new(
                    "utf-8",
                    position,
                    format_args!(
                        "invalid UTF-8 at byte {} (format = \"bytes\" passes any payload)",
                        e.valid_up_to()
                    ),
                )),
            },
            Format::Bytes => Ok(match std::str::from_utf8(data) {
                Ok(s) => Value::String(s.to_owned()),
                Err(_) => {
                    let mut m = serde_json::Map::with_capacity(1);
                    let encoded = base64::engine::general_purpose::STANDARD.encode(data);
                    m.insert(BASE64_KEY.to_owned(), Value::String(encoded));
                    Value::Object(m)
                }
            }),
        }
    }

    /// Appends the payload of `value` to `out`.
    pub fn encode(self, value: &Value, out: &mut Vec<u8>) -> Result<(), SchemaError> {
        match (self, value) {
            (Format::Text | Format::Bytes, Value::String(s)) => {
                out.extend_from_slice(s.as_bytes());
                Ok(())
            }
            (Format::Bytes, Value::Object(m)) if m.len() == 1 && m.contains_key(BASE64_KEY) => {
                let text = m[BASE64_KEY].as_str().unwrap_or_default();
                base64::engine::general_purpose::STANDARD
                    .decode_vec(text, out)
                    .map_err(|e| {
                        SchemaError::new("bytes", "(unassigned)", format_args!("{BASE64_KEY}: {e}"))
                    })
            }
            // Never the record's metadata (`@metadata`).
            _ => serde_json::to_writer(out, &rivus_sdk::metadata::Written(value))
                .map_err(|e| SchemaError::new("json", "(unassigned)", e)),
        }
    }

    /// The payload of `value` in a new buffer.
    pub fn to_vec(self, value: &Value) -> Result<Vec<u8>, SchemaError> {
        let mut out = Vec::new();
        self.encode(value, &mut out)?;
        Ok(out)
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Json => "json",
            Format::Text => "text",
            Format::Bytes => "bytes",
        })
    }
}

/// A [`Format`] as a serialization schema of JSON records.
#[derive(Debug, Clone, Copy, Default)]
pub struct FormatSchema(pub Format);

impl DeserializationSchema<Value> for FormatSchema {
    fn deserialize(&self, data: &[u8], position: &dyn fmt::Display) -> Result<Value, SchemaError> {
        self.0.decode(data, position)
    }
}

impl SerializationSchema<Value> for FormatSchema {
    fn serialize(&self, value: &Value, out: &mut Vec<u8>) -> Result<(), SchemaError> {
        self.0.encode(value, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(f: Format, payload: &[u8]) -> Vec<u8> {
        let v = f.decode(payload, &"t/0@1").unwrap();
        f.to_vec(&v).unwrap()
    }

    #[test]
    fn json_parses_and_names_the_position() {
        let v = Format::Json.decode(br#"{"a":1}"#, &"t/0@1").unwrap();
        assert_eq!(v, json!({"a": 1}));
        let e = Format::Json.decode(b"{oops", &"orders/2@9").unwrap_err();
        assert_eq!((e.format, e.position.as_str()), ("json", "orders/2@9"));
    }

    #[test]
    fn text_keeps_the_payload_and_refuses_what_is_not_utf8() {
        for p in [
            &b"plain words"[..],
            br#"{"a": 1,  "b":2}"#,
            b"",
            "caf\u{e9}".as_bytes(),
        ] {
            assert_eq!(round_trip(Format::Text, p), p);
        }
        let e = Format::Text.decode(&[b'o', 0xff], &"q#3").unwrap_err();
        assert_eq!(e.format, "utf-8");
        assert!(e.message.contains("byte 1"), "{e}");
        assert_eq!(e.position, "q#3");
    }

    #[test]
    fn bytes_passes_any_payload_through() {
        let binary = [0u8, 0xff, 0xfe, b'x', 0x80];
        assert_eq!(round_trip(Format::Bytes, &binary), binary);
        let v = Format::Bytes.decode(&binary, &"x").unwrap();
        assert!(v.get(BASE64_KEY).is_some(), "{v}");
        // Whitespace and key order of a JSON payload survive: it is not parsed.
        let doc = br#"{ "b":2,"a" :1 }"#;
        assert_eq!(round_trip(Format::Bytes, doc), doc);
    }

    #[test]
    fn text_sinks_write_other_records_as_json() {
        let v = json!({"id": 7});
        assert_eq!(Format::Text.to_vec(&v).unwrap(), br#"{"id":7}"#);
        assert_eq!(Format::Bytes.to_vec(&v).unwrap(), br#"{"id":7}"#);
        // Under json a string record is a JSON string.
        assert_eq!(Format::Json.to_vec(&json!("hi")).unwrap(), br#""hi""#);
        let bad = json!({ BASE64_KEY: "***" });
        let e = Format::Bytes.to_vec(&bad).unwrap_err();
        assert!(e.message.contains(BASE64_KEY), "{e}");
    }

    #[test]
    fn formats_read_from_a_file_by_name() {
        #[derive(Deserialize)]
        struct S {
            format: Format,
        }
        let s: S = serde_json::from_str(r#"{"format":"bytes"}"#).unwrap();
        assert_eq!(s.format, Format::Bytes);
        assert!(serde_json::from_str::<S>(r#"{"format":"avro"}"#).is_err());
    }
}
