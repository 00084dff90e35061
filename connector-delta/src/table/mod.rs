//! [`DeltaTable`]: the Delta log kept over the files sink's files. At open it reads the table
//! (or creates it from the declared columns); when files become visible it adds them in one
//! commit per writer and sequence, carrying the application transaction `txn` of the writer —
//! Delta's own idempotence: a sequence not above the table's `txn` version for the writer was
//! committed before, and is skipped. A writer is a subtask of one run of the job, so a new run
//! (not a restore) never finds its sequences taken.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use delta_kernel::arrow::array::{ArrayRef, Int64Array, StructArray};
use delta_kernel::arrow::datatypes::{DataType as ArrowType, Field};
use delta_kernel::committer::FileSystemCommitter;
use delta_kernel::engine::arrow_data::ArrowEngineData;
use delta_kernel::table_features::ColumnMappingMode;
use delta_kernel::transaction::{CommitResult, Transaction, UpdateTableOperation};
use delta_kernel::{FileMeta, Snapshot, SnapshotRef};
use delta_kernel_default_engine::executor::tokio::TokioBackgroundExecutor;
use delta_kernel_default_engine::parquet::DataFileMetadata;
use delta_kernel_default_engine::{build_add_file_metadata, DefaultEngine, DefaultEngineBuilder};
use object_store::path::Path as StorePath;
use object_store::{DynObjectStore, ObjectStoreExt};
use url::Url;

use rivus_connector_files::{Column, Publish, Recoverable};
use rivus_sdk::prelude::RuntimeContext;
use rivus_sdk::{Error, Result};

use crate::checkpoint::Checkpoints;
use crate::columns::{columns_of, schema_of};
use rivus_aws::s3::store_error;

use crate::error::kernel_error;
use crate::merge;
use crate::partition::Partitions;

mod changes;
mod commit;
mod evolve;
mod orphans;

/// What the commits say they are (the log's `commitInfo.engineInfo`).
const ENGINE_INFO: &str = concat!("rivus/", env!("CARGO_PKG_VERSION"));

/// Commits that lost to another writer's version before one of them wins: the job's own
/// subtasks commit to one table side by side, each at most once a checkpoint.
const MAX_CONFLICTS: usize = 64;

type Engine = DefaultEngine<TokioBackgroundExecutor>;

/// One Delta table, shared by the subtasks of a sink.
pub(crate) struct DeltaTable {
    /// The table's root, ending in `/`.
    root: Url,
    store: Arc<DynObjectStore>,
    /// The table's root in `store`.
    root_path: StorePath,
    engine: Arc<Engine>,
    create: bool,
    /// `apply_changes`: the key columns the changes are applied by.
    key: Option<Vec<String>>,
    /// The size of the files a merge writes (bytes of Arrow data in memory).
    file_bytes: usize,
    /// The table's partition columns, read at open.
    partitions: parking_lot::Mutex<Partitions>,
    /// Change files merged, by the checkpoint that merged them: deleted once a later
    /// checkpoint completed (a restore from theirs would make them visible again).
    merged: parking_lot::Mutex<Vec<(u64, StorePath)>>,
    /// The application id of the job's writers, `rivus-<job>-<sink>`; a writer's is
    /// `<app>-<writer>` (`<attempt>-<job tag>-<subtask>`: each run writes as new writers).
    app: parking_lot::Mutex<String>,
    /// The newest snapshot read or committed: the next read goes on from it (the log after
    /// its version) instead of reading the table's log from the start at every commit.
    latest: parking_lot::Mutex<Option<SnapshotRef>>,
    checkpoints: Checkpoints,
}

impl std::fmt::Debug for DeltaTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeltaTable")
            .field("root", &self.root.as_str())
            .finish()
    }
}

impl DeltaTable {
    /// The table at `root` (a directory URL ending in `/`) in `store`, whose paths are the
    /// URL's; `create`: created from the declared columns when missing.
    pub(crate) fn new(
        root: Url,
        store: Arc<DynObjectStore>,
        create: bool,
        key: Option<Vec<String>>,
        file_bytes: usize,
    ) -> DeltaTable {
        let engine = DefaultEngineBuilder::new(Arc::clone(&store)).build();
        let checkpoints = Checkpoints::new(Arc::clone(&store));
        let root_path = StorePath::from_url_path(root.path()).unwrap_or_default();
        DeltaTable {
            root,
            store,
            root_path,
            engine: Arc::new(engine),
            create,
            key,
            file_bytes,
            partitions: parking_lot::Mutex::new(Partitions::default()),
            merged: parking_lot::Mutex::new(Vec::new()),
            app: parking_lot::Mutex::new(String::new()),
            latest: parking_lot::Mutex::new(None),
            checkpoints,
        }
    }

    /// The application id of `writer`'s commits.
    fn app_id(&self, writer: &str) -> String {
        format!("{}-{writer}", self.app.lock())
    }

    /// Whether the table has a log.
    async fn exists(&self) -> Result<bool> {
        use futures::StreamExt;
        let log = self.root_path.clone().join("_delta_log");
        match self.store.list(Some(&log)).next().await {
            None => Ok(false),
            Some(Ok(_)) => Ok(true),
            Some(Err(e)) => Err(store_error(
                format!("delta: listing {}_delta_log", self.root),
                e,
            )),
        }
    }

