//! The suites certify the in-memory reference connectors, and fail — with an explanation — on
//! deliberately broken ones.

use std::sync::{Arc, Mutex};

use rivus_core::error_policy::ErrorPolicy;
use rivus_core::prelude::*;
use rivus_testkit::suite::{
    BoundedSourceSuite, SinkExternal, SinkSuite, SourceExternal, SourceSuite,
};
use rivus_testkit::{CollectingSink, LogSource, MemoryLog, TransactionalSink, TxnStore};

// ---- source: the in-memory log ----

struct LogContext {
    log: MemoryLog,
    skip_on_restore: usize,
    bounded: bool,
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
        s.skip_on_restore = self.skip_on_restore;
        s.bounded = self.bounded;
        s
    }

    fn to_test_record(record: &String) -> String {
        record.clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_suite_certifies_the_log_source() {
    let ctx = LogContext {
        log: MemoryLog::new(1),
        skip_on_restore: 0,
        bounded: false,
    };
    let mut suite = SourceSuite::new(ctx).records_per_split(150);
    if let Err(f) = suite.run_all().await {
        panic!("{f}");
    }
    assert!(
        !suite.context().log.committed().is_empty(),
        "offsets committed on checkpoint completion"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_suite_catches_a_record_dropped_on_restore() {
    let ctx = LogContext {
        log: MemoryLog::new(1),
        skip_on_restore: 1,
        bounded: false,
    };
    let mut suite = SourceSuite::new(ctx)
        .records_per_split(50)
        .arrival_timeout(std::time::Duration::from_secs(3));
    let f = suite.stop_and_restore().await.unwrap_err();
    assert_eq!(f.case, "source::stop_and_restore");
    assert!(f.message.contains("missing records in split"), "{f}");
    assert!(
        f.message.contains("s0-000050") || f.message.contains("s1-000050"),
        "names the record: {f}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_suite_certifies_the_bounded_log_source() {
    let ctx = LogContext {
        log: MemoryLog::new(1),
        skip_on_restore: 0,
        bounded: true,
    };
    let mut suite = BoundedSourceSuite::new(ctx).records_per_split(300);
    if let Err(f) = suite.run_all().await {
        panic!("{f}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_suite_catches_a_record_dropped_on_restore() {
    let ctx = LogContext {
        log: MemoryLog::new(1),
        skip_on_restore: 1,
        bounded: true,
    };
    let mut suite = BoundedSourceSuite::new(ctx).records_per_split(2000);
    let f = suite.failure_and_restart().await.unwrap_err();
    assert_eq!(f.case, "bounded::failure_and_restart");
    assert!(f.message.contains("missing records in split"), "{f}");
}

// ---- sinks: transactional (exactly-once) and collecting (at-least-once) ----

struct TxnContext {
    store: TxnStore<String>,
}

#[async_trait]
impl SinkExternal for TxnContext {
    type Record = String;
    type Sink = TransactionalSink<String>;

    async fn prepare(&mut self) -> Result<()> {
        self.store = TxnStore::new();
        Ok(())
    }

    fn create_sink(&self, subtask: usize, _: usize, _: ErrorPolicy) -> TransactionalSink<String> {
        TransactionalSink::new(self.store.clone(), subtask)
    }

    fn to_record(test: &str) -> String {
        test.to_owned()
    }

    async fn read_back(&self) -> Result<Vec<String>> {
        Ok(self.store.committed())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sink_suite_certifies_the_transactional_sink() {
    let mut suite = SinkSuite::new(TxnContext {
        store: TxnStore::new(),
    })
    .records_per_split(200);
    if let Err(f) = suite.run_all().await {
        panic!("{f}");
    }
}

struct CollectingContext {
    sink: CollectingSink<String>,
}

#[async_trait]
impl SinkExternal for CollectingContext {
    type Record = String;
    type Sink = CollectingSink<String>;

    async fn prepare(&mut self) -> Result<()> {
        self.sink = CollectingSink::new();
        Ok(())
    }

    fn create_sink(&self, subtask: usize, _: usize, _: ErrorPolicy) -> CollectingSink<String> {
        self.sink.for_subtask(subtask)
    }

    fn to_record(test: &str) -> String {
        test.to_owned()
    }

    async fn read_back(&self) -> Result<Vec<String>> {
        Ok(self.sink.values())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sink_suite_certifies_an_at_least_once_sink_despite_duplicates() {
    let mut suite = SinkSuite::new(CollectingContext {
        sink: CollectingSink::new(),
    })
    .records_per_split(200);
    if let Err(f) = suite.run_all().await {
        panic!("{f}");
    }
}

/// Writes straight through on every batch (no transaction) yet claims exactly-once: a
/// restart replays what was written after the last checkpoint.
#[derive(Clone, Default)]
struct CommitsTooEarly {
    out: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl RichFunction for CommitsTooEarly {}

#[async_trait]
impl CheckpointedFunction for CommitsTooEarly {
    type State = ();
    async fn snapshot_state(&mut self, _: u64) -> Result<()> {
        Ok(())
    }
}

#[async_trait]
impl CheckpointListener for CommitsTooEarly {}

#[async_trait]
impl SinkFunction<String> for CommitsTooEarly {
    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::ExactlyOnce
    }
    async fn invoke(&mut self, value: String, _: &SinkContext) -> Result<()> {
        self.out.lock().unwrap().push(value);
        Ok(())
    }
}

struct EarlyContext {
    sink: CommitsTooEarly,
}

#[async_trait]
impl SinkExternal for EarlyContext {
    type Record = String;
    type Sink = CommitsTooEarly;

    async fn prepare(&mut self) -> Result<()> {
        self.sink = CommitsTooEarly::default();
        Ok(())
    }

    fn create_sink(&self, _: usize, _: usize, _: ErrorPolicy) -> CommitsTooEarly {
        self.sink.clone()
    }

    fn to_record(test: &str) -> String {
        test.to_owned()
    }

    async fn read_back(&self) -> Result<Vec<String>> {
        Ok(self.sink.out.lock().unwrap().clone())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sink_suite_catches_a_sink_that_commits_before_the_checkpoint() {
    let mut suite = SinkSuite::new(EarlyContext {
        sink: CommitsTooEarly::default(),
    })
    .records_per_split(300);
    suite
        .write_all(2)
        .await
        .expect("without failures it looks fine");
    let f = suite.kill_and_restart().await.unwrap_err();
    assert!(f.message.contains("duplicated records"), "{f}");
    assert!(
        f.message.contains("guarantee declared: exactly-once"),
        "{f}"
    );
}
