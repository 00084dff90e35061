//! What the status API reports: a sampler reads the job's metrics once a second into a
//! snapshot (per stage and subtask counts and rates, lag, dead letters, a few minutes of
//! throughput, recent failures); `/api/status` adds the live totals and the job's state.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use serde::Serialize;
use serde_json::{json, Value};

use rivus_sdk::{CheckpointHistory, RestartStatus, Stall};

use super::prom::{self, Sample};
use rivus_engine::Counts;

/// Throughput points kept: five minutes at one a second.
const POINTS: usize = 300;
/// Failures kept.
const FAILURES: usize = 20;

/// Where the job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum JobState {
    Running,
    /// Running, but no record reached the sink and no checkpoint completed for the stall
    /// threshold.
    Stalled,
    Restarting,
    Finished,
    Failed,
}

/// One subtask of one stage.
#[derive(Debug, Clone, Default, Serialize)]
pub(super) struct Subtask {
    pub subtask: u32,
    pub records_in: u64,
    pub records_out: u64,
    pub in_per_second: f64,
    pub out_per_second: f64,
    /// Time spent waiting for downstream (back-pressure), in milliseconds, and its share of
    /// the last second.
    pub backpressure_ms: u64,
    pub backpressured: f64,
}

/// One stage (a task: a chain of operators) with its subtasks.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Stage {
    pub task: String,
    pub subtasks: Vec<Subtask>,
}

/// One output of a component (`orders`, `by_amount.big`) or one sink: records through it,
/// their rate, and — a sink — the share of the last second its subtasks spent in a call to
/// their connector (1: always: this branch is the slow one).
#[derive(Debug, Clone, Default, Serialize)]
pub(super) struct FlowFigures {
    pub records: u64,
    pub per_second: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy: Option<f64>,
}

/// One throughput point.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Point {
    pub t_ms: u64,
    pub read_per_second: f64,
    pub written_per_second: f64,
}

/// A failure that restarted (or ended) the job.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Failure {
    pub t_ms: u64,
    pub message: String,
}

#[derive(Debug, Default)]
struct Sampled {
    stages: Vec<Stage>,
    lag: Vec<Value>,
    dead_letters: u64,
    skipped: u64,
    points: VecDeque<Point>,
    failures: VecDeque<Failure>,
    last: Option<(Instant, u64, u64)>,
    /// (task, subtask) → (records in, records out, back-pressure µs) a second ago.
    previous: BTreeMap<(String, u32), (u64, u64, u64)>,
    last_failure: Option<String>,
    flows: BTreeMap<String, FlowFigures>,
    /// Per sink: the sum of its subtasks in a call at each busy sample, and the samples taken,
    /// since the last second's figures.
    busy: BTreeMap<String, (u64, u64)>,
}

impl Sampled {
    fn push_failure(&mut self, message: String) {
        if self.failures.len() == FAILURES {
            self.failures.pop_front();
        }
        self.failures.push_back(Failure {
            t_ms: now_ms(),
            message,
        });
    }
}

/// Everything the HTTP handlers read.
pub(crate) struct Snapshot {
    pub name: String,
    pub worker: Option<String>,
    pub guarantee: String,
    pub pipeline: Value,
    started: Instant,
    counts: Arc<Counts>,
    render: Box<dyn Fn() -> String + Send + Sync>,
    history: Arc<CheckpointHistory>,
    restarts: tokio::sync::watch::Receiver<RestartStatus>,
    stalls: tokio::sync::watch::Receiver<Option<Stall>>,
    state: Mutex<Option<JobState>>,
    sampled: Mutex<Sampled>,
    /// The gauges shown as lag.
    lag_metrics: Vec<&'static str>,
    /// The sinks' names and subtasks, for their busy share.
    sinks: Vec<String>,
    parallelism: usize,
}

pub(super) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Counters render as floats; they count whole things.
fn whole(v: f64) -> u64 {
    if v.is_finite() && v > 0.0 {
        v as u64
    } else {
        0
    }
}

