//! The [`BulkSender`] of the SQL sink: writes one batch of row changes with as few
//! statements as the dialect allows, isolates the rows the database refuses and hands them to
//! the error policy, and keeps the rest.
//!
//! Without transactions spanning checkpoints (at-least-once) a batch is one database
//! transaction; with them (exactly-once) the batch goes into the checkpoint's open transaction
//! behind a savepoint.

use std::sync::Arc;

use rivus_sdk::bulk::{BulkSender, SendOutcome};
use rivus_sdk::error_policy::ErrorHandler;
use rivus_sdk::prelude::*;

use super::net::{distinct_keys, net_changes};
use super::prepared::Prepared;
use crate::change::Change;
use crate::db::{Conn, Pool};
use crate::dialect::Dialect;
use crate::error::{classify, Statement};
use crate::error::{describe, timed_out};
use crate::statement::{PgMethod, Plan, WriteMode};
use crate::value::SqlValue;

pub(crate) enum WriteError {
    Sql(sqlx::Error),
    Policy(Error),
}

impl From<sqlx::Error> for WriteError {
    fn from(e: sqlx::Error) -> Self {
        WriteError::Sql(e)
    }
}

/// The transaction a checkpoint's rows go into (exactly-once).
pub(crate) struct OpenTxn {
    pub(super) conn: Conn,
    /// Its XA id (MySQL/MariaDB).
    pub(super) xid: Option<String>,
}

/// One change and the table it goes to: what the sink's batches hold.
#[derive(Debug, Clone)]
pub(crate) struct Routed {
    pub plan: Arc<Plan>,
    pub change: Change,
}

impl Routed {
    pub(crate) fn size(&self) -> usize {
        self.change.size()
    }
}

/// A batch's changes by table, in the order each table first appears (a table's changes
/// keep their order; changes of different tables commute).
fn by_table(items: Vec<Routed>) -> Vec<(Arc<Plan>, Vec<Change>)> {
    let mut groups: Vec<(Arc<Plan>, Vec<Change>)> = Vec::new();
    for Routed { plan, change } in items {
        match groups.iter_mut().find(|(p, _)| Arc::ptr_eq(p, &plan)) {
            Some((_, changes)) => changes.push(change),
            None => groups.push((plan, vec![change])),
        }
    }
    groups
}

/// The batch again, for a retry.
fn routed(groups: Vec<(Arc<Plan>, Vec<Change>)>) -> Vec<Routed> {
    groups
        .into_iter()
        .flat_map(|(plan, changes)| {
            changes.into_iter().map(move |change| Routed {
                plan: Arc::clone(&plan),
                change,
            })
        })
        .collect()
}

pub(crate) struct Writer {
    pub pool: Pool,
    pub dialect: Dialect,
    /// The table, or the template of the tables, for errors.
    pub label: String,
    pub handler: ErrorHandler,
    /// Exactly-once: the prepared-transaction protocol, and the open transaction of the
    /// current checkpoint.
    pub txn: Option<(Arc<Prepared>, tokio::sync::Mutex<Option<OpenTxn>>)>,
    /// Connections kept between batches, last used on top. The pool hands out its idle
    /// connections in turn; a batch on the connection the previous one used finds its caches
    /// warm (SQLite's page cache is per connection and goes stale whenever another one writes).
    pub kept: parking_lot::Mutex<Vec<Conn>>,
    pub rows: metrics::Counter,
    pub refused: metrics::Counter,
    /// Longest wait for one batch's statements.
    pub deadline: std::time::Duration,
}

impl Writer {
    /// Awaits `fut` for at most the statement deadline, marked as `label`; past it, a
    /// timed-out error (retryable).
    pub(super) async fn within<T, E: From<sqlx::Error>>(
        &self,
        label: &'static str,
        fut: impl std::future::Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        rivus_sdk::activity::bounded(self.deadline, label, fut)
            .await
            .unwrap_or_else(|| Err(timed_out(self.deadline).into()))
    }

    /// A new transaction on a connection from the pool (`BEGIN`, or `XA START` under an id).
    pub(super) async fn begin(&self, prepared: &Prepared) -> Result<OpenTxn, sqlx::Error> {
        self.within("jdbc: BEGIN", async {
            let mut conn = self.pool.acquire().await?;
            let xid = prepared.begin(&mut conn).await?;
            Ok(OpenTxn { conn, xid })
        })
        .await
    }

