//! The condition of a `filter` transform or of a route: a comparison of one field
//! (`field`, `op`, `value`), or a VRL boolean expression, compiled when the file is read.

use std::cmp::Ordering;
use std::sync::Arc;

use serde_json::Value;

use super::{to_json, CompareOp};
use crate::remap::Program;

/// A compiled condition.
#[derive(Debug, Clone)]
pub(crate) enum Test {
    Compare {
        field: String,
        op: CompareOp,
        value: Value,
    },
    Vrl(Arc<Program>),
}

impl Test {
    /// A comparison; it needs a value unless it is `exists` or `missing`.
    pub(crate) fn compare(
        field: &str,
        op: CompareOp,
        value: Option<&toml::Value>,
        path: &str,
    ) -> Result<Test, String> {
        let needs = !matches!(op, CompareOp::Exists | CompareOp::Missing);
        if needs && value.is_none() {
            return Err(format!("{path}.value: this comparison needs a value"));
        }
        Ok(Test::Compare {
            field: field.to_owned(),
            op,
            value: value.map(to_json).unwrap_or(Value::Null),
        })
    }

    /// A VRL boolean expression; `path` names it in the diagnostics.
    pub(crate) fn vrl(source: &str, path: &str) -> Result<Test, String> {
        crate::remap::condition(source, path)
            .map(|p| Test::Vrl(Arc::new(p)))
            .map_err(|e| format!("{path}: {e}"))
    }

    /// Whether the condition reads the record's metadata (`field = "%kafka.topic"`, or a VRL
    /// expression reading `%`).
    pub(crate) fn reads_metadata(&self) -> bool {
        match self {
            Test::Compare { field, .. } => field.starts_with('%'),
            Test::Vrl(p) => p.reads_metadata(),
        }
    }

    /// Whether `record` meets the condition; an error says why a VRL condition failed.
    pub(crate) fn matches(&self, record: &Value) -> Result<bool, String> {
        match self {
            Test::Compare { field, op, value } => {
                Ok(record.is_object() && keep(record, field, *op, value))
            }
            Test::Vrl(p) => p.test(record),
        }
    }
}

fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64()?.partial_cmp(&y.as_f64()?),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

fn keep(record: &Value, field: &str, op: CompareOp, value: &Value) -> bool {
    let got = rivus_sdk::metadata::field(record, field);
    match op {
        CompareOp::Exists => got.is_some_and(|v| !v.is_null()),
        CompareOp::Missing => got.is_none_or(Value::is_null),
        CompareOp::Eq => got == Some(value),
        CompareOp::Ne => got != Some(value),
        CompareOp::Contains => match (got, value) {
            (Some(Value::String(s)), Value::String(p)) => s.contains(p.as_str()),
            (Some(Value::Array(items)), v) => items.contains(v),
            _ => false,
        },
        CompareOp::Gt | CompareOp::Ge | CompareOp::Lt | CompareOp::Le => {
            let Some(ord) = got.and_then(|g| compare(g, value)) else {
                return false;
            };
            match op {
                CompareOp::Gt => ord == Ordering::Greater,
                CompareOp::Ge => ord != Ordering::Less,
                CompareOp::Lt => ord == Ordering::Less,
                _ => ord != Ordering::Greater,
            }
        }
    }
}