impl Snapshot {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        name: String,
        worker: Option<String>,
        guarantee: &str,
        pipeline: Value,
        counts: Arc<Counts>,
        render: Box<dyn Fn() -> String + Send + Sync>,
        history: Arc<CheckpointHistory>,
        restarts: tokio::sync::watch::Receiver<RestartStatus>,
        stalls: tokio::sync::watch::Receiver<Option<Stall>>,
    ) -> Self {
        Snapshot {
            name,
            worker,
            guarantee: guarantee.to_owned(),
            pipeline,
            started: Instant::now(),
            counts,
            render,
            history,
            restarts,
            stalls,
            state: Mutex::new(None),
            sampled: Mutex::default(),
            lag_metrics: Vec::new(),
            sinks: Vec::new(),
            parallelism: 1,
        }
    }

    /// The gauges whose samples the dashboard shows as lag (labels `partition`, `subtask`):
    /// what the pipeline's sections name in their [`SectionMetrics`](rivus_pipeline_file::SectionMetrics).
    pub(crate) fn with_lag_metrics(mut self, names: Vec<&'static str>) -> Self {
        self.lag_metrics = names;
        self
    }

    /// The sinks whose busy share the API reports, each run by `parallelism` subtasks.
    pub(crate) fn with_sinks(mut self, sinks: Vec<String>, parallelism: usize) -> Self {
        self.sinks = sinks;
        self.parallelism = parallelism.max(1);
        self
    }

    /// The Prometheus text of the job's metrics (`/metrics`).
    pub(crate) fn metrics_text(&self) -> String {
        (self.render)()
    }

    /// The job ended (the last state the API reports).
    pub(crate) fn ended(&self, state: JobState, failure: Option<String>) {
        *self.state.lock() = Some(state);
        if let Some(message) = failure {
            self.sampled.lock().push_failure(message);
        }
    }

    /// Samples the metrics every second, and whether each sink is in a call fifty times a
    /// second, until aborted.
    pub(crate) async fn sample_forever(self: Arc<Self>) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut busy_tick = tokio::time::interval(Duration::from_millis(20));
        loop {
            tokio::select! {
                _ = tick.tick() => self.sample(),
                _ = busy_tick.tick() => self.sample_busy(),
            }
        }
    }

    /// Adds one sample of how many subtasks of each sink are in a call now.
    pub(crate) fn sample_busy(&self) {
        let flows = self.counts.outputs.lock();
        let mut s = self.sampled.lock();
        for sink in &self.sinks {
            let n = flows
                .get(sink)
                .map_or(0, |f| f.in_call.load(Ordering::Relaxed));
            let e = s.busy.entry(sink.clone()).or_default();
            e.0 += n;
            e.1 += 1;
        }
    }

    /// Reads the metrics once.
    pub(crate) fn sample(&self) {
        let samples = prom::parse(&(self.render)());
        let now = Instant::now();
        let restart = self.restarts.borrow().clone();
        let (read, written) = (
            self.counts.read.load(Ordering::Relaxed),
            self.counts.written.load(Ordering::Relaxed),
        );
        let mut s = self.sampled.lock();
        if let Some(message) = restart
            .last_failure
            .filter(|f| s.last_failure.as_ref() != Some(f))
        {
            s.last_failure = Some(message.clone());
            s.push_failure(message);
        }
        let span = s.last.map(|(at, _, _)| (now - at).as_secs_f64());
        if let (Some(span), Some((_, r0, w0))) = (span, s.last) {
            if s.points.len() == POINTS {
                s.points.pop_front();
            }
            s.points.push_back(Point {
                t_ms: now_ms(),
                read_per_second: read.saturating_sub(r0) as f64 / span.max(1e-3),
                written_per_second: written.saturating_sub(w0) as f64 / span.max(1e-3),
            });
        }
        s.last = Some((now, read, written));
        let flows: Vec<(String, u64)> = self
            .counts
            .outputs
            .lock()
            .iter()
            .map(|(name, f)| (name.clone(), f.records.load(Ordering::Relaxed)))
            .collect();
        let busy = std::mem::take(&mut s.busy);
        for (name, records) in flows {
            let before = s.flows.get(&name).map_or(records, |f| f.records);
            let share = busy.get(&name).map(|(sum, n)| {
                (*sum as f64 / (*n).max(1) as f64 / self.parallelism as f64).clamp(0.0, 1.0)
            });
            s.flows.insert(
                name,
                FlowFigures {
                    records,
                    per_second: span.map_or(0.0, |sp| {
                        records.saturating_sub(before) as f64 / sp.max(1e-3)
                    }),
                    busy: share,
                },
            );
        }
        let (stages, current) = stages(&samples, &s.previous, span);
        s.stages = stages;
        s.previous = current;
        s.lag = samples
            .iter()
            .filter(|m| self.lag_metrics.contains(&m.name.as_str()))
            .map(|m| {
                json!({
                    "partition": m.label("partition"),
                    "subtask": m.label("subtask"),
                    "lag": whole(m.value),
                })
            })
            .collect();
        let sum = |name: &str| -> u64 {
            samples
                .iter()
                .filter(|m| m.name == name)
                .map(|m| whole(m.value))
                .sum()
        };
        s.dead_letters = sum("rivus_records_dead_lettered_total");
        s.skipped = sum("rivus_records_skipped_total");
    }

    /// The job's state now.
    pub(crate) fn state(&self) -> JobState {
        if let Some(s) = *self.state.lock() {
            return s;
        }
        if self.restarts.borrow().restarting {
            JobState::Restarting
        } else if self.stalls.borrow().is_some() {
            JobState::Stalled
        } else {
            JobState::Running
        }
    }

    /// `/api/status`.
    pub(crate) fn status(&self) -> Value {
        let restart = self.restarts.borrow().clone();
        let s = self.sampled.lock();
        let (last_completed, last_aborted) = self.history.last();
        let (completed, aborted) = self.history.totals();
        let latest = s.points.back();
        let stall = self.stalls.borrow().as_ref().map(|st| {
            json!({
                "since_progress_seconds": st.since_progress.as_secs_f64(),
                "stage": st.waiting.as_ref().map(|w| &w.task),
                "subtask": st.waiting.as_ref().map(|w| w.subtask),
                "call": st.waiting.as_ref().map(|w| &w.call),
                "call_seconds": st.waiting.as_ref().map(|w| w.waiting.as_secs_f64()),
                "message": st.to_string(),
            })
        });
        json!({
            "job": self.name,
            "worker": self.worker,
            "state": self.state(),
            "stall": stall,
            "uptime_seconds": self.started.elapsed().as_secs_f64(),
            "guarantee": self.guarantee,
            "pipeline": self.pipeline,
            "records": {
                "read": self.counts.read.load(Ordering::Relaxed),
                "written": self.counts.written.load(Ordering::Relaxed),
                "errors": self.counts.errors.load(Ordering::Relaxed),
                "errors_by_kind": *self.counts.by_kind.lock(),
                "read_per_second": latest.map_or(0.0, |p| p.read_per_second),
                "written_per_second": latest.map_or(0.0, |p| p.written_per_second),
                "skipped": s.skipped,
                "dead_lettered": s.dead_letters,
            },
            "stages": s.stages,
            "flows": s.flows,
            "checkpoints": {
                "completed": completed,
                "aborted": aborted,
                "last_completed": last_completed,
                "last_aborted": last_aborted,
            },
            "restarts": restart.restarts,
            "last_failure": restart.last_failure,
            "failures": s.failures,
            "lag": s.lag,
            "throughput": s.points,
        })
    }

    /// `/api/checkpoints`.
    pub(crate) fn checkpoints(&self) -> Value {
        json!(self.history.recent())
    }
}

