//! Running a built pipeline once: restore from the newest checkpoint, start every task and the
//! coordinator, surface the first failure (cancelling the rest and waiting for them), and stop
//! gracefully on request or on SIGINT/SIGTERM. Restarts are the
//! [`Supervisor`](super::Supervisor)'s.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::control::Mailbox;
use super::coordinator::Coordinator;
use super::plan::Plan;
use super::restart::RestartStrategy;
use super::stall::Stall;
use super::task::TaskEnv;
use crate::activity::Activities;
use crate::checkpoint::{CheckpointConfig, CompletedCheckpoint, Holder, OwnerLock};
use crate::error::{Error, Result};
use crate::guarantee::DeliveryGuarantee;

/// A pipeline ready to run (single use: it owns the function instances). [`Job::run`] runs it
/// once; a [`Supervisor`](super::Supervisor) builds and runs it again after a failure, as its
/// [`RestartStrategy`] says.
pub struct Job {
    plan: Plan,
    guarantee: DeliveryGuarantee,
    sink_guarantees: Vec<(String, DeliveryGuarantee)>,
    restart: RestartStrategy,
    stop: watch::Sender<bool>,
    cancel: CancellationToken,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("plan", &self.plan)
            .field("guarantee", &self.guarantee)
            .field("restart", &self.restart)
            .finish()
    }
}

/// Stops a running job from elsewhere (another task, a signal handler, a test).
#[derive(Debug, Clone)]
pub struct JobHandle {
    pub(crate) stop: watch::Sender<bool>,
    pub(crate) cancel: CancellationToken,
}

impl JobHandle {
    /// Graceful stop: sources return, in-flight records drain, a final checkpoint is taken,
    /// everything is closed.
    pub fn stop(&self) {
        let _ = self.stop.send(true);
    }

    /// Hard stop: every task is cancelled now (functions are still closed).
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// The first SIGINT or SIGTERM stops gracefully, the second cancels. Returns at once.
    pub fn stop_on_signals(&self) {
        self.stop_on_signals_then(|| {});
    }

    /// Like [`stop_on_signals`](JobHandle::stop_on_signals), and `after_cancel` runs once the
    /// second signal has cancelled the job (the `rivus` command ends the process a few
    /// seconds later should a task still wait in a call it cannot leave).
    pub fn stop_on_signals_then(&self, after_cancel: impl FnOnce() + Send + 'static) {
        let handle = self.clone();
        tokio::spawn(async move {
            for n in 0..2 {
                if wait_for_signal().await.is_err() {
                    return;
                }
                if n == 0 {
                    tracing::info!("signal received: stopping (again to stop at once)");
                    handle.stop();
                } else {
                    tracing::warn!("second signal: cancelling");
                    handle.cancel();
                    after_cancel();
                    return;
                }
            }
        });
    }
}

async fn wait_for_signal() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r,
            _ = term.recv() => Ok(()),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await
    }
}

/// What a finished job reports.
#[derive(Debug, Clone)]
pub struct JobSummary {
    /// The checkpoint the job restored from.
    pub restored_from: Option<u64>,
    /// Checkpoints completed during this run.
    pub checkpoints_completed: u64,
    /// Checkpoints aborted during this run.
    pub checkpoints_aborted: u64,
    /// The newest checkpoint completed during this run.
    pub last_checkpoint: Option<u64>,
    /// Wall-clock time of the run.
    pub duration: Duration,
    /// Records the sources emitted during this run.
    pub records_read: u64,
    /// Records handed to the sinks during this run (with a supervisor: in every attempt,
    /// replays after a restart included).
    pub records_written: u64,
    /// Times the job was restarted after a failure (by a [`Supervisor`](super::Supervisor)).
    pub restarts: u32,
    /// The failure that caused the last restart.
    pub last_failure: Option<String>,
}

impl Job {
    pub(crate) fn new(
        plan: Plan,
        guarantee: DeliveryGuarantee,
        sink_guarantees: Vec<(String, DeliveryGuarantee)>,
        restart: RestartStrategy,
    ) -> Self {
        Job {
            plan,
            guarantee,
            sink_guarantees,
            restart,
            stop: watch::channel(false).0,
            cancel: CancellationToken::new(),
        }
    }

    /// The end-to-end guarantee: the weakest over every path from a source to a sink, or
    /// at-most-once without checkpoints.
    pub fn delivery_guarantee(&self) -> DeliveryGuarantee {
        self.guarantee
    }

    /// Each sink's end-to-end guarantee: the weakest of the sources and the sink on the paths
    /// into it (the sink's own when it commits its source's positions with its records).
    pub fn sink_guarantees(&self) -> &[(String, DeliveryGuarantee)] {
        &self.sink_guarantees
    }

    /// How a [`Supervisor`](super::Supervisor) restarts this job after a failure.
    pub fn restart_strategy(&self) -> &RestartStrategy {
        &self.restart
    }

