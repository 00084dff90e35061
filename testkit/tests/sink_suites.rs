//! The sink suite certifies the in-memory reference sinks, and rejects — naming the case and
//! the records — broken ones: a sink that commits before the checkpoint, one that loses a
//! batch around a restore, and one that drops bad records instead of dead-lettering them.

use std::sync::{Arc, Mutex};

use rivus_sdk::error_policy::{ErrorHandler, ErrorPolicy};
use rivus_sdk::prelude::*;
use rivus_testkit::suite::{CaseOutcome, SinkExternal, SinkSuite};
use rivus_testkit::{CollectingSink, TransactionalSink, TxnStore};

// ---- transactional (exactly-once) and collecting (at-least-once) ----

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

    fn to_record(&self, test: &str) -> String {
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
    let report = suite.run_all().await.unwrap_or_else(|f| panic!("{f}"));
    // Five cases without parallelism variants (write_all twice), three at 1 and 2 subtasks.
    assert_eq!(report.passed(), 11, "{report}");
    let row = report.row("sink::in_a_fan_out", 2).expect("ran");
    assert_eq!((row.written, row.read, row.duplicates), (800, 800, 0));
    assert_eq!(
        report.skipped(),
        vec![(
            "sink::bad_records",
            "the connector supplies no record its destination rejects \
             (SinkExternal::bad_record returned None)"
        )],
        "a case that does not apply is reported as skipped, with the reason"
    );
    let row = report.row("sink::failure_in_snapshot", 2).expect("ran");
    assert_eq!((row.written, row.read, row.duplicates), (2400, 2400, 0));
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

    fn to_record(&self, test: &str) -> String {
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
    let report = suite.run_all().await.unwrap_or_else(|f| panic!("{f}"));
    assert_eq!(report.failed(), 0, "{report}");
    let replayed: usize = [1, 2]
        .iter()
        .map(|p| report.row("sink::failure_in_snapshot", *p).expect("ran"))
        .inspect(|row| assert_eq!(row.outcome, CaseOutcome::Passed))
        .map(|row| row.duplicates)
        .sum();
    assert!(
        replayed > 0,
        "what was written since the last checkpoint is written again: {report}"
    );
}

// ---- broken sinks ----

/// Writes straight through (no transaction) yet claims exactly-once; with `drop_after_restore`
/// it also loses the first batch it is handed after a restore (at-least-once then).
#[derive(Clone, Default)]
struct Broken {
    out: Arc<Mutex<Vec<String>>>,
    drop_after_restore: bool,
    dropping: bool,
}

#[async_trait]
impl RichFunction for Broken {}

#[async_trait]
impl CheckpointedFunction for Broken {
    type State = ();
    async fn initialize_state(&mut self, restored: Restored<()>) -> Result<()> {
        self.dropping = self.drop_after_restore && restored.is_restored();
        Ok(())
    }
    async fn snapshot_state(&mut self, _: u64) -> Result<()> {
        Ok(())
    }
}

#[async_trait]
impl CheckpointListener for Broken {}

#[async_trait]
impl SinkFunction<String> for Broken {
    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        if self.drop_after_restore {
            DeliveryGuarantee::AtLeastOnce
        } else {
            DeliveryGuarantee::ExactlyOnce
        }
    }
    async fn invoke(&mut self, value: String, _: &SinkContext) -> Result<()> {
        self.out.lock().unwrap().push(value);
        Ok(())
    }
    async fn invoke_batch(&mut self, values: Vec<String>, _: &mut SinkContext) -> Result<()> {
        if std::mem::take(&mut self.dropping) {
            return Ok(());
        }
        self.out.lock().unwrap().extend(values);
        Ok(())
    }
}

struct BrokenContext {
    sink: Broken,
}

#[async_trait]
impl SinkExternal for BrokenContext {
    type Record = String;
    type Sink = Broken;

    async fn prepare(&mut self) -> Result<()> {
        self.sink.out = Arc::default();
        Ok(())
    }

    fn create_sink(&self, _: usize, _: usize, _: ErrorPolicy) -> Broken {
        self.sink.clone()
    }

    fn to_record(&self, test: &str) -> String {
        test.to_owned()
    }

