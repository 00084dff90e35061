//! BulkProcessor: each flush trigger, bounded in-flight bulks, retries with backoff, flush
//! waiting for in-flight bulks, and failure surfacing.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rivus_sdk::backoff::BackoffPolicy;
use rivus_sdk::bulk::{BulkConfig, BulkListener, BulkProcessor, BulkSender, SendOutcome};
use rivus_sdk::{async_trait, Error};
use tokio::sync::Semaphore;

/// Records every bulk; can hold bulks, reject items retryably, or fail.
#[derive(Default, Clone)]
struct Recorder {
    bulks: Arc<Mutex<Vec<Vec<u32>>>>,
    in_flight: Arc<AtomicUsize>,
    max_in_flight: Arc<AtomicUsize>,
    gate: Option<Arc<Semaphore>>,
    reject_odd_times: Arc<AtomicUsize>,
    fail: bool,
}

#[async_trait]
impl BulkSender<u32> for Recorder {
    async fn send(&self, items: Vec<u32>) -> SendOutcome<u32> {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        if let Some(g) = &self.gate {
            g.acquire().await.unwrap().forget();
        }
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        if self.fail {
            return SendOutcome::Failed(Error::connector("test sender", "mapping error"));
        }
        // Items rejected with "429" while the counter lasts: odd items come back for retry.
        if self.reject_odd_times.load(Ordering::SeqCst) > 0 {
            self.reject_odd_times.fetch_sub(1, Ordering::SeqCst);
            let (odd, even): (Vec<u32>, Vec<u32>) = items.into_iter().partition(|v| v % 2 == 1);
            self.bulks.lock().unwrap().push(even);
            return SendOutcome::Retry {
                items: odd,
                reason: "429 es_rejected_execution_exception".into(),
            };
        }
        self.bulks.lock().unwrap().push(items);
        SendOutcome::Done
    }
}

impl Recorder {
    fn bulks(&self) -> Vec<Vec<u32>> {
        self.bulks.lock().unwrap().clone()
    }
}

fn config(max_actions: usize, max_bytes: usize, interval: Option<Duration>) -> BulkConfig {
    BulkConfig {
        max_actions,
        max_bytes,
        flush_interval: interval,
        concurrent_requests: 1,
        backoff: BackoffPolicy::Constant {
            delay: Duration::from_millis(10),
            max_retries: 3,
        },
    }
}

#[tokio::test]
async fn flushes_on_max_actions() {
    let rec = Recorder::default();
    let bp = BulkProcessor::new("t", config(3, 0, None), rec.clone()).unwrap();
    for i in 0..7 {
        bp.add(i).await.unwrap();
    }
    assert_eq!(bp.buffered(), 1);
    bp.flush().await.unwrap();
    assert_eq!(rec.bulks(), vec![vec![0, 1, 2], vec![3, 4, 5], vec![6]]);
}

#[tokio::test]
async fn flushes_on_max_bytes() {
    let rec = Recorder::default();
    let bp = BulkProcessor::with_parts(
        "t",
        config(0, 100, None),
        Arc::new(rec.clone()),
        Arc::new(rivus_sdk::bulk::NoopListener),
        Arc::new(|_: &u32| 40),
    )
    .unwrap();
    for i in 0..6 {
        bp.add(i).await.unwrap();
    }
    bp.flush().await.unwrap();
    // 40 bytes each: the third item reaches 120 >= 100.
    assert_eq!(rec.bulks(), vec![vec![0, 1, 2], vec![3, 4, 5]]);
}

#[tokio::test(start_paused = true)]
async fn flushes_on_the_timer() {
    let rec = Recorder::default();
    let bp = BulkProcessor::new(
        "t",
        config(1000, 0, Some(Duration::from_millis(100))),
        rec.clone(),
    )
    .unwrap();
    bp.add(1).await.unwrap();
    bp.add(2).await.unwrap();
    assert!(rec.bulks().is_empty());
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(
        rec.bulks(),
        vec![vec![1, 2]],
        "sent by the timer without a flush call"
    );
}

