//! Lifecycle order: open before any record, finish at end of input, close exactly once — also
//! after an error.

use std::sync::Arc;
use std::time::Duration;

use rivus_sdk::prelude::*;
use rivus_testkit::{CollectingSink, VecSource};

fn splits(n: usize, per: usize) -> Arc<Vec<Vec<u64>>> {
    Arc::new(
        (0..n)
            .map(|s| (0..per).map(|i| (s * 1_000_000 + i) as u64).collect())
            .collect(),
    )
}

fn count(log: &[String], entry: &str) -> usize {
    log.iter().filter(|e| *e == entry).count()
}

#[tokio::test]
async fn open_invoke_finish_close_in_order() {
    let data = splits(2, 100);
    let sink = CollectingSink::<u64>::new();
    let backend = MemoryStateBackend::new();
    let job = Pipeline::new("lifecycle")
        .checkpointing(CheckpointConfig::new(
            Duration::from_millis(5),
            Arc::new(backend.clone()),
        ))
        .source("src", 2, |i| VecSource::new(Arc::clone(&data), i, 2))
        .map(|v| v * 2)
        .sink("sink", 2, |i| sink.for_subtask(i))
        .unwrap();
    assert_eq!(job.delivery_guarantee(), DeliveryGuarantee::AtLeastOnce);
    let summary = job.run().await.unwrap();
    assert!(
        summary.checkpoints_completed >= 1,
        "the final checkpoint completes"
    );

    let mut got = sink.values();
    got.sort();
    let mut want: Vec<u64> = data.iter().flatten().map(|v| v * 2).collect();
    want.sort();
    assert_eq!(got, want);

    let log = sink.log();
    for i in 0..2 {
        let pos = |e: &str| log.iter().position(|x| x == e);
        let open = pos(&format!("open[{i}]")).expect("opened");
        let first_invoke = pos(&format!("invoke[{i}]")).expect("invoked");
        let finish = pos(&format!("finish[{i}]")).expect("finished");
        let close = pos(&format!("close[{i}]")).expect("closed");
        assert!(
            open < first_invoke && first_invoke < finish && finish < close,
            "{log:?}"
        );
        assert_eq!(count(&log, &format!("open[{i}]")), 1);
        assert_eq!(count(&log, &format!("close[{i}]")), 1);
        let last = summary.last_checkpoint.unwrap();
        // The final checkpoint is snapshotted and completed before the sink is finished.
        let snap = pos(&format!("snapshot[{i}] {last}")).expect("final snapshot");
        let done = pos(&format!("complete[{i}] {last}")).expect("final complete");
        assert!(snap < done && done < finish, "{log:?}");
    }
}

/// A failing source closes its channels; the sinks must not take that for the end of their
/// input (and finish — a transactional sink would commit what no checkpoint covers). Twenty
/// runs, as the job's cancellation and the closed channels race.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_upstream_is_not_the_end_of_the_input() {
    for run in 0..20 {
        let data = splits(2, 1000);
        let sink = CollectingSink::<u64>::new();
        let emitted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let job = Pipeline::new("upstream-fails")
            .batch_size(16)
            .source("src", 2, |i| {
                VecSource::new(Arc::clone(&data), i, 2).fail_after(300, Arc::clone(&emitted))
            })
            .key_by(|v| *v, 3)
            .sink("sink", 3, |i| sink.for_subtask(i))
            .unwrap();
        let err = job.run().await.unwrap_err();
        assert!(
            !err.is_cancelled(),
            "run {run}: the root cause is reported: {err}"
        );
        let log = sink.log();
        for i in 0..3 {
            assert_eq!(count(&log, &format!("close[{i}]")), 1, "run {run}: {log:?}");
            assert_eq!(
                count(&log, &format!("finish[{i}]")),
                0,
                "run {run}: sink {i} finished although its upstream failed: {log:?}"
            );
        }
    }
}

