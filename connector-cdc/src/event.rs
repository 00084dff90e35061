//! Change events: a row change as Debezium's envelope (`before`, `after`, `op`, `ts_ms`,
//! `source`) or flattened (the row after the change plus `__op` and `__deleted`), built from
//! the stream's relations and tuples or from a snapshot row.

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use crate::lsn::Lsn;
use crate::pgoutput::{Datum, Relation};
use crate::value;

/// What a TOAST-ed value the change did not touch becomes (it is not in the WAL record):
/// Debezium's placeholder, which every sink that applies changes reads as "leave this column
/// as it is" ([`rivus_sdk::change::Change`]). A table with `REPLICA IDENTITY FULL` has its
/// old row in each update, and the value is taken from there instead.
pub use rivus_sdk::change::UNCHANGED as UNCHANGED_TOAST;

/// The shape of emitted records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Envelope {
    /// Debezium's envelope.
    #[default]
    Debezium,
    /// The row after the change (before it, for a delete) with `__op` and `__deleted`.
    Flat,
}

/// What changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Inserted (`c`).
    Create,
    /// Updated (`u`).
    Update,
    /// Deleted (`d`).
    Delete,
    /// Read by the snapshot (`r`).
    Read,
}

impl Op {
    fn code(self) -> &'static str {
        match self {
            Op::Create => "c",
            Op::Update => "u",
            Op::Delete => "d",
            Op::Read => "r",
        }
    }
}

/// Where a change comes from, for the envelope's `source` block.
#[derive(Debug, Clone)]
pub(crate) struct Origin<'a> {
    /// The database.
    pub db: &'a str,
    /// The commit position (the snapshot's, for snapshot rows).
    pub lsn: Lsn,
    /// The transaction id (0 for snapshot rows).
    pub xid: u32,
    /// Commit time (ms since the epoch).
    pub ts_ms: i64,
    /// `"true"`, `"last"` or `"false"` (Debezium's snapshot marker).
    pub snapshot: &'static str,
}

/// A row of `rel` as a JSON object (columns in order).
pub(crate) fn row(rel: &Relation, datums: &[Datum]) -> Map<String, Value> {
    rel.columns
        .iter()
        .zip(datums)
        .map(|(c, d)| {
            let v = match d {
                Datum::Null => Value::Null,
                Datum::Unchanged => Value::String(UNCHANGED_TOAST.to_owned()),
                Datum::Text(t) => value::to_json(c.type_oid, t),
            };
            (c.name.clone(), v)
        })
        .collect()
}

/// The key columns (the replica identity's) of `datums`, a row of `rel`.
pub(crate) fn key(rel: &Relation, datums: &[Datum]) -> Map<String, Value> {
    let mut r = row(rel, datums);
    for c in rel.columns.iter().filter(|c| !c.key) {
        r.remove(&c.name);
    }
    r
}

/// The record of one change; `types`: the table's columns (`crate::types`), carried by a
/// Debezium envelope as `columns` when given.
pub(crate) fn record(
    envelope: Envelope,
    op: Op,
    (schema, table): (&str, &str),
    before: Option<Map<String, Value>>,
    after: Option<Map<String, Value>>,
    origin: &Origin<'_>,
    types: Option<&Value>,
) -> Value {
    match envelope {
        Envelope::Debezium => {
            let mut v = debezium(op, (schema, table), before, after, origin);
            if let (Some(t), Value::Object(m)) = (types, &mut v) {
                m.insert("columns".into(), t.clone());
            }
            v
        }
        Envelope::Flat => {
            let deleted = op == Op::Delete;
            let mut row = if deleted { before } else { after }.unwrap_or_default();
            row.insert("__op".into(), Value::from(op.code()));
            row.insert("__deleted".into(), Value::Bool(deleted));
            Value::Object(row)
        }
    }
}

fn debezium(
    op: Op,
    (schema, table): (&str, &str),
    before: Option<Map<String, Value>>,
    after: Option<Map<String, Value>>,
    origin: &Origin<'_>,
) -> Value {
    {
        json!({
            "before": before,
            "after": after,
            "source": {
                "connector": "postgresql",
                "db": origin.db,
                "schema": schema,
                "table": table,
                "lsn": origin.lsn.0,
                "txId": origin.xid,
                "ts_ms": origin.ts_ms,
                "snapshot": origin.snapshot,
            },
            "op": op.code(),
            "ts_ms": rivus_sdk::calendar::now_ms(),
        })
    }
}

/// The relations seen so far in a stream, by oid.
pub(crate) type Relations = HashMap<u32, Relation>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pgoutput::Column;
    use bytes::Bytes;

    fn rel() -> Relation {
        Relation {
            oid: 1,
            schema: "public".into(),
            name: "t".into(),
            replica_identity: b'd',
            columns: vec![
                Column {
                    key: true,
                    name: "id".into(),
                    type_oid: 23,
                    type_mod: -1,
                },
                Column {
                    key: false,
                    name: "body".into(),
                    type_oid: 25,
                    type_mod: -1,
                },
            ],
            types: Value::Null,
        }
    }

    #[test]
    fn unchanged_toast_values_are_marked_never_nulled() {
        let r = row(
            &rel(),
            &[Datum::Text(Bytes::from_static(b"7")), Datum::Unchanged],
        );
        assert_eq!(Value::Object(r), json!({"id": 7, "body": UNCHANGED_TOAST}));
    }

    #[test]
    fn flat_records_carry_the_operation() {
        let origin = Origin {
            db: "d",
            lsn: Lsn(5),
            xid: 9,
            ts_ms: 1,
            snapshot: "false",
        };
        let before = row(
            &rel(),
            &[Datum::Text(Bytes::from_static(b"7")), Datum::Null],
        );
        let v = record(
            Envelope::Flat,
            Op::Delete,
            ("public", "t"),
            Some(before.clone()),
            None,
            &origin,
            None,
        );
        assert_eq!(
            v,
            json!({"id": 7, "body": null, "__op": "d", "__deleted": true})
        );
        let v = record(
            Envelope::Debezium,
            Op::Delete,
            ("public", "t"),
            Some(before),
            None,
            &origin,
            Some(&json!([{"name": "id", "type": "integer", "key": true}])),
        );
        assert_eq!(v["columns"][0]["type"], "integer");
        assert_eq!(v["op"], "d");
        assert_eq!(v["after"], Value::Null);
        assert_eq!(v["source"]["lsn"], 5);
        assert_eq!(v["source"]["table"], "t");
    }
}
