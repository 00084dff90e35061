//! Values bound to statements: a table column's [`Class`] decides how a JSON field is
//! converted, so a wrong type is caught before the database sees it and named by column.

use base64::Engine as _;
use serde_json::Value;

/// How a text field becomes the bytes of a binary column (`BYTEA`, `BLOB`, `VARBINARY`).
/// An array of numbers 0-255 is taken as the bytes themselves whatever this says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum BytesText {
    /// The text's own UTF-8 bytes (the default).
    #[default]
    Utf8,
    /// Standard base64 with padding (RFC 4648 §4): what the `avro`, `protobuf` and
    /// `json-schema` formats give for bytes and fixed fields.
    Base64,
    /// Hexadecimal digits, either case, with an optional `\\x` or `0x` prefix.
    Hex,
}

impl BytesText {
    /// The bytes `s` stands for, or what was expected.
    pub fn decode(self, s: &str) -> Result<Vec<u8>, &'static str> {
        match self {
            BytesText::Utf8 => Ok(s.as_bytes().to_vec()),
            BytesText::Base64 => base64::engine::general_purpose::STANDARD
                .decode(s)
                .map_err(|_| "base64 text"),
            BytesText::Hex => {
                let digits = s
                    .strip_prefix("\\x")
                    .or_else(|| s.strip_prefix("0x"))
                    .unwrap_or(s)
                    .as_bytes();
                if !digits.len().is_multiple_of(2) {
                    return Err("hexadecimal text (an even number of digits)");
                }
                digits
                    .chunks(2)
                    .map(|pair| {
                        std::str::from_utf8(pair)
                            .ok()
                            .and_then(|p| u8::from_str_radix(p, 16).ok())
                            .ok_or("hexadecimal text")
                    })
                    .collect()
            }
        }
    }

    /// `bytes` as this text (for dead letters: what comes back converts to the same bytes).
    pub fn encode(self, bytes: &[u8]) -> Value {
        match self {
            BytesText::Utf8 => match std::str::from_utf8(bytes) {
                Ok(s) => Value::from(s),
                // Not text: the numbers themselves, which convert back to the same bytes.
                Err(_) => Value::from(bytes.to_vec()),
            },
            BytesText::Base64 => {
                Value::from(base64::engine::general_purpose::STANDARD.encode(bytes))
            }
            BytesText::Hex => {
                Value::from(bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
            }
        }
    }
}

/// How values of a column are bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Integer types (bound as `i64`).
    Int,
    /// Floating-point types (bound as `f64`).
    Float,
    /// Booleans.
    Bool,
    /// Text and everything the database parses from text (dates, decimals, uuid, json...).
    Text,
    /// Binary strings; text fields are read as the [`BytesText`] says.
    Bytes(BytesText),
    /// No declared type (SQLite): bound by the JSON value's own type.
    Any,
}

/// One bound value; `None` is SQL NULL of the column's type.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
    /// An integer.
    Int(Option<i64>),
    /// A float.
    Float(Option<f64>),
    /// A boolean.
    Bool(Option<bool>),
    /// Text.
    Text(Option<String>),
    /// Bytes, and how they were written as text (to give them back the same way).
    Bytes(Option<Vec<u8>>, BytesText),
}

impl SqlValue {
    /// The null of `class`.
    pub fn null(class: Class) -> Self {
        match class {
            Class::Int => SqlValue::Int(None),
            Class::Float => SqlValue::Float(None),
            Class::Bool => SqlValue::Bool(None),
            Class::Bytes(text) => SqlValue::Bytes(None, text),
            Class::Text | Class::Any => SqlValue::Text(None),
        }
    }

