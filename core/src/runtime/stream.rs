//! A [`Stream`] under construction and its operators. `map`, `filter` and `flat_map` chain
//! into the task that feeds them; `key_by`, `rebalance`, `union` and a change of parallelism
//! start a new stage behind bounded channels; `fan_out` and `route` split a stream where it
//! stands (chained, no channel); a sink or `discard` ends it.
//!
//! A stream is a pending stage: a function that, once told the output of each subtask, makes
//! the tasks. A split realises its upstream once, when every branch has said its output.

use std::hash::Hash;
use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::mpsc;

use super::chain::Chained;
use super::event::Event;
use super::input_gate::InputGate;
use super::job::Job;
use super::output::{hash_key, ChannelOutput, Discard, Output, Partitioner};
use super::pipeline::{Pipeline, SinkEnd};
use super::reject::{Rejected, Rejecting};
use super::sink_output::SinkOutput;
use super::split::{Pick, Routes, Split};
use super::task::{run_exchange, run_source, TaskEnv, TaskSpec};
use crate::context::RuntimeContext;
use crate::error::{Error, Result};
use crate::error_policy::ErrorHandler;
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

/// A stage of one task per subtask: subtask `i`'s part (its source function, or its input
/// channels) and context, with the output it is given, become a task that `start` runs.
fn tasks_of<T, P>(
    name: String,
    parts: Vec<(P, RuntimeContext)>,
    is_source: bool,
    start: impl Fn(P, Box<dyn Output<T>>, RuntimeContext, TaskEnv) -> BoxFuture<'static, Result<()>>
        + Send
        + Clone
        + 'static,
) -> PendingStage<T>
where
    T: Send + 'static,
    P: Send + 'static,
{
    Box::new(move |mut outputs| {
        parts
            .into_iter()
            .enumerate()
            .map(|(i, (part, rctx))| {
                let mut out = outputs(i);
                out.share_task(rctx.task_shared());
                let start = start.clone();
                TaskSpec {
                    name: task_name(&name, &*out),
                    subtask: i,
                    is_source,
                    start: Box::new(move |env| start(part, out, rctx, env)),
                }
            })
            .collect()
    })
}

impl Pipeline {
    /// Adds a source named `name` with `parallelism` subtasks; `factory(i)` creates subtask
    /// `i`'s instance. A job may have several sources; each stream ends in a sink (directly,
    /// or through a union, a fan-out or a route).
    pub fn source<S, F>(&self, name: &str, parallelism: usize, factory: F) -> Stream<S::Out>
    where
        S: SourceFunction + 'static,
        F: Fn(usize) -> S,
    {
        Stream::from_source(self.clone(), name, parallelism, factory)
    }
}

/// A stream of `T` under construction: the operators added so far, not yet connected to
/// their output. Every stream ends in a sink (or [`discard`](Stream::discard)), directly or
/// through a union, a fan-out or a route.
pub struct Stream<T: Send + 'static> {
    pipeline: Pipeline,
    /// This stream's entry among the job's open streams.
    id: u64,
    parallelism: usize,
    stage: PendingStage<T>,
    /// The weakest guarantee of the sources feeding it.
    guarantee: DeliveryGuarantee,
    /// The source offers its positions to a sink chained into its task (one source, no
    /// exchange or split since).
    positions_offered: bool,
}

impl<T: Send + 'static> std::fmt::Debug for Stream<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("pipeline", &self.pipeline.graph().name)
            .field("parallelism", &self.parallelism)
            .finish()
    }
}

