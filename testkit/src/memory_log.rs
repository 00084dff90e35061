//! [`MemoryLog`] and [`LogSource`]: an in-memory partitioned log (a miniature Kafka) and a
//! source reading it with offsets in checkpointed state, committing them to the log on
//! checkpoint completion. The reference connector the suites certify themselves against — and,
//! with a [`LogFault`], the broken connectors they must reject.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;

use rivus_sdk::error_policy::{ErrorHandler, ErrorPolicy};
use rivus_sdk::prelude::*;
use rivus_sdk::schema::{DeserializationSchema, StringSchema};
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
        log.inner.lock().splits = vec![Vec::new(); splits];
        log
    }

    /// Appends raw records to `split`.
    pub fn append(&self, split: usize, records: impl IntoIterator<Item = Vec<u8>>) {
        self.inner.lock().splits[split].extend(records);
        self.appended.notify_waiters();
    }

    /// Number of splits.
    pub fn splits(&self) -> usize {
        self.inner.lock().splits.len()
    }

    /// Offsets committed by sources on checkpoint completion: split → next offset.
    pub fn committed(&self) -> BTreeMap<usize, usize> {
        self.inner.lock().committed.clone()
    }

    fn commit(&self, positions: &LogPositions) {
        self.inner
            .lock()
            .committed
            .extend(positions.iter().map(|(s, o)| (*s, *o)));
    }

    fn read(&self, split: usize, from: usize, max: usize) -> Vec<Vec<u8>> {
        let i = self.inner.lock();
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

/// Where a [`LogSource`] resumes after a restart.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Resume {
    /// From the positions in the checkpoint it restores (Kafka's source): exactly-once. A
    /// fresh start (no checkpoint) begins at the positions committed to the log.
    #[default]
    Checkpoint,
    /// From the positions committed to the log, always — the broker keeps the truth, as a
    /// queue's acknowledgements do (RabbitMQ, Redis Streams groups): at-least-once.
    Committed,
}

/// A bug a [`LogSource`] can be told to have, for the testkit's negative tests: the suites must
/// reject each of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LogFault {
    /// No bug.
    #[default]
    None,
    /// Skips this many records of each split after a restore (loses them).
    SkipOnRestore(usize),
    /// Reads this many records of each split again after a restore (duplicates them).
    RewindOnRestore(usize),
    /// Never commits positions to the log (a restart replays the whole stream).
    NeverCommit,
    /// Commits when a checkpoint is triggered, before it is stored.
    CommitOnTrigger,
    /// Commits everything emitted so far when a checkpoint completes, not what it covers.
    CommitAllOnComplete,
}

/// Reads the splits `s` with `s % parallelism == subtask`, UTF-8 records, forever (until
/// stopped) or, with `bounded`, until everything appended is read. Bad records go to the error
/// policy. Positions are committed to the log when a checkpoint completes.
pub struct LogSource {
    log: MemoryLog,
    subtask: usize,
    parallelism: usize,
    policy: ErrorPolicy,
    handler: Option<ErrorHandler>,
    /// Where a restart resumes (default: the checkpoint).
    pub resume: Resume,
    /// A bug to have, for negative tests (default: none).
    pub fault: LogFault,
    /// End once everything appended so far is read (a bounded source).
    pub bounded: bool,
    /// The positions when `run` returned, for the faults that commit "everything so far".
    last: LogPositions,
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
            resume: Resume::Checkpoint,
            fault: LogFault::None,
            bounded: false,
            last: LogPositions::new(),
        }
    }

    /// Commits to the log what the checkpoint events call for (as a broker would be told);
    /// `current` is what the source has emitted so far.
    fn commit(&self, events: Vec<CheckpointEvent<LogPositions>>, current: &LogPositions) {
        for ev in events {
            match (ev, self.fault) {
                (_, LogFault::NeverCommit) => {}
                (CheckpointEvent::Triggered(_), LogFault::CommitOnTrigger) => {
                    self.log.commit(current)
                }
                (CheckpointEvent::Completed { .. }, LogFault::CommitAllOnComplete) => {
                    self.log.commit(current)
                }
                (CheckpointEvent::Completed { state, .. }, f) if f != LogFault::CommitOnTrigger => {
                    self.log.commit(&state)
                }
                _ => {}
            }
        }
    }
}

#[async_trait]
impl RichFunction for LogSource {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        if self.resume == Resume::Committed && !ctx.is_checkpointing_enabled() {
            return Err(Error::config(
                format!("{}.resume", ctx.display_name()),
                "this source commits its positions to the log only when a checkpoint \
                 completes, and the job takes no checkpoints: enable checkpointing",
            ));
        }
        self.handler = Some(ErrorHandler::new(self.policy.clone(), ctx.display_name()));
        Ok(())
    }
}

#[async_trait]
impl SourceFunction for LogSource {
    type Out = String;
    type State = LogPositions;

    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        match self.resume {
            Resume::Checkpoint => DeliveryGuarantee::ExactlyOnce,
            Resume::Committed => DeliveryGuarantee::AtLeastOnce,
        }
    }

    fn restore_state(&mut self, restored: Restored<LogPositions>) -> Result<LogPositions> {
        let was_restored = restored.is_restored();
        let mut from = self.log.committed();
        if was_restored && self.resume == Resume::Checkpoint {
            from.clear();
            for s in restored.union() {
                from.extend(s);
            }
        }
        Ok((0..self.log.splits())
            .filter(|s| s % self.parallelism == self.subtask)
            .map(|s| {
                let pos = from.get(&s).copied().unwrap_or(0);
                let pos = match self.fault {
                    LogFault::SkipOnRestore(n) if was_restored => pos + n,
                    LogFault::RewindOnRestore(n) if was_restored => pos.saturating_sub(n),
                    _ => pos,
                };
                (s, pos)
            })
            .collect())
    }

    async fn on_checkpoint_events(
        &mut self,
        events: Vec<CheckpointEvent<LogPositions>>,
    ) -> Result<()> {
        self.commit(events, &self.last);
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
                    // Faults that commit "what was emitted so far" see every event at once.
                    if self.fault != LogFault::None {
                        let events = ctx.take_events();
                        self.commit(events, ctx.state());
                    }
                }
            }
            let events = ctx.take_events();
            self.commit(events, ctx.state());
            self.last = ctx.state().clone();
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
