//! How the source's subtasks read one snapshot together. Subtask 0 exports the snapshot and
//! announces a round: the snapshot's name and position, how many subtasks read, and the plan
//! (every table's parts). Each reader imports the snapshot, reads the parts it owns, and says
//! so; at its next checkpoint barrier it says that too. Subtask 0 streams only once every part
//! is read and a checkpoint taken after the last of them has completed: then every snapshot
//! row has gone through the job (barriers are aligned) before the first streamed change of
//! its key, whichever subtask read it.
//!
//! The meeting lives in the operator's [`subtasks_shared`] map: one per attempt of the job.
//!
//! [`subtasks_shared`]: rivus_sdk::context::RuntimeContext::subtasks_shared

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::watch;

use super::progress::TableProgress;
use crate::lsn::Lsn;

/// One snapshot, read by `readers` subtasks.
#[derive(Debug)]
pub(crate) struct Round {
    /// The exported snapshot's name.
    pub(crate) name: String,
    /// Its position: the watermark of the ranges read in it.
    pub(crate) at: Lsn,
    /// Subtasks reading: part `k` is read by subtask `k % readers`.
    pub(crate) readers: usize,
    /// Every part, with what earlier attempts read of it.
    pub(crate) plan: Vec<TableProgress>,
}

impl Round {
    /// The parts subtask `subtask` reads.
    pub(crate) fn parts_of(&self, subtask: usize) -> Vec<TableProgress> {
        self.plan
            .iter()
            .filter(|p| p.part % self.readers == subtask)
            .cloned()
            .collect()
    }
}

#[derive(Debug, Default)]
struct Seen {
    round: Option<Arc<Round>>,
    /// Per subtask, its parts once every one is read.
    read: BTreeMap<usize, Vec<TableProgress>>,
    /// Per subtask, the first checkpoint barrier after its parts were read.
    barrier: BTreeMap<usize, u64>,
}

/// The subtasks' meeting point (see the [module docs](self)).
#[derive(Debug)]
pub(crate) struct Meeting(watch::Sender<Seen>);

impl Meeting {
    /// The operator's meeting.
    pub(crate) fn of(shared: &rivus_sdk::TaskShared) -> Arc<Meeting> {
        shared.get_or_insert_with(|| Meeting(watch::channel(Seen::default()).0))
    }

    /// Subtask 0: the round begins.
    pub(crate) fn announce(&self, round: Round) {
        self.0.send_modify(|s| s.round = Some(Arc::new(round)));
    }

    /// The round, once announced.
    pub(crate) async fn round(&self) -> Arc<Round> {
        let mut rx = self.0.subscribe();
        loop {
            if let Some(r) = rx.borrow_and_update().round.clone() {
                return r;
            }
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Subtask `subtask` read every part it owns.
    pub(crate) fn read(&self, subtask: usize, parts: Vec<TableProgress>) {
        self.0.send_modify(|s| {
            s.read.insert(subtask, parts);
        });
    }

    /// A checkpoint barrier `id` passed subtask `subtask`, its parts read.
    pub(crate) fn barrier(&self, subtask: usize, id: u64) {
        self.0.send_if_modified(|s| match s.barrier.entry(subtask) {
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(id);
                true
            }
            std::collections::btree_map::Entry::Occupied(_) => false,
        });
    }

    /// Once the `readers` subtasks read their parts and each passed a barrier after: every
    /// part, and the newest of those barriers (a checkpoint at or after it holds every row).
    pub(crate) async fn all_read(&self, readers: usize) -> (Vec<TableProgress>, u64) {
        let mut rx = self.0.subscribe();
        loop {
            {
                let s = rx.borrow_and_update();
                let every =
                    (0..readers).all(|k| s.read.contains_key(&k) && s.barrier.contains_key(&k));
                if every {
                    let parts = s.read.values().flatten().cloned().collect();
                    let barrier = s.barrier.values().copied().max().unwrap_or(0);
                    return (parts, barrier);
                }
            }
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(part: usize) -> TableProgress {
        TableProgress {
            part,
            table: "public.t".into(),
            key: vec!["id".into()],
            ranges: Vec::new(),
            from: None,
            to: None,
        }
    }

    #[tokio::test]
    async fn subtask_zero_learns_when_every_reader_is_read_and_past_a_barrier() {
        let shared = rivus_sdk::TaskShared::default();
        let m = Meeting::of(&shared);
        m.announce(Round {
            name: "snap".into(),
            at: Lsn(7),
            readers: 2,
            plan: (0..4).map(part).collect(),
        });
        let round = Meeting::of(&shared).round().await;
        let mine: Vec<usize> = round.parts_of(1).iter().map(|p| p.part).collect();
        assert_eq!(mine, vec![1, 3]);
        m.read(0, round.parts_of(0));
        m.barrier(0, 4);
        m.read(1, round.parts_of(1));
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), m.all_read(2));
        assert!(
            waiting.await.is_err(),
            "subtask 1 has passed no barrier yet"
        );
        m.barrier(1, 6);
        m.barrier(1, 9);
        let (parts, barrier) = m.all_read(2).await;
        assert_eq!(parts.len(), 4);
        assert_eq!(
            barrier, 6,
            "the first barrier after the parts were read counts"
        );
    }
}
