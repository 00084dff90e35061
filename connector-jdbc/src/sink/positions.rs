//! Exactly-once across workers: the positions of a Kafka source in group mode kept in a table
//! of the sink's database, written in the same transaction as the rows read before them and
//! committed with them at each checkpoint's barrier (rivus-sdk's
//! [`positions_store`](rivus_sdk::positions_store)).
//!
//! One row per sink and partition: `(sink, partition_key, position, owner)`. A worker that is
//! assigned a partition *claims* it — sets itself as the owner and reads the position, in one
//! short transaction — and the source starts there. At each barrier the sink checks, with the
//! rows locked, that it still owns every partition whose position it writes, writes the
//! positions and commits. Claims and commits of one partition are serialised by its row lock:
//! a claim waits for a commit that holds the row; a commit after a claim finds another owner
//! and rolls back (the job restarts and claims again). A worker killed mid-transaction loses
//! its connection and the database rolls the transaction back: its rows and positions never
//! appear, and the next owner resumes from the last committed position.
//!
//! Nothing waits for the checkpoint to complete (no prepared transactions): the table, not the
//! checkpoint, says where each partition resumes.

use std::time::Duration;

use rivus_sdk::{Error, PositionStore, Positions, Result};

use crate::db::{Conn, Pool};
use crate::dialect::Dialect;
use crate::error::{describe, sql_error, timed_out};
use crate::value::SqlValue;

/// The positions table of one sink subtask (see the [module docs](self)).
pub(crate) struct PositionsTable {
    pool: Pool,
    table: String,
    /// The sink's name in the table: the same for every worker of the job.
    sink: String,
    /// This subtask's incarnation: unique per open.
    owner: String,
    deadline: Duration,
    runtime: tokio::runtime::Handle,
}

impl PositionsTable {
    /// The table `table` (created if missing) for sink `sink`, owned as `owner`.
    pub(super) async fn open(
        pool: Pool,
        conn: &mut Conn,
        table: &str,
        sink: String,
        owner: String,
        deadline: Duration,
    ) -> Result<Self> {
        let dialect = pool.dialect();
        let sql = format!(
            "CREATE TABLE IF NOT EXISTS {} (sink VARCHAR(200) NOT NULL, partition_key \
             VARCHAR(400) NOT NULL, position BIGINT, owner VARCHAR(200) NOT NULL, \
             PRIMARY KEY (sink, partition_key))",
            dialect.quote(table)
        );
        conn.raw_exclusive(&sql).await.map_err(|e| {
            sql_error(
                format!("jdbc sink: creating the positions table `{table}`"),
                &e,
            )
        })?;
        Ok(PositionsTable {
            pool,
            table: table.to_owned(),
            sink,
            owner,
            deadline,
            runtime: tokio::runtime::Handle::current(),
        })
    }

    fn dialect(&self) -> Dialect {
        self.pool.dialect()
    }

    fn quoted(&self) -> String {
        self.dialect().quote(&self.table)
    }

    fn ph(&self, n: usize) -> String {
        self.dialect().placeholder(n, None)
    }

