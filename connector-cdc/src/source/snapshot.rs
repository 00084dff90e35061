//! The snapshot: the rows of a subtask's parts of the tables (see `plan.rs`) read inside an
//! exported snapshot — exactly the database as of a slot's consistent point — by key order in
//! chunks of `chunk_rows` (keyset pages: each query is bounded, the table is never held
//! whole), emitted as `r` events. Each row's key goes into the checkpointed progress before the
//! row is emitted, so a snapshot interrupted by a failure resumes after the last row a
//! checkpoint holds (see `progress.rs`).

use serde_json::{Map, Value};

use rivus_sdk::runtime::SourceContext;
use rivus_sdk::{Error, Result};

use super::progress::{Range, Upto};
use super::slot::{ident, literal};
use super::{CdcState, PostgresCdcSource};
use crate::error::wire_error;
use crate::event::{self, Op, Origin};
use crate::lsn::Lsn;
use crate::value;
use crate::wire::{Connection, Rows};

/// A row read and not yet emitted (the last one is marked `last` when it goes out).
struct Pending {
    /// Index of its part in the state's `parts`.
    part: usize,
    key: Vec<String>,
    /// The row is its part's last: the part's range ends with it.
    closes: bool,
    record: Value,
}

/// Emits `p`, its key (or the part's end) in the progress first: a checkpoint after it holds
/// the row.
async fn emit(ctx: &mut SourceContext<Value, CdcState>, p: Pending) -> Result<()> {
    let range = ctx.state_mut().parts[p.part]
        .ranges
        .last_mut()
        .expect("a range opened for the part");
    range.upto = if p.closes {
        Upto::End
    } else {
        Upto::Key(p.key)
    };
    ctx.collect(p.record).await
}

/// The columns of `qualified` (`crate::types`), `key` marking its key, read inside the
/// snapshot: `format_type` names for built-in types, `text` for the database's own.
async fn column_types(
    c: &mut Connection,
    qualified: &str,
    key: &[String],
) -> std::result::Result<Value, crate::wire::WireError> {
    let rows = c
        .query(&format!(
            "SELECT a.attname::text AS name, CASE WHEN a.atttypid < {} AND \
             (t.typelem = 0 OR t.typelem < {}) THEN format_type(a.atttypid, a.atttypmod) \
             ELSE 'text' END AS ty FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid \
             WHERE a.attrelid = {}::regclass AND a.attnum > 0 AND NOT a.attisdropped \
             ORDER BY a.attnum",
            crate::types::FIRST_USER_OID,
            crate::types::FIRST_USER_OID,
            literal(qualified)
        ))
        .await?;
    let columns: Vec<(String, String)> = (0..rows.rows.len())
        .map(|r| {
            (
                rows.text(r, "name").unwrap_or_default(),
                rows.text(r, "ty").unwrap_or_else(|| "text".into()),
            )
        })
        .collect();
    Ok(crate::types::columns_value(
        columns
            .iter()
            .map(|(n, t)| (n.as_str(), t.clone(), key.contains(n))),
    ))
}

/// A connection inside the exported snapshot `name`.
pub(crate) async fn import(source: &PostgresCdcSource, name: &str) -> Result<Connection> {
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
    Ok(c)
}

/// Ends the snapshot's transaction and the connection.
pub(crate) async fn finish(mut c: Connection) {
    let _ = c.query("COMMIT").await;
    c.close().await;
}

/// Reads what is left of the state's parts — from their start on a first run, from after the
/// last key a checkpoint holds after a failure — over `c` (inside a snapshot taken at `at`,
/// the watermark of the ranges read now), and emits every row; the very last one is marked
/// `last` when `mark_last` (one subtask reads the whole snapshot).
pub(crate) async fn read(
    source: &PostgresCdcSource,
    ctx: &mut SourceContext<Value, CdcState>,
    c: &mut Connection,
    at: Lsn,
    mark_last: bool,
) -> Result<u64> {
    let s = &source.s;
    let mut total = 0u64;
    let mut pending: Option<Pending> = None;
    for i in 0..ctx.state().parts.len() {
        let part = ctx.state().parts[i].clone();
        if part.done() {
            continue;
        }
        let key = part.key.clone();
        let (schema, table) = part
            .table
            .split_once('.')
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .expect("schema.table");
        ctx.state_mut().parts[i].ranges.push(Range {
            upto: Upto::Nothing,
            watermark: at,
        });
        let qualified = format!("{}.{}", ident(&schema), ident(&table));
        let order = key.iter().map(|k| ident(k)).collect::<Vec<_>>().join(", ");
        let row_of = |k: &[String]| k.iter().map(|v| literal(v)).collect::<Vec<_>>().join(", ");
        let upto = part
            .to
            .as_ref()
            .map(|to| format!("({order}) <= ({})", row_of(to)));
        let mut after: Option<Vec<String>> = part.resume_after().cloned();
        let types = match s.column_types {
            true => Some(column_types(c, &qualified, &key).await.map_err(|e| {
                wire_error(format!("postgres-cdc: the columns of {schema}.{table}"), e)
            })?),
            false => None,
        };
        loop {
            let lower = after
                .as_ref()
                .map(|last| format!("({order}) > ({})", row_of(last)));
            let filter: Vec<String> = lower.into_iter().chain(upto.clone()).collect();
            let filter = if filter.is_empty() {
                String::new()
            } else {
                format!("WHERE {}", filter.join(" AND "))
            };
            let rows = c
                .query(&format!(
                    "SELECT * FROM {qualified} {filter} ORDER BY {order} LIMIT {}",
                    s.chunk_rows
                ))
                .await
                .map_err(|e| wire_error(format!("postgres-cdc: reading {schema}.{table}"), e))?;
            let n = rows.rows.len();
            for r in 0..n {
                let row_key = key_of(&rows, r, &key)?;
                let values = rows.rows[r].clone();
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
                    ts_ms: rivus_sdk::calendar::now_ms(),
                    snapshot: "true",
                };
                let record = event::record(
                    s.envelope,
                    Op::Read,
                    (&schema, &table),
                    None,
                    Some(row),
                    &origin,
                    types.as_ref(),
                );
                // Each row goes out once the next is known, so that the very last one can be
                // marked `last`.
                let next = Pending {
                    part: i,
                    key: row_key.clone(),
                    closes: false,
                    record,
                };
                if let Some(previous) = pending.replace(next) {
                    emit(ctx, previous).await?;
                    total += 1;
                }
                after = Some(row_key);
            }
            if n < s.chunk_rows {
                break;
            }
        }
        // The part is read: its range ends with its last row, or now when that row went out
        // already (or there was none).
        match pending.as_mut() {
            Some(p) if p.part == i => p.closes = true,
            _ => {
                let range = ctx.state_mut().parts[i].ranges.last_mut();
                range.expect("opened above").upto = Upto::End;
            }
        }
        tracing::debug!(table = %part.table, part = part.part, "postgres-cdc: part read in the snapshot");
    }
    if let Some(mut last) = pending {
        if mark_last {
            if let Some(source) = last.record.get_mut("source") {
                source["snapshot"] = Value::from("last");
            }
        }
        emit(ctx, last).await?;
        total += 1;
    }
    Ok(total)
}

/// The text of the key columns of row `r`.
pub(crate) fn key_of(rows: &Rows, r: usize, key: &[String]) -> Result<Vec<String>> {
    key.iter()
        .map(|k| {
            rows.text(r, k).ok_or_else(|| {
                Error::config(
                    "key_columns",
                    format!("key column `{k}` is missing or NULL"),
                )
            })
        })
        .collect()
}
