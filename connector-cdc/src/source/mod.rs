//! [`PostgresCdcSource`]: every insert, update and delete of the published tables, after a
//! consistent snapshot of them, from a logical replication slot (`pgoutput`).
//!
//! - `slot.rs`: what must exist before reading (the publication, the slot) and creating the slot;
//! - `plan.rs`: the tables cut into parts, one per subtask reading the snapshot;
//! - `meeting.rs`, `round.rs`: how the subtasks read one snapshot together;
//! - `snapshot.rs`: a subtask's parts read inside the slot's exported snapshot, by key order in
//!   chunks;
//! - `stream.rs`: the replication stream (subtask 0), positions in checkpoints, the slot
//!   confirmed when a checkpoint completes.

mod changes;
mod filter;
mod meeting;
mod plan;
mod progress;
mod round;
mod slot;
mod snapshot;
mod stream;
mod waiting;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use rivus_sdk::context::{CompletedCheckpoints, RuntimeContext};
use rivus_sdk::function::{RichFunction, SourceFunction};
use rivus_sdk::runtime::{CheckpointEvent, SourceContext};
use rivus_sdk::{DeliveryGuarantee, Error, Restored, Result};

pub use progress::{Range, SnapshotProgress, TableProgress, Upto};

use crate::event::Envelope;
use crate::lsn::Lsn;
use crate::wire::ConnParams;

/// When the tables are read whole before streaming.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SnapshotMode {
    /// Read them once, when the job starts without a checkpoint. The slot is created with an
    /// exported snapshot (exact hand-off); a slot that exists already (a run that died before
    /// its first checkpoint) is kept: the tables are read in a newer snapshot and the stream
    /// replays from the slot's position, leaving out what those rows already show.
    #[default]
    Initial,
    /// Never: stream from the slot's position (created now if missing).
    Never,
    /// Read them when the slot does not exist yet; stream from an existing slot otherwise.
    WhenNeeded,
}

/// The source's position, checkpointed. Subtask 0 streams and holds the position; every
/// subtask reading the snapshot holds its parts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CdcState {
    /// The slot was created or adopted by this job.
    pub started: bool,
    /// Every snapshot row was emitted, by whichever subtask read it (or no snapshot was
    /// wanted).
    pub snapshot_done: bool,
    /// Transactions committed before this position are done.
    pub resume: Lsn,
    /// The transaction being emitted, by its commit position, and how many of its changes
    /// were emitted.
    pub partial: Option<(Lsn, u64)>,
    /// The snapshot's ranges once every part is read, until the stream is past their newest
    /// watermark: which changes the snapshot's rows already show.
    pub snapshot: Option<SnapshotProgress>,
    /// Subtask 0, while the snapshot is read: every part, as far as the round began with.
    #[serde(default)]
    pub plan: Vec<TableProgress>,
    /// The parts this subtask reads in the current round, and how far it has.
    #[serde(default)]
    pub parts: Vec<TableProgress>,
    /// Every part in `parts` is read.
    #[serde(default)]
    pub parts_read: bool,
    /// Following the publication (no `tables` option): the tables whose snapshot is read or
    /// being read (`schema.table`); a published table not among them is new to the job.
    #[serde(default)]
    pub followed: Vec<String>,
    /// The tables of the snapshot being read for tables added to the publication while the
    /// job ran (empty otherwise): what a restore reads when no plan was checkpointed yet.
    #[serde(default)]
    pub adding: Vec<String>,
}

impl CdcState {
    /// What the slot may forget once this state is checkpointed: everything before the
    /// transaction being emitted, or before `resume`.
    pub fn confirmable(&self) -> Lsn {
        self.partial.map_or(self.resume, |(commit, _)| commit)
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) params: ConnParams,
    pub(crate) slot: String,
    pub(crate) publication: String,
    pub(crate) tables: Option<Vec<String>>,
    pub(crate) key_columns: BTreeMap<String, Vec<String>>,
    pub(crate) snapshot: SnapshotMode,
    pub(crate) chunk_rows: usize,
    pub(crate) envelope: Envelope,
    pub(crate) column_types: bool,
    pub(crate) status_interval: Duration,
    pub(crate) heartbeat: Option<String>,
    pub(crate) timeout: Duration,
}

/// Streams a PostgreSQL database's changes (see the crate's documentation).
#[derive(Debug, Clone)]
pub struct PostgresCdcSource {
    pub(crate) s: Settings,
    pub(crate) metrics: Option<rivus_sdk::context::MetricsGroup>,
    pub(crate) subtask: usize,
    /// Subtasks reading the snapshot: all of them with checkpoints, subtask 0 alone without
    /// (only a completed checkpoint proves another subtask's rows went through the job).
    pub(crate) readers: usize,
    pub(crate) meeting: Option<Arc<meeting::Meeting>>,
    pub(crate) completed: CompletedCheckpoints,
}

