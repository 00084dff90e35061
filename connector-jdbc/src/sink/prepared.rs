//! Exactly-once with prepared transactions: the transaction of checkpoint N is prepared when
//! N's barrier arrives and committed once N is stored. A prepared transaction survives a crash
//! of the job and of the server, so on restore the transactions listed in the restored state
//! are committed and every other one of this sink is rolled back.
//!
//! PostgreSQL: `BEGIN` … `PREPARE TRANSACTION '<prefix>:<subtask>:<N>'` … `COMMIT PREPARED`.
//! MySQL/MariaDB: XA, whose id is given when the transaction starts (before N is known), so
//! it is `<prefix>:<subtask>:<n>` with `n` unique across runs: `XA START` … `XA END`,
//! `XA PREPARE` … `XA COMMIT`. A prepared XA transaction stays with its session until
//! committed, so that connection is parked with it and commits it; if the job dies, the
//! server keeps it detached (MariaDB ≥ 10.5, MySQL ≥ 5.7.7) for the restore to resolve.
//!
//! Commits run on their own task, woken by the job's completed-checkpoint watch: the next
//! checkpoint's writes may wait on row locks the prepared transaction holds, and the sink's
//! own task — blocked in such a write — could not take the notification.
//!
//! The writer begins and prepares ([`Prepared`]); the pending transactions, their commits and
//! the restore's commits and rollbacks are core's [`TwoPhaseCommit`] over [`Finisher`].

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;

use rivus_sdk::two_phase::{Committer, TwoPhaseCommit};
use rivus_sdk::{CompletedCheckpoints, Error, Restored, Result, RuntimeContext, Share};

use crate::db::{Conn, Pool};
use crate::dialect::Dialect;

/// XA ids (gtrid) are at most 64 bytes.
const XA_ID_MAX: usize = 64;

/// The prepared transactions of one subtask: how the writer begins and prepares them, and
/// those not yet known to be committed.
#[derive(Debug)]
pub(crate) struct Prepared {
    dialect: Dialect,
    prefix: String,
    subtask: usize,
    /// MySQL/MariaDB: the next XA id's number (microseconds at open, then +1 per transaction:
    /// unique across runs).
    next_xa: AtomicU64,
    /// Locked by one commit at a time (the committer task, notifications and close).
    txns: tokio::sync::Mutex<TwoPhaseCommit<Finisher>>,
    failure: Mutex<Option<String>>,
    /// Transactions are only ever committed in one phase (positions mode, `positions.rs`):
    /// plain `BEGIN` on MySQL/MariaDB too, no XA id.
    one_phase: bool,
}

fn owner_of(gid: &str, prefix: &str) -> Option<usize> {
    let rest = gid.strip_prefix(prefix)?.strip_prefix(':')?;
    let (subtask, checkpoint) = rest.split_once(':')?;
    checkpoint.parse::<u64>().ok()?;
    subtask.parse().ok()
}

impl Prepared {
    pub(super) fn new(pool: Pool, prefix: String, subtask: usize) -> Self {
        let micros = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        Prepared {
            dialect: pool.dialect(),
            txns: tokio::sync::Mutex::new(TwoPhaseCommit::new(Finisher {
                dialect: pool.dialect(),
                pool,
                prefix: prefix.clone(),
                parked: HashMap::new(),
                listed: None,
            })),
            prefix,
            subtask,
            next_xa: AtomicU64::new(micros),
            failure: Mutex::new(None),
            one_phase: false,
        }
    }

    /// Transactions begun and committed in one phase only (positions mode): never prepared,
    /// so no XA ids on MySQL/MariaDB.
    pub(super) fn one_phase(pool: Pool, subtask: usize) -> Self {
        Prepared {
            one_phase: true,
            ..Prepared::new(pool, String::new(), subtask)
        }
    }

