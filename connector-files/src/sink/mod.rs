//! [`FilesSink`]: records into files, one open file per partition directory, rolled on size,
//! age and when too many are open; exactly once by a two-phase commit (see `staging/`):
//!
//! - at a checkpoint every open file is made durable as far as it goes (its upload's parts and
//!   a kept tail, or a synced local file) and the files rolled since are pre-committed; the
//!   state holds both;
//! - when the checkpoint completes, the rolled files are committed (made visible);
//! - a restore commits what the checkpoint holds — rolled files, and open files finished as
//!   the checkpoint saw them (their trailer, a Parquet footer, is in the state) — and throws
//!   away files in progress that no checkpoint refers to. Records after the checkpoint come
//!   again from the source into new files.
//!
//! Files are not rolled at checkpoints: their size is `target_file_size` whatever the
//! checkpoint interval. The rolled files pending by checkpoint, and the order of commits and of
//! the restore's commits and clean-up, are core's [`TwoPhaseCommit`] over [`FilesCommitter`].

mod builder;
mod open_file;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use rivus_sdk::error_policy::{ErrorHandler, ErrorPolicy};
use rivus_sdk::prelude::*;
use rivus_sdk::two_phase::{Committer, TwoPhaseCommit};
use rivus_sdk::Share;

use crate::encode::{Column, ColumnType, Encoder, FileFormat, Schema, SchemaSource};
use crate::location::{Location, S3Options};
use crate::path::{file_name, PathTemplate};
use crate::publish::{Layout, Publish};
use crate::staging::{LocalStaging, Recoverable, S3Staging, Staging};
use rivus_sdk::SchemaEvolution;

pub use builder::FilesSinkBuilder;
use open_file::OpenFile;

/// What a checkpoint holds of a sink subtask.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilesState {
    /// Files open at the checkpoint, as far as it holds them.
    pub open: Vec<Recoverable>,
    /// Files closed and not committed yet.
    pub closed: Vec<Recoverable>,
}

#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) location: Location,
    pub(crate) s3: S3Options,
    pub(crate) format: FileFormat,
    pub(crate) schema: SchemaSource,
    pub(crate) evolution: SchemaEvolution,
    pub(crate) path: PathTemplate,
    pub(crate) target_file_size: u64,
    pub(crate) rollover: Duration,
    /// Every open file closed at each checkpoint.
    pub(crate) roll_at_checkpoints: bool,
    pub(crate) part_size: usize,
    pub(crate) row_group_bytes: usize,
    pub(crate) max_open_files: usize,
    pub(crate) policy: ErrorPolicy,
    /// A table kept over the files.
    pub(crate) publish: Option<Arc<dyn Publish>>,
}

/// The attempt's name, shared by the subtasks: new files carry it, and a restore's clean-up
/// spares it.
struct Attempt(String);

/// Writes records into files, exactly once (see the crate's README: the commit protocol).
pub struct FilesSink {
    s: Arc<Settings>,
    staging: Option<Staging>,
    schema: Option<Schema>,
    /// The partition directories: the setting's, or the table's partition columns.
    path: PathTemplate,
    /// The table's partition columns (left out of the files).
    partitions: Vec<String>,
    /// The table's own layout of the files, in place of `path`.
    layout: Option<Layout>,
    /// Fields the table would not take as columns (their records go to the error policy).
    refused: HashSet<String>,
    files: HashMap<String, OpenFile>,
    /// Rolled since the last checkpoint.
    closed: Vec<Recoverable>,
    /// Rolled, by the checkpoint that holds them, until it completes.
    txns: Option<TwoPhaseCommit<FilesCommitter>>,
    restored: Option<Restored<FilesState>>,
    subtask: usize,
    parallelism: usize,
    checkpointing: bool,
    attempt: String,
    job_tag: String,
    seq: u64,
    /// The last checkpoint snapshotted: the end of the input commits under it.
    last_checkpoint: u64,
    errors: ErrorHandler,
}

