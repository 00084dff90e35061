//! The supervisor: runs a job, and when a task fails with an error a restart may fix, waits as
//! the job's [`RestartStrategy`] says, builds the job anew and runs it again from its newest
//! completed checkpoint — in the same process, until it ends, the strategy gives up, or the
//! failure is one no restart can fix.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::job::{Job, JobHandle, JobSummary};
use super::restart::{RestartStrategy, RestartTracker};
use super::stall::Stall;
use crate::activity::Activities;
use crate::context::CompletedCheckpoints;
use crate::error::Result;
use crate::guarantee::DeliveryGuarantee;

/// What a supervisor has restarted so far, for status displays.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestartStatus {
    /// Restarts so far.
    pub restarts: u32,
    /// The failure that caused the last restart.
    pub last_failure: Option<String>,
    /// True while waiting to restart (between a failure and the next attempt's start).
    pub restarting: bool,
}

/// Runs a job with restarts. `build` creates a fresh [`Job`] for each attempt (function
/// instances are single-use); the first one is built by [`Supervisor::new`], so bad
/// configuration is refused before anything runs.
///
/// ```no_run
/// # use rivus_sdk::prelude::*;
/// /// Runs the job that `build` makes, again after each failure a restart may fix.
/// async fn run_healing(build: fn() -> Result<Job>) -> Result<JobSummary> {
///     let supervisor = Supervisor::new(|| async move { build() }).await?;
///     supervisor.handle().stop_on_signals();
///     let summary = supervisor.run().await?;
///     println!("restarted {} times", summary.restarts);
///     Ok(summary)
/// }
/// ```
pub struct Supervisor<B> {
    build: B,
    first: Option<Job>,
    name: String,
    guarantee: DeliveryGuarantee,
    strategy: RestartStrategy,
    handle: JobHandle,
    status: Arc<watch::Sender<RestartStatus>>,
    completed: Arc<watch::Sender<Option<u64>>>,
    history: Arc<super::CheckpointHistory>,
    activities: Arc<Activities>,
    stalls: Arc<watch::Sender<Option<Stall>>>,
}

impl<B> std::fmt::Debug for Supervisor<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervisor")
            .field("job", &self.name)
            .field("strategy", &self.strategy)
            .finish()
    }
}