    /// Makes `handle` stop or cancel this job (a supervisor's handle, which outlives each
    /// attempt). A failure inside this job cancels only this job.
    pub(crate) fn attach(&mut self, handle: &JobHandle) {
        self.stop = handle.stop.clone();
        self.cancel = handle.cancel.child_token();
    }

    /// Records this job's checkpoints into `history` (a supervisor's, shared by its attempts).
    pub(crate) fn share_history(&mut self, history: &Arc<super::CheckpointHistory>) {
        self.plan.history = Arc::clone(history);
    }

    /// Reports this job's stalls and activities into a supervisor's (shared by its attempts).
    pub(crate) fn share_health(
        &mut self,
        activities: &Arc<Activities>,
        stalls: &Arc<watch::Sender<Option<Stall>>>,
    ) {
        self.plan.activities = Arc::clone(activities);
        self.plan.stalls = Arc::clone(stalls);
    }

    /// Watches whether the job is stalled (`Some`) and where it waits.
    pub fn stalls(&self) -> watch::Receiver<Option<Stall>> {
        self.plan.stalls.subscribe()
    }

    /// What each task is in now.
    pub fn activities(&self) -> Arc<Activities> {
        Arc::clone(&self.plan.activities)
    }

    /// The recent checkpoints of this job.
    pub fn checkpoint_history(&self) -> Arc<super::CheckpointHistory> {
        Arc::clone(&self.plan.history)
    }

    /// The sender of this job's newest completed checkpoint.
    pub(crate) fn completed_sender(&self) -> &Arc<watch::Sender<Option<u64>>> {
        &self.plan.completed
    }

    /// The job's name.
    pub fn name(&self) -> &str {
        &self.plan.name
    }

    /// Watches the job's newest completed checkpoint (for status displays).
    pub fn completed_checkpoints(&self) -> crate::context::CompletedCheckpoints {
        crate::context::CompletedCheckpoints::new(self.plan.completed.subscribe())
    }

    /// A handle to stop or cancel the job once it runs.
    pub fn handle(&self) -> JobHandle {
        JobHandle {
            stop: self.stop.clone(),
            cancel: self.cancel.clone(),
        }
    }

    /// Runs the job to its end: bounded sources finished, a graceful stop, or the first error.
    /// One attempt: a failure is returned, not restarted from.
    pub async fn run(self) -> Result<JobSummary> {
        let (summary, failure) = self.run_once().await;
        match failure {
            Some(e) => Err(e),
            None => Ok(summary),
        }
    }

    /// One attempt; what it did is summarised whether it failed or not: take the checkpoint
    /// store, find what to restore, start the tasks and the coordinator, wait for them all.
    pub(crate) async fn run_once(self) -> (JobSummary, Option<Error>) {
        let started = Instant::now();
        let Job {
            plan,
            stop,
            cancel,
            guarantee: _,
            sink_guarantees: _,
            restart: _,
        } = self;
        let mut summary = JobSummary {
            restored_from: None,
            checkpoints_completed: 0,
            checkpoints_aborted: 0,
            last_checkpoint: None,
            duration: Duration::ZERO,
            records_read: 0,
            records_written: 0,
            restarts: 0,
            last_failure: None,
        };
        // One job, one owner: held until every task of this attempt has ended.
        let found =
            own_and_find_restore(plan.checkpoint.as_ref(), &plan.name, plan.worker.as_deref());
        let (owner, restore) = match found.await {
            Ok(found) => found,
            Err(e) => return (summary, Some(e)),
        };
        let restored_from = restore.as_ref().map(|c| c.checkpoint_id);
        if let Some(id) = restored_from {
            tracing::info!(job = %plan.name, checkpoint = id, "restoring from checkpoint");
        }
        let (name, counters) = (plan.name.clone(), Arc::clone(&plan.counters));
        let stall_watch = tokio::spawn(super::stall::watch(
            name.clone(),
            plan.stall,
            super::stall::Progress {
                counters: Arc::clone(&counters),
                completed: plan.completed.subscribe(),
                activities: Arc::clone(&plan.activities),
                checkpointing: plan.checkpoint.is_some(),
            },
            Arc::clone(&plan.stalls),
        ));
        let stalls = Arc::clone(&plan.stalls);
        let (tasks, coordinator) = start(plan, restore, &stop, &cancel);
        let coord = tokio::spawn(coordinator.run());
        let (mut first, hard_cancelled) = join_tasks(tasks, &cancel, &name, stall_watch).await;
        stalls.send_replace(None);
        cancel.cancel();
        let stats = match coord.await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                first.get_or_insert(e);
                Default::default()
            }
            Err(e) => {
                first.get_or_insert(Error::connector(
                    "checkpoint coordinator panicked",
                    e.to_string(),
                ));
                Default::default()
            }
        };
        summary.restored_from = restored_from;
        summary.checkpoints_completed = stats.completed;
        summary.checkpoints_aborted = stats.aborted;
        summary.last_checkpoint = stats.last_completed;
        summary.duration = started.elapsed();
        summary.records_read = counters.read.load(Ordering::Relaxed);
        summary.records_written = counters.written.load(Ordering::Relaxed);
        if first.is_none() && hard_cancelled {
            first = Some(Error::Cancelled);
        }
        if let Some(owner) = owner {
            owner.release().await;
        }
        (summary, first)
    }
}

