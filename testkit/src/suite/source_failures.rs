//! The [`SourceSuite`] cases that fail the job: before any checkpoint, after completed
//! checkpoints (with records behind the last barrier in flight), inside a checkpoint, and
//! during the restore — each followed by more data and a restart that must deliver everything
//! the declared guarantee promises.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use rivus_sdk::checkpoint::MemoryStateBackend;
use rivus_sdk::prelude::*;

use super::observed::Trigger;
use super::report::CaseError;
use super::runner::{RunOutcome, Store};
use super::source::no_rescale;
use super::{failure, SourceExternal, SourceSuite, SuiteFailure};
use crate::TxnStore;

/// How a failure case runs: where the first run fails, and how the job restarts.
#[derive(Clone, Copy)]
struct Plan {
    /// Subtasks of the run that fails.
    parallelism: usize,
    /// Subtasks of the restarted runs.
    restart: usize,
    at: FailAt,
    /// The first `open` of the restored run fails too.
    fail_restore: bool,
}

impl Plan {
    fn new(parallelism: usize, at: FailAt) -> Self {
        Plan {
            parallelism,
            restart: parallelism,
            at,
            fail_restore: false,
        }
    }
}

/// Where the first run of a failure case fails.
#[derive(Clone, Copy, PartialEq, Eq)]
enum FailAt {
    /// The sink throws in a write once the first records are committed.
    WriteAfterCommit,
    /// The sink throws inside `snapshot_state` of a checkpoint covering records, once the
    /// first records are committed: a checkpoint is in flight (triggered at the source, never
    /// completed).
    Snapshot,
}

impl<C: SourceExternal> SourceSuite<C> {
    /// The job fails mid-stream before any checkpoint completed (the sink throws between a
    /// write and its commit) and restarts: the records read but not committed are read again.
    pub async fn failure_and_restart(&mut self) -> Result<(), SuiteFailure> {
        let case = "source::failure_and_restart";
        self.recorder.begin();
        let r = self.failure_and_restart_case(case).await;
        self.recorder.end(case, 2, r)
    }

    async fn failure_and_restart_case(&mut self, case: &str) -> Result<(), CaseError> {
        self.prepare(case, 2).await?;
        let (backend, store) = (MemoryStateBackend::new(), TxnStore::new());
        let expected = self.write_round(case, 2, 0).await?;
        let mut spec = self.spec(2, usize::MAX);
        spec.fail_sink_after = Some(expected.len() * 2 / 3);
        let crashed = self.run(&backend, &store, spec).await;
        self.expect_injected(case, &crashed)?;
        let out = self
            .run(&backend, &store, self.spec(2, expected.len()))
            .await;
        self.judge(case, &expected, &out)?;
        Ok(())
    }

    /// Flink's task-failure case: checkpoints complete while a slow sink (not chained to the
    /// source) keeps records behind their barriers in flight, the job fails, more data is written, the job restarts from
    /// its last checkpoint. A source that commits more than the completed checkpoint covers
    /// loses the records in flight.
    pub async fn failure_after_checkpoints(
        &mut self,
        parallelism: usize,
    ) -> Result<(), SuiteFailure> {
        let plan = Plan::new(parallelism, FailAt::WriteAfterCommit);
        self.failure_case("source::failure_after_checkpoints", plan)
            .await
    }

    /// [`failure_after_checkpoints`](Self::failure_after_checkpoints) with `from` subtasks,
    /// restarted with `to`: the positions of the failed run are redistributed. Skipped for a
    /// source that does not rescale.
    pub async fn failure_and_rescale(
        &mut self,
        from: usize,
        to: usize,
    ) -> Result<(), SuiteFailure> {
        let plan = Plan {
            restart: to,
            ..Plan::new(from, FailAt::WriteAfterCommit)
        };
        self.failure_case("source::failure_and_rescale", plan).await
    }

    /// The sink (in a task of its own, not chained to the source) fails inside
    /// `snapshot_state` while a checkpoint is in flight; more data is written; the job
    /// restarts from the last completed checkpoint. A source that commits when a checkpoint is
    /// triggered, before it is stored, loses what that checkpoint would have covered.
    pub async fn failure_in_snapshot(&mut self, parallelism: usize) -> Result<(), SuiteFailure> {
        let plan = Plan::new(parallelism, FailAt::Snapshot);
        self.failure_case("source::failure_in_snapshot", plan).await
    }