/// Builds a [`PostgresCdcSource`].
#[derive(Debug)]
pub struct PostgresCdcSourceBuilder {
    url: String,
    s: Settings,
}

impl PostgresCdcSource {
    /// A source reading the publication `publication` through the slot `slot`, connecting
    /// with `url` (`postgres://user:password@host:port/db`, TLS by `sslmode=verify-full` and
    /// `sslrootcert=PATH`); the user needs the REPLICATION attribute and SELECT on the tables.
    pub fn builder(
        url: impl Into<String>,
        slot: impl Into<String>,
        publication: impl Into<String>,
    ) -> PostgresCdcSourceBuilder {
        let url = url.into();
        PostgresCdcSourceBuilder {
            s: Settings {
                params: ConnParams::parse("postgres://placeholder@localhost/x", "").expect("valid"),
                slot: slot.into(),
                publication: publication.into(),
                tables: None,
                key_columns: BTreeMap::new(),
                snapshot: SnapshotMode::Initial,
                chunk_rows: 10_000,
                envelope: Envelope::Debezium,
                column_types: false,
                status_interval: Duration::from_secs(10),
                heartbeat: None,
                timeout: Duration::from_secs(10),
            },
            url,
        }
    }
}

impl PostgresCdcSourceBuilder {
    /// The tables (`schema.table`) to read; default every table of the publication.
    pub fn tables<S: Into<String>>(mut self, tables: impl IntoIterator<Item = S>) -> Self {
        self.s.tables = Some(tables.into_iter().map(Into::into).collect());
        self
    }

    /// Key columns of a table without a primary key (`schema.table`), for the snapshot's
    /// chunks.
    pub fn key_columns<S: Into<String>>(
        mut self,
        table: impl Into<String>,
        columns: impl IntoIterator<Item = S>,
    ) -> Self {
        self.s
            .key_columns
            .insert(table.into(), columns.into_iter().map(Into::into).collect());
        self
    }

    rivus_sdk::setters! {
        /// When to read the tables whole (default [`SnapshotMode::Initial`]).
        snapshot(mode: SnapshotMode) => s.snapshot;

        /// Rows per snapshot query (default 10 000).
        chunk_rows(n: usize) => s.chunk_rows;

        /// Debezium's envelope (default) or flat records.
        envelope(e: Envelope) => s.envelope;

        /// Each Debezium envelope carries its table's columns, PostgreSQL type names and key:
        /// `"columns": [{"name": "id", "type": "integer", "key": true}, …]` — what a sink
        /// creating the table downstream needs (the SQL sink's schema evolution). Default off
        /// (it adds to every record); flat records never carry them.
        column_types(on: bool) => s.column_types;

        /// How often the source reports its confirmed position to the server when nothing else
        /// happens (default 10 s; the server drops a replication connection silent for
        /// `wal_sender_timeout`, 60 s by default).
        status_interval(d: Duration) => s.status_interval;

        /// SQL run at every status interval on a connection of its own, e.g.
        /// `UPDATE rivus_heartbeat SET ts = now()` (the user needs the right to run it; checked
        /// at start). A write in the slot's database gives the stream something to confirm when
        /// the published tables are idle while other databases of the server write a lot, so the
        /// slot does not hold their WAL. Default: none (status updates and the server's keepalives
        /// move the position over idle stretches already).
        heartbeat_query(sql: impl Into<String>) => s.heartbeat = Some(sql.into());

        /// Connect timeout (default 10 s).
        timeout(d: Duration) => s.timeout;
    }

    /// Checks the settings; errors name the field (`slot`, `tables[0]`).
    pub fn build(mut self) -> Result<PostgresCdcSource> {
        self.s.params = ConnParams::parse(&self.url, "url")?;
        if self.s.column_types && self.s.envelope == Envelope::Flat {
            return Err(Error::config(
                "column_types",
                "column types ride in Debezium's envelope: set envelope = \"debezium\"",
            ));
        }
        let ident = |v: &str, field: &str| -> Result<()> {
            let ok = !v.is_empty()
                && v.len() <= 63
                && v.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
            if ok {
                Ok(())
            } else {
                Err(Error::config(
                    field.to_string(),
                    format!("`{v}`: lower-case letters, digits and `_`, at most 63"),
                ))
            }
        };
        ident(&self.s.slot, "slot")?;
        if self.s.publication.is_empty() || self.s.publication.contains('"') {
            return Err(Error::config(
                "publication",
                "a publication name (without `\"`)",
            ));
        }
        if let Some(tables) = &self.s.tables {
            for (i, t) in tables.iter().enumerate() {
                if t.split('.').count() != 2 {
                    return Err(Error::config(
                        format!("tables[{i}]"),
                        format!("`{t}`: name tables as schema.table"),
                    ));
                }
            }
        }
        if self.s.chunk_rows == 0 {
            return Err(Error::config("chunk_rows", "must be above 0"));
        }
        if self
            .s
            .heartbeat
            .as_deref()
            .is_some_and(|q| q.trim().is_empty())
        {
            return Err(Error::config("heartbeat_query", "an empty query"));
        }
        if self.s.status_interval.is_zero() {
            return Err(Error::config("status_interval", "must be above 0"));
        }
        Ok(PostgresCdcSource {
            s: self.s,
            metrics: None,
            subtask: 0,
            readers: 1,
            meeting: None,
            completed: CompletedCheckpoints::none(),
        })
    }
}

