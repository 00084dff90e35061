//! The pipeline builder: source → map / filter / flat_map / key_by / rebalance → sink, each
//! stage with its own parallelism. Operators chain into the task that feeds them; a change of
//! parallelism, `key_by` or `rebalance` starts a new task behind bounded channels.

use std::collections::HashSet;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::chain::Chained;
use super::counters::Counters;
use super::event::Event;
use super::input_gate::InputGate;
use super::job::Job;
use super::output::{hash_key, ChannelOutput, Output, Partitioner};
use super::plan::Plan;
use super::restart::RestartStrategy;
use super::sink_output::SinkOutput;
use super::stall::StallSettings;
use super::task::{run_exchange, run_source, TaskSpec};
use crate::checkpoint::CheckpointConfig;
use crate::context::{CompletedCheckpoints, RuntimeContext};
use crate::error::{Error, Result};
use crate::function::{SinkFunction, SourceFunction};
use crate::guarantee::DeliveryGuarantee;

type OutputFactory<T> = Box<dyn FnMut(usize) -> Box<dyn Output<T>> + Send>;
type PendingStage<T> = Box<dyn FnOnce(OutputFactory<T>) -> Vec<TaskSpec> + Send>;

/// `stage -> sink` when a sink is chained into the stage, else the stage's name.
fn task_name<T: Send + 'static>(stage: &str, out: &dyn Output<T>) -> String {
    match out.sink_name() {
        Some(sink) => format!("{stage} -> {sink}"),
        None => stage.to_owned(),
    }
}

/// Job-wide settings and the tasks built so far.
pub struct Pipeline {
    pub(crate) name: String,
    pub(crate) worker: Option<Arc<str>>,
    pub(crate) checkpoint: Option<CheckpointConfig>,
    restart: Option<RestartStrategy>,
    stall_threshold: Option<Duration>,
    stall_timeout: Option<Duration>,
    pub(crate) batch_size: usize,
    pub(crate) channel_capacity: usize,
    pub(crate) buffer_timeout: Duration,
    pub(crate) tasks: Vec<TaskSpec>,
    pub(crate) operators: Vec<(String, usize)>,
    pub(crate) counters: Arc<Counters>,
    pub(crate) completed: Arc<tokio::sync::watch::Sender<Option<u64>>>,
    names: HashSet<String>,
    errors: Vec<Error>,
    exchanges: usize,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("name", &self.name)
            .field("checkpoint", &self.checkpoint)
            .field("batch_size", &self.batch_size)
            .field("channel_capacity", &self.channel_capacity)
            .field("tasks", &self.tasks.len())
            .finish()
    }
}

impl Pipeline {
    /// A pipeline named `name` (the name keys its checkpoints). Defaults: no checkpoints,
    /// batches of 1024 records, channels of 8 batches, 100 ms buffer timeout.
    pub fn new(name: impl Into<String>) -> Self {
        Pipeline {
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
        }
    }

