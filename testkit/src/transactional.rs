//! [`TransactionalSink`]: two-phase commit into a shared [`TxnStore`], the in-memory model of
//! an exactly-once sink (Kafka transactions, PostgreSQL prepared transactions).
//!
//! - records go into the open transaction;
//! - `snapshot_state(N)` pre-commits it into the store as prepared transaction `(subtask, N)`
//!   and returns the ids of every prepared, uncommitted transaction;
//! - `notify_checkpoint_complete(N)` commits the prepared transactions up to `N`;
//! - on restore, the transactions named in the restored state are committed (the checkpoint
//!   that holds them completed), and every other prepared transaction of this sink is aborted.
//!
//! The bookkeeping is core's [`TwoPhaseCommit`], as in the connectors' exactly-once sinks.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;

use rivus_sdk::prelude::*;
use rivus_sdk::two_phase::{Committer, TwoPhaseCommit};
use rivus_sdk::Share;

/// Transaction id: (sink subtask, checkpoint id).
pub(crate) type TxnId = (usize, u64);

#[derive(Debug)]
struct Inner<T> {
    prepared: BTreeMap<TxnId, Vec<T>>,
    committed: Vec<T>,
    committed_txns: Vec<(TxnId, usize)>,
    commits: u64,
    aborts: u64,
}

/// The "external system" of a [`TransactionalSink`]: survives job restarts in one process.
#[derive(Debug)]
pub struct TxnStore<T> {
    inner: Arc<Mutex<Inner<T>>>,
}

impl<T> Clone for TxnStore<T> {
    fn clone(&self) -> Self {
        TxnStore {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<T> Default for TxnStore<T> {
    fn default() -> Self {
        TxnStore {
            inner: Arc::new(Mutex::new(Inner {
                prepared: BTreeMap::new(),
                committed: Vec::new(),
                committed_txns: Vec::new(),
                commits: 0,
                aborts: 0,
            })),
        }
    }
}

impl<T: Clone> TxnStore<T> {
    /// The committed records, in commit order.
    pub fn committed(&self) -> Vec<T> {
        self.inner.lock().committed.clone()
    }
}

impl<T> TxnStore<T> {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The committed records, each mapped through `f`, in commit order.
    pub fn committed_map<U>(&self, f: impl FnMut(&T) -> U) -> Vec<U> {
        self.inner.lock().committed.iter().map(f).collect()
    }

    /// How many records are committed.
    pub fn committed_len(&self) -> usize {
        self.inner.lock().committed.len()
    }

    /// Ids of transactions prepared and not yet committed or aborted.
    pub fn prepared(&self) -> Vec<TxnId> {
        self.inner.lock().prepared.keys().copied().collect()
    }

    /// Committed transactions with their record counts, in commit order.
    pub fn committed_txns(&self) -> Vec<(TxnId, usize)> {
        self.inner.lock().committed_txns.clone()
    }

    /// (commits, aborts) so far.
    pub fn counts(&self) -> (u64, u64) {
        let i = self.inner.lock();
        (i.commits, i.aborts)
    }

    fn commit(&self, id: TxnId) {
        let mut i = self.inner.lock();
        if let Some(rows) = i.prepared.remove(&id) {
            i.committed_txns.push((id, rows.len()));
            i.committed.extend(rows);
            i.commits += 1;
        }
    }
}

/// The exactly-once in-memory sink. Create one per subtask with [`TransactionalSink::new`].
#[derive(Debug)]
pub struct TransactionalSink<T: Send + 'static> {
    txns: TwoPhaseCommit<StoreCommitter<T>>,
    subtask: usize,
    open_txn: Vec<T>,
    fail_after: Option<(usize, Arc<std::sync::atomic::AtomicUsize>)>,
    pace: Option<std::time::Duration>,
}

impl<T: Send + 'static> TransactionalSink<T> {
    /// Subtask `subtask`'s sink writing into `store`.
    pub fn new(store: TxnStore<T>, subtask: usize) -> Self {
        TransactionalSink {
            txns: TwoPhaseCommit::new(StoreCommitter { store }),
            subtask,
            open_txn: Vec::new(),
            fail_after: None,
            pace: None,
        }
    }

    rivus_sdk::setters! {
        /// Waits `per_batch` after each batch: a slow sink, so that a fast source is
        /// back-pressured and checkpoints land mid-stream.
        pace(per_batch: std::time::Duration) => pace = Some(per_batch);
    }

    /// Fails once the sinks sharing `received` have been handed `n` records in all
    /// (simulates a crash between a write and its commit).
    pub fn fail_after(mut self, n: usize, received: Arc<std::sync::atomic::AtomicUsize>) -> Self {
        self.fail_after = Some((n, received));
        self
    }
}

#[async_trait]
impl<T: Send + 'static> RichFunction for TransactionalSink<T> {}

#[async_trait]
impl<T: Send + 'static> CheckpointedFunction for TransactionalSink<T> {
    type State = Vec<TxnId>;

