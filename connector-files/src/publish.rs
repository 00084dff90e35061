//! [`Publish`]: a table format kept over the sink's files (Delta Lake's log, say). The sink
//! tells it which files became visible, once they are, in checkpoint order; the table decides
//! the files' columns when the sink opens, and adds the columns records bring when the sink
//! follows them.

use std::sync::Arc;

use async_trait::async_trait;

use rivus_sdk::prelude::RuntimeContext;
use rivus_sdk::Result;

use crate::encode::Column;
use crate::location::Location;
use crate::staging::Recoverable;

/// How a table lays its files out: the directory of a record's file under the files' location
/// (`name=value/…/`, ending in `/`), or why the record has none (it goes to the error policy
/// whole). The table reads a file's partition back from its directory when it records it.
pub type Layout =
    Arc<dyn Fn(&serde_json::Value) -> std::result::Result<String, String> + Send + Sync>;

/// A table over the files a [`FilesSink`](crate::FilesSink) writes.
///
/// Exactly once is the table's part as much as the sink's: a restore hands it again what the
/// restored checkpoint holds, some of which it may have recorded before the failure, so
/// [`publish`](Publish::publish) must record a `(writer, sequence)` at most once.
#[async_trait]
pub trait Publish: Send + Sync + std::fmt::Debug {
    /// At the sink subtask's open, before any file: the columns the files take (the table's),
    /// or `None` to keep the sink's own schema setting. `declared` is the sink's declared
    /// schema, if any (what a table created now would have).
    async fn open(
        &self,
        ctx: &RuntimeContext,
        declared: Option<&[Column]>,
    ) -> Result<Option<Vec<Column>>>;

    /// After [`open`](Publish::open): where the files go when the table decides it (an
    /// Iceberg table's data directory, read from its catalog), instead of the sink's own
    /// location (default).
    fn location(&self) -> Option<Location> {
        None
    }

    /// After [`open`](Publish::open): the table's partition columns, whose values name the
    /// files' directories (`col=value/`, in this order) and which the files leave out (default
    /// none).
    fn partition_columns(&self) -> Vec<String> {
        Vec::new()
    }

    /// After [`open`](Publish::open): the table's own layout of the files by record (an
    /// Iceberg table's partition spec), which replaces the sink's path template; the files
    /// keep every column (default none).
    fn layout(&self) -> Option<Layout> {
        None
    }

    /// The row the files hold for `record` (`None`: the record as it is, the default). A table
    /// that applies change records turns each into the row of a change file; an error sends
    /// the record, whole, to the error policy.
    fn row(
        &self,
        record: &serde_json::Value,
    ) -> std::result::Result<Option<serde_json::Value>, String> {
        let _ = record;
        Ok(None)
    }

    /// Adds `added` (nullable columns the records brought, not among the files' columns) to
    /// the table now — before any file holding them is published, so the table never names a
    /// file with a column it lacks — and returns the table's columns after it. Another writer
    /// may have added some already (with their own types: the table's stand); a column the
    /// table cannot take (its name clashes with one it has) is left out, and records with it
    /// go to the error policy.
    async fn evolve(&self, added: &[Column]) -> Result<Vec<Column>>;

    /// Records `files` — visible in the store now, written by `writer` (a subtask of one run,
    /// [`Recoverable::writer`]), with the same [`sequence`](Recoverable::sequence) (`None`:
    /// the job takes no checkpoints) — in the table. A writer's sequences come in increasing
    /// order; one not above the last recorded for the writer (a restore repeating it) records
    /// nothing. A new run of the job writes as new writers.
    async fn publish(
        &self,
        writer: &str,
        sequence: Option<u64>,
        files: &[Recoverable],
    ) -> Result<()>;
}
