//! Appends: the files a writer made visible at one sequence, added to the table in one
//! snapshot whose summary carries the writer and the sequence, and — in the same commit — the
//! table property `rivus.sequence.<writer>` set to the sequence. Before committing, that
//! property says whether this sequence was committed already (a restore repeating it): then
//! nothing is committed. A property, not the snapshots: catalogs may keep fewer snapshots
//! than were committed (Nessie's keeps the current one only; snapshot expiry removes old
//! ones), while the table's properties stay. A writer's commit removes the properties of the
//! same job's earlier runs, which no restore needs any more. A commit that loses to another
//! writer's is retried by iceberg on the table as it is then.

use std::collections::HashMap;
use std::time::Instant;

use iceberg::io::Storage;
use iceberg::spec::{DataContentType, DataFile, DataFileBuilder, DataFileFormat, Struct};
use iceberg::table::Table;
use iceberg::transaction::{ApplyTransactionAction, Transaction};

use rivus_connector_files::{Location, Recoverable};
use rivus_core::{Error, Result};

use super::IcebergTable;
use crate::error::iceberg_error;

/// The snapshot summary's writer (a subtask of one run of the job).
pub(crate) const WRITER: &str = "rivus.writer";
/// The snapshot summary's sequence of the writer's files.
pub(crate) const SEQUENCE: &str = "rivus.sequence";
/// The snapshot summary's checkpoint: the one whose completion committed the files (or, for
/// files a restore finished, the one that held them).
const CHECKPOINT: &str = "rivus.checkpoint";
/// The snapshot summary's job name.
const JOB: &str = "rivus.job";
/// The snapshot summary's sink (the job's task writing the table).
const SINK: &str = "rivus.sink";
/// The table properties holding each writer's last sequence:
/// `rivus.sequence.<job>/<sink>/<writer>`.
const COMMITTED: &str = "rivus.sequence.";

impl IcebergTable {
    /// Appends `files` (visible in the store) as `writer`'s `sequence`, at most once.
    pub(super) async fn append(
        &self,
        writer: &str,
        sequence: Option<u64>,
        files: &[Recoverable],
    ) -> Result<()> {
        if files.is_empty() {
            return Ok(());
        }
        let data = self.data.lock().clone().ok_or_else(|| {
            Error::connector("iceberg", "files published before the table opened")
        })?;
        let table = self.load().await?;
        let (job, sink) = self.job.lock().clone();
        let key = Committed::new(&job, &sink, writer);
        if let (Some(sequence), Some(done)) = (sequence, key.last(&table)) {
            if done >= sequence {
                tracing::info!(
                    table = %self.ident, writer, sequence,
                    "iceberg: the files were committed before; nothing to do"
                );
                return Ok(());
            }
        }
        let data_files = self.data_files(&table, &data, files).await?;
        let mut summary = HashMap::from([
            (WRITER.to_owned(), writer.to_owned()),
            (JOB.to_owned(), job.clone()),
            (SINK.to_owned(), sink.clone()),
        ]);
        if let Some(sequence) = sequence {
            summary.insert(SEQUENCE.to_owned(), sequence.to_string());
            summary.insert(CHECKPOINT.to_owned(), (sequence / 2).to_string());
        }
        let what = || format!("iceberg: appending {} files to {}", files.len(), self.ident);
        let tx = Transaction::new(&table);
        let tx = match sequence {
            Some(sequence) => {
                let mut update = tx
                    .update_table_properties()
                    .set(key.property(), sequence.to_string());
                for stale in key.superseded(&table) {
                    update = update.remove(stale);
                }
                update.apply(tx).map_err(|e| iceberg_error(what(), e))?
            }
            None => tx,
        };
        let tx = tx
            .fast_append()
            // The summary above is what makes the append once; the duplicate check would read
            // every manifest of the table at each commit.
            .with_check_duplicate(false)
            .add_data_files(data_files)
            .set_snapshot_properties(summary)
            .apply(tx)
            .map_err(|e| iceberg_error(what(), e))?;
        let started = Instant::now();
        let table = tx
            .commit(self.catalog().await?.as_ref())
            .await
            .map_err(|e| iceberg_error(what(), e))?;
        metrics::counter!("rivus_iceberg_commits").increment(1);
        metrics::histogram!("rivus_iceberg_commit_seconds").record(started.elapsed().as_secs_f64());
        tracing::info!(
            table = %self.ident,
            snapshot = table.metadata().current_snapshot_id(),
            writer,
            sequence,
            files = files.len(),
            "iceberg: committed"
        );
        *self.table.lock() = Some(table);
        Ok(())
    }

