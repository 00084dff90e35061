//! The dead letter: a rejected record with where it came from and why, in one JSON format for
//! every source, sink and destination (file, Kafka topic, RabbitMQ queue, Redis stream). The
//! payload is text when it is valid UTF-8, else base64, and `encoding` says which.

use std::fmt;

use crate::calendar;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// A record that failed, as handed to the error policy and stored by a dead-letter queue.
///
/// Serialized (one JSON object per letter):
///
/// ```json
/// {"time":"2026-12-01T22:10:04.512Z","connector":"kafka","origin":"source[1]","subtask":1,
///  "position":"orders/1@5","reason":"invalid JSON at line 1 column 2",
///  "encoding":"text","payload":"{\"id\":"}
/// ```
///
/// with `"encoding":"base64"` for a payload that is not UTF-8, and `"fields"` (each
/// `{"name", "encoding", "value"}`) for a record made of named fields (a Redis stream entry).
#[derive(Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// The connector that rejected it (`kafka`, `redis-streams`, ...; empty when unknown).
    pub connector: String,
    /// The task that rejected it, e.g. `kafka-source[2]`.
    pub origin: String,
    /// Where the record came from or was going: `topic/partition@offset`, `queue#delivery`,
    /// `stream#entry-id`, a table and key.
    pub position: String,
    /// Why it was rejected.
    pub reason: String,
    /// The record's raw bytes as received (or as encoded, for sinks), when available.
    pub payload: Vec<u8>,
    /// The record's named fields, for records made of them (a Redis stream entry).
    pub fields: Vec<(String, Vec<u8>)>,
    /// When it was rejected, in milliseconds since the Unix epoch.
    pub time_ms: i64,
}

impl fmt::Debug for DeadLetter {
    // The payload may hold anything, secrets included: print its size only.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeadLetter")
            .field("connector", &self.connector)
            .field("origin", &self.origin)
            .field("position", &self.position)
            .field("reason", &self.reason)
            .field("payload_len", &self.payload.len())
            .field("fields", &self.fields.len())
            .field("time_ms", &self.time_ms)
            .finish()
    }
}

impl DeadLetter {
    /// The subtask in `origin` (`name[3]` → 3).
    pub fn subtask(&self) -> Option<usize> {
        let open = self.origin.rfind('[')?;
        self.origin[open + 1..].strip_suffix(']')?.parse().ok()
    }

    /// The payload as text when it is UTF-8.
    pub fn payload_text(&self) -> Option<&str> {
        std::str::from_utf8(&self.payload).ok()
    }

    /// The letter as one line of JSON (no newline).
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a dead letter always serializes")
    }

    /// A letter read back from [`to_json`](Self::to_json)'s output.
    pub fn from_json(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(bytes)
    }
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Encoding {
    Text,
    Base64,
}

fn encode(bytes: &[u8]) -> (Encoding, String) {
    match std::str::from_utf8(bytes) {
        Ok(text) => (Encoding::Text, text.to_owned()),
        Err(_) => (
            Encoding::Base64,
            base64::engine::general_purpose::STANDARD.encode(bytes),
        ),
    }
}

fn decode(encoding: Encoding, text: String) -> Result<Vec<u8>, String> {
    match encoding {
        Encoding::Text => Ok(text.into_bytes()),
        Encoding::Base64 => base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map_err(|e| format!("payload: not base64: {e}")),
    }
}

#[derive(Serialize, Deserialize)]
struct WireField {
    name: String,
    encoding: Encoding,
    value: String,
}

#[derive(Serialize, Deserialize)]
struct Wire {
    time: String,
    #[serde(default)]
    connector: String,
    origin: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    subtask: Option<usize>,
    position: String,
    reason: String,
    encoding: Encoding,
    payload: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    fields: Vec<WireField>,
}