impl std::fmt::Debug for FilesSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilesSink")
            .field("location", &self.s.location.url())
            .field("format", &self.s.format)
            .field("open", &self.files.len())
            .finish()
    }
}

impl FilesSink {
    /// A sink writing under `url` (`s3://bucket/prefix` or `file:///dir`).
    pub fn builder(url: impl Into<String>) -> FilesSinkBuilder {
        FilesSinkBuilder::new(url.into())
    }

    pub(crate) fn from_settings(s: Settings) -> FilesSink {
        let errors = ErrorHandler::new(s.policy.clone(), s.location.url()).connector("files");
        FilesSink {
            path: s.path.clone(),
            partitions: Vec::new(),
            layout: None,
            s: Arc::new(s),
            staging: None,
            schema: None,
            refused: HashSet::new(),
            files: HashMap::new(),
            closed: Vec::new(),
            txns: None,
            restored: None,
            subtask: 0,
            parallelism: 1,
            checkpointing: false,
            attempt: String::new(),
            job_tag: String::new(),
            seq: 0,
            last_checkpoint: 0,
            errors,
        }
    }

    /// What `rivus check` says: the destination is reached (a listing, nothing written).
    pub async fn report(&self) -> Result<String> {
        match &self.s.location {
            Location::S3 { bucket, prefix } => {
                use futures::StreamExt;
                use object_store::ObjectStore;
                let client = crate::location::s3_client(bucket, &self.s.s3)?.store;
                let at = object_store::path::Path::from(prefix.as_str());
                let first = client.list(Some(&at)).next().await;
                match first {
                    Some(Err(e)) => Err(crate::error::store_error(
                        format!("files: listing {}", self.s.location.url()),
                        e,
                    )),
                    _ => Ok(format!("{} reached", self.s.location.url())),
                }
            }
            Location::Local(dir) => {
                let probe = dir.join("_rivus");
                std::fs::create_dir_all(&probe)
                    .map(|_| format!("{} writable", dir.display()))
                    .map_err(|e| Error::io(format!("files: creating {}", probe.display()), e))
            }
        }
    }

    fn staging(&self) -> &Staging {
        self.staging.as_ref().expect("opened")
    }

    fn txns(&mut self) -> &mut TwoPhaseCommit<FilesCommitter> {
        self.txns.as_mut().expect("opened")
    }

    /// Hands the files made visible since the last call to the table, one call per writer
    /// and sequence ([`Recoverable::sequence`]), oldest first.
    async fn publish(&mut self) -> Result<()> {
        let Some(table) = self.s.publish.clone() else {
            return Ok(());
        };
        let checkpointing = self.checkpointing;
        let mut visible = std::mem::take(&mut self.txns().committer_mut().visible);
        visible.sort_by(|a, b| (a.writer(), a.sequence).cmp(&(b.writer(), b.sequence)));
        for group in visible.chunk_by(|a, b| (a.writer(), a.sequence) == (b.writer(), b.sequence)) {
            let sequence = checkpointing.then_some(group[0].sequence);
            table.publish(group[0].writer(), sequence, group).await?;
        }
        Ok(())
    }

    /// Closes the file of `dir`: committed now without checkpoints, at the next completed
    /// checkpoint with them.
    async fn roll(&mut self, dir: &str) -> Result<()> {
        let Some(file) = self.files.remove(dir) else {
            return Ok(());
        };
        let rec = file.close(self.staging()).await?;
        tracing::debug!(key = %rec.key, records = rec.records, "files: rolled");
        if self.checkpointing {
            self.closed.push(rec);
        } else {
            self.txns().committer_mut().commit(&rec).await?;
            self.publish().await?;
        }
        Ok(())
    }

    /// Rolls the files open longer than `rollover`.
    async fn roll_old(&mut self) -> Result<()> {
        let old: Vec<String> = self
            .files
            .iter()
            .filter(|(_, f)| f.opened.elapsed() >= self.s.rollover)
            .map(|(d, _)| d.clone())
            .collect();
        for d in old {
            self.roll(&d).await?;
        }
        Ok(())
    }

