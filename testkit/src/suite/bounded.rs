//! [`BoundedSourceSuite`]: the cases a bounded source (a backfill, an index or table read to
//! its end) must pass, against any [`SourceExternal`] whose source ends when the data written
//! before the run is read.

use rivus_sdk::checkpoint::MemoryStateBackend;
use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::prelude::*;

use super::records::{test_record, verify};
use super::report::{CaseError, Recorder, SuiteReport};
use super::runner::{run_source, RunOutcome, SourceRun, Store};
use super::{failure, SourceExternal, SuiteFailure};
use crate::TxnStore;

/// Runs the bounded-source cases against one [`SourceExternal`].
pub struct BoundedSourceSuite<C> {
    ctx: C,
    per_split: usize,
    ordered: bool,
    recorder: Recorder,
}

impl<C: SourceExternal> BoundedSourceSuite<C> {
    /// A suite writing `per_split` records per split (default 500).
    pub fn new(ctx: C) -> Self {
        BoundedSourceSuite {
            ctx,
            per_split: 500,
            ordered: true,
            recorder: Recorder::new("BoundedSourceSuite"),
        }
    }

    rivus_sdk::setters! {
        /// Records per split.
        records_per_split(n: usize) => per_split = n.max(1);

        /// Whether records of one split arrive in the order written (default true). A source
        /// whose subtasks each read a slice of the whole data (not whole splits) says false.
        ordered(ordered: bool) => ordered;
    }

    /// The rows of the cases run so far.
    pub fn report(&self) -> &SuiteReport {
        &self.recorder.report
    }

    /// Runs every case and returns the report (also printed); the first failure is returned
    /// carrying the whole report.
    pub async fn run_all(&mut self) -> Result<SuiteReport, SuiteFailure> {
        let _ = self.reads_everything("bounded::single_reader", 1, 1).await;
        let _ = self
            .reads_everything("bounded::parallel_readers", 4, 3)
            .await;
        let _ = self.empty().await;
        for p in [1, 2] {
            let _ = self.failure_and_restart_at(p).await;
        }
        self.recorder.finish()
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

    /// A run to the end of the data (the job must end by itself).
    fn spec(parallelism: usize) -> SourceRun {
        let mut s = SourceRun::new(parallelism, None, super::ARRIVAL_TIMEOUT);
        s.interval = std::time::Duration::from_millis(20);
        s.batch_size = 32;
        s.channel_capacity = 2;
        s
    }

    async fn run(
        &self,
        backend: &MemoryStateBackend,
        store: &Store<C>,
        spec: SourceRun,
    ) -> RunOutcome {
        run_source(&self.ctx, backend, store, spec).await
    }

    fn judge(
        &mut self,
        case: &str,
        expected: &[String],
        out: &RunOutcome,
    ) -> Result<(), SuiteFailure> {
        let mut verdict = verify(expected, &out.committed);
        self.recorder
            .counts(expected.len(), &out.committed, &verdict);
        if let Err(e) = &out.result {
            return Err(failure(case, format!("the job failed: {e}")));
        }
        out.lifecycle
            .check()
            .map_err(|e| failure(case, format!("lifecycle: {e}")))?;
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
        self.recorder.begin();
        let r = self.reads_everything_case(case, splits, parallelism).await;
        self.recorder.end(case, parallelism, r)
    }

    async fn reads_everything_case(
        &mut self,
        case: &str,
        splits: usize,
        parallelism: usize,
    ) -> Result<(), CaseError> {
        let expected = self.write(case, splits).await?;
        let out = self
            .run(
                &MemoryStateBackend::new(),
                &TxnStore::new(),
                Self::spec(parallelism),
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
            )
            .into());
        }
        Ok(())
    }

    /// Nothing to read: the job ends at once with no records.
    async fn empty(&mut self) -> Result<(), SuiteFailure> {
        let case = "bounded::empty";
        self.recorder.begin();
        let r = async {
            self.ctx.prepare(2).await.map_err(|e| failure(case, e))?;
            let out = self
                .run(&MemoryStateBackend::new(), &TxnStore::new(), Self::spec(2))
                .await;
            self.judge(case, &[], &out)?;
            Ok(())
        }
        .await;
        self.recorder.end(case, 2, r)
    }

    /// The job fails halfway (the sink throws between a write and its commit) and restarts
    /// from its last checkpoint: everything arrives once, and the restarted run does not read
    /// what the checkpoint already covered.
    pub async fn failure_and_restart(&mut self) -> Result<(), SuiteFailure> {
        self.failure_and_restart_at(2).await
    }

    /// [`failure_and_restart`](Self::failure_and_restart) with `parallelism` readers.
    pub async fn failure_and_restart_at(&mut self, parallelism: usize) -> Result<(), SuiteFailure> {
        let case = "bounded::failure_and_restart";
        self.recorder.begin();
        let r = self.failure_and_restart_case(case, parallelism).await;
        self.recorder.end(case, parallelism, r)
    }

    async fn failure_and_restart_case(&mut self, case: &str, p: usize) -> Result<(), CaseError> {
        let expected = self.write(case, 2).await?;
        let (backend, store) = (MemoryStateBackend::new(), TxnStore::new());
        // A slow sink (the whole run takes ~200 ms at least), so that checkpoints (every
        // 20 ms) land while the source reads, however fast the source is.
        let batches = (expected.len() / 32).max(1) as u64;
        let mut spec = Self::spec(p);
        spec.pace = Some(std::time::Duration::from_millis((200 / batches).max(1)));
        spec.fail_sink_after = Some(expected.len() / 2);
        let first = self.run(&backend, &store, spec).await;
        if first.result.is_ok() {
            return Err(failure(case, "the injected failure did not stop the first run").into());
        }
        // What the first run committed is covered by a completed checkpoint.
        let covered = first.committed.len() as u64;
        let out = self.run(&backend, &store, Self::spec(p)).await;
        self.judge(case, &expected, &out)?;
        let summary = out.result.as_ref().expect("judged above");
        if summary.restored_from.is_none() {
            return Err(failure(
                case,
                "no checkpoint completed before the failure halfway, so the restart restored \
                 nothing (checkpoints every 20 ms; does the source serve them while reading?)",
            )
            .into());
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
            )
            .into());
        }
        Ok(())
    }
}
