//! [`CollectingSink`]: keeps what it receives in shared memory, logs its lifecycle, and fails
//! or stalls on command through its [`SinkControl`].

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use rivus_sdk::prelude::*;
use tokio::sync::watch;

/// Commands for a running [`CollectingSink`].
#[derive(Debug, Clone)]
pub struct SinkControl {
    stalled: Arc<watch::Sender<bool>>,
    fail_at: Arc<AtomicUsize>,
}

impl Default for SinkControl {
    fn default() -> Self {
        SinkControl {
            stalled: Arc::new(watch::channel(false).0),
            fail_at: Arc::new(AtomicUsize::new(usize::MAX)),
        }
    }
}

impl SinkControl {
    /// Every batch waits until [`release`](SinkControl::release).
    pub fn stall(&self) {
        self.stalled.send_replace(true);
    }

    /// Lets stalled batches through.
    pub fn release(&self) {
        self.stalled.send_replace(false);
    }

    /// The sink fails when it has received `n` records in all.
    pub fn fail_at(&self, n: usize) {
        self.fail_at.store(n, Ordering::SeqCst);
    }
}

/// A sink that appends every record to a shared vector (at-least-once: after a restore, the
/// records since the last checkpoint arrive again).
///
/// Clones share the vector, the lifecycle log and the control, so one value can serve as the
/// factory for every subtask and be inspected after the job.
#[derive(Debug)]
pub struct CollectingSink<T> {
    values: Arc<Mutex<Vec<T>>>,
    log: Arc<Mutex<Vec<String>>>,
    received: Arc<AtomicUsize>,
    control: SinkControl,
    subtask: usize,
    opened: Arc<AtomicBool>,
}

impl<T> Clone for CollectingSink<T> {
    fn clone(&self) -> Self {
        CollectingSink {
            values: Arc::clone(&self.values),
            log: Arc::clone(&self.log),
            received: Arc::clone(&self.received),
            control: self.control.clone(),
            subtask: self.subtask,
            opened: Arc::new(AtomicBool::new(false)),
        }
    }
}

impl<T> Default for CollectingSink<T> {
    fn default() -> Self {
        CollectingSink {
            values: Arc::default(),
            log: Arc::default(),
            received: Arc::default(),
            control: SinkControl::default(),
            subtask: 0,
            opened: Arc::default(),
        }
    }
}

impl<T: Clone + Send + 'static> CollectingSink<T> {
    /// An empty sink.
    pub fn new() -> Self {
        Self::default()
    }

    /// A clone for subtask `i` (its lifecycle entries are tagged with `i`).
    pub fn for_subtask(&self, i: usize) -> Self {
        let mut s = self.clone();
        s.subtask = i;
        s
    }

    /// Everything received so far, in arrival order.
    pub fn values(&self) -> Vec<T> {
        self.values.lock().clone()
    }

    /// The lifecycle log: `open[i]`, `invoke[i]`, `snapshot[i] N`, `complete[i] N`,
    /// `finish[i]`, `close[i]`.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().clone()
    }

    /// The control shared by all clones.
    pub fn control(&self) -> SinkControl {
        self.control.clone()
    }

    fn note(&self, what: &str) {
        let entry = match what.split_once(' ') {
            Some((verb, arg)) => format!("{verb}[{}] {arg}", self.subtask),
            None => format!("{what}[{}]", self.subtask),
        };
        self.log.lock().push(entry);
    }
}

#[async_trait]
impl<T: Clone + Send + 'static> RichFunction for CollectingSink<T> {
    async fn open(&mut self, _: &RuntimeContext) -> Result<()> {
        self.opened.store(true, Ordering::SeqCst);
        self.note("open");
        Ok(())
    }

    async fn close(&mut self) -> Result<()> {
        self.note("close");
        Ok(())
    }
}

#[async_trait]
impl<T: Clone + Send + 'static> CheckpointedFunction for CollectingSink<T> {
    type State = ();

    async fn snapshot_state(&mut self, id: u64) -> Result<()> {
        self.note(&format!("snapshot {id}"));
        Ok(())
    }
}

#[async_trait]
impl<T: Clone + Send + 'static> CheckpointListener for CollectingSink<T> {
    async fn notify_checkpoint_complete(&mut self, id: u64) -> Result<()> {
        self.note(&format!("complete {id}"));
        Ok(())
    }

    async fn notify_checkpoint_aborted(&mut self, id: u64) -> Result<()> {
        self.note(&format!("abort {id}"));
        Ok(())
    }
}

#[async_trait]
impl<T: Clone + Send + 'static> SinkFunction<T> for CollectingSink<T> {
    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::AtLeastOnce
    }

    async fn invoke(&mut self, value: T, _: &SinkContext) -> Result<()> {
        self.invoke_batch(vec![value], &mut SinkContext::default())
            .await
    }

    async fn invoke_batch(&mut self, values: Vec<T>, _: &mut SinkContext) -> Result<()> {
        assert!(
            self.opened.load(Ordering::SeqCst),
            "invoke before open: the runtime broke the lifecycle contract"
        );
        let mut stalled = self.control.stalled.subscribe();
        while *stalled.borrow_and_update() {
            if stalled.changed().await.is_err() {
                break;
            }
        }
        let n = values.len();
        let before = self.received.fetch_add(n, Ordering::SeqCst);
        if before + n > self.control.fail_at.load(Ordering::SeqCst) {
            return Err(Error::connector("collecting sink", "injected failure"));
        }
        self.note("invoke");
        self.values.lock().extend(values);
        Ok(())
    }

    async fn finish(&mut self) -> Result<()> {
        self.note("finish");
        Ok(())
    }
}