impl PostgresCdcSource {
    /// What `rivus check` says: the publication's tables, the slot's position and how many
    /// bytes of WAL it keeps (or that it will be created), reading no change.
    pub async fn report(&self) -> Result<String> {
        slot::report(&self.s).await
    }

    rivus_sdk::setters! {
        /// The same source reading another publication (for tests of refusals and tools).
        with_publication(publication: impl Into<String>) => s.publication = publication.into();
    }
}

#[async_trait]
impl RichFunction for PostgresCdcSource {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        ctx.refuse_worker_mode("the PostgreSQL CDC source (one slot)")?;
        self.subtask = ctx.subtask_index();
        self.readers = if ctx.is_checkpointing_enabled() {
            ctx.parallelism()
        } else {
            1
        };
        self.meeting = Some(meeting::Meeting::of(ctx.subtasks_shared()));
        self.completed = ctx.completed_checkpoints();
        if self.subtask > 0 {
            return Ok(());
        }
        if !ctx.is_checkpointing_enabled() {
            tracing::warn!(
                slot = %self.s.slot,
                "postgres-cdc without checkpoints never confirms a position: the slot keeps \
                 every WAL segment from its start"
            );
        }
        self.metrics = Some(
            ctx.metrics()
                .with_label("partition", format!("slot {}", self.s.slot)),
        );
        Ok(())
    }
}

#[async_trait]
impl SourceFunction for PostgresCdcSource {
    type Out = Value;
    type State = CdcState;

    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::ExactlyOnce
    }

    /// Subtask 0 takes the state of whichever subtask read the slot before (there is one),
    /// whatever the parallelism was, and — while the snapshot is read — every part as far as
    /// its reader got; the others start empty and learn their parts from subtask 0.
    fn restore_state(&mut self, restored: Restored<CdcState>) -> Result<CdcState> {
        if restored.subtask > 0 {
            return Ok(CdcState::default());
        }
        let states: Vec<CdcState> = restored.union().collect();
        let Some(mut st) = states.iter().find(|s| s.started).cloned() else {
            return Ok(CdcState::default());
        };
        if !st.snapshot_done {
            // A part's reader holds how far it got; the plan, what it began with (the reader
            // may have checkpointed before it learnt its parts).
            let mut parts: BTreeMap<usize, TableProgress> =
                st.plan.drain(..).map(|p| (p.part, p)).collect();
            for p in states.iter().flat_map(|s| &s.parts) {
                parts.insert(p.part, p.clone());
            }
            st.plan = parts.into_values().collect();
        }
        st.parts.clear();
        st.parts_read = false;
        Ok(st)
    }

    async fn run(&mut self, ctx: &mut SourceContext<Value, CdcState>) -> Result<()> {
        let meeting = self.meeting.clone().expect("opened");
        let subtask = self.subtask;
        let observer = Arc::clone(&meeting);
        ctx.on_barrier(move |id, st| {
            if st.parts_read {
                observer.barrier(subtask, id);
            }
        });
        if self.subtask > 0 {
            round::join(self, ctx, &meeting).await?;
            // Serves checkpoints until the job stops.
            ctx.wait_for(std::future::pending::<()>()).await?;
            return Ok(());
        }
        stream::run(self, ctx).await
    }

    /// The final checkpoint (taken after a graceful stop) completes after the stream closed:
    /// its position is confirmed by advancing the slot.
    async fn on_checkpoint_events(&mut self, events: Vec<CheckpointEvent<CdcState>>) -> Result<()> {
        if self.subtask > 0 {
            return Ok(());
        }
        match CheckpointEvent::latest_completed(events) {
            Some((_, done)) if done.snapshot_done => {
                slot::advance(&self.s, done.confirmable()).await
            }
            _ => Ok(()),
        }
    }
}
