//! Whether a streamed change is already in the snapshot's rows: the change's key is placed in
//! the key ranges of the snapshot's progress by the database itself (a row comparison cast to
//! the key columns' types and collations — exactly the order the snapshot read the table in),
//! over a connection of its own, asked only for changes older than a table's newest snapshot.
//! A key change whose halves fall apart in the snapshot is mended here too (`mend_move`).

use std::collections::HashMap;

use bytes::Bytes;
use serde_json::Value;

use rivus_sdk::runtime::SourceContext;
use rivus_sdk::Result;

use super::changes::Step;
use super::progress::{TableProgress, Upto};
use super::slot::{ident, literal};
use super::{CdcState, Settings};
use crate::error::wire_error;
use crate::event;
use crate::lsn::Lsn;
use crate::pgoutput::{Datum, Relation};
use crate::wire::Connection;

/// Compares keys in a table's order, on a connection opened at the first question.
#[derive(Default)]
pub(crate) struct KeyOrder {
    conn: Option<Connection>,
    /// Per table, each key column as `CAST(… AS type) COLLATE …` pieces: (type, collation).
    types: HashMap<String, Vec<(String, Option<String>)>>,
}

impl KeyOrder {
    /// Whether the change with key `key` (the text of each key column) committed at `commit`
    /// is new to the snapshot of `t`: older than the watermark of the range holding the key
    /// means the snapshot's row shows it already.
    pub(crate) async fn is_new(
        &mut self,
        s: &Settings,
        t: &TableProgress,
        key: &[String],
        commit: Lsn,
    ) -> Result<bool> {
        if commit >= t.newest() {
            return Ok(true);
        }
        // The first range whose end is at or past the key holds it.
        for r in &t.ranges {
            match &r.upto {
                Upto::Nothing => continue,
                Upto::End => return Ok(commit >= r.watermark),
                Upto::Key(end) => {
                    if self.at_or_before(s, t, key, end).await? {
                        return Ok(commit >= r.watermark);
                    }
                }
            }
        }
        // Past the last key read (the table's snapshot unfinished): not in it.
        Ok(true)
    }

    /// The key columns of `schema.table`: those named in `key_columns`, else its primary key
    /// (none without one). For a table whose replica identity is `FULL`, whose relation
    /// messages mark every column as part of the identity.
    pub(crate) async fn primary_key(
        &mut self,
        s: &Settings,
        schema: &str,
        table: &str,
    ) -> Result<Vec<String>> {
        if let Some(cols) = s.key_columns.get(&format!("{schema}.{table}")) {
            return Ok(cols.clone());
        }
        let conn = self.connection(s).await?;
        let qualified = literal(&format!("{}.{}", ident(schema), ident(table)));
        let rows = conn
            .query(&format!(
                "SELECT a.attname FROM pg_index i JOIN pg_attribute a \
                 ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) \
                 WHERE i.indrelid = {qualified}::regclass AND i.indisprimary"
            ))
            .await
            .map_err(|e| wire_error(format!("postgres-cdc: the key of {schema}.{table}"), e))?;
        Ok((0..rows.rows.len())
            .filter_map(|i| rows.text(i, "attname"))
            .collect())
    }

    /// Replaces the unchanged values of `row` (of `rel`, its key whole) by the table's values
    /// now, read by the row's key; left as they are when the table has no such row.
    pub(crate) async fn fill_unchanged(
        &mut self,
        s: &Settings,
        rel: &Relation,
        row: &mut [Datum],
    ) -> Result<()> {
        let missing: Vec<usize> = (0..row.len())
            .filter(|&i| matches!(row[i], Datum::Unchanged))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let selected: Vec<String> = missing
            .iter()
            .map(|&i| format!("{}::text AS c{i}", ident(&rel.columns[i].name)))
            .collect();
        let mut condition = Vec::new();
        for (c, d) in rel.columns.iter().zip(row.iter()).filter(|(c, _)| c.key) {
            match d {
                Datum::Text(t) => condition.push(format!(
                    "{} = {}",
                    ident(&c.name),
                    literal(&String::from_utf8_lossy(t))
                )),
                // A key without a value cannot be looked up.
                _ => return Ok(()),
            }
        }
        let sql = format!(
            "SELECT {} FROM {}.{} WHERE {}",
            selected.join(", "),
            ident(&rel.schema),
            ident(&rel.name),
            condition.join(" AND ")
        );
        let conn = self.connection(s).await?;
        let rows = conn.query(&sql).await.map_err(|e| {
            wire_error(
                format!(
                    "postgres-cdc: reading {}.{} for a key change",
                    rel.schema, rel.name
                ),
                e,
            )
        })?;
        if rows.rows.is_empty() {
            return Ok(());
        }
        for i in missing {
            row[i] = match rows.text(0, &format!("c{i}")) {
                Some(t) => Datum::Text(Bytes::from(t)),
                None => Datum::Null,
            };
        }
        Ok(())
    }

    /// The side connection, opened at the first question.
    async fn connection(&mut self, s: &Settings) -> Result<&mut Connection> {
        if self.conn.is_none() {
            let c = Connection::connect(&s.params, false, s.timeout)
                .await
                .map_err(|e| wire_error("postgres-cdc: connecting to place keys", e))?;
            self.conn = Some(c);
        }
        Ok(self.conn.as_mut().expect("opened above"))
    }

