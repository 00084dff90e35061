//! Durations as pipeline files write them: `500ms`, `2s`, `1.5m`, `1h`.

use std::borrow::Cow;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

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

/// A duration as a file would write it: `1s`, `200ms`, `5m`.
pub fn written(d: Duration) -> String {
    let ms = d.as_millis();
    match ms {
        ms if ms % 60_000 == 0 && ms > 0 => format!("{}m", ms / 60_000),
        ms if ms % 1000 == 0 => format!("{}s", ms / 1000),
        ms => format!("{ms}ms"),
    }
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

/// A duration as pipeline files write it, for fields read with [`duration`]:
/// `#[schemars(with = "DurationText")]`.
pub struct DurationText;

impl schemars::JsonSchema for DurationText {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^[0-9]+(\\.[0-9]+)?\\s*(ms|s|m|h)$",
            "description": "a positive duration: a number with ms, s, m or h (`500ms`, `2s`)"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_and_written() {
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Some(Duration::from_secs(2)));
        assert_eq!(parse_duration("1.5m"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("2"), None);
        assert_eq!(parse_duration("0s"), None);
        for d in ["200ms", "1s", "5m", "90s"] {
            assert_eq!(written(parse_duration(d).unwrap()), d);
        }
    }
}