    /// Runs this process as worker `id` of the job (`rivus run --worker ID`): several
    /// processes with the same pipeline and distinct ids share the work through the
    /// brokers' own group protocols (a Kafka consumer group, a Redis Streams consumer group,
    /// competing RabbitMQ consumers); sources that cannot share refuse to open. Each worker
    /// needs its own checkpoint store (a directory or prefix per worker); its owner lock names
    /// the worker. Set it before the first source.
    pub fn worker(mut self, id: impl Into<String>) -> Self {
        let id: String = id.into();
        if id.is_empty()
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            self.errors.push(Error::config(
                "pipeline.worker",
                format!("`{id}`: use letters, digits, `-`, `_` or `.`"),
            ));
        }
        if !self.tasks.is_empty() {
            self.errors.push(Error::config(
                "pipeline.worker",
                "set the worker before the first source",
            ));
        }
        self.worker = Some(id.into());
        self
    }

    /// Enables checkpoints.
    pub fn checkpointing(mut self, config: CheckpointConfig) -> Self {
        if let Err(e) = config.validate() {
            self.errors.push(e);
        }
        self.checkpoint = Some(config);
        self
    }

    /// How a [`Supervisor`](super::Supervisor) restarts the job after a failure (default:
    /// [`RestartStrategy::exponential_delay`] with checkpoints, none without).
    pub fn restart_strategy(mut self, strategy: RestartStrategy) -> Self {
        if let Err(e) = strategy.validate().map_err(|e| e.under("pipeline.restart")) {
            self.errors.push(e);
        }
        self.restart = Some(strategy);
        self
    }

    setters! {
        /// How long a job may hand no record to its sinks and complete no checkpoint before it is
        /// reported stalled (default: five checkpoint intervals, at least 30 s; 60 s without
        /// checkpoints). See [`Stall`](super::Stall).
        stall_threshold(d: Duration) => stall_threshold = Some(d);

        /// Fails the attempt (a retryable [`Error::Stalled`]: the supervisor restarts the job from
        /// its newest checkpoint) once it made no progress for `d`. Default: none, a stall is only
        /// reported. At least the stall threshold.
        stall_timeout(d: Duration) => stall_timeout = Some(d);
    }

    /// Records per batch between tasks and into sinks (default 1024).
    pub fn batch_size(mut self, n: usize) -> Self {
        if n == 0 {
            self.errors
                .push(Error::config("pipeline.batch_size", "must be at least 1"));
        }
        self.batch_size = n.max(1);
        self
    }

    /// Batches buffered per channel between two subtasks (default 8). With the batch size this
    /// bounds the memory between tasks.
    pub fn channel_capacity(mut self, n: usize) -> Self {
        if n == 0 {
            self.errors.push(Error::config(
                "pipeline.channel_capacity",
                "must be at least 1",
            ));
        }
        self.channel_capacity = n.max(1);
        self
    }

    /// Longest time a record waits in a source's partly filled batch (default 100 ms).
    pub fn buffer_timeout(mut self, d: Duration) -> Self {
        if d.is_zero() {
            self.errors
                .push(Error::config("pipeline.buffer_timeout", "must be positive"));
        }
        self.buffer_timeout = d;
        self
    }

    fn register(&mut self, name: &str, parallelism: usize, stateful: bool) {
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

    /// The contexts of an operator's `parallelism` subtasks, sharing one
    /// [`subtasks_shared`](RuntimeContext::subtasks_shared) map.
    fn runtime_contexts(&self, name: &str, parallelism: usize) -> Vec<RuntimeContext> {
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

    /// Adds a source named `name` with `parallelism` subtasks; `factory(i)` creates subtask
    /// `i`'s instance.
    pub fn source<S, F>(mut self, name: &str, parallelism: usize, factory: F) -> Stream<S::Out>
    where
        S: SourceFunction + 'static,
        F: Fn(usize) -> S,
    {
        self.register(name, parallelism, true);
        let sources: Vec<S> = (0..parallelism).map(factory).collect();
        let guarantee = sources
            .first()
            .map(|s| s.delivery_guarantee())
            .unwrap_or(DeliveryGuarantee::ExactlyOnce);
        let positions_offered = sources
            .first()
            .is_some_and(|s| s.offers_positions_to_sink());
        let contexts = self.runtime_contexts(name, parallelism);
        let name = name.to_owned();
        let counters = Arc::clone(&self.counters);
        let stage: PendingStage<S::Out> = Box::new(move |mut outputs| {
            sources
                .into_iter()
                .zip(contexts)
                .enumerate()
                .map(|(i, (src, rctx))| {
                    let mut out = outputs(i);
                    out.share_task(rctx.task_shared());
                    let counters = Arc::clone(&counters);
                    TaskSpec {
                        name: task_name(&name, &*out),
                        subtask: i,
                        is_source: true,
                        start: Box::new(move |env| {
                            Box::pin(run_source(src, out, rctx, env, counters))
                        }),
                    }
                })
                .collect()
        });
        Stream {
            pipeline: self,
            parallelism,
            stage,
            guarantee,
            positions_offered,
        }
    }
}

/// A stream of `T` under construction: the operators added so far, not yet connected to
/// their output.
pub struct Stream<T: Send + 'static> {
    pipeline: Pipeline,
    parallelism: usize,
    stage: PendingStage<T>,
    guarantee: DeliveryGuarantee,
    /// The source offers its positions to a sink chained into its task (no exchange since).
    positions_offered: bool,
}

impl<T: Send + 'static> std::fmt::Debug for Stream<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("pipeline", &self.pipeline.name)
            .field("parallelism", &self.parallelism)
            .finish()
    }
}