    /// Checks that the server keeps prepared transactions, then resolves those an earlier run
    /// left (see [`recover`](Self::recover)). `prefix` defaults to `rivus-<job>-<operator>`.
    pub(super) async fn start(
        pool: &Pool,
        conn: &mut Conn,
        prefix: Option<String>,
        ctx: &RuntimeContext,
        restored: Restored<Vec<String>>,
    ) -> Result<Arc<Prepared>> {
        match pool.dialect() {
            Dialect::Postgres => check_postgres(conn).await?,
            Dialect::MySql => check_mysql(conn).await?,
            Dialect::Sqlite => {
                return Err(Error::config(
                    "exactly_once",
                    "SQLite has no prepared transactions",
                ))
            }
        }
        // `<prefix>:<subtask>:<20 digits>` must fit an XA id on MySQL/MariaDB.
        let room = match pool.dialect() {
            Dialect::MySql => {
                XA_ID_MAX.saturating_sub(1 + ctx.parallelism().to_string().len() + 1 + 20)
            }
            _ => usize::MAX,
        };
        let prefix = prefix.unwrap_or_else(|| {
            default_prefix(
                &format!("rivus-{}-{}", ctx.job_name(), ctx.task_name()),
                room,
            )
        });
        if pool.dialect() == Dialect::MySql {
            let longest = prefix.len() + 1 + ctx.parallelism().to_string().len() + 1 + 20;
            if longest > XA_ID_MAX {
                return Err(Error::config(
                    "transaction_prefix",
                    format!(
                        "`{prefix}` is too long for MySQL/MariaDB XA ids ({XA_ID_MAX} bytes \
                         with `:<subtask>:<number>`): set a prefix of at most {} characters",
                        prefix.len() - (longest - XA_ID_MAX)
                    ),
                ));
            }
        }
        let prepared = Arc::new(Prepared::new(pool.clone(), prefix, ctx.subtask_index()));
        prepared.txns.lock().await.recover(restored).await?;
        Ok(prepared)
    }

