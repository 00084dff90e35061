//! Appends: the files the sink's writers made visible, added to the table in one snapshot per
//! group commit. A writer's files wait in the table's queue (one per table and catalog in the
//! process, whichever sink instance a subtask holds); whichever writer holds the turn commits
//! everything waiting — so the sink's subtasks never race each other for the catalog's
//! compare-and-swap, and sixteen subtasks make one snapshot a checkpoint, not sixteen. The snapshot's summary names each writer and sequence, and the
//! same commit sets the table property `rivus.sequence.<writer>` of each to its sequence.
//! Before committing, that property says whether a sequence was committed already (a restore
//! repeating it): then its files are left out. A property, not the snapshots: catalogs may
//! keep fewer snapshots than were committed (Nessie's keeps the current one only; snapshot
//! expiry removes old ones), while the table's properties stay. A writer's commit removes the
//! properties of the same job's earlier runs, which no restore needs any more. A commit that
//! loses to another job's or engine's is retried by iceberg on the table as it is then, and
//! after iceberg's retries again from a reload, after a jittered wait.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use iceberg::io::Storage;
use iceberg::spec::{DataContentType, DataFile, DataFileBuilder, DataFileFormat, Struct};
use iceberg::table::Table;
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use tokio::sync::oneshot;

use rivus_connector_files::{Location, Recoverable};
use rivus_sdk::error::Fault;
use rivus_sdk::{Error, Result};

use super::IcebergTable;
use crate::error::iceberg_error;
use crate::storage::Store;

/// The snapshot summary's writers and their sequences: `<writer>:<sequence>,…` (a writer
/// without a sequence — at-least-once — alone).
pub(crate) const WRITERS: &str = "rivus.writers";
/// The snapshot summary's checkpoint: the newest one whose completion committed files of
/// the snapshot (or, for files a restore finished, the one that held them).
const CHECKPOINT: &str = "rivus.checkpoint";
/// The snapshot summary's job name.
const JOB: &str = "rivus.job";
/// The snapshot summary's sink (the job's task writing the table).
const SINK: &str = "rivus.sink";
/// The table properties holding each writer's last sequence:
/// `rivus.sequence.<job>/<sink>/<writer>`.
const COMMITTED: &str = "rivus.sequence.";
/// Rounds of iceberg's own retries a commit that keeps losing to other writers goes through.
const MAX_ROUNDS: u32 = 20;

/// What a writer's caller hears of the group commit that took its files.
type Answer = std::result::Result<(), (String, Fault)>;

/// One writer's files at one sequence, waiting for the next group commit.
pub(crate) struct Waiting {
    /// The job's name and the sink's.
    owner: (String, String),
    writer: String,
    sequence: Option<u64>,
    files: Vec<Recoverable>,
    answer: oneshot::Sender<Answer>,
}

impl Waiting {
    fn committed(&self) -> Committed<'_> {
        Committed::new(&self.owner.0, &self.owner.1, &self.writer)
    }
}

/// What the sink instances of the process writing one table share: the catalog (connected
/// once: sixteen subtasks connecting to a SQL catalog at once would race to create its
/// tables), what waits for the next group commit, and the turn to commit it.
#[derive(Default)]
pub(crate) struct Group {
    pub(super) catalog: tokio::sync::OnceCell<(std::sync::Arc<dyn iceberg::Catalog>, Store)>,
    waiting: parking_lot::Mutex<Vec<Waiting>>,
    committing: tokio::sync::Mutex<()>,
}

impl Group {
    /// The group of table `ident` of the catalog `catalog`, shared by every sink instance of
    /// the process writing it.
    pub(crate) fn of(catalog: &str, ident: &iceberg::TableIdent) -> std::sync::Arc<Group> {
        use std::sync::{Arc, LazyLock, Weak};
        static GROUPS: LazyLock<parking_lot::Mutex<HashMap<String, Weak<Group>>>> =
            LazyLock::new(Default::default);
        let key = format!("{catalog} {ident}");
        let mut groups = GROUPS.lock();
        groups.retain(|_, g| g.strong_count() > 0);
        if let Some(g) = groups.get(&key).and_then(Weak::upgrade) {
            return g;
        }
        let g = Arc::new(Group::default());
        groups.insert(key, Arc::downgrade(&g));
        g
    }
}

