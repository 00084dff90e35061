//! Change records: a record saying that a row was written or deleted, in either shape a change
//! source gives — flat (`__deleted: true`, `__op`: the row itself) or Debezium's envelope
//! (`op`, `before`, `after`, `source`) — read once here for every sink that applies changes
//! (the SQL sink deletes by key, Kafka writes a tombstone, Elasticsearch deletes by id). A
//! record in neither shape is a write of itself.
//!
//! A write may leave columns out: PostgreSQL does not send a value stored out of line (TOAST)
//! that an UPDATE did not touch, and a change source marks it with Debezium's placeholder
//! [`UNCHANGED`]. Such columns are taken out of the row and named in
//! [`Change::Write::unchanged`]: a sink updates the other columns and leaves these as they
//! are (the SQL sink's upsert names only the columns it has, Elasticsearch updates the
//! document partially); writing the placeholder would overwrite the real value.

use serde_json::{Map, Value};

/// Debezium's placeholder for a value the change did not carry (an unchanged TOASTed column).
pub const UNCHANGED: &str = "__debezium_unavailable_value";

/// What a change record does.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// The row as it is now (inserted, updated, or read by a snapshot).
    Write {
        /// Its columns, without those in `unchanged`.
        row: Map<String, Value>,
        /// Columns the change did not carry, which keep their value (in the row's order).
        unchanged: Vec<String>,
    },
    /// The row was deleted: its key fields (the whole old row when the source has it).
    Delete(Map<String, Value>),
}

impl Change {
    /// A write of every column of `row`.
    pub fn write(row: Map<String, Value>) -> Change {
        Change::Write {
            row,
            unchanged: Vec::new(),
        }
    }

    /// A write of `row`, its [`UNCHANGED`] columns taken out and named.
    fn write_of(mut row: Map<String, Value>) -> Change {
        let unchanged: Vec<String> = row
            .iter()
            .filter(|(_, v)| v.as_str() == Some(UNCHANGED))
            .map(|(k, _)| k.clone())
            .collect();
        for k in &unchanged {
            row.remove(k);
        }
        Change::Write { row, unchanged }
    }
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
                    "c" | "u" | "r" => side("after").map(Change::write_of),
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
            Change::write_of(row)
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
            Ok(Change::write(obj(json!({"id": 1, "a": "x"}))))
        );
        assert_eq!(
            Change::of(&json!({"id": 1, "a": null, "__op": "d", "__deleted": true})),
            Ok(Change::Delete(obj(json!({"id": 1, "a": null}))))
        );
        let source = json!({"table": "t"});
        assert_eq!(
            Change::of(&json!({"before": null, "after": {"id": 2}, "op": "c", "source": source})),
            Ok(Change::write(obj(json!({"id": 2}))))
        );
        assert_eq!(
            Change::of(&json!({"before": {"id": 2}, "after": null, "op": "d", "source": source})),
            Ok(Change::Delete(obj(json!({"id": 2}))))
        );
        // A plain record is a write of itself; a field named `op` alone does not make an
        // envelope.
        assert_eq!(
            Change::of(&json!({"id": 3, "op": "d"})),
            Ok(Change::write(obj(json!({"id": 3, "op": "d"}))))
        );
    }

    #[test]
    fn unchanged_columns_leave_the_row_and_are_named() {
        let flat = json!({"id": 1, "body": UNCHANGED, "n": 2, "__op": "u", "__deleted": false});
        assert_eq!(
            Change::of(&flat),
            Ok(Change::Write {
                row: obj(json!({"id": 1, "n": 2})),
                unchanged: vec!["body".into()],
            })
        );
        let envelope = json!({
            "before": null,
            "after": {"id": 1, "a": UNCHANGED, "b": UNCHANGED},
            "op": "u",
            "source": {"table": "t"},
        });
        let Ok(Change::Write { row, unchanged }) = Change::of(&envelope) else {
            panic!("a write");
        };
        assert_eq!(row, obj(json!({"id": 1})));
        assert_eq!(unchanged, vec!["a".to_owned(), "b".to_owned()]);
        // A delete keeps what it has: its key is what matters.
        assert_eq!(
            Change::of(&json!({"id": 1, "body": UNCHANGED, "__deleted": true})),
            Ok(Change::Delete(obj(json!({"id": 1, "body": UNCHANGED}))))
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
