//! The source's run: the checks at start, the snapshot when one is due, then the replication
//! stream. Each change updates the state before it is emitted (the commit position of its
//! transaction and its index there), so a checkpoint holds exactly the changes before its
//! barrier; the slot is told to forget a position only when a checkpoint holding it completes,
//! and a restore skips what the checkpoint already holds — exactly once.

use std::collections::HashSet;
use std::time::Instant;

use bytes::Bytes;
use serde_json::Value;

use rivus_sdk::runtime::{CheckpointEvent, SourceContext, Waited};
use rivus_sdk::{Error, Result};

use super::changes::{truncated, update, Step};
use super::filter::{in_snapshot, mend_move, read_of, KeyOrder};
use super::slot::{self, ident, literal};
use super::{round, CdcState, PostgresCdcSource, SnapshotMode};
use crate::error::wire_error;
use crate::event::{self, Op, Origin, Relations};
use crate::lsn::Lsn;
use crate::pgoutput::{self, Logical, StreamMessage};
use crate::wire::{Connection, WireError};

/// The transaction being read.
struct Tx {
    commit: Lsn,
    xid: u32,
    ts_ms: i64,
    /// Changes seen so far.
    index: u64,
    /// Changes the checkpoint already holds (all of them: `u64::MAX`).
    skip: u64,
}

pub(crate) async fn run(
    source: &mut PostgresCdcSource,
    ctx: &mut SourceContext<Value, CdcState>,
) -> Result<()> {
    let s = source.s.clone();
    let connect = || async {
        Connection::connect(&s.params, true, s.timeout)
            .await
            .map_err(|e| wire_error("postgres-cdc: connecting for replication", e))
    };
    let mut repl = connect().await?;
    let db = s.params.dbname.clone();
    let published = slot::publication_tables(&mut repl, &s.publication, &db).await?;
    let mut tables: Vec<(String, String)> = match &s.tables {
        Some(list) => list
            .iter()
            .map(|t| {
                let (a, b) = t.split_once('.').expect("checked by the builder");
                (a.to_owned(), b.to_owned())
            })
            .collect(),
        None => published.clone(),
    };
    for (i, t) in tables.iter().enumerate() {
        if !published.contains(t) {
            return Err(Error::refused_at(
                "postgres-cdc",
                format!("tables[{i}]"),
                format!(
                    "table `{}.{}` is not in publication `{}`: ALTER PUBLICATION {} ADD TABLE {}.{}",
                    t.0,
                    t.1,
                    s.publication,
                    ident(&s.publication),
                    ident(&t.0),
                    ident(&t.1)
                ),
            ));
        }
    }
    let mut heartbeat = match &s.heartbeat {
        Some(q) => Some(Heartbeat::start(&s, q).await?),
        None => None,
    };
    let existing = slot::find(&mut repl, &s.slot).await?;
    if let Some(found) = &existing {
        slot::check(found, &s.slot, &db)?;
    }
    let state = ctx.state().clone();
    if !state.started {
        match (existing, s.snapshot) {
            (Some(found), SnapshotMode::Initial) => {
                // A slot without a checkpoint: made by a run that died before its first
                // checkpoint, or by hand. Its position is in the past; the tables are read in
                // a newer snapshot and the stream replays from the slot's position.
                let st = ctx.state_mut();
                st.started = true;
                st.snapshot_done = false;
                st.resume = found.confirmed.unwrap_or_default();
                tracing::warn!(slot = %s.slot, at = %st.resume, "postgres-cdc: the slot exists without a checkpoint; reading the snapshot again");
                let Some(again) = snapshot_again(source, ctx, repl, &tables).await? else {
                    return Ok(());
                };
                repl = again;
            }
            (Some(found), _) => {
                let st = ctx.state_mut();
                st.started = true;
                st.snapshot_done = true;
                st.resume = found.confirmed.unwrap_or_default();
                tracing::info!(slot = %s.slot, at = %st.resume, "postgres-cdc: streaming from the existing slot");
            }
            (None, SnapshotMode::Never) => {
                let (at, _) = slot::create(&mut repl, &s, &s.slot, false, false).await?;
                let st = ctx.state_mut();
                st.started = true;
                st.snapshot_done = true;
                st.resume = at;
                tracing::info!(slot = %s.slot, %at, "postgres-cdc: slot created, no snapshot");
            }
            (None, _) => {
                let (at, name) = slot::create(&mut repl, &s, &s.slot, true, false).await?;
                let name = name.ok_or_else(|| {
                    Error::connector("postgres-cdc", "the new slot exported no snapshot")
                })?;
                {
                    let st = ctx.state_mut();
                    st.started = true;
                    st.snapshot_done = false;
                    st.resume = at;
                }
                tracing::info!(slot = %s.slot, %at, tables = tables.len(), "postgres-cdc: slot created, reading the snapshot");
                // The slot's connection stays idle meanwhile: its snapshot lives until then.
                if !round::lead(source, ctx, &name, at, &tables).await? {
                    return Ok(());
                }
            }
        }
    } else {
        let Some(found) = existing else {
            return Err(slot::lost(&s.slot));
        };
        if let Some(confirmed) = found.confirmed {
            if confirmed > state.confirmable() {
                return Err(Error::refused_at(
                    "postgres-cdc",
                    "slot",
                    format!(
                        "slot `{}` confirmed {confirmed}, past this checkpoint's position {}: \
                         the changes between are gone from the slot (was the job restored from \
                         an older checkpoint, or the slot used by another reader?)",
                        s.slot,
                        state.confirmable()
                    ),
                ));
            }
        }
        if !state.snapshot_done {
            // The plan of a snapshot begun before the checkpoint names the tables it reads;
            // a table published since is not among them, and joins as an added table once
            // this snapshot is read (it must not count as followed from the start).
            if s.tables.is_none() && state.followed.is_empty() && !state.plan.is_empty() {
                let planned: std::collections::BTreeSet<&str> =
                    state.plan.iter().map(|p| p.table.as_str()).collect();
                ctx.state_mut().followed = planned.into_iter().map(str::to_owned).collect();
            }
            // Tables added while streaming, when the run died before their plan was
            // checkpointed: only those are read again.
            let read: Vec<(String, String)> = match state.adding.is_empty() {
                true => tables.clone(),
                false => state.adding.iter().map(|t| split(t)).collect(),
            };
            let Some(again) = snapshot_again(source, ctx, repl, &read).await? else {
                return Ok(());
            };
            repl = again;
        }
    }
    let following = s.tables.is_none();
    if following && ctx.state().followed.is_empty() {
        // A first run, or a checkpoint from before tables were followed: the publication's
        // tables now are the ones read.
        ctx.state_mut().followed = tables.iter().map(|(a, b)| format!("{a}.{b}")).collect();
    }
    loop {
        // Tables published since the last run (or since the snapshot began): read first.
        let new: Vec<(String, String)> = match following {
            true => published_now(&mut repl, &s, &db)
                .await?
                .into_iter()
                .filter(|(a, b)| !ctx.state().followed.contains(&format!("{a}.{b}")))
                .collect(),
            false => Vec::new(),
        };
        if !new.is_empty() {
            let Some(again) = add_tables(source, ctx, repl, &new).await? else {
                return Ok(());
            };
            repl = again;
            tables.extend(new);
        }
        let Some(found) = stream(source, ctx, repl, &tables, &mut heartbeat).await? else {
            return Ok(());
        };
        tracing::info!(table = %format!("{}.{}", found.0, found.1), "postgres-cdc: a table joined the publication");
        repl = connect().await?;
    }
}

