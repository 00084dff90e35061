//! The checkpoint coordinator: triggers checkpoint N at the sources on an interval (the first
//! soon after the first record, see `CheckpointConfig::first_checkpoint_delay`), collects
//! every task's acknowledgement and state, stores the checkpoint durably, then notifies every
//! task (complete or aborted). It also drives graceful stop and the final checkpoint.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::control::{Command, MailboxSender, Report};
use super::CheckpointRecord;
use crate::checkpoint::{CheckpointConfig, CompletedCheckpoint};
use crate::error::{Error, Result};

/// Counts reported by the coordinator when the job ends.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct CheckpointStats {
    pub completed: u64,
    pub aborted: u64,
    pub last_completed: Option<u64>,
}

struct Pending {
    id: u64,
    started: Instant,
    timestamp_ms: u64,
    acked: Vec<bool>,
    operators: BTreeMap<String, Vec<Option<serde_json::Value>>>,
    is_final: bool,
}

pub(crate) struct Coordinator {
    pub job: String,
    pub config: Option<CheckpointConfig>,
    pub tasks: Vec<MailboxSender>,
    pub is_source: Vec<bool>,
    /// Stateful operators and their parallelism (every checkpoint lists them all).
    pub operators: Vec<(String, usize)>,
    pub reports: mpsc::UnboundedReceiver<Report>,
    pub stop: watch::Receiver<bool>,
    pub cancel: CancellationToken,
    pub next_id: u64,
    pub buffer_timeout: Duration,
    /// Published on every completed checkpoint (see `RuntimeContext::completed_checkpoints`).
    pub completed: std::sync::Arc<watch::Sender<Option<u64>>>,
    /// The recent checkpoints, for status displays.
    pub history: std::sync::Arc<super::CheckpointHistory>,
}

const FINAL_ATTEMPTS: u32 = 3;

impl Coordinator {
    fn sources(&self) -> impl Iterator<Item = &MailboxSender> {
        self.tasks
            .iter()
            .zip(&self.is_source)
            .filter(|(_, s)| **s)
            .map(|(t, _)| t)
    }

    fn broadcast(&self, cmd: Command) {
        self.tasks.iter().for_each(|t| t.send(cmd));
    }

    fn trigger(&mut self, is_final: bool) -> Pending {
        let id = self.next_id;
        self.next_id += 1;
        let timestamp_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        tracing::debug!(job = %self.job, checkpoint = id, is_final, "triggering checkpoint");
        self.sources().for_each(|s| s.send(Command::Trigger(id)));
        Pending {
            id,
            started: Instant::now(),
            timestamp_ms,
            acked: vec![false; self.tasks.len()],
            operators: self
                .operators
                .iter()
                .map(|(n, p)| (n.clone(), vec![None; *p]))
                .collect(),
            is_final,
        }
    }

    fn record(&self, p: &Pending, bytes: Option<u64>, aborted: Option<&str>) -> CheckpointRecord {
        CheckpointRecord {
            id: p.id,
            triggered_ms: p.timestamp_ms,
            duration_ms: p.started.elapsed().as_millis() as u64,
            bytes,
            result: if aborted.is_some() {
                "aborted"
            } else {
                "completed"
            },
            reason: aborted.map(str::to_owned),
            is_final: p.is_final,
        }
    }

    fn abort(&self, p: &Pending, stats: &mut CheckpointStats, why: &str) {
        tracing::warn!(job = %self.job, checkpoint = p.id, reason = why, "checkpoint aborted");
        metrics::counter!("rivus_checkpoints_aborted_total", "job" => self.job.clone())
            .increment(1);
        stats.aborted += 1;
        self.history.record(self.record(p, None, Some(why)));
        self.broadcast(Command::Abort(p.id));
    }

    /// Stores and announces a checkpoint every task acknowledged; `Ok(false)` when storing
    /// failed (the job goes on; the next checkpoint tries again), `Err` when this process no
    /// longer owns the store (another one took the job over): the job must end.
    async fn complete(&self, mut p: Pending, stats: &mut CheckpointStats) -> Result<bool> {
        let config = self.config.as_ref().expect("checkpointing is enabled");
        let cp = CompletedCheckpoint {
            job: self.job.clone(),
            checkpoint_id: p.id,
            timestamp_ms: p.timestamp_ms,
            operators: std::mem::take(&mut p.operators),
        };
        match config.backend.store(&cp).await {
            Ok(bytes) => {
                let took = p.started.elapsed();
                tracing::info!(job = %self.job, checkpoint = p.id, bytes, ms = took.as_millis() as u64,
                    "checkpoint complete");
                let job = self.job.clone();
                metrics::counter!("rivus_checkpoints_completed_total", "job" => job.clone())
                    .increment(1);
                metrics::histogram!("rivus_checkpoint_duration_seconds", "job" => job.clone())
                    .record(took.as_secs_f64());
                metrics::gauge!("rivus_checkpoint_size_bytes", "job" => job).set(bytes as f64);
                stats.completed += 1;
                stats.last_completed = Some(p.id);
                self.history.record(self.record(&p, Some(bytes), None));
                self.completed.send_replace(Some(p.id));
                self.broadcast(Command::Complete(p.id));
                Ok(true)
            }
            Err(e) => {
                let pending = Pending {
                    operators: BTreeMap::new(),
                    ..p
                };
                self.abort(&pending, stats, &format!("storing failed: {e}"));
                if matches!(e, Error::Owner { .. }) {
                    return Err(e);
                }
                Ok(false)
            }
        }
    }

