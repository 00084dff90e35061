//! A record's metadata: what its source knows about it beside its value — a Kafka record's
//! topic, partition, offset, key, headers and timestamp; a RabbitMQ message's exchange and
//! routing key — carried in a JSON record under one reserved key, [`KEY`] (`@metadata`, as
//! Logstash names it), never written by a sink.
//!
//! Sources add it when asked (a pipeline file asks when one of its VRL programs reads `%…`,
//! VRL's metadata, or a sink option names `%…`); VRL programs see it as `%` and may change it
//! (`%kafka.key = .user`); sink options read it as `%` paths: `topic = "copy.{%kafka.topic}"`,
//! `key_field = "%kafka.key"`. Every sink writes the record [`without`] it ([`Written`]
//! serializes it so without a copy).

use std::borrow::Cow;

use serde_json::Value;

/// The record's field that holds its metadata.
pub const KEY: &str = "@metadata";

/// Sets what `source` (`kafka`, `rabbitmq`) knows of `record` as its metadata,
/// `@metadata.<source>`.
pub fn attach(record: &mut Value, source: &str, fields: serde_json::Map<String, Value>) {
    let mut meta = serde_json::Map::new();
    meta.insert(source.to_owned(), Value::Object(fields));
    put(record, Value::Object(meta));
}

/// `record` without its metadata (borrowed as it is when it has none).
pub fn without(record: &Value) -> Cow<'_, Value> {
    match record {
        Value::Object(m) if m.contains_key(KEY) => {
            let mut m = m.clone();
            m.remove(KEY);
            Cow::Owned(Value::Object(m))
        }
        _ => Cow::Borrowed(record),
    }
}

/// `record` as serde writes it, without its metadata: what a sink writes, nothing copied.
pub struct Written<'a>(pub &'a Value);

impl serde::Serialize for Written<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self.0 {
            Value::Object(m) if m.contains_key(KEY) => {
                let mut map = s.serialize_map(Some(m.len() - 1))?;
                for (k, v) in m.iter().filter(|(k, _)| k.as_str() != KEY) {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
            v => v.serialize(s),
        }
    }
}

/// Takes the metadata out of `record` (an object), if it has any.
pub fn take(record: &mut Value) -> Option<Value> {
    record.as_object_mut()?.remove(KEY)
}

/// Sets `record`'s metadata (nothing when `record` is not an object, or `meta` is an empty
/// object or null).
pub fn put(record: &mut Value, meta: Value) {
    let empty = match &meta {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        _ => false,
    };
    if let (Value::Object(m), false) = (record, empty) {
        m.insert(KEY.to_owned(), meta);
    }
}

/// The value at `written` in `record`: a `%` path in the metadata (`%kafka.key`), else a path
/// of the record's fields (`user.id`, names joined by dots); `None` when absent.
pub fn lookup<'v>(record: &'v Value, written: &str) -> Option<&'v Value> {
    let (mut v, rest) = match written.strip_prefix('%') {
        Some(rest) => (record.get(KEY)?, rest),
        None => (record, written),
    };
    for name in rest.split('.').filter(|s| !s.is_empty()) {
        v = v.as_object()?.get(name)?;
    }
    Some(v)
}

/// The field an option names: a `%` path in the metadata, else the record's field of that
/// name (dots and all, as such options always read it).
pub fn field<'v>(record: &'v Value, written: &str) -> Option<&'v Value> {
    match written.starts_with('%') {
        true => lookup(record, written),
        false => record.get(written),
    }
}

/// Bytes as metadata: their text when it is UTF-8, else `{"base64": "…"}` (JSON holds no
/// raw bytes; nothing is replaced or lost).
pub fn bytes(b: &[u8]) -> Value {
    match std::str::from_utf8(b) {
        Ok(text) => Value::String(text.to_owned()),
        Err(_) => {
            use base64::Engine as _;
            let mut m = serde_json::Map::new();
            m.insert(
                "base64".into(),
                Value::String(base64::engine::general_purpose::STANDARD.encode(b)),
            );
            Value::Object(m)
        }
    }
}

/// The bytes [`bytes`] made, or a value's text (a number or boolean as JSON writes it);
/// `None` for null, arrays and other objects.
pub fn to_bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Number(n) => Some(n.to_string().into_bytes()),
        Value::Bool(b) => Some(b.to_string().into_bytes()),
        Value::Object(m) if m.len() == 1 => {
            use base64::Engine as _;
            let text = m.get("base64")?.as_str()?;
            base64::engine::general_purpose::STANDARD.decode(text).ok()
        }
        _ => None,
    }
}

/// A path as a user writes it: `@metadata.kafka.key` shown as `%kafka.key`.
pub fn shown(path: &[String]) -> String {
    match path.split_first() {
        Some((first, rest)) if first == KEY => format!("%{}", rest.join(".")),
        _ => path.join("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn metadata_is_read_by_percent_paths_and_never_written() {
        let mut r = json!({"id": 1, "@metadata": {"kafka": {"topic": "t", "key": "k"}}});
        assert_eq!(lookup(&r, "%kafka.topic"), Some(&json!("t")));
        assert_eq!(lookup(&r, "id"), Some(&json!(1)));
        assert_eq!(lookup(&r, "%kafka.partition"), None);
        assert_eq!(field(&r, "%kafka.key"), Some(&json!("k")));
        assert_eq!(field(&json!({"a.b": 1}), "a.b"), Some(&json!(1)));
        assert_eq!(without(&r).as_ref(), &json!({"id": 1}));
        assert_eq!(serde_json::to_string(&Written(&r)).unwrap(), r#"{"id":1}"#);
        assert_eq!(serde_json::to_string(&Written(&json!([1]))).unwrap(), "[1]");
        let plain = json!({"id": 2});
        assert!(matches!(without(&plain), Cow::Borrowed(_)));
        let meta = take(&mut r).unwrap();
        assert_eq!(r, json!({"id": 1}));
        put(&mut r, json!({}));
        assert_eq!(r, json!({"id": 1}), "an empty metadata object is not kept");
        put(&mut r, meta);
        assert_eq!(lookup(&r, "%kafka.key"), Some(&json!("k")));
        assert_eq!(
            shown(&["@metadata".into(), "kafka".into(), "key".into()]),
            "%kafka.key"
        );
    }

    #[test]
    fn bytes_round_trip_whether_text_or_not() {
        assert_eq!(bytes(b"k1"), json!("k1"));
        let raw = [0xff_u8, 0x00, 0x7f];
        let v = bytes(&raw);
        assert_eq!(v, json!({"base64": "/wB/"}));
        assert_eq!(to_bytes(&v).unwrap(), raw);
        assert_eq!(to_bytes(&json!("k1")).unwrap(), b"k1");
        assert_eq!(to_bytes(&json!(7)).unwrap(), b"7");
        assert_eq!(to_bytes(&json!(null)), None);
    }
}
