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
///
/// The temporal classes exist for sinks that apply change records
/// ([`apply_changes`](crate::JdbcSinkBuilder::apply_changes)), which carry Debezium's
/// encodings: a number in a date column is days since 1970-01-01, in a time column
/// microseconds since midnight, in a timestamp column microseconds since the epoch. Other
/// sinks read these columns as [`Class::Text`].
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
    /// A date: text as it is, a number as days since 1970-01-01.
    Date,
    /// A time of day: text as it is, a number as microseconds since midnight.
    Time,
    /// A timestamp: a number as microseconds since the epoch (written
    /// `YYYY-MM-DD HH:MM:SS.ffffff`); text as it is, or with `utc_text` (MySQL/MariaDB,
    /// which read no offsets) RFC 3339 text rewritten as that form in UTC.
    Timestamp {
        /// Rewrite RFC 3339 text as `YYYY-MM-DD HH:MM:SS.ffffff` in UTC.
        utc_text: bool,
    },
    /// A PostgreSQL array: a JSON array becomes an array literal (`{"a","b"}`, nested arrays
    /// nested), its items converted as `Element` says; text is taken as a literal already.
    Array(Element),
}

/// The items of an array column, for [`Class::Array`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Element {
    /// Written as their text (numbers, booleans, text; objects as JSON text).
    Plain,
    /// Dates: numbers as days since 1970-01-01.
    Date,
    /// Times: numbers as microseconds since midnight.
    Time,
    /// Timestamps: numbers as microseconds since the epoch.
    Timestamp,
    /// Binary strings given as base64 text (written as `\x` hex).
    Bytes,
}

impl Class {
    /// The class a sink that does not read change records uses: temporal columns as text,
    /// array items plain.
    pub fn without_change_encodings(self) -> Class {
        match self {
            Class::Date | Class::Time | Class::Timestamp { .. } => Class::Text,
            Class::Array(_) => Class::Array(Element::Plain),
            other => other,
        }
    }

    /// True for the classes bound as text.
    pub fn is_text(self) -> bool {
        matches!(
            self,
            Class::Text
                | Class::Any
                | Class::Date
                | Class::Time
                | Class::Timestamp { .. }
                | Class::Array(_)
        )
    }
}

/// A number of `Debezium`'s temporal encodings as SQL text (`None`: out of range).
fn temporal_text(n: &serde_json::Number, unit: Element) -> Option<String> {
    let i = n.as_i64()?;
    Some(match unit {
        Element::Date => rivus_sdk::calendar::date(i),
        Element::Time => rivus_sdk::calendar::time_of_day(i, 1_000_000, 6),
        Element::Timestamp => {
            rivus_sdk::calendar::instant(i, 1_000_000, 6, false).replacen('T', " ", 1)
        }
        Element::Plain | Element::Bytes => n.to_string(),
    })
}

/// RFC 3339 text as `YYYY-MM-DD HH:MM:SS.ffffff` in UTC; other text as it is.
fn utc_sql_text(s: &str) -> String {
    let looks_rfc3339 = s.len() > 10 && matches!(s.as_bytes()[10], b'T' | b't')
        || s.ends_with(['Z', 'z'])
        || s.get(19..).is_some_and(|rest| rest.contains(['+', '-']));
    match looks_rfc3339
        .then(|| rivus_sdk::calendar::parse_instant(s, 1_000_000))
        .flatten()
    {
        Some(us) => rivus_sdk::calendar::instant(us, 1_000_000, 6, false).replacen('T', " ", 1),
        None => s.to_owned(),
    }
}

