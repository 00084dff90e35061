//! Turns a [`PipelineConfig`] into a runnable job: checkpoint backend, error policies (with
//! the dead-letter destinations' sections), then the graph — sources ([`crate::sources`]),
//! transforms and routers in an order where each follows what it reads, sinks
//! ([`crate::sinks`]). An output read by several components fans out; a component reading
//! several outputs reads their union.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde_json::Value;

use rivus_sdk::checkpoint::{CheckpointConfig, FsStateBackend, StateBackend};
use rivus_sdk::error_policy::{
    DeadLetter, DeadLetterQueue, ErrorHandler, ErrorPolicy, FileDeadLetterQueue,
};
use rivus_sdk::prelude::*;

use crate::config::graph::{Output, UNMATCHED};
use crate::config::{
    CheckpointSection, ErrorsSection, PipelineConfig, PolicyName, TransformConfig, TransformKind,
};
use crate::counted::Counts;
use crate::route::Router;
use crate::transform::Transforms;

/// A job ready to run, with what the status line and the report need.
#[derive(Debug)]
pub struct Built {
    /// The job.
    pub job: Job,
    /// Its live counts (the same across the attempts of a run).
    pub counts: Arc<Counts>,
    /// Records the source will emit, when known (a bounded generator).
    pub total: Option<u64>,
}

/// Counts the records that reach the error policy (skip or dead letter), then passes them on.
#[derive(Debug)]
struct CountingQueue {
    inner: Option<Arc<dyn DeadLetterQueue>>,
    counts: Arc<Counts>,
}

#[async_trait]
impl DeadLetterQueue for CountingQueue {
    async fn send(&self, letter: DeadLetter) -> Result<()> {
        let kind = if letter.position.starts_with("transform") {
            "transform"
        } else if letter.origin.starts_with("source") {
            "source"
        } else {
            "sink"
        };
        self.counts.error(kind);
        match &self.inner {
            Some(q) => q.send(letter).await,
            None => {
                tracing::warn!(origin = %letter.origin, position = %letter.position,
                    reason = %letter.reason, "record skipped");
                Ok(())
            }
        }
    }
}

/// The error policy `errors` says.
async fn policy(
    errors: &ErrorsSection,
    config: &PipelineConfig,
    counts: &Arc<Counts>,
    dry: bool,
) -> Result<ErrorPolicy> {
    let inner: Option<Arc<dyn DeadLetterQueue>> = match errors.policy {
        PolicyName::Fail => return Ok(ErrorPolicy::Fail),
        PolicyName::Skip => None,
        PolicyName::DeadLetter if dry => None,
        PolicyName::DeadLetter => match &errors.destination {
            Some(d) => Some(d.build(&config.context(ErrorPolicy::Fail, dry))?),
            None => {
                let path = errors.dead_letter.as_deref().unwrap_or_default();
                Some(Arc::new(FileDeadLetterQueue::open(path).await?))
            }
        },
    };
    Ok(ErrorPolicy::DeadLetter(Arc::new(CountingQueue {
        inner,
        counts: Arc::clone(counts),
    })))
}

/// Builds the job. With `dry`, nothing is created or contacted (validation): no dead-letter
/// file, no state directory, no setup script.
pub(crate) async fn build(config: &PipelineConfig, dry: bool) -> Result<Built> {
    build_counting(config, dry, Arc::new(Counts::default())).await
}

/// The `[checkpoint]` store: a local directory or an object store. A dry run checks the
/// settings and keeps its checkpoints in memory.
fn checkpoint_backend(
    cp: &CheckpointSection,
    worker: Option<&str>,
    dry: bool,
) -> Result<Arc<dyn StateBackend>> {
    let retain = cp.retain.unwrap_or(3);
    // Each worker keeps its own checkpoints, under its id.
    let per_worker = |place: &String| match worker {
        Some(w) => format!("{}/{w}", place.trim_end_matches('/')),
        None => place.clone(),
    };
    let (dir, store) = (
        cp.dir.as_ref().map(per_worker),
        cp.store.as_ref().map(per_worker),
    );
    let backend: Arc<dyn StateBackend> = match (&dir, &store) {
        (Some(_), Some(_)) => {
            return Err(Error::config(
                "checkpoint.store",
                "give either `dir` or `store`, not both",
            ))
        }
        (None, None) => {
            return Err(Error::config(
                "checkpoint.dir",
                "missing: give `dir` (a local directory) or `store` (s3://bucket/prefix)",
            ))
        }
        (Some(_), None) if cp.lease.is_some() => {
            return Err(Error::config(
                "checkpoint.lease",
                "only an object store (`store`) has a lease",
            ))
        }
        (Some(dir), None) if !dry => {
            Arc::new(FsStateBackend::new(dir, retain)?.on_damaged(cp.on_damaged.into()))
        }
        (Some(_), None) => Arc::new(MemoryStateBackend::new()),
        (None, Some(url)) => {
            let s3 = crate::store::s3(url, retain, cp.lease, cp.on_damaged.into())?;
            if dry {
                Arc::new(MemoryStateBackend::new())
            } else {
                s3
            }
        }
    };
    Ok(backend)
}

