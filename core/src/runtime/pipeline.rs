//! The job builder. A [`Pipeline`] holds the job-wide settings and the graph built so far: any
//! number of sources, each a stream that operators extend, streams joined, split and ended by
//! sinks (`stream.rs`, which also adds `Pipeline::source`). [`Pipeline::build`] turns the
//! graph into a [`Job`].

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, MutexGuard};

use super::counters::Counters;
use super::job::Job;
use super::plan::Plan;
use super::restart::RestartStrategy;
use super::stall::StallSettings;
use super::task::TaskSpec;
use crate::checkpoint::CheckpointConfig;
use crate::context::{CompletedCheckpoints, RuntimeContext};
use crate::error::{Error, Result};
use crate::guarantee::DeliveryGuarantee;

/// A job under construction: its settings and graph. Cloning it gives another handle on the
/// same job (sources may be added through any).
#[derive(Clone)]
pub struct Pipeline {
    graph: Arc<Mutex<Graph>>,
}

/// A sink added to the graph, for the job's guarantee.
pub(super) struct SinkEnd {
    pub(super) name: String,
    /// The weakest guarantee of the sources and sink on the paths into it.
    pub(super) path: DeliveryGuarantee,
    pub(super) sink: DeliveryGuarantee,
    /// The sink commits its sources' positions with its records.
    pub(super) positions_in_sink: bool,
}

/// What the builder collects; streams write into it through their [`Pipeline`].
pub(super) struct Graph {
    pub(super) name: String,
    pub(super) worker: Option<Arc<str>>,
    pub(super) checkpoint: Option<CheckpointConfig>,
    restart: Option<RestartStrategy>,
    stall_threshold: Option<Duration>,
    stall_timeout: Option<Duration>,
    pub(super) batch_size: usize,
    pub(super) channel_capacity: usize,
    buffer_timeout: Duration,
    pub(super) tasks: Vec<TaskSpec>,
    operators: Vec<(String, usize)>,
    pub(super) counters: Arc<Counters>,
    completed: Arc<tokio::sync::watch::Sender<Option<u64>>>,
    names: HashSet<String>,
    pub(super) errors: Vec<Error>,
    exchanges: usize,
    /// The streams not yet ended in a sink, by id: what they are, for errors.
    open: BTreeMap<u64, String>,
    next_stream: u64,
    pub(super) sinks: Vec<SinkEnd>,
    built: bool,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let g = self.graph.lock();
        let (tasks, open) = (g.tasks.len(), g.open.len());
        write!(
            f,
            "Pipeline `{}` ({tasks} tasks, {open} open streams)",
            g.name
        )
    }
}

impl Pipeline {
    /// A pipeline named `name` (the name keys its checkpoints). Defaults: no checkpoints,
    /// batches of 1024 records, channels of 8 batches, 100 ms buffer timeout.
    pub fn new(name: impl Into<String>) -> Self {
        Pipeline {
            graph: Arc::new(Mutex::new(Graph {
                name: name.into(),
                worker: None,
                checkpoint: None,
                restart: None,
                stall_threshold: None,
                stall_timeout: None,
                batch_size: 1024,
                channel_capacity: 8,
                buffer_timeout: Duration::from_millis(100),
                tasks: Vec::new(),
                operators: Vec::new(),
                counters: Arc::default(),
                completed: Arc::new(tokio::sync::watch::channel(None).0),
                names: HashSet::new(),
                errors: Vec::new(),
                exchanges: 0,
                open: BTreeMap::new(),
                next_stream: 0,
                sinks: Vec::new(),
                built: false,
            })),
        }
    }