impl<T: Send + 'static> Stream<T> {
    /// Adds a chained operator; `make_op` creates one instance per subtask.
    fn chain<U, F>(self, make_op: impl Fn() -> F + Send + 'static) -> Stream<U>
    where
        U: Send + 'static,
        F: FnMut(T, Option<i64>, &mut dyn Output<U>) -> bool + Send + 'static,
    {
        let prev = self.stage;
        let stage: PendingStage<U> = Box::new(move |mut outputs: OutputFactory<U>| {
            prev(Box::new(move |i| {
                Box::new(Chained::new(make_op(), outputs(i))) as Box<dyn Output<T>>
            }))
        });
        Stream {
            pipeline: self.pipeline,
            parallelism: self.parallelism,
            stage,
            guarantee: self.guarantee,
            positions_offered: self.positions_offered,
        }
    }

    /// Transforms each record (chained: no channel, no copy).
    pub fn map<U, F>(self, f: F) -> Stream<U>
    where
        U: Send + 'static,
        F: Fn(T) -> U + Send + Sync + 'static,
    {
        let f = Arc::new(f);
        self.chain(move || {
            let f = Arc::clone(&f);
            move |v: T, ts, out: &mut dyn Output<U>| out.push(f(v), ts)
        })
    }

    /// Keeps the records for which `f` is true.
    pub fn filter<F>(self, f: F) -> Stream<T>
    where
        F: Fn(&T) -> bool + Send + Sync + 'static,
    {
        let f = Arc::new(f);
        self.chain(move || {
            let f = Arc::clone(&f);
            move |v: T, ts, out: &mut dyn Output<T>| f(&v) && out.push(v, ts)
        })
    }

    /// Turns each record into zero or more records.
    pub fn flat_map<U, I, F>(self, f: F) -> Stream<U>
    where
        U: Send + 'static,
        I: IntoIterator<Item = U>,
        F: Fn(T) -> I + Send + Sync + 'static,
    {
        let f = Arc::new(f);
        self.chain(move || {
            let f = Arc::clone(&f);
            move |v: T, ts, out: &mut dyn Output<U>| {
                let mut full = false;
                for u in f(v) {
                    full |= out.push(u, ts);
                }
                full
            }
        })
    }

    /// Starts a new stage of `parallelism` subtasks fed through bounded channels.
    fn exchange(
        mut self,
        parallelism: usize,
        partitioner: impl Fn() -> Partitioner<T> + Send + 'static,
    ) -> Stream<T> {
        self.pipeline.exchanges += 1;
        let name = format!("exchange-{}", self.pipeline.exchanges);
        self.pipeline.register(&name, parallelism, false);
        let ups = self.parallelism;
        let cap = self.pipeline.channel_capacity;
        let batch_size = self.pipeline.batch_size;
        let mut senders: Vec<Option<Vec<mpsc::Sender<Event<T>>>>> =
            (0..ups).map(|_| Some(Vec::new())).collect();
        let mut receivers: Vec<Vec<mpsc::Receiver<Event<T>>>> =
            (0..parallelism).map(|_| Vec::new()).collect();
        for up in senders.iter_mut() {
            for down in receivers.iter_mut() {
                let (tx, rx) = mpsc::channel(cap);
                up.as_mut().expect("fresh").push(tx);
                down.push(rx);
            }
        }
        let up_contexts = self.pipeline.runtime_contexts(&name, ups);
        let upstream = (self.stage)(Box::new(move |i| {
            let tx = senders[i].take().expect("one output per upstream subtask");
            Box::new(ChannelOutput::new(
                tx,
                partitioner(),
                batch_size,
                up_contexts[i].metrics(),
            ))
        }));
        self.pipeline.tasks.extend(upstream);
        let contexts = self.pipeline.runtime_contexts(&name, parallelism);
        let stage: PendingStage<T> = Box::new(move |mut outputs| {
            receivers
                .into_iter()
                .zip(contexts)
                .enumerate()
                .map(|(i, (rx, rctx))| {
                    let mut out = outputs(i);
                    out.share_task(rctx.task_shared());
                    let gate = InputGate::new(rx);
                    TaskSpec {
                        name: task_name(&name, &*out),
                        subtask: i,
                        is_source: false,
                        start: Box::new(move |env| Box::pin(run_exchange(gate, out, rctx, env))),
                    }
                })
                .collect()
        });
        Stream {
            pipeline: self.pipeline,
            parallelism,
            stage,
            guarantee: self.guarantee,
            // After an exchange a sink subtask gets records of several source subtasks.
            positions_offered: false,
        }
    }

    /// Repartitions by key over `parallelism` subtasks: records with equal keys go to the same
    /// subtask, in order.
    pub fn key_by<K, F>(self, key: F, parallelism: usize) -> Stream<T>
    where
        K: Hash,
        F: Fn(&T) -> K + Send + Sync + 'static,
    {
        let key = Arc::new(move |v: &T| hash_key(&key(v)));
        self.exchange(parallelism, move || Partitioner::Hash(key.clone()))
    }

    /// Redistributes whole batches round-robin over `parallelism` subtasks.
    pub fn rebalance(self, parallelism: usize) -> Stream<T> {
        self.exchange(parallelism, || Partitioner::RoundRobin { next: 0 })
    }

    /// Ends the stream in a sink named `name` with `parallelism` subtasks; `factory(i)` creates
    /// subtask `i`'s instance. With the stream's parallelism the sink is chained into the
    /// same tasks; otherwise records are rebalanced to it.
    pub fn sink<S, F>(self, name: &str, parallelism: usize, factory: F) -> Result<Job>
    where
        S: SinkFunction<T> + 'static,
        F: Fn(usize) -> S,
    {
        let stream = if parallelism == self.parallelism {
            self
        } else {
            self.rebalance(parallelism)
        };
        let mut pipeline = stream.pipeline;
        pipeline.register(name, parallelism, true);
        let sinks: Vec<S> = (0..parallelism).map(factory).collect();
        let sink_guarantee = sinks
            .first()
            .map(|s| s.delivery_guarantee())
            .unwrap_or(DeliveryGuarantee::ExactlyOnce);
        // The sink commits the source's positions with its records: one step, the sink's.
        let positions_in_sink =
            stream.positions_offered && sinks.first().is_some_and(|s| s.commits_source_positions());
        let batch_size = pipeline.batch_size;
        let counters = Arc::clone(&pipeline.counters);
        let mut sinks: Vec<Option<(S, RuntimeContext)>> = sinks
            .into_iter()
            .zip(pipeline.runtime_contexts(name, parallelism))
            .map(|(s, rctx)| Some((s, rctx.with_source_positions_offered(positions_in_sink))))
            .collect();
        let tasks = (stream.stage)(Box::new(move |i| {
            let (sink, rctx) = sinks[i].take().expect("one sink per subtask");
            Box::new(SinkOutput::new(
                sink,
                rctx,
                batch_size,
                Arc::clone(&counters),
            ))
        }));
        pipeline.tasks.extend(tasks);
        if let Some(e) = pipeline.errors.drain(..).next() {
            return Err(e);
        }
        let guarantee = match (&pipeline.checkpoint, &pipeline.worker) {
            (None, _) => DeliveryGuarantee::AtMostOnce,
            (Some(_), _) if positions_in_sink => sink_guarantee,
            // Across workers a record can be read again by the worker that takes its partition
            // or its redelivery over: at-least-once.
            (Some(_), Some(_)) => stream
                .guarantee
                .weakest(sink_guarantee)
                .weakest(DeliveryGuarantee::AtLeastOnce),
            (Some(_), None) => stream.guarantee.weakest(sink_guarantee),
        };
        let restart = pipeline
            .restart
            .clone()
            .unwrap_or_else(|| RestartStrategy::default_for(pipeline.checkpoint.is_some()));
        let mut stall =
            StallSettings::default_for(pipeline.checkpoint.as_ref().map(|c| c.interval));
        if let Some(t) = pipeline.stall_threshold {
            stall.threshold = t;
        }
        stall.timeout = pipeline.stall_timeout;
        super::stall::validate(&stall).map_err(|e| e.under("pipeline"))?;
        let plan = Plan {
            stall,
            activities: Arc::default(),
            stalls: Arc::new(tokio::sync::watch::channel(None).0),
            name: pipeline.name,
            worker: pipeline.worker,
            checkpoint: pipeline.checkpoint,
            buffer_timeout: pipeline.buffer_timeout,
            tasks: pipeline.tasks,
            operators: pipeline.operators,
            counters: pipeline.counters,
            completed: pipeline.completed,
            history: Arc::default(),
        };
        Ok(Job::new(plan, guarantee, restart))
    }
}