/// The stages from the per-subtask counters, with rates against `previous` (`span` seconds
/// ago); also the counters now, for the next sample.
#[allow(clippy::type_complexity)]
fn stages(
    samples: &[Sample],
    previous: &BTreeMap<(String, u32), (u64, u64, u64)>,
    span: Option<f64>,
) -> (Vec<Stage>, BTreeMap<(String, u32), (u64, u64, u64)>) {
    let mut current: BTreeMap<(String, u32), (u64, u64, u64)> = BTreeMap::new();
    for m in samples {
        let slot = match m.name.as_str() {
            "rivus_records_in_total" => 0,
            "rivus_records_out_total" => 1,
            "rivus_backpressure_microseconds_total" => 2,
            _ => continue,
        };
        let Ok(subtask) = m.label("subtask").parse::<u32>() else {
            continue;
        };
        let e = current
            .entry((m.label("task").to_owned(), subtask))
            .or_default();
        let v = whole(m.value);
        match slot {
            0 => e.0 += v,
            1 => e.1 += v,
            _ => e.2 += v,
        }
    }
    let mut stages: Vec<Stage> = Vec::new();
    for ((task, subtask), (i, o, bp)) in &current {
        let (pi, po, pbp) = previous
            .get(&(task.clone(), *subtask))
            .copied()
            .unwrap_or((*i, *o, *bp));
        let per = |now: u64, then: u64| span.map_or(0.0, |s| now.saturating_sub(then) as f64 / s);
        let sub = Subtask {
            subtask: *subtask,
            records_in: *i,
            records_out: *o,
            in_per_second: per(*i, pi),
            out_per_second: per(*o, po),
            backpressure_ms: bp / 1000,
            backpressured: (per(*bp, pbp) / 1e6).clamp(0.0, 1.0),
        };
        match stages.last_mut() {
            Some(s) if &s.task == task => s.subtasks.push(sub),
            _ => stages.push(Stage {
                task: task.clone(),
                subtasks: vec![sub],
            }),
        }
    }
    (stages, current)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_sum_per_subtask_and_rate_against_the_previous_sample() {
        let text = "rivus_records_in_total{job=\"j\",task=\"a\",subtask=\"0\"} 100\n\
            rivus_records_out_total{job=\"j\",task=\"a\",subtask=\"0\"} 90\n\
            rivus_backpressure_microseconds_total{job=\"j\",task=\"a\",subtask=\"0\"} 500000\n\
            rivus_records_in_total{job=\"j\",task=\"a\",subtask=\"1\"} 10\n\
            rivus_records_in_total{job=\"j\",task=\"b\",subtask=\"0\"} 5\n";
        let samples = prom::parse(text);
        let (first, current) = stages(&samples, &BTreeMap::new(), None);
        assert_eq!(first.len(), 2);
        assert_eq!(first[0].subtasks.len(), 2);
        assert_eq!(first[0].subtasks[0].in_per_second, 0.0);
        let mut previous = current;
        previous.insert(("a".into(), 0), (50, 40, 0));
        let (second, _) = stages(&samples, &previous, Some(2.0));
        let a0 = &second[0].subtasks[0];
        assert_eq!(
            (a0.records_in, a0.records_out, a0.backpressure_ms),
            (100, 90, 500)
        );
        assert_eq!((a0.in_per_second, a0.out_per_second), (25.0, 25.0));
        assert_eq!(a0.backpressured, 0.25);
        assert_eq!(second[1].task, "b");
    }
}