/// `v` as a PostgreSQL array literal, its items converted as `element` says.
fn array_literal(v: &Value, element: Element) -> Result<String, String> {
    fn item(out: &mut String, v: &Value, element: Element) -> Result<(), String> {
        let text = match v {
            Value::Null => {
                out.push_str("NULL");
                return Ok(());
            }
            Value::Array(items) => {
                out.push('{');
                for (i, x) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item(out, x, element)?;
                }
                out.push('}');
                return Ok(());
            }
            Value::Number(n) => match element {
                Element::Date | Element::Time | Element::Timestamp => temporal_text(n, element)
                    .ok_or_else(|| format!("expected a {element:?} item, got {n}"))?,
                _ => n.to_string(),
            },
            Value::String(s) if element == Element::Bytes => {
                let bytes = BytesText::Base64
                    .decode(s)
                    .map_err(|what| format!("expected {what} items, got {}", short(v)))?;
                let mut hex = String::from("\\x");
                for b in bytes {
                    hex.push_str(&format!("{b:02x}"));
                }
                hex
            }
            Value::String(s) => s.clone(),
            Value::Bool(b) => b.to_string(),
            Value::Object(_) => v.to_string(),
        };
        out.push('"');
        for c in text.chars() {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
        out.push('"');
        Ok(())
    }
    let mut out = String::new();
    item(&mut out, v, element)?;
    Ok(out)
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
            Class::Text
            | Class::Any
            | Class::Date
            | Class::Time
            | Class::Timestamp { .. }
            | Class::Array(_) => SqlValue::Text(None),
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
            (Class::Date, Value::Number(n)) => match temporal_text(n, Element::Date) {
                Some(t) => SqlValue::Text(Some(t)),
                None => return wrong("a date (text, or days since 1970-01-01)"),
            },
            (Class::Time, Value::Number(n)) => match temporal_text(n, Element::Time) {
                Some(t) => SqlValue::Text(Some(t)),
                None => return wrong("a time (text, or microseconds since midnight)"),
            },
            (Class::Timestamp { .. }, Value::Number(n)) => {
                match temporal_text(n, Element::Timestamp) {
                    Some(t) => SqlValue::Text(Some(t)),
                    None => return wrong("a timestamp (text, or microseconds since the epoch)"),
                }
            }
            (
                Class::Date | Class::Time | Class::Timestamp { utc_text: false },
                Value::String(s),
            ) => SqlValue::Text(Some(s.clone())),
            (Class::Timestamp { utc_text: true }, Value::String(s)) => {
                SqlValue::Text(Some(utc_sql_text(s)))
            }
            (Class::Date, _) => return wrong("a date (text, or days since 1970-01-01)"),
            (Class::Time, _) => return wrong("a time (text, or microseconds since midnight)"),
            (Class::Timestamp { .. }, _) => {
                return wrong("a timestamp (text, or microseconds since the epoch)")
            }
            (Class::Array(_), Value::String(s)) => SqlValue::Text(Some(s.clone())),
            (Class::Array(element), Value::Array(_)) => {
                SqlValue::Text(Some(array_literal(v, element)?))
            }
            (Class::Array(_), _) => return wrong("an array (or an array literal as text)"),
            (Class::Float, _) => return wrong("a number"),
            (Class::Bool, _) => return wrong("a boolean"),
            (Class::Int, _) => return wrong("an integer"),
            (Class::Bytes(_), _) => return wrong("a string or an array of bytes"),
        })
    }

    /// Like [`convert`](SqlValue::convert), taking the value (text is moved, not copied).
    pub fn convert_owned(v: Value, class: Class) -> Result<Self, (String, Value)> {
        match (class, v) {
            (
                Class::Text
                | Class::Any
                | Class::Date
                | Class::Time
                | Class::Timestamp { utc_text: false }
                | Class::Array(_),
                Value::String(s),
            ) => Ok(SqlValue::Text(Some(s))),
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
            | (
                Class::Date | Class::Time | Class::Timestamp { utc_text: false },
                Value::String(_),
            )
            | (Class::Array(_), Value::String(_))
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

    /// Appends an encoding of this value that equals another's exactly when the values are
    /// equal (for finding a key again within a batch).
    pub(crate) fn key_bytes(&self, out: &mut Vec<u8>) {
        let mut put = |tag: u8, bytes: &[u8]| {
            out.push(tag);
            out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            out.extend_from_slice(bytes);
        };
        match self {
            SqlValue::Int(Some(i)) => put(1, &i.to_le_bytes()),
            SqlValue::Float(Some(f)) => put(2, &f.to_bits().to_le_bytes()),
            SqlValue::Bool(Some(b)) => put(3, &[*b as u8]),
            SqlValue::Text(Some(s)) => put(4, s.as_bytes()),
            SqlValue::Bytes(Some(b), _) => put(5, b),
            _ => put(0, &[]),
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
            Class::Date,
            Class::Time,
            Class::Timestamp { utc_text: false },
            Class::Timestamp { utc_text: true },
            Class::Array(super::Element::Plain),
            Class::Array(super::Element::Date),
            Class::Array(super::Element::Bytes),
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
    fn change_records_temporal_numbers_and_arrays_become_sql_text() {
        use super::Element;
        let text = |v: Value, class: Class| match SqlValue::convert(&v, class) {
            Ok(SqlValue::Text(Some(t))) => t,
            other => panic!("{v} as {class:?}: {other:?}"),
        };
        use serde_json::Value;
        assert_eq!(text(json!(19_723), Class::Date), "2024-01-01");
        assert_eq!(
            text(json!(3_723_500_000i64), Class::Time),
            "01:02:03.500000"
        );
        let ts = Class::Timestamp { utc_text: false };
        assert_eq!(text(json!(1_250_000), ts), "1970-01-01 00:00:01.250000");
        assert_eq!(
            text(json!("2024-03-01T10:00:00Z"), ts),
            "2024-03-01T10:00:00Z"
        );
        let mysql = Class::Timestamp { utc_text: true };
        assert_eq!(
            text(json!("2024-03-01T12:00:00.5+02:00"), mysql),
            "2024-03-01 10:00:00.500000"
        );
        assert_eq!(
            text(json!("2024-03-01 10:00:00"), mysql),
            "2024-03-01 10:00:00"
        );
        let plain = Class::Array(Element::Plain);
        assert_eq!(
            text(json!(["a", "b c", "d\"e\\", null]), plain),
            r#"{"a","b c","d\"e\\",NULL}"#
        );
        assert_eq!(
            text(json!([[1, 2], [3, 4]]), plain),
            r#"{{"1","2"},{"3","4"}}"#
        );
        assert_eq!(text(json!([]), plain), "{}");
        assert_eq!(text(json!([{"a": 1}]), plain), r#"{"{\"a\":1}"}"#);
        assert_eq!(text(json!("{x,y}"), plain), "{x,y}");
        assert_eq!(
            text(json!([19_723, null]), Class::Array(Element::Date)),
            r#"{"2024-01-01",NULL}"#
        );
        assert_eq!(
            text(json!(["AP8="]), Class::Array(Element::Bytes)),
            r#"{"\\x00ff"}"#
        );
        let e = SqlValue::convert(&json!({"a": 1}), plain).unwrap_err();
        assert!(e.contains("an array"), "{e}");
        let e = SqlValue::convert(&json!(true), Class::Date).unwrap_err();
        assert!(e.contains("a date"), "{e}");
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
