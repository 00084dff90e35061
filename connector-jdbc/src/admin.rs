//! Small one-off operations for tools around pipelines: run a setup script, look at what a
//! table holds.

use std::time::Duration;

use serde_json::Value;

use rivus_sdk::Result;

use crate::db::Pool;
use crate::dialect::Dialect;
use crate::source::query::{PageQuery, QueryColumn};

/// Runs `sql` (one or more statements) against `url` — e.g. `CREATE TABLE IF NOT EXISTS` —
/// one process at a time (see `Conn::raw_exclusive`).
pub async fn run_script(url: &str, sql: &str) -> Result<()> {
    let pool = Pool::connect(url, 1, Duration::from_secs(10)).await?;
    let mut conn = pool
        .acquire()
        .await
        .map_err(|e| crate::error::sql_error("jdbc: connecting", &e))?;
    // Workers of one job run the same script at once: one at a time.
    let r = conn
        .raw_exclusive(sql)
        .await
        .map_err(|e| crate::error::sql_error("jdbc: running the setup script", &e));
    drop(conn);
    pool.close().await;
    r
}

/// How many rows `table` holds and its first `limit` rows (by its first column) as JSON.
pub async fn table_report(url: &str, table: &str, limit: usize) -> Result<(u64, Vec<Value>)> {
    let pool = Pool::connect(url, 1, Duration::from_secs(10)).await?;
    let dialect = pool.dialect();
    let mut conn = pool
        .acquire()
        .await
        .map_err(|e| crate::error::sql_error("jdbc: connecting", &e))?;
    let quoted = dialect.quote(table);
    let count_sql = match dialect {
        Dialect::Postgres => format!("SELECT COUNT(*)::text FROM {quoted}"),
        Dialect::MySql => format!("SELECT CAST(COUNT(*) AS CHAR) FROM {quoted}"),
        Dialect::Sqlite => format!("SELECT CAST(COUNT(*) AS TEXT) FROM {quoted}"),
    };
    let err = |e: sqlx::Error| crate::error::sql_error(format!("jdbc: reading `{table}`"), &e);
    let count: u64 = conn
        .fetch_text(&count_sql, &[])
        .await
        .map_err(err)?
        .first()
        .and_then(|c| c.trim().parse().ok())
        .unwrap_or(0);
    let query = format!("SELECT * FROM {quoted}");
    let columns: Vec<QueryColumn> = conn
        .describe_columns(&format!("SELECT * FROM ({query}) q"))
        .await
        .map_err(err)?
        .into_iter()
        .map(|(name, type_name)| QueryColumn { name, type_name })
        .collect();
    let Some(first) = columns.first().map(|c| c.name.clone()) else {
        return Ok((count, Vec::new()));
    };
    let page = PageQuery {
        dialect,
        query,
        columns,
        track: vec![first],
        fetch: limit.max(1),
    };
    let (sql, binds) = page.page(None, None);
    let rows = conn
        .fetch_text(&sql, &binds)
        .await
        .map_err(err)?
        .iter()
        .map(|t| serde_json::from_str(t).unwrap_or(Value::Null))
        .collect();
    drop(conn);
    pool.close().await;
    Ok((count, rows))
}
