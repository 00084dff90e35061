//! [`VecSource`]: a replayable in-memory source over fixed splits, with its read positions in
//! checkpointed state, rescaling support, and failure injection.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rivus_sdk::prelude::*;

/// Positions of the splits a subtask owns: split index → records already emitted.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VecSourceState {
    /// Split index → next record to emit.
    pub positions: BTreeMap<usize, usize>,
}

/// A source over `splits` (each an ordered list); subtask `i` of `p` reads splits
/// `i, i + p, i + 2p, ...`, interleaving them record by record.
///
/// With `fail_after(n)`, the job fails after `n` records were emitted by all its subtasks
/// together (counted across the shared counter), which simulates a crash at a chosen point.
/// With `unbounded()`, the source keeps waiting after its data instead of ending, until stopped.
pub struct VecSource<T> {
    splits: Arc<Vec<Vec<T>>>,
    subtask: usize,
    parallelism: usize,
    fail_after: Option<(usize, Arc<AtomicUsize>)>,
    unbounded: bool,
    pace: Option<(usize, std::time::Duration)>,
    guarantee: DeliveryGuarantee,
}

impl<T: Clone + Send + Sync + 'static> VecSource<T> {
    /// Subtask `subtask` of `parallelism` over `splits`.
    pub fn new(splits: Arc<Vec<Vec<T>>>, subtask: usize, parallelism: usize) -> Self {
        VecSource {
            splits,
            subtask,
            parallelism,
            fail_after: None,
            unbounded: false,
            pace: None,
            guarantee: DeliveryGuarantee::ExactlyOnce,
        }
    }

    /// Fails once `emitted` (shared by all subtasks) reaches `n`.
    pub fn fail_after(mut self, n: usize, emitted: Arc<AtomicUsize>) -> Self {
        self.fail_after = Some((n, emitted));
        self
    }

    /// Keeps running after the data ends, until the job is stopped.
    pub fn unbounded(mut self) -> Self {
        self.unbounded = true;
        self
    }

    /// Pauses for `pause` after every `every` records (serving checkpoints meanwhile), so
    /// that checkpoints fall in the middle of the data.
    pub fn paced(mut self, every: usize, pause: std::time::Duration) -> Self {
        self.pace = Some((every.max(1), pause));
        self
    }

    fn owned_splits(&self) -> Vec<usize> {
        (0..self.splits.len())
            .filter(|s| s % self.parallelism == self.subtask)
            .collect()
    }
}

#[async_trait]
impl<T: Clone + Send + Sync + 'static> RichFunction for VecSource<T> {}

#[async_trait]
impl<T: Clone + Send + Sync + 'static> SourceFunction for VecSource<T> {
    type Out = T;
    type State = VecSourceState;

    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        self.guarantee
    }

    /// Supports rescaling: positions of every previous subtask are pooled, and this subtask
    /// takes those of the splits it now owns.
    fn restore_state(&mut self, restored: Restored<VecSourceState>) -> Result<VecSourceState> {
        let owned = self.owned_splits();
        let mut all = BTreeMap::new();
        for s in restored.union() {
            all.extend(s.positions);
        }
        Ok(VecSourceState {
            positions: owned
                .into_iter()
                .map(|s| (s, all.get(&s).copied().unwrap_or(0)))
                .collect(),
        })
    }

    async fn run(&mut self, ctx: &mut SourceContext<T, VecSourceState>) -> Result<()> {
        let splits = Arc::clone(&self.splits);
        let mut count = 0usize;
        loop {
            let mut progressed = false;
            let owned: Vec<usize> = ctx.state().positions.keys().copied().collect();
            for s in owned {
                let pos = ctx.state().positions[&s];
                if let Some(v) = splits[s].get(pos) {
                    if let Some((n, emitted)) = &self.fail_after {
                        if emitted.fetch_add(1, Ordering::SeqCst) >= *n {
                            return Err(Error::connector("vec source", "injected failure"));
                        }
                    }
                    ctx.state_mut().positions.insert(s, pos + 1);
                    ctx.collect(v.clone()).await?;
                    progressed = true;
                    count += 1;
                    if let Some((every, pause)) = self.pace {
                        if count.is_multiple_of(every)
                            && ctx.wait_for(tokio::time::sleep(pause)).await?.is_none()
                        {
                            return Ok(());
                        }
                    }
                }
                if ctx.is_stopping() {
                    return Ok(());
                }
            }
            if !progressed {
                break;
            }
        }
        if self.unbounded {
            ctx.wait_for(std::future::pending::<()>()).await?;
        }
        Ok(())
    }
}
