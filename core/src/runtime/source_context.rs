//! [`SourceContext`]: how a source emits records, keeps its position in checkpointed state,
//! waits on the outside world, and learns about checkpoints. Checkpoint triggers are served
//! inside `collect` and `wait_for` (Flink's mailbox), so a snapshot always matches the records
//! emitted before its barrier.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::sync::mpsc;

use super::control::{Command, Mailbox, Report};
use super::output::{Notification, Output, Snapshot};
use crate::error::{Error, Result};

/// A checkpoint event as seen by a source, with the state snapshot taken for it.
#[derive(Debug, Clone, PartialEq)]
pub enum CheckpointEvent<S> {
    /// Checkpoint `id` was taken: everything emitted so far is before its barrier.
    Triggered(u64),
    /// Checkpoint `id` is durably stored; `state` is the snapshot taken for it. Commit offsets
    /// or acknowledge messages up to this state now. Older checkpoints not yet reported are
    /// subsumed by this one.
    Completed {
        /// The checkpoint id.
        id: u64,
        /// The source's state at that checkpoint.
        state: S,
    },
    /// Checkpoint `id` will never complete.
    Aborted(u64),
}

impl<S> CheckpointEvent<S> {
    /// The newest completed checkpoint among `events` (as [`SourceContext::take_events`]
    /// returns them, oldest first), with its state: what a source commits or acknowledges up
    /// to, since a completed checkpoint subsumes every older one.
    pub fn latest_completed(events: Vec<CheckpointEvent<S>>) -> Option<(u64, S)> {
        events.into_iter().rev().find_map(|e| match e {
            CheckpointEvent::Completed { id, state } => Some((id, state)),
            _ => None,
        })
    }
}

/// The future returned by [`SourceContext::collect`]: ready at once unless a batch must be
/// flushed or a checkpoint served.
#[must_use = "await it: it applies back-pressure and serves checkpoints"]
pub struct Collect<'a>(Option<Pin<Box<dyn Future<Output = Result<()>> + Send + 'a>>>);

impl std::fmt::Debug for Collect<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Collect").field(&self.0.is_some()).finish()
    }
}

impl Future for Collect<'_> {
    type Output = Result<()>;

    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        match self.0.as_mut() {
            None => Poll::Ready(Ok(())),
            Some(f) => f.as_mut().poll(cx),
        }
    }
}

/// What [`SourceContext::wait_for_or_event`] returned.
#[derive(Debug)]
pub enum Waited<T> {
    /// The awaited future completed.
    Ready(T),
    /// A checkpoint event is ready; the future was dropped.
    Event,
    /// A stop was requested: return from `run`.
    Stopped,
}

/// Records a source emits between two yields to the scheduler. A source whose input is always
/// ready (a prefetched buffer, a slow operator chained after it) never returns `Pending` on
/// its own, and a task it woke on its worker thread — the checkpoint coordinator, after a
/// barrier's acknowledgement — waits in that worker's slot, which no other worker takes from,
/// until it does: without these yields no checkpoint completed until the input ended. (A yield
/// right after each acknowledgement was tried too: it completed checkpoints sooner still, but
/// let the testkit's slow sink see the next barrier before its injected failure fired.)
const YIELD_EVERY: u64 = 1024;

/// Events kept for a source that does not read them; older ones are dropped (a later
/// `Completed` subsumes earlier ones anyway).
const MAX_EVENTS: usize = 64;

/// Called with each barrier's id and the state snapshot for it (see
/// [`SourceContext::on_barrier`]).
type BarrierObserver<S> = Box<dyn FnMut(u64, &S) + Send>;

/// The context handed to [`SourceFunction::run`](crate::SourceFunction::run).
pub struct SourceContext<T: Send + 'static, S> {
    out: Box<dyn Output<T>>,
    state: S,
    mailbox: Mailbox,
    reports: mpsc::UnboundedSender<Report>,
    operator: String,
    task: usize,
    subtask: usize,
    pending: VecDeque<(u64, S)>,
    events: VecDeque<CheckpointEvent<S>>,
    stopping: bool,
    shutdown: bool,
    emitted: u64,
    on_barrier: Option<BarrierObserver<S>>,
}

impl<T: Send + 'static, S> std::fmt::Debug for SourceContext<T, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceContext")
            .field("operator", &self.operator)
            .field("subtask", &self.subtask)
            .field("stopping", &self.stopping)
            .finish()
    }
}

