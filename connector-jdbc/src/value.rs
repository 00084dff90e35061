//! Values bound to statements: a table column's [`Class`] decides how a JSON field is
//! converted, so a wrong type is caught before the database sees it and named by column.

use serde_json::Value;

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
    /// Binary strings.
    Bytes,
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
    /// Bytes.
    Bytes(Option<Vec<u8>>),
}

impl SqlValue {
    /// The null of `class`.
    pub fn null(class: Class) -> Self {
        match class {
            Class::Int => SqlValue::Int(None),
            Class::Float => SqlValue::Float(None),
            Class::Bool => SqlValue::Bool(None),
            Class::Bytes => SqlValue::Bytes(None),
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
            (Class::Bytes, Value::String(s)) => SqlValue::Bytes(Some(s.as_bytes().to_vec())),
            (Class::Bytes, Value::Array(items)) => {
                let bytes: Option<Vec<u8>> = items
                    .iter()
                    .map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
                    .collect();
                match bytes {
                    Some(b) => SqlValue::Bytes(Some(b)),
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
            (Class::Bytes, _) => return wrong("a string or an array of bytes"),
        })
    }

    /// Like [`convert`](SqlValue::convert), taking the value (text is moved, not copied).
    pub fn convert_owned(v: Value, class: Class) -> Result<Self, (String, Value)> {
        match (class, v) {
            (Class::Text | Class::Any, Value::String(s)) => Ok(SqlValue::Text(Some(s))),
            (Class::Bytes, Value::String(s)) => Ok(SqlValue::Bytes(Some(s.into_bytes()))),
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
            | (Class::Bytes, Value::String(_))
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
            SqlValue::Bytes(Some(b)) => Value::from(String::from_utf8_lossy(b).into_owned()),
            _ => Value::Null,
        }
    }

    /// Bytes this value adds to a batch (for the bulk size trigger).
    pub fn size(&self) -> usize {
        match self {
            SqlValue::Text(Some(s)) => s.len() + 4,
            SqlValue::Bytes(Some(b)) => b.len() + 4,
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
    use super::{Class, SqlValue};
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
            json!([1, 2]),
            json!([300]),
            json!({"a": 1}),
        ];
        for class in [
            Class::Int,
            Class::Float,
            Class::Bool,
            Class::Text,
            Class::Bytes,
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
}