    /// The newest snapshot, from the last one this table read or committed when there is one
    /// (the kernel reads the log synchronously: off the runtime's threads).
    async fn snapshot(&self) -> Result<SnapshotRef> {
        let engine = Arc::clone(&self.engine);
        let root = self.root.clone();
        let from = self.latest.lock().clone();
        let snapshot = blocking(move || match from {
            Some(s) => Snapshot::builder_from(s).build(engine.as_ref()),
            None => Snapshot::builder_for(root.as_str()).build(engine.as_ref()),
        })
        .await
        .map_err(|e| kernel_error(format!("delta: reading the table at {}", self.root), e))?;
        *self.latest.lock() = Some(Arc::clone(&snapshot));
        Ok(snapshot)
    }

    /// Creates the table with `columns`; another subtask creating it at the same time wins
    /// as well (the one version 0 is theirs or ours).
    async fn create(&self, columns: &[Column]) -> Result<()> {
        let schema = schema_of(columns)?;
        let engine = Arc::clone(&self.engine);
        let root = self.root.clone();
        let created = blocking(move || {
            delta_kernel::transaction::create_table::create_table(
                root.as_str(),
                Arc::new(schema),
                ENGINE_INFO,
                true,
            )
            .build(engine.as_ref(), Box::new(FileSystemCommitter::new()))?
            .commit(engine.as_ref())
        })
        .await;
        let created = match created {
            Ok(c) => c,
            // Another subtask created it between our look and our commit.
            Err(_) if self.exists().await? => return Ok(()),
            Err(e) => {
                return Err(kernel_error(
                    format!("delta: creating the table at {}", self.root),
                    e,
                ))
            }
        };
        match created {
            CommitResult::Committed(_) => {
                tracing::info!(table = %self.root, "delta: created the table");
                Ok(())
            }
            CommitResult::Conflicted(_) => Ok(()),
            CommitResult::Retryable(r) => Err(kernel_error(
                format!("delta: creating the table at {}", self.root),
                r.error,
            )),
        }
    }

    /// What `rivus check` says of the table (nothing written).
    pub(crate) async fn report(&self) -> Result<String> {
        if !self.exists().await? {
            return if self.create {
                Ok(format!("{}: no table yet; created at start", self.root))
            } else {
                Err(self.missing())
            };
        }
        let snapshot = self.snapshot().await?;
        Ok(format!(
            "{}: Delta table version {}, {} columns",
            self.root,
            snapshot.version(),
            snapshot.schema().fields().count()
        ))
    }

    fn missing(&self) -> Error {
        Error::config(
            "url",
            format!(
                "{} holds no Delta table (`create_table = true` creates it)",
                self.root
            ),
        )
    }

    /// The Add actions of `files` (visible in the store) for the transaction's write context.
    async fn adds(&self, files: &[Recoverable]) -> Result<Vec<(FileMeta, u64)>> {
        let mut out = Vec::with_capacity(files.len());
        for f in files {
            let path = self.root_path.clone().join_relative(&f.key);
            let meta = self
                .store
                .head(&path)
                .await
                .map_err(|e| store_error(format!("delta: reading the size of {path}"), e))?;
            let location = self
                .root
                .join(&f.key)
                .map_err(|e| Error::connector("delta", format!("file `{}`: {e}", f.key)))?;
            out.push((
                FileMeta {
                    location,
                    last_modified: meta.last_modified.timestamp_millis(),
                    size: meta.size,
                },
                f.records,
            ));
        }
        Ok(out)
    }
}

/// Paths relative to a table root.
trait JoinRelative {
    fn join_relative(self, key: &str) -> StorePath;
}

impl JoinRelative for StorePath {
    fn join_relative(self, key: &str) -> StorePath {
        key.split('/')
            .filter(|s| !s.is_empty())
            .fold(self, |p, s| p.join(s))
    }
}

