//! One connection pool over the three sqlx drivers, with what the sink and source need of it:
//! raw statements, statements with bound [`SqlValue`]s, single-column text queries, and the
//! classification of errors into retryable, bad data and fatal.

use std::str::FromStr;
use std::time::Duration;

use sqlx::mysql::{MySqlPool, MySqlPoolOptions};
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions};
use sqlx::{Executor, MySql, Postgres, Sqlite};

use rivus_sdk::{Error, Result};

use crate::dialect::Dialect;
use crate::error::{classify, sql_error, Statement};
use crate::value::SqlValue;

/// A pool of connections to one database.
#[derive(Clone, Debug)]
pub(crate) enum Pool {
    Pg(PgPool),
    My(MySqlPool),
    Lite(SqlitePool),
}

/// One connection taken from a [`Pool`].
pub(crate) enum Conn {
    Pg(PoolConnection<Postgres>),
    My(PoolConnection<MySql>),
    Lite(PoolConnection<Sqlite>),
}

macro_rules! bind_values {
    ($q:expr, $values:expr) => {{
        let mut q = $q;
        for v in $values {
            q = match v {
                SqlValue::Int(x) => q.bind(*x),
                SqlValue::Float(x) => q.bind(*x),
                SqlValue::Bool(x) => q.bind(*x),
                SqlValue::Text(x) => q.bind(x.as_deref()),
                SqlValue::Bytes(x, _) => q.bind(x.as_deref()),
            };
        }
        q
    }};
}

impl Pool {
    /// Connects to `url` (verifying it now); errors name the `url` setting.
    pub(crate) async fn connect(
        url: &str,
        max_connections: u32,
        timeout: Duration,
    ) -> Result<Pool> {
        let failed =
            |e: sqlx::Error| sql_error(format!("jdbc: connecting to {}", crate::redact(url)), &e);
        Ok(match Dialect::of_url(url)? {
            Dialect::Postgres => Pool::Pg(
                PgPoolOptions::new()
                    .max_connections(max_connections)
                    // No ping before each batch: a dead connection shows at the statement,
                    // which is retried on a new one.
                    .test_before_acquire(false)
                    .acquire_timeout(timeout)
                    .connect(url)
                    .await
                    .map_err(failed)?,
            ),
            Dialect::MySql => {
                let url = url.replacen("mariadb://", "mysql://", 1);
                Pool::My(
                    MySqlPoolOptions::new()
                        .max_connections(max_connections)
                        // No ping before each batch: a dead connection shows at the statement,
                        // which is retried on a new one.
                        .test_before_acquire(false)
                        .acquire_timeout(timeout)
                        .connect(&url)
                        .await
                        .map_err(failed)?,
                )
            }
            Dialect::Sqlite => {
                let options = SqliteConnectOptions::from_str(url)
                    .map_err(|e| Error::config("url", crate::redact(&e.to_string())))?
                    .create_if_missing(true)
                    .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
                    .busy_timeout(timeout);
                // Two subtasks opening the same file at once may find it locked while the other
                // switches it to WAL: that is worth waiting for, up to the timeout.
                let started = std::time::Instant::now();
                let pool = loop {
                    let r = SqlitePoolOptions::new()
                        .max_connections(max_connections)
                        // No ping before each batch: a dead connection shows at the
                        // statement, which is retried on a new one.
                        .test_before_acquire(false)
                        .acquire_timeout(timeout)
                        .connect_with(options.clone())
                        .await;
                    match r {
                        Err(e)
                            if classify(Dialect::Sqlite, &e) == Statement::Retry
                                && started.elapsed() < timeout =>
                        {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                        r => break r.map_err(failed)?,
                    }
                };
                Pool::Lite(pool)
            }
        })
    }

    pub(crate) fn dialect(&self) -> Dialect {
        match self {
            Pool::Pg(_) => Dialect::Postgres,
            Pool::My(_) => Dialect::MySql,
            Pool::Lite(_) => Dialect::Sqlite,
        }
    }

    pub(crate) async fn acquire(&self) -> Result<Conn, sqlx::Error> {
        Ok(match self {
            Pool::Pg(p) => Conn::Pg(p.acquire().await?),
            Pool::My(p) => Conn::My(p.acquire().await?),
            Pool::Lite(p) => Conn::Lite(p.acquire().await?),
        })
    }

    pub(crate) async fn close(&self) {
        match self {
            Pool::Pg(p) => p.close().await,
            Pool::My(p) => p.close().await,
            Pool::Lite(p) => p.close().await,
        }
    }
}

impl Conn {
    /// Runs `sql` (one or more statements, no parameters).
    pub(crate) async fn raw(&mut self, sql: &str) -> Result<(), sqlx::Error> {
        match self {
            Conn::Pg(c) => c.execute(sqlx::raw_sql(sql)).await.map(drop),
            Conn::My(c) => c.execute(sqlx::raw_sql(sql)).await.map(drop),
            Conn::Lite(c) => c.execute(sqlx::raw_sql(sql)).await.map(drop),
        }
    }