/// With checkpoints: takes the job's store (refused while another process holds it) and
/// reads the newest checkpoint to restore from.
async fn own_and_find_restore(
    checkpoint: Option<&CheckpointConfig>,
    job: &str,
    worker: Option<&str>,
) -> Result<(Option<OwnerLock>, Option<Arc<CompletedCheckpoint>>)> {
    let Some(c) = checkpoint else {
        return Ok((None, None));
    };
    let owner = c.backend.lock(&Holder::this_process(job, worker)).await?;
    match c.backend.latest(job).await {
        Ok(latest) => Ok((Some(owner), latest.map(Arc::new))),
        Err(e) => {
            owner.release().await;
            Err(e)
        }
    }
}

/// Spawns every task of `plan`, each restoring from `restore`, and makes the coordinator
/// that checkpoints them.
fn start(
    plan: Plan,
    restore: Option<Arc<CompletedCheckpoint>>,
    stop: &watch::Sender<bool>,
    cancel: &CancellationToken,
) -> (JoinSet<Result<()>>, Coordinator) {
    super::panic::install_hook();
    plan.activities.reset();
    let restored_from = restore.as_ref().map(|c| c.checkpoint_id);
    let (report_tx, report_rx) = mpsc::unbounded_channel();
    let mut mailboxes = Vec::new();
    let mut is_source = Vec::new();
    let mut set = JoinSet::new();
    for (index, spec) in plan.tasks.into_iter().enumerate() {
        let (tx, mailbox) = Mailbox::new();
        mailboxes.push(tx);
        is_source.push(spec.is_source);
        let env = TaskEnv {
            task: index,
            mailbox,
            reports: report_tx.clone(),
            restore: restore.clone(),
            cancel: cancel.clone(),
            checkpointing: plan.checkpoint.is_some(),
        };
        let (name, subtask) = (spec.name, spec.subtask);
        let activity = plan.activities.register(&name, subtask);
        let fut = (spec.start)(env);
        set.spawn(async move {
            let fut = crate::activity::scope(activity, super::panic::catch(fut));
            fut.await.map_err(|e| Error::Task {
                task: name,
                subtask,
                source: Box::new(e),
            })
        });
    }
    drop(report_tx);
    let coordinator = Coordinator {
        job: plan.name.clone(),
        config: plan.checkpoint.clone(),
        tasks: mailboxes,
        is_source,
        operators: plan.operators.clone(),
        reports: report_rx,
        stop: {
            // A stop asked for before this attempt began (between two attempts) counts.
            let mut rx = stop.subscribe();
            if *rx.borrow() {
                rx.mark_changed();
            }
            rx
        },
        cancel: cancel.clone(),
        next_id: restored_from.map_or(1, |id| id + 1),
        buffer_timeout: plan.buffer_timeout,
        completed: Arc::clone(&plan.completed),
        history: Arc::clone(&plan.history),
    };
    (set, coordinator)
}

/// Waits for every task. The first failure cancels the others and is returned; the flag says
/// the job was cancelled without a failure of its own (a hard stop).
async fn join_tasks(
    mut set: JoinSet<Result<()>>,
    cancel: &CancellationToken,
    job: &str,
    mut stall_watch: tokio::task::JoinHandle<Error>,
) -> (Option<Error>, bool) {
    let mut first: Option<Error> = None;
    let mut hard_cancelled = false;
    let mut watching = true;
    loop {
        let joined = tokio::select! {
            joined = set.join_next() => match joined {
                Some(j) => j,
                None => break,
            },
            stalled = &mut stall_watch, if watching => {
                watching = false;
                if let Ok(e) = stalled {
                    if first.is_none() {
                        first = Some(e);
                        cancel.cancel();
                    }
                }
                continue;
            }
        };
        // Panics are caught inside each task (with the task's name); a join error here is
        // an abort.
        let result = joined.unwrap_or(Err(Error::Cancelled));
        if let Err(e) = result {
            if first.is_none() && !e.is_cancelled() {
                tracing::error!(job = %job, error = %e, "task failed: cancelling the job");
                first = Some(e);
                cancel.cancel();
            } else if first.is_none() {
                // Cancelled without a root cause (a hard stop): keep looking for one.
                hard_cancelled = true;
                cancel.cancel();
            }
        }
    }
    stall_watch.abort();
    (first, hard_cancelled)
}
