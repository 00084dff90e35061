//! [`DeltaTable::commit`]: one version on the newest snapshot, as a writer's sequence — skipped
//! when the table's `txn` for the writer says it was committed before, built again on a newer
//! snapshot when another writer took the version; the log's checkpoint written when due.

use std::sync::Arc;

use rivus_sdk::{Error, Result};

use super::*;

impl DeltaTable {
    /// Commits one version made by `stage` on the newest snapshot, as `app`'s `sequence` (a
    /// sequence committed before is skipped), built again on a newer one when another writer
    /// took the version.
    pub(super) async fn commit(
        &self,
        app: &str,
        sequence: Option<u64>,
        what: &str,
        operation: UpdateTableOperation,
        stage: impl Fn(&SnapshotRef, &Engine, &mut Transaction) -> delta_kernel::KernelResult<()>
            + Clone
            + Send
            + 'static,
    ) -> Result<()> {
        let started = std::time::Instant::now();
        for attempt in 0..MAX_CONFLICTS {
            let snapshot = self.snapshot().await?;
            let engine = Arc::clone(&self.engine);
            let (app2, stage, operation) = (app.to_owned(), stage.clone(), operation.clone());
            let outcome = blocking(move || -> delta_kernel::KernelResult<Outcome> {
                let version = match sequence {
                    Some(seq) => {
                        let seq = i64::try_from(seq).unwrap_or(i64::MAX);
                        if snapshot
                            .get_app_id_version(&app2, engine.as_ref())?
                            .is_some_and(|v| v >= seq)
                        {
                            return Ok(Outcome::Skipped);
                        }
                        Some(seq)
                    }
                    None => None,
                };
                let mut builder = Arc::clone(&snapshot).update_table(operation, ENGINE_INFO, true);
                if let Some(v) = version {
                    builder = builder.with_transaction_id(app2.clone(), v);
                }
                let mut txn =
                    builder.build(engine.as_ref(), Box::new(FileSystemCommitter::new()))?;
                stage(&snapshot, engine.as_ref(), &mut txn)?;
                outcome_of(txn.commit(engine.as_ref())?)
            })
            .await
            .map_err(|e| kernel_error(format!("delta: committing to {}", self.root), e))?;
            match outcome {
                Outcome::Committed(version, snapshot) => {
                    if let Some(mut snapshot) = snapshot {
                        if Checkpoints::due(&snapshot) {
                            let table = self.root.as_str();
                            if let Some(s) =
                                self.checkpoints.write(Arc::clone(&snapshot), table).await
                            {
                                snapshot = s;
                            }
                        }
                        *self.latest.lock() = Some(snapshot);
                    }
                    metrics::counter!("rivus_delta_commits").increment(1);
                    metrics::histogram!("rivus_delta_commit_seconds")
                        .record(started.elapsed().as_secs_f64());
                    tracing::info!(
                        table = %self.root, version, app = %app, ?sequence, what, "delta: committed"
                    );
                    return Ok(());
                }
                Outcome::Skipped => {
                    tracing::info!(
                        table = %self.root, app = %app, ?sequence,
                        "delta: committed before; skipped"
                    );
                    return Ok(());
                }
                Outcome::Conflicted => {
                    tracing::debug!(table = %self.root, attempt, "delta: lost a version; again");
                }
                Outcome::Failed(e) => {
                    return Err(kernel_error(
                        format!("delta: committing to {}", self.root),
                        e,
                    ))
                }
            }
        }
        Err(Error::connector(
            "delta",
            format!(
                "committing to {}: lost {MAX_CONFLICTS} versions in a row to other writers",
                self.root
            ),
        ))
    }
}

/// What a commit came to.
pub(super) enum Outcome {
    /// Committed at this version; the table after it, when the kernel gives it.
    Committed(u64, Option<SnapshotRef>),
    /// Committed before.
    Skipped,
    Conflicted,
    Failed(delta_kernel::KernelError),
}

/// What a commit came to.
pub(super) fn outcome_of(result: CommitResult) -> delta_kernel::KernelResult<Outcome> {
    Ok(match result {
        CommitResult::Committed(c) => {
            Outcome::Committed(c.commit_version(), c.post_commit_snapshot().cloned())
        }
        CommitResult::Conflicted(_) => Outcome::Conflicted,
        CommitResult::Retryable(r) => Outcome::Failed(r.error),
    })
}
