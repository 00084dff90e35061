//! What a group-mode [`KafkaSource`](crate::KafkaSource) shares with whatever commits its
//! offsets to the group, so that a revocation can wait for a commit covering the revoked
//! partitions before they move (a graceful rebalance then repeats nothing).
//!
//! In group mode the group's committed offsets, not the checkpoint, say where a partition
//! resumes — wherever it moves. Two committers:
//! - the source itself (`group_commit.rs`), when a checkpoint completes: at-least-once, and
//!   a rebalance repeats nothing the completed checkpoint covered;
//! - an exactly-once [`KafkaSink`](crate::KafkaSink) chained into the task (KIP-447): it
//!   commits them inside the transaction that holds the records read before them
//!   (`send_offsets_to_transaction` with the consumer's group metadata), at each checkpoint's
//!   barrier: records and offsets become visible in one step. A worker the group has already
//!   replaced is fenced by the group coordinator (its generation is stale), so its
//!   transaction aborts.
//!
//! - a sink that keeps the positions in its own database (rivus-sdk's
//!   [`PositionsInSink`](rivus_sdk::PositionsInSink): the SQL sink's positions table) commits
//!   them in its transaction at each barrier; the source claims the partitions it is assigned
//!   from that table (`lag.rs`) and reports revocations through this link as for a Kafka sink.
//!
//! Through this link:
//! - the source hands over its consumer (for the group metadata) and, at every barrier, its
//!   positions (`SourceContext::on_barrier`);
//! - the sink says that it commits the offsets (the source then commits none);
//! - a revocation waits (on the consumer thread, inside the rebalance) until a commit covering
//!   everything emitted for the revoked partitions has happened; from the moment the emitting
//!   loop sees the revocation, records of those partitions are dropped (the new owner reads
//!   them from the committed offset).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use rdkafka::consumer::ConsumerGroupMetadata;

use super::group_assignment::Assignment;

/// Barriers kept for a completion at most (a checkpoint completes within a few barriers).
const MAX_PENDING: usize = 64;

/// `topic/partition` → next offset to read (the source's state).
type Positions = std::collections::BTreeMap<String, i64>;

/// The consumer's group metadata now; `None` once the consumer is gone.
pub(crate) type GroupMetadata = Box<dyn Fn() -> Option<ConsumerGroupMetadata> + Send + Sync>;

/// The positions a source snapshot at one barrier, and the assignment version its emitting loop
/// had applied by then.
#[derive(Debug, Clone)]
pub(crate) struct AtBarrier {
    pub id: u64,
    pub positions: Positions,
    pub seen: u64,
}

/// What the source side registers when it opens.
struct SourceSide {
    metadata: GroupMetadata,
    assignment: Assignment,
    alive: Arc<AtomicBool>,
}

/// The link of one task (see the module docs), kept in its
/// [`TaskShared`](rivus_sdk::TaskShared).
#[derive(Default)]
pub(crate) struct OffsetsLink {
    sink_commits: AtomicBool,
    source: Mutex<Option<SourceSide>>,
    barrier: Mutex<Option<AtBarrier>>,
    /// The source commits: barriers whose checkpoints have not completed yet.
    pending: Mutex<BTreeMap<u64, AtBarrier>>,
    /// The assignment version the emitting loop applies now.
    loop_seen: AtomicU64,
    /// The emitting loop waits for the consumer thread (applies any version it sees next).
    loop_idle: AtomicBool,
    /// The newest assignment version a commit covers.
    committed: Mutex<Option<u64>>,
    committed_changed: Condvar,
    /// A revocation gave up waiting: the open transaction must not commit.
    broken: AtomicBool,
    /// The task's link to a sink that keeps the positions in its database, if any.
    kept: Mutex<Option<Arc<rivus_sdk::PositionsInSink>>>,
}

impl OffsetsLink {
    /// The sink commits the source's offsets in its transactions.
    pub(crate) fn set_sink_commits(&self) {
        self.sink_commits.store(true, Ordering::Release);
    }

