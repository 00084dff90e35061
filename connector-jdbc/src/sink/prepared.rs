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

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use rivus_core::{CompletedCheckpoints, Error, Result, RuntimeContext, Share};

use crate::db::{Conn, Pool};
use crate::dialect::Dialect;

/// XA ids (gtrid) are at most 64 bytes.
const XA_ID_MAX: usize = 64;

/// A prepared transaction waiting for its checkpoint; on MySQL/MariaDB with the session that
/// prepared it.
struct Pending {
    gid: String,
    parked: Option<Conn>,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("gid", &self.gid)
            .field("parked", &self.parked.is_some())
            .finish()
    }
}

/// The prepared transactions of one subtask not yet known to be committed.
#[derive(Debug)]
pub(crate) struct Prepared {
    pool: Pool,
    dialect: Dialect,
    prefix: String,
    subtask: usize,
    /// MySQL/MariaDB: the next XA id's number (microseconds at open, then +1 per transaction:
    /// unique across runs).
    next_xa: AtomicU64,
    pending: Mutex<BTreeMap<u64, Pending>>,
    /// Serializes commits (the committer task, notifications and close).
    committing: tokio::sync::Mutex<()>,
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
    pub fn new(pool: Pool, prefix: String, subtask: usize) -> Self {
        let micros = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        Prepared {
            dialect: pool.dialect(),
            pool,
            prefix,
            subtask,
            next_xa: AtomicU64::new(micros),
            pending: Mutex::new(BTreeMap::new()),
            committing: tokio::sync::Mutex::new(()),
            failure: Mutex::new(None),
            one_phase: false,
        }
    }

    /// Transactions begun and committed in one phase only (positions mode): never prepared,
    /// so no XA ids on MySQL/MariaDB.
    pub fn one_phase(pool: Pool, subtask: usize) -> Self {
        Prepared {
            one_phase: true,
            ..Prepared::new(pool, String::new(), subtask)
        }
    }

    /// Checks that the server keeps prepared transactions, then resolves those an earlier run
    /// left (see [`recover`](Self::recover)). `prefix` defaults to `rivus-<job>-<operator>`.
    pub async fn start(
        pool: &Pool,
        conn: &mut Conn,
        prefix: Option<String>,
        ctx: &RuntimeContext,
        restored: &BTreeSet<String>,
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
        let (committed, rolled_back) = prepared.recover(restored, ctx.parallelism()).await?;
        if committed + rolled_back > 0 {
            tracing::info!(sink = %ctx.display_name(), committed, rolled_back,
                "recovered prepared transactions");
        }
        Ok(prepared)
    }

    /// The task committing prepared transactions as checkpoints complete.
    pub fn spawn_committer(
        prepared: Arc<Prepared>,
        mut completed: CompletedCheckpoints,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            while let Some(id) = completed.changed().await {
                if let Err(e) = prepared.commit_up_to(id).await {
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
    pub async fn begin(&self, conn: &mut Conn) -> std::result::Result<Option<String>, sqlx::Error> {
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
    pub async fn prepare(
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
    pub async fn commit_one_phase(
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

    /// Records that `gid` was prepared for `checkpoint` (with its parked session, if any).
    pub fn add(&self, checkpoint: u64, gid: String, parked: Option<Conn>) {
        self.pending
            .lock()
            .insert(checkpoint, Pending { gid, parked });
    }

    /// What goes into the checkpoint: every prepared, uncommitted transaction.
    pub fn snapshot(&self) -> Vec<String> {
        self.pending
            .lock()
            .values()
            .map(|p| p.gid.clone())
            .collect()
    }

    /// Lets go of the parked sessions (at close): their prepared transactions stay on the
    /// server, detached, for the next run to resolve.
    pub fn release_parked(&self) {
        for p in self.pending.lock().values_mut() {
            if let Some(c) = p.parked.take() {
                c.discard();
            }
        }
    }

    /// The first commit failure of the committer task, if any.
    pub fn check(&self) -> Result<()> {
        match self.failure.lock().clone() {
            Some(m) => Err(Error::connector("jdbc sink: committing", m)),
            None => Ok(()),
        }
    }

    pub fn fail(&self, e: &Error) {
        self.failure.lock().get_or_insert(e.to_string());
    }

    async fn prepared_gids(&self) -> Result<Vec<String>> {
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
        .map_err(|e| crate::error::sql_error("jdbc sink: listing prepared transactions", &e))
    }

    /// Commits or rolls back prepared `gid`, on its parked session if it has one.
    async fn finish(&self, gid: &str, commit: bool, parked: Option<Conn>) -> Result<()> {
        let verb = if commit { "COMMIT" } else { "ROLLBACK" };
        let sql = match self.dialect {
            Dialect::MySql => format!("XA {verb} '{gid}'"),
            _ => format!("{verb} PREPARED '{gid}'"),
        };
        let mut conn = match parked {
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
        Ok(())
    }

    /// How many prepared transactions wait for checkpoints up to `checkpoint`.
    pub fn pending_up_to(&self, checkpoint: u64) -> usize {
        self.pending.lock().range(..=checkpoint).count()
    }

    /// Commits every pending transaction of checkpoints up to `checkpoint`.
    pub async fn commit_up_to(&self, checkpoint: u64) -> Result<()> {
        let _one_at_a_time = self.committing.lock().await;
        loop {
            let next = {
                let mut pending = self.pending.lock();
                pending
                    .range_mut(..=checkpoint)
                    .next()
                    .map(|(id, p)| (*id, p.gid.clone(), p.parked.take()))
            };
            let Some((id, gid, parked)) = next else {
                return Ok(());
            };
            self.finish(&gid, true, parked).await?;
            metrics::counter!("rivus_jdbc_transactions_committed_total").increment(1);
            tracing::debug!(%gid, "committed prepared transaction");
            self.pending.lock().remove(&id);
        }
    }

    /// On start: commits the prepared transactions in `restored` and rolls back every other
    /// one this subtask owns — its own, and those of old subtasks `s` with
    /// `s % parallelism == subtask` after a change of parallelism. Returns (committed,
    /// rolled back).
    pub async fn recover(
        &self,
        restored: &BTreeSet<String>,
        parallelism: usize,
    ) -> Result<(usize, usize)> {
        let _one_at_a_time = self.committing.lock().await;
        let (mut committed, mut rolled_back) = (0, 0);
        for gid in self.prepared_gids().await? {
            let Some(owner) = owner_of(&gid, &self.prefix) else {
                continue;
            };
            if !Share::new(self.subtask, parallelism).owns(owner) {
                continue;
            }
            let commit = restored.contains(&gid);
            self.finish(&gid, commit, None).await?;
            if commit {
                committed += 1;
            } else {
                rolled_back += 1;
            }
            tracing::info!(%gid, commit, "resolved a prepared transaction of an earlier run");
        }
        Ok((committed, rolled_back))
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