    async fn initialize_state(&mut self, restored: Restored<Vec<TxnId>>) -> Result<()> {
        self.txns.recover(restored).await?;
        Ok(())
    }

    async fn snapshot_state(&mut self, checkpoint_id: u64) -> Result<Vec<TxnId>> {
        let id = (self.subtask, checkpoint_id);
        let rows = std::mem::take(&mut self.open_txn);
        self.txns
            .committer()
            .store
            .inner
            .lock()
            .prepared
            .insert(id, rows);
        self.txns.pre_committed(checkpoint_id, [id]);
        Ok(self.txns.state())
    }
}

#[async_trait]
impl<T: Send + 'static> CheckpointListener for TransactionalSink<T> {
    async fn notify_checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<()> {
        self.txns.commit_up_to(checkpoint_id).await?;
        Ok(())
    }
}

/// Commits and aborts the prepared transactions of a [`TxnStore`].
#[derive(Debug)]
struct StoreCommitter<T> {
    store: TxnStore<T>,
}

#[async_trait]
impl<T: Send + 'static> Committer for StoreCommitter<T> {
    type Txn = TxnId;

    fn writer_of(&self, txn: &TxnId) -> Option<usize> {
        Some(txn.0)
    }

    async fn commit(&mut self, txn: &TxnId) -> Result<()> {
        self.store.commit(*txn);
        Ok(())
    }

    /// Every prepared transaction of a subtask this one owns that the checkpoint does not name
    /// belongs to a checkpoint that never completed.
    async fn abort_others(&mut self, _restored: &[TxnId], share: Share) -> Result<u64> {
        let mut inner = self.store.inner.lock();
        let doomed: Vec<TxnId> = inner
            .prepared
            .keys()
            .filter(|(s, _)| share.owns(*s))
            .copied()
            .collect();
        for id in &doomed {
            inner.prepared.remove(id);
            inner.aborts += 1;
        }
        Ok(doomed.len() as u64)
    }
}

#[async_trait]
impl<T: Send + 'static> SinkFunction<T> for TransactionalSink<T> {
    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::ExactlyOnce
    }

    async fn invoke(&mut self, value: T, _: &SinkContext) -> Result<()> {
        self.open_txn.push(value);
        Ok(())
    }

    async fn invoke_batch(&mut self, values: Vec<T>, _: &mut SinkContext) -> Result<()> {
        if let Some((n, received)) = &self.fail_after {
            let before = received.fetch_add(values.len(), std::sync::atomic::Ordering::SeqCst);
            if before + values.len() >= *n {
                return Err(Error::connector("transactional sink", "injected failure"));
            }
        }
        self.open_txn.extend(values);
        if let Some(d) = self.pace {
            tokio::time::sleep(d).await;
        }
        Ok(())
    }
}