    async fn read_back(&self) -> Result<Vec<String>> {
        Ok(self.sink.out.lock().unwrap().clone())
    }
}

fn broken(drop_after_restore: bool) -> SinkSuite<BrokenContext> {
    SinkSuite::new(BrokenContext {
        sink: Broken {
            drop_after_restore,
            ..Broken::default()
        },
    })
    .records_per_split(300)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sink_suite_catches_a_sink_that_commits_before_the_checkpoint() {
    let mut suite = broken(false);
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
    let f = suite.failure_in_snapshot(1).await.unwrap_err();
    assert_eq!(f.case, "sink::failure_in_snapshot");
    assert!(f.message.contains("duplicated records in split"), "{f}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sink_suite_catches_a_sink_that_loses_records_around_a_restore() {
    let mut suite = broken(true);
    suite
        .write_all(2)
        .await
        .expect("without restores it is right");
    for p in [1, 2] {
        let f = suite.failure_after_checkpoints(p).await.unwrap_err();
        assert_eq!(f.case, "sink::failure_after_checkpoints");
        assert!(f.message.starts_with(&format!("[parallelism {p}]")), "{f}");
        assert!(f.message.contains("missing records in split"), "{f}");
        assert!(f.message.contains("s"), "names the records: {f}");
    }
}

// ---- bad records ----

/// Rejects records that are not test records (`s<split>-<seq>`) through its error policy; with
/// `swallow`, drops them silently under the dead-letter policy (the broken variant).
#[derive(Clone, Default)]
struct Picky {
    sink: CollectingSink<String>,
    policy: ErrorPolicy,
    handler: Option<ErrorHandler>,
    swallow: bool,
}

#[async_trait]
impl RichFunction for Picky {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        self.handler = Some(ErrorHandler::new(self.policy.clone(), ctx.display_name()));
        self.sink.open(ctx).await
    }
}

#[async_trait]
impl CheckpointedFunction for Picky {
    type State = ();
    async fn snapshot_state(&mut self, id: u64) -> Result<()> {
        self.sink.snapshot_state(id).await
    }
}

#[async_trait]
impl CheckpointListener for Picky {}

#[async_trait]
impl SinkFunction<String> for Picky {
    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::AtLeastOnce
    }
    async fn invoke(&mut self, value: String, ctx: &SinkContext) -> Result<()> {
        if value.starts_with('s') {
            return self.sink.invoke(value, ctx).await;
        }
        if self.swallow && matches!(self.policy, ErrorPolicy::DeadLetter(_)) {
            return Ok(());
        }
        let handler = self.handler.as_ref().expect("opened");
        handler
            .handle("picky/0", "not a test record", value.as_bytes())
            .await
    }
}

struct PickyContext {
    picky: Picky,
}

#[async_trait]
impl SinkExternal for PickyContext {
    type Record = String;
    type Sink = Picky;

    async fn prepare(&mut self) -> Result<()> {
        self.picky.sink = CollectingSink::new();
        Ok(())
    }

    fn create_sink(&self, i: usize, _: usize, policy: ErrorPolicy) -> Picky {
        Picky {
            sink: self.picky.sink.for_subtask(i),
            policy,
            ..self.picky.clone()
        }
    }

    fn to_record(&self, test: &str) -> String {
        test.to_owned()
    }

    fn bad_record(&self) -> Option<String> {
        Some("{not a test record}".into())
    }

    async fn read_back(&self) -> Result<Vec<String>> {
        Ok(self.picky.sink.values())
    }
}

fn picky(swallow: bool) -> SinkSuite<PickyContext> {
    SinkSuite::new(PickyContext {
        picky: Picky {
            swallow,
            ..Picky::default()
        },
    })
    .records_per_split(50)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_records_go_through_every_policy() {
    picky(false).bad_records().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sink_that_drops_bad_records_instead_of_dead_lettering_them_is_rejected() {
    let f = picky(true).bad_records().await.unwrap_err();
    assert_eq!(f.case, "sink::bad_records");
    assert!(
        f.message
            .contains("policy `dead-letter`: 0 letters, expected 1"),
        "{f}"
    );
}
