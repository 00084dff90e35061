//! Source positions kept by the sink, in the sink's own database: what a source and a sink
//! chained into one task hand each other when the sink stores the source's positions (Kafka's
//! `topic/partition → next offset`) in the same transaction as the records read before them —
//! as Kafka Streams commits its offsets with its output. The stored positions, not the
//! checkpoint, then say where each partition resumes, wherever it moves: exactly-once across
//! workers into a database.
//!
//! The sink registers a [`PositionStore`] (its positions table) in a [`PositionsInSink`] kept
//! in the task's [`TaskShared`](crate::TaskShared); the source
//! - claims the partitions the group assigns it from that store and starts from what it holds,
//! - records its positions at every barrier ([`PositionsInSink::record_barrier`]), which the
//!   sink writes and commits in its transaction at that barrier, then reports
//!   ([`PositionsInSink::committed`]) so that a revocation waiting for a commit can go on,
//! - says when a revocation gave up waiting ([`PositionsInSink::set_broken`]): the open
//!   transaction then holds records whose partition another worker now reads, and must not
//!   commit.
//!
//! A claim takes the partition over in the store (its owner changes), so a worker that lost it
//! can no longer write its position: its transaction fails and rolls back, and that worker
//! restarts from what the store says.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::Result;

/// A source's position per partition key (Kafka: `topic/partition` → next offset to read).
pub type Positions = BTreeMap<String, i64>;

/// The positions table of a sink (see the [module docs](self)).
pub trait PositionStore: Send + Sync {
    /// Takes `keys` over for this sink subtask and returns the positions stored for them (a
    /// key never stored is absent). Waits while a transaction of the previous owner that
    /// writes them is still open. Blocking: a source calls it on its client's thread, inside
    /// the group's rebalance.
    fn claim(&self, keys: &[String]) -> Result<Positions>;
}

/// Called with a barrier id once the sink committed the positions of that barrier.
type OnCommitted = Box<dyn Fn(u64) + Send + Sync>;

/// The link of one task (see the [module docs](self)), in its
/// [`TaskShared`](crate::TaskShared).
#[derive(Default)]
pub struct PositionsInSink {
    store: Mutex<Option<Arc<dyn PositionStore>>>,
    barrier: Mutex<Option<(u64, Positions)>>,
    on_committed: Mutex<Option<OnCommitted>>,
    broken: AtomicBool,
}

impl std::fmt::Debug for PositionsInSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PositionsInSink")
            .field("store", &self.has_store())
            .field("barrier", &self.barrier.lock().as_ref().map(|b| b.0))
            .field("broken", &self.is_broken())
            .finish()
    }
}

impl PositionsInSink {
    /// The sink keeps the positions in `store` (at its open).
    pub fn set_store(&self, store: Arc<dyn PositionStore>) {
        *self.store.lock() = Some(store);
        self.broken.store(false, Ordering::Release);
    }

    /// The sink's store, once a sink registered one.
    pub fn store(&self) -> Option<Arc<dyn PositionStore>> {
        self.store.lock().clone()
    }

    /// Whether a sink keeps the positions.
    pub fn has_store(&self) -> bool {
        self.store.lock().is_some()
    }

    /// The source: its positions at barrier `id`.
    pub fn record_barrier(&self, id: u64, positions: &Positions) {
        *self.barrier.lock() = Some((id, positions.clone()));
    }

    /// The sink: the positions of barrier `id`, taken once (`None` when the source recorded
    /// none for it).
    pub fn take_barrier(&self, id: u64) -> Option<Positions> {
        let mut b = self.barrier.lock();
        match b.as_ref() {
            Some((at, _)) if *at == id => b.take().map(|(_, p)| p),
            _ => None,
        }
    }

    /// The source: `f` is told each barrier whose positions the sink committed.
    pub fn on_committed(&self, f: impl Fn(u64) + Send + Sync + 'static) {
        *self.on_committed.lock() = Some(Box::new(f));
    }

    /// The sink: the positions of barrier `id` are committed.
    pub fn committed(&self, id: u64) {
        if let Some(f) = self.on_committed.lock().as_ref() {
            f(id);
        }
    }

    /// The source: a revoked partition moved before a commit covered it; the open
    /// transaction must roll back.
    pub fn set_broken(&self) {
        self.broken.store(true, Ordering::Release);
    }

    /// Whether the open transaction must roll back (see [`set_broken`](Self::set_broken)).
    pub fn is_broken(&self) -> bool {
        self.broken.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    struct Fixed;
    impl PositionStore for Fixed {
        fn claim(&self, keys: &[String]) -> Result<Positions> {
            Ok(keys.iter().map(|k| (k.clone(), 7)).collect())
        }
    }

    #[test]
    fn a_barrier_is_taken_once_and_commits_are_reported() {
        let link = PositionsInSink::default();
        assert!(!link.has_store());
        link.set_store(Arc::new(Fixed));
        let claimed = link.store().unwrap().claim(&["t/0".into()]).unwrap();
        assert_eq!(claimed["t/0"], 7);
        link.record_barrier(3, &[("t/0".to_owned(), 11)].into());
        assert!(link.take_barrier(2).is_none());
        assert_eq!(link.take_barrier(3).unwrap()["t/0"], 11);
        assert!(link.take_barrier(3).is_none());
        let seen = Arc::new(AtomicU64::new(0));
        let s = Arc::clone(&seen);
        link.on_committed(move |id| s.store(id, Ordering::Relaxed));
        link.committed(3);
        assert_eq!(seen.load(Ordering::Relaxed), 3);
        assert!(!link.is_broken());
        link.set_broken();
        assert!(link.is_broken());
        link.set_store(Arc::new(Fixed));
        assert!(!link.is_broken(), "a new open starts whole");
    }
}