    pub(super) fn graph(&self) -> MutexGuard<'_, Graph> {
        self.graph.lock()
    }

    /// Whether `other` is a handle on the same job.
    pub(super) fn same(&self, other: &Pipeline) -> bool {
        Arc::ptr_eq(&self.graph, &other.graph)
    }

    fn refuse(&self, path: &str, why: impl Into<String>) {
        self.graph().errors.push(Error::config(path, why.into()));
    }

    /// Runs this process as worker `id` of the job (`rivus run --worker ID`): several
    /// processes with the same pipeline and distinct ids share the work through the
    /// brokers' own group protocols (a Kafka consumer group, a Redis Streams consumer group,
    /// competing RabbitMQ consumers); sources that cannot share refuse to open. Each worker
    /// needs its own checkpoint store (a directory or prefix per worker); its owner lock names
    /// the worker. Set it before the first source.
    pub fn worker(self, id: impl Into<String>) -> Self {
        let id: String = id.into();
        if id.is_empty()
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            self.refuse(
                "pipeline.worker",
                format!("`{id}`: use letters, digits, `-`, `_` or `.`"),
            );
        }
        let started = self.graph().next_stream > 0;
        if started {
            self.refuse("pipeline.worker", "set the worker before the first source");
        }
        self.graph().worker = Some(id.into());
        self
    }

    /// Enables checkpoints.
    pub fn checkpointing(self, config: CheckpointConfig) -> Self {
        if let Err(e) = config.validate() {
            self.graph().errors.push(e);
        }
        self.graph().checkpoint = Some(config);
        self
    }

    /// How a [`Supervisor`](super::Supervisor) restarts the job after a failure (default:
    /// [`RestartStrategy::exponential_delay`] with checkpoints, none without).
    pub fn restart_strategy(self, strategy: RestartStrategy) -> Self {
        if let Err(e) = strategy.validate().map_err(|e| e.under("pipeline.restart")) {
            self.graph().errors.push(e);
        }
        self.graph().restart = Some(strategy);
        self
    }

    /// How long a job may hand no record to its sinks and complete no checkpoint before it is
    /// reported stalled (default: five checkpoint intervals, at least 30 s; 60 s without
    /// checkpoints). See [`Stall`](super::Stall).
    pub fn stall_threshold(self, d: Duration) -> Self {
        self.graph().stall_threshold = Some(d);
        self
    }

    /// Fails the attempt (a retryable [`Error::Stalled`]: the supervisor restarts the job from
    /// its newest checkpoint) once it made no progress for `d`. Default: none, a stall is only
    /// reported. At least the stall threshold.
    pub fn stall_timeout(self, d: Duration) -> Self {
        self.graph().stall_timeout = Some(d);
        self
    }

    /// Records per batch between tasks and into sinks (default 1024).
    pub fn batch_size(self, n: usize) -> Self {
        if n == 0 {
            self.refuse("pipeline.batch_size", "must be at least 1");
        }
        self.graph().batch_size = n.max(1);
        self
    }

    /// Batches buffered per channel between two subtasks (default 8). With the batch size this
    /// bounds the memory between tasks.
    pub fn channel_capacity(self, n: usize) -> Self {
        if n == 0 {
            self.refuse("pipeline.channel_capacity", "must be at least 1");
        }
        self.graph().channel_capacity = n.max(1);
        self
    }

    /// Longest time a record waits in a source's partly filled batch (default 100 ms).
    pub fn buffer_timeout(self, d: Duration) -> Self {
        if d.is_zero() {
            self.refuse("pipeline.buffer_timeout", "must be positive");
        }
        self.graph().buffer_timeout = d;
        self
    }

    /// Builds the job from every source, operator and sink added. Refused when a setting is
    /// wrong or a stream ends in no sink (naming it).
    pub fn build(&self) -> Result<Job> {
        let mut g = self.graph();
        if std::mem::replace(&mut g.built, true) {
            return Err(Error::config("pipeline", "built already"));
        }
        if let Some(e) = g.errors.drain(..).next() {
            return Err(e);
        }
        if let Some(what) = g.open.values().next() {
            return Err(Error::config(
                "pipeline",
                format!("{what} ends in no sink (end it with `sink_to`, or `discard` it)"),
            ));
        }
        if g.sinks.is_empty() {
            return Err(Error::config("pipeline", "the job has no sink"));
        }
        let guarantee = g
            .sinks
            .iter()
            .map(|s| g.end_to_end(s))
            .fold(DeliveryGuarantee::ExactlyOnce, DeliveryGuarantee::weakest);
        let sink_guarantees = g
            .sinks
            .iter()
            .map(|s| (s.name.clone(), g.end_to_end(s)))
            .collect();
        let restart = g
            .restart
            .clone()
            .unwrap_or_else(|| RestartStrategy::default_for(g.checkpoint.is_some()));
        let mut stall = StallSettings::default_for(g.checkpoint.as_ref().map(|c| c.interval));
        if let Some(t) = g.stall_threshold {
            stall.threshold = t;
        }
        stall.timeout = g.stall_timeout;
        super::stall::validate(&stall).map_err(|e| e.under("pipeline"))?;
        let plan = Plan {
            stall,
            activities: Arc::default(),
            stalls: Arc::new(tokio::sync::watch::channel(None).0),
            name: g.name.clone(),
            worker: g.worker.clone(),
            checkpoint: g.checkpoint.clone(),
            buffer_timeout: g.buffer_timeout,
            tasks: std::mem::take(&mut g.tasks),
            operators: std::mem::take(&mut g.operators),
            counters: Arc::clone(&g.counters),
            completed: Arc::clone(&g.completed),
            history: Arc::default(),
        };
        Ok(Job::new(plan, guarantee, sink_guarantees, restart))
    }
}

