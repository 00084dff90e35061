//! Two-phase commit, the shape every exactly-once sink shares (Flink's
//! `TwoPhaseCommitSinkFunction` is the model):
//!
//! 1. **begin**: the sink opens a transaction in its external system when records arrive;
//! 2. **pre-commit**: at a checkpoint's barrier the sink makes the open transaction durable but
//!    not visible, and hands a reference to it to [`TwoPhaseCommit::pre_committed`]; the
//!    checkpoint stores [`TwoPhaseCommit::state`], every transaction not yet committed;
//! 3. **commit**: when the checkpoint completes, [`TwoPhaseCommit::commit_up_to`] commits the
//!    transactions of it and of earlier checkpoints, oldest first;
//! 4. **recover and abort**: on restore, [`TwoPhaseCommit::recover`] commits the transactions
//!    the restored checkpoint holds (it completed, so they must become visible — some may
//!    already be) and then aborts whatever else earlier runs left.
//!
//! Beginning and pre-committing differ most between systems (a Kafka transaction and its
//! marker, a prepared SQL transaction on the writer's session, files made durable), so the
//! sink does them; the bookkeeping and the order of commits, recoveries and aborts live here,
//! behind the [`Committer`] a sink implements for its system.
//!
//! After a change of parallelism each restored transaction is finished by the subtask that
//! owns the subtask which wrote it ([`Share`]), so every one is finished exactly once.

use std::collections::BTreeMap;

use async_trait::async_trait;

use crate::{Restored, Result, Share};

/// What a sink's external system does with its pre-committed transactions.
#[async_trait]
pub trait Committer: Send {
    /// A pre-committed transaction as a checkpoint holds it: an id, a reference to its data.
    type Txn: Clone + std::fmt::Debug + Send + Sync + 'static;

    /// The subtask that wrote `txn`, or `None` when `txn` is not this sink's.
    fn writer_of(&self, txn: &Self::Txn) -> Option<usize>;

    /// Makes a pre-committed transaction visible.
    async fn commit(&mut self, txn: &Self::Txn) -> Result<()>;

    /// On restore: commits a transaction a completed checkpoint holds, which may have been
    /// committed before the failure (so this must be idempotent). The default commits.
    async fn recover_and_commit(&mut self, txn: &Self::Txn) -> Result<()> {
        self.commit(txn).await
    }

    /// On restore, after the recoveries: aborts what earlier runs left open that no
    /// transaction of `restored` (every previous subtask's) names, among the transactions this
    /// subtask owns under `share`. Returns how many were aborted.
    async fn abort_others(&mut self, restored: &[Self::Txn], share: Share) -> Result<u64>;
}

/// What a restore did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Restored transactions this subtask committed (or found committed).
    pub committed: usize,
    /// Transactions of earlier runs aborted.
    pub aborted: u64,
}

/// The pre-committed transactions of one sink subtask, by checkpoint, and their committer.
#[derive(Debug)]
pub struct TwoPhaseCommit<C: Committer> {
    committer: C,
    pending: BTreeMap<u64, Vec<C::Txn>>,
}

impl<C: Committer> TwoPhaseCommit<C> {
    /// Nothing pending yet.
    pub fn new(committer: C) -> Self {
        TwoPhaseCommit {
            committer,
            pending: BTreeMap::new(),
        }
    }

    /// The committer.
    pub fn committer(&self) -> &C {
        &self.committer
    }

    /// The committer, to begin and pre-commit with.
    pub fn committer_mut(&mut self) -> &mut C {
        &mut self.committer
    }

    /// The committer, once nothing more is to be committed (at close).
    pub fn into_committer(self) -> C {
        self.committer
    }

    /// Finishes what a restore hands this subtask: commits each restored transaction it owns
    /// (in the order the checkpoint lists them), then lets the committer abort the rest.
    pub async fn recover(&mut self, restored: Restored<Vec<C::Txn>>) -> Result<Recovered> {
        let share = restored.share();
        let all: Vec<C::Txn> = restored.union().flatten().collect();
        let mut done = Recovered::default();
        for txn in &all {
            if self.committer.writer_of(txn).is_some_and(|w| share.owns(w)) {
                self.committer.recover_and_commit(txn).await?;
                done.committed += 1;
            }
        }
        done.aborted = self.committer.abort_others(&all, share).await?;
        if done.committed > 0 || done.aborted > 0 {
            tracing::info!(
                committed = done.committed,
                aborted = done.aborted,
                "two-phase commit: finished the transactions of earlier runs"
            );
        }
        Ok(done)
    }

    /// Records the transactions pre-committed at checkpoint `checkpoint`'s barrier.
    pub fn pre_committed(&mut self, checkpoint: u64, txns: impl IntoIterator<Item = C::Txn>) {
        let txns: Vec<C::Txn> = txns.into_iter().collect();
        if !txns.is_empty() {
            self.pending.entry(checkpoint).or_default().extend(txns);
        }
    }

