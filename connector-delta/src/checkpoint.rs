//! Log checkpoints: every `delta.checkpointInterval` versions (10 unless the table says
//! otherwise) the writer whose commit made the version writes the log's checkpoint — the
//! table's state at that version in one Parquet file, with `_last_checkpoint` pointing at it —
//! so that readers, and this sink's own `txn` lookups, replay at most that many commits instead
//! of the whole log. A checkpoint only speeds reading: one that fails is logged and the next
//! due version writes one; the commit stands either way.

use std::sync::{Arc, OnceLock};

use delta_kernel::snapshot::CheckpointWriteResult;
use delta_kernel::{Snapshot, SnapshotRef};
use delta_kernel_default_engine::executor::tokio::TokioMultiThreadExecutor;
use delta_kernel_default_engine::{DefaultEngine, DefaultEngineBuilder};
use object_store::DynObjectStore;

/// Delta's default `delta.checkpointInterval`.
const DEFAULT_INTERVAL: u64 = 10;

/// Writes a table's log checkpoints when they are due.
pub(crate) struct Checkpoints {
    store: Arc<DynObjectStore>,
    /// The kernel writes checkpoints through an engine whose tasks run on a multi-threaded
    /// runtime (the commits' engine runs its own single background thread): built at the
    /// first checkpoint, on the job's runtime when it is multi-threaded, else on its own.
    engine: OnceLock<Arc<DefaultEngine<TokioMultiThreadExecutor>>>,
}

impl Checkpoints {
    pub(crate) fn new(store: Arc<DynObjectStore>) -> Self {
        Checkpoints {
            store,
            engine: OnceLock::new(),
        }
    }

    /// Whether the table at `snapshot` is due a checkpoint: its version is a multiple of the
    /// table's interval.
    pub(crate) fn due(snapshot: &Snapshot) -> bool {
        let every = snapshot
            .table_properties()
            .checkpoint_interval
            .map_or(DEFAULT_INTERVAL, |n| n.get());
        snapshot.version() > 0 && snapshot.version().is_multiple_of(every)
    }

    /// Writes the checkpoint of `snapshot` (on the blocking pool: the kernel waits on its
    /// writes); the snapshot with the checkpoint in its log, or `None` when it failed.
    pub(crate) async fn write(&self, snapshot: SnapshotRef, table: &str) -> Option<SnapshotRef> {
        let version = snapshot.version();
        let engine = match self.engine() {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(table, version, error = %e, "delta: no engine for a log checkpoint");
                return None;
            }
        };
        let written =
            tokio::task::spawn_blocking(move || snapshot.checkpoint(engine.as_ref(), None)).await;
        match written {
            Ok(Ok((result, after))) => {
                if matches!(result, CheckpointWriteResult::Written) {
                    metrics::counter!("rivus_delta_log_checkpoints").increment(1);
                    tracing::info!(table, version, "delta: wrote the log checkpoint");
                }
                Some(after)
            }
            Ok(Err(e)) => {
                tracing::warn!(table, version, error = %e, "delta: writing the log checkpoint failed; the next due version tries again");
                None
            }
            Err(e) => {
                tracing::warn!(table, version, error = %e, "delta: writing the log checkpoint panicked");
                None
            }
        }
    }

    fn engine(&self) -> delta_kernel::KernelResult<Arc<DefaultEngine<TokioMultiThreadExecutor>>> {
        if let Some(e) = self.engine.get() {
            return Ok(Arc::clone(e));
        }
        let executor = match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                Arc::new(TokioMultiThreadExecutor::new(h))
            }
            _ => owned_executor()?,
        };
        let engine = DefaultEngineBuilder::new(Arc::clone(&self.store))
            .with_task_executor(executor)
            .build();
        Ok(Arc::clone(self.engine.get_or_init(|| Arc::new(engine))))
    }
}

/// For jobs on a single-threaded runtime: one small multi-threaded runtime of the process's
/// own, kept for its life (a runtime may not be dropped inside another one, where a sink is).
fn owned_executor() -> delta_kernel::KernelResult<Arc<TokioMultiThreadExecutor>> {
    static OWNED: OnceLock<Arc<TokioMultiThreadExecutor>> = OnceLock::new();
    if let Some(e) = OWNED.get() {
        return Ok(Arc::clone(e));
    }
    let e = Arc::new(TokioMultiThreadExecutor::new_owned_runtime(Some(1), None)?);
    Ok(Arc::clone(OWNED.get_or_init(|| e)))
}