impl<T: Send + 'static> Stream<T> {
    pub(super) fn from_source<S, F>(
        pipeline: Pipeline,
        name: &str,
        parallelism: usize,
        factory: F,
    ) -> Stream<T>
    where
        S: SourceFunction<Out = T> + 'static,
        F: Fn(usize) -> S,
    {
        let sources: Vec<S> = (0..parallelism).map(factory).collect();
        let guarantee = sources
            .first()
            .map(|s| s.delivery_guarantee())
            .unwrap_or(DeliveryGuarantee::ExactlyOnce);
        let positions_offered = sources
            .first()
            .is_some_and(|s| s.offers_positions_to_sink());
        let (id, contexts, counters) = {
            let mut g = pipeline.graph();
            g.register(name, parallelism, true);
            let id = g.open_stream(format!("the stream of source `{name}`"));
            (
                id,
                g.runtime_contexts(name, parallelism),
                Arc::clone(&g.counters),
            )
        };
        let parts = sources.into_iter().zip(contexts).collect();
        let stage = tasks_of(name.to_owned(), parts, true, move |src, out, rctx, env| {
            Box::pin(run_source(src, out, rctx, env, Arc::clone(&counters)))
        });
        Stream {
            pipeline,
            id,
            parallelism,
            stage,
            guarantee,
            positions_offered,
        }
    }

    /// Adds a chained operator; `make_op` creates one instance per subtask.
    fn chain<U, F>(self, make_op: impl Fn() -> F + Send + 'static) -> Stream<U>
    where
        U: Send + 'static,
        F: FnMut(T, Option<i64>, &mut dyn Output<U>) -> bool + Send + 'static,
    {
        self.wrap(move |inner| Box::new(Chained::new(make_op(), inner)))
    }

    /// Puts an output of this stream's task around each subtask's next output (`wrap` runs
    /// once per subtask): how chained operators join the task.
    fn wrap<U>(
        self,
        wrap: impl Fn(Box<dyn Output<U>>) -> Box<dyn Output<T>> + Send + 'static,
    ) -> Stream<U>
    where
        U: Send + 'static,
    {
        let prev = self.stage;
        let stage: PendingStage<U> = Box::new(move |mut outputs: OutputFactory<U>| {
            prev(Box::new(move |i| wrap(outputs(i))))
        });
        Stream {
            pipeline: self.pipeline,
            id: self.id,
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

    /// Starts a new stage of `parallelism` subtasks fed through bounded channels by every
    /// subtask of every input; its tasks align barriers over all those channels.
    fn exchange(
        inputs: Vec<Stream<T>>,
        parallelism: usize,
        partitioner: impl Fn() -> Partitioner<T> + Send + Clone + 'static,
    ) -> Stream<T> {
        let pipeline = inputs[0].pipeline.clone();
        let (name, cap, batch_size, what) = {
            let mut g = pipeline.graph();
            let name = g.exchange_name();
            g.register(&name, parallelism, false);
            let what = g.describe(inputs[0].id);
            (name, g.channel_capacity, g.batch_size, what)
        };
        let mut receivers: Vec<Vec<mpsc::Receiver<Event<T>>>> =
            (0..parallelism).map(|_| Vec::new()).collect();
        let mut guarantee = DeliveryGuarantee::ExactlyOnce;
        let mut tasks = Vec::new();
        for input in inputs {
            if !input.pipeline.same(&pipeline) {
                pipeline.graph().errors.push(Error::config(
                    "pipeline",
                    "a union of streams of two pipelines: build each job from one",
                ));
                continue;
            }
            guarantee = guarantee.weakest(input.guarantee);
            let mut senders: Vec<Option<Vec<mpsc::Sender<Event<T>>>>> =
                (0..input.parallelism).map(|_| Some(Vec::new())).collect();
            for up in senders.iter_mut() {
                for down in receivers.iter_mut() {
                    let (tx, rx) = mpsc::channel(cap);
                    up.as_mut().expect("fresh").push(tx);
                    down.push(rx);
                }
            }
            let up_contexts = {
                let mut g = pipeline.graph();
                g.close_stream(input.id);
                g.runtime_contexts(&name, input.parallelism)
            };
            let partitioner = partitioner.clone();
            tasks.extend((input.stage)(Box::new(move |i| {
                let tx = senders[i].take().expect("one output per upstream subtask");
                Box::new(ChannelOutput::new(
                    tx,
                    partitioner(),
                    batch_size,
                    up_contexts[i].metrics(),
                ))
            })));
        }
        let (id, contexts) = {
            let mut g = pipeline.graph();
            g.tasks.extend(tasks);
            (g.open_stream(what), g.runtime_contexts(&name, parallelism))
        };
        let parts = receivers.into_iter().zip(contexts).collect();
        let stage = tasks_of(name, parts, false, |rx, out, rctx, env| {
            Box::pin(run_exchange(InputGate::new(rx), out, rctx, env))
        });
        Stream {
            pipeline,
            id,
            parallelism,
            stage,
            guarantee,
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
        Stream::exchange(vec![self], parallelism, move || {
            Partitioner::Hash(key.clone())
        })
    }

    /// Redistributes whole batches round-robin over `parallelism` subtasks.
    pub fn rebalance(self, parallelism: usize) -> Stream<T> {
        Stream::exchange(vec![self], parallelism, || Partitioner::RoundRobin {
            next: 0,
        })
    }

    /// One stream of the records of this stream and of `others` (streams of the same job, of
    /// any parallelism), over this stream's parallelism: a new stage whose tasks read every
    /// input and align checkpoint barriers across them. Batches go round-robin; use
    /// [`key_by`](Stream::key_by) after it to keep a key's records in order.
    pub fn union(self, others: impl IntoIterator<Item = Stream<T>>) -> Stream<T> {
        let parallelism = self.parallelism;
        let inputs: Vec<Stream<T>> = std::iter::once(self).chain(others).collect();
        Stream::exchange(inputs, parallelism, || Partitioner::RoundRobin { next: 0 })
    }

    /// Ends the stream in a sink named `name` with `parallelism` subtasks; `factory(i)` creates
    /// subtask `i`'s instance. With the stream's parallelism the sink is chained into the
    /// same tasks; otherwise records are rebalanced to it. The job is built by
    /// [`Pipeline::build`] once every stream has ended.
    pub fn sink_to<S, F>(self, name: &str, parallelism: usize, factory: F)
    where
        S: SinkFunction<T> + 'static,
        F: Fn(usize) -> S,
    {
        let stream = if parallelism == self.parallelism {
            self
        } else {
            self.rebalance(parallelism)
        };
        let sinks: Vec<S> = (0..parallelism).map(factory).collect();
        let sink_guarantee = sinks
            .first()
            .map(|s| s.delivery_guarantee())
            .unwrap_or(DeliveryGuarantee::ExactlyOnce);
        // The sink commits the source's positions with its records: one step, the sink's.
        let positions_in_sink =
            stream.positions_offered && sinks.first().is_some_and(|s| s.commits_source_positions());
        let pipeline = stream.pipeline.clone();
        let (contexts, batch_size, counters) = {
            let mut g = pipeline.graph();
            g.register(name, parallelism, true);
            g.close_stream(stream.id);
            g.sinks.push(SinkEnd {
                name: name.to_owned(),
                path: stream.guarantee,
                sink: sink_guarantee,
                positions_in_sink,
            });
            (
                g.runtime_contexts(name, parallelism),
                g.batch_size,
                Arc::clone(&g.counters),
            )
        };
        let mut sinks: Vec<Option<(S, RuntimeContext)>> = sinks
            .into_iter()
            .zip(contexts)
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
        pipeline.graph().tasks.extend(tasks);
    }

    /// Ends the stream in a sink (see [`sink_to`](Stream::sink_to)) and builds the job: the
    /// whole of a job with one sink, the last step of any other.
    pub fn sink<S, F>(self, name: &str, parallelism: usize, factory: F) -> Result<Job>
    where
        S: SinkFunction<T> + 'static,
        F: Fn(usize) -> S,
    {
        let pipeline = self.pipeline.clone();
        self.sink_to(name, parallelism, factory);
        pipeline.build()
    }

    /// Ends the stream by dropping its records (a route nobody reads, say).
    pub fn discard(self) {
        self.pipeline.graph().close_stream(self.id);
        let tasks = (self.stage)(Box::new(|_| Box::new(Discard) as Box<dyn Output<T>>));
        self.pipeline.graph().tasks.extend(tasks);
    }
}

impl<T: Clone + Send + 'static> Stream<T> {
    /// Hands every record to each of `N` branches (chained: no channel; a record is cloned
    /// for all branches but the last — for large records, stream `Arc`s). A slow branch slows
    /// the others: nothing buffers without bound.
    pub fn fan_out<const N: usize>(self) -> [Stream<T>; N] {
        match self.branches(N).try_into() {
            Ok(branches) => branches,
            Err(_) => unreachable!("branches(N) makes N streams"),
        }
    }

    /// [`fan_out`](Stream::fan_out) into `n` branches, `n` known at run time.
    pub fn branches(self, n: usize) -> Vec<Stream<T>> {
        let names = (1..=n).map(|k| format!("branch {k}")).collect();
        self.split(names, None)
    }

    /// Sends each record to the routes `pick` chooses among `names` (indexes into it; none:
    /// the record is dropped; several: one clone each): one stream per route, in the order
    /// of `names`. At most [`Routes::MAX`] routes.
    pub fn route<F>(self, names: &[&str], pick: F) -> Vec<Stream<T>>
    where
        F: Fn(&T) -> Routes + Send + Sync + 'static,
    {
        let names = names.iter().map(|n| format!("route `{n}`")).collect();
        self.split(names, Some(Arc::new(pick)))
    }

    fn split(self, names: Vec<String>, pick: Option<Pick<T>>) -> Vec<Stream<T>> {
        let n = names.len();
        if n == 0 || n > Routes::MAX {
            self.pipeline.graph().errors.push(Error::config(
                "pipeline",
                format!(
                    "a split into {n} branches: 1 to {} are possible",
                    Routes::MAX
                ),
            ));
            return Vec::new();
        }
        let joint = Arc::new(Mutex::new(Joint {
            upstream: Some(self.stage),
            outputs: (0..n).map(|_| None).collect(),
            pick,
        }));
        let ids: Vec<u64> = {
            let mut g = self.pipeline.graph();
            let what = g.describe(self.id);
            g.close_stream(self.id);
            names
                .into_iter()
                .map(|b| g.open_stream(format!("{b} of {what}")))
                .collect()
        };
        ids.into_iter()
            .enumerate()
            .map(|(k, id)| {
                let joint = Arc::clone(&joint);
                let stage: PendingStage<T> =
                    Box::new(move |outputs| Joint::branch_ended(&joint, k, outputs));
                Stream {
                    pipeline: self.pipeline.clone(),
                    id,
                    parallelism: self.parallelism,
                    stage,
                    guarantee: self.guarantee,
                    // Two sinks cannot both commit the source's positions.
                    positions_offered: false,
                }
            })
            .collect()
    }
}

/// Where the branches of a split meet: the upstream stage, realised once every branch has
/// said its output.
struct Joint<T: Send + 'static> {
    upstream: Option<PendingStage<T>>,
    outputs: Vec<Option<OutputFactory<T>>>,
    pick: Option<Pick<T>>,
}

impl<T: Clone + Send + 'static> Joint<T> {
    /// Branch `k` ended with `outputs`: the upstream's tasks once it was the last.
    fn branch_ended(joint: &Mutex<Joint<T>>, k: usize, outputs: OutputFactory<T>) -> Vec<TaskSpec> {
        let mut j = joint.lock();
        j.outputs[k] = Some(outputs);
        if j.outputs.iter().any(Option::is_none) {
            return Vec::new();
        }
        let mut factories: Vec<OutputFactory<T>> = j.outputs.drain(..).flatten().collect();
        let pick = j.pick.take();
        let upstream = j.upstream.take().expect("a split is realised once");
        drop(j);
        upstream(Box::new(move |i| {
            let outputs = factories.iter_mut().map(|f| f(i)).collect();
            Box::new(Split::new(outputs, pick.clone()))
        }))
    }
}

impl<U: Send + 'static> Stream<std::result::Result<U, Rejected>> {
    /// Hands each `Err` record to `handler`'s error policy (skip with a count, a dead letter,
    /// or failing the job) inside this task, and passes the `Ok` ones on: the side output of an
    /// operator that can reject records. A rejected record is dealt with at the task's next
    /// flush, before a checkpoint barrier passes it; each subtask uses a clone of `handler`.
    pub fn reject_to(self, handler: ErrorHandler) -> Stream<U> {
        self.wrap(move |inner| Box::new(Rejecting::new(handler.clone(), inner)))
    }
}