impl<B, F> Supervisor<B>
where
    B: FnMut() -> F,
    F: Future<Output = Result<Job>>,
{
    /// Builds the first attempt's job now; its [`Job::restart_strategy`] governs restarts.
    pub async fn new(mut build: B) -> Result<Self> {
        let first = build().await?;
        let handle = first.handle();
        Ok(Supervisor {
            name: first.name().to_owned(),
            guarantee: first.delivery_guarantee(),
            strategy: first.restart_strategy().clone(),
            first: Some(first),
            build,
            handle,
            status: Arc::new(watch::channel(RestartStatus::default()).0),
            completed: Arc::new(watch::channel(None).0),
            history: Arc::default(),
            activities: Arc::default(),
            stalls: Arc::new(watch::channel(None).0),
        })
    }

    /// The job's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The end-to-end delivery guarantee (see [`Job::delivery_guarantee`]).
    pub fn delivery_guarantee(&self) -> DeliveryGuarantee {
        self.guarantee
    }

    /// The strategy in force.
    pub fn restart_strategy(&self) -> &RestartStrategy {
        &self.strategy
    }

    /// Stops or cancels whichever attempt is running (or the wait before the next one).
    pub fn handle(&self) -> JobHandle {
        self.handle.clone()
    }

    /// Watches the restarts.
    pub fn restarts(&self) -> watch::Receiver<RestartStatus> {
        self.status.subscribe()
    }

    /// The recent checkpoints across attempts.
    pub fn checkpoint_history(&self) -> Arc<super::CheckpointHistory> {
        Arc::clone(&self.history)
    }

    /// Watches the newest completed checkpoint across attempts.
    pub fn completed_checkpoints(&self) -> CompletedCheckpoints {
        CompletedCheckpoints::new(self.completed.subscribe())
    }

    /// Watches whether the job is stalled (`Some`: no record reached a sink and no checkpoint
    /// completed for the stall threshold) and where it waits, across attempts.
    pub fn stalls(&self) -> watch::Receiver<Option<Stall>> {
        self.stalls.subscribe()
    }

    /// What each task of the running attempt is in now.
    pub fn activities(&self) -> Arc<Activities> {
        Arc::clone(&self.activities)
    }

    /// Runs attempts until the job ends. The summary adds up every attempt; the error is the
    /// failure the supervisor did not restart from (not retryable, strategy exhausted, or a
    /// stop asked for while waiting to restart).
    pub async fn run(mut self) -> Result<JobSummary> {
        let started = Instant::now();
        let mut tracker = RestartTracker::new(self.strategy.clone());
        let mut total: Option<JobSummary> = None;
        let mut next = self.first.take().map(Ok);
        loop {
            let attempt_started = Instant::now();
            let built = match next.take() {
                Some(job) => job,
                None => (self.build)().await,
            };
            let failure = match built {
                Ok(mut job) => {
                    job.attach(&self.handle);
                    job.share_history(&self.history);
                    job.share_health(&self.activities, &self.stalls);
                    let forward = forward_checkpoints(job.completed_sender(), &self.completed);
                    self.status.send_modify(|s| s.restarting = false);
                    let (summary, failure) = job.run_once().await;
                    forward.abort();
                    add(&mut total, summary);
                    match failure {
                        None => break,
                        Some(e) => e,
                    }
                }
                Err(e) => e,
            };
            let stopping = *self.handle.stop.borrow() || self.handle.cancel.is_cancelled();
            if stopping || !failure.is_retryable() {
                if !failure.is_cancelled() {
                    tracing::error!(job = %self.name, error = %failure,
                        retryable = failure.is_retryable(), "job failed: not restarting");
                }
                return Err(failure);
            }
            let ran_for = attempt_started.elapsed();
            let Some(delay) = tracker.on_failure(Instant::now(), ran_for) else {
                tracing::error!(job = %self.name, error = %failure, strategy = ?self.strategy,
                    "job failed: the restart strategy allows no more restarts");
                return Err(failure);
            };
            let cause = failure.to_string();
            let restarts = self.status.borrow().restarts + 1;
            tracing::warn!(job = %self.name, error = %cause, restart = restarts,
                delay_ms = delay.as_millis() as u64, "job failed: restarting from the newest completed checkpoint");
            metrics::counter!("rivus_job_restarts_total", "job" => self.name.clone()).increment(1);
            metrics::gauge!("rivus_job_last_failure_timestamp_seconds", "job" => self.name.clone())
                .set(unix_now());
            self.status.send_modify(|s| {
                s.restarts = restarts;
                s.last_failure = Some(cause);
                s.restarting = true;
            });
            if !wait(&self.handle, delay).await {
                return Err(failure);
            }
        }
        let status = self.status.borrow().clone();
        let mut summary = total.expect("at least one attempt ran");
        summary.duration = started.elapsed();
        summary.restarts = status.restarts;
        summary.last_failure = status.last_failure;
        Ok(summary)
    }
}

/// Waits `delay`; false when a stop or a cancel came first.
async fn wait(handle: &JobHandle, delay: Duration) -> bool {
    let mut stop = handle.stop.subscribe();
    if *stop.borrow() {
        return false;
    }
    tokio::select! {
        _ = tokio::time::sleep(delay) => true,
        _ = stop.wait_for(|s| *s) => false,
        _ = handle.cancel.cancelled() => false,
    }
}

/// Copies an attempt's completed checkpoints to the supervisor's watch.
fn forward_checkpoints(
    from: &Arc<watch::Sender<Option<u64>>>,
    to: &Arc<watch::Sender<Option<u64>>>,
) -> tokio::task::JoinHandle<()> {
    let mut rx = from.subscribe();
    let to = Arc::clone(to);
    tokio::spawn(async move {
        while rx.changed().await.is_ok() {
            let id = *rx.borrow_and_update();
            if id.is_some() {
                to.send_replace(id);
            }
        }
    })
}

fn add(total: &mut Option<JobSummary>, s: JobSummary) {
    match total {
        None => *total = Some(s),
        Some(t) => {
            t.checkpoints_completed += s.checkpoints_completed;
            t.checkpoints_aborted += s.checkpoints_aborted;
            t.last_checkpoint = s.last_checkpoint.or(t.last_checkpoint);
            t.records_read += s.records_read;
            t.records_written += s.records_written;
        }
    }
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}