/// `schema.table` as its parts.
fn split(t: &str) -> (String, String) {
    let (a, b) = t.split_once('.').unwrap_or(("public", t));
    (a.to_owned(), b.to_owned())
}

/// The publication's tables now.
async fn published_now(
    repl: &mut Connection,
    s: &super::Settings,
    db: &str,
) -> Result<Vec<(String, String)>> {
    slot::publication_tables(repl, &s.publication, db).await
}

/// Reads the snapshot of `new`, tables published while the job ran, in a temporary slot's
/// exported snapshot (a position at or after the stream's), as a restore reads what is left
/// of one: the stream then resumes from the checkpointed position and leaves out each change
/// of theirs the rows read already show. `followed` names them from the start, `adding` until
/// the rows are read, so that a run dying on the way reads them (only them) again.
async fn add_tables(
    source: &mut PostgresCdcSource,
    ctx: &mut SourceContext<Value, CdcState>,
    repl: Connection,
    new: &[(String, String)],
) -> Result<Option<Connection>> {
    let names: Vec<String> = new.iter().map(|(a, b)| format!("{a}.{b}")).collect();
    tracing::info!(tables = ?names, "postgres-cdc: reading the snapshot of tables added to the publication");
    {
        let st = ctx.state_mut();
        st.followed.extend(names.iter().cloned());
        st.adding = names;
        st.snapshot_done = false;
        st.plan.clear();
    }
    // Subtask 0 reads them alone: the other subtasks took part in the first snapshot only,
    // and subtask 0's own rows go out before its streamed changes.
    let readers = std::mem::replace(&mut source.readers, 1);
    let done = snapshot_again(source, ctx, repl, new).await;
    source.readers = readers;
    done
}