    /// The open file of `dir`, opened now if needed (rolling the oldest when too many are).
    async fn file(&mut self, dir: &str) -> Result<&mut OpenFile> {
        if !self.files.contains_key(dir) {
            if self.files.len() >= self.s.max_open_files {
                let oldest = self
                    .files
                    .iter()
                    .min_by_key(|(_, f)| f.opened)
                    .map(|(d, _)| d.clone())
                    .expect("at least one open");
                self.roll(&oldest).await?;
            }
            self.seq += 1;
            let id = format!(
                "{}-{}-{:03}-{:06}",
                self.attempt, self.job_tag, self.subtask, self.seq
            );
            let name = file_name(
                &self.attempt,
                &self.job_tag,
                self.subtask,
                self.seq,
                &self.s.format.extension(),
            );
            let key = format!("{dir}{name}");
            let up = self.staging().begin(&key, &id).await?;
            let enc = Encoder::new(
                &self.s.format,
                self.schema.as_ref(),
                self.s.row_group_bytes,
                &key,
            )?;
            self.files.insert(dir.to_owned(), OpenFile::new(up, enc));
        }
        Ok(self.files.get_mut(dir).expect("present"))
    }

    async fn reject(&self, record: &Value, reason: &str) -> Result<()> {
        let payload = serde_json::to_vec(record).unwrap_or_default();
        self.errors
            .handle(self.s.location.url(), reason, &payload)
            .await
    }
}

#[async_trait]
impl RichFunction for FilesSink {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        self.subtask = ctx.subtask_index();
        self.parallelism = ctx.parallelism();
        self.checkpointing = ctx.is_checkpointing_enabled();
        self.attempt = ctx
            .subtasks_shared()
            .get_or_insert_with(|| Attempt(format!("{:013}", rivus_sdk::calendar::now_ms())))
            .0
            .clone();
        let job = ctx.job_name().replace(['/', ' '], "_");
        self.job_tag = crate::staging::job_tag(ctx.job_name());
        // The table first: it names the files' columns and may place them, and what the
        // restore below makes visible is recorded in it under this job's name.
        let declared = match &self.s.schema {
            SchemaSource::Declared(cols) => Some(cols.as_slice()),
            _ => None,
        };
        let table_columns = match &self.s.publish {
            Some(table) => table.open(ctx, declared).await?,
            None => None,
        };
        let location = match self.s.publish.as_ref().and_then(|t| t.location()) {
            Some(location) => location,
            None => self.s.location.clone(),
        };
        let staging = match &location {
            Location::S3 { bucket, prefix } => {
                let client = crate::location::s3_client(bucket, &self.s.s3)?;
                Staging::S3(Arc::new(S3Staging::new(client, prefix, &job)))
            }
            Location::Local(dir) => Staging::Local(Arc::new(LocalStaging::new(dir.clone(), &job))),
        };
        self.staging = Some(staging.clone());
        // What the checkpoint holds — rolled files and open ones as far as it saw them — is
        // committed by the subtask that owns their writer now; what no checkpoint refers to is
        // thrown away.
        let restored = self.restored.take().unwrap_or_else(|| {
            Restored::fresh(ctx.task_name(), ctx.subtask_index(), ctx.parallelism())
        });
        let mut txns = TwoPhaseCommit::new(FilesCommitter {
            staging,
            attempt: self.attempt.clone(),
            keep_visible: self.s.publish.is_some(),
            visible: Vec::new(),
        });
        txns.recover(restored.map(|s| s.closed.into_iter().chain(s.open).collect()))
            .await?;
        self.txns = Some(txns);
        self.publish().await?;
        if let Some(table) = &self.s.publish {
            self.layout = table.layout();
            self.partitions = table.partition_columns();
            if !self.partitions.is_empty() {
                let template: String = self
                    .partitions
                    .iter()
                    .map(|p| format!("{p}={{{p}}}/"))
                    .collect();
                self.path = PathTemplate::parse(&template, "path")?;
            }
        }
        let partitions = self.partitions.clone();
        self.schema = match (table_columns, &self.s.schema) {
            (Some(cols), SchemaSource::Declared(declared)) => {
                Some(Schema::new(json_kept(cols, declared)).skipping(&partitions))
            }
            (Some(cols), _) => Some(Schema::new(cols).skipping(&partitions)),
            (None, SchemaSource::Declared(cols)) => Some(Schema::new(cols.clone())),
            (None, SchemaSource::Registry { config, subject }) => {
                Some(Schema::new(registry_columns(config, subject).await?))
            }
            (None, SchemaSource::Infer) => None,
        };
        Ok(())
    }
}

