//! The [`SinkSuite`] cases that fail the sink under test: after completed checkpoints, inside
//! its own `snapshot_state` (after it pre-committed), and in the first `open` of a restore —
//! each followed by more data and a restart that must deliver what the declared guarantee
//! promises.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use rivus_sdk::checkpoint::MemoryStateBackend;

use super::observed::{Faults, LifecycleLog, Trigger};
use super::report::CaseError;
use super::sink::SinkRun;
use super::{failure, SinkExternal, SinkSuite, SuiteFailure};

impl<C: SinkExternal> SinkSuite<C> {
    /// Checkpoints complete, then a write fails; more data comes; the job restarts from the
    /// last checkpoint: what the completed checkpoints covered stays, nothing is lost, and an
    /// exactly-once sink duplicates nothing.
    pub async fn failure_after_checkpoints(
        &mut self,
        parallelism: usize,
    ) -> Result<(), SuiteFailure> {
        let faults = Faults {
            invoke: Some(Trigger::AfterCheckpoints(2)),
            ..Faults::default()
        };
        self.failure_case(
            "sink::failure_after_checkpoints",
            parallelism,
            faults,
            false,
        )
        .await
    }

    /// The sink fails inside `snapshot_state`, after its own snapshot (a flush or a
    /// pre-commit), so the checkpoint never completes; more data comes; the restart must drop
    /// or replay what that checkpoint held, never commit it twice.
    pub async fn failure_in_snapshot(&mut self, parallelism: usize) -> Result<(), SuiteFailure> {
        let faults = Faults {
            snapshot: Some(Trigger::AfterCheckpoints(1)),
            ..Faults::default()
        };
        self.failure_case("sink::failure_in_snapshot", parallelism, faults, false)
            .await
    }

    /// After a failure behind a completed checkpoint, the first `open` of the restored run
    /// fails too (the sink restored its state — committed or aborted what it found — then the
    /// task failed); the next restore must still end with every record, once for
    /// exactly-once sinks.
    pub async fn failure_during_restore(&mut self, parallelism: usize) -> Result<(), SuiteFailure> {
        let faults = Faults {
            invoke: Some(Trigger::AfterCheckpoints(1)),
            ..Faults::default()
        };
        self.failure_case("sink::failure_during_restore", parallelism, faults, true)
            .await
    }

    /// Runs the failure case `case` and reports it.
    async fn failure_case(
        &mut self,
        case: &str,
        parallelism: usize,
        faults: Faults,
        fail_restore: bool,
    ) -> Result<(), SuiteFailure> {
        self.recorder.begin();
        let r = self
            .fail_then_restart(case, parallelism, faults, fail_restore)
            .await;
        self.recorder.end(case, parallelism, r)
    }

    async fn fail_then_restart(
        &mut self,
        case: &str,
        p: usize,
        faults: Faults,
        fail_restore: bool,
    ) -> Result<(), CaseError> {
        self.prepare(case).await?;
        let backend = MemoryStateBackend::new();
        // Two rounds of slow input: the fault fires long before the data ends.
        let mut spec = SinkRun::new(p, 2);
        spec.unbounded = true;
        spec.faults = faults;
        self.expect_injected(case, &backend, spec).await?;
        if backend.checkpoints().is_empty() {
            return Err(failure(case, "no checkpoint completed before the failure").into());
        }
        // More data after the failure: the restored source reads on into a third round.
        if fail_restore {
            let mut spec = SinkRun::new(p, 3);
            spec.faults.open_after_restore = Some(Arc::new(AtomicBool::new(true)));
            self.expect_injected(case, &backend, spec).await?;
        }
        let lifecycle = LifecycleLog::default();
        let summary = self
            .run(&backend, SinkRun::new(p, 3), &lifecycle)
            .await
            .map_err(|e| failure(case, format!("the restarted job failed: {e}")))?;
        if summary.restored_from.is_none() {
            return Err(failure(case, "the restart did not restore from a checkpoint").into());
        }
        self.judge(case, &lifecycle, 3).await?;
        Ok(())
    }

    /// Runs `spec`, which must fail with the suite's injected failure, keeping the lifecycle.
    async fn expect_injected(
        &self,
        case: &str,
        backend: &MemoryStateBackend,
        spec: SinkRun,
    ) -> Result<(), SuiteFailure> {
        let lifecycle = LifecycleLog::default();
        match self.run(backend, spec, &lifecycle).await {
            Ok(_) => Err(failure(case, "the injected failure did not fail the job")),
            Err(e) if !e.to_string().contains("injected failure") => Err(failure(
                case,
                format!("the job failed before the injected failure: {e}"),
            )),
            Err(_) => lifecycle
                .check()
                .map_err(|e| failure(case, format!("lifecycle after a failure: {e}"))),
        }
    }
}