impl Serialize for DeadLetter {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (encoding, payload) = encode(&self.payload);
        Wire {
            time: rfc3339_ms(self.time_ms),
            connector: self.connector.clone(),
            origin: self.origin.clone(),
            subtask: self.subtask(),
            position: self.position.clone(),
            reason: self.reason.clone(),
            encoding,
            payload,
            fields: self
                .fields
                .iter()
                .map(|(name, v)| {
                    let (encoding, value) = encode(v);
                    WireField {
                        name: name.clone(),
                        encoding,
                        value,
                    }
                })
                .collect(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for DeadLetter {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        let w = Wire::deserialize(d)?;
        let time_ms = parse_rfc3339_ms(&w.time)
            .ok_or_else(|| D::Error::custom(format!("time: `{}` is not RFC 3339", w.time)))?;
        let fields = w
            .fields
            .into_iter()
            .map(|f| {
                decode(f.encoding, f.value)
                    .map(|v| (f.name, v))
                    .map_err(D::Error::custom)
            })
            .collect::<Result<_, _>>()?;
        Ok(DeadLetter {
            connector: w.connector,
            origin: w.origin,
            position: w.position,
            reason: w.reason,
            payload: decode(w.encoding, w.payload).map_err(D::Error::custom)?,
            fields,
            time_ms,
        })
    }
}

/// `2026-12-01T22:10:04.512Z`.
pub(crate) fn rfc3339_ms(ms: i64) -> String {
    calendar::instant(ms, 1000, 3, true)
}

/// Reads what [`rfc3339_ms`] writes.
fn parse_rfc3339_ms(t: &str) -> Option<i64> {
    calendar::parse_instant(t, 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn letter(payload: &[u8]) -> DeadLetter {
        DeadLetter {
            connector: "kafka".into(),
            origin: "source[3]".into(),
            position: "orders/1@5".into(),
            reason: "bad".into(),
            payload: payload.to_vec(),
            fields: Vec::new(),
            time_ms: 1_796_162_004_512,
        }
    }

    #[test]
    fn text_payloads_stay_readable_and_binary_ones_are_base64() {
        let json = String::from_utf8(letter(b"{\"id\":").to_json()).unwrap();
        assert!(
            json.contains(r#""encoding":"text","payload":"{\"id\":""#),
            "{json}"
        );
        assert!(
            json.contains(r#""time":"2026-12-01T21:53:24.512Z""#),
            "{json}"
        );
        assert!(json.contains(r#""subtask":3"#), "{json}");
        let bin = letter(&[0xff, 0x00, 0x41]);
        let json = String::from_utf8(bin.to_json()).unwrap();
        assert!(
            json.contains(r#""encoding":"base64","payload":"/wBB""#),
            "{json}"
        );
        assert_eq!(DeadLetter::from_json(json.as_bytes()).unwrap(), bin);
    }

    #[test]
    fn fields_round_trip() {
        let mut l = letter(b"");
        l.fields = vec![("a".into(), b"1".to_vec()), ("b".into(), vec![0xc3])];
        let json = l.to_json();
        let text = String::from_utf8_lossy(&json);
        assert!(
            text.contains(r#"{"name":"a","encoding":"text","value":"1"}"#),
            "{text}"
        );
        assert_eq!(DeadLetter::from_json(&json).unwrap(), l);
    }

    #[test]
    fn times_round_trip() {
        for ms in [0, 1, 951_782_400_000, 1_796_162_004_512, 4_102_444_799_999] {
            assert_eq!(parse_rfc3339_ms(&rfc3339_ms(ms)), Some(ms), "{ms}");
        }
        assert_eq!(rfc3339_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(parse_rfc3339_ms("2026-13-01T00:00:00Z"), None);
    }

    #[test]
    fn a_bad_letter_names_its_field() {
        let e = DeadLetter::from_json(
            br#"{"time":"x","origin":"o","position":"p","reason":"r","encoding":"text","payload":""}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("time"), "{e}");
        let e = DeadLetter::from_json(
            br#"{"time":"2026-12-01T00:00:00Z","origin":"o","position":"p","reason":"r","encoding":"base64","payload":"%%"}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("payload"), "{e}");
    }
}