    /// What the checkpoint holds: every pre-committed transaction not yet committed, oldest
    /// first.
    pub fn state(&self) -> Vec<C::Txn> {
        self.pending.values().flatten().cloned().collect()
    }

    /// How many transactions wait for checkpoints up to `checkpoint`.
    pub fn pending_up_to(&self, checkpoint: u64) -> usize {
        self.pending
            .range(..=checkpoint)
            .map(|(_, t)| t.len())
            .sum()
    }

    /// Commits the transactions of checkpoints up to `checkpoint`, oldest first. One whose
    /// commit fails stays pending (with those after it), for a later call or the restore.
    /// Returns how many were committed.
    pub async fn commit_up_to(&mut self, checkpoint: u64) -> Result<usize> {
        let mut n = 0;
        while let Some(mut entry) = self.pending.first_entry() {
            if *entry.key() > checkpoint {
                break;
            }
            let Some(txn) = entry.get().first().cloned() else {
                entry.remove();
                continue;
            };
            self.committer.commit(&txn).await?;
            entry.get_mut().remove(0);
            if entry.get().is_empty() {
                entry.remove();
            }
            n += 1;
        }
        Ok(n)
    }

    /// Commits everything pending (the end of the input: no later checkpoint will).
    pub async fn commit_all(&mut self) -> Result<usize> {
        self.commit_up_to(u64::MAX).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A committer recording what it was asked; transaction `(writer, checkpoint)`.
    #[derive(Debug, Default)]
    struct Log {
        committed: Vec<(usize, u64)>,
        recovered: Vec<(usize, u64)>,
        aborted_with: Vec<Vec<(usize, u64)>>,
        fail_at: Option<u64>,
    }

    #[async_trait]
    impl Committer for Log {
        type Txn = (usize, u64);
        fn writer_of(&self, txn: &(usize, u64)) -> Option<usize> {
            Some(txn.0)
        }
        async fn commit(&mut self, txn: &(usize, u64)) -> Result<()> {
            if self.fail_at == Some(txn.1) {
                return Err(crate::Error::connector("log", "refused"));
            }
            self.committed.push(*txn);
            Ok(())
        }
        async fn recover_and_commit(&mut self, txn: &(usize, u64)) -> Result<()> {
            self.recovered.push(*txn);
            Ok(())
        }
        async fn abort_others(&mut self, restored: &[(usize, u64)], _: Share) -> Result<u64> {
            self.aborted_with.push(restored.to_vec());
            Ok(1)
        }
    }

    #[tokio::test]
    async fn commits_in_checkpoint_order_and_keeps_what_failed() {
        let mut t = TwoPhaseCommit::new(Log::default());
        t.pre_committed(1, [(0, 1)]);
        t.pre_committed(2, []);
        t.pre_committed(3, [(0, 3), (0, 3)]);
        t.pre_committed(4, [(0, 4)]);
        assert_eq!(t.state(), vec![(0, 1), (0, 3), (0, 3), (0, 4)]);
        assert_eq!(t.pending_up_to(3), 3);
        t.committer_mut().fail_at = Some(3);
        assert!(t.commit_up_to(3).await.is_err());
        assert_eq!(t.committer().committed, vec![(0, 1)]);
        assert_eq!(
            t.state(),
            vec![(0, 3), (0, 3), (0, 4)],
            "the failed one stays"
        );
        t.committer_mut().fail_at = None;
        assert_eq!(t.commit_up_to(3).await.unwrap(), 2);
        assert_eq!(t.state(), vec![(0, 4)]);
        assert_eq!(t.commit_all().await.unwrap(), 1);
        assert!(t.state().is_empty());
    }

    #[tokio::test]
    async fn a_restore_recovers_what_this_subtask_owns_then_aborts_the_rest() {
        // Three old subtasks into two: subtask 1 owns old subtask 1 only.
        let previous = vec![Some(vec![(0, 7)]), Some(vec![(1, 6), (1, 7)]), None];
        let restored = Restored::from_checkpoint("sink", 1, 2, 7, previous);
        let mut t = TwoPhaseCommit::new(Log::default());
        let done = t.recover(restored).await.unwrap();
        assert_eq!(
            done,
            Recovered {
                committed: 2,
                aborted: 1
            }
        );
        assert_eq!(t.committer().recovered, vec![(1, 6), (1, 7)]);
        assert_eq!(
            t.committer().aborted_with,
            vec![vec![(0, 7), (1, 6), (1, 7)]],
            "the abort sees every restored transaction"
        );
        // Subtask 0 of 2 owns old subtasks 0 and 2.
        let previous = vec![Some(vec![(0, 7)]), Some(vec![(1, 7)]), Some(vec![(2, 7)])];
        let mut t = TwoPhaseCommit::new(Log::default());
        t.recover(Restored::from_checkpoint("sink", 0, 2, 7, previous))
            .await
            .unwrap();
        assert_eq!(t.committer().recovered, vec![(0, 7), (2, 7)]);
    }
}