#[tokio::test]
async fn retries_rejected_items_with_backoff_and_loses_none() {
    let rec = Recorder::default();
    rec.reject_odd_times.store(2, Ordering::SeqCst);
    #[derive(Default)]
    struct Retries(AtomicUsize);
    impl BulkListener for Retries {
        fn after_bulk(&self, _: u64, _: usize, retries: u32, error: Option<&Error>) {
            assert!(error.is_none());
            self.0.fetch_add(retries as usize, Ordering::SeqCst);
        }
    }
    let listener = Arc::new(Retries::default());
    let bp = BulkProcessor::with_parts(
        "t",
        config(10, 0, None),
        Arc::new(rec.clone()),
        listener.clone(),
        Arc::new(|_: &u32| 0),
    )
    .unwrap();
    for i in 0..10 {
        bp.add(i).await.unwrap();
    }
    bp.flush().await.unwrap();
    let mut all: Vec<u32> = rec.bulks().into_iter().flatten().collect();
    all.sort();
    assert_eq!(all, (0..10).collect::<Vec<_>>());
    assert_eq!(listener.0.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn gives_up_after_max_retries_and_surfaces_the_error() {
    let rec = Recorder::default();
    rec.reject_odd_times.store(100, Ordering::SeqCst);
    let bp = BulkProcessor::new("es-sink", config(4, 0, None), rec.clone()).unwrap();
    for i in 0..4 {
        bp.add(i).await.unwrap();
    }
    let err = bp.flush().await.unwrap_err().to_string();
    assert!(
        err.contains("es-sink") && err.contains("after 3 retries") && err.contains("429"),
        "{err}"
    );
    // Later calls keep failing rather than pretending all is well.
    assert!(bp.add(9).await.is_err());
}

#[tokio::test]
async fn permanent_failure_is_surfaced_on_the_next_call() {
    let rec = Recorder {
        fail: true,
        ..Default::default()
    };
    let bp = BulkProcessor::new("t", config(2, 0, None), rec).unwrap();
    bp.add(1).await.unwrap();
    bp.add(2).await.unwrap(); // dispatches the failing bulk
    let err = loop {
        // The failure happens asynchronously; the next add or flush must report it.
        match bp.flush().await {
            Err(e) => break e,
            Ok(()) => tokio::task::yield_now().await,
        }
    };
    assert!(err.to_string().contains("mapping error"), "{err}");
}

#[tokio::test]
async fn bounded_in_flight_and_flush_waits_for_in_flight() {
    let gate = Arc::new(Semaphore::new(0));
    let rec = Recorder {
        gate: Some(Arc::clone(&gate)),
        ..Default::default()
    };
    let mut cfg = config(1, 0, None);
    cfg.concurrent_requests = 2;
    let bp = Arc::new(BulkProcessor::new("t", cfg, rec.clone()).unwrap());
    bp.add(1).await.unwrap();
    bp.add(2).await.unwrap();
    // A third add must wait: two bulks are in flight and held by the gate.
    let third = {
        let bp = Arc::clone(&bp);
        tokio::spawn(async move { bp.add(3).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!third.is_finished(), "add waits for a free slot");
    assert_eq!(bp.in_flight(), 2);
    let flushing = {
        let bp = Arc::clone(&bp);
        tokio::spawn(async move { bp.flush().await })
    };
    gate.add_permits(2);
    third.await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(
        !flushing.is_finished(),
        "flush waits while bulk 3 is in flight"
    );
    gate.add_permits(1);
    flushing.await.unwrap().unwrap();
    assert_eq!(bp.in_flight(), 0);
    assert_eq!(rec.bulks().concat(), vec![1, 2, 3]);
    assert_eq!(rec.max_in_flight.load(Ordering::SeqCst), 2);
}

/// Waits (at most 5 s) until `done`.
async fn wait_for(what: &str, done: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting: {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A sender that ends its bulk while the buffer is full takes the next bulk itself: the bulk
/// leaves even if the task adding requests is not running (here: its `add` is never polled
/// again until the end).
#[tokio::test]
async fn a_finished_sender_takes_the_next_full_bulk() {
    let gate = Arc::new(Semaphore::new(0));
    let rec = Recorder {
        gate: Some(Arc::clone(&gate)),
        ..Default::default()
    };
    let bp = BulkProcessor::new("t", config(2, 0, None), rec.clone()).unwrap();
    bp.add_all([1, 2, 3]).await.unwrap();
    wait_for("[1, 2] being sent", || {
        rec.in_flight.load(Ordering::SeqCst) == 1
    })
    .await;
    let mut fourth = std::pin::pin!(bp.add(4));
    assert!(
        futures::poll!(fourth.as_mut()).is_pending(),
        "the buffer is full and the only slot is taken"
    );
    gate.add_permits(1);
    wait_for("[3, 4] sent by the sender of [1, 2]", || {
        rec.bulks().len() == 1 && rec.in_flight.load(Ordering::SeqCst) == 1
    })
    .await;
    assert_eq!(bp.buffered(), 0, "the sender took [3, 4] from the buffer");
    gate.add_permits(1);
    fourth.await.unwrap();
    bp.add(5).await.unwrap();
    gate.add_permits(1);
    bp.flush().await.unwrap();
    assert_eq!(rec.bulks(), vec![vec![1, 2], vec![3, 4], vec![5]]);
    assert_eq!(rec.max_in_flight.load(Ordering::SeqCst), 1);
}

#[test]
fn unbounded_config_is_refused() {
    let err = config(0, 0, None).validate().unwrap_err();
    assert!(err.to_string().contains("`bulk.max_actions`"), "{err}");
}
