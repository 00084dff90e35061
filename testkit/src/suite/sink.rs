//! [`SinkSuite`]: the cases every sink must pass, against any [`SinkExternal`].

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

use rivus_core::checkpoint::{CheckpointConfig, MemoryStateBackend};
use rivus_core::error_policy::ErrorPolicy;
use rivus_core::prelude::*;

use super::observed::{LifecycleLog, ObservedSink};
use super::records::{test_record, verify};
use super::{failure, SuiteFailure};
use crate::VecSource;

/// How a suite drives one sink connector and reads back what reached the external system.
#[async_trait]
pub trait SinkExternal: Send + Sync {
    /// The record type the sink consumes.
    type Record: Send + 'static;
    /// The connector under test.
    type Sink: SinkFunction<Self::Record> + 'static;

    /// Creates a fresh, empty destination (a topic, an index, a table).
    async fn prepare(&mut self) -> Result<()>;

    /// Creates subtask `subtask` of `parallelism` writing to the prepared destination, sending
    /// records it cannot write to `policy`.
    fn create_sink(&self, subtask: usize, parallelism: usize, policy: ErrorPolicy) -> Self::Sink;

    /// The sink's record carrying the test string `test`.
    fn to_record(test: &str) -> Self::Record;

    /// A record the external system will reject, if the connector has such a notion.
    fn bad_record() -> Option<Self::Record> {
        None
    }

    /// Every test string visible in the destination (for exactly-once sinks: committed only).
    async fn read_back(&self) -> Result<Vec<String>>;

    /// True when `read_back` returns each split's records in the order they were written.
    fn preserves_order(&self) -> bool {
        true
    }
}

/// Runs the sink cases against one [`SinkExternal`].
pub struct SinkSuite<C> {
    ctx: C,
    per_split: usize,
}