impl Graph {
    /// Checks and records an operator's name and parallelism; a stateful one keys state in
    /// checkpoints by its name.
    pub(super) fn register(&mut self, name: &str, parallelism: usize, stateful: bool) {
        if parallelism == 0 {
            self.errors.push(Error::config(
                format!("{name}.parallelism"),
                "must be at least 1",
            ));
        }
        if !self.names.insert(name.to_owned()) {
            self.errors.push(Error::config(
                name.to_owned(),
                "operator name used twice (names key checkpointed state)",
            ));
        }
        if stateful {
            self.operators.push((name.to_owned(), parallelism));
        }
    }

    /// A name for the next exchange (a stage behind channels).
    pub(super) fn exchange_name(&mut self) -> String {
        self.exchanges += 1;
        format!("exchange-{}", self.exchanges)
    }

    /// A new stream end, described by `what` until a sink ends it.
    pub(super) fn open_stream(&mut self, what: String) -> u64 {
        self.next_stream += 1;
        self.open.insert(self.next_stream, what);
        self.next_stream
    }

    /// What stream `id` is, for errors.
    pub(super) fn describe(&self, id: u64) -> String {
        self.open
            .get(&id)
            .cloned()
            .unwrap_or_else(|| "a stream".into())
    }

    /// Stream `id` ended (in a sink, a union, a fan-out or a route).
    pub(super) fn close_stream(&mut self, id: u64) {
        self.open.remove(&id);
    }

    /// The contexts of an operator's `parallelism` subtasks, sharing one
    /// [`subtasks_shared`](RuntimeContext::subtasks_shared) map.
    pub(super) fn runtime_contexts(&self, name: &str, parallelism: usize) -> Vec<RuntimeContext> {
        let shared = crate::TaskShared::default();
        (0..parallelism)
            .map(|i| {
                self.runtime_context(name, i, parallelism)
                    .with_subtasks_shared(shared.clone())
            })
            .collect()
    }

    fn runtime_context(&self, name: &str, subtask: usize, parallelism: usize) -> RuntimeContext {
        let mut ctx = RuntimeContext::new(self.name.as_str(), name, subtask, parallelism, None)
            .with_worker(self.worker.as_deref())
            .with_checkpoint_interval(self.checkpoint.as_ref().map(|c| c.interval))
            .with_local_dir(self.checkpoint.as_ref().and_then(|c| c.backend.local_dir()));
        ctx.set_completed_checkpoints(CompletedCheckpoints::new(self.completed.subscribe()));
        ctx
    }

    /// The guarantee on the paths into `sink`: at-most-once without checkpoints; the sink's
    /// own when it commits its source's positions; at most at-least-once across workers (a
    /// record can be read again by the worker that takes its partition or redelivery over).
    fn end_to_end(&self, sink: &SinkEnd) -> DeliveryGuarantee {
        match (&self.checkpoint, &self.worker) {
            (None, _) => DeliveryGuarantee::AtMostOnce,
            (Some(_), _) if sink.positions_in_sink => sink.sink,
            (Some(_), Some(_)) => sink
                .path
                .weakest(sink.sink)
                .weakest(DeliveryGuarantee::AtLeastOnce),
            (Some(_), None) => sink.path.weakest(sink.sink),
        }
    }
}
