//! [`DeltaTable`]: the Delta log kept over the files sink's files. At open it reads the table
//! (or creates it from the declared columns); when files become visible it adds them in one
//! commit per writer and sequence, carrying the application transaction `txn` of the writer —
//! Delta's own idempotence: a sequence not above the table's `txn` version for the writer was
//! committed before, and is skipped. A writer is a subtask of one run of the job, so a new run
//! (not a restore) never finds its sequences taken.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::SystemTime;

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
use rivus_core::prelude::RuntimeContext;
use rivus_core::{Error, Result};

use crate::checkpoint::Checkpoints;
use crate::columns::{columns_of, schema_of};
use rivus_aws::s3::store_error;

use crate::error::kernel_error;
use crate::merge;
use crate::partition::Partitions;

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

    /// The data files under the table's root that its newest version does not name, by key:
    /// files a failure left (a job that never restarted from the checkpoint holding them —
    /// a restore commits them — or whose state was lost) or another writer's abandoned ones.
    /// The table's own directories (`_delta_log/`, the sink's `_rivus/`) and hidden entries
    /// (`_`- or `.`-prefixed, as Delta readers skip them) are not data. The sink never removes
    /// a file from a table; a file another engine removed (a compaction) is listed too, as it
    /// is no longer in the newest version — older versions (time travel) may still read it,
    /// and `VACUUM` keeps it for its retention.
    pub(crate) async fn orphans(&self) -> Result<Vec<Orphan>> {
        use futures::StreamExt;
        if !self.exists().await? {
            return Err(self.missing());
        }
        let snapshot = self.snapshot().await?;
        let engine = Arc::clone(&self.engine);
        let named = blocking(move || {
            let scan = snapshot.scan_builder().build()?;
            let mut named = HashSet::new();
            for meta in scan.scan_metadata(engine.as_ref())? {
                named = meta?.visit_scan_files(named, |named, file| {
                    named.insert(file.path);
                })?;
            }
            Ok(named)
        })
        .await
        .map_err(|e| kernel_error(format!("delta: reading the files of {}", self.root), e))?;
        let named: HashSet<String> = named.iter().map(|p| self.relative(p)).collect();
        let mut out = Vec::new();
        let mut listing = self.store.list(Some(&self.root_path));
        while let Some(meta) = listing.next().await {
            let meta = meta.map_err(|e| store_error(format!("delta: listing {}", self.root), e))?;
            let key = meta
                .location
                .prefix_match(&self.root_path)
                .map(|parts| parts.map(|p| p.as_ref().to_owned()).collect::<Vec<_>>())
                .unwrap_or_default();
            if key.is_empty() || key.iter().any(|p| p.starts_with('_') || p.starts_with('.')) {
                continue;
            }
            let key = decode(&key.join("/"));
            if !named.contains(&key) {
                out.push(Orphan {
                    key,
                    size: meta.size,
                    modified: meta.last_modified.into(),
                });
            }
        }
        out.sort_by(|a, b| a.modified.cmp(&b.modified).then(a.key.cmp(&b.key)));
        Ok(out)
    }

    /// A path of the log (relative and percent-encoded, or an absolute URL) as a key below
    /// the root.
    fn relative(&self, path: &str) -> String {
        let path = path.strip_prefix(self.root.as_str()).unwrap_or(path);
        decode(path)
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
        if !self.exists().await? {
            match (self.create, declared) {
                (true, Some(cols)) => self.create(cols).await?,
                (true, None) => {
                    return Err(Error::config(
                        "schema",
                        format!(
                            "the table {} does not exist: declare its columns to create it",
                            self.root
                        ),
                    ))
                }
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
        let columns = |snapshot: &SnapshotRef| {
            columns_of(&snapshot.schema())
                .map(|c| self.file_columns(c))
                .map_err(|e| Error::connector("delta", format!("the table {}: {e}", self.root)))
        };
        for attempt in 0..MAX_CONFLICTS {
            let snapshot = self.snapshot().await?;
            let taken: HashSet<String> = snapshot
                .schema()
                .fields()
                .map(|f| f.name().to_lowercase())
                .collect();
            let new: Vec<Column> = added
                .iter()
                .filter(|c| addable(&c.name, &taken))
                .cloned()
                .collect();
            if new.is_empty() {
                return columns(&snapshot);
            }
            let fields = schema_of(&new)?;
            let engine = Arc::clone(&self.engine);
            let outcome = blocking(move || -> delta_kernel::KernelResult<Outcome> {
                let mut builder = Arc::clone(&snapshot).update_table(
                    UpdateTableOperation::AlterTable,
                    ENGINE_INFO,
                    false,
                );
                for f in fields.fields() {
                    builder = builder.add_column(f.clone());
                }
                let txn = builder.build(engine.as_ref(), Box::new(FileSystemCommitter::new()))?;
                outcome_of(txn.commit(engine.as_ref())?)
            })
            .await
            .map_err(|e| kernel_error(format!("delta: adding columns to {}", self.root), e))?;
            match outcome {
                Outcome::Committed(version, snapshot) => {
                    let snapshot = match snapshot {
                        Some(s) => {
                            *self.latest.lock() = Some(Arc::clone(&s));
                            s
                        }
                        None => self.snapshot().await?,
                    };
                    let names: Vec<&str> = new.iter().map(|c| c.name.as_str()).collect();
                    tracing::info!(table = %self.root, version, columns = ?names,
                        "delta: columns added");
                    return columns(&snapshot);
                }
                Outcome::Conflicted => {
                    tracing::debug!(table = %self.root, attempt, "delta: lost a version; again");
                }
                Outcome::Failed(e) => {
                    return Err(kernel_error(
                        format!("delta: adding columns to {}", self.root),
                        e,
                    ))
                }
                Outcome::Skipped => unreachable!("schema changes carry no transaction id"),
            }
        }
        Err(Error::connector(
            "delta",
            format!(
                "adding columns to {}: lost {MAX_CONFLICTS} versions in a row to other writers",
                self.root
            ),
        ))
    }

    async fn publish(
        &self,
        writer: &str,
        sequence: Option<u64>,
        files: &[Recoverable],
    ) -> Result<()> {
        let app = self.app_id(writer);
        let mut adds = self.adds(files).await?;
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
        // The change files in the order they were written (their names sort so).
        adds.sort_by(|a, b| a.0.location.as_str().cmp(b.0.location.as_str()));
        let last = self.changes_of(&key, &adds).await?;
        let what = format!("{} changed keys", last.len());
        let (engine, root) = (Arc::clone(&self.engine), self.root.clone());
        let file_bytes = self.file_bytes;
        let handle = tokio::runtime::Handle::current();
        self.commit(
            &app,
            sequence,
            &what,
            UpdateTableOperation::Merge,
            move |snapshot, engine2, txn| {
                let context = txn.write_state()?.write_context_builder().build()?;
                let mut added = Vec::new();
                let applied = merge::apply(
                    engine2,
                    snapshot,
                    (&root, &key, file_bytes),
                    &last,
                    &mut |batch| {
                        let data = ArrowEngineData::new(batch);
                        added.push(handle.block_on(engine.write_parquet(&data, &context))?);
                        Ok(())
                    },
                )?;
                if applied.unknown > 0 {
                    tracing::warn!(
                    rows = applied.unknown,
                    "delta: written rows whose unchanged columns had no earlier value (left null)"
                );
                }
                tracing::debug!(
                    read = applied.read,
                    rewritten = applied.rewritten,
                    written = added.len(),
                    "delta: merge"
                );
                let table = root.to_string();
                metrics::counter!("rivus_delta_merge_files_read", "table" => table.clone())
                    .increment(applied.read as u64);
                metrics::counter!("rivus_delta_merge_files_rewritten", "table" => table)
                    .increment(applied.rewritten as u64);
                for a in added {
                    txn.add_files(a);
                }
                for r in applied.removes {
                    txn.remove_files(r);
                }
                Ok(())
            },
        )
        .await?;
        self.forget_merged(sequence, &adds).await;
        Ok(())
    }
}

impl DeltaTable {
    /// Commits one version made by `stage` on the newest snapshot, as `app`'s `sequence` (a
    /// sequence committed before is skipped), built again on a newer one when another writer
    /// took the version.
    async fn commit(
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

    /// Refuses to apply changes where they would come out wrong: keys that are not columns,
    /// more than one subtask (one key's changes must stay in order), deletion vectors (a
    /// rewrite would bring their rows back).
    fn check_changes(
        &self,
        ctx: &RuntimeContext,
        snapshot: &SnapshotRef,
        key: &[String],
        columns: &[Column],
    ) -> Result<()> {
        if let Some(k) = key.iter().find(|k| !columns.iter().any(|c| &c.name == *k)) {
            return Err(Error::config(
                "key",
                format!("`{k}` is not a column of the table {}", self.root),
            ));
        }
        if ctx.parallelism() > 1 {
            return Err(Error::config(
                "apply_changes",
                format!(
                    "applying changes needs one sink subtask (each key's changes in order), \
                     not {}",
                    ctx.parallelism()
                ),
            ));
        }
        if snapshot.table_properties().enable_deletion_vectors == Some(true) {
            return Err(Error::config(
                "apply_changes",
                format!(
                    "the table {} has deletion vectors enabled, which the sink does not \
                     write: rewriting a file would bring their rows back",
                    self.root
                ),
            ));
        }
        Ok(())
    }

    /// The last change of each key in the change files `adds`, read on the blocking pool.
    async fn changes_of(
        &self,
        key: &[String],
        adds: &[(FileMeta, u64)],
    ) -> Result<std::collections::BTreeMap<String, merge::Last>> {
        let snapshot = self.snapshot().await?;
        let columns = columns_of(&snapshot.schema())
            .map_err(|e| Error::connector("delta", format!("the table {}: {e}", self.root)))?;
        let schema = Arc::new(schema_of(&merge::change_columns(columns))?);
        let (engine, key, files) = (Arc::clone(&self.engine), key.to_vec(), adds.to_vec());
        blocking(move || {
            let mut rows = Vec::new();
            for (file, _) in &files {
                for batch in merge::read(engine.as_ref(), file, &schema)? {
                    rows.extend(merge::rows_of(&batch)?);
                }
            }
            merge::reduce(&key, rows)
        })
        .await
        .map_err(|e| kernel_error(format!("delta: reading the changes for {}", self.root), e))
    }

    /// Queues the change files just merged for deletion, and deletes those merged at an
    /// earlier checkpoint than `sequence`'s (no restore can make them visible again now).
    async fn forget_merged(&self, sequence: Option<u64>, adds: &[(FileMeta, u64)]) {
        let paths = adds
            .iter()
            .filter_map(|(file, _)| StorePath::from_url_path(file.location.path()).ok());
        let due: Vec<StorePath> = match sequence {
            // Without checkpoints no restore comes back to them: gone at once.
            None => paths.collect(),
            Some(s) => {
                let checkpoint = s / 2;
                let mut merged = self.merged.lock();
                merged.extend(paths.map(|p| (checkpoint, p)));
                let (due, kept) = std::mem::take(&mut *merged)
                    .into_iter()
                    .partition(|(c, _)| *c < checkpoint);
                *merged = kept;
                due.into_iter().map(|(_, p)| p).collect()
            }
        };
        for path in due {
            if let Err(e) = self.store.delete(&path).await {
                tracing::warn!(%path, error = %e, "delta: deleting a merged change file failed");
            }
        }
    }
}

/// A data file under a table's root that the table does not name (see
/// [`DeltaSinkBuilder::orphans`](crate::DeltaSinkBuilder::orphans)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Orphan {
    /// Its key below the table's root.
    pub key: String,
    /// Its size in bytes.
    pub size: u64,
    /// When the store last modified it.
    pub modified: SystemTime,
}

/// Percent-decodes a key as the Delta log encodes paths.
fn decode(path: &str) -> String {
    percent_encoding::percent_decode_str(path)
        .decode_utf8_lossy()
        .into_owned()
}

enum Outcome {
    /// Committed at this version; the table after it, when the kernel gives it.
    Committed(u64, Option<SnapshotRef>),
    /// Committed before.
    Skipped,
    Conflicted,
    Failed(delta_kernel::KernelError),
}

/// What a commit came to.
fn outcome_of(result: CommitResult) -> delta_kernel::KernelResult<Outcome> {
    Ok(match result {
        CommitResult::Committed(c) => {
            Outcome::Committed(c.commit_version(), c.post_commit_snapshot().cloned())
        }
        CommitResult::Conflicted(_) => Outcome::Conflicted,
        CommitResult::Retryable(r) => Outcome::Failed(r.error),
    })
}

/// Characters a Delta column name cannot hold without column mapping (Parquet's).
const NOT_IN_NAMES: &[char] = &[' ', ',', ';', '{', '}', '(', ')', '\n', '\t', '='];

/// Whether a column `name` can be added to a table whose columns, in lower case, are
/// `taken`: not there in any case (Delta's names are case-insensitive), and without the
/// characters Delta refuses.
fn addable(name: &str, taken: &HashSet<String>) -> bool {
    !taken.contains(&name.to_lowercase()) && !name.contains(NOT_IN_NAMES) && !name.is_empty()
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
    fn a_column_is_added_unless_its_name_is_taken_in_any_case_or_bad() {
        let taken = HashSet::from(["id".to_owned(), "name".to_owned()]);
        assert!(addable("amount", &taken));
        assert!(!addable("Name", &taken), "case-insensitive");
        assert!(!addable("a b", &taken), "a space");
        assert!(!addable("k=v", &taken));
        assert!(!addable("", &taken));
    }

    #[test]
    fn the_statistics_count_records() {
        let s = record_count(7).unwrap();
        assert_eq!(s.num_columns(), 1);
        assert_eq!(s.len(), 1);
    }
}
