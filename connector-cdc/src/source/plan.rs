//! The snapshot's plan: each table's key columns (its primary key, or the columns named for
//! it) and, when several subtasks read the snapshot, the table cut into one part per subtask
//! with about as many rows each — the bounds found by the database inside the snapshot, in
//! one pass over the keys (`row_number()` in key order), before any row is read.

use rivus_sdk::{Error, Result};

use super::progress::TableProgress;
use super::slot::{ident, literal};
use super::PostgresCdcSource;
use crate::error::wire_error;
use crate::wire::Connection;

/// The parts of `tables`, numbered in table then key order, for `readers` subtasks (one part
/// per table when one subtask reads).
pub(crate) async fn make(
    c: &mut Connection,
    source: &PostgresCdcSource,
    tables: &[(String, String)],
    readers: usize,
) -> Result<Vec<TableProgress>> {
    let mut plan: Vec<TableProgress> = Vec::new();
    for (schema, table) in tables {
        let key = key_columns(c, source, schema, table).await?;
        let bounds = if readers > 1 {
            bounds(c, schema, table, &key, readers).await?
        } else {
            Vec::new()
        };
        let mut from = None;
        for to in bounds.into_iter().map(Some).chain([None]) {
            plan.push(TableProgress {
                part: plan.len(),
                table: format!("{schema}.{table}"),
                key: key.clone(),
                ranges: Vec::new(),
                from: from.clone(),
                to: to.clone(),
            });
            from = to;
        }
    }
    Ok(plan)
}

/// The keys that end each part but the last: at rows n·i/readers in key order.
async fn bounds(
    c: &mut Connection,
    schema: &str,
    table: &str,
    key: &[String],
    readers: usize,
) -> Result<Vec<Vec<String>>> {
    let name = format!("{schema}.{table}");
    let qualified = format!("{}.{}", ident(schema), ident(table));
    let counted = c
        .query(&format!("SELECT count(*) AS n FROM {qualified}"))
        .await
        .map_err(|e| wire_error(format!("postgres-cdc: counting the rows of {name}"), e))?;
    let n: u64 = counted
        .text(0, "n")
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    let mut at: Vec<u64> = (1..readers as u64)
        .map(|i| n * i / readers as u64)
        .filter(|&r| r >= 1)
        .collect();
    at.dedup();
    if at.is_empty() {
        return Ok(Vec::new());
    }
    let cols = key.iter().map(|k| ident(k)).collect::<Vec<_>>().join(", ");
    let list = at.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
    let rows = c
        .query(&format!(
            "SELECT {cols} FROM (SELECT {cols}, row_number() OVER (ORDER BY {cols}) AS rivus_rn \
             FROM {qualified}) s WHERE rivus_rn IN ({list}) ORDER BY rivus_rn"
        ))
        .await
        .map_err(|e| wire_error(format!("postgres-cdc: cutting {name} into parts"), e))?;
    (0..rows.rows.len())
        .map(|r| super::snapshot::key_of(&rows, r, key))
        .collect()
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
        return Err(Error::refused_at(
            "postgres-cdc",
            "tables",
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
            "key_columns",
            format!(
                "table `{name}` has no primary key: name the columns that order its snapshot \
                 (key_columns = {{ \"{name}\" = [\"...\"] }})"
            ),
        ));
    }
    Ok(key)
}