/// `columns` (a table's) with a `json` column where `known` has one and the table stores a
/// string: the table keeps JSON as text, and the sink still takes any value for it.
fn json_kept(columns: Vec<Column>, known: &[Column]) -> Vec<Column> {
    columns
        .into_iter()
        .map(|mut c| {
            if c.ty == ColumnType::String
                && known
                    .iter()
                    .any(|k| k.name == c.name && k.ty == ColumnType::Json)
            {
                c.ty = ColumnType::Json;
            }
            c
        })
        .collect()
}

/// The columns of the latest Avro schema of `subject`.
async fn registry_columns(
    config: &rivus_formats::RegistryConfig,
    subject: &str,
) -> Result<Vec<crate::encode::Column>> {
    let field = "schema_subject";
    let registry = rivus_formats::Registry::new(config, "registry")?;
    let got = registry.latest(subject).await.map_err(|e| e.into_error())?;
    if got.schema_type != rivus_formats::registry::SchemaType::Avro {
        return Err(Error::refused_at(
            "files sink",
            field,
            format!(
                "subject `{subject}` holds a {:?} schema; the columns come from an Avro record",
                got.schema_type
            ),
        ));
    }
    if !got.references.is_empty() {
        return Err(Error::refused_at(
            "files sink",
            field,
            format!("subject `{subject}`'s schema references others; declare the columns instead"),
        ));
    }
    let avro = apache_avro::Schema::parse_str(&got.text)
        .map_err(|e| Error::refused_at("files sink", field, format!("subject `{subject}`: {e}")))?;
    crate::encode::avro_columns(&avro)
        .map_err(|e| Error::refused_at("files sink", field, format!("subject `{subject}`: {e}")))
}

#[async_trait]
impl CheckpointedFunction for FilesSink {
    type State = FilesState;

    async fn initialize_state(&mut self, restored: Restored<FilesState>) -> Result<()> {
        self.restored = Some(restored);
        Ok(())
    }

    async fn snapshot_state(&mut self, checkpoint_id: u64) -> Result<FilesState> {
        if self.s.roll_at_checkpoints {
            let dirs: Vec<String> = self.files.keys().cloned().collect();
            for d in dirs {
                self.roll(&d).await?;
            }
        }
        self.roll_old().await?;
        let staging = self.staging.clone().expect("opened");
        let mut open = Vec::with_capacity(self.files.len());
        let mut dirs: Vec<&String> = self.files.keys().collect();
        dirs.sort();
        let dirs: Vec<String> = dirs.into_iter().cloned().collect();
        for d in dirs {
            let f = self.files.get_mut(&d).expect("listed");
            open.push(
                f.checkpoint(&staging, checkpoint_id, self.s.part_size)
                    .await?,
            );
        }
        let mut closed = std::mem::take(&mut self.closed);
        for rec in &mut closed {
            rec.sequence = Recoverable::closed_at(checkpoint_id);
        }
        self.txns().pre_committed(checkpoint_id, closed);
        self.last_checkpoint = checkpoint_id;
        Ok(FilesState {
            open,
            closed: self.txns().state(),
        })
    }
}

#[async_trait]
impl CheckpointListener for FilesSink {
    async fn notify_checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<()> {
        self.txns().commit_up_to(checkpoint_id).await?;
        self.publish().await
    }
}

