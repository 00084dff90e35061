//! Records and VRL values. JSON → VRL keeps every value: numbers that fit an `i64` become
//! integers, other numbers floats (an integer above `i64::MAX` becomes a float, as VRL has no
//! wider integer), text becomes VRL strings. VRL → JSON: timestamps become RFC 3339 text in UTC
//! (`2026-12-06T10:00:00.123Z`), regular expressions their pattern; bytes that are not UTF-8
//! cannot be JSON text and are an error naming the field, never replaced.

use serde_json::Value as Json;
use vrl::value::{KeyString, Value as Vrl};

/// A record as a VRL value.
pub(crate) fn to_vrl(v: Json) -> Vrl {
    match v {
        Json::Null => Vrl::Null,
        Json::Bool(b) => Vrl::Boolean(b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Vrl::Integer(i),
            // JSON has no NaN: nothing becomes the zero this falls back to.
            None => Vrl::from_f64_or_zero(n.as_f64().unwrap_or_default()),
        },
        Json::String(s) => Vrl::from(s),
        Json::Array(items) => Vrl::Array(items.into_iter().map(to_vrl).collect()),
        Json::Object(m) => Vrl::Object(
            m.into_iter()
                .map(|(k, v)| (KeyString::from(k), to_vrl(v)))
                .collect(),
        ),
    }
}

/// A record as a VRL value, the record kept (its text copied).
pub(crate) fn to_vrl_ref(v: &Json) -> Vrl {
    match v {
        Json::String(s) => Vrl::from(s.as_str()),
        Json::Array(items) => Vrl::Array(items.iter().map(to_vrl_ref).collect()),
        Json::Object(m) => Vrl::Object(
            m.iter()
                .map(|(k, v)| (KeyString::from(k.as_str()), to_vrl_ref(v)))
                .collect(),
        ),
        Json::Null => Vrl::Null,
        Json::Bool(b) => Vrl::Boolean(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Vrl::Integer(i),
            None => Vrl::from_f64_or_zero(n.as_f64().unwrap_or_default()),
        },
    }
}

/// A VRL value as a record; an error names the path of a value JSON cannot hold. (By
/// reference: its text is copied either way, as VRL keeps it in shared buffers.)
pub(crate) fn from_vrl(v: &Vrl) -> Result<Json, String> {
    to_json(v).map_err(|bad| {
        let path: String = bad.path.iter().rev().map(String::as_str).collect();
        format!(
            "`{}` holds {} bytes that are not UTF-8 text, which a JSON record cannot hold \
             (encode them, e.g. with encode_base64)",
            if path.is_empty() { "." } else { &path },
            bad.len
        )
    })
}

/// Bytes JSON cannot hold: how many, and where (the path's segments, innermost first —
/// built only on the way out of an error, never for a record that converts).
struct NotText {
    len: usize,
    path: Vec<String>,
}

fn to_json(v: &Vrl) -> Result<Json, NotText> {
    Ok(match v {
        Vrl::Null => Json::Null,
        Vrl::Boolean(b) => Json::Bool(*b),
        Vrl::Integer(i) => Json::from(*i),
        Vrl::Float(f) => {
            serde_json::Number::from_f64(f.into_inner()).map_or(Json::Null, Json::Number)
        }
        Vrl::String(s) => Json::String(s.to_string()),
        Vrl::Bytes(b) => match std::str::from_utf8(b) {
            Ok(text) => Json::String(text.to_owned()),
            Err(_) => {
                return Err(NotText {
                    len: b.len(),
                    path: Vec::new(),
                })
            }
        },
        Vrl::Regex(r) => Json::String(r.as_str().to_owned()),
        Vrl::Timestamp(t) => Json::String(vrl::value::value::timestamp_to_string(t)),
        Vrl::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                out.push(to_json(item).map_err(|mut e| {
                    e.path.push(format!("[{i}]"));
                    e
                })?);
            }
            Json::Array(out)
        }
        Vrl::Object(m) => {
            let mut out = serde_json::Map::new();
            for (k, v) in m {
                let v = to_json(v).map_err(|mut e| {
                    e.path.push(format!(".{}", k.as_str()));
                    e
                })?;
                out.insert(k.as_str().to_owned(), v);
            }
            Json::Object(out)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_json_value_comes_back_as_it_went() {
        let v = json!({
            "int": -42, "big": 9_007_199_254_740_993_i64, "float": 12.5, "text": "é ✓",
            "yes": true, "none": null, "list": [1, "two", [3.25], {"four": 4}],
            "nested": {"a": {"b": "c"}}, "decimal": "12345678901234567890.0123456789",
        });
        assert_eq!(from_vrl(&to_vrl(v.clone())).unwrap(), v);
        assert_eq!(from_vrl(&to_vrl_ref(&v)).unwrap(), v);
    }

    #[test]
    fn bytes_that_are_not_text_are_refused_by_path() {
        let bad = Vrl::Object(
            [(
                "a".into(),
                Vrl::Array(vec![Vrl::Null, Vrl::Bytes(vec![0xff, 0xfe].into())]),
            )]
            .into_iter()
            .collect(),
        );
        let e = from_vrl(&bad).unwrap_err();
        assert!(e.contains("`.a[1]`") && e.contains("2 bytes"), "{e}");
    }
}