#[async_trait]
impl Publish for DeltaTable {
    async fn open(
        &self,
        ctx: &RuntimeContext,
        declared: Option<&[Column]>,
    ) -> Result<Option<Vec<Column>>> {
        *self.app.lock() = format!("rivus-{}-{}", ctx.job_name(), ctx.task_name());
        // A local directory creates a version by an atomic rename; a bucket must refuse a
        // second create of one.
        if self.root.scheme() == "s3" && ctx.subtask_index() == 0 {
            crate::store::check_conditional_writes(
                self.store.as_ref(),
                &self.root,
                &self.root_path,
            )
            .await?;
        }
        if !self.exists().await? {
            match (self.create, declared) {
                (true, Some(cols)) => self.create(cols).await?,
                // No columns declared: the table starts without any, and the records' fields
                // are added as they come (`schema_evolution = "basic"`).
                (true, None) => self.create(&[]).await?,
                (false, _) => return Err(self.missing()),
            }
        }
        let snapshot = self.snapshot().await?;
        if let Some(mode) = snapshot
            .table_properties()
            .column_mapping_mode
            .filter(|m| *m != ColumnMappingMode::None)
        {
            return Err(Error::config(
                "url",
                format!(
                    "the table {} maps columns by {mode:?} (`delta.columnMapping.mode`): \
                     tables with column mapping are not written yet",
                    self.root
                ),
            ));
        }
        if let Some(d) = snapshot
            .table_properties()
            .set_transaction_retention_duration
        {
            return Err(Error::config(
                "url",
                format!(
                    "the table {} forgets application transactions after {}s \
                     (`delta.setTransactionRetentionDuration`): the sink finds the versions it \
                     committed by them, and a restore after they expired would add its files a \
                     second time; unset the property (ALTER TABLE … UNSET TBLPROPERTIES \
                     ('delta.setTransactionRetentionDuration'))",
                    self.root,
                    d.as_secs()
                ),
            ));
        }
        let columns = columns_of(&snapshot.schema())
            .map_err(|e| Error::config("url", format!("the table {}: {e}", self.root)))?;
        let partitions = Partitions::of(
            snapshot.table_configuration().logical_partition_columns(),
            &columns,
        )
        .map_err(|e| Error::config("url", format!("the table {}: {e}", self.root)))?;
        if let Some(key) = &self.key {
            if !partitions.is_empty() {
                return Err(Error::config(
                    "apply_changes",
                    format!(
                        "the table {} is partitioned by {:?}: changes are applied to \
                         unpartitioned tables only",
                        self.root,
                        partitions.names()
                    ),
                ));
            }
            self.check_changes(ctx, &snapshot, key, &columns)?;
        }
        *self.partitions.lock() = partitions;
        Ok(Some(self.file_columns(columns)))
    }

    fn partition_columns(&self) -> Vec<String> {
        self.partitions.lock().names()
    }

    fn row(
        &self,
        record: &serde_json::Value,
    ) -> std::result::Result<Option<serde_json::Value>, String> {
        match &self.key {
            Some(key) => merge::change_row(key, record).map(Some),
            None => self.partitions.lock().check(record).map(|()| None),
        }
    }

    async fn evolve(&self, added: &[Column]) -> Result<Vec<Column>> {
        self.add_columns(added).await
    }

    async fn publish(
        &self,
        writer: &str,
        sequence: Option<u64>,
        files: &[Recoverable],
    ) -> Result<()> {
        let app = self.app_id(writer);
        let adds = self.adds(files).await?;
        let Some(key) = self.key.clone() else {
            let partitions = self.partitions.lock().clone();
            let values = files
                .iter()
                .map(|f| {
                    partitions.values(&f.key).map_err(|e| {
                        Error::connector("delta", format!("the file {}{}: {e}", self.root, f.key))
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            let what = format!("{} files", files.len());
            return self
                .commit(
                    &app,
                    sequence,
                    &what,
                    UpdateTableOperation::StreamingUpdate,
                    move |_, _, txn| {
                        for ((meta, records), values) in adds.iter().cloned().zip(&values) {
                            let file = DataFileMetadata::new(meta, record_count(records)?);
                            // A partitioned table's file carries its partition values.
                            let mut context = txn.write_state()?.write_context_builder();
                            if !values.is_empty() {
                                context = context.with_partition_values(values.clone());
                            }
                            txn.add_files(build_add_file_metadata(file, &context.build()?)?);
                        }
                        Ok(())
                    },
                )
                .await;
        };
        self.publish_changes(&app, sequence, key, adds).await
    }
}

impl DeltaTable {
    /// The files' columns for the table's `columns`: without the partition columns (the
    /// directories hold them); the change files' under `apply_changes`.
    fn file_columns(&self, columns: Vec<Column>) -> Vec<Column> {
        let partitions = self.partitions.lock().names();
        let columns = columns
            .into_iter()
            .filter(|c| !partitions.contains(&c.name))
            .collect();
        match self.key {
            Some(_) => merge::change_columns(columns),
            None => columns,
        }
    }
}

/// The statistics of a file as the log takes them: its record count.
fn record_count(records: u64) -> delta_kernel::KernelResult<StructArray> {
    let n: ArrayRef = Arc::new(Int64Array::from(vec![records as i64]));
    Ok(StructArray::from(vec![(
        Arc::new(Field::new("numRecords", ArrowType::Int64, true)),
        n,
    )]))
}

/// Runs `f` on the blocking pool.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> delta_kernel::KernelResult<T> + Send + 'static,
) -> delta_kernel::KernelResult<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| delta_kernel::KernelError::generic(format!("a kernel call panicked: {e}")))?
}

#[cfg(test)]
mod tests {
    use super::*;
    use delta_kernel::arrow::array::Array;

    #[test]
    fn keys_join_below_the_root() {
        let root = StorePath::from("lake/orders");
        assert_eq!(
            root.join_relative("dt=2024-03-01/part-1.parquet").as_ref(),
            "lake/orders/dt=2024-03-01/part-1.parquet"
        );
    }

    #[test]
    fn the_statistics_count_records() {
        let s = record_count(7).unwrap();
        assert_eq!(s.num_columns(), 1);
        assert_eq!(s.len(), 1);
    }
}