#[tokio::test]
async fn close_exactly_once_after_error_and_error_names_task() {
    let data = splits(2, 1000);
    let sink = CollectingSink::<u64>::new();
    sink.control().fail_at(500);
    let job = Pipeline::new("failing")
        .batch_size(64)
        .source("src", 2, |i| VecSource::new(Arc::clone(&data), i, 2))
        .key_by(|v| *v, 3)
        .sink("sink", 3, |i| sink.for_subtask(i))
        .unwrap();
    let err = job.run().await.unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("injected failure"), "{msg}");
    assert!(
        msg.contains("-> sink`"),
        "the error names the failing task: {msg}"
    );
    let log = sink.log();
    for i in 0..3 {
        assert_eq!(count(&log, &format!("open[{i}]")), 1, "{log:?}");
        assert_eq!(count(&log, &format!("close[{i}]")), 1, "{log:?}");
        assert_eq!(
            count(&log, &format!("finish[{i}]")),
            0,
            "no finish after a failure"
        );
    }
}

#[tokio::test]
async fn bad_configuration_is_refused_with_its_path() {
    let data = splits(1, 1);
    let err = Pipeline::new("bad")
        .batch_size(0)
        .source("src", 1, |i| VecSource::new(Arc::clone(&data), i, 1))
        .sink("sink", 1, |_| CollectingSink::<u64>::new())
        .unwrap_err();
    assert!(err.to_string().contains("pipeline.batch_size"), "{err}");

    let err = Pipeline::new("dup")
        .source("x", 1, |i| VecSource::new(Arc::clone(&data), i, 1))
        .sink("x", 1, |_| CollectingSink::<u64>::new())
        .unwrap_err();
    assert!(err.to_string().contains("used twice"), "{err}");

    let err = Pipeline::new("zero")
        .source("src", 0, |i| VecSource::new(Arc::clone(&data), i, 1))
        .sink("sink", 1, |_| CollectingSink::<u64>::new())
        .unwrap_err();
    assert!(err.to_string().contains("src.parallelism"), "{err}");
}

/// Opens only once its partner opens too: a source and a sink that meet at one barrier.
struct Meeting(Arc<tokio::sync::Barrier>);

impl Meeting {
    async fn meet(&self, who: &str) -> Result<()> {
        tokio::time::timeout(Duration::from_secs(10), self.0.wait())
            .await
            .map_err(|_| Error::connector(who, "its partner never opened beside it"))?;
        Ok(())
    }
}

struct MeetingSource(Meeting);

#[async_trait]
impl RichFunction for MeetingSource {
    async fn open(&mut self, _: &RuntimeContext) -> Result<()> {
        self.0.meet("source").await
    }
}

#[async_trait]
impl SourceFunction for MeetingSource {
    type Out = u64;
    type State = ();

    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::AtLeastOnce
    }

    async fn run(&mut self, ctx: &mut SourceContext<u64, ()>) -> Result<()> {
        for v in 0..3 {
            ctx.collect(v).await?;
        }
        Ok(())
    }
}

struct MeetingSink(Meeting, Arc<std::sync::atomic::AtomicU64>);

#[async_trait]
impl RichFunction for MeetingSink {
    async fn open(&mut self, _: &RuntimeContext) -> Result<()> {
        self.0.meet("sink").await
    }
}

#[async_trait]
impl CheckpointedFunction for MeetingSink {
    type State = ();

    async fn snapshot_state(&mut self, _: u64) -> Result<()> {
        Ok(())
    }
}

#[async_trait]
impl CheckpointListener for MeetingSink {}

#[async_trait]
impl SinkFunction<u64> for MeetingSink {
    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::AtLeastOnce
    }

    async fn invoke(&mut self, _: u64, _: &SinkContext) -> Result<()> {
        self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }
}

/// A source and its chained sink open side by side (a subtask's start costs the slower of the
/// two opens, not their sum); one after the other, neither would ever open here.
#[tokio::test]
async fn a_source_and_its_chained_sink_open_side_by_side() {
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let written = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (b, w) = (Arc::clone(&barrier), Arc::clone(&written));
    let job = Pipeline::new("side-by-side")
        .source("src", 1, move |_| {
            MeetingSource(Meeting(Arc::clone(&barrier)))
        })
        .sink("sink", 1, move |_| {
            MeetingSink(Meeting(Arc::clone(&b)), Arc::clone(&w))
        })
        .unwrap();
    job.run().await.unwrap();
    assert_eq!(written.load(std::sync::atomic::Ordering::SeqCst), 3);
}