    /// The task committing prepared transactions as checkpoints complete, each within
    /// `deadline` (see [`commit_within`](Self::commit_within)).
    pub(super) fn spawn_committer(
        prepared: Arc<Prepared>,
        mut completed: CompletedCheckpoints,
        deadline: Duration,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            while let Some(id) = completed.changed().await {
                if let Err(e) = prepared.commit_within(id, deadline).await {
                    tracing::error!(error = %e, "jdbc sink: commit failed");
                    prepared.fail(&e);
                    return;
                }
            }
        })
    }

    /// PostgreSQL: the transaction id for checkpoint `checkpoint`.
    fn gid(&self, checkpoint: u64) -> String {
        format!("{}:{}:{checkpoint}", self.prefix, self.subtask)
    }

    /// Starts the transaction of the next checkpoint on `conn`; returns its XA id on
    /// MySQL/MariaDB.
    pub(super) async fn begin(
        &self,
        conn: &mut Conn,
    ) -> std::result::Result<Option<String>, sqlx::Error> {
        if self.dialect != Dialect::MySql || self.one_phase {
            conn.raw("BEGIN").await?;
            return Ok(None);
        }
        let n = self.next_xa.fetch_add(1, Ordering::Relaxed);
        let xid = format!("{}:{}:{n}", self.prefix, self.subtask);
        conn.raw(&format!("XA START '{xid}'")).await?;
        Ok(Some(xid))
    }

    /// Prepares the open transaction of `checkpoint` (under its XA id `xid` from
    /// [`begin`](Self::begin) on MySQL/MariaDB). Returns the id and, on MySQL/MariaDB, the
    /// session to park with it.
    pub(super) async fn prepare(
        &self,
        mut conn: Conn,
        xid: Option<String>,
        checkpoint: u64,
    ) -> Result<(String, Option<Conn>)> {
        let (id, sql) = match xid {
            Some(xid) => {
                let sql = format!("XA END '{xid}'; XA PREPARE '{xid}'");
                (xid, sql)
            }
            None => {
                let gid = self.gid(checkpoint);
                let sql = format!("PREPARE TRANSACTION '{gid}'");
                (gid, sql)
            }
        };
        if let Err(e) = conn.raw(&sql).await {
            conn.discard();
            return Err(crate::error::sql_error(
                format!("jdbc sink: preparing transaction `{id}`"),
                &e,
            ));
        }
        let parked = (self.dialect == Dialect::MySql).then_some(conn);
        Ok((id, parked))
    }

    /// Commits the open transaction in one step (a job without checkpoints, at its end).
    pub(super) async fn commit_one_phase(
        &self,
        conn: &mut Conn,
        xid: Option<&str>,
    ) -> std::result::Result<(), sqlx::Error> {
        match xid {
            None => conn.raw("COMMIT").await,
            Some(xid) => {
                conn.raw(&format!("XA END '{xid}'; XA COMMIT '{xid}' ONE PHASE"))
                    .await
            }
        }
    }

    /// Records that `gid` was prepared for `checkpoint` (with its parked session, if any),
    /// and returns what goes into the checkpoint: every prepared, uncommitted transaction.
    pub(super) async fn add(
        &self,
        checkpoint: u64,
        gid: String,
        parked: Option<Conn>,
    ) -> Vec<String> {
        let mut txns = self.txns.lock().await;
        if let Some(c) = parked {
            txns.committer_mut().parked.insert(gid.clone(), c);
        }
        txns.pre_committed(checkpoint, [gid]);
        txns.state()
    }

    /// What goes into the checkpoint when nothing was prepared at its barrier.
    pub(super) async fn state(&self) -> Vec<String> {
        self.txns.lock().await.state()
    }

    /// Lets go of the parked sessions (at close): their prepared transactions stay on the
    /// server, detached, for the next run to resolve.
    pub(super) async fn release_parked(&self) {
        for (_, c) in self.txns.lock().await.committer_mut().parked.drain() {
            c.discard();
        }
    }

    /// The first commit failure of the committer task, if any.
    pub(super) fn check(&self) -> Result<()> {
        match self.failure.lock().clone() {
            Some(m) => Err(Error::connector("jdbc sink: committing", m)),
            None => Ok(()),
        }
    }

    pub(super) fn fail(&self, e: &Error) {
        self.failure.lock().get_or_insert(e.to_string());
    }

    /// Commits the prepared transactions up to `checkpoint`, waiting at most `deadline` for
    /// the lock and then `deadline` per transaction (a commit that got no answer is retried by
    /// the restarted job: prepared transactions survive in the database).
    pub(super) async fn commit_within(&self, checkpoint: u64, deadline: Duration) -> Result<()> {
        let no_answer = |limit: Duration| {
            Error::connector(
                "jdbc sink: committing prepared transactions",
                format!("no answer from the database within {limit:?}"),
            )
        };
        let mut txns = rivus_sdk::activity::bounded(deadline, "jdbc: COMMIT PREPARED", async {
            self.txns.lock().await
        })
        .await
        .ok_or_else(|| no_answer(deadline))?;
        let limit = deadline * txns.pending_up_to(checkpoint).max(1) as u32;
        rivus_sdk::activity::bounded(
            limit,
            "jdbc: COMMIT PREPARED",
            txns.commit_up_to(checkpoint),
        )
        .await
        .ok_or_else(|| no_answer(limit))?
        .map(drop)
    }
}

/// Commits and rolls back this sink's prepared transactions (`<prefix>:<subtask>:<n>`).
pub(crate) struct Finisher {
    pool: Pool,
    dialect: Dialect,
    prefix: String,
    /// MySQL/MariaDB: the session that prepared each pending transaction.
    parked: HashMap<String, Conn>,
    /// On restore: this sink's transactions the server holds prepared (read once).
    listed: Option<BTreeSet<String>>,
}

