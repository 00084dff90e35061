//! The snapshot: each table's rows read inside the slot's exported snapshot — exactly the
//! database as of the slot's consistent point — by primary-key order in chunks of
//! `chunk_rows` (keyset pages: each query is bounded, the table is never held whole), emitted
//! as `r` events.

use serde_json::{Map, Value};

use rivus_core::runtime::SourceContext;
use rivus_core::{Error, Result};

use super::slot::{ident, literal};
use super::{wire_error, CdcState, PostgresCdcSource};
use crate::event::{self, Op, Origin};
use crate::lsn::Lsn;
use crate::value;
use crate::wire::{Connection, Rows};

/// Reads `tables` inside snapshot `name` (taken at `at`) and emits every row.
pub(crate) async fn read(
    source: &PostgresCdcSource,
    ctx: &mut SourceContext<Value, CdcState>,
    name: &str,
    at: Lsn,
    tables: &[(String, String)],
) -> Result<u64> {
    let s = &source.s;
    let mut c = Connection::connect(&s.params, false, s.timeout)
        .await
        .map_err(|e| wire_error("postgres-cdc: connecting for the snapshot", e))?;
    c.query(&format!(
        "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT {}",
        literal(name)
    ))
    .await
    .map_err(|e| wire_error("postgres-cdc: importing the slot's snapshot", e))?;
    let mut total = 0u64;
    let mut pending: Option<Value> = None;
    for (schema, table) in tables {
        let key = key_columns(&mut c, source, schema, table).await?;
        let qualified = format!("{}.{}", ident(schema), ident(table));
        let order = key.iter().map(|k| ident(k)).collect::<Vec<_>>().join(", ");
        let mut after: Option<Vec<String>> = None;
        loop {
            let filter = match &after {
                Some(last) => format!(
                    "WHERE ({order}) > ({})",
                    last.iter()
                        .map(|v| literal(v))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                None => String::new(),
            };
            let rows = c
                .query(&format!(
                    "SELECT * FROM {qualified} {filter} ORDER BY {order} LIMIT {}",
                    s.chunk_rows
                ))
                .await
                .map_err(|e| wire_error(format!("postgres-cdc: reading {schema}.{table}"), e))?;
            let n = rows.rows.len();
            if n > 0 {
                after = Some(last_key(&rows, &key)?);
            }
            for values in rows.rows {
                let row: Map<String, Value> = rows
                    .columns
                    .iter()
                    .zip(values)
                    .map(|((col, oid), v)| {
                        let v = v.map_or(Value::Null, |t| value::to_json(*oid, &t));
                        (col.clone(), v)
                    })
                    .collect();
                let origin = Origin {
                    db: &s.params.dbname,
                    lsn: at,
                    xid: 0,
                    ts_ms: event::now_ms(),
                    snapshot: "true",
                };
                let record = event::record(
                    s.envelope,
                    Op::Read,
                    (schema, table),
                    None,
                    Some(row),
                    &origin,
                );
                // Each row goes out once the next is known, so that the very last one can be
                // marked `last`.
                if let Some(previous) = pending.replace(record) {
                    ctx.collect(previous).await?;
                    total += 1;
                }
            }
            if n < s.chunk_rows {
                break;
            }
        }
        tracing::info!(table = %format!("{schema}.{table}"), "postgres-cdc: table read in the snapshot");
    }
    if let Some(mut last) = pending {
        if let Some(source) = last.get_mut("source") {
            source["snapshot"] = Value::from("last");
        }
        ctx.collect(last).await?;
        total += 1;
    }
    let _ = c.query("COMMIT").await;
    c.close().await;
    Ok(total)
}

/// The key that orders a table's chunks: its primary key, or the columns named for it.
async fn key_columns(
    c: &mut Connection,
    source: &PostgresCdcSource,
    schema: &str,
    table: &str,
) -> Result<Vec<String>> {
    let name = format!("{schema}.{table}");
    let qualified = literal(&format!("{}.{}", ident(schema), ident(table)));
    let allowed = c
        .query(&format!(
            "SELECT has_table_privilege({qualified}, 'SELECT')::text AS allowed"
        ))
        .await
        .map_err(|e| wire_error(format!("postgres-cdc: checking rights on {name}"), e))?;
    if allowed.text(0, "allowed").as_deref() != Some("true") {
        return Err(Error::refused(
            "source.postgres-cdc.tables",
            format!(
                "user `{}` may not read `{name}`: GRANT SELECT ON {}.{} TO {}",
                source.s.params.user,
                ident(schema),
                ident(table),
                ident(&source.s.params.user)
            ),
        ));
    }
    if let Some(cols) = source.s.key_columns.get(&name) {
        return Ok(cols.clone());
    }
    let rows = c
        .query(&format!(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a \
             ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) \
             WHERE i.indrelid = {qualified}::regclass AND i.indisprimary \
             ORDER BY array_position(i.indkey::int2[], a.attnum)"
        ))
        .await
        .map_err(|e| wire_error(format!("postgres-cdc: reading the key of {name}"), e))?;
    let key: Vec<String> = (0..rows.rows.len())
        .filter_map(|i| rows.text(i, "attname"))
        .collect();
    if key.is_empty() {
        return Err(Error::config(
            "source.postgres-cdc.key_columns",
            format!(
                "table `{name}` has no primary key: name the columns that order its snapshot \
                 (key_columns = {{ \"{name}\" = [\"...\"] }})"
            ),
        ));
    }
    Ok(key)
}

/// The text of the key columns of the last row.
fn last_key(rows: &Rows, key: &[String]) -> Result<Vec<String>> {
    let last = rows.rows.len() - 1;
    key.iter()
        .map(|k| {
            rows.text(last, k).ok_or_else(|| {
                Error::config(
                    "source.postgres-cdc.key_columns",
                    format!("key column `{k}` is missing or NULL"),
                )
            })
        })
        .collect()
}