    /// Runs `sql` (one or more statements, no parameters) while holding a lock that every
    /// rivus process on this database takes for it: PostgreSQL's session advisory lock, MySQL's
    /// `GET_LOCK`. Workers of one job all run the same `CREATE TABLE IF NOT EXISTS` at start,
    /// and on PostgreSQL two of those at once can fail (`duplicate key value violates unique
    /// constraint "pg_type_typname_nsp_index"`): one at a time they cannot.
    pub(crate) async fn raw_exclusive(&mut self, sql: &str) -> Result<(), sqlx::Error> {
        /// The advisory lock's key: "rivus" in ASCII.
        const KEY: i64 = 0x0072_6976_7573;
        let (lock, unlock) = match self {
            Conn::Pg(_) => (
                format!("SELECT pg_advisory_lock({KEY})"),
                format!("SELECT pg_advisory_unlock({KEY})"),
            ),
            Conn::My(_) => (
                "SELECT GET_LOCK('rivus-ddl', 60)".to_owned(),
                "SELECT RELEASE_LOCK('rivus-ddl')".to_owned(),
            ),
            Conn::Lite(_) => return self.raw(sql).await,
        };
        self.raw(&lock).await?;
        let done = self.raw(sql).await;
        let released = self.raw(&unlock).await;
        done.and(released)
    }

    /// Runs `sql` with `values` bound in order; returns the rows affected.
    pub(crate) async fn execute<'v>(
        &mut self,
        sql: &str,
        values: impl IntoIterator<Item = &'v SqlValue>,
    ) -> Result<u64, sqlx::Error> {
        Ok(match self {
            Conn::Pg(c) => bind_values!(sqlx::query(sql), values)
                .execute(&mut **c)
                .await?
                .rows_affected(),
            Conn::My(c) => bind_values!(sqlx::query(sql), values)
                .execute(&mut **c)
                .await?
                .rows_affected(),
            Conn::Lite(c) => bind_values!(sqlx::query(sql), values)
                .execute(&mut **c)
                .await?
                .rows_affected(),
        })
    }

    /// Runs a query returning one text column, with `values` bound in order.
    pub(crate) async fn fetch_text(
        &mut self,
        sql: &str,
        values: &[SqlValue],
    ) -> Result<Vec<String>, sqlx::Error> {
        match self {
            Conn::Pg(c) => {
                bind_values!(sqlx::query_scalar::<_, String>(sql), values)
                    .fetch_all(&mut **c)
                    .await
            }
            Conn::My(c) => {
                bind_values!(sqlx::query_scalar::<_, String>(sql), values)
                    .fetch_all(&mut **c)
                    .await
            }
            Conn::Lite(c) => {
                bind_values!(sqlx::query_scalar::<_, String>(sql), values)
                    .fetch_all(&mut **c)
                    .await
            }
        }
    }

    /// The names and type names of the columns `sql` returns.
    pub(crate) async fn describe_columns(
        &mut self,
        sql: &str,
    ) -> Result<Vec<(String, String)>, sqlx::Error> {
        use sqlx::{Column, TypeInfo};
        fn cols<C: Column>(columns: &[C]) -> Vec<(String, String)> {
            columns
                .iter()
                .map(|c| (c.name().to_owned(), c.type_info().name().to_owned()))
                .collect()
        }
        Ok(match self {
            Conn::Pg(c) => cols((&mut **c).describe(sql).await?.columns()),
            Conn::My(c) => cols((&mut **c).describe(sql).await?.columns()),
            Conn::Lite(c) => cols((&mut **c).describe(sql).await?.columns()),
        })
    }

    /// MySQL/MariaDB: the ids of the prepared XA transactions (`XA RECOVER`).
    pub(crate) async fn xa_recover(&mut self) -> Result<Vec<String>, sqlx::Error> {
        use sqlx::Row;
        let Conn::My(c) = self else {
            return Ok(Vec::new());
        };
        let rows = c.fetch_all(sqlx::raw_sql("XA RECOVER")).await?;
        rows.iter()
            .map(|r| {
                let data: Vec<u8> = r.try_get("data")?;
                Ok(String::from_utf8_lossy(&data).into_owned())
            })
            .collect()
    }

    /// The PostgreSQL connection, for COPY and arrays.
    pub(crate) fn pg(&mut self) -> Option<&mut sqlx::PgConnection> {
        match self {
            Conn::Pg(c) => Some(&mut **c),
            _ => None,
        }
    }

    /// Closes the connection instead of returning it to the pool (its session state is
    /// unknown, e.g. a transaction may be open).
    pub(crate) fn discard(self) {
        match self {
            Conn::Pg(c) => drop(c.detach()),
            Conn::My(c) => drop(c.detach()),
            Conn::Lite(c) => drop(c.detach()),
        }
    }
}