    /// How the failing record is named in errors and dead letters.
    fn position(&self, plan: &Plan, change: &Change) -> String {
        let shown: serde_json::Map<String, serde_json::Value> = if plan.keys.is_empty() {
            plan.columns
                .iter()
                .zip(&change.values)
                .map(|(c, v)| (c.name.clone(), v.to_json()))
                .collect()
        } else {
            plan.keys
                .iter()
                .map(|&k| (plan.columns[k].name.clone(), change.values[k].to_json()))
                .collect()
        };
        let record = crate::value::short(&serde_json::Value::Object(shown));
        format!("table {}, record {record}", plan.table)
    }

    /// The dead letter's content: the row, a kept column as the placeholder it came with.
    fn payload(&self, plan: &Plan, change: &Change) -> Vec<u8> {
        let row: serde_json::Map<String, serde_json::Value> = plan
            .columns
            .iter()
            .zip(&change.values)
            .enumerate()
            .map(|(i, (c, v))| {
                let v = if change.kept.binary_search(&i).is_ok() {
                    serde_json::Value::from(rivus_sdk::change::UNCHANGED)
                } else {
                    v.to_json()
                };
                (c.name.clone(), v)
            })
            .collect();
        serde_json::to_vec(&row).unwrap_or_default()
    }

    fn key_values<'a>(
        plan: &'a Plan,
        change: &'a Change,
    ) -> impl Iterator<Item = &'a SqlValue> + 'a {
        plan.keys.iter().map(move |&k| &change.values[k])
    }

    /// Runs `items` with the fewest statements; a key change ([`Self::move_row`]) is a
    /// statement of its own, in its place between the changes before and after it.
    async fn write_fast(
        &self,
        conn: &mut Conn,
        plan: &Plan,
        items: &[Change],
    ) -> Result<(), sqlx::Error> {
        let mut rest = items;
        while let Some(at) = rest.iter().position(|c| c.moved_from.is_some()) {
            self.write_plain(conn, plan, &rest[..at]).await?;
            self.move_row(conn, plan, &rest[at]).await?;
            rest = &rest[at + 1..];
        }
        self.write_plain(conn, plan, rest).await
    }

    /// Moves a row to its new key (a key change that lacks some columns' values): one UPDATE
    /// of the old key's row sets the carried columns, the new key among them, and leaves the
    /// others. Without a row at the old key (moved by an earlier run that was not
    /// checkpointed) the same UPDATE at the new key gives its row the carried columns; with
    /// no row there either (moved on or deleted later in the stream) nothing is written: a
    /// row made of a partial change would lack the values this move exists to keep.
    async fn move_row(
        &self,
        conn: &mut Conn,
        plan: &Plan,
        change: &Change,
    ) -> Result<(), sqlx::Error> {
        let from = change.moved_from.as_deref().unwrap_or_default();
        let sql = plan.move_sql(&change.kept);
        let set = || plan.written(&change.kept).map(|i| &change.values[i]);
        if conn.execute(&sql, set().chain(from)).await? > 0 {
            return Ok(());
        }
        let to = plan.keys.iter().map(|&k| &change.values[k]);
        if conn.execute(&sql, set().chain(to)).await? == 0 {
            tracing::debug!(table = %plan.table, "jdbc sink: a moved row has no row at either key");
            metrics::counter!("rivus_jdbc_moves_without_row_total", "table" => plan.table.clone())
                .increment(1);
        }
        Ok(())
    }

    /// Runs `items` (no key change among them) with the fewest statements. Upserts: the batch
    /// reduced to one change per key ([`net_changes`]), then every delete in one go and the
    /// writes of each shape together (changes of different keys commute). Otherwise
    /// consecutive writes together, consecutive deletes together.
    async fn write_plain(
        &self,
        conn: &mut Conn,
        plan: &Plan,
        items: &[Change],
    ) -> Result<(), sqlx::Error> {
        if items.is_empty() {
            return Ok(());
        }
        if plan.mode == WriteMode::Upsert && !plan.keys.is_empty() {
            // The common batch: full writes of distinct keys, as they are.
            if items.iter().all(|c| !c.delete && c.kept.is_empty())
                && distinct_keys(items, &plan.keys)
            {
                return self.write_rows(conn, plan, items).await;
            }
            let (deletes, writes) = net_changes(items, &plan.keys);
            if !deletes.is_empty() {
                self.delete_rows(conn, plan, &deletes).await?;
            }
            for shape in writes {
                self.write_rows(conn, plan, &shape).await?;
            }
            return Ok(());
        }
        let mut start = 0;
        while start < items.len() {
            let delete = items[start].delete;
            let end = items[start..]
                .iter()
                .position(|c| c.delete != delete)
                .map_or(items.len(), |n| start + n);
            let run = &items[start..end];
            if delete {
                self.delete_rows(conn, plan, run).await?;
            } else {
                self.write_rows(conn, plan, run).await?;
            }
            start = end;
        }
        Ok(())
    }

    async fn delete_rows(
        &self,
        conn: &mut Conn,
        plan: &Plan,
        run: &[Change],
    ) -> Result<(), sqlx::Error> {
        for chunk in run.chunks(plan.max_delete_rows()) {
            let sql = plan.delete_sql(chunk.len());
            let binds = chunk.iter().flat_map(|c| Self::key_values(plan, c));
            conn.execute(&sql, binds).await?;
        }
        Ok(())
    }

    async fn write_rows(
        &self,
        conn: &mut Conn,
        plan: &Plan,
        run: &[Change],
    ) -> Result<(), sqlx::Error> {
        if let WriteMode::Statement { sql, .. } = &plan.mode {
            for change in run {
                conn.execute(sql, &change.values).await?;
            }
            return Ok(());
        }
        if plan.dialect == Dialect::Postgres {
            let pg = conn
                .pg()
                .expect("a PostgreSQL pool gives PostgreSQL connections");
            match plan.method {
                PgMethod::Copy if plan.mode == WriteMode::Insert => {
                    return crate::copy::copy_in(pg, plan, run).await;
                }
                PgMethod::Unnest | PgMethod::Copy => {
                    return crate::copy::unnest(pg, plan, run).await;
                }
                PgMethod::Values => {}
            }
            return self.values_rows(conn, plan, run).await;
        }
        self.values_rows(conn, plan, run).await
    }

    /// Multi-row VALUES of `run`, whose changes all have the shape of the first.
    async fn values_rows(
        &self,
        conn: &mut Conn,
        plan: &Plan,
        run: &[Change],
    ) -> Result<(), sqlx::Error> {
        let kept = run.first().map_or(&[][..], |c| &c.kept[..]);
        for chunk in run.chunks(plan.max_rows) {
            let sql = plan.write_sql(chunk.len(), kept);
            let values = chunk
                .iter()
                .flat_map(|c| plan.written(kept).map(move |i| &c.values[i]));
            conn.execute(&sql, values).await?;
        }
        Ok(())
    }

    /// Writes row by row; rows the database refuses go to the error policy. Inside a
    /// transaction each row has its own savepoint so a refused row does not abort the rest.
    async fn write_one_by_one(
        &self,
        conn: &mut Conn,
        plan: &Plan,
        items: &[Change],
        in_txn: bool,
    ) -> Result<(), WriteError> {
        for change in items {
            if in_txn {
                conn.raw("SAVEPOINT rivus_row").await?;
            }
            let r = if change.moved_from.is_some() {
                self.move_row(conn, plan, change).await
            } else if change.delete {
                self.delete_rows(conn, plan, std::slice::from_ref(change))
                    .await
            } else {
                self.write_rows(conn, plan, std::slice::from_ref(change))
                    .await
            };
            match r {
                Ok(()) => {
                    if in_txn {
                        conn.raw("RELEASE SAVEPOINT rivus_row").await?;
                    }
                }
                Err(e) if classify(plan.dialect, &e) == Statement::Data => {
                    if in_txn {
                        conn.raw("ROLLBACK TO SAVEPOINT rivus_row").await?;
                    }
                    self.refused.increment(1);
                    let payload = self.payload(plan, change);
                    self.handler
                        .handle(self.position(plan, change), describe(&e), &payload)
                        .await
                        .map_err(WriteError::Policy)?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Every table's changes of the batch, fast.
    async fn write_groups(
        &self,
        conn: &mut Conn,
        groups: &[(Arc<Plan>, Vec<Change>)],
    ) -> Result<(), sqlx::Error> {
        for (plan, changes) in groups {
            self.write_fast(conn, plan, changes).await?;
        }
        Ok(())
    }

    /// Every table's changes of the batch, row by row (after the fast way met a bad row).
    async fn write_groups_one_by_one(
        &self,
        conn: &mut Conn,
        groups: &[(Arc<Plan>, Vec<Change>)],
        in_txn: bool,
    ) -> Result<(), WriteError> {
        for (plan, changes) in groups {
            self.write_one_by_one(conn, plan, changes, in_txn).await?;
        }
        Ok(())
    }

    /// At-least-once: the batch is its own transaction.
    async fn write_autocommit(
        &self,
        conn: &mut Conn,
        groups: &[(Arc<Plan>, Vec<Change>)],
    ) -> Result<(), WriteError> {
        let single = match groups {
            [(plan, items)] => {
                let writes_only = items.iter().all(|c| !c.delete && c.moved_from.is_none());
                let arrays = plan.dialect == Dialect::Postgres && plan.method != PgMethod::Values;
                writes_only
                    && match plan.mode {
                        // One statement per record.
                        WriteMode::Statement { .. } => items.len() == 1,
                        _ => arrays || items.len() <= plan.max_rows,
                    }
            }
            _ => false,
        };
        if !single {
            conn.raw("BEGIN").await?;
        }
        match self.write_groups(conn, groups).await {
            Ok(()) => {
                if !single {
                    conn.raw("COMMIT").await?;
                }
                Ok(())
            }
            Err(e) if classify(self.dialect, &e) == Statement::Data => {
                if !single {
                    conn.raw("ROLLBACK").await?;
                }
                self.write_groups_one_by_one(conn, groups, false).await
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Exactly-once: the batch joins the checkpoint's transaction behind a savepoint.
    async fn write_in_txn(
        &self,
        conn: &mut Conn,
        groups: &[(Arc<Plan>, Vec<Change>)],
    ) -> Result<(), WriteError> {
        conn.raw("SAVEPOINT rivus_batch").await?;
        match self.write_groups(conn, groups).await {
            Ok(()) => Ok(conn.raw("RELEASE SAVEPOINT rivus_batch").await?),
            Err(e) if classify(self.dialect, &e) == Statement::Data => {
                conn.raw("ROLLBACK TO SAVEPOINT rivus_batch").await?;
                self.write_groups_one_by_one(conn, groups, true).await
            }
            Err(e) => Err(e.into()),
        }
    }

    fn failed(&self, e: WriteError, what: &str) -> Error {
        match e {
            WriteError::Policy(e) => e,
            WriteError::Sql(e) => {
                crate::error::sql_error(format!("jdbc sink: {what} {}", self.label), &e)
            }
        }
    }
}

#[async_trait]
impl BulkSender<Routed> for Writer {
    async fn send(&self, items: Vec<Routed>) -> SendOutcome<Routed> {
        let count = items.len() as u64;
        let groups = by_table(items);
        let Some(slot) = &self.txn else {
            let kept = self.kept.lock().pop();
            let mut conn = match kept {
                Some(c) => c,
                None => match self.pool.acquire().await {
                    Ok(c) => c,
                    Err(e) => {
                        return SendOutcome::Retry {
                            items: routed(groups),
                            reason: describe(&e),
                        }
                    }
                },
            };
            let written = self
                .within(
                    "jdbc: writing a batch",
                    self.write_autocommit(&mut conn, &groups),
                )
                .await;
            return match written {
                Ok(()) => {
                    self.rows.increment(count);
                    self.kept.lock().push(conn);
                    SendOutcome::Done
                }
                Err(WriteError::Sql(e)) if classify(self.dialect, &e) == Statement::Retry => {
                    conn.discard();
                    SendOutcome::Retry {
                        items: routed(groups),
                        reason: describe(&e),
                    }
                }
                Err(e) => {
                    conn.discard();
                    SendOutcome::Failed(self.failed(e, "writing to"))
                }
            };
        };
        let (prepared, slot) = slot;
        let mut guard = slot.lock().await;
        if guard.is_none() {
            match self.begin(prepared).await {
                Ok(c) => *guard = Some(c),
                Err(e) => {
                    return SendOutcome::Retry {
                        items: routed(groups),
                        reason: describe(&e),
                    }
                }
            }
        }
        let open = guard.as_mut().expect("set above");
        let written = self.within(
            "jdbc: writing a batch",
            self.write_in_txn(&mut open.conn, &groups),
        );
        match written.await {
            Ok(()) => {
                self.rows.increment(count);
                SendOutcome::Done
            }
            Err(e) => {
                if let Some(open) = guard.take() {
                    open.conn.discard();
                }
                let mut err = self.failed(e, "writing to");
                if matches!(err, Error::Connector { .. }) {
                    err = Error::connector(
                        format!("jdbc sink: transaction on {}", self.label),
                        format!(
                            "{err}; the open transaction is lost, the job must restart from \
                             its last checkpoint"
                        ),
                    );
                }
                SendOutcome::Failed(err)
            }
        }
    }
}
