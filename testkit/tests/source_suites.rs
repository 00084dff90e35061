//! The source suites certify the in-memory reference source, and reject — naming the case and
//! the records — each broken variant of it: a source that loses or duplicates records on
//! restore, never commits its positions, commits when a checkpoint is triggered, or commits
//! more than a completed checkpoint covers.

use std::time::Duration;

use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::prelude::*;
use rivus_testkit::suite::{
    BoundedSourceSuite, CaseOutcome, SourceExternal, SourceSuite, SuiteFailure,
};
use rivus_testkit::{LogFault, LogSource, MemoryLog, Resume};

struct LogContext {
    log: MemoryLog,
    resume: Resume,
    fault: LogFault,
    bounded: bool,
}

impl LogContext {
    fn new(resume: Resume, fault: LogFault) -> Self {
        LogContext {
            log: MemoryLog::new(1),
            resume,
            fault,
            bounded: false,
        }
    }

    fn bounded(fault: LogFault) -> Self {
        LogContext {
            bounded: true,
            ..LogContext::new(Resume::Checkpoint, fault)
        }
    }
}

#[async_trait]
impl SourceExternal for LogContext {
    type Source = LogSource;

    async fn prepare(&mut self, splits: usize) -> Result<()> {
        self.log = MemoryLog::new(splits);
        Ok(())
    }

    async fn write(&mut self, split: usize, records: &[String]) -> Result<()> {
        self.log
            .append(split, records.iter().map(|r| r.as_bytes().to_vec()));
        Ok(())
    }

    async fn write_bad(&mut self, split: usize) -> Result<bool> {
        self.log.append(split, [vec![0xff, 0xfe]]);
        Ok(true)
    }

    fn create_source(&self, subtask: usize, parallelism: usize, policy: ErrorPolicy) -> LogSource {
        let mut s = LogSource::new(self.log.clone(), subtask, parallelism, policy);
        s.resume = self.resume;
        s.fault = self.fault;
        s.bounded = self.bounded;
        s
    }

    fn to_test_record(&self, record: &String) -> String {
        record.clone()
    }

    fn commits_positions(&self) -> bool {
        true
    }
}

fn suite(resume: Resume, fault: LogFault) -> SourceSuite<LogContext> {
    SourceSuite::new(LogContext::new(resume, fault))
        .records_per_split(150)
        .arrival_timeout(Duration::from_secs(5))
}

