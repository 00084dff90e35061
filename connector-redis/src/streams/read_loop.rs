//! The source's read loop: first this consumer's pending entries (delivered before a crash or
//! a lost connection, never acknowledged), read after a cursor per stream, then new entries;
//! in worker mode, now and then the entries other consumers left pending too long.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use redis::streams::StreamReadReply;
use rivus_sdk::error_policy::ErrorHandler;
use rivus_sdk::prelude::*;

use super::{fields_of, parse_id, Decoder, RedisStreamsSource, RedisStreamsState, StreamEntry};
use crate::redact;

/// Where the loop stands.
struct Reading<T> {
    /// The streams this subtask reads.
    owned: Vec<String>,
    handler: ErrorHandler,
    decode: Arc<Decoder<T>>,
    workers: bool,
    /// Reading this consumer's pending entries (after `cursors`), not new ones.
    recovering: bool,
    /// During recovery, entries at or before these ids were emitted already: after a restore
    /// they are acknowledged (only their XACK was lost); after a reconnect within this run
    /// they are not (their checkpoint acknowledges them). In worker mode nothing is skipped
    /// after a restore: claimed entries are older than the ids read, so an id says nothing
    /// about whether an entry was emitted before the checkpoint (at-least-once).
    skip_upto: BTreeMap<String, String>,
    ack_skipped: bool,
    cursors: Vec<String>,
    last_claim: Instant,
}

impl<T> Reading<T> {
    /// The ids to read after: the cursors while recovering, `>` (new entries) after.
    fn ids(&self) -> Vec<String> {
        if self.recovering {
            self.cursors.clone()
        } else {
            self.owned.iter().map(|_| ">".to_owned()).collect()
        }
    }

    /// After a reconnect: recover the pending entries again, skipping (without
    /// acknowledging) what was already emitted.
    fn recover_after_reconnect(&mut self, emitted: &RedisStreamsState) {
        self.recovering = true;
        self.ack_skipped = false;
        self.skip_upto = emitted.last.clone();
        self.cursors = self.owned.iter().map(|_| "0".to_owned()).collect();
    }
}

/// `run` of [`RedisStreamsSource`].
pub(super) async fn run<T: Send + 'static>(
    source: &mut RedisStreamsSource<T>,
    ctx: &mut SourceContext<T, RedisStreamsState>,
) -> Result<()> {
    let owned = source.owned();
    ctx.state_mut().last.retain(|k, _| owned.contains(k));
    if owned.is_empty() {
        ctx.wait_for(std::future::pending::<()>()).await?;
        return Ok(());
    }
    ctx.state_mut().emitted = 0;
    let workers = source.worker.is_some();
    if !workers {
        // One process: every other consumer of the group is an earlier run's.
        source.claim_pending(&owned).await?;
    }
    let mut r = Reading {
        handler: ErrorHandler::new(
            source.settings.policy.clone(),
            format!("redis-streams[{}]", source.share.subtask()),
        )
        .connector("redis-streams"),
        decode: Arc::clone(&source.decode),
        workers,
        recovering: true,
        skip_upto: if workers {
            BTreeMap::new()
        } else {
            source.restored.clone()
        },
        ack_skipped: true,
        cursors: owned.iter().map(|_| "0".to_owned()).collect(),
        last_claim: Instant::now(),
        owned,
    };
    loop {
        // Not `wait_for_or_event`: a dropped XREADGROUP may already have moved entries into
        // this consumer's pending list, and skipping them would leave a gap before later
        // ids. The read blocks at most `block_ms`, so events wait no longer than that.
        let ids = r.ids();
        let waited = ctx
            .wait_for(source.read(&r.owned, &ids, !r.recovering))
            .await?;
        source.on_events(ctx.take_events()).await?;
        let reply = match waited {
            None => return Ok(()),
            Some(read) => match read? {
                Ok(reply) if !source.broken => reply,
                lost => {
                    // A read may have been executed before the connection went: its entries
                    // sit in this consumer's pending list unseen.
                    if let Err(e) = lost {
                        tracing::warn!(error = %redact(&e.to_string()),
                            "redis source: connection lost, reconnecting");
                    }
                    if !source.reconnect(ctx).await? {
                        return Ok(());
                    }
                    source.ack(Vec::new()).await?;
                    r.recover_after_reconnect(ctx.state());
                    continue;
                }
            },
        };
        let n: usize = reply.keys.iter().map(|k| k.ids.len()).sum();
        if r.recovering && n == 0 {
            r.recovering = false;
            continue;
        }
        emit_reply(source, ctx, &mut r, reply).await?;
        if r.workers && !r.recovering && r.last_claim.elapsed() >= source.settings.claim_idle / 2 {
            r.last_claim = Instant::now();
            for (stream, id, fields) in source.claim_idle(&r.owned).await? {
                let entry = StreamEntry {
                    stream: &stream,
                    id: &id,
                    fields: &fields,
                };
                source.emit(ctx, &r.handler, &*r.decode, entry).await?;
            }
        }
    }
}

/// Emits the entries of one read, each with its id in the state; while recovering, moves
/// the cursors and skips (acknowledging them after a restore) what was emitted before.
async fn emit_reply<T: Send + 'static>(
    source: &mut RedisStreamsSource<T>,
    ctx: &mut SourceContext<T, RedisStreamsState>,
    r: &mut Reading<T>,
    reply: StreamReadReply,
) -> Result<()> {
    let mut already: Vec<(String, String)> = Vec::new();
    for key in &reply.keys {
        if r.recovering {
            if let (Some(pos), Some(last)) =
                (r.owned.iter().position(|s| *s == key.key), key.ids.last())
            {
                r.cursors[pos] = last.id.clone();
            }
        }
        for e in &key.ids {
            // Emitted before the restored checkpoint, only its XACK was lost.
            if r.recovering
                && r.skip_upto
                    .get(&key.key)
                    .is_some_and(|last| parse_id(&e.id) <= parse_id(last))
            {
                if r.ack_skipped {
                    already.push((key.key.clone(), e.id.clone()));
                }
                continue;
            }
            let fields = fields_of(&e.map);
            let entry = StreamEntry {
                stream: &key.key,
                id: &e.id,
                fields: &fields,
            };
            ctx.state_mut().last.insert(key.key.clone(), e.id.clone());
            source.emit(ctx, &r.handler, &*r.decode, entry).await?;
        }
    }
    if !already.is_empty() {
        source.ack(already).await?;
    }
    Ok(())
}
