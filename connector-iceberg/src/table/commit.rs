//! Appends: the files a writer made visible at one sequence, added to the table in one
//! snapshot whose summary carries the writer and the sequence, and — in the same commit — the
//! table property `rivus.sequence.<writer>` set to the sequence. Before committing, that
//! property says whether this sequence was committed already (a restore repeating it): then
//! nothing is committed. A property, not the snapshots: catalogs may keep fewer snapshots
//! than were committed (Nessie's keeps the current one only; snapshot expiry removes old
//! ones), while the table's properties stay. A commit that loses to another writer's is
//! retried by iceberg on the table as it is then.

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
/// The snapshot summary's job name.
const JOB: &str = "rivus.job";
/// The table property holding a writer's last sequence: `rivus.sequence.<writer>`.
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
        if let (Some(sequence), Some(done)) = (sequence, last_sequence(&table, writer)) {
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
            (JOB.to_owned(), self.job.lock().clone()),
        ]);
        if let Some(sequence) = sequence {
            summary.insert(SEQUENCE.to_owned(), sequence.to_string());
        }
        let what = || format!("iceberg: appending {} files to {}", files.len(), self.ident);
        let tx = Transaction::new(&table);
        let tx = match sequence {
            Some(sequence) => tx
                .update_table_properties()
                .set(format!("{COMMITTED}{writer}"), sequence.to_string())
                .apply(tx)
                .map_err(|e| iceberg_error(what(), e))?,
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

/// The last sequence `writer` committed to the table.
pub(crate) fn last_sequence(table: &Table, writer: &str) -> Option<u64> {
    table
        .metadata()
        .properties()
        .get(&format!("{COMMITTED}{writer}"))
        .and_then(|s| s.parse().ok())
}