    /// The data files of `files`, under the table's data directory `data`.
    async fn data_files(
        &self,
        table: &Table,
        data: &Location,
        files: &[Recoverable],
    ) -> Result<Vec<DataFile>> {
        let store = self.store().await?;
        let root = data.url();
        let partitioning = self.partitioning.lock().clone();
        let spec = match &partitioning {
            Some(p) => p.spec_id(),
            None => table.metadata().default_partition_spec_id(),
        };
        let mut out = Vec::with_capacity(files.len());
        for f in files {
            let path = format!("{}/{}", root.trim_end_matches('/'), f.key);
            let size = Storage::metadata(&store, &path)
                .await
                .map_err(|e| iceberg_error(format!("iceberg: reading the size of {path}"), e))?
                .size;
            let partition = match &partitioning {
                Some(p) => p.partition(&f.key)?,
                None => Struct::empty(),
            };
            let file = DataFileBuilder::default()
                .content(DataContentType::Data)
                .partition(partition)
                .file_path(path.clone())
                .file_format(DataFileFormat::Parquet)
                .record_count(f.records)
                .file_size_in_bytes(size)
                .partition_spec_id(spec)
                .build()
                .map_err(|e| Error::connector("iceberg", format!("the file {path}: {e}")))?;
            out.push(file);
        }
        Ok(out)
    }
}

/// The table property holding the last sequence of one sink's writer:
/// `rivus.sequence.<job>/<sink>/<writer>` — two sinks of a job writing one table, or two jobs,
/// never share one.
pub(crate) struct Committed<'a> {
    owner: String,
    writer: &'a str,
}

impl<'a> Committed<'a> {
    pub(crate) fn new(job: &str, sink: &str, writer: &'a str) -> Committed<'a> {
        Committed {
            owner: format!("{COMMITTED}{job}/{sink}/"),
            writer,
        }
    }

    /// The property's name.
    pub(crate) fn property(&self) -> String {
        format!("{}{}", self.owner, self.writer)
    }

    /// The last sequence the writer committed to `table`.
    pub(crate) fn last(&self, table: &Table) -> Option<u64> {
        table
            .metadata()
            .properties()
            .get(&self.property())
            .and_then(|s| s.parse().ok())
    }

    /// The properties of the writers this one supersedes: the same sink's from an earlier run
    /// of the job. A run commits its own files only once a checkpoint of its own completed,
    /// after every subtask finished what the restored checkpoint held — so no restore needs an
    /// earlier run's writers again.
    pub(crate) fn superseded(&self, table: &Table) -> Vec<String> {
        let Some(attempt) = attempt_of(self.writer) else {
            return Vec::new();
        };
        table
            .metadata()
            .properties()
            .keys()
            .filter(|k| {
                k.strip_prefix(self.owner.as_str())
                    .and_then(attempt_of)
                    .is_some_and(|a| a < attempt)
            })
            .cloned()
            .collect()
    }
}

/// A writer's run: `<attempt>-<job tag>-<subtask>` → the attempt (its start, ms).
fn attempt_of(writer: &str) -> Option<u64> {
    let (attempt, rest) = writer.split_once('-')?;
    rest.contains('-').then_some(())?;
    attempt.parse().ok()
}
