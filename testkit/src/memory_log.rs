//! [`MemoryLog`] and [`LogSource`]: an in-memory partitioned log (a miniature Kafka) and a
//! source reading it with offsets in checkpointed state, committing them on checkpoint
//! completion. The reference connector the suites certify themselves against.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use rivus_core::error_policy::{ErrorHandler, ErrorPolicy};
use rivus_core::prelude::*;
use rivus_core::schema::{DeserializationSchema, StringSchema};
use tokio::sync::Notify;

#[derive(Debug, Default)]
struct Inner {
    splits: Vec<Vec<Vec<u8>>>,
    committed: BTreeMap<usize, usize>,
}

/// A set of append-only splits shared by writers and [`LogSource`]s.
#[derive(Debug, Clone, Default)]
pub struct MemoryLog {
    inner: Arc<Mutex<Inner>>,
    appended: Arc<Notify>,
}

impl MemoryLog {
    /// A log with `splits` empty splits.
    pub fn new(splits: usize) -> Self {
        let log = MemoryLog::default();
        log.inner.lock().unwrap().splits = vec![Vec::new(); splits];
        log
    }

    /// Appends raw records to `split`.
    pub fn append(&self, split: usize, records: impl IntoIterator<Item = Vec<u8>>) {
        self.inner.lock().unwrap().splits[split].extend(records);
        self.appended.notify_waiters();
    }

    /// Number of splits.
    pub fn splits(&self) -> usize {
        self.inner.lock().unwrap().splits.len()
    }

    /// Offsets committed by sources on checkpoint completion: split → next offset.
    pub fn committed(&self) -> BTreeMap<usize, usize> {
        self.inner.lock().unwrap().committed.clone()
    }

    fn read(&self, split: usize, from: usize, max: usize) -> Vec<Vec<u8>> {
        let i = self.inner.lock().unwrap();
        i.splits[split]
            .iter()
            .skip(from)
            .take(max)
            .cloned()
            .collect()
    }
}

/// Offsets of the splits one subtask owns: split → next offset to read.
pub type LogPositions = BTreeMap<usize, usize>;

/// Reads the splits `s` with `s % parallelism == subtask`, UTF-8 records, forever (until
/// stopped) or, with `bounded`, until everything appended is read. Bad records go to the error
/// policy.
pub struct LogSource {
    log: MemoryLog,
    subtask: usize,
    parallelism: usize,
    policy: ErrorPolicy,
    handler: Option<ErrorHandler>,
    /// Test hook for negative tests: skip this many records after a restore (a bug).
    pub skip_on_restore: usize,
    /// End once everything appended so far is read (a bounded source).
    pub bounded: bool,
}

impl LogSource {
    /// Subtask `subtask` of `parallelism` over `log`.
    pub fn new(log: MemoryLog, subtask: usize, parallelism: usize, policy: ErrorPolicy) -> Self {
        LogSource {
            log,
            subtask,
            parallelism,
            policy,
            handler: None,
            skip_on_restore: 0,
            bounded: false,
        }
    }
}

impl LogSource {
    /// Commits the offsets of completed checkpoints to the log (as a broker would be told).
    fn commit(&self, events: Vec<CheckpointEvent<LogPositions>>) {
        for ev in events {
            if let CheckpointEvent::Completed { state, .. } = ev {
                self.log.inner.lock().unwrap().committed.extend(state);
            }
        }
    }
}

#[async_trait]
impl RichFunction for LogSource {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        self.handler = Some(ErrorHandler::new(self.policy.clone(), ctx.display_name()));
        Ok(())
    }
}

#[async_trait]
impl SourceFunction for LogSource {
    type Out = String;
    type State = LogPositions;

    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::ExactlyOnce
    }

    fn restore_state(&mut self, restored: Restored<LogPositions>) -> Result<LogPositions> {
        let was_restored = restored.is_restored();
        let mut all = LogPositions::new();
        for s in restored.union() {
            all.extend(s);
        }
        Ok((0..self.log.splits())
            .filter(|s| s % self.parallelism == self.subtask)
            .map(|s| {
                let pos = all.get(&s).copied().unwrap_or(0);
                let skip = if was_restored {
                    self.skip_on_restore
                } else {
                    0
                };
                (s, pos + skip)
            })
            .collect())
    }

    async fn on_checkpoint_events(
        &mut self,
        events: Vec<CheckpointEvent<LogPositions>>,
    ) -> Result<()> {
        self.commit(events);
        Ok(())
    }

    async fn run(&mut self, ctx: &mut SourceContext<String, LogPositions>) -> Result<()> {
        let handler = self.handler.clone().expect("opened");
        loop {
            let appended = self.log.appended.notified();
            let mut progressed = false;
            let owned: Vec<(usize, usize)> = ctx.state().iter().map(|(s, o)| (*s, *o)).collect();
            for (split, from) in owned {
                for (i, raw) in self.log.read(split, from, 256).into_iter().enumerate() {
                    let offset = from + i;
                    let position = format!("log/{split}@{offset}");
                    ctx.state_mut().insert(split, offset + 1);
                    match StringSchema.deserialize(&raw, &position) {
                        Ok(v) => ctx.collect(v).await?,
                        Err(e) => handler.handle(&position, &e, &raw).await?,
                    }
                    progressed = true;
                }
            }
            self.commit(ctx.take_events());
            if ctx.is_stopping() {
                return Ok(());
            }
            if !progressed && self.bounded {
                return Ok(());
            }
            if !progressed && ctx.wait_for(appended).await?.is_none() {
                return Ok(());
            }
        }
    }
}