/// Builds the job counting into `counts` (shared by the attempts of a restarted job).
pub(crate) async fn build_counting(
    config: &PipelineConfig,
    dry: bool,
    counts: Arc<Counts>,
) -> Result<Built> {
    let policy = policy(&config.errors, config, &counts, dry).await?;
    let mut pipeline = Pipeline::new(config.name.clone());
    if let Some(w) = &config.worker {
        pipeline = pipeline.worker(w.clone());
    }
    if let Some(cp) = &config.checkpoint {
        let backend = checkpoint_backend(cp, config.worker.as_deref(), dry)?;
        pipeline = pipeline.checkpointing(CheckpointConfig::new(cp.interval, backend));
    }
    if let Some(restart) = &config.restart {
        pipeline = pipeline.restart_strategy(restart.strategy());
    }
    if let Some(t) = config.stall_threshold {
        pipeline = pipeline.stall_threshold(t);
    }
    if let Some(t) = config.stall_timeout {
        pipeline = pipeline.stall_timeout(t);
    }
    let graph = &config.graph;
    let mut outputs = Outputs {
        readers: graph.readers(),
        streams: HashMap::new(),
        counts: Arc::clone(&counts),
    };
    let mut total = Some(0u64);
    for s in &graph.sources {
        let (stream, n) = crate::sources::attach(&pipeline, config, s, &policy, dry).await?;
        total = total.zip(n).map(|(a, b)| a + b);
        let read = Arc::clone(&counts);
        let stream = stream.map(move |v| {
            read.read.fetch_add(1, Ordering::Relaxed);
            v
        });
        outputs.place(output(&s.name, None), stream);
    }
    let order = graph
        .transform_order()
        .map_err(|e| Error::config("transforms", e))?;
    for t in order {
        let input = outputs.read(&t.inputs);
        match &t.kind {
            TransformKind::Steps(steps) => {
                let transforms = Transforms::new(steps, &t.path);
                let mut stream = if transforms.is_empty() {
                    input
                } else {
                    // Rejected records go to the job's error policy from this task.
                    let handler =
                        ErrorHandler::new(policy.clone(), t.path.clone()).connector("transform");
                    input
                        .flat_map(move |v| transforms.apply(v))
                        .reject_to(handler)
                };
                for step in steps {
                    if let TransformConfig::Key { field } = step {
                        let field = field.clone();
                        stream = stream.key_by(
                            move |v: &Value| {
                                rivus_sdk::metadata::field(v, &field)
                                    .map(Value::to_string)
                                    .unwrap_or_default()
                            },
                            config.parallelism,
                        );
                    }
                }
                outputs.place(output(&t.name, None), stream);
            }
            TransformKind::Route(routes) => {
                let unmatched = output(&t.name, Some(UNMATCHED));
                let unmatched_read = outputs.readers.contains_key(&unmatched);
                let mut names: Vec<&str> = routes.iter().map(|(r, _)| r.as_str()).collect();
                names.push(UNMATCHED);
                let pick = Router::new(&t.path, routes);
                let streams = input.route(&names, move |v| pick.routes(v));
                for (name, stream) in names.iter().zip(streams) {
                    if *name == UNMATCHED && !unmatched_read {
                        stream.discard();
                    } else {
                        outputs.place(output(&t.name, Some(name)), stream);
                    }
                }
            }
        }
    }
    for s in &graph.sinks {
        let input = outputs.read(&s.inputs);
        let policy = match &s.errors {
            Some(errors) => self::policy(errors, config, &counts, dry).await?,
            None => policy.clone(),
        };
        crate::sinks::attach(input, config, s, &counts, &policy, dry).await?;
    }
    let job = pipeline.build()?;
    Ok(Built { job, counts, total })
}

fn output(component: &str, route: Option<&str>) -> Output {
    Output {
        component: component.to_owned(),
        route: route.map(str::to_owned),
    }
}

/// The streams of the outputs built so far, one per reader still to come.
struct Outputs {
    readers: BTreeMap<Output, Vec<String>>,
    streams: HashMap<Output, Vec<Stream<Value>>>,
    /// Where each output's records are counted.
    counts: Arc<Counts>,
}

impl Outputs {
    /// Keeps `stream` as `output`, counted, fanned out to as many branches as it has readers.
    fn place(&mut self, output: Output, stream: Stream<Value>) {
        let flow = self.counts.output(&output.to_string());
        let stream = stream.map(move |v| {
            flow.records.fetch_add(1, Ordering::Relaxed);
            v
        });
        let n = self.readers.get(&output).map_or(0, Vec::len);
        let branches = match n {
            0 | 1 => vec![stream],
            n => stream.branches(n),
        };
        self.streams.insert(output, branches);
    }

    /// A reader's stream of `inputs`: the one output's branch, or the union of several.
    fn read(&mut self, inputs: &[Output]) -> Stream<Value> {
        let mut streams = inputs.iter().map(|i| {
            self.streams
                .get_mut(i)
                .and_then(Vec::pop)
                .expect("the graph is checked: every input is built before its readers")
        });
        let first = streams
            .next()
            .expect("the graph is checked: inputs are not empty");
        let rest: Vec<Stream<Value>> = streams.collect();
        if rest.is_empty() {
            first
        } else {
            first.union(rest)
        }
    }
}
