//! Values as pipeline files write them: durations (`500ms`, `2s`, `1.5m`, `1h`), and a
//! record's field as text (keys, routing keys, correlation ids taken from a JSON record).

use std::time::Duration;

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use rivus_sdk::schema::SchemaError;

/// `500ms`, `2s`, `1.5m`, `1h`: a positive duration; `None` for anything else.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit() && c != '.')?;
    let (n, unit) = s.split_at(split);
    let n: f64 = n.parse().ok()?;
    let secs = match unit.trim() {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return None,
    };
    (secs.is_finite() && secs > 0.0).then(|| Duration::from_secs_f64(secs))
}

/// `deserialize_with` for a [`Duration`] written as [`parse_duration`] reads it.
pub fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    parse_duration(&s).ok_or_else(|| {
        serde::de::Error::custom(format!(
            "`{s}` is not a duration: use a positive number with ms, s, m or h (`500ms`, `2s`)"
        ))
    })
}

/// `deserialize_with` for an `Option<Duration>` (with `#[serde(default)]`).
pub fn opt_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    duration(d).map(Some)
}

/// A JSON value as text: a string as it stands, anything else as JSON.
pub fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The record's `field` (or its metadata's, `%rabbitmq.correlation_id`) as text ([`text_of`]);
/// a record without it is a schema error naming
/// the field.
pub fn field_text(v: &Value, field: &str) -> Result<String, SchemaError> {
    rivus_sdk::metadata::field(v, field)
        .map(text_of)
        .ok_or_else(|| SchemaError::new("record", "record", format!("no field `{field}`")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Some(Duration::from_secs(2)));
        assert_eq!(parse_duration("1.5m"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("2"), None);
        assert_eq!(parse_duration("0s"), None);
    }
}
