//! The consumer-group commands of the Streams source: reading (per hash slot on a cluster)
//! and claiming the entries other consumers left pending.

use redis::streams::{
    StreamAutoClaimOptions, StreamAutoClaimReply, StreamReadOptions, StreamReadReply,
};
use redis::AsyncCommands;
use rivus_sdk::prelude::*;

use super::{rerr, RedisStreamsSource};
use crate::connection::{by_slot, RedisConnection};

impl<T: Send + 'static> RedisStreamsSource<T> {
    /// Moves every pending entry of the owned streams that another consumer of the group holds
    /// (a subtask of an earlier run with another parallelism, or one that no longer exists)
    /// to this consumer, so the recovery below sees it: without this, entries delivered to a
    /// consumer that is gone would stay pending forever.
    pub(super) async fn claim_pending(&mut self, owned: &[String]) -> Result<usize> {
        let me = self.consumer();
        let group = self.settings.group.clone();
        let con = self.con.as_mut().ok_or(Error::Closed("redis source"))?;
        let mut claimed = 0;
        for s in owned {
            let pending: redis::streams::StreamPendingReply = con
                .xpending(s, &group)
                .await
                .map_err(|e| rerr(&format!("XPENDING {s}"), e))?;
            let others = match &pending {
                redis::streams::StreamPendingReply::Data(d) => {
                    d.consumers.iter().any(|c| c.name != me)
                }
                _ => false,
            };
            if !others {
                continue;
            }
            let mut start = "0-0".to_owned();
            loop {
                let opts = StreamAutoClaimOptions::default().count(1000).with_justid();
                let reply: StreamAutoClaimReply = con
                    .xautoclaim_options(s, &group, &me, 0, &start, opts)
                    .await
                    .map_err(|e| rerr(&format!("XAUTOCLAIM {s}"), e))?;
                claimed += reply.claimed.len();
                if reply.next_stream_id == "0-0" {
                    break;
                }
                start = reply.next_stream_id;
            }
        }
        if claimed > 0 {
            tracing::info!(claimed, consumer = %me, "redis source: claimed pending entries of other consumers");
        }
        Ok(claimed)
    }

    /// Worker mode: claims the entries of the owned streams pending longer than `claim_idle`
    /// with any consumer of the group (a worker that died, or one so slow that its entries
    /// wait that long), at most 1 000 per stream per round, and returns them to be emitted.
    pub(super) async fn claim_idle(
        &mut self,
        owned: &[String],
    ) -> Result<Vec<(String, String, Vec<(String, Vec<u8>)>)>> {
        let me = self.consumer();
        let group = self.settings.group.clone();
        let idle = self.settings.claim_idle.as_millis() as usize;
        let con = self.con.as_mut().ok_or(Error::Closed("redis source"))?;
        let mut out = Vec::new();
        for s in owned {
            let mut start = "0-0".to_owned();
            let mut claimed = 0;
            while claimed < 1000 {
                let opts = StreamAutoClaimOptions::default().count(100);
                let r: redis::RedisResult<StreamAutoClaimReply> = con
                    .xautoclaim_options(s, &group, &me, idle, &start, opts)
                    .await;
                let reply = match r {
                    Ok(reply) => reply,
                    // The next round tries again; the read loop notices the connection.
                    Err(e) if crate::transient(&e) => break,
                    Err(e) => return Err(rerr(&format!("XAUTOCLAIM {s}"), e)),
                };
                claimed += reply.claimed.len();
                for e in reply.claimed {
                    let fields = super::fields_of(&e.map);
                    out.push((s.clone(), e.id, fields));
                }
                if reply.next_stream_id == "0-0" {
                    break;
                }
                start = reply.next_stream_id;
            }
        }
        if !out.is_empty() {
            metrics::counter!("rivus_redis_claimed_total").increment(out.len() as u64);
            tracing::info!(claimed = out.len(), consumer = %me,
                "redis source: claimed entries pending longer than claim_idle");
        }
        Ok(out)
    }

    /// Reads entries: per stream, an id to read this consumer's pending entries after, or `>`
    /// for new ones.
    pub(super) async fn read(
        &mut self,
        streams: &[String],
        ids: &[String],
        block: bool,
    ) -> Result<redis::RedisResult<StreamReadReply>> {
        let (group, consumer, count) = (&self.settings.group, self.consumer(), self.settings.count);
        let opts = || {
            StreamReadOptions::default()
                .group(group, &consumer)
                .count(count)
        };
        let block_ms = block.then_some(self.settings.block_ms);
        let con = self.con.as_mut().ok_or(Error::Closed("redis source"))?;
        let reply = if con.is_cluster() {
            read_by_slot(con, streams, ids, opts, block_ms).await
        } else {
            let opts = match block_ms {
                Some(ms) => opts().block(ms),
                None => opts(),
            };
            con.xread_options(streams, ids, &opts).await
        };
        match reply {
            Ok(r) => Ok(Ok(r.unwrap_or_default())),
            Err(e) if crate::transient(&e) => Ok(Err(e)),
            Err(e) => Err(rerr("XREADGROUP", e)),
        }
    }
}

/// On a cluster, one XREADGROUP may only name streams of one hash slot: read each slot's
/// streams without blocking, and when none has anything, block on the first slot's (entries of
/// the others then wait at most one block).
async fn read_by_slot(
    con: &mut RedisConnection,
    streams: &[String],
    ids: &[String],
    opts: impl Fn() -> StreamReadOptions,
    block_ms: Option<usize>,
) -> redis::RedisResult<Option<StreamReadReply>> {
    let pairs: Vec<(&String, &String)> = streams.iter().zip(ids).collect();
    let groups = by_slot(pairs, |(s, _)| s.as_str());
    let mut out = StreamReadReply::default();
    for (i, g) in groups.iter().enumerate() {
        let (ss, is): (Vec<&String>, Vec<&String>) = g.iter().copied().unzip();
        let last = i + 1 == groups.len();
        let this = match block_ms {
            Some(ms) if last && out.keys.is_empty() => opts().block(ms),
            _ => opts(),
        };
        let r: Option<StreamReadReply> = con.xread_options(&ss, &is, &this).await?;
        if let Some(r) = r {
            out.keys.extend(r.keys);
        }
    }
    Ok(Some(out))
}
