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
//!
//! An update that changes a row's key is two records, as Debezium gives it: a delete of the old
//! key and a write of the new one. When the new row lacks values (unchanged TOASTed columns)
//! they are only in the row under the old key, so the two records name each other — the delete
//! carries [`MOVED_TO`] (the new key), the write [`MOVED_FROM`] (the old key) — and read as
//! [`Change::MovedOut`] and a write with `moved_from`: a sink that applies changes does nothing
//! for the first and moves the row at the second (the kept columns taken from the old key's
//! row, which is then deleted); a log (Kafka) writes the first as the delete it is.

use serde_json::{Map, Value};

/// Debezium's placeholder for a value the change did not carry (an unchanged TOASTed column).
pub const UNCHANGED: &str = "__debezium_unavailable_value";

/// The field of a key change's write naming the key the row had (an object of key columns).
pub const MOVED_FROM: &str = "__moved_from";

/// The field of a key change's delete naming the key the row moved to.
pub const MOVED_TO: &str = "__moved_to";

/// What a change record does.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// The row as it is now (inserted, updated, or read by a snapshot).
    Write {
        /// Its columns, without those in `unchanged`.
        row: Map<String, Value>,
        /// Columns the change did not carry, which keep their value (in the row's order).
        unchanged: Vec<String>,
        /// The key the row had, when this write moves it from there (a key change): the
        /// `unchanged` columns are the old key's row's, and that row goes.
        moved_from: Option<Map<String, Value>>,
    },
    /// The row was deleted: its key fields (the whole old row when the source has it).
    Delete(Map<String, Value>),
    /// The row left `key` for `to`; the write of `to` that follows moves it. A sink that
    /// applies changes leaves the row where it is until then; a log writes a delete of `key`.
    MovedOut {
        /// The old key's fields.
        key: Map<String, Value>,
        /// The new key's fields.
        to: Map<String, Value>,
    },
}

impl Change {
    /// A write of every column of `row`.
    pub fn write(row: Map<String, Value>) -> Change {
        Change::Write {
            row,
            unchanged: Vec::new(),
            moved_from: None,
        }
    }

    /// A write of `row`, its [`UNCHANGED`] columns taken out and named.
    fn write_of(mut row: Map<String, Value>, moved_from: Option<Map<String, Value>>) -> Change {
        let unchanged: Vec<String> = row
            .iter()
            .filter(|(_, v)| v.as_str() == Some(UNCHANGED))
            .map(|(k, _)| k.clone())
            .collect();
        for k in &unchanged {
            row.remove(k);
        }
        Change::Write {
            row,
            unchanged,
            moved_from,
        }
    }

    /// A delete of `row`, or the first half of a move when `to` names the new key.
    fn delete_of(row: Map<String, Value>, to: Option<Map<String, Value>>) -> Change {
        match to {
            Some(to) => Change::MovedOut { key: row, to },
            None => Change::Delete(row),
        }
    }

    /// The row (or key) the change names: a write's row, a delete's or a move's old key.
    pub fn row(&self) -> &Map<String, Value> {
        match self {
            Change::Write { row, .. } | Change::Delete(row) => row,
            Change::MovedOut { key, .. } => key,
        }
    }
}

/// The object in `field` of `row`, when there is one (a key change's marker).
fn key_in(row: &Map<String, Value>, field: &str) -> Result<Option<Map<String, Value>>, String> {
    match row.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(k)) => Ok(Some(k.clone())),
        Some(other) => Err(format!("`{field}` is not an object of key fields: {other}")),
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
                    "c" | "u" | "r" => {
                        Ok(Change::write_of(side("after")?, key_in(row, MOVED_FROM)?))
                    }
                    "d" => Ok(Change::delete_of(side("before")?, key_in(row, MOVED_TO)?)),
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
        let (from, to) = (key_in(row, MOVED_FROM)?, key_in(row, MOVED_TO)?);
        let row: Map<String, Value> = row
            .iter()
            .filter(|(k, _)| !["__deleted", "__op", MOVED_FROM, MOVED_TO].contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Ok(if deleted {
            Change::delete_of(row, to)
        } else {
            Change::write_of(row, from)
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
                moved_from: None,
            })
        );
        let envelope = json!({
            "before": null,
            "after": {"id": 1, "a": UNCHANGED, "b": UNCHANGED},
            "op": "u",
            "source": {"table": "t"},
        });
        let Ok(Change::Write { row, unchanged, .. }) = Change::of(&envelope) else {
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
    fn a_key_change_names_both_keys_in_either_shape() {
        let source = json!({"table": "t"});
        let out = json!({"before": {"id": 1}, "after": null, "op": "d", "source": source,
                         (MOVED_TO): {"id": 9}});
        assert_eq!(
            Change::of(&out),
            Ok(Change::MovedOut {
                key: obj(json!({"id": 1})),
                to: obj(json!({"id": 9})),
            })
        );
        let into = json!({"before": null, "after": {"id": 9, "a": UNCHANGED}, "op": "c",
                          "source": source, (MOVED_FROM): {"id": 1}});
        assert_eq!(
            Change::of(&into),
            Ok(Change::Write {
                row: obj(json!({"id": 9})),
                unchanged: vec!["a".into()],
                moved_from: Some(obj(json!({"id": 1}))),
            })
        );
        let flat = json!({"id": 9, "a": UNCHANGED, "__op": "c", "__deleted": false,
                          (MOVED_FROM): {"id": 1}});
        assert_eq!(Change::of(&flat), Change::of(&into));
        let flat = json!({"id": 1, "__op": "d", "__deleted": true, (MOVED_TO): {"id": 9}});
        assert_eq!(Change::of(&flat), Change::of(&out));
        let e = Change::of(&json!({"id": 1, (MOVED_FROM): 3})).unwrap_err();
        assert!(e.contains(MOVED_FROM), "{e}");
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