/// The heartbeat query on a connection of its own.
struct Heartbeat {
    conn: Connection,
    sql: String,
}

impl Heartbeat {
    /// Connects and runs the query once: a query the user may not run is refused at start.
    async fn start(s: &super::Settings, sql: &str) -> Result<Heartbeat> {
        let mut conn = Connection::connect(&s.params, false, s.timeout)
            .await
            .map_err(|e| wire_error("postgres-cdc: connecting for the heartbeat", e))?;
        conn.query(sql).await.map_err(|e| {
            Error::refused_at(
                "postgres-cdc",
                "heartbeat_query",
                format!("the heartbeat query failed: {e}"),
            )
        })?;
        Ok(Heartbeat {
            conn,
            sql: sql.to_owned(),
        })
    }

    /// Runs the query; a failure (the server restarting) fails the task like the stream's.
    async fn beat(&mut self) -> Result<()> {
        self.conn
            .query(&self.sql)
            .await
            .map(drop)
            .map_err(|e| wire_error("postgres-cdc: the heartbeat query", e))
    }
}

/// Reads what is left of the snapshot when the slot's own exported snapshot is gone (the job
/// died during the snapshot, or before its first checkpoint): inside a temporary slot's
/// exported snapshot, later than the permanent slot's position. The stream then replays from
/// that position and leaves out each change the rows read now already show (older than their
/// range's watermark). Returns a fresh replication connection (the temporary slot goes with
/// the old one), or `None` when a stop came first.
async fn snapshot_again(
    source: &mut PostgresCdcSource,
    ctx: &mut SourceContext<Value, CdcState>,
    mut repl: Connection,
    tables: &[(String, String)],
) -> Result<Option<Connection>> {
    let s = source.s.clone();
    let temp = slot::temporary_name(&s.slot);
    // A slot's consistent point waits for every transaction running now to end — prepared
    // ones too, such as an exactly-once sink's of this very job, committed only when a
    // checkpoint completes: checkpoints go on meanwhile.
    let Some(created) = ctx
        .wait_for(slot::create(&mut repl, &s, &temp, true, true))
        .await?
    else {
        return Ok(None);
    };
    let (at, name) = created?;
    let name = name.ok_or_else(|| {
        Error::connector("postgres-cdc", "the temporary slot exported no snapshot")
    })?;
    if ctx.state().adding.is_empty() {
        tracing::warn!(slot = %s.slot, %at, "postgres-cdc: reading the snapshot again");
    } else {
        tracing::info!(slot = %s.slot, %at, "postgres-cdc: the added tables' snapshot taken");
    }
    let done = round::lead(source, ctx, &name, at, tables).await?;
    repl.close().await;
    if !done {
        return Ok(None);
    }
    Connection::connect(&s.params, true, s.timeout)
        .await
        .map(Some)
        .map_err(|e| wire_error("postgres-cdc: connecting for replication", e))
}