#[async_trait]
impl SinkFunction<Value> for FilesSink {
    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::ExactlyOnce
    }

    async fn invoke(&mut self, value: Value, ctx: &SinkContext) -> Result<()> {
        let ts = ctx.timestamp();
        self.write_batch(&[value], &|_| ts).await
    }

    async fn invoke_batch(&mut self, values: Vec<Value>, ctx: &mut SinkContext) -> Result<()> {
        let ctx = &*ctx;
        self.write_batch(&values, &|i| ctx.timestamp_at(i)).await
    }

    /// The end of the input (after the job's final checkpoint, which holds every record):
    /// every file is closed and committed now, like the Kafka sink's last transaction.
    async fn finish(&mut self) -> Result<()> {
        let dirs: Vec<String> = self.files.keys().cloned().collect();
        for d in dirs {
            self.roll(&d).await?;
        }
        // The final checkpoint held these files open as they end now.
        let mut closed = std::mem::take(&mut self.closed);
        for rec in &mut closed {
            rec.sequence = Recoverable::open_at(self.last_checkpoint);
        }
        self.txns().pre_committed(u64::MAX, closed);
        self.txns().commit_all().await?;
        self.publish().await
    }
}

/// Makes rolled files visible, and on restore throws away files no checkpoint refers to.
#[derive(Debug)]
pub(crate) struct FilesCommitter {
    staging: Staging,
    /// This run's attempt, whose files (started now by other subtasks) a clean-up spares.
    attempt: String,
    /// Whether a table is kept over the files: then the files made visible wait in
    /// `visible` for it.
    keep_visible: bool,
    pub(crate) visible: Vec<Recoverable>,
}

#[async_trait]
impl Committer for FilesCommitter {
    type Txn = Recoverable;

    /// From the file's id, `<attempt>-<job tag>-<subtask>-<sequence>`.
    fn writer_of(&self, rec: &Recoverable) -> Option<usize> {
        rec.id.split('-').nth(2)?.parse().ok()
    }

    /// Finishes the file from what the checkpoint holds and makes it visible; a file
    /// committed before is left as it is.
    async fn commit(&mut self, rec: &Recoverable) -> Result<()> {
        self.staging.commit(rec).await?;
        self.staging.forget(rec).await;
        if self.keep_visible {
            self.visible.push(rec.clone());
        }
        metrics::counter!("rivus_files_committed").increment(1);
        metrics::counter!("rivus_files_committed_records").increment(rec.records);
        tracing::info!(key = %rec.key, records = rec.records, "files: committed");
        Ok(())
    }

    /// Subtask 0 throws away every file in progress of this job that no restored one is.
    async fn abort_others(&mut self, restored: &[Recoverable], share: Share) -> Result<u64> {
        if share.subtask() != 0 {
            return Ok(0);
        }
        let keep: HashSet<String> = restored.iter().map(|r| r.id.clone()).collect();
        let thrown = self.staging.clean(&keep, &self.attempt).await?;
        if thrown > 0 {
            tracing::info!(
                thrown,
                "files: threw away files in progress no checkpoint refers to"
            );
        }
        Ok(thrown)
    }
}

impl FilesSink {
    /// Adds the fields of `records` that are not columns yet (see [`SchemaEvolution::Basic`]):
    /// through the table when there is one, which may take fewer; then the open files are
    /// closed, and the next ones have the new columns.
    async fn evolve(&mut self, records: &[&Value]) -> Result<()> {
        let Some(schema) = &self.schema else {
            return Ok(());
        };
        let added = schema.added(records, &self.refused);
        if added.is_empty() {
            return Ok(());
        }
        let known: Vec<Column> = schema.columns.iter().chain(&added).cloned().collect();
        let columns = match &self.s.publish {
            Some(table) => json_kept(table.evolve(&added).await?, &known),
            None => known,
        };
        for a in added
            .iter()
            .filter(|a| !columns.iter().any(|c| c.name == a.name))
        {
            tracing::warn!(
                field = %a.name, "files: the table does not take the field as a column; \
                its records go to the error policy"
            );
            self.refused.insert(a.name.clone());
        }
        if columns == schema.columns {
            return Ok(());
        }
        let new: Vec<&str> = columns
            .iter()
            .filter(|c| !schema.columns.iter().any(|o| o.name == c.name))
            .map(|c| c.name.as_str())
            .collect();
        tracing::info!(columns = ?new, "files: columns added");
        metrics::counter!("rivus_files_columns_added").increment(new.len() as u64);
        let dirs: Vec<String> = self.files.keys().cloned().collect();
        for d in dirs {
            self.roll(&d).await?;
        }
        self.schema = Some(Schema::new(columns).skipping(&self.partitions));
        Ok(())
    }