    /// After a failure behind completed checkpoints, the first `open` of the restored run fails
    /// too (the source opened, did what its restore does, then the task failed); the next
    /// restart must still deliver everything, once for exactly-once sources.
    pub async fn failure_during_restore(&mut self, parallelism: usize) -> Result<(), SuiteFailure> {
        let plan = Plan {
            fail_restore: true,
            ..Plan::new(parallelism, FailAt::WriteAfterCommit)
        };
        self.failure_case("source::failure_during_restore", plan)
            .await
    }

    /// Runs the failure case `case` as `plan` says, and reports it (skipped when it rescales a
    /// source that cannot).
    async fn failure_case(&mut self, case: &str, plan: Plan) -> Result<(), SuiteFailure> {
        self.recorder.begin();
        let r = if plan.restart != plan.parallelism && !self.ctx.rescales() {
            Err(no_rescale())
        } else {
            self.fail_then_restart(case, plan).await
        };
        self.recorder.end(case, plan.restart, r)
    }

    /// Fails a run as `plan` says, writes a second round, restarts (after a failed first open
    /// of the restore, with `fail_restore`) and judges.
    async fn fail_then_restart(&mut self, case: &str, plan: Plan) -> Result<(), CaseError> {
        let Plan {
            parallelism: p,
            restart,
            at,
            fail_restore,
        } = plan;
        self.prepare(case, 2).await?;
        let (backend, store): (_, Store<C>) = (MemoryStateBackend::new(), TxnStore::new());
        let first = self.write_round(case, 2, 0).await?;
        let (trigger, armed) = Trigger::armed();
        // The sink in a task of its own, behind a channel: records behind a barrier are on
        // their way when its checkpoint completes.
        let mut spec = self.spec(p, usize::MAX).paced(first.len());
        spec.unchained = true;
        // Both faults are armed at the first commit, so that records are still unread when
        // they are armed however slowly checkpoints complete: the write fault needs a write to
        // fire in, and the snapshot fault fires only in a checkpoint that covers records (a
        // source that commits on trigger loses only those).
        match at {
            FailAt::WriteAfterCommit => spec.sink_faults.invoke = Some(trigger),
            FailAt::Snapshot => spec.sink_faults.snapshot = Some(trigger),
        }
        spec.arm_when_committed = Some((1, armed));
        let crashed = self.run(&backend, &store, spec).await;
        self.expect_injected(case, &crashed)?;
        if crashed.committed.is_empty() {
            return Err(failure(case, "no checkpoint completed before the failure").into());
        }
        let second = self.write_round(case, 2, 1).await?;
        let all = [first, second].concat();
        if fail_restore {
            let mut spec = self.spec(restart, all.len());
            spec.source_faults.open_after_restore = Some(Arc::new(AtomicBool::new(true)));
            let crashed = self.run(&backend, &store, spec).await;
            self.expect_injected(case, &crashed)?;
        }
        let out = self
            .run(&backend, &store, self.spec(restart, all.len()))
            .await;
        if out.result.as_ref().is_ok_and(|s| s.restored_from.is_none()) {
            return Err(failure(case, "the restart did not restore from a checkpoint").into());
        }
        self.judge(case, &all, &out)?;
        Ok(())
    }

    /// The run must have failed, with the suite's injected failure, and kept the lifecycle.
    fn expect_injected(&self, case: &str, out: &RunOutcome) -> Result<(), SuiteFailure> {
        match &out.result {
            Ok(_) => Err(failure(
                case,
                "the injected failure did not fail the job (did checkpoints complete while \
                 the source read?)",
            )),
            Err(e) if !e.to_string().contains("injected failure") => Err(failure(
                case,
                format!("the job failed before the injected failure: {e}"),
            )),
            Err(_) => out
                .lifecycle
                .check()
                .map_err(|e| failure(case, format!("lifecycle after a failure: {e}"))),
        }
    }
}