/// Streams from the state's position until stopped.
async fn stream(
    source: &mut PostgresCdcSource,
    ctx: &mut SourceContext<Value, CdcState>,
    mut repl: Connection,
    tables: &[(String, String)],
    heartbeat: &mut Option<Heartbeat>,
) -> Result<Option<(String, String)>> {
    let s = source.s.clone();
    let start = ctx.state().confirmable();
    repl.start_replication(&format!(
        "START_REPLICATION SLOT {} LOGICAL {start} (proto_version '1', publication_names {})",
        ident(&s.slot),
        literal(&ident(&s.publication))
    ))
    .await
    .map_err(|e| stream_error(&s.slot, e))?;
    tracing::info!(slot = %s.slot, %start, "postgres-cdc: streaming");
    let wanted: HashSet<(&str, &str)> = tables
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let metrics = source.metrics.clone();
    let lag = metrics
        .as_ref()
        .map(|m| m.gauge("rivus_postgres_cdc_lag_bytes"));
    let changes = metrics
        .as_ref()
        .map(|m| m.counter("rivus_postgres_cdc_changes"));
    let mut relations = Relations::new();
    let mut order = KeyOrder::default();
    let mut tx: Option<Tx> = None;
    let mut confirmed = start;
    let mut wal_end = start;
    let mut last_status = Instant::now();
    loop {
        let waited = ctx
            .wait_for_or_event(tokio::time::timeout(s.status_interval, repl.recv_copy()))
            .await?;
        let mut reply = false;
        if let Some((_, done)) = CheckpointEvent::latest_completed(ctx.take_events()) {
            if done.snapshot_done && done.confirmable() > confirmed {
                confirmed = done.confirmable();
                reply = true;
            }
        }
        let data = match waited {
            Waited::Ready(Ok(Ok(Some(data)))) => data,
            // Quiet for a status interval: say where we are.
            Waited::Ready(Err(_)) => {
                reply = true;
                Bytes::new()
            }
            Waited::Event => Bytes::new(),
            Waited::Ready(Ok(Err(e))) => return Err(stream_error(&s.slot, e)),
            Waited::Ready(Ok(Ok(None))) => {
                return Err(Error::connector(
                    "postgres-cdc",
                    "the server ended the replication stream",
                ))
            }
            Waited::Stopped => {
                if reply {
                    let update = pgoutput::status_update(confirmed, now_micros());
                    let _ = repl.send_copy(&update).await;
                }
                repl.close().await;
                return Ok(None);
            }
        };
        if !data.is_empty() {
            let bad = |e: std::io::Error| Error::connector("postgres-cdc: replication stream", e);
            match pgoutput::stream_message(data).map_err(bad)? {
                StreamMessage::Keepalive {
                    wal_end: end,
                    reply: r,
                } => {
                    wal_end = wal_end.max(end);
                    reply |= r;
                    // Everything committed before `end` was sent before this message.
                    if tx.is_none() {
                        let st = ctx.state_mut();
                        if st.partial.is_none() && end > st.resume {
                            st.resume = end;
                        }
                    }
                }
                StreamMessage::XLogData { wal_end: end, data } => {
                    wal_end = wal_end.max(end);
                    let msg = pgoutput::logical(data).map_err(bad)?;
                    let new = apply(
                        ctx,
                        &s,
                        msg,
                        &mut relations,
                        &mut tx,
                        &wanted,
                        &mut order,
                        changes.as_ref(),
                    )
                    .await?;
                    if let Some(table) = new {
                        // The change is not emitted: the stream resumes at it after the
                        // table's rows are read.
                        repl.close().await;
                        return Ok(Some(table));
                    }
                }
            }
        }
        if reply || last_status.elapsed() >= s.status_interval {
            if let Some(h) = heartbeat
                .as_mut()
                .filter(|_| last_status.elapsed() >= s.status_interval)
            {
                h.beat().await?;
            }
            repl.send_copy(&pgoutput::status_update(confirmed, now_micros()))
                .await
                .map_err(|e| stream_error(&s.slot, e))?;
            last_status = Instant::now();
            if let Some(g) = &lag {
                g.set(wal_end.0.saturating_sub(confirmed.0) as f64);
            }
        }
    }
}

/// One logical message: a transaction's bounds, a relation, or row changes (one each, but two
/// for an update of the key), each emitted by [`emit`].
#[allow(clippy::too_many_arguments)]
async fn apply(
    ctx: &mut SourceContext<Value, CdcState>,
    s: &super::Settings,
    msg: Logical,
    relations: &mut Relations,
    tx: &mut Option<Tx>,
    wanted: &HashSet<(&str, &str)>,
    order: &mut KeyOrder,
    changes_counter: Option<&metrics::Counter>,
) -> Result<Option<(String, String)>> {
    let (rel_id, changes) = match msg {
        Logical::Begin {
            final_lsn,
            commit_micros,
            xid,
        } => {
            let st = ctx.state();
            let skip = if final_lsn < st.resume {
                u64::MAX
            } else {
                match st.partial {
                    Some((commit, n)) if commit == final_lsn => n,
                    _ => 0,
                }
            };
            *tx = Some(Tx {
                commit: final_lsn,
                xid,
                ts_ms: commit_micros / 1000,
                index: 0,
                skip,
            });
            return Ok(None);
        }
        Logical::Commit { end_lsn, .. } => {
            if tx.take().is_some() {
                let st = ctx.state_mut();
                st.partial = None;
                st.resume = st.resume.max(end_lsn);
                // Past the snapshot's newest watermark, no change is in its rows any more.
                if st.snapshot_done
                    && st
                        .snapshot
                        .as_ref()
                        .is_some_and(|p| st.resume >= p.newest())
                {
                    st.snapshot = None;
                }
            }
            return Ok(None);
        }
        Logical::Relation(mut r) => {
            if r.replica_identity == b'f' {
                // Every column is marked as the identity: the key is the table's own.
                let key = order.primary_key(s, &r.schema, &r.name).await?;
                r = r.with_key(&key);
            }
            relations.insert(r.oid, r);
            return Ok(None);
        }
        Logical::Insert { rel, new } => (rel, vec![Step::new(Op::Create, None, Some(new))]),
        Logical::Update { rel, old, new } => {
            let Some(r) = relations.get(&rel) else {
                return Err(Error::connector(
                    "postgres-cdc",
                    format!("a change of relation {rel} before its description"),
                ));
            };
            (rel, update(r, old, new))
        }
        Logical::Delete { rel, old } => (rel, vec![Step::new(Op::Delete, Some(old.1), None)]),
        Logical::Truncate { rels } => {
            let names: Vec<String> = rels
                .iter()
                .filter_map(|r| relations.get(r))
                .filter(|r| wanted.contains(&(r.schema.as_str(), r.name.as_str())))
                .map(|r| format!("{}.{}", r.schema, r.name))
                .collect();
            if names.is_empty() {
                return Ok(None);
            }
            return Err(truncated(&names, tx.as_ref().map(|t| t.commit)));
        }
        Logical::Other => return Ok(None),
    };
    let mut changes = changes;
    if let (Some(rel), Some(t)) = (relations.get(&rel_id), tx.as_ref()) {
        if changes.len() == 2 && wanted.contains(&(rel.schema.as_str(), rel.name.as_str())) {
            let read = read_of(ctx, rel, t.commit);
            mend_move(read.as_ref(), s, rel, &mut changes, t.commit, order).await?;
        }
    }
    for step in changes {
        let new = emit(
            ctx,
            s,
            rel_id,
            step,
            relations,
            tx,
            wanted,
            order,
            changes_counter,
        )
        .await?;
        if new.is_some() {
            return Ok(new);
        }
    }
    Ok(None)
}

