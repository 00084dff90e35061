//! Stall detection: a job that has handed no record to its sinks and completed no checkpoint
//! for longer than a threshold says so — with the stage and the call it waits in (from
//! [`Activities`](crate::activity::Activities)) — on a watch the status displays read and in
//! the gauge `rivus_job_stalled`; with a stall timeout the attempt then fails with
//! [`Error::Stalled`] (retryable: the supervisor restarts the job from its newest checkpoint).
//!
//! Without checkpoints an idle source also hands no records on, so the job counts as stalled
//! only while some task has been inside one call (not waiting for input) past the threshold.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::counters::Counters;
use crate::activity::{Activities, TaskWait};
use crate::error::{Error, Result};

/// A job that makes no progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stall {
    /// Since the last record reached a sink or the last checkpoint completed.
    pub since_progress: Duration,
    /// The task in the same call the longest, if any is in one.
    pub waiting: Option<TaskWait>,
}

impl std::fmt::Display for Stall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "no progress for {:.0}s",
            self.since_progress.as_secs_f64()
        )?;
        if let Some(w) = &self.waiting {
            write!(f, ": {w}")?;
        }
        Ok(())
    }
}

/// When a job counts as stalled, and whether that fails the attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StallSettings {
    /// No progress for this long: stalled.
    pub threshold: Duration,
    /// No progress for this long: the attempt fails with [`Error::Stalled`].
    pub timeout: Option<Duration>,
}

impl StallSettings {
    /// Five checkpoint intervals and at least 30 s with checkpoints, else 60 s; no timeout.
    pub fn default_for(checkpoint_interval: Option<Duration>) -> Self {
        let threshold = match checkpoint_interval {
            Some(i) => (i * 5).max(Duration::from_secs(30)),
            None => Duration::from_secs(60),
        };
        StallSettings {
            threshold,
            timeout: None,
        }
    }
}

/// What the watch reads each tick.
pub(crate) struct Progress {
    pub counters: Arc<Counters>,
    pub completed: watch::Receiver<Option<u64>>,
    pub activities: Arc<Activities>,
    pub checkpointing: bool,
}

/// Watches one attempt until it fails it (a stall past the timeout) or is dropped.
pub(crate) async fn watch(
    job: String,
    settings: StallSettings,
    progress: Progress,
    report: Arc<watch::Sender<Option<Stall>>>,
) -> Error {
    let tick = (settings.threshold / 10).clamp(Duration::from_millis(50), Duration::from_secs(1));
    let gauge = metrics::gauge!("rivus_job_stalled", "job" => job.clone());
    gauge.set(0.0);
    report.send_replace(None);
    let mut last = (u64::MAX, None);
    let mut last_progress = Instant::now();
    let mut interval = tokio::time::interval(tick);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        let now_seen = (
            progress.counters.written.load(Ordering::Relaxed),
            *progress.completed.borrow(),
        );
        let now = Instant::now();
        if now_seen != last {
            last = now_seen;
            last_progress = now;
            if report.send_replace(None).is_some() {
                tracing::info!(job = %job, "making progress again");
                gauge.set(0.0);
            }
            continue;
        }
        let since = now - last_progress;
        let waiting = progress.activities.longest();
        let stalled = since >= settings.threshold
            && (progress.checkpointing
                || waiting
                    .as_ref()
                    .is_some_and(|w| w.waiting >= settings.threshold));
        if !stalled {
            if report.send_replace(None).is_some() {
                gauge.set(0.0);
            }
            continue;
        }
        let stall = Stall {
            since_progress: since,
            waiting,
        };
        if report.borrow().is_none() {
            tracing::warn!(job = %job, "STALLED: {stall}");
            gauge.set(1.0);
        }
        if let Some(limit) = settings.timeout.filter(|l| since >= *l) {
            tracing::error!(job = %job, timeout_s = limit.as_secs_f64(),
                "STALLED past the stall timeout: failing the attempt ({stall})");
            let waiting = stall.waiting.as_ref().map(ToString::to_string);
            report.send_replace(Some(stall));
            return Error::Stalled {
                since: limit,
                waiting,
            };
        }
        report.send_replace(Some(stall));
    }
}

/// Checks a threshold and timeout given by a user (errors name `stall_threshold` and
/// `stall_timeout`, relative to where they are set).
pub(crate) fn validate(settings: &StallSettings) -> Result<()> {
    if settings.threshold.is_zero() {
        return Err(Error::config("stall_threshold", "must be longer than 0"));
    }
    if let Some(t) = settings.timeout {
        if t < settings.threshold {
            return Err(Error::config(
                "stall_timeout",
                format!(
                    "{t:?} is shorter than the stall threshold ({:?}): a job would restart \
                     before it is reported stalled",
                    settings.threshold
                ),
            ));
        }
    }
    Ok(())
}
