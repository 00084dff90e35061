//! Change records: a record saying that a row was written or deleted, in either shape a change
//! source gives — flat (`__deleted: true`, `__op`: the row itself) or Debezium's envelope
//! (`op`, `before`, `after`, `source`) — read once here for every sink that applies changes
//! (the SQL sink deletes by key, Kafka writes a tombstone, Elasticsearch deletes by id). A
//! record in neither shape is a write of itself.

use serde_json::{Map, Value};

/// What a change record does.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// The row as it is now (inserted, updated, or read by a snapshot).
    Write(Map<String, Value>),
    /// The row was deleted: its key fields (the whole old row when the source has it).
    Delete(Map<String, Value>),
}

impl Change {
    /// Reads `record`; the error says what is wrong with it.
    pub fn of(record: &Value) -> Result<Change, String> {
        let Value::Object(row) = record else {
            return Err(format!(
                "a change record is a JSON object, got {}",
                kind(record)
            ));
        };
        if let Some(Value::String(op)) = row.get("op") {
            if row.contains_key("source")
                && (row.contains_key("after") || row.contains_key("before"))
            {
                // Only the side that is the row is copied.
                let side = |field: &str| match row.get(field) {
                    Some(Value::Object(r)) => Ok(r.clone()),
                    other => Err(format!(
                        "a change with op `{op}` needs an object in `{field}`, got {}",
                        other.map_or("nothing", kind)
                    )),
                };
                return match op.as_str() {
                    "c" | "u" | "r" => side("after").map(Change::Write),
                    "d" => side("before").map(Change::Delete),
                    other => Err(format!("op `{other}` is not a row change (c, u, r, d)")),
                };
            }
        }
        let deleted = match row.get("__deleted") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(Value::String(s)) if s == "true" || s == "false" => s == "true",
            Some(other) => return Err(format!("`__deleted` is not a boolean: {other}")),
        };
        let row: Map<String, Value> = row
            .iter()
            .filter(|(k, _)| *k != "__deleted" && *k != "__op")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Ok(if deleted {
            Change::Delete(row)
        } else {
            Change::Write(row)
        })
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn flat_and_debezium_records_read_alike() {
        assert_eq!(
            Change::of(&json!({"id": 1, "a": "x", "__op": "u", "__deleted": false})),
            Ok(Change::Write(obj(json!({"id": 1, "a": "x"}))))
        );
        assert_eq!(
            Change::of(&json!({"id": 1, "a": null, "__op": "d", "__deleted": true})),
            Ok(Change::Delete(obj(json!({"id": 1, "a": null}))))
        );
        let source = json!({"table": "t"});
        assert_eq!(
            Change::of(&json!({"before": null, "after": {"id": 2}, "op": "c", "source": source})),
            Ok(Change::Write(obj(json!({"id": 2}))))
        );
        assert_eq!(
            Change::of(&json!({"before": {"id": 2}, "after": null, "op": "d", "source": source})),
            Ok(Change::Delete(obj(json!({"id": 2}))))
        );
        // A plain record is a write of itself; a field named `op` alone does not make an
        // envelope.
        assert_eq!(
            Change::of(&json!({"id": 3, "op": "d"})),
            Ok(Change::Write(obj(json!({"id": 3, "op": "d"}))))
        );
    }

    #[test]
    fn malformed_changes_say_what_is_wrong() {
        let e = Change::of(&json!({"before": null, "after": null, "op": "d", "source": {}}))
            .unwrap_err();
        assert!(e.contains("`before`"), "{e}");
        let e = Change::of(&json!({"after": {}, "op": "t", "source": {}})).unwrap_err();
        assert!(e.contains("op `t`"), "{e}");
        let e = Change::of(&json!([1])).unwrap_err();
        assert!(e.contains("an array"), "{e}");
        let e = Change::of(&json!({"id": 1, "__deleted": 3})).unwrap_err();
        assert!(e.contains("__deleted"), "{e}");
    }
}
