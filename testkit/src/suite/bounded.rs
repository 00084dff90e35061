//! [`BoundedSourceSuite`]: the cases a bounded source (a backfill, an index or table read to
//! its end) must pass, against any [`SourceExternal`] whose source ends when the data written
//! before the run is read.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use rivus_core::checkpoint::{CheckpointConfig, MemoryStateBackend};
use rivus_core::error_policy::ErrorPolicy;
use rivus_core::prelude::*;

use super::observed::{LifecycleLog, ObservedSource};
use super::records::{test_record, verify};
use super::{failure, SourceExternal, SuiteFailure};
use crate::{TransactionalSink, TxnStore};

/// Runs the bounded-source cases against one [`SourceExternal`].
pub struct BoundedSourceSuite<C> {
    ctx: C,
    per_split: usize,
    ordered: bool,
}

struct Outcome {
    committed: Vec<String>,
    result: Result<JobSummary>,
    lifecycle: LifecycleLog,
}

impl<C: SourceExternal> BoundedSourceSuite<C> {
    /// A suite writing `per_split` records per split (default 500).
    pub fn new(ctx: C) -> Self {
        BoundedSourceSuite {
            ctx,
            per_split: 500,
            ordered: true,
        }
    }

    /// Records per split.
    pub fn records_per_split(mut self, n: usize) -> Self {
        self.per_split = n.max(1);
        self
    }

    /// Whether records of one split arrive in the order written (default true). A source
    /// whose subtasks each read a slice of the whole data (not whole splits) says false.
    pub fn ordered(mut self, ordered: bool) -> Self {
        self.ordered = ordered;
        self
    }

    /// Runs every case; the first failure is returned with its explanation.
    pub async fn run_all(&mut self) -> Result<(), SuiteFailure> {
        self.reads_everything("bounded::single_reader", 1, 1)
            .await?;
        self.reads_everything("bounded::parallel_readers", 4, 3)
            .await?;
        self.empty().await?;
        self.failure_and_restart().await?;
        Ok(())
    }

    async fn write(&mut self, case: &str, splits: usize) -> Result<Vec<String>, SuiteFailure> {
        self.ctx
            .prepare(splits)
            .await
            .map_err(|e| failure(case, e))?;
        let mut all = Vec::new();
        for s in 0..splits {
            let recs: Vec<String> = (0..self.per_split).map(|i| test_record(s, i)).collect();
            self.ctx
                .write(s, &recs)
                .await
                .map_err(|e| failure(case, format!("writing test data to split {s}: {e}")))?;
            all.extend(recs);
        }
        Ok(all)
    }

    async fn run(
        &self,
        backend: &MemoryStateBackend,
        store: &TxnStore<String>,
        parallelism: usize,
        fail_sink_after: Option<usize>,
        pace: Option<std::time::Duration>,
    ) -> Outcome {
        let lifecycle = LifecycleLog::default();
        let received = Arc::new(AtomicUsize::new(0));
        let ctx = &self.ctx;
        let job = Pipeline::new("bounded-source-suite")
            .batch_size(32)
            .channel_capacity(2)
            .checkpointing(CheckpointConfig::new(
                std::time::Duration::from_millis(20),
                Arc::new(backend.clone()),
            ))
            .source("source", parallelism, |i| {
                ObservedSource::new(
                    ctx.create_source(i, parallelism, ErrorPolicy::Fail),
                    i,
                    lifecycle.clone(),
                )
            })
            .map(|r| C::to_test_record(&r))
            .sink("collect", 1, |i| {
                let mut sink = TransactionalSink::new(store.clone(), i);
                if let Some(p) = pace {
                    sink = sink.pace(p);
                }
                match fail_sink_after {
                    Some(n) => sink.fail_after(n, Arc::clone(&received)),
                    None => sink,
                }
            });
        let result = match job {
            Ok(job) => {
                let run = tokio::time::timeout(super::ARRIVAL_TIMEOUT, job.run()).await;
                run.unwrap_or_else(|_| {
                    Err(Error::connector(
                        "bounded source suite",
                        "the job did not end by itself: a bounded source must finish",
                    ))
                })
            }
            Err(e) => Err(e),
        };
        Outcome {
            committed: store.committed(),
            result,
            lifecycle,
        }
    }

