//! The snapshot: each table's rows read inside an exported snapshot — exactly the database as
//! of a slot's consistent point — by primary-key order in chunks of `chunk_rows` (keyset
//! pages: each query is bounded, the table is never held whole), emitted as `r` events. Each
//! row's key goes into the checkpointed progress before the row is emitted, so a snapshot
//! interrupted by a failure resumes after the last row a checkpoint holds (see `progress.rs`).

use serde_json::{Map, Value};

use rivus_core::runtime::SourceContext;
use rivus_core::{Error, Result};

use super::progress::{Range, Upto};
use super::slot::{ident, literal};
use super::{wire_error, CdcState, PostgresCdcSource};
use crate::event::{self, Op, Origin};
use crate::lsn::Lsn;
use crate::value;
use crate::wire::{Connection, Rows};

/// A row read and not yet emitted (the last one is marked `last` when it goes out).
struct Pending {
    table: usize,
    key: Vec<String>,
    /// The row is its table's last: the table's range ends with it.
    closes: bool,
    record: Value,
}

/// Emits `p`, its key (or the table's end) in the progress first: a checkpoint after it holds
/// the row.
async fn emit(ctx: &mut SourceContext<Value, CdcState>, p: Pending) -> Result<()> {
    let st = ctx.state_mut();
    let progress = st.snapshot.as_mut().expect("a snapshot under way");
    let range = progress.tables[p.table]
        .ranges
        .last_mut()
        .expect("a range opened for the table");
    range.upto = if p.closes {
        Upto::End
    } else {
        Upto::Key(p.key)
    };
    ctx.collect(p.record).await
}

/// Reads what the state's snapshot progress has left — every table from the start on a first
/// run, from after the last key a checkpoint holds after a failure — inside snapshot `name`
/// (taken at `at`, the watermark of the ranges read now), and emits every row.
pub(crate) async fn read(
    source: &PostgresCdcSource,
    ctx: &mut SourceContext<Value, CdcState>,
    name: &str,
    at: Lsn,
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
    let mut pending: Option<Pending> = None;
    let count = ctx.state().snapshot.as_ref().map_or(0, |p| p.tables.len());
    for i in 0..count {
        let progress = ctx.state().snapshot.as_ref().expect("counted above").tables[i].clone();
        if progress.done() {
            continue;
        }
        let (schema, table) = progress
            .table
            .split_once('.')
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .expect("schema.table");
        let key = if progress.key.is_empty() {
            key_columns(&mut c, source, &schema, &table).await?
        } else {
            progress.key.clone()
        };
        {
            let t = &mut ctx.state_mut().snapshot.as_mut().expect("under way").tables[i];
            t.key = key.clone();
            t.ranges.push(Range {
                upto: Upto::Nothing,
                watermark: at,
            });
        }
        let qualified = format!("{}.{}", ident(&schema), ident(&table));
        let order = key.iter().map(|k| ident(k)).collect::<Vec<_>>().join(", ");
        let mut after: Option<Vec<String>> = progress.last_key().cloned();
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
                    ts_ms: rivus_core::calendar::now_ms(),
                    snapshot: "true",
                };
                let record = event::record(
                    s.envelope,
                    Op::Read,
                    (&schema, &table),
                    None,
                    Some(row),
                    &origin,
                );
                // Each row goes out once the next is known, so that the very last one can be
                // marked `last`.
                let next = Pending {
                    table: i,
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
        // The table is read: its range ends with its last row, or now when that row went out
        // already (or there was none).
        match pending.as_mut() {
            Some(p) if p.table == i => p.closes = true,
            _ => {
                let t = &mut ctx.state_mut().snapshot.as_mut().expect("under way").tables[i];
                t.ranges.last_mut().expect("opened above").upto = Upto::End;
            }
        }
        tracing::info!(table = %progress.table, "postgres-cdc: table read in the snapshot");
    }
    if let Some(mut last) = pending {
        if let Some(source) = last.record.get_mut("source") {
            source["snapshot"] = Value::from("last");
        }
        emit(ctx, last).await?;
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

/// The text of the key columns of row `r`.
fn key_of(rows: &Rows, r: usize, key: &[String]) -> Result<Vec<String>> {
    key.iter()
        .map(|k| {
            rows.text(r, k).ok_or_else(|| {
                Error::config(
                    "source.postgres-cdc.key_columns",
                    format!("key column `{k}` is missing or NULL"),
                )
            })
        })
        .collect()
}