    /// The position column as text (`''` when never written).
    fn position_text(&self) -> &'static str {
        match self.dialect() {
            Dialect::MySql => "COALESCE(CAST(position AS CHAR), '')",
            _ => "COALESCE(CAST(position AS TEXT), '')",
        }
    }

    /// Sets this subtask as the owner of `keys` and reads their positions, in one
    /// transaction on `conn`.
    async fn claim_on(&self, conn: &mut Conn, keys: &[String]) -> Result<Positions, sqlx::Error> {
        conn.raw("BEGIN").await?;
        let t = self.quoted();
        let upsert = match self.dialect() {
            Dialect::MySql => format!(
                "INSERT INTO {t} (sink, partition_key, position, owner) VALUES (?, ?, NULL, ?) \
                 ON DUPLICATE KEY UPDATE owner = VALUES(owner)"
            ),
            _ => format!(
                "INSERT INTO {t} (sink, partition_key, position, owner) VALUES ($1, $2, NULL, \
                 $3) ON CONFLICT (sink, partition_key) DO UPDATE SET owner = EXCLUDED.owner"
            ),
        };
        let select = format!(
            "SELECT {} FROM {t} WHERE sink = {} AND partition_key = {} FOR UPDATE",
            self.position_text(),
            self.ph(1),
            self.ph(2)
        );
        let mut found = Positions::new();
        for key in keys {
            let values = [
                SqlValue::Text(Some(self.sink.clone())),
                SqlValue::Text(Some(key.clone())),
                SqlValue::Text(Some(self.owner.clone())),
            ];
            conn.execute(&upsert, &values).await?;
            let got = conn.fetch_text(&select, &values[..2]).await?;
            if let Some(p) = got.first().and_then(|t| t.parse::<i64>().ok()) {
                found.insert(key.clone(), p);
            }
        }
        conn.raw("COMMIT").await?;
        Ok(found)
    }

    async fn claim_async(&self, keys: &[String]) -> Result<Positions> {
        let claiming = async {
            let mut conn = self.pool.acquire().await?;
            match self.claim_on(&mut conn, keys).await {
                Ok(found) => Ok(found),
                Err(e) => {
                    conn.discard();
                    Err(e)
                }
            }
        };
        let label = "jdbc: claiming partitions in the positions table";
        rivus_sdk::activity::bounded(self.deadline, label, claiming)
            .await
            .unwrap_or_else(|| Err(timed_out(self.deadline)))
            .map_err(|e| {
                Error::connector(
                    format!("jdbc sink: claiming partitions in `{}`", self.table),
                    describe(&e),
                )
            })
    }

    /// Inside the open transaction on `conn`: checks that this subtask still owns every
    /// partition of `positions` (locking their rows) and writes the positions. A partition
    /// claimed by another worker fails the commit (retryable: the job restarts and claims
    /// what the group gives it then).
    pub(super) async fn write(&self, conn: &mut Conn, positions: &Positions) -> Result<()> {
        let t = self.quoted();
        let lock = format!(
            "SELECT owner FROM {t} WHERE sink = {} AND partition_key = {} FOR UPDATE",
            self.ph(1),
            self.ph(2)
        );
        let update = format!(
            "UPDATE {t} SET position = {} WHERE sink = {} AND partition_key = {}",
            self.ph(1),
            self.ph(2),
            self.ph(3)
        );
        for (key, position) in positions {
            let at = [
                SqlValue::Text(Some(self.sink.clone())),
                SqlValue::Text(Some(key.clone())),
            ];
            let owner = conn.fetch_text(&lock, &at).await.map_err(|e| {
                sql_error(
                    format!("jdbc sink: locking positions in `{}`", self.table),
                    &e,
                )
            })?;
            if owner.first() != Some(&self.owner) {
                return Err(Error::connector(
                    format!("jdbc sink: positions in `{}`", self.table),
                    format!(
                        "partition {key} is now read by another worker (owner {}); this \
                         transaction rolls back and the job resumes from the table",
                        owner.first().map_or("none", String::as_str)
                    ),
                ));
            }
            let values = [
                SqlValue::Int(Some(*position)),
                SqlValue::Text(Some(self.sink.clone())),
                SqlValue::Text(Some(key.clone())),
            ];
            conn.execute(&update, &values).await.map_err(|e| {
                sql_error(
                    format!("jdbc sink: writing positions to `{}`", self.table),
                    &e,
                )
            })?;
        }
        Ok(())
    }
}

impl PositionStore for PositionsTable {
    fn claim(&self, keys: &[String]) -> Result<Positions> {
        self.runtime.block_on(self.claim_async(keys))
    }
}

/// A name for this incarnation of a sink subtask: worker, subtask, and a value unique per open.
pub(crate) fn owner_token(worker: Option<&str>, subtask: usize) -> String {
    static OPENS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = OPENS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{}/{subtask}/{}-{nanos:x}-{n}",
        worker.unwrap_or("main"),
        std::process::id()
    )
}

#[cfg(test)]
mod tests {
    use super::owner_token;

    #[test]
    fn owner_tokens_are_unique_per_open() {
        let a = owner_token(Some("w1"), 2);
        let b = owner_token(Some("w1"), 2);
        assert!(a.starts_with("w1/2/"), "{a}");
        assert_ne!(a, b);
        assert!(owner_token(None, 0).starts_with("main/0/"));
        assert!(a.len() < 200, "fits the owner column");
    }
}
