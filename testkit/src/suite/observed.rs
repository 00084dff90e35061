//! Wrappers that record a connector's lifecycle calls, so a suite can check that the runtime
//! and the connector together keep the contract: open before use, close exactly once — and
//! that inject the faults of the failure cases around the connector's own calls.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use rivus_sdk::prelude::*;
use rivus_sdk::CompletedCheckpoints;

/// When an injected fault fires.
#[derive(Debug, Clone)]
pub(crate) enum Trigger {
    /// Once, the first time it is checked after the suite set the flag.
    Armed(Arc<AtomicBool>),
    /// Once this many checkpoints completed since the wrapped function was opened.
    AfterCheckpoints(u64),
}

impl Trigger {
    /// A trigger the suite sets (from its monitoring loop) and the wrapper fires once.
    pub(crate) fn armed() -> (Trigger, Arc<AtomicBool>) {
        let flag = Arc::new(AtomicBool::new(false));
        (Trigger::Armed(Arc::clone(&flag)), flag)
    }
}

/// The faults one wrapped function injects.
#[derive(Debug, Clone, Default)]
pub(crate) struct Faults {
    /// The first `open` of a run restored from a checkpoint fails once, after the connector
    /// itself opened (and did whatever its restore does): set to `true` to arm, cleared when
    /// it fires, so the next run opens normally.
    pub open_after_restore: Option<Arc<AtomicBool>>,
    /// `snapshot_state` fails once (after the connector's own snapshot: it pre-committed).
    pub snapshot: Option<Trigger>,
    /// `invoke_batch` fails once (before the connector sees the batch).
    pub invoke: Option<Trigger>,
}

/// Armed checkpoints without a record that an armed snapshot trigger lets pass before it
/// fires anyway.
const EMPTY_CHECKPOINTS_BEFORE_FIRING: u32 = 5;

/// The faults of one wrapper while it runs.
#[derive(Debug, Default)]
struct Armed {
    faults: Faults,
    completed: Option<CompletedCheckpoints>,
    base: u64,
    /// Checkpoints this subtask passed, armed, that covered no record.
    empty_checkpoints: u32,
}

impl Armed {
    fn new(faults: Faults) -> Self {
        Armed {
            faults,
            ..Armed::default()
        }
    }

    fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        let completed = ctx.completed_checkpoints();
        self.base = completed.latest().unwrap_or(0);
        self.completed = Some(completed);
        let restored = ctx.restored_from().is_some();
        match &self.faults.open_after_restore {
            Some(flag) if restored && flag.swap(false, Ordering::SeqCst) => Err(injected(
                "the first open after a restore (connector opened, then the task failed)",
            )),
            _ => Ok(()),
        }
    }

    /// The snapshot trigger, once armed, fires in a checkpoint that covers records (`covered`:
    /// received since the previous barrier): a source that commits its positions when a
    /// checkpoint is triggered then loses them — what the case is there to catch. Only after
    /// [`EMPTY_CHECKPOINTS_BEFORE_FIRING`] empty checkpoints does it fire in an empty one (the
    /// restart is still tested).
    fn fires_in_snapshot(&mut self, covered: usize) -> bool {
        let Some(Trigger::Armed(flag)) = &self.faults.snapshot else {
            return self.fires(&self.faults.snapshot);
        };
        if !flag.load(Ordering::SeqCst) {
            return false;
        }
        if covered == 0 && self.empty_checkpoints < EMPTY_CHECKPOINTS_BEFORE_FIRING {
            self.empty_checkpoints += 1;
            return false;
        }
        flag.swap(false, Ordering::SeqCst)
    }

    fn fires(&self, trigger: &Option<Trigger>) -> bool {
        match trigger {
            None => false,
            Some(Trigger::Armed(flag)) => flag.swap(false, Ordering::SeqCst),
            Some(Trigger::AfterCheckpoints(n)) => self
                .completed
                .as_ref()
                .and_then(|c| c.latest())
                .is_some_and(|latest| latest >= self.base + n),
        }
    }
}

fn injected(what: &str) -> Error {
    Error::connector("conformance suite", format!("injected failure in {what}"))
}

/// Lifecycle events of every subtask, in order: `open[i]`, `use[i]`, `close[i]`.
#[derive(Debug, Clone, Default)]
pub struct LifecycleLog(Arc<Mutex<Vec<String>>>);

impl LifecycleLog {
    fn push(&self, what: &str, subtask: usize) {
        self.0.lock().push(format!("{what}[{subtask}]"));
    }

    /// The events so far.
    pub fn events(&self) -> Vec<String> {
        self.0.lock().clone()
    }

    /// Checks every subtask that was opened: used only after open, closed exactly once, after
    /// its last use.
    pub fn check(&self) -> Result<(), String> {
        let events = self.events();
        let subtasks: std::collections::BTreeSet<String> = events
            .iter()
            .filter_map(|e| e.split_once('[').map(|(_, s)| s.to_owned()))
            .collect();
        for s in subtasks {
            let of = |what: &str| format!("{what}[{s}");
            let pos: Vec<(usize, &String)> = events
                .iter()
                .enumerate()
                .filter(|(_, e)| e.ends_with(&format!("[{s}")))
                .collect();
            let opens = pos
                .iter()
                .filter(|(_, e)| e.starts_with(&of("open")))
                .count();
            let closes: Vec<usize> = pos
                .iter()
                .filter(|(_, e)| e.starts_with(&of("close")))
                .map(|(i, _)| *i)
                .collect();
            let first_open = pos
                .iter()
                .find(|(_, e)| e.starts_with(&of("open")))
                .map(|(i, _)| *i);
            let uses: Vec<usize> = pos
                .iter()
                .filter(|(_, e)| e.starts_with(&of("use")))
                .map(|(i, _)| *i)
                .collect();
            let sub = s.trim_end_matches(']');
            if opens > 1 {
                return Err(format!("subtask {sub} opened {opens} times"));
            }
            if let Some(u) = uses.first() {
                if first_open.is_none_or(|o| o > *u) {
                    return Err(format!("subtask {sub} used before open"));
                }
            }
            if opens == 1 && closes.len() != 1 {
                return Err(format!(
                    "subtask {sub} closed {} times (must be exactly once)",
                    closes.len()
                ));
            }
            if let (Some(c), Some(u)) = (closes.first(), uses.last()) {
                if u > c {
                    return Err(format!("subtask {sub} used after close"));
                }
            }
        }
        Ok(())
    }
}

