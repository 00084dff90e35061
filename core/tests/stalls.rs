//! Stalls: a job whose sink waits forever in a call is reported stalled with the stage and
//! the call it waits in; with a stall timeout the attempt fails and the supervisor restarts
//! it, the next attempt finishing the input; without one the stall is only reported.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rivus_sdk::prelude::*;
use rivus_testkit::VecSource;

/// Keeps what it gets; on the first attempt it waits forever, marked as a server call, once
/// it has 100 records.
struct HangingSink {
    got: Arc<Mutex<Vec<u64>>>,
    hang: Arc<AtomicBool>,
}

#[async_trait]
impl RichFunction for HangingSink {}
#[async_trait]
impl CheckpointedFunction for HangingSink {
    type State = ();
    async fn snapshot_state(&mut self, _: u64) -> Result<()> {
        Ok(())
    }
}
#[async_trait]
impl CheckpointListener for HangingSink {}

#[async_trait]
impl SinkFunction<u64> for HangingSink {
    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::AtLeastOnce
    }
    async fn invoke(&mut self, v: u64, _: &SinkContext) -> Result<()> {
        let n = {
            let mut got = self.got.lock();
            got.push(v);
            got.len()
        };
        if n >= 100 && self.hang.swap(false, Ordering::SeqCst) {
            let _w = rivus_sdk::activity::waiting("test server: write");
            std::future::pending::<()>().await;
        }
        Ok(())
    }
}

fn job(
    got: &Arc<Mutex<Vec<u64>>>,
    hang: &Arc<AtomicBool>,
    timeout: Option<Duration>,
) -> Result<Job> {
    let data: Arc<Vec<Vec<u64>>> = Arc::new(vec![(0..2000).collect()]);
    let mut p = Pipeline::new("stalling")
        .batch_size(10)
        .checkpointing(CheckpointConfig::new(
            Duration::from_millis(50),
            Arc::new(MemoryStateBackend::new()),
        ))
        .restart_strategy(RestartStrategy::FixedDelay {
            delay: Duration::from_millis(10),
            max_attempts: 3,
        })
        .stall_threshold(Duration::from_millis(400));
    if let Some(t) = timeout {
        p = p.stall_timeout(t);
    }
    let (got, hang) = (Arc::clone(got), Arc::clone(hang));
    p.source("src", 1, move |i| {
        VecSource::new(Arc::clone(&data), i, 1).paced(50, Duration::from_millis(1))
    })
    .sink("sink", 1, move |_| HangingSink {
        got: Arc::clone(&got),
        hang: Arc::clone(&hang),
    })
}

#[tokio::test]
async fn a_stall_names_the_stage_and_call_and_the_timeout_restarts_the_job() {
    let got = Arc::new(Mutex::new(Vec::new()));
    let hang = Arc::new(AtomicBool::new(true));
    let builds = Arc::new(AtomicUsize::new(0));
    let (g, h, b) = (Arc::clone(&got), Arc::clone(&hang), Arc::clone(&builds));
    let supervisor = Supervisor::new(move || {
        b.fetch_add(1, Ordering::SeqCst);
        let j = job(&g, &h, Some(Duration::from_millis(1500)));
        async move { j }
    })
    .await
    .unwrap();
    let mut stalls = supervisor.stalls();
    let running = tokio::spawn(supervisor.run());
    let stall = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            stalls.changed().await.unwrap();
            if let Some(s) = stalls.borrow_and_update().clone() {
                return s;
            }
        }
    })
    .await
    .expect("reported stalled within 10 s");
    let waiting = stall.waiting.clone().expect("the call it waits in");
    assert_eq!(waiting.task, "src -> sink");
    assert_eq!(waiting.subtask, 0);
    assert_eq!(waiting.call, "invoke › test server: write");
    assert!(
        stall.since_progress >= Duration::from_millis(400),
        "{stall:?}"
    );
    let summary = tokio::time::timeout(Duration::from_secs(20), running)
        .await
        .expect("the restarted job ends")
        .unwrap()
        .unwrap();
    assert_eq!(builds.load(Ordering::SeqCst), 2, "one restart");
    assert_eq!(summary.restarts, 1);
    assert!(
        summary
            .last_failure
            .as_deref()
            .is_some_and(|f| f.starts_with("stalled: no progress for 2s")
                || f.starts_with("stalled: no progress for 1s")),
        "{:?}",
        summary.last_failure
    );
    let mut seen = got.lock().clone();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(
        seen,
        (0..2000).collect::<Vec<u64>>(),
        "every record at least once"
    );
}

#[tokio::test]
async fn without_a_timeout_a_stall_is_reported_and_the_job_keeps_waiting() {
    let got = Arc::new(Mutex::new(Vec::new()));
    let hang = Arc::new(AtomicBool::new(true));
    let job = job(&got, &hang, None).unwrap();
    let mut stalls = job.stalls();
    let handle = job.handle();
    let running = tokio::spawn(job.run());
    let stall = tokio::time::timeout(Duration::from_secs(10), stalls.wait_for(|s| s.is_some()))
        .await
        .expect("reported stalled")
        .unwrap()
        .clone()
        .unwrap();
    assert!(
        stall.to_string().contains("in invoke › test server: write"),
        "{stall}"
    );
    // Still stalled well past the threshold: nothing fails the attempt.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(stalls.borrow().is_some(), "still reported");
    assert!(!running.is_finished(), "no stall timeout: the job waits");
    handle.cancel();
    let err = tokio::time::timeout(Duration::from_secs(5), running)
        .await
        .expect("a hard stop ends it")
        .unwrap()
        .unwrap_err();
    assert!(err.is_cancelled(), "{err}");
}

#[test]
fn a_timeout_shorter_than_the_threshold_is_refused() {
    let err = Pipeline::new("x")
        .stall_threshold(Duration::from_secs(60))
        .stall_timeout(Duration::from_secs(10))
        .source("src", 1, |i| {
            VecSource::new(Arc::new(vec![vec![1u64]]), i, 1)
        })
        .sink("sink", 1, |_| HangingSink {
            got: Arc::default(),
            hang: Arc::default(),
        })
        .unwrap_err();
    assert!(
        err.to_string().contains("`pipeline.stall_timeout`"),
        "{err}"
    );
}