    /// Whether the sink commits the source's offsets (the source then commits none): a Kafka
    /// sink in its transactions, or a sink that keeps them in its database.
    pub(crate) fn sink_commits(&self) -> bool {
        self.sink_commits.load(Ordering::Acquire) || self.kept().is_some()
    }

    /// Joins the task's [`PositionsInSink`](rivus_sdk::PositionsInSink): a commit of the
    /// positions there counts as a commit here (a revocation waiting for it goes on).
    pub(crate) fn join_kept(self: &Arc<Self>, kept: Arc<rivus_sdk::PositionsInSink>) {
        let weak = Arc::downgrade(self);
        kept.on_committed(move |id| {
            if let Some(link) = weak.upgrade() {
                if let Some(at) = link.take_barrier(id) {
                    link.committed(at.seen);
                }
            }
        });
        *self.kept.lock() = Some(kept);
    }

    /// The task's [`PositionsInSink`](rivus_sdk::PositionsInSink) once a sink registered
    /// its store there.
    pub(crate) fn kept(&self) -> Option<Arc<rivus_sdk::PositionsInSink>> {
        self.kept.lock().clone().filter(|k| k.has_store())
    }

    /// The source opened: its consumer's group metadata, assignment and liveness flag.
    pub(crate) fn set_source(
        &self,
        metadata: GroupMetadata,
        assignment: Assignment,
        alive: Arc<AtomicBool>,
    ) {
        *self.source.lock() = Some(SourceSide {
            metadata,
            assignment,
            alive,
        });
        *self.committed.lock() = None;
        self.broken.store(false, Ordering::Release);
    }

    /// Whether a source opened.
    pub(crate) fn has_source(&self) -> bool {
        self.source.lock().is_some()
    }

    /// The group metadata of the source's consumer and its assignment, while it is open.
    pub(crate) fn source(&self) -> Option<(ConsumerGroupMetadata, Assignment)> {
        let side = self.source.lock();
        let side = side.as_ref()?;
        Some(((side.metadata)()?, side.assignment.clone()))
    }

    /// The emitting loop applies assignment `version` from now on.
    pub(crate) fn loop_applies(&self, version: u64) {
        self.loop_seen.store(version, Ordering::Release);
    }

    /// The emitting loop starts (`true`) or stops (`false`) waiting for the consumer thread.
    pub(crate) fn loop_idle(&self, idle: bool) {
        self.loop_idle.store(idle, Ordering::Release);
    }

    /// Barrier `id`: the source's positions snapshot for it.
    pub(crate) fn record_barrier(&self, id: u64, positions: &Positions) {
        let seen = if self.loop_idle.load(Ordering::Acquire) {
            // Between batches: the next batch starts from the version current now.
            self.source
                .lock()
                .as_ref()
                .map_or(0, |s| s.assignment.version())
        } else {
            self.loop_seen.load(Ordering::Acquire)
        };
        let at = AtBarrier {
            id,
            positions: positions.clone(),
            seen,
        };
        if let Some(kept) = self.kept() {
            kept.record_barrier(id, positions);
        }
        if self.sink_commits() {
            *self.barrier.lock() = Some(at);
        } else {
            let mut pending = self.pending.lock();
            pending.insert(id, at);
            // Checkpoints that never complete (failed or declined) are not kept forever.
            while pending.len() > MAX_PENDING {
                pending.pop_first();
            }
        }
    }

    /// Checkpoint `id` completed: the positions of its barrier (those of older barriers are
    /// dropped, a newer completion covers them).
    pub(crate) fn take_completed(&self, id: u64) -> Option<AtBarrier> {
        let mut pending = self.pending.lock();
        let newer = pending.split_off(&(id + 1));
        std::mem::replace(&mut *pending, newer)
            .into_values()
            .next_back()
    }

    /// The positions of barrier `id`, taken once by the sink.
    pub(crate) fn take_barrier(&self, id: u64) -> Option<AtBarrier> {
        let mut b = self.barrier.lock();
        match b.as_ref() {
            Some(at) if at.id == id => b.take(),
            _ => None,
        }
    }