/// A source that logs its lifecycle into a [`LifecycleLog`] and delegates everything.
pub struct ObservedSource<S> {
    inner: S,
    subtask: usize,
    log: LifecycleLog,
    faults: Armed,
}

impl<S> ObservedSource<S> {
    /// Wraps `inner` (subtask `subtask`).
    pub fn new(inner: S, subtask: usize, log: LifecycleLog) -> Self {
        ObservedSource {
            inner,
            subtask,
            log,
            faults: Armed::default(),
        }
    }

    pub(crate) fn with_faults(mut self, faults: Faults) -> Self {
        self.faults = Armed::new(faults);
        self
    }
}

#[async_trait]
impl<S: SourceFunction> RichFunction for ObservedSource<S> {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        self.log.push("open", self.subtask);
        self.inner.open(ctx).await?;
        self.faults.open(ctx)
    }

    async fn close(&mut self) -> Result<()> {
        self.log.push("close", self.subtask);
        self.inner.close().await
    }
}

#[async_trait]
impl<S: SourceFunction> SourceFunction for ObservedSource<S> {
    type Out = S::Out;
    type State = S::State;

    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        self.inner.delivery_guarantee()
    }

    fn offers_positions_to_sink(&self) -> bool {
        self.inner.offers_positions_to_sink()
    }

    fn restore_state(&mut self, restored: Restored<S::State>) -> Result<S::State> {
        self.inner.restore_state(restored)
    }

    async fn run(&mut self, ctx: &mut SourceContext<S::Out, S::State>) -> Result<()> {
        self.log.push("use", self.subtask);
        self.inner.run(ctx).await
    }

    async fn on_checkpoint_events(&mut self, events: Vec<CheckpointEvent<S::State>>) -> Result<()> {
        self.inner.on_checkpoint_events(events).await
    }
}

/// A sink that logs its lifecycle into a [`LifecycleLog`] and delegates everything.
pub struct ObservedSink<S> {
    inner: S,
    subtask: usize,
    log: LifecycleLog,
    faults: Armed,
    /// Records received since the last barrier.
    since_barrier: usize,
}

impl<S> ObservedSink<S> {
    /// Wraps `inner` (subtask `subtask`).
    pub fn new(inner: S, subtask: usize, log: LifecycleLog) -> Self {
        ObservedSink {
            inner,
            subtask,
            log,
            faults: Armed::default(),
            since_barrier: 0,
        }
    }

    pub(crate) fn with_faults(mut self, faults: Faults) -> Self {
        self.faults = Armed::new(faults);
        self
    }
}

#[async_trait]
impl<S: Send + RichFunction> RichFunction for ObservedSink<S> {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        self.log.push("open", self.subtask);
        self.inner.open(ctx).await?;
        self.faults.open(ctx)
    }

    async fn close(&mut self) -> Result<()> {
        self.log.push("close", self.subtask);
        self.inner.close().await
    }
}

#[async_trait]
impl<S: CheckpointedFunction> CheckpointedFunction for ObservedSink<S> {
    type State = S::State;

    async fn initialize_state(&mut self, restored: Restored<S::State>) -> Result<()> {
        self.inner.initialize_state(restored).await
    }

    async fn snapshot_state(&mut self, id: u64) -> Result<S::State> {
        let state = self.inner.snapshot_state(id).await?;
        let covered = std::mem::take(&mut self.since_barrier);
        if self.faults.fires_in_snapshot(covered) {
            return Err(injected(&format!(
                "snapshot_state of checkpoint {id} (after the connector's own snapshot)"
            )));
        }
        Ok(state)
    }
}

#[async_trait]
impl<S: CheckpointListener> CheckpointListener for ObservedSink<S> {
    async fn notify_checkpoint_complete(&mut self, id: u64) -> Result<()> {
        self.inner.notify_checkpoint_complete(id).await
    }

    async fn notify_checkpoint_aborted(&mut self, id: u64) -> Result<()> {
        self.inner.notify_checkpoint_aborted(id).await
    }
}

#[async_trait]
impl<In: Send + 'static, S: SinkFunction<In>> SinkFunction<In> for ObservedSink<S> {
    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        self.inner.delivery_guarantee()
    }

    fn commits_source_positions(&self) -> bool {
        self.inner.commits_source_positions()
    }

    async fn invoke(&mut self, value: In, ctx: &SinkContext) -> Result<()> {
        self.log.push("use", self.subtask);
        self.since_barrier += 1;
        self.inner.invoke(value, ctx).await
    }

    async fn invoke_batch(&mut self, values: Vec<In>, ctx: &mut SinkContext) -> Result<()> {
        self.log.push("use", self.subtask);
        self.since_barrier += values.len();
        if self.faults.fires(&self.faults.faults.invoke) {
            return Err(injected(
                "invoke_batch (a write after completed checkpoints)",
            ));
        }
        self.inner.invoke_batch(values, ctx).await
    }

    async fn finish(&mut self) -> Result<()> {
        self.inner.finish().await
    }
}