impl IcebergTable {
    /// Appends `files` (visible in the store) as `writer`'s `sequence`, at most once, in the
    /// next group commit (see the [module docs](self)).
    pub(super) async fn append(
        &self,
        writer: &str,
        sequence: Option<u64>,
        files: &[Recoverable],
    ) -> Result<()> {
        if files.is_empty() {
            return Ok(());
        }
        let (answer, answered) = oneshot::channel();
        self.group.waiting.lock().push(Waiting {
            owner: self.job.lock().clone(),
            writer: writer.to_owned(),
            sequence,
            files: files.to_vec(),
            answer,
        });
        {
            let _turn = self.group.committing.lock().await;
            // Empty when an earlier turn took these files along.
            let group = std::mem::take(&mut *self.group.waiting.lock());
            if !group.is_empty() {
                let outcome = self.commit_group(&group).await.map_err(|e| {
                    let fault = if e.is_retryable() {
                        Fault::Transient
                    } else {
                        Fault::Permanent
                    };
                    (e.to_string(), fault)
                });
                for w in group {
                    let _ = w.answer.send(outcome.clone());
                }
            }
        }
        match answered.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err((message, fault))) => Err(Error::client(
                format!("iceberg: the group commit to {}", self.ident),
                message,
                fault,
            )),
            Err(_) => Err(Error::connector(
                "iceberg",
                format!("the group commit to {} ended without an answer", self.ident),
            )),
        }
    }

    /// Commits `group` in one snapshot, each writer's sequence at most once; after iceberg's
    /// own retries a lost race is tried again on the table reloaded, after a jittered wait.
    async fn commit_group(&self, group: &[Waiting]) -> Result<()> {
        let mut round = 0;
        loop {
            match self.try_commit(group).await {
                Err(Conflict::Lost(e)) if round + 1 < MAX_ROUNDS => {
                    round += 1;
                    let wait = jittered(round);
                    tracing::info!(
                        table = %self.ident, round, ?wait, error = %e,
                        "iceberg: the commit lost to another writer; trying again"
                    );
                    tokio::time::sleep(wait).await;
                }
                Err(Conflict::Lost(e)) | Err(Conflict::Failed(e)) => return Err(e),
                Ok(()) => return Ok(()),
            }
        }
    }

    async fn try_commit(&self, group: &[Waiting]) -> std::result::Result<(), Conflict> {
        let data = self.data.lock().clone().ok_or_else(|| {
            Error::connector("iceberg", "files published before the table opened")
        })?;
        let table = self.load().await?;
        // Sequences committed before (a restore repeating them) are left out.
        let todo: Vec<&Waiting> = group
            .iter()
            .filter(|w| {
                let last = w.committed().last(&table);
                let done = matches!((w.sequence, last), (Some(s), Some(d)) if d >= s);
                if done {
                    tracing::info!(
                        table = %self.ident, writer = %w.writer, sequence = ?w.sequence,
                        "iceberg: the files were committed before; nothing to do"
                    );
                }
                !done
            })
            .collect();
        if todo.is_empty() {
            return Ok(());
        }
        let mut data_files = Vec::new();
        for w in &todo {
            data_files.extend(self.data_files(&table, &data, &w.files).await?);
        }
        let writers: Vec<String> = todo
            .iter()
            .map(|w| match w.sequence {
                Some(s) => format!("{}:{s}", w.writer),
                None => w.writer.clone(),
            })
            .collect();
        let distinct = |f: fn(&Waiting) -> &str| {
            let names: BTreeSet<&str> = todo.iter().map(|w| f(w)).collect();
            names.into_iter().collect::<Vec<_>>().join(",")
        };
        let mut summary = HashMap::from([
            (WRITERS.to_owned(), writers.join(",")),
            (JOB.to_owned(), distinct(|w| &w.owner.0)),
            (SINK.to_owned(), distinct(|w| &w.owner.1)),
        ]);
        if let Some(c) = todo.iter().filter_map(|w| w.sequence).map(|s| s / 2).max() {
            summary.insert(CHECKPOINT.to_owned(), c.to_string());
        }
        let what = format!(
            "iceberg: appending {} files to {}",
            data_files.len(),
            self.ident
        );
        let mut tx = Transaction::new(&table);
        let set: Vec<(String, u64)> = todo
            .iter()
            .filter_map(|w| Some((w.committed().property(), w.sequence?)))
            .collect();
        if !set.is_empty() {
            let kept: BTreeSet<&String> = set.iter().map(|(k, _)| k).collect();
            let stale: BTreeSet<String> = todo
                .iter()
                .flat_map(|w| w.committed().superseded(&table))
                .filter(|k| !kept.contains(k))
                .collect();
            let mut update = tx.update_table_properties();
            for (key, sequence) in &set {
                update = update.set(key.clone(), sequence.to_string());
            }
            for key in stale {
                update = update.remove(key);
            }
            tx = update
                .apply(tx)
                .map_err(|e| Conflict::Failed(iceberg_error(what.clone(), e)))?;
        }
        let tx = tx
            .fast_append()
            // The summary above is what makes the append once; the duplicate check would read
            // every manifest of the table at each commit.
            .with_check_duplicate(false)
            .add_data_files(data_files)
            .set_snapshot_properties(summary)
            .apply(tx)
            .map_err(|e| Conflict::Failed(iceberg_error(what.clone(), e)))?;
        let started = Instant::now();
        let catalog = self.catalog().await?;
        let table = match tx.commit(catalog.as_ref()).await {
            Ok(t) => t,
            Err(e) if e.kind() == iceberg::ErrorKind::CatalogCommitConflicts => {
                return Err(Conflict::Lost(iceberg_error(what, e)))
            }
            Err(e) => return Err(Conflict::Failed(iceberg_error(what, e))),
        };
        metrics::counter!("rivus_iceberg_commits").increment(1);
        metrics::histogram!("rivus_iceberg_commit_seconds").record(started.elapsed().as_secs_f64());
        tracing::info!(
            table = %self.ident,
            snapshot = table.metadata().current_snapshot_id(),
            writers = %writers.join(","),
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

/// How a commit attempt ended when it did not commit.
enum Conflict {
    /// Another writer took the table's next version, after iceberg's retries.
    Lost(Error),
    /// Anything else.
    Failed(Error),
}

impl From<Error> for Conflict {
    fn from(e: Error) -> Conflict {
        Conflict::Failed(e)
    }
}

/// A wait before round `round` of a commit that keeps losing: up to 100 ms × 2^round (at most
/// 5 s), drawn from the clock so that writers that lost together do not come back together.
fn jittered(round: u32) -> Duration {
    let cap = (100u64 << round.min(6)).min(5_000);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u64)
        .unwrap_or_default();
    Duration::from_millis(cap / 2 + nanos % (cap / 2 + 1))
}