    async fn write_batch(
        &mut self,
        values: &[Value],
        event_time: &(dyn Fn(usize) -> Option<i64> + Sync),
    ) -> Result<()> {
        // What is written: each record without its metadata (which a path may read), as
        // the table's files hold it.
        let mut written: Vec<std::borrow::Cow<'_, Value>> =
            values.iter().map(rivus_sdk::metadata::without).collect();
        let mut dropped = vec![false; values.len()];
        if let Some(table) = self.s.publish.clone() {
            for (i, w) in written.iter_mut().enumerate() {
                match table.row(w) {
                    Ok(None) => {}
                    Ok(Some(row)) => *w = std::borrow::Cow::Owned(row),
                    Err(reason) => {
                        self.reject(&values[i], &reason).await?;
                        dropped[i] = true;
                    }
                }
            }
        }
        let kept: Vec<&Value> = written
            .iter()
            .zip(&dropped)
            .filter(|(_, d)| !**d)
            .map(|(v, _)| &**v)
            .collect();
        if self.schema.is_none() && self.s.format.columnar() {
            let objects: Vec<&Value> = kept.iter().copied().filter(|v| v.is_object()).collect();
            if !objects.is_empty() {
                self.schema = Some(Schema::infer(&objects)?);
            }
        } else if self.s.evolution == SchemaEvolution::Basic {
            self.evolve(&kept).await?;
        }
        // Records by directory, in order (one directory for all when the template has no
        // field).
        let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
        let mut at: HashMap<String, usize> = HashMap::new();
        let fixed = match self.layout {
            Some(_) => None,
            None => self.path.fixed(),
        };
        if let Some(dir) = &fixed {
            groups.push((
                dir.clone(),
                (0..values.len()).filter(|i| !dropped[*i]).collect(),
            ));
        }
        for (i, v) in values
            .iter()
            .enumerate()
            .filter(|(i, _)| fixed.is_none() && !dropped[*i])
        {
            let dir = match &self.layout {
                Some(layout) => layout(v),
                None => self.path.render(v, event_time(i)),
            };
            match dir {
                Ok(dir) => {
                    let g = match at.get(&dir) {
                        Some(g) => *g,
                        None => {
                            groups.push((dir.clone(), Vec::new()));
                            at.insert(dir, groups.len() - 1);
                            groups.len() - 1
                        }
                    };
                    groups[g].1.push(i);
                }
                Err(reason) => {
                    self.reject(v, &format!("no partition for the record: {reason}"))
                        .await?
                }
            }
        }
        let staging = self.staging.clone().expect("opened");
        for (dir, idx) in groups {
            let records: Vec<&Value> = idx.iter().map(|&i| &*written[i]).collect();
            if self.s.format.columnar() && self.schema.is_none() {
                for r in records {
                    self.reject(r, "the record is not a JSON object").await?;
                }
                continue;
            }
            let part_size = self.s.part_size;
            let file = self.file(&dir).await?;
            let rejected = file.write(&staging, &records, part_size).await?;
            let full = file.size() >= self.s.target_file_size;
            for r in rejected {
                self.reject(records[r.index], &r.reason).await?;
            }
            if full {
                self.roll(&dir).await?;
            }
        }
        self.roll_old().await
    }
}
