//! Values as pipeline files write them: durations (`500ms`, `2s`, `1.5m`, `1h`, read by
//! [`rivus_sdk::options::duration`]), and a record's field as text (keys, routing keys, correlation ids taken from a JSON record).

use serde_json::Value;

use rivus_sdk::schema::SchemaError;

pub use rivus_sdk::options::duration::{duration, opt_duration, parse_duration};

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
    fn a_field_as_text() {
        let v = serde_json::json!({ "id": 7, "name": "a" });
        assert_eq!(field_text(&v, "id").unwrap(), "7");
        assert_eq!(field_text(&v, "name").unwrap(), "a");
        assert!(field_text(&v, "nope")
            .unwrap_err()
            .to_string()
            .contains("nope"));
    }
}