    async fn at_or_before(
        &mut self,
        s: &Settings,
        t: &TableProgress,
        key: &[String],
        end: &[String],
    ) -> Result<bool> {
        self.connection(s).await?;
        if !self.types.contains_key(&t.table) {
            let types = self.key_types(t).await?;
            self.types.insert(t.table.clone(), types);
        }
        let types = &self.types[&t.table];
        let row = |values: &[String]| {
            values
                .iter()
                .zip(types)
                .map(|(v, (ty, coll))| match coll {
                    Some(c) => format!("CAST({} AS {ty}) COLLATE {c}", literal(v)),
                    None => format!("CAST({} AS {ty})", literal(v)),
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let sql = format!("SELECT (({}) <= ({}))::text AS le", row(key), row(end));
        let conn = self.conn.as_mut().expect("opened above");
        let rows = conn
            .query(&sql)
            .await
            .map_err(|e| wire_error("postgres-cdc: placing a key in the snapshot", e))?;
        Ok(rows.text(0, "le").as_deref() == Some("true"))
    }

    /// The type and collation of each key column of `t`.
    async fn key_types(&mut self, t: &TableProgress) -> Result<Vec<(String, Option<String>)>> {
        let (schema, table) = t.table.split_once('.').unwrap_or(("public", &t.table));
        let qualified = literal(&format!("{}.{}", ident(schema), ident(table)));
        let conn = self.conn.as_mut().expect("opened by the caller");
        let mut out = Vec::with_capacity(t.key.len());
        for col in &t.key {
            let rows = conn
                .query(&format!(
                    "SELECT format_type(a.atttypid, a.atttypmod) AS ty, \
                     CASE WHEN a.attcollation <> 0 AND a.attcollation <> ty.typcollation \
                     THEN (SELECT quote_ident(collname) FROM pg_collation c \
                           WHERE c.oid = a.attcollation) END AS coll \
                     FROM pg_attribute a JOIN pg_type ty ON ty.oid = a.atttypid \
                     WHERE a.attrelid = {qualified}::regclass AND a.attname = {}",
                    literal(col)
                ))
                .await
                .map_err(|e| {
                    wire_error(format!("postgres-cdc: the type of {}.{col}", t.table), e)
                })?;
            let ty = rows.text(0, "ty").ok_or_else(|| {
                rivus_sdk::Error::connector(
                    "postgres-cdc",
                    format!("key column `{col}` of {} is gone", t.table),
                )
            })?;
            out.push((ty, rows.text(0, "coll")));
        }
        Ok(out)
    }
}

/// Whether the change of `row` (of `rel`) committed at `commit` is in the snapshot's rows
/// already: older than the snapshot of its key's range. A key that cannot be placed is not:
/// a change twice rather than none.
pub(super) async fn in_snapshot(
    read: Option<&TableProgress>,
    s: &Settings,
    row: Option<&serde_json::Map<String, Value>>,
    commit: Lsn,
    order: &mut KeyOrder,
) -> Result<bool> {
    let Some(read) = read.filter(|r| commit < r.newest()) else {
        return Ok(false);
    };
    let key: Option<Vec<String>> = read
        .key
        .iter()
        .map(|k| {
            row.and_then(|r| r.get(k)).and_then(|v| match v {
                Value::Null => None,
                Value::String(s) if s == event::UNCHANGED_TOAST => None,
                Value::String(s) => Some(s.clone()),
                other => Some(other.to_string()),
            })
        })
        .collect();
    match key {
        Some(key) => Ok(!order.is_new(s, read, &key, commit).await?),
        None => Ok(false),
    }
}

/// What the snapshot read of `rel`'s table, when a change committed at `commit` may be in it.
pub(super) fn read_of(
    ctx: &SourceContext<Value, CdcState>,
    rel: &Relation,
    commit: Lsn,
) -> Option<TableProgress> {
    let table = format!("{}.{}", rel.schema, rel.name);
    let read = ctx.state().snapshot.as_ref()?.table(&table)?;
    (commit < read.newest()).then(|| read.clone())
}

/// A key change's halves fall in the snapshot apart when the old and the new key lie in ranges
/// read at different points. The delete's old row may be in the snapshot while the new row is
/// not yet, or the other way round; the pair is mended so that neither half counts on the
/// other:
/// - the write is in the snapshot (its row read whole, after the change): the delete is a
///   plain delete, which a sink applies;
/// - the delete is (the old row read gone): no row is left to move from, so the write becomes
///   a plain write, its missing values read now from the table by the new key — the values
///   the row has now; a later change of them follows in the stream.
pub(super) async fn mend_move(
    read: Option<&TableProgress>,
    s: &Settings,
    rel: &Relation,
    pair: &mut [Step],
    commit: Lsn,
    order: &mut KeyOrder,
) -> Result<()> {
    let [delete, write] = pair else { return Ok(()) };
    if delete.marker.is_none() {
        return Ok(());
    }
    let old = delete.before.as_ref().map(|d| event::row(rel, d));
    let new = write.after.as_ref().map(|d| event::row(rel, d));
    let old_read = in_snapshot(read, s, old.as_ref(), commit, order).await?;
    let new_read = in_snapshot(read, s, new.as_ref(), commit, order).await?;
    if new_read && !old_read {
        delete.marker = None;
    } else if old_read && !new_read {
        write.marker = None;
        if let Some(after) = write.after.as_mut() {
            order.fill_unchanged(s, rel, after).await?;
        }
    }
    Ok(())
}
