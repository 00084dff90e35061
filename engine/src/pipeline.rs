//! [`Pipeline`]: a pipeline file read and checked, and what can be done with it — validate,
//! build, run, test its transforms, reach its endpoints.

use std::path::Path;
use std::sync::Arc;

use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::{Job, JobSummary, Result, Supervisor};

use crate::config::{PipelineConfig, TransformKind};
use crate::counted::Counts;
use crate::registry::Registry;
use crate::{build, check, testing, Built, Reach, TestReport};

/// A pipeline file refused: the message names the file's bad field by its path
/// (`sinks.review.inputs[0]: router "by_size" has no route "big"`), and the line where the
/// TOML itself is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FileError(String);

/// A pipeline file, read against a [`Registry`] and checked: its components connected into a
/// graph (no cycle, no unknown input, no output nobody reads), their options read by their
/// sections, VRL programs compiled. Nothing is contacted until it is built.
#[derive(Debug)]
pub struct Pipeline {
    config: PipelineConfig,
}

/// The attempts of a job under [`Pipeline::supervise`]: the first one's job, then a new one per
/// restart.
pub type Attempts<'a> =
    Box<dyn FnMut() -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Job>> + 'a>> + 'a>;

/// What [`Pipeline::orphans`] found for one sink: its path in the file, its `type`, and what
/// failures left in its destination (`None`: a sink that leaves nothing of the kind).
pub type Orphans = (String, &'static str, Option<Result<Vec<String>>>);

impl Pipeline {
    /// Reads the file at `path` (`${VAR}` references expanded from the environment).
    pub fn from_file(path: &Path, registry: &Registry) -> std::result::Result<Self, FileError> {
        crate::config::load(path, registry)
            .map(|config| Pipeline { config })
            .map_err(FileError)
    }

    /// Reads a pipeline file's text.
    pub fn from_toml(text: &str, registry: &Registry) -> std::result::Result<Self, FileError> {
        crate::config::parse(text, registry)
            .map(|config| Pipeline { config })
            .map_err(FileError)
    }

    /// The job's name (keys its checkpoints).
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Subtasks per stage.
    pub fn parallelism(&self) -> usize {
        self.config.parallelism
    }

    /// The worker id this process runs the job as, if one.
    pub fn worker(&self) -> Option<&str> {
        self.config.worker.as_deref()
    }

    /// Runs the job as worker `id` of several processes sharing it (each keeps its
    /// checkpoints under `<dir or store>/<id>`).
    pub fn with_worker(mut self, id: Option<String>) -> Self {
        self.config.worker = id;
        self
    }

    /// The graph, one component a line: `sink (jdbc) <- by_size.large`.
    pub fn describe(&self) -> String {
        self.config.graph.describe()
    }

    /// The graph as a dashboard draws it: each component's name, role, `type` and inputs
    /// (no option, no secret), and for a pipeline of one path its `source`, `transforms` and
    /// `sink`.
    pub fn graph_json(&self) -> serde_json::Value {
        graph_json(&self.config)
    }

    /// The names of the sinks.
    pub fn sink_names(&self) -> Vec<String> {
        self.config
            .graph
            .sinks
            .iter()
            .map(|s| s.name.clone())
            .collect()
    }

    /// The metric names of the gauges of records not yet read (the Kafka source's lag).
    pub fn lag_metrics(&self) -> Vec<&'static str> {
        let g = &self.config.graph;
        (g.sources.iter().map(|s| s.section.options.metrics().lag))
            .chain(g.sinks.iter().map(|s| s.section.options.metrics().lag))
            .flatten()
            .collect()
    }

    /// Builds every component without creating or contacting anything: `rivus validate`.
    pub async fn validate(&self) -> Result<()> {
        build::build(&self.config, true).await.map(|_| ())
    }

    /// Runs the sections' preparations (the SQL sink's `setup`), then builds the job, counting
    /// into new [`Counts`].
    pub async fn build(&self) -> Result<Built> {
        build::build(&self.config, false).await
    }

    /// Builds the job again (a restart), counting into `counts`, the totals of the run.
    pub async fn rebuild(&self, counts: Arc<Counts>) -> Result<Built> {
        build::build_counting(&self.config, false, counts).await
    }

    /// Runs the job to its end under a supervisor: restarted from its newest checkpoint after
    /// a failure as `[restart]` says; SIGINT or SIGTERM drains it and takes a final
    /// checkpoint. Bad configuration ends it before it starts.
    pub async fn run(&self) -> Result<JobSummary> {
        let supervisor = self.supervise(self.build().await?).await?;
        supervisor.handle().stop_on_signals_then(|| {});
        supervisor.run().await
    }

    /// A supervisor of the job: `first` (built already) is its first attempt, and each
    /// restart builds the job again counting into `first`'s totals. [`run`](Self::run) is this
    /// with signals handled; a runner of its own adds its status line or dashboard.
    pub async fn supervise(&self, first: Built) -> Result<Supervisor<Attempts<'_>>> {
        let Built { job, counts, .. } = first;
        let mut job = Some(job);
        let attempts: Attempts<'_> = Box::new(move || {
            let (job, counts) = (job.take(), Arc::clone(&counts));
            Box::pin(async move {
                match job {
                    Some(job) => Ok(job),
                    None => self.rebuild(counts).await.map(|b| b.job),
                }
            })
        });
        Supervisor::new(attempts).await
    }

    /// Whether the file has `[[tests]]`.
    pub fn has_tests(&self) -> bool {
        !self.config.tests.is_empty()
    }

    /// Runs the file's `[[tests]]` through its transforms (no source, no sink): each test's
    /// report.
    pub fn test(&self) -> std::result::Result<Vec<TestReport>, FileError> {
        testing::run(&self.config).map_err(FileError)
    }

    /// Reaches every endpoint (and the checkpoint store), writing and reading no record.
    pub async fn check(&self) -> Vec<Reach> {
        check::check(&self.config).await
    }

    /// What failures left in each sink's destination that nothing refers to; deletes nothing.
    pub async fn orphans(&self) -> Vec<Orphans> {
        let ctx = self.config.context(ErrorPolicy::Fail, true);
        let mut out = Vec::new();
        for s in &self.config.graph.sinks {
            let listed = s.section.orphans(&ctx).await;
            out.push((s.section.path.clone(), s.section.kind, listed));
        }
        out
    }

    /// The sections' reports after a successful run (the SQL sink's table).
    pub async fn reports(&self) -> String {
        let ctx = self.config.context(ErrorPolicy::Fail, false);
        let g = &self.config.graph;
        let mut text = String::new();
        for s in &g.sources {
            if let Some(r) = s.section.options.report(&ctx).await {
                text.push_str(&r);
            }
        }
        for s in &g.sinks {
            if let Some(r) = s.section.options.report(&ctx).await {
                text.push_str(&r);
            }
        }
        text
    }
}