    fn judge(&self, case: &str, expected: &[String], out: &Outcome) -> Result<(), SuiteFailure> {
        if let Err(e) = &out.result {
            return Err(failure(case, format!("the job failed: {e}")));
        }
        out.lifecycle
            .check()
            .map_err(|e| failure(case, format!("lifecycle: {e}")))?;
        let mut verdict = verify(expected, &out.committed);
        if !self.ordered {
            verdict.out_of_order.clear();
        }
        let guarantee = self
            .ctx
            .create_source(0, 1, ErrorPolicy::Fail)
            .delivery_guarantee();
        verdict.check(guarantee).map_err(|e| failure(case, e))
    }

    /// Everything written before the run arrives, and the job ends by itself.
    async fn reads_everything(
        &mut self,
        case: &str,
        splits: usize,
        parallelism: usize,
    ) -> Result<(), SuiteFailure> {
        let expected = self.write(case, splits).await?;
        let out = self
            .run(
                &MemoryStateBackend::new(),
                &TxnStore::new(),
                parallelism,
                None,
                None,
            )
            .await;
        self.judge(case, &expected, &out)?;
        let read = out.result.as_ref().map(|s| s.records_read).unwrap_or(0);
        if read != expected.len() as u64 {
            return Err(failure(
                case,
                format!(
                    "the source emitted {read} records, {} were written",
                    expected.len()
                ),
            ));
        }
        Ok(())
    }

    /// Nothing to read: the job ends at once with no records.
    async fn empty(&mut self) -> Result<(), SuiteFailure> {
        let case = "bounded::empty";
        self.ctx.prepare(2).await.map_err(|e| failure(case, e))?;
        let out = self
            .run(&MemoryStateBackend::new(), &TxnStore::new(), 2, None, None)
            .await;
        self.judge(case, &[], &out)
    }

    /// The job fails halfway (the sink throws between a write and its commit) and restarts
    /// from its last checkpoint: everything arrives once, and the restarted run does not read
    /// what the checkpoint already covered.
    pub async fn failure_and_restart(&mut self) -> Result<(), SuiteFailure> {
        let case = "bounded::failure_and_restart";
        let expected = self.write(case, 2).await?;
        let (backend, store) = (MemoryStateBackend::new(), TxnStore::new());
        // A slow sink (the whole run takes ~200 ms at least), so that checkpoints (every
        // 20 ms) land while the source reads, however fast the source is.
        let batches = (expected.len() / 32).max(1) as u64;
        let pace = Some(std::time::Duration::from_millis((200 / batches).max(1)));
        let first = self
            .run(&backend, &store, 2, Some(expected.len() / 2), pace)
            .await;
        if first.result.is_ok() {
            return Err(failure(
                case,
                "the injected failure did not stop the first run",
            ));
        }
        // What the first run committed is covered by a completed checkpoint.
        let covered = first.committed.len() as u64;
        let out = self.run(&backend, &store, 2, None, None).await;
        self.judge(case, &expected, &out)?;
        let summary = out.result.as_ref().expect("judged above");
        if summary.restored_from.is_none() {
            return Err(failure(
                case,
                "no checkpoint completed before the failure halfway, so the restart restored \
                 nothing (checkpoints every 20 ms; does the source serve them while reading?)",
            ));
        }
        let most = expected.len() as u64 - covered;
        if summary.records_read > most {
            return Err(failure(
                case,
                format!(
                    "{covered} records were covered by a checkpoint, yet the restarted run \
                     read {} (at most {most} expected)",
                    summary.records_read
                ),
            ));
        }
        Ok(())
    }
}
