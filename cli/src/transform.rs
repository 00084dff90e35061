//! The built-in transforms of a pipeline file, compiled into one function over JSON records.
//! A record a transform cannot handle (text that is not JSON) becomes an error record that the
//! sink hands to the error policy, so nothing is dropped silently.

use std::cmp::Ordering;

use serde_json::{Map, Value};

use crate::config::{to_json, CompareOp, TransformConfig};

/// The field that marks an error record.
pub(crate) const ERROR_FIELD: &str = "__rivus_transform_error";

enum Step {
    Filter(String, CompareOp, Value),
    Rename(Vec<(String, String)>),
    Drop(Vec<String>),
    Add(Vec<(String, Value)>),
    ParseJson(String),
}

/// The compiled chain.
pub(crate) struct Transforms {
    steps: Vec<Step>,
}

fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64()?.partial_cmp(&y.as_f64()?),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

pub(crate) fn keep(record: &Map<String, Value>, field: &str, op: CompareOp, value: &Value) -> bool {
    let got = record.get(field);
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

/// An error record carrying `record` and why it failed.
pub(crate) fn error_record(reason: String, record: Value) -> Value {
    let mut m = Map::new();
    m.insert(ERROR_FIELD.into(), Value::String(reason));
    m.insert("record".into(), record);
    Value::Object(m)
}

impl Transforms {
    /// Compiles `configs` (the `key` transform is not a step: it places records).
    pub(crate) fn new(configs: &[TransformConfig]) -> Self {
        let steps = configs
            .iter()
            .filter_map(|t| {
                Some(match t {
                    TransformConfig::Filter { field, op, value } => Step::Filter(
                        field.clone(),
                        *op,
                        value.as_ref().map(to_json).unwrap_or(Value::Null),
                    ),
                    TransformConfig::Rename { fields } => {
                        Step::Rename(fields.iter().map(|(a, b)| (a.clone(), b.clone())).collect())
                    }
                    TransformConfig::Drop { fields } => Step::Drop(fields.clone()),
                    TransformConfig::Add { fields } => Step::Add(
                        fields
                            .iter()
                            .map(|(k, v)| (k.clone(), to_json(v)))
                            .collect(),
                    ),
                    TransformConfig::ParseJson { field } => Step::ParseJson(field.clone()),
                    TransformConfig::Key { .. } => return None,
                })
            })
            .collect();
        Transforms { steps }
    }

    /// True when a step can produce error records.
    pub(crate) fn can_fail(&self) -> bool {
        self.steps.iter().any(|s| matches!(s, Step::ParseJson(_)))
    }

    /// True when there is nothing to do.
    pub(crate) fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// Runs the chain: `None` when a filter drops the record.
    pub(crate) fn apply(&self, record: Value) -> Option<Value> {
        let Value::Object(mut m) = record else {
            return if self.steps.is_empty() {
                Some(record)
            } else {
                Some(error_record(
                    "the record is not a JSON object".into(),
                    record,
                ))
            };
        };
        for step in &self.steps {
            match step {
                Step::Filter(field, op, value) => {
                    if !keep(&m, field, *op, value) {
                        return None;
                    }
                }
                Step::Rename(pairs) => {
                    for (from, to) in pairs {
                        if let Some(v) = m.remove(from) {
                            m.insert(to.clone(), v);
                        }
                    }
                }
                Step::Drop(fields) => fields.iter().for_each(|f| {
                    m.remove(f);
                }),
                Step::Add(fields) => {
                    for (k, v) in fields {
                        m.insert(k.clone(), v.clone());
                    }
                }
                Step::ParseJson(field) => {
                    let parsed = match m.get(field) {
                        Some(Value::String(text)) => serde_json::from_str::<Value>(text)
                            .map_err(|e| format!("field `{field}` is not JSON: {e}")),
                        Some(Value::Null) | None => continue,
                        Some(_) => Err(format!("field `{field}` is not text")),
                    };
                    match parsed {
                        Ok(v) => {
                            m.insert(field.clone(), v);
                        }
                        Err(reason) => return Some(error_record(reason, Value::Object(m))),
                    }
                }
            }
        }
        Some(Value::Object(m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;
    use serde_json::json;

    fn chain(toml: &str) -> Transforms {
        let text = format!(
            "name = \"t\"\n[source]\ntype = \"generator\"\n[sink]\ntype = \"stdout\"\n{toml}"
        );
        let config = parse(&text, &crate::registry::Registry::new()).unwrap();
        match &config.graph.transforms[..] {
            [t] => match &t.kind {
                crate::config::TransformKind::Steps(steps) => Transforms::new(steps),
                crate::config::TransformKind::Route(_) => unreachable!("no router here"),
            },
            _ => Transforms::new(&[]),
        }
    }

    #[test]
    fn filters_renames_drops_and_adds() {
        let t = chain(
            "[[transform]]\ntype = \"filter\"\nfield = \"amount\"\nop = \">=\"\nvalue = 10\n\
             [[transform]]\ntype = \"rename\"\nfields = { user = \"customer\" }\n\
             [[transform]]\ntype = \"drop\"\nfields = [\"secret\"]\n\
             [[transform]]\ntype = \"add\"\nfields = { origin = \"test\" }\n",
        );
        assert_eq!(t.apply(json!({"amount": 3})), None);
        assert_eq!(
            t.apply(json!({"amount": 10.5, "user": "u1", "secret": "x"})),
            Some(json!({"amount": 10.5, "customer": "u1", "origin": "test"}))
        );
    }

    #[test]
    fn text_that_is_not_json_becomes_an_error_record() {
        let t = chain("[[transform]]\ntype = \"parse-json\"\nfield = \"payload\"\n");
        assert_eq!(
            t.apply(json!({"payload": "{\"a\": 1}"})),
            Some(json!({"payload": {"a": 1}}))
        );
        let bad = t.apply(json!({"payload": "{oops"})).unwrap();
        assert!(bad[ERROR_FIELD]
            .as_str()
            .unwrap()
            .contains("field `payload` is not JSON"));
        assert_eq!(bad["record"], json!({"payload": "{oops"}));
    }
}