    /// Converts `v` for a column of `class`; the error says what was expected.
    pub fn convert(v: &Value, class: Class) -> Result<Self, String> {
        let wrong = |what: &str| Err(format!("expected {what}, got {}", short(v)));
        Ok(match (class, v) {
            (_, Value::Null) => SqlValue::null(class),
            (Class::Int, Value::Number(n)) => match n.as_i64() {
                Some(i) => SqlValue::Int(Some(i)),
                None => match n.as_f64() {
                    Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => {
                        SqlValue::Int(Some(f as i64))
                    }
                    _ => return wrong("an integer"),
                },
            },
            (Class::Int, Value::Bool(b)) => SqlValue::Int(Some(*b as i64)),
            (Class::Int, Value::String(s)) => match s.trim().parse() {
                Ok(i) => SqlValue::Int(Some(i)),
                Err(_) => return wrong("an integer"),
            },
            (Class::Float, Value::Number(n)) => SqlValue::Float(n.as_f64()),
            (Class::Float, Value::String(s)) => match s.trim().parse() {
                Ok(f) => SqlValue::Float(Some(f)),
                Err(_) => return wrong("a number"),
            },
            (Class::Bool, Value::Bool(b)) => SqlValue::Bool(Some(*b)),
            (Class::Bool, Value::Number(n)) if n.as_i64() == Some(0) || n.as_i64() == Some(1) => {
                SqlValue::Bool(Some(n.as_i64() == Some(1)))
            }
            (Class::Bool, Value::String(s)) => match s.as_str() {
                "true" | "t" | "1" => SqlValue::Bool(Some(true)),
                "false" | "f" | "0" => SqlValue::Bool(Some(false)),
                _ => return wrong("a boolean"),
            },
            (Class::Text, Value::String(s)) => SqlValue::Text(Some(s.clone())),
            (Class::Text, other) => SqlValue::Text(Some(other.to_string())),
            (Class::Bytes(text), Value::String(s)) => match text.decode(s) {
                Ok(b) => SqlValue::Bytes(Some(b), text),
                Err(what) => return wrong(what),
            },
            (Class::Bytes(text), Value::Array(items)) => {
                let bytes: Option<Vec<u8>> = items
                    .iter()
                    .map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
                    .collect();
                match bytes {
                    Some(b) => SqlValue::Bytes(Some(b), text),
                    None => return wrong("a string or an array of bytes"),
                }
            }
            (Class::Any, Value::Bool(b)) => SqlValue::Int(Some(*b as i64)),
            (Class::Any, Value::Number(n)) => match n.as_i64() {
                Some(i) => SqlValue::Int(Some(i)),
                None => SqlValue::Float(n.as_f64()),
            },
            (Class::Any, Value::String(s)) => SqlValue::Text(Some(s.clone())),
            (Class::Any, other) => SqlValue::Text(Some(other.to_string())),
            (Class::Float, _) => return wrong("a number"),
            (Class::Bool, _) => return wrong("a boolean"),
            (Class::Int, _) => return wrong("an integer"),
            (Class::Bytes(_), _) => return wrong("a string or an array of bytes"),
        })
    }

    /// Like [`convert`](SqlValue::convert), taking the value (text is moved, not copied).
    pub fn convert_owned(v: Value, class: Class) -> Result<Self, (String, Value)> {
        match (class, v) {
            (Class::Text | Class::Any, Value::String(s)) => Ok(SqlValue::Text(Some(s))),
            (Class::Bytes(BytesText::Utf8), Value::String(s)) => {
                Ok(SqlValue::Bytes(Some(s.into_bytes()), BytesText::Utf8))
            }
            (class, v) => Self::convert(&v, class).map_err(|e| (e, v)),
        }
    }

    /// Whether `v` converts for a column of `class` (without converting it); the error says
    /// what was expected.
    pub fn check(v: &Value, class: Class) -> Result<(), String> {
        match (class, v) {
            // An integer column takes a number that is not an i64 only if it is whole and in
            // range: the conversion decides.
            (Class::Int, Value::Number(n)) if !n.is_i64() => Self::convert(v, class).map(drop),
            (_, Value::Null)
            | (Class::Text | Class::Any, _)
            | (Class::Bytes(BytesText::Utf8), Value::String(_))
            | (Class::Int | Class::Float, Value::Number(_))
            | (Class::Bool, Value::Bool(_)) => Ok(()),
            _ => Self::convert(v, class).map(drop),
        }
    }

    /// Converts a value [`check`](SqlValue::check) accepted.
    pub fn convert_checked(v: Value, class: Class) -> Self {
        if let (Class::Int | Class::Any, Value::Number(n)) = (class, &v) {
            if let Some(i) = n.as_i64() {
                return SqlValue::Int(Some(i));
            }
        }
        Self::convert_owned(v, class)
            .unwrap_or_else(|(e, _)| unreachable!("a checked value failed to convert: {e}"))
    }

    /// Back to JSON (for dead letters and error messages).
    pub fn to_json(&self) -> Value {
        match self {
            SqlValue::Int(Some(i)) => Value::from(*i),
            SqlValue::Float(Some(f)) => Value::from(*f),
            SqlValue::Bool(Some(b)) => Value::from(*b),
            SqlValue::Text(Some(s)) => Value::from(s.as_str()),
            SqlValue::Bytes(Some(b), text) => text.encode(b),
            _ => Value::Null,
        }
    }

    /// Bytes this value adds to a batch (for the bulk size trigger).
    pub fn size(&self) -> usize {
        match self {
            SqlValue::Text(Some(s)) => s.len() + 4,
            SqlValue::Bytes(Some(b), _) => b.len() + 4,
            _ => 8,
        }
    }
}

