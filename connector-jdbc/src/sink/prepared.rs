//! Exactly-once on PostgreSQL: the transaction of checkpoint N is prepared
//! (`PREPARE TRANSACTION '<prefix>:<subtask>:<N>'`) when N's barrier arrives and committed
//! (`COMMIT PREPARED`) once N is stored. A prepared transaction survives a crash of the job
//! and of the server, so on restore the transactions listed in the restored state are
//! committed and every other one of this sink is rolled back.
//!
//! Commits run on their own task, woken by the job's completed-checkpoint watch: the next
//! checkpoint's writes may wait on row locks the prepared transaction holds, and the sink's
//! own task — blocked in such a write — could not take the notification.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use rivus_core::{CompletedCheckpoints, Error, Result, RuntimeContext};

use crate::db::{describe, Conn, Pool};

/// The prepared transactions of one subtask not yet known to be committed.
#[derive(Debug)]
pub(crate) struct Prepared {
    pool: Pool,
    prefix: String,
    subtask: usize,
    pending: Mutex<BTreeMap<u64, String>>,
    /// Serializes commits (the committer task, notifications and close).
    committing: tokio::sync::Mutex<()>,
    failure: Mutex<Option<String>>,
}

fn owner_of(gid: &str, prefix: &str) -> Option<usize> {
    let rest = gid.strip_prefix(prefix)?.strip_prefix(':')?;
    let (subtask, checkpoint) = rest.split_once(':')?;
    checkpoint.parse::<u64>().ok()?;
    subtask.parse().ok()
}

impl Prepared {
    pub fn new(pool: Pool, prefix: String, subtask: usize) -> Self {
        Prepared {
            pool,
            prefix,
            subtask,
            pending: Mutex::new(BTreeMap::new()),
            committing: tokio::sync::Mutex::new(()),
            failure: Mutex::new(None),
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
        let max: Vec<String> = conn
            .fetch_text("SELECT current_setting('max_prepared_transactions')", &[])
            .await
            .map_err(|e| Error::connector("jdbc sink", describe(&e)))?;
        if max.first().map(String::as_str) == Some("0") {
            return Err(Error::config(
                "sink.jdbc.exactly_once",
                "the server has max_prepared_transactions = 0; raise it (postgresql.conf) \
                 or use at-least-once with upserts",
            ));
        }
        let prefix = prefix.unwrap_or_else(|| {
            format!("rivus-{}-{}", ctx.job_name(), ctx.task_name())
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                        c
                    } else {
                        '_'
                    }
                })
                .collect()
        });
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

    /// The transaction id for checkpoint `checkpoint`.
    pub fn gid(&self, checkpoint: u64) -> String {
        format!("{}:{}:{checkpoint}", self.prefix, self.subtask)
    }

    /// Records that `gid` was prepared for `checkpoint`.
    pub fn add(&self, checkpoint: u64, gid: String) {
        self.pending.lock().unwrap().insert(checkpoint, gid);
    }

    /// What goes into the checkpoint: every prepared, uncommitted transaction.
    pub fn snapshot(&self) -> Vec<String> {
        self.pending.lock().unwrap().values().cloned().collect()
    }

    /// The first commit failure of the committer task, if any.
    pub fn check(&self) -> Result<()> {
        match self.failure.lock().unwrap().clone() {
            Some(m) => Err(Error::connector("jdbc sink: committing", m)),
            None => Ok(()),
        }
    }

    pub fn fail(&self, e: &Error) {
        self.failure.lock().unwrap().get_or_insert(e.to_string());
    }

    async fn prepared_gids(&self) -> Result<Vec<String>> {
        let mut conn = self.pool.acquire().await.map_err(|e| {
            Error::connector("jdbc sink: listing prepared transactions", describe(&e))
        })?;
        let pattern = format!("{}:%", self.prefix.replace('%', "\\%").replace('_', "\\_"));
        conn.fetch_text(
            "SELECT gid FROM pg_prepared_xacts WHERE database = current_database() AND gid LIKE $1",
            &[crate::value::SqlValue::Text(Some(pattern))],
        )
        .await
        .map_err(|e| Error::connector("jdbc sink: listing prepared transactions", describe(&e)))
    }

    async fn finish(&self, gid: &str, commit: bool) -> Result<()> {
        let verb = if commit { "COMMIT" } else { "ROLLBACK" };
        let mut conn = self
            .pool
            .acquire()
            .await
            .map_err(|e| Error::connector("jdbc sink: connecting", describe(&e)))?;
        conn.raw(&format!("{verb} PREPARED '{gid}'"))
            .await
            .map_err(|e| {
                Error::connector(format!("jdbc sink: {verb} PREPARED '{gid}'"), describe(&e))
            })
    }

    /// Commits every pending transaction of checkpoints up to `checkpoint`.
    pub async fn commit_up_to(&self, checkpoint: u64) -> Result<()> {
        let _one_at_a_time = self.committing.lock().await;
        loop {
            let next = {
                let pending = self.pending.lock().unwrap();
                pending
                    .range(..=checkpoint)
                    .next()
                    .map(|(id, gid)| (*id, gid.clone()))
            };
            let Some((id, gid)) = next else {
                return Ok(());
            };
            self.finish(&gid, true).await?;
            metrics::counter!("rivus_jdbc_transactions_committed_total").increment(1);
            tracing::debug!(%gid, "committed prepared transaction");
            self.pending.lock().unwrap().remove(&id);
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
            if owner % parallelism != self.subtask {
                continue;
            }
            let commit = restored.contains(&gid);
            self.finish(&gid, commit).await?;
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

#[cfg(test)]
mod tests {
    use super::owner_of;

    #[test]
    fn owners_are_read_from_transaction_ids() {
        assert_eq!(owner_of("rivus-job:3:17", "rivus-job"), Some(3));
        assert_eq!(owner_of("rivus-job-2:3:17", "rivus-job"), None);
        assert_eq!(owner_of("rivus-job:x:17", "rivus-job"), None);
        assert_eq!(owner_of("rivus-job:1:x", "rivus-job"), None);
    }
}