/// One change of a message: counted in its transaction (the index a restore skips up to, one
/// per change, so a key update's delete and insert are counted apart), emitted when it is of a
/// wanted table and the checkpoint does not hold it yet.
#[allow(clippy::too_many_arguments)]
async fn emit(
    ctx: &mut SourceContext<Value, CdcState>,
    s: &super::Settings,
    rel_id: u32,
    Step {
        op,
        before,
        after,
        marker,
    }: Step,
    relations: &Relations,
    tx: &mut Option<Tx>,
    wanted: &HashSet<(&str, &str)>,
    order: &mut KeyOrder,
    changes: Option<&metrics::Counter>,
) -> Result<Option<(String, String)>> {
    let t = tx.as_mut().ok_or_else(|| {
        Error::connector(
            "postgres-cdc",
            "a change outside a transaction in the stream",
        )
    })?;
    t.index += 1;
    if t.index <= t.skip {
        return Ok(None);
    }
    let position = (t.commit, t.index);
    let rel = relations.get(&rel_id).ok_or_else(|| {
        Error::connector(
            "postgres-cdc",
            format!("a change of relation {rel_id} before its description"),
        )
    })?;
    if !wanted.contains(&(rel.schema.as_str(), rel.name.as_str())) {
        if s.tables.is_none() {
            // Following the publication, and this table joined it: its rows are read first.
            return Ok(Some((rel.schema.clone(), rel.name.clone())));
        }
        ctx.state_mut().partial = Some(position);
        return Ok(None);
    }
    ctx.state_mut().partial = Some(position);
    let before = before.map(|d| event::row(rel, &d));
    let after = after.map(|d| event::row(rel, &d));
    let row = after.as_ref().or(before.as_ref());
    let read = read_of(ctx, rel, t.commit);
    if in_snapshot(read.as_ref(), s, row, t.commit, order).await? {
        return Ok(None);
    }
    let origin = Origin {
        db: &s.params.dbname,
        lsn: t.commit,
        xid: t.xid,
        ts_ms: t.ts_ms,
        snapshot: "false",
    };
    let mut record = event::record(
        s.envelope,
        op,
        (&rel.schema, &rel.name),
        before,
        after,
        &origin,
        s.column_types.then_some(&rel.types),
    );
    if let (Some((field, key)), Value::Object(m)) = (marker, &mut record) {
        m.insert(field.into(), Value::Object(event::key(rel, &key)));
    }
    if let Some(c) = changes {
        c.increment(1);
    }
    ctx.collect(record).await.map(|()| None)
}

/// An error of the stream: a slot that lost its WAL says so; the rest is retried.
fn stream_error(slot: &str, e: WireError) -> Error {
    let text = e.to_string();
    if text.contains("invalidated") || text.contains("can no longer get changes") {
        return slot::lost(slot);
    }
    if e.code() == Some("42704") {
        return slot::lost(slot);
    }
    wire_error(format!("postgres-cdc: replication slot `{slot}`"), e)
}

/// Microseconds since the Unix epoch, now.
fn now_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}