    /// A commit (the sink's transaction or the source's group commit) covering assignment
    /// version `seen` happened.
    pub(crate) fn committed(&self, seen: u64) {
        let mut c = self.committed.lock();
        if c.is_none_or(|v| v < seen) {
            *c = Some(seen);
        }
        self.committed_changed.notify_all();
    }

    /// Whether a revocation gave up waiting: the open transaction holds records whose offsets
    /// another worker now owns, and must abort.
    pub(crate) fn is_broken(&self) -> bool {
        self.broken.load(Ordering::Acquire)
    }

    /// On the consumer thread, inside a rebalance that revokes `partitions`: stops emitting
    /// them and waits until a commit covers them, at most `limit` (then an open transaction
    /// of the sink is marked broken). Returns whether they were covered.
    pub(crate) fn drain(&self, partitions: BTreeSet<String>, limit: Duration) -> bool {
        let Some((assignment, alive)) = self
            .source
            .lock()
            .as_ref()
            .map(|s| (s.assignment.clone(), Arc::clone(&s.alive)))
        else {
            return true;
        };
        let n = partitions.len();
        let version = assignment.drain(partitions);
        let started = Instant::now();
        let deadline = started + limit;
        let mut c = self.committed.lock();
        while c.is_none_or(|v| v < version) {
            let closing = !alive.load(Ordering::Acquire);
            if closing && !self.sink_commits() {
                // The source closes: its final checkpoint committed what it could.
                return false;
            }
            if closing || Instant::now() >= deadline {
                drop(c);
                self.broken.store(true, Ordering::Release);
                if let Some(kept) = self.kept() {
                    kept.set_broken();
                }
                let waited_ms = started.elapsed().as_millis() as u64;
                let why = if closing {
                    "the source closes"
                } else {
                    "waited its limit"
                };
                if self.sink_commits() {
                    tracing::warn!(partitions = n, waited_ms, why,
                        "kafka source: revoked partitions released before a transaction covered them; the open transaction will abort");
                } else {
                    tracing::warn!(partitions = n, waited_ms, why,
                        "kafka source: revoked partitions released before a checkpoint covered them; their new owner repeats what was emitted since the last one");
                }
                return false;
            }
            self.committed_changed
                .wait_for(&mut c, Duration::from_millis(100));
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn barrier_is_taken_once_and_only_for_its_id() {
        let link = OffsetsLink::default();
        link.set_sink_commits();
        link.loop_applies(3);
        let positions: Positions = [("t/0".to_owned(), 10)].into();
        link.record_barrier(7, &positions);
        assert!(link.take_barrier(6).is_none());
        let b = link.take_barrier(7).expect("barrier 7");
        assert_eq!((b.id, b.seen, b.positions["t/0"]), (7, 3, 10));
        assert!(link.take_barrier(7).is_none());
    }

    #[test]
    fn a_completion_takes_its_barrier_and_drops_older_ones() {
        let link = OffsetsLink::default();
        for id in 1..=4 {
            link.loop_applies(id * 10);
            link.record_barrier(id, &[("t/0".to_owned(), id as i64)].into());
        }
        assert!(link.take_barrier(3).is_none(), "the sink takes nothing");
        let b = link.take_completed(3).expect("barrier 3");
        assert_eq!((b.id, b.seen), (3, 30));
        assert!(link.take_completed(2).is_none(), "older ones are gone");
        assert_eq!(link.take_completed(9).map(|b| b.id), Some(4));
        for id in 0..(MAX_PENDING as u64 + 10) {
            link.record_barrier(id, &Positions::new());
        }
        assert_eq!(link.pending.lock().len(), MAX_PENDING);
    }

    #[test]
    fn committed_only_grows() {
        let link = OffsetsLink::default();
        link.committed(5);
        link.committed(2);
        assert_eq!(*link.committed.lock(), Some(5));
        // Without a source nothing waits.
        assert!(link.drain(["t/0".to_owned()].into(), Duration::ZERO));
    }
}