fn graph_json(config: &PipelineConfig) -> serde_json::Value {
    use serde_json::json;
    let g = &config.graph;
    let inputs = |i: &[crate::config::graph::Output]| -> Vec<String> {
        i.iter().map(ToString::to_string).collect()
    };
    let mut components: Vec<serde_json::Value> = g
        .sources
        .iter()
        .map(|s| json!({ "name": s.name, "role": "source", "type": s.section.kind, "inputs": [] }))
        .collect();
    for t in &g.transforms {
        let (kind, routes) = match &t.kind {
            TransformKind::Steps(steps) => (
                steps
                    .iter()
                    .map(|s| s.kind())
                    .collect::<Vec<_>>()
                    .join(" → "),
                Vec::new(),
            ),
            TransformKind::Route(routes) => (
                "route".to_owned(),
                routes.iter().map(|(r, _)| r.clone()).collect(),
            ),
        };
        components.push(json!({
            "name": t.name, "role": "transform", "type": kind, "inputs": inputs(&t.inputs),
            "routes": routes,
        }));
    }
    for s in &g.sinks {
        components.push(json!({
            "name": s.name, "role": "sink", "type": s.section.kind, "inputs": inputs(&s.inputs),
        }));
    }
    let mut out = json!({ "components": components, "parallelism": config.parallelism });
    let single = g.sources.len() == 1 && g.sinks.len() == 1 && g.sinks[0].name == "sink";
    if single {
        let transforms: Vec<&str> = g
            .transforms
            .iter()
            .flat_map(|t| match &t.kind {
                TransformKind::Steps(steps) => steps.iter().map(|s| s.kind()).collect(),
                TransformKind::Route(_) => vec!["route"],
            })
            .collect();
        out["source"] = json!({ "type": g.sources[0].section.kind });
        out["transforms"] = json!(transforms);
        out["sink"] = json!({ "type": g.sinks[0].section.kind });
    }
    out
}