impl std::fmt::Debug for Finisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Finisher")
            .field("prefix", &self.prefix)
            .field("parked", &self.parked.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Finisher {
    async fn prepared_gids(&self) -> Result<BTreeSet<String>> {
        let mut conn =
            self.pool.acquire().await.map_err(|e| {
                crate::error::sql_error("jdbc sink: listing prepared transactions", &e)
            })?;
        if self.dialect == Dialect::MySql {
            let ours = format!("{}:", self.prefix);
            return conn
                .xa_recover()
                .await
                .map(|ids| ids.into_iter().filter(|g| g.starts_with(&ours)).collect())
                .map_err(|e| crate::error::sql_error("jdbc sink: XA RECOVER", &e));
        }
        let pattern = format!("{}:%", self.prefix.replace('%', "\\%").replace('_', "\\_"));
        conn.fetch_text(
            "SELECT gid FROM pg_prepared_xacts WHERE database = current_database() AND gid LIKE $1",
            &[crate::value::SqlValue::Text(Some(pattern))],
        )
        .await
        .map(|gids| gids.into_iter().collect())
        .map_err(|e| crate::error::sql_error("jdbc sink: listing prepared transactions", &e))
    }

    /// This sink's transactions the server holds prepared, as first listed by this restore.
    async fn listed(&mut self) -> Result<&mut BTreeSet<String>> {
        if self.listed.is_none() {
            self.listed = Some(self.prepared_gids().await?);
        }
        Ok(self.listed.as_mut().expect("listed"))
    }

    /// Commits or rolls back prepared `gid`, on its parked session if it has one.
    async fn finish(&mut self, gid: &str, commit: bool) -> Result<()> {
        let verb = if commit { "COMMIT" } else { "ROLLBACK" };
        let sql = match self.dialect {
            Dialect::MySql => format!("XA {verb} '{gid}'"),
            _ => format!("{verb} PREPARED '{gid}'"),
        };
        let mut conn = match self.parked.remove(gid) {
            Some(c) => c,
            None => self
                .pool
                .acquire()
                .await
                .map_err(|e| crate::error::sql_error("jdbc sink: connecting", &e))?,
        };
        if let Err(e) = conn.raw(&sql).await {
            conn.discard();
            return Err(crate::error::sql_error(format!("jdbc sink: {sql}"), &e));
        }
        tracing::debug!(%gid, commit, "finished a prepared transaction");
        Ok(())
    }
}

#[async_trait]
impl Committer for Finisher {
    type Txn = String;

    fn writer_of(&self, gid: &String) -> Option<usize> {
        owner_of(gid, &self.prefix)
    }

    async fn commit(&mut self, gid: &String) -> Result<()> {
        self.finish(gid, true).await?;
        metrics::counter!("rivus_jdbc_transactions_committed_total").increment(1);
        Ok(())
    }

    /// Committed now if the server still holds it prepared; else it committed before the
    /// failure.
    async fn recover_and_commit(&mut self, gid: &String) -> Result<()> {
        if self.listed().await?.remove(gid) {
            self.finish(gid, true).await?;
            tracing::info!(%gid, "committed a prepared transaction of an earlier run");
        }
        Ok(())
    }

    /// Rolls back every other prepared transaction this subtask owns — its own, and those of
    /// old subtasks `s` with `s % parallelism == subtask` after a change of parallelism: they
    /// belong to checkpoints that never completed.
    async fn abort_others(&mut self, restored: &[String], share: Share) -> Result<u64> {
        let doomed: Vec<String> = std::mem::take(self.listed().await?)
            .into_iter()
            .filter(|gid| !restored.contains(gid))
            .filter(|gid| owner_of(gid, &self.prefix).is_some_and(|o| share.owns(o)))
            .collect();
        for gid in &doomed {
            self.finish(gid, false).await?;
            tracing::info!(%gid, "rolled back a prepared transaction of an earlier run");
        }
        self.listed = None;
        Ok(doomed.len() as u64)
    }
}

/// PostgreSQL keeps prepared transactions only with `max_prepared_transactions` > 0.
async fn check_postgres(conn: &mut Conn) -> Result<()> {
    let max: Vec<String> = conn
        .fetch_text("SELECT current_setting('max_prepared_transactions')", &[])
        .await
        .map_err(|e| crate::error::sql_error("jdbc sink", &e))?;
    if max.first().map(String::as_str) == Some("0") {
        return Err(Error::config(
            "exactly_once",
            "the server has max_prepared_transactions = 0; raise it (postgresql.conf) \
             or use at-least-once with upserts",
        ));
    }
    Ok(())
}

/// MariaDB before 10.5 rolls a prepared XA transaction back when its session ends: no use.
async fn check_mysql(conn: &mut Conn) -> Result<()> {
    let version: Vec<String> = conn
        .fetch_text("SELECT VERSION()", &[])
        .await
        .map_err(|e| crate::error::sql_error("jdbc sink", &e))?;
    let version = version.into_iter().next().unwrap_or_default();
    if !xa_survives_disconnect(&version) {
        return Err(Error::config(
            "exactly_once",
            format!(
                "server {version} rolls prepared XA transactions back when the session ends; \
                 exactly-once needs MariaDB 10.5 or later (or MySQL 5.7.7 or later)"
            ),
        ));
    }
    Ok(())
}

/// Whether a server of `version` keeps prepared XA transactions after a disconnect.
fn xa_survives_disconnect(version: &str) -> bool {
    let numbers: Vec<u32> = version
        .split(|c: char| !c.is_ascii_digit())
        .take(3)
        .map(|n| n.parse().unwrap_or(0))
        .collect();
    let at_least = |want: [u32; 3]| numbers.as_slice() >= want.as_slice();
    if version.contains("MariaDB") {
        at_least([10, 5, 2])
    } else {
        at_least([5, 7, 7])
    }
}

/// The transaction prefix a sink without one gets: `name` with every character outside
/// `[A-Za-z0-9._-]` replaced by `_`, and, when longer than `room`, cut and ended with a hash of
/// the whole name (FNV-1a, stable across builds and restarts), so that long job names still
/// give distinct ids that fit MySQL's XA limit.
fn default_prefix(name: &str, room: usize) -> String {
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.len() <= room {
        return clean;
    }
    let hash = clean.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let tag = format!("-{:08x}", hash as u32);
    let keep = room.saturating_sub(tag.len());
    format!("{}{tag}", &clean[..keep])
}

#[cfg(test)]
mod tests {
    use super::{default_prefix, owner_of, xa_survives_disconnect};

    #[test]
    fn long_default_prefixes_are_cut_and_hashed() {
        assert_eq!(default_prefix("rivus-job sink", 41), "rivus-job_sink");
        let long = "rivus-frozen-mariadb-1796420180615407074-sink";
        let a = default_prefix(long, 41);
        assert_eq!(a.len(), 41);
        assert!(a.starts_with("rivus-frozen-mariadb-17964201806"), "{a}");
        assert_eq!(a, default_prefix(long, 41), "stable");
        let b = default_prefix("rivus-frozen-mariadb-1796420180615407075-sink", 41);
        assert_ne!(a, b, "names that differ past the cut still differ");
    }

    #[test]
    fn xa_versions() {
        assert!(xa_survives_disconnect("10.11.19-MariaDB-0+deb12u1"));
        assert!(!xa_survives_disconnect("10.4.32-MariaDB"));
        assert!(xa_survives_disconnect("8.0.36"));
        assert!(!xa_survives_disconnect("5.7.6-log"));
    }

    #[test]
    fn owners_are_read_from_transaction_ids() {
        assert_eq!(owner_of("rivus-job:3:17", "rivus-job"), Some(3));
        assert_eq!(owner_of("rivus-job-2:3:17", "rivus-job"), None);
        assert_eq!(owner_of("rivus-job:x:17", "rivus-job"), None);
        assert_eq!(owner_of("rivus-job:1:x", "rivus-job"), None);
    }
}