impl<T: Send + 'static, S: serde::Serialize + Clone + Send> SourceContext<T, S> {
    pub(crate) fn new(
        out: Box<dyn Output<T>>,
        state: S,
        mailbox: Mailbox,
        reports: mpsc::UnboundedSender<Report>,
        operator: String,
        task: usize,
        subtask: usize,
    ) -> Self {
        SourceContext {
            out,
            state,
            mailbox,
            reports,
            operator,
            task,
            subtask,
            pending: VecDeque::new(),
            events: VecDeque::new(),
            stopping: false,
            shutdown: false,
            emitted: 0,
            on_barrier: None,
        }
    }

    /// Emits a record. The returned future waits when downstream is slow (back-pressure),
    /// serves pending checkpoint triggers, and yields to the scheduler every thousand
    /// records, so a source never starves the tasks sharing its thread; on the common path it
    /// is ready at once.
    #[inline]
    pub fn collect(&mut self, value: T) -> Collect<'_> {
        if self.emitted == 0 {
            self.first_record();
        }
        self.emitted += 1;
        let full = self.out.push(value, None);
        self.after_push(full)
    }

    /// Emits a record with its event timestamp (ms).
    #[inline]
    pub fn collect_with_timestamp(&mut self, value: T, timestamp: i64) -> Collect<'_> {
        if self.emitted == 0 {
            self.first_record();
        }
        self.emitted += 1;
        let full = self.out.push(value, Some(timestamp));
        self.after_push(full)
    }

    /// Tells the coordinator, which may take the first checkpoint sooner.
    #[cold]
    fn first_record(&self) {
        let _ = self.reports.send(Report::FirstRecord);
    }

    #[inline]
    fn after_push(&mut self, full: bool) -> Collect<'_> {
        let pause = self.emitted.is_multiple_of(YIELD_EVERY);
        if full || pause || self.mailbox.has_mail() {
            Collect(Some(Box::pin(self.service(full, pause))))
        } else {
            Collect(None)
        }
    }

    /// Emits a watermark: no record with a smaller timestamp follows from this subtask.
    pub async fn emit_watermark(&mut self, watermark: i64) -> Result<()> {
        self.out.watermark(watermark).await
    }

    /// The checkpointed state (positions). Update it together with each `collect`.
    pub fn state(&self) -> &S {
        &self.state
    }

    /// Mutable access to the checkpointed state.
    pub fn state_mut(&mut self) -> &mut S {
        &mut self.state
    }

    /// Calls `observer` at every checkpoint barrier, with the barrier's id and the state
    /// snapshot for it, before the barrier passes into what is chained after the source. A
    /// sink chained into the source's task that commits the source's positions in its own
    /// transaction learns them this way (through [`TaskShared`](crate::TaskShared)): exactly
    /// the positions of the records before the barrier, which is where the sink's snapshot
    /// happens.
    pub fn on_barrier(&mut self, observer: impl FnMut(u64, &S) + Send + 'static) {
        self.on_barrier = Some(Box::new(observer));
    }

    /// True once a graceful stop was requested: return from `run` soon.
    pub fn is_stopping(&self) -> bool {
        self.stopping
    }

    /// Checkpoint events since the last call, oldest first.
    pub fn take_events(&mut self) -> Vec<CheckpointEvent<S>> {
        self.events.drain(..).collect()
    }

    /// Awaits `fut` (a poll of the external system) while serving checkpoints and stop
    /// requests. Buffered records are flushed first, so nothing lingers while the source is idle.
    /// Returns `Ok(None)` when a stop was requested: `run` should return.
    pub async fn wait_for<F: Future>(&mut self, fut: F) -> Result<Option<F::Output>> {
        match self.wait(fut, false).await? {
            Waited::Ready(v) => Ok(Some(v)),
            Waited::Stopped => Ok(None),
            Waited::Event => unreachable!("wait(.., false) never returns Event"),
        }
    }

    /// After the failed attempt `err` of a retry or reconnect loop: waits out `attempts`' next
    /// delay while serving checkpoints and stop requests (checkpoint events collect for
    /// [`take_events`](SourceContext::take_events)). `Ok(true)`: try again; `Ok(false)`: a stop
    /// was requested, `run` should return; `Err(err)`: giving up (see [`Attempts::after`]).
    ///
    /// [`Attempts::after`]: crate::backoff::Attempts::after
    pub async fn backoff(
        &mut self,
        attempts: &mut crate::backoff::Attempts,
        err: crate::Error,
    ) -> Result<bool> {
        let wait = attempts.after(err)?;
        Ok(self.wait_for(tokio::time::sleep(wait)).await?.is_some())
    }

    /// Like [`wait_for`](SourceContext::wait_for), but also returns (dropping `fut`, which
    /// must be cancel-safe) as soon as a checkpoint event is ready for
    /// [`take_events`](SourceContext::take_events). For sources whose broker waits for them:
    /// a consumer that acknowledges on checkpoint completion gets no more deliveries until it
    /// has acknowledged (prefetch), so it must not sleep through the completion.
    pub async fn wait_for_or_event<F: Future>(&mut self, fut: F) -> Result<Waited<F::Output>> {
        self.wait(fut, true).await
    }

    async fn wait<F: Future>(
        &mut self,
        fut: F,
        return_on_event: bool,
    ) -> Result<Waited<F::Output>> {
        if self.out.buffered() > 0 {
            self.out.flush().await?;
        }
        self.process_mail().await?;
        let _idle = crate::activity::idle("waiting for input");
        tokio::pin!(fut);
        loop {
            if self.stopping {
                return Ok(Waited::Stopped);
            }
            if return_on_event && !self.events.is_empty() {
                return Ok(Waited::Event);
            }
            tokio::select! {
                biased;
                cmd = self.mailbox.recv() => match cmd {
                    Some(cmd) => self.handle(cmd).await?,
                    None => return Err(Error::Cancelled),
                },
                v = &mut fut => return Ok(Waited::Ready(v)),
            }
        }
    }

    async fn service(&mut self, full: bool, pause: bool) -> Result<()> {
        if pause {
            tokio::task::yield_now().await;
        }
        if full {
            self.out.flush().await?;
        }
        self.process_mail().await
    }

    async fn process_mail(&mut self) -> Result<()> {
        while let Some(cmd) = self.mailbox.try_recv() {
            self.handle(cmd).await?;
        }
        Ok(())
    }

    fn push_event(&mut self, ev: CheckpointEvent<S>) {
        if self.events.len() >= MAX_EVENTS {
            self.events.pop_front();
        }
        self.events.push_back(ev);
    }

    async fn handle(&mut self, cmd: Command) -> Result<()> {
        match cmd {
            Command::Trigger(id) => self.checkpoint(id).await?,
            Command::Complete(id) => {
                self.out.notify(Notification::Complete(id)).await?;
                while let Some((pid, _)) = self.pending.front() {
                    if *pid > id {
                        break;
                    }
                    let (pid, state) = self.pending.pop_front().expect("front exists");
                    if pid == id {
                        self.push_event(CheckpointEvent::Completed { id, state });
                    }
                }
            }
            Command::Abort(id) => {
                self.out.notify(Notification::Abort(id)).await?;
                self.pending.retain(|(pid, _)| *pid != id);
                self.push_event(CheckpointEvent::Aborted(id));
            }
            Command::Stop => self.stopping = true,
            Command::Tick => self.out.flush().await?,
            Command::Shutdown => self.shutdown = true,
        }
        Ok(())
    }

    async fn checkpoint(&mut self, id: u64) -> Result<()> {
        let value = serde_json::to_value(&self.state).map_err(|e| Error::State {
            operator: self.operator.clone(),
            source: e,
        })?;
        let mut states: Snapshot = vec![(self.operator.clone(), value)];
        if let Some(observe) = self.on_barrier.as_mut() {
            observe(id, &self.state);
        }
        self.out.barrier(id, &mut states).await?;
        self.pending.push_back((id, self.state.clone()));
        self.push_event(CheckpointEvent::Triggered(id));
        let _ = self.reports.send(Report::Ack {
            id,
            task: self.task,
            subtask: self.subtask,
            states,
        });
        Ok(())
    }

    /// After `run` returned: serve checkpoints until the coordinator says the final one is done.
    pub(crate) async fn serve_until_shutdown(&mut self) -> Result<()> {
        if self.out.buffered() > 0 {
            self.out.flush().await?;
        }
        let _ = self
            .reports
            .send(Report::SourceFinished { task: self.task });
        self.process_mail().await?;
        while !self.shutdown {
            match self.mailbox.recv().await {
                Some(cmd) => self.handle(cmd).await?,
                None => return Ok(()),
            }
        }
        Ok(())
    }

    /// Records emitted so far.
    pub(crate) fn emitted(&self) -> u64 {
        self.emitted
    }

    pub(crate) fn output(&mut self) -> &mut dyn Output<T> {
        &mut *self.out
    }
}