    /// Runs until the sources are shut down (normal end) or the job is cancelled.
    pub(super) async fn run(mut self) -> Result<CheckpointStats> {
        let mut stats = CheckpointStats::default();
        let n_sources = self.is_source.iter().filter(|s| **s).count();
        let mut finished = vec![false; self.tasks.len()];
        let mut pending: Option<Pending> = None;
        let mut next_trigger = Instant::now() + self.interval();
        // Until the first checkpoint of this run is triggered, a first record brings it nearer.
        let mut triggered = false;
        let mut tick = tokio::time::interval(self.buffer_timeout);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut stop_sent = false;
        let mut final_attempts = 0;
        let checkpointing = self.config.is_some();
        loop {
            let all_finished = finished.iter().filter(|f| **f).count() == n_sources;
            if all_finished && pending.is_none() {
                if !checkpointing || !self.config.as_ref().unwrap().final_checkpoint {
                    break;
                }
                if final_attempts == FINAL_ATTEMPTS {
                    self.sources().for_each(|s| s.send(Command::Shutdown));
                    return Err(Error::checkpoint(
                        self.next_id - 1,
                        format!("final checkpoint failed {FINAL_ATTEMPTS} times"),
                    ));
                }
                final_attempts += 1;
                pending = Some(self.trigger(true));
            }
            let deadline = match &pending {
                Some(p) => p.started + self.timeout(),
                None if checkpointing => next_trigger,
                None => Instant::now() + Duration::from_secs(3600),
            };
            tokio::select! {
                _ = self.cancel.cancelled() => return Ok(stats),
                _ = tick.tick() => self.sources().for_each(|s| s.send(Command::Tick)),
                changed = self.stop.changed(), if !stop_sent => {
                    if changed.is_ok() && *self.stop.borrow() {
                        tracing::info!(job = %self.job, "stopping: sources asked to return");
                        self.sources().for_each(|s| s.send(Command::Stop));
                    }
                    stop_sent = true;
                }
                _ = tokio::time::sleep_until(deadline.into()) => {
                    match pending.take() {
                        Some(p) => self.abort(&p, &mut stats, "timed out"),
                        None if !all_finished => {
                            triggered = true;
                            pending = Some(self.trigger(false));
                        }
                        None => {}
                    }
                }
                report = self.reports.recv() => match report {
                    None => return Ok(stats),
                    Some(Report::SourceFinished { task }) => finished[task] = true,
                    Some(Report::FirstRecord) => {
                        let delay = self.config.as_ref().and_then(|c| c.first_checkpoint_delay);
                        if let (Some(d), None, false) = (delay, &pending, triggered) {
                            next_trigger = next_trigger.min(Instant::now() + d);
                        }
                    }
                    Some(Report::Ack { id, task, subtask, states }) => {
                        let Some(p) = pending.as_mut().filter(|p| p.id == id) else {
                            tracing::debug!(checkpoint = id, task, "late acknowledgement ignored");
                            continue;
                        };
                        p.acked[task] = true;
                        for (name, value) in states {
                            if let Some(slot) = p.operators.get_mut(&name).and_then(|v| v.get_mut(subtask)) {
                                *slot = Some(value);
                            }
                        }
                        if p.acked.iter().all(|a| *a) {
                            let p = pending.take().expect("pending checkpoint");
                            let is_final = p.is_final;
                            let ok = match self.complete(p, &mut stats).await {
                                Ok(ok) => ok,
                                Err(e) => {
                                    tracing::error!(job = %self.job, error = %e,
                                        "lost the checkpoint store: ending the job");
                                    self.cancel.cancel();
                                    return Err(e);
                                }
                            };
                            next_trigger = Instant::now() + self.interval();
                            if is_final && ok {
                                break;
                            }
                        }
                    }
                },
            }
        }
        self.sources().for_each(|s| s.send(Command::Shutdown));
        Ok(stats)
    }

    fn interval(&self) -> Duration {
        self.config
            .as_ref()
            .map(|c| c.interval)
            .unwrap_or(Duration::from_secs(3600))
    }

    fn timeout(&self) -> Duration {
        self.config
            .as_ref()
            .map(|c| c.timeout)
            .unwrap_or(Duration::from_secs(3600))
    }
}
