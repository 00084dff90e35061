//! One run of a source under test into the suites' transactional sink — the job both source
//! suites build — with the pacing, chaining and injected faults their cases ask for.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rivus_sdk::checkpoint::{CheckpointConfig, MemoryStateBackend};
use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::prelude::*;

use super::external::SourceExternal;
use super::observed::{Faults, LifecycleLog, ObservedSink, ObservedSource};
use crate::{TransactionalSink, TxnStore};

/// The records a source emits, kept by the suite's transactional sink.
pub(crate) type Store<C> = TxnStore<<<C as SourceExternal>::Source as SourceFunction>::Out>;

/// How one run is set up.
#[derive(Clone)]
pub(crate) struct SourceRun {
    pub parallelism: usize,
    pub policy: ErrorPolicy,
    /// Stop gracefully once this many distinct records are committed; `None`: the job must
    /// end by itself (a bounded source) before the timeout.
    pub until: Option<usize>,
    pub interval: Duration,
    pub batch_size: usize,
    pub channel_capacity: usize,
    /// A slow sink: it waits this long after each batch, so the source is back-pressured and
    /// records behind a barrier are in flight when its checkpoint completes.
    pub pace: Option<Duration>,
    /// The sink runs in a task of its own, fed through a channel (not chained to the source).
    pub unchained: bool,
    pub source_faults: Faults,
    pub sink_faults: Faults,
    /// The sink fails once it was handed this many records (before any checkpoint commits
    /// them, when they come in one burst).
    pub fail_sink_after: Option<usize>,
    /// Sets the flag once this many records are committed (arms a [`Faults`] trigger).
    pub arm_when_committed: Option<(usize, Arc<AtomicBool>)>,
    pub timeout: Duration,
}

impl SourceRun {
    /// A run of `parallelism` subtasks that stops once `until` records are committed.
    pub(super) fn new(parallelism: usize, until: Option<usize>, timeout: Duration) -> Self {
        SourceRun {
            parallelism,
            policy: ErrorPolicy::Fail,
            until,
            interval: Duration::from_millis(50),
            batch_size: 64,
            channel_capacity: 8,
            pace: None,
            unchained: false,
            source_faults: Faults::default(),
            sink_faults: Faults::default(),
            fail_sink_after: None,
            arm_when_committed: None,
            timeout,
        }
    }

    /// Small batches, short channels and a slow sink: checkpoints complete while records
    /// behind their barriers are still on their way.
    pub(super) fn paced(mut self, records: usize) -> Self {
        self.batch_size = 16;
        self.channel_capacity = 2;
        // About half a second for the whole run, whatever the number of records.
        let batches = (records / 16).max(1) as u64;
        self.pace = Some(Duration::from_millis((500 / batches).clamp(2, 50)));
        self
    }
}

/// What one run left behind.
pub(crate) struct RunOutcome {
    /// Every test record committed into the case's store so far (all runs of the case).
    pub committed: Vec<String>,
    pub result: Result<JobSummary>,
    pub lifecycle: LifecycleLog,
}

fn distinct(v: &[String]) -> usize {
    v.iter().collect::<HashSet<_>>().len()
}

/// Runs the source of `ctx` into a transactional sink committing into `store`, restoring from
/// and checkpointing into `backend`.
pub(crate) async fn run_source<C: SourceExternal>(
    ctx: &C,
    backend: &MemoryStateBackend,
    store: &Store<C>,
    spec: SourceRun,
) -> RunOutcome {
    let lifecycle = LifecycleLog::default();
    let committed = || store.committed_map(|r| ctx.to_test_record(r));
    let received = Arc::new(AtomicUsize::new(0));
    let p = spec.parallelism;
    let stream = Pipeline::new("source-suite")
        .batch_size(spec.batch_size)
        .channel_capacity(spec.channel_capacity)
        .checkpointing(CheckpointConfig::new(
            spec.interval,
            Arc::new(backend.clone()),
        ))
        .source("source", p, |i| {
            ObservedSource::new(
                ctx.create_source(i, p, spec.policy.clone()),
                i,
                lifecycle.clone(),
            )
            .with_faults(spec.source_faults.clone())
        });
    let stream = if spec.unchained {
        stream.rebalance(1)
    } else {
        stream
    };
    let job = stream.sink("collect", 1, |i| {
        let mut sink = TransactionalSink::new(store.clone(), i);
        if let Some(d) = spec.pace {
            sink = sink.pace(d);
        }
        if let Some(n) = spec.fail_sink_after {
            sink = sink.fail_after(n, Arc::clone(&received));
        }
        // The sink's own lifecycle is the suite's business, not the connector's.
        ObservedSink::new(sink, i, LifecycleLog::default()).with_faults(spec.sink_faults.clone())
    });
    let job = match job {
        Ok(j) => j,
        Err(e) => {
            return RunOutcome {
                committed: committed(),
                result: Err(e),
                lifecycle,
            }
        }
    };
    let handle = job.handle();
    let mut running = tokio::spawn(job.run());
    let deadline = Instant::now() + spec.timeout;
    let joined = |r: std::result::Result<Result<JobSummary>, tokio::task::JoinError>| {
        r.unwrap_or_else(|e| Err(Error::connector("job panicked", e.to_string())))
    };
    let result = loop {
        tokio::select! {
            r = &mut running => break joined(r),
            _ = tokio::time::sleep(Duration::from_millis(20)) => {
                let n = store.committed_len();
                if let Some((at, flag)) = &spec.arm_when_committed {
                    if n >= *at {
                        flag.store(true, Ordering::SeqCst);
                    }
                }
                let reached = spec.until.is_some_and(|u| n >= u && distinct(&committed()) >= u);
                if reached || Instant::now() > deadline {
                    handle.stop();
                    let r = joined(running.await);
                    if !reached && spec.until.is_none() {
                        break Err(Error::connector(
                            "bounded source suite",
                            "the job did not end by itself: a bounded source must finish",
                        ));
                    }
                    break r;
                }
            }
        }
    };
    RunOutcome {
        committed: committed(),
        result,
        lifecycle,
    }
}
