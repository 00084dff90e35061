//! Values as pipeline files write them: durations (`500ms`, `2s`, `1.5m`, `1h`), and a
//! record's field as text (keys, routing keys, correlation ids taken from a JSON record).

use std::time::Duration;

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use rivus_core::schema::SchemaError;

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

/// The record's `field` as text ([`text_of`]); a record without it is a schema error naming
/// the field.
pub fn field_text(v: &Value, field: &str) -> Result<String, SchemaError> {
    v.get(field)
        .map(text_of)
        .ok_or_else(|| SchemaError::new("record", "record", format!("no field `{field}`")))
}

/// `template` with every `{field}` replaced by the record's value of that field
/// (`order:{id}` → `order:7`).
pub fn template(template: &str, v: &Value) -> Result<String, SchemaError> {
    let mut out = String::with_capacity(template.len() + 16);
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let Some(end) = rest[start..].find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        out.push_str(&field_text(v, &rest[start + 1..start + end])?);
        rest = &rest[start + end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Some(Duration::from_secs(2)));
        assert_eq!(parse_duration("1.5m"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("2"), None);
        assert_eq!(parse_duration("0s"), None);
    }

    #[test]
    fn templates_take_fields_from_the_record() {
        let v = json!({"id": 7, "user": "u1"});
        assert_eq!(template("order:{id}:{user}", &v).unwrap(), "order:7:u1");
        let e = template("order:{nope}", &v).unwrap_err();
        assert!(e.to_string().contains("no field `nope`"), "{e}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

        /// Any template over any record: filled in, or refused naming the missing field.
        #[test]
        fn templates_never_panic_and_name_the_missing_field(
            t in "[a-z{}:]{0,30}",
            fields in proptest::collection::btree_map("[a-z]{1,3}", ".{0,8}", 0..4),
        ) {
            let record = Value::Object(fields.iter().map(|(k, v)| (k.clone(), json!(v))).collect());
            match template(&t, &record) {
                Ok(out) => {
                    if !t.contains('{') {
                        proptest::prop_assert_eq!(out, t);
                    }
                }
                Err(e) => {
                    let text = e.to_string();
                    let missing = text
                        .split("no field `")
                        .nth(1)
                        .and_then(|r| r.split('`').next())
                        .unwrap_or_default()
                        .to_owned();
                    proptest::prop_assert!(t.contains(&format!("{{{missing}}}")), "{text}");
                    proptest::prop_assert!(!fields.contains_key(&missing));
                }
            }
        }
    }
}
