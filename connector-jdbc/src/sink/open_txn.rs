//! The checkpoint's open transaction outside the writing of batches: preparing it at a
//! barrier, committing it in one phase (with the source's positions, or at the end of a job
//! without checkpoints), dropping it, and altering a table inside it (schema evolution).

use rivus_sdk::prelude::*;

use super::positions::PositionsTable;
use super::writer::Writer;
use crate::db::Conn;
use crate::error::timed_out;

impl Writer {
    /// Runs `sql` (schema evolution on PostgreSQL with transactions: DDL is transactional
    /// there) in the checkpoint's open transaction, beginning one if none is open, and reads
    /// `table` back inside it — a column added there is seen by nobody else before the
    /// commit.
    pub(super) async fn alter_in_open(
        &self,
        sql: &str,
        table: &str,
    ) -> Result<crate::table::TableSchema> {
        let Some((prepared, slot)) = &self.txn else {
            return Err(Error::connector(
                "jdbc sink",
                "no transaction to alter the table in",
            ));
        };
        let mut guard = slot.lock().await;
        if guard.is_none() {
            *guard = Some(
                self.begin(prepared)
                    .await
                    .map_err(|e| crate::error::sql_error("jdbc sink: beginning", &e))?,
            );
        }
        let open = guard.as_mut().expect("set above");
        let done = self
            .within("jdbc: ALTER TABLE", async {
                open.conn.raw(sql).await?;
                crate::table::describe(&mut open.conn, self.dialect, table).await
            })
            .await;
        done.map_err(|e| {
            if let Some(open) = guard.take() {
                open.conn.discard();
            }
            crate::error::sql_error(format!("jdbc sink: `{sql}`"), &e)
        })
    }

    /// Exactly-once: prepares the open transaction for `checkpoint`. Returns the id and the session to park with it, or `None` when
    /// nothing was written since the last one.
    pub(super) async fn prepare(&self, checkpoint: u64) -> Result<Option<(String, Option<Conn>)>> {
        let Some((prepared, slot)) = &self.txn else {
            return Ok(None);
        };
        let Some(open) = slot.lock().await.take() else {
            return Ok(None);
        };
        let preparing = prepared.prepare(open.conn, open.xid, checkpoint);
        rivus_sdk::activity::bounded(self.deadline, "jdbc: PREPARE TRANSACTION", preparing)
            .await
            .unwrap_or_else(|| {
                Err(crate::error::sql_error(
                    "jdbc sink: preparing",
                    &timed_out(self.deadline),
                ))
            })
            .map(Some)
    }

    /// Drops the open transaction (at close, after a failure): its connection is closed, so
    /// the database rolls it back; kept connections go back to the pool. Without this the
    /// pool could never close.
    pub(super) async fn abandon_open(&self) {
        self.kept.lock().clear();
        if let Some((_, slot)) = &self.txn {
            if let Some(open) = slot.lock().await.take() {
                open.conn.discard();
            }
        }
    }

    /// Positions mode (`positions.rs`): writes `positions` into the open transaction — one
    /// is begun when none is, should only positions have moved — and commits it in one phase,
    /// at the barrier. Fails (retryable) when a partition moved to another worker, or the
    /// database did not answer within the deadline; the transaction then rolls back.
    pub(super) async fn commit_positions(
        &self,
        table: &PositionsTable,
        positions: &rivus_sdk::Positions,
    ) -> Result<()> {
        let Some((prepared, slot)) = &self.txn else {
            return Ok(());
        };
        let mut guard = slot.lock().await;
        let taken = guard.take();
        if taken.is_none() && positions.is_empty() {
            return Ok(());
        }
        let mut open = match taken {
            Some(open) => open,
            None => self
                .begin(prepared)
                .await
                .map_err(|e| crate::error::sql_error("jdbc sink: beginning", &e))?,
        };
        // The connection stays out here: whatever fails, it is closed (the database rolls
        // the transaction back), never handed back to the pool mid-transaction.
        let (conn, xid) = (&mut open.conn, open.xid.as_deref());
        let work = async {
            table.write(conn, positions).await?;
            prepared
                .commit_one_phase(conn, xid)
                .await
                .map_err(|e| crate::error::sql_error("jdbc sink: committing", &e))
        };
        let label = "jdbc: COMMIT (rows and positions)";
        let done = rivus_sdk::activity::bounded(self.deadline, label, work)
            .await
            .unwrap_or_else(|| {
                Err(crate::error::sql_error(
                    "jdbc sink: committing rows and positions",
                    &timed_out(self.deadline),
                ))
            });
        match done {
            // Committed: the connection goes back to the pool.
            Ok(()) => Ok(()),
            Err(e) => {
                open.conn.discard();
                Err(e)
            }
        }
    }

    /// Commits the open transaction now (a job without checkpoints, at its end).
    pub(super) async fn commit_open(&self) -> Result<()> {
        let Some((prepared, slot)) = &self.txn else {
            return Ok(());
        };
        let Some(mut open) = slot.lock().await.take() else {
            return Ok(());
        };
        let xid = open.xid.as_deref();
        let committing = prepared.commit_one_phase(&mut open.conn, xid);
        if let Err(e) = self.within("jdbc: COMMIT", committing).await {
            open.conn.discard();
            return Err(crate::error::sql_error("jdbc sink: committing", &e));
        }
        Ok(())
    }
}