fn split_of(r: &str) -> usize {
    r.strip_prefix('s')
        .and_then(|s| s.split('-').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

impl<C: SinkExternal> SinkSuite<C> {
    /// A suite writing `per_split` records into each of 4 splits (default 300).
    pub fn new(ctx: C) -> Self {
        SinkSuite {
            ctx,
            per_split: 300,
        }
    }

    /// Records per split.
    pub fn records_per_split(mut self, n: usize) -> Self {
        self.per_split = n.max(1);
        self
    }

    /// The external context.
    pub fn context(&self) -> &C {
        &self.ctx
    }

    /// Runs every case; the first failure is returned with its explanation.
    pub async fn run_all(&mut self) -> Result<(), SuiteFailure> {
        self.write_all(1).await?;
        self.write_all(3).await?;
        self.kill_and_restart().await?;
        self.rescale().await?;
        self.bad_records().await?;
        Ok(())
    }

    fn input(&self) -> Arc<Vec<Vec<String>>> {
        Arc::new(
            (0..4)
                .map(|s| (0..self.per_split).map(|i| test_record(s, i)).collect())
                .collect(),
        )
    }

    fn guarantee(&self) -> DeliveryGuarantee {
        self.ctx
            .create_sink(0, 1, ErrorPolicy::Fail)
            .delivery_guarantee()
    }

    /// Runs VecSource(4 splits) → key_by(split) → sink; a failure is injected after `kill`
    /// records when given.
    async fn run(
        &self,
        backend: &MemoryStateBackend,
        parallelism: usize,
        kill: Option<usize>,
        policy: ErrorPolicy,
        lifecycle: &LifecycleLog,
    ) -> Result<JobSummary> {
        let data = self.input();
        let emitted = Arc::new(AtomicUsize::new(0));
        let ctx = &self.ctx;
        Pipeline::new("sink-suite")
            .batch_size(32)
            .checkpointing(CheckpointConfig::new(
                Duration::from_millis(20),
                Arc::new(backend.clone()),
            ))
            .source("input", 2, |i| {
                let s = VecSource::new(Arc::clone(&data), i, 2).paced(50, Duration::from_millis(2));
                match kill {
                    Some(k) => s.fail_after(k, Arc::clone(&emitted)),
                    None => s,
                }
            })
            .key_by(|r: &String| split_of(r), parallelism)
            .map(|r| C::to_record(&r))
            .sink("sink", parallelism, |i| {
                ObservedSink::new(
                    ctx.create_sink(i, parallelism, policy.clone()),
                    i,
                    lifecycle.clone(),
                )
            })?
            .run()
            .await
    }

    async fn judge(&self, case: &str, lifecycle: &LifecycleLog) -> Result<(), SuiteFailure> {
        lifecycle
            .check()
            .map_err(|e| failure(case, format!("lifecycle: {e}")))?;
        let mut back = self
            .ctx
            .read_back()
            .await
            .map_err(|e| failure(case, format!("reading back: {e}")))?;
        if !self.ctx.preserves_order() {
            back.sort();
        }
        let expected: Vec<String> = self.input().iter().flatten().cloned().collect();
        verify(&expected, &back)
            .check(self.guarantee())
            .map_err(|e| failure(case, e))
    }

    /// Everything written arrives, with `parallelism` sink subtasks.
    pub async fn write_all(&mut self, parallelism: usize) -> Result<(), SuiteFailure> {
        let case = format!("sink::write_all (parallelism {parallelism})");
        self.ctx.prepare().await.map_err(|e| failure(&case, e))?;
        let lifecycle = LifecycleLog::default();
        self.run(
            &MemoryStateBackend::new(),
            parallelism,
            None,
            ErrorPolicy::Fail,
            &lifecycle,
        )
        .await
        .map_err(|e| failure(&case, format!("the job failed: {e}")))?;
        self.judge(&case, &lifecycle).await
    }

    /// The job is killed between writes and their checkpoint commit, several times, then runs
    /// to the end: nothing lost; for exactly-once, nothing duplicated.
    pub async fn kill_and_restart(&mut self) -> Result<(), SuiteFailure> {
        let case = "sink::kill_and_restart";
        let total = 4 * self.per_split;
        // Each run restores from the previous one's last checkpoint; killing every run after a
        // fifth of the input leaves each one enough records to reach its kill point.
        self.killed_then_finished(case, &[(2, total / 6), (2, total / 5), (2, total / 4)], 2)
            .await
    }

    /// Killed with 2 subtasks, restored into 3 (killed again), then into 1.
    pub async fn rescale(&mut self) -> Result<(), SuiteFailure> {
        let total = 4 * self.per_split;
        self.killed_then_finished("sink::rescale", &[(2, total / 4), (3, total / 4)], 1)
            .await
    }

    /// Runs killed after `kill` records with `parallelism` subtasks, each restoring from the
    /// last, then a run to the end with `final_parallelism`; judges what arrived.
    async fn killed_then_finished(
        &mut self,
        case: &str,
        killed: &[(usize, usize)],
        final_parallelism: usize,
    ) -> Result<(), SuiteFailure> {
        self.ctx.prepare().await.map_err(|e| failure(case, e))?;
        let backend = MemoryStateBackend::new();
        for &(parallelism, kill) in killed {
            let lifecycle = LifecycleLog::default();
            let run = self.run(
                &backend,
                parallelism,
                Some(kill),
                ErrorPolicy::Fail,
                &lifecycle,
            );
            if run.await.is_ok() {
                return Err(failure(case, "the injected failure did not fail the job"));
            }
            lifecycle
                .check()
                .map_err(|e| failure(case, format!("lifecycle after a failure: {e}")))?;
        }
        let lifecycle = LifecycleLog::default();
        self.run(
            &backend,
            final_parallelism,
            None,
            ErrorPolicy::Fail,
            &lifecycle,
        )
        .await
        .map_err(|e| {
            failure(
                case,
                format!("the final run ({final_parallelism} subtasks) failed: {e}"),
            )
        })?;
        self.judge(case, &lifecycle).await
    }

    /// A record the destination rejects: `fail` stops the job; `skip` keeps every other record.
    pub async fn bad_records(&mut self) -> Result<(), SuiteFailure> {
        let case = "sink::bad_records";
        if C::bad_record().is_none() {
            return Ok(());
        }
        for policy in [ErrorPolicy::Fail, ErrorPolicy::Skip] {
            self.ctx.prepare().await.map_err(|e| failure(case, e))?;
            let lifecycle = LifecycleLog::default();
            let ctx = &self.ctx;
            let data = self.input();
            let result = Pipeline::new("sink-suite-bad")
                .checkpointing(CheckpointConfig::new(
                    Duration::from_millis(20),
                    Arc::new(MemoryStateBackend::new()),
                ))
                .source("input", 1, |i| VecSource::new(Arc::clone(&data), i, 1))
                .flat_map(|r: String| {
                    let bad = r == test_record(0, 0);
                    let mut out = vec![C::to_record(&r)];
                    if bad {
                        out.push(C::bad_record().expect("checked"));
                    }
                    out
                })
                .sink("sink", 1, |i| {
                    ObservedSink::new(ctx.create_sink(i, 1, policy.clone()), i, lifecycle.clone())
                })
                .map_err(|e| failure(case, e))?
                .run()
                .await;
            match (&policy, result) {
                (ErrorPolicy::Fail, Ok(_)) => {
                    return Err(failure(
                        case,
                        "policy `fail`: the bad record did not fail the job",
                    ))
                }
                (ErrorPolicy::Fail, Err(_)) => lifecycle.check().map_err(|e| failure(case, e))?,
                (_, Err(e)) => {
                    return Err(failure(case, format!("policy `skip`: the job failed: {e}")))
                }
                (_, Ok(_)) => self.judge(case, &lifecycle).await?,
            }
        }
        Ok(())
    }
}
