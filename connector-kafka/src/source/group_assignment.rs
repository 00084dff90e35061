//! The partitions Kafka's consumer group gives a source's consumer now, kept by the rebalance
//! callbacks on the consumer thread and read by the emitting loop (group mode).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use rdkafka::consumer::Rebalance;
use rdkafka::TopicPartitionList;

/// The state key of a partition: `topic/partition`.
pub(crate) fn tp_key(topic: &str, partition: i32) -> String {
    format!("{topic}/{partition}")
}

/// A state key back into topic and partition.
pub(crate) fn parse_tp(key: &str) -> Option<(String, i32)> {
    let (t, p) = key.rsplit_once('/')?;
    Some((t.to_owned(), p.parse().ok()?))
}

/// The partitions the group gave this consumer now (`topic/partition` keys), kept by the
/// rebalance callbacks and read by the emitting loop. A version counts the changes, so the
/// loop copies the sets only when they changed, not per batch.
///
/// A partition being revoked while an exactly-once sink commits the offsets is first
/// *draining* (no longer emitted, still held: its offset goes into the next transaction), then
/// gone once a transaction covered it (see `offsets_link.rs`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Assignment(Arc<Inner>);

#[derive(Debug, Default)]
struct Inner {
    sets: Mutex<Sets>,
    version: AtomicU64,
}

#[derive(Debug, Default)]
struct Sets {
    held: BTreeSet<String>,
    draining: BTreeSet<String>,
}

fn keys(tpl: &TopicPartitionList) -> Vec<String> {
    tpl.elements()
        .iter()
        .map(|e| tp_key(e.topic(), e.partition()))
        .collect()
}

impl Assignment {
    /// The partitions held now, draining ones included (their offsets still commit here).
    pub(crate) fn current(&self) -> BTreeSet<String> {
        self.0.sets.lock().held.clone()
    }

    /// The partitions whose records are emitted now: held and not draining.
    pub(crate) fn emitting(&self) -> BTreeSet<String> {
        let sets = self.0.sets.lock();
        sets.held.difference(&sets.draining).cloned().collect()
    }

    /// Changes with every rebalance that changed the sets.
    pub(crate) fn version(&self) -> u64 {
        self.0.version.load(Ordering::Acquire)
    }

    /// Stops emitting `partitions` (a revocation waiting for its transaction); returns the
    /// version that says so.
    pub(crate) fn drain(&self, partitions: BTreeSet<String>) -> u64 {
        self.0.sets.lock().draining.extend(partitions);
        self.0.version.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Follows a rebalance (cooperative: assignments and revocations are increments).
    pub(crate) fn apply(&self, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(tpl) => {
                let added = keys(tpl);
                tracing::info!(partitions = ?added, "kafka source: the group assigned partitions");
                let mut sets = self.0.sets.lock();
                for k in &added {
                    sets.draining.remove(k);
                }
                sets.held.extend(added);
                self.0.version.fetch_add(1, Ordering::Release);
            }
            Rebalance::Revoke(tpl) => {
                let gone = keys(tpl);
                tracing::info!(partitions = ?gone, "kafka source: the group revoked partitions");
                let mut sets = self.0.sets.lock();
                for k in gone {
                    sets.held.remove(&k);
                    sets.draining.remove(&k);
                }
                self.0.version.fetch_add(1, Ordering::Release);
            }
            Rebalance::Error(e) => tracing::warn!(error = %e, "kafka source: rebalance error"),
        }
    }
}

/// The keys of a rebalance's partitions.
pub(crate) fn rebalance_keys(rebalance: &Rebalance<'_>) -> BTreeSet<String> {
    match rebalance {
        Rebalance::Assign(tpl) | Rebalance::Revoke(tpl) => keys(tpl).into_iter().collect(),
        Rebalance::Error(_) => BTreeSet::new(),
    }
}
