//! Turns a [`PipelineConfig`] into a runnable job: checkpoint backend, error policy (with
//! the dead-letter destination's section), source ([`crate::sources`]), transforms, sink
//! ([`crate::sinks`]).

use std::sync::Arc;

use serde_json::Value;

use rivus_core::checkpoint::{CheckpointConfig, FsStateBackend, StateBackend};
use rivus_core::error_policy::{DeadLetter, DeadLetterQueue, ErrorPolicy, FileDeadLetterQueue};
use rivus_core::prelude::*;

use crate::config::{CheckpointSection, PipelineConfig, PolicyName, TransformConfig};
use crate::counted::Counts;
use crate::transform::Transforms;

/// A job ready to run, with what the status line and the report need.
pub(crate) struct Built {
    pub job: Job,
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

async fn policy(config: &PipelineConfig, counts: &Arc<Counts>, dry: bool) -> Result<ErrorPolicy> {
    let inner: Option<Arc<dyn DeadLetterQueue>> = match config.errors.policy {
        PolicyName::Fail => return Ok(ErrorPolicy::Fail),
        PolicyName::Skip => None,
        PolicyName::DeadLetter if dry => None,
        PolicyName::DeadLetter => match &config.errors.destination {
            Some(d) => Some(d.build(&config.context(ErrorPolicy::Fail, dry))?),
            None => {
                let path = config.errors.dead_letter.as_deref().unwrap_or_default();
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
        (Some(dir), None) if !dry => Arc::new(FsStateBackend::new(dir, retain)?),
        (Some(_), None) => Arc::new(MemoryStateBackend::new()),
        (None, Some(url)) => {
            let s3 = crate::store::s3(url, retain, cp.lease)?;
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
    let policy = policy(config, &counts, dry).await?;
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
    let (stream, total) = crate::sources::attach(pipeline, config, &policy, dry).await?;
    let read = Arc::clone(&counts);
    let stream = stream.map(move |v| {
        read.read.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        v
    });
    let transforms = Transforms::new(&config.transforms);
    let check_errors = transforms.can_fail();
    let mut stream = if transforms.is_empty() {
        stream
    } else {
        stream.flat_map(move |v| transforms.apply(v))
    };
    for t in &config.transforms {
        if let TransformConfig::Key { field } = t {
            let field = field.clone();
            stream = stream.key_by(
                move |v: &Value| v.get(&field).map(Value::to_string).unwrap_or_default(),
                config.parallelism,
            );
        }
    }
    let job = crate::sinks::attach(stream, config, &counts, &policy, check_errors, dry).await?;
    Ok(Built { job, counts, total })
}