/// `v` as JSON, cut to 60 characters.
pub(crate) fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() <= 60 {
        return s;
    }
    let mut end = 57;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::{BytesText, Class, SqlValue};
    use serde_json::json;

    #[test]
    fn conversions_follow_the_column_class() {
        assert_eq!(
            SqlValue::convert(&json!(42), Class::Int),
            Ok(SqlValue::Int(Some(42)))
        );
        assert_eq!(
            SqlValue::convert(&json!("42"), Class::Int),
            Ok(SqlValue::Int(Some(42)))
        );
        assert_eq!(
            SqlValue::convert(&json!(null), Class::Float),
            Ok(SqlValue::Float(None))
        );
        assert_eq!(
            SqlValue::convert(&json!({"a": 1}), Class::Text),
            Ok(SqlValue::Text(Some("{\"a\":1}".into())))
        );
        assert_eq!(
            SqlValue::convert(&json!(1.5), Class::Any),
            Ok(SqlValue::Float(Some(1.5)))
        );
    }

    #[test]
    fn check_agrees_with_convert() {
        let values = [
            json!(null),
            json!(42),
            json!(-1.5),
            json!(2.0),
            json!(1e300),
            json!(true),
            json!("7"),
            json!("t"),
            json!("x"),
            json!("AAEC/w=="),
            json!("00ff"),
            json!("\\x0aFF"),
            json!("0x0"),
            json!([1, 2]),
            json!([300]),
            json!({"a": 1}),
        ];
        for class in [
            Class::Int,
            Class::Float,
            Class::Bool,
            Class::Text,
            Class::Bytes(BytesText::Utf8),
            Class::Bytes(BytesText::Base64),
            Class::Bytes(BytesText::Hex),
            Class::Any,
        ] {
            for v in &values {
                let converted = SqlValue::convert(v, class);
                assert_eq!(
                    SqlValue::check(v, class),
                    converted.clone().map(drop),
                    "{v} as {class:?}"
                );
                if let Ok(converted) = converted {
                    assert_eq!(SqlValue::convert_checked(v.clone(), class), converted);
                }
            }
        }
    }

    #[test]
    fn wrong_types_say_what_was_expected() {
        let e = SqlValue::convert(&json!("abc"), Class::Int).unwrap_err();
        assert_eq!(e, "expected an integer, got \"abc\"");
        let e = SqlValue::convert(&json!(1.5), Class::Int).unwrap_err();
        assert!(e.contains("integer"), "{e}");
        let e = SqlValue::convert(&json!([1, 2]), Class::Bool).unwrap_err();
        assert!(e.contains("boolean"), "{e}");
    }

    #[test]
    fn binary_columns_read_text_as_told_and_give_it_back_the_same_way() {
        let b64 = Class::Bytes(BytesText::Base64);
        let v = SqlValue::convert(&json!("AAEC/w=="), b64).unwrap();
        assert_eq!(
            v,
            SqlValue::Bytes(Some(vec![0, 1, 2, 255]), BytesText::Base64)
        );
        assert_eq!(v.to_json(), json!("AAEC/w=="));
        let e = SqlValue::convert(&json!("not base64!"), b64).unwrap_err();
        assert_eq!(e, "expected base64 text, got \"not base64!\"");

        let hex = Class::Bytes(BytesText::Hex);
        for text in ["00ff7F", "\\x00ff7f", "0x00FF7f"] {
            let v = SqlValue::convert(&json!(text), hex).unwrap();
            assert_eq!(v, SqlValue::Bytes(Some(vec![0, 255, 127]), BytesText::Hex));
            assert_eq!(v.to_json(), json!("00ff7f"));
        }
        assert!(SqlValue::convert(&json!("abc"), hex)
            .unwrap_err()
            .contains("even"));
        assert!(SqlValue::convert(&json!("zz"), hex)
            .unwrap_err()
            .contains("hexadecimal"));

        // Bytes that are not UTF-8 come back as numbers, which convert to the same bytes.
        let utf8 = Class::Bytes(BytesText::Utf8);
        let v = SqlValue::convert(&json!([0, 200, 255]), utf8).unwrap();
        assert_eq!(v.to_json(), json!([0, 200, 255]));
        assert_eq!(SqlValue::convert(&v.to_json(), utf8).unwrap(), v);
        // An array is the bytes themselves whatever the text encoding.
        assert_eq!(
            SqlValue::convert(&json!([1, 2]), b64).unwrap(),
            SqlValue::Bytes(Some(vec![1, 2]), BytesText::Base64)
        );
    }
}
