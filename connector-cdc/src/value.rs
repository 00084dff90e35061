//! Column values as JSON, from PostgreSQL's text form by the column's type, the way Debezium
//! maps them by default (with `decimal.handling.mode = string`):
//!
//! | PostgreSQL | JSON |
//! |---|---|
//! | `smallint`, `integer`, `bigint`, `oid` | number |
//! | `real`, `double precision` | number (`"NaN"`, `"Infinity"`, `"-Infinity"` as text) |
//! | `numeric` | text with every digit (`"12.30"`) |
//! | `boolean` | `true` / `false` |
//! | `date` | days since 1970-01-01 (`io.debezium.time.Date`) |
//! | `time` | microseconds since midnight (`MicroTime`) |
//! | `timestamp` | microseconds since the epoch (`MicroTimestamp`) |
//! | `timestamptz` | RFC 3339 text in UTC, `"2024-03-01T10:00:00.123456Z"` (`ZonedTimestamp`) |
//! | `bytea` | base64 text |
//! | `json`, `jsonb`, `uuid`, `text`, `varchar`, enums, everything else | text |
//! | one-dimensional arrays of the above | arrays |
//!
//! Infinite dates and timestamps, and values outside the ranges above, stay text.

use base64::Engine as _;
use rivus_sdk::calendar;
use serde_json::Value;

/// `text` of a column of type `oid` as JSON.
pub(crate) fn to_json(oid: u32, text: &[u8]) -> Value {
    let s = String::from_utf8_lossy(text);
    // Arrays of the text types come as arrays of text (their element types have no scalar).
    match crate::types::array_element(oid) {
        Some(elem) => match parse_array(&s) {
            Some(items) => Value::Array(
                items
                    .into_iter()
                    .map(|i| match i {
                        Some(t) => to_json(elem, t.as_bytes()),
                        None => Value::Null,
                    })
                    .collect(),
            ),
            None => Value::String(s.into_owned()),
        },
        None => scalar(oid, &s).unwrap_or_else(|| Value::String(s.into_owned())),
    }
}

fn scalar(oid: u32, s: &str) -> Option<Value> {
    Some(match oid {
        16 => Value::Bool(s == "t"),
        20 | 21 | 23 | 26 => Value::from(s.parse::<i64>().ok()?),
        700 | 701 => {
            let f: f64 = s.parse().ok()?;
            if !f.is_finite() {
                return None;
            }
            Value::from(f)
        }
        17 => {
            let hex = s.strip_prefix("\\x")?;
            let bytes: Option<Vec<u8>> = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
                .collect();
            Value::String(base64::engine::general_purpose::STANDARD.encode(bytes?))
        }
        1082 => Value::from(calendar::parse_date(s)?),
        1083 => Value::from(calendar::parse_time(s, 1_000_000)?),
        1114 => Value::from(calendar::parse_instant(s, 1_000_000)?),
        1184 => Value::String(calendar::instant(
            calendar::parse_instant(s, 1_000_000)?,
            1_000_000,
            6,
            true,
        )),
        _ => return None,
    })
}

/// A one-dimensional array literal (`{1,NULL,"a b","c\"d"}`); `None` for anything else.
fn parse_array(s: &str) -> Option<Vec<Option<String>>> {
    let inner = s.strip_prefix('{')?.strip_suffix('}')?;
    let mut items = Vec::new();
    if inner.is_empty() {
        return Some(items);
    }
    let mut chars = inner.chars().peekable();
    loop {
        if chars.peek() == Some(&'"') {
            chars.next();
            let mut item = String::new();
            loop {
                match chars.next()? {
                    '\\' => item.push(chars.next()?),
                    '"' => break,
                    c => item.push(c),
                }
            }
            items.push(Some(item));
        } else {
            let mut item = String::new();
            while let Some(&c) = chars.peek() {
                if c == ',' {
                    break;
                }
                if c == '{' {
                    return None; // more than one dimension
                }
                item.push(c);
                chars.next();
            }
            items.push((item != "NULL").then_some(item));
        }
        match chars.next() {
            Some(',') => continue,
            None => return Some(items),
            Some(_) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_map_like_debezium() {
        assert_eq!(to_json(23, b"42"), json!(42));
        assert_eq!(to_json(1700, b"12.30"), json!("12.30"));
        assert_eq!(to_json(16, b"t"), json!(true));
        assert_eq!(to_json(701, b"NaN"), json!("NaN"));
        assert_eq!(to_json(1082, b"2024-01-01"), json!(19_723));
        assert_eq!(to_json(1082, b"infinity"), json!("infinity"));
        assert_eq!(to_json(1083, b"01:02:03.5"), json!(3_723_500_000i64));
        assert_eq!(to_json(1114, b"1970-01-01 00:00:01.25"), json!(1_250_000));
        assert_eq!(
            to_json(1184, b"2024-03-01 12:00:00.5+02"),
            json!("2024-03-01T10:00:00.500000Z")
        );
        assert_eq!(to_json(17, b"\\x00ff"), json!("AP8="));
        assert_eq!(to_json(3802, br#"{"a": 1}"#), json!(r#"{"a": 1}"#));
        assert_eq!(to_json(1007, b"{1,NULL,3}"), json!([1, null, 3]));
        assert_eq!(
            to_json(1009, br#"{a,"b c","d\"e",NULL}"#),
            json!(["a", "b c", "d\"e", null])
        );
        assert_eq!(to_json(1007, b"{{1,2},{3,4}}"), json!("{{1,2},{3,4}}"));
        assert_eq!(to_json(1007, b"{}"), json!([]));
    }
}
