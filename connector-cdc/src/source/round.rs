//! One round of the snapshot, as each subtask takes part in it (see `meeting.rs`): subtask 0
//! leads — plans the parts inside the exported snapshot (or takes the plan a restore gave),
//! announces the round, reads its own parts, waits for the others and a checkpoint after them,
//! and joins every part's ranges for the stream; the other subtasks join — read their parts in
//! the same snapshot and say so.

use std::sync::Arc;

use serde_json::Value;

use rivus_sdk::runtime::SourceContext;
use rivus_sdk::Result;

use super::meeting::{Meeting, Round};
use super::{plan, snapshot, CdcState, PostgresCdcSource, SnapshotProgress};
use crate::lsn::Lsn;

/// Subtask 0: reads the snapshot `name` (taken at `at`) of `tables` with the other readers.
/// `Ok(false)`: a stop came first (the snapshot resumes after a restore). The connection that
/// exported the snapshot must stay idle until this returns: the others import it.
pub(crate) async fn lead(
    source: &mut PostgresCdcSource,
    ctx: &mut SourceContext<Value, CdcState>,
    name: &str,
    at: Lsn,
    tables: &[(String, String)],
) -> Result<bool> {
    let meeting = source.meeting.clone().expect("opened");
    let readers = source.readers;
    let mut c = snapshot::import(source, name).await?;
    if ctx.state().plan.is_empty() {
        let plan = plan::make(&mut c, source, tables, readers).await?;
        ctx.state_mut().plan = plan;
    }
    let round = Round {
        name: name.to_owned(),
        at,
        readers,
        plan: ctx.state().plan.clone(),
    };
    ctx.state_mut().parts = round.parts_of(0);
    tracing::info!(
        parts = round.plan.len(),
        readers,
        "postgres-cdc: reading the snapshot"
    );
    meeting.announce(round);
    let rows = snapshot::read(source, ctx, &mut c, at, readers == 1).await?;
    snapshot::finish(c).await;
    let parts = ctx.state().parts.clone();
    ctx.state_mut().parts_read = true;
    meeting.read(0, parts.clone());
    tracing::info!(rows, "postgres-cdc: subtask 0's parts of the snapshot read");
    let parts = if readers == 1 {
        parts
    } else {
        let Some((parts, barrier)) = ctx.wait_for(meeting.all_read(readers)).await? else {
            return Ok(false);
        };
        while source.completed.latest().is_none_or(|done| done < barrier) {
            if ctx.wait_for(source.completed.changed()).await?.is_none() {
                return Ok(false);
            }
        }
        parts
    };
    let st = ctx.state_mut();
    let read = SnapshotProgress::join(parts);
    // Tables added while streaming join the ranges still in use of the tables before.
    st.snapshot = Some(match st.snapshot.take() {
        Some(mut earlier) => {
            earlier.tables.retain(|t| read.table(&t.table).is_none());
            earlier.tables.extend(read.tables);
            earlier
        }
        None => read,
    });
    st.snapshot_done = true;
    st.adding.clear();
    st.plan.clear();
    st.parts.clear();
    st.parts_read = false;
    tracing::info!("postgres-cdc: snapshot read by every subtask");
    Ok(true)
}

/// A subtask above 0: once subtask 0 announces a round, reads its parts in it. Returns when
/// they are read (or at once when a stop comes first).
pub(crate) async fn join(
    source: &PostgresCdcSource,
    ctx: &mut SourceContext<Value, CdcState>,
    meeting: &Arc<Meeting>,
) -> Result<()> {
    let Some(round) = ctx.wait_for(meeting.round()).await? else {
        return Ok(());
    };
    if source.subtask >= round.readers {
        return Ok(());
    }
    ctx.state_mut().parts = round.parts_of(source.subtask);
    let mut rows = 0;
    if ctx.state().parts.iter().any(|p| !p.done()) {
        let mut c = snapshot::import(source, &round.name).await?;
        rows = snapshot::read(source, ctx, &mut c, round.at, false).await?;
        snapshot::finish(c).await;
    }
    ctx.state_mut().parts_read = true;
    meeting.read(source.subtask, ctx.state().parts.clone());
    tracing::info!(
        subtask = source.subtask,
        rows,
        "postgres-cdc: this subtask's parts of the snapshot read"
    );
    Ok(())
}