/// The failure names `case`, at `parallelism`, with `what` (and the records concerned).
fn assert_caught(f: &SuiteFailure, case: &str, parallelism: usize, what: &str) {
    assert_eq!(f.case, case, "{f}");
    assert!(
        f.message
            .starts_with(&format!("[parallelism {parallelism}]")),
        "{f}"
    );
    assert!(f.message.contains(what), "{f}");
    assert!(
        f.message.contains("in split 0: s0-") || f.message.contains("in split 1: s1-"),
        "names the records: {f}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_suite_certifies_the_log_source_in_every_case() {
    for resume in [Resume::Checkpoint, Resume::Committed] {
        let mut suite = suite(resume, LogFault::None);
        let report = match suite.run_all().await {
            Ok(r) => r,
            Err(f) => panic!("{resume:?}: {f}"),
        };
        assert!(report.skipped().is_empty(), "{report}");
        assert_eq!(report.failed(), 0, "{report}");
        // Five cases without parallelism variants, five at parallelism 1 and 2, two failures
        // across a rescale, bad records.
        assert_eq!(report.passed(), 18, "{report}");
        let row = report
            .row("source::failure_after_checkpoints", 2)
            .expect("ran at parallelism 2");
        assert_eq!((row.written, row.missing), (600, 0));
        if resume == Resume::Checkpoint {
            assert_eq!(row.duplicates, 0, "exactly-once: {report}");
        }
        assert!(
            !suite.context().log.committed().is_empty(),
            "offsets committed on checkpoint completion"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_that_never_commits_is_rejected_and_reported() {
    let mut suite = suite(Resume::Committed, LogFault::NeverCommit);
    let f = suite.run_all().await.unwrap_err();
    let report = f.report.clone().expect("run_all attaches the report");
    for p in [1, 2] {
        for case in [
            "source::stop_and_restore",
            "source::restart_without_checkpoint",
        ] {
            let row = report.row(case, p).expect("ran");
            assert!(
                matches!(&row.outcome, CaseOutcome::Failed(m) if m.contains("again") || m.contains("duplicated records")),
                "{case} at {p}: {report}"
            );
        }
    }
    assert_eq!(f.case, "source::stop_and_restore");
    assert!(f.message.contains("duplicated records"), "{f}");
    assert!(
        f.to_string().contains("FAILED"),
        "the report is printed: {f}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_that_never_commits_is_caught_even_when_it_restores_from_checkpoints() {
    let mut suite = suite(Resume::Checkpoint, LogFault::NeverCommit);
    suite
        .stop_and_restore(2)
        .await
        .expect("its checkpoints alone are right");
    let f = suite.restart_without_checkpoint(2).await.unwrap_err();
    assert_eq!(f.case, "source::restart_without_checkpoint");
    assert!(f.message.contains("read 300 records again"), "{f}");
    assert!(f.message.contains("did not commit its positions"), "{f}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_that_commits_when_a_checkpoint_is_triggered_is_rejected() {
    let mut suite = suite(Resume::Committed, LogFault::CommitOnTrigger);
    for p in [1, 2] {
        // The fault loses only records read between the last completed checkpoint and the
        // failing one's trigger: the case fails in a checkpoint that covers records.
        let f = suite.failure_in_snapshot(p).await.unwrap_err();
        assert_caught(&f, "source::failure_in_snapshot", p, "missing records");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_that_commits_more_than_the_checkpoint_covers_is_rejected() {
    let mut suite = suite(Resume::Committed, LogFault::CommitAllOnComplete);
    for p in [1, 2] {
        let f = suite.failure_after_checkpoints(p).await.unwrap_err();
        assert_caught(
            &f,
            "source::failure_after_checkpoints",
            p,
            "missing records",
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_dropped_on_restore_is_caught() {
    let mut suite = suite(Resume::Checkpoint, LogFault::SkipOnRestore(1));
    let f = suite.stop_and_restore(1).await.unwrap_err();
    assert_caught(&f, "source::stop_and_restore", 1, "missing records");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exactly_once_source_that_duplicates_after_restore_is_caught() {
    let mut suite = suite(Resume::Checkpoint, LogFault::RewindOnRestore(3));
    let f = suite.failure_during_restore(2).await.unwrap_err();
    assert_caught(
        &f,
        "source::failure_during_restore",
        2,
        "duplicated records",
    );
    assert!(
        f.message.contains("guarantee declared: exactly-once"),
        "{f}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_that_commits_on_completion_refuses_a_job_without_checkpoints() {
    let err = Pipeline::new("no-checkpoints")
        .source("log", 1, |_| {
            let mut s = LogSource::new(MemoryLog::new(1), 0, 1, ErrorPolicy::Fail);
            s.resume = Resume::Committed;
            s
        })
        .sink("out", 1, |_| rivus_testkit::CollectingSink::<String>::new())
        .unwrap()
        .run()
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("log[0].resume"), "{err}");
    assert!(err.contains("enable checkpointing"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_suite_certifies_the_bounded_log_source() {
    let mut suite =
        BoundedSourceSuite::new(LogContext::bounded(LogFault::None)).records_per_split(300);
    let report = suite.run_all().await.unwrap_or_else(|f| panic!("{f}"));
    assert_eq!(report.passed(), 5, "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_suite_catches_a_record_dropped_on_restore() {
    let mut suite = BoundedSourceSuite::new(LogContext::bounded(LogFault::SkipOnRestore(1)))
        .records_per_split(2000);
    let f = suite.failure_and_restart().await.unwrap_err();
    assert_eq!(f.case, "bounded::failure_and_restart");
    assert!(f.message.contains("missing records in split"), "{f}");
}
