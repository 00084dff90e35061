//! Restarts in the same process with a `Supervisor`: a job whose source fails twice ends with
//! every record exactly once; failures no restart can fix end the job at once; each strategy
//! gives up when it should; a stop during the wait before a restart ends the job.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rivus_sdk::prelude::*;
use rivus_sdk::RestartStatus;
use rivus_testkit::{TransactionalSink, TxnStore, VecSource};

fn splits(n: usize, per: usize) -> Arc<Vec<Vec<u64>>> {
    Arc::new(
        (0..n)
            .map(|s| (0..per).map(|i| (s * 1_000_000 + i) as u64).collect())
            .collect(),
    )
}

fn fixed(delay_ms: u64, max_attempts: u32) -> RestartStrategy {
    RestartStrategy::FixedDelay {
        delay: Duration::from_millis(delay_ms),
        max_attempts,
    }
}

/// The exactly-once job of `checkpoints.rs`; its first `kills.len()` attempts fail after
/// `kills[i]` records.
fn build(
    data: &Arc<Vec<Vec<u64>>>,
    backend: &MemoryStateBackend,
    store: &TxnStore<u64>,
    kills: &Arc<Vec<usize>>,
    attempts: &Arc<AtomicUsize>,
    strategy: Option<RestartStrategy>,
) -> Result<Job> {
    let attempt = attempts.fetch_add(1, Ordering::SeqCst);
    let kill = kills.get(attempt).copied();
    let emitted = Arc::new(AtomicUsize::new(0));
    let mut pipeline =
        Pipeline::new("restarts")
            .batch_size(16)
            .checkpointing(CheckpointConfig::new(
                Duration::from_millis(3),
                Arc::new(backend.clone()),
            ));
    if let Some(s) = strategy {
        pipeline = pipeline.restart_strategy(s);
    }
    let data = Arc::clone(data);
    pipeline
        .source("src", 2, move |i| {
            let s = VecSource::new(Arc::clone(&data), i, 2).paced(40, Duration::from_millis(1));
            match kill {
                Some(k) => s.fail_after(k, Arc::clone(&emitted)),
                None => s,
            }
        })
        .map(|v| v + 1)
        .key_by(|v| *v % 5, 2)
        .sink("sink", 2, |i| TransactionalSink::new(store.clone(), i))
}

#[tokio::test]
async fn two_failures_restart_from_checkpoints_and_end_exactly_once() {
    let data = splits(4, 500);
    let backend = MemoryStateBackend::new();
    let store = TxnStore::new();
    let kills = Arc::new(vec![600, 900]);
    let attempts = Arc::new(AtomicUsize::new(0));
    let supervisor = Supervisor::new(|| {
        let job = build(
            &data,
            &backend,
            &store,
            &kills,
            &attempts,
            Some(fixed(20, 5)),
        );
        async move { job }
    })
    .await
    .unwrap();
    let mut status = supervisor.restarts();
    let summary = supervisor.run().await.unwrap();
    assert_eq!(summary.restarts, 2, "{summary:?}");
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
    assert!(
        summary
            .last_failure
            .as_deref()
            .is_some_and(|f| f.contains("injected failure")),
        "{summary:?}"
    );
    assert!(
        summary.restored_from.is_none(),
        "the first attempt started fresh"
    );
    assert!(summary.checkpoints_completed > 0);
    let seen: RestartStatus = status.borrow_and_update().clone();
    assert_eq!(seen.restarts, 2);
    assert!(!seen.restarting);

    let mut got = store.committed();
    got.sort();
    let mut want: Vec<u64> = data.iter().flatten().map(|v| v + 1).collect();
    want.sort();
    assert_eq!(got.len(), want.len(), "records committed exactly once");
    assert_eq!(got, want);
    assert!(store.prepared().is_empty(), "no transaction left open");
}

/// A source that fails at once with `error()`.
struct Failing(fn() -> Error);

#[async_trait]
impl RichFunction for Failing {}

#[async_trait]
impl SourceFunction for Failing {
    type Out = u64;
    type State = ();
    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::ExactlyOnce
    }
    async fn run(&mut self, _ctx: &mut SourceContext<u64, ()>) -> Result<()> {
        Err((self.0)())
    }
}

async fn supervise_failing(
    error: fn() -> Error,
    strategy: Option<RestartStrategy>,
    checkpoints: bool,
) -> (Result<JobSummary>, usize) {
    let builds = Arc::new(AtomicUsize::new(0));
    let store: TxnStore<u64> = TxnStore::new();
    let backend = MemoryStateBackend::new();
    let supervisor = Supervisor::new(|| {
        builds.fetch_add(1, Ordering::SeqCst);
        let mut p = Pipeline::new("failing");
        if checkpoints {
            p = p.checkpointing(CheckpointConfig::new(
                Duration::from_millis(50),
                Arc::new(backend.clone()),
            ));
        }
        if let Some(s) = strategy.clone() {
            p = p.restart_strategy(s);
        }
        let job = p
            .source("src", 1, |_| Failing(error))
            .sink("sink", 1, |i| TransactionalSink::new(store.clone(), i));
        async move { job }
    })
    .await
    .unwrap();
    let result = supervisor.run().await;
    (result, builds.load(Ordering::SeqCst))
}

#[tokio::test]
async fn failures_a_restart_cannot_fix_end_the_job_at_once() {
    type Case = (&'static str, fn() -> Error);
    let cases: [Case; 3] = [
        ("config", || Error::config("source.topic", "no such topic")),
        ("refused", || {
            Error::refused("kafka: cannot use 127.0.0.1:9093", "authentication failed")
        }),
        ("record", || Error::Record {
            position: "t/0@7".into(),
            reason: "bad json".into(),
        }),
    ];
    for (name, error) in cases {
        let started = Instant::now();
        let (result, builds) = supervise_failing(error, Some(fixed(10, 100)), true).await;
        let err = result.unwrap_err();
        assert!(!err.is_retryable(), "{name}: {err}");
        assert_eq!(builds, 1, "{name}: no restart");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{name}: ended at once"
        );
    }
}

/// A source that panics at once.
struct Panicking;

#[async_trait]
impl RichFunction for Panicking {}

#[async_trait]
impl SourceFunction for Panicking {
    type Out = u64;
    type State = ();
    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::ExactlyOnce
    }
    async fn run(&mut self, _ctx: &mut SourceContext<u64, ()>) -> Result<()> {
        let parts: Vec<u64> = Vec::new();
        let _ = parts[3];
        Ok(())
    }
}

#[tokio::test]
async fn a_panic_is_reported_as_one_with_its_location_and_not_retried() {
    let builds = Arc::new(AtomicUsize::new(0));
    let store: TxnStore<u64> = TxnStore::new();
    let supervisor = Supervisor::new(|| {
        builds.fetch_add(1, Ordering::SeqCst);
        let job = Pipeline::new("panicking")
            .restart_strategy(fixed(10, 100))
            .source("src", 1, |_| Panicking)
            .sink("sink", 1, |i| TransactionalSink::new(store.clone(), i));
        async move { job }
    })
    .await
    .unwrap();
    let err = supervisor.run().await.unwrap_err();
    assert_eq!(builds.load(Ordering::SeqCst), 1, "no restart after a panic");
    let text = err.to_string();
    assert!(
        text.starts_with(
            "task `src -> sink` (subtask 0) failed: panicked at core/tests/restarts.rs:"
        ),
        "{text}"
    );
    assert!(text.contains("index out of bounds"), "{text}");
}

#[tokio::test]
async fn strategies_give_up() {
    let lost = || Error::connector("test server", "connection reset");
    let (result, builds) = supervise_failing(lost, Some(fixed(5, 2)), true).await;
    assert!(result.unwrap_err().to_string().contains("connection reset"));
    assert_eq!(builds, 3, "fixed delay: two restarts, then the error");

    let rate = RestartStrategy::FailureRate {
        max_failures: 3,
        interval: Duration::from_secs(60),
        delay: Duration::from_millis(5),
    };
    let (result, builds) = supervise_failing(lost, Some(rate), true).await;
    assert!(result.is_err());
    assert_eq!(
        builds, 4,
        "failure rate: three failures allowed in the window"
    );

    let (result, builds) = supervise_failing(lost, Some(RestartStrategy::None), true).await;
    assert!(result.is_err());
    assert_eq!(builds, 1, "none: no restart");

    // Without checkpoints the default is not to restart (a restart would replay everything).
    let (result, builds) = supervise_failing(lost, None, false).await;
    assert!(result.is_err());
    assert_eq!(builds, 1);
}

#[tokio::test]
async fn the_default_with_checkpoints_is_exponential_delay() {
    let job = Pipeline::new("d")
        .checkpointing(CheckpointConfig::new(
            Duration::from_secs(1),
            Arc::new(MemoryStateBackend::new()),
        ))
        .source("src", 1, |_| Failing(|| Error::Cancelled))
        .sink("sink", 1, |i| {
            TransactionalSink::<u64>::new(TxnStore::new(), i)
        })
        .unwrap();
    assert_eq!(
        job.restart_strategy(),
        &RestartStrategy::exponential_delay()
    );
}

#[tokio::test]
async fn a_stop_while_waiting_to_restart_ends_the_job() {
    let builds = Arc::new(AtomicU32::new(0));
    let store: TxnStore<u64> = TxnStore::new();
    let backend = MemoryStateBackend::new();
    let counted = Arc::clone(&builds);
    let supervisor = Supervisor::new(move || {
        counted.fetch_add(1, Ordering::SeqCst);
        let job = Pipeline::new("stop-wait")
            .checkpointing(CheckpointConfig::new(
                Duration::from_millis(50),
                Arc::new(backend.clone()),
            ))
            .restart_strategy(fixed(60_000, 10))
            .source("src", 1, |_| {
                Failing(|| Error::connector("test server", "connection reset"))
            })
            .sink("sink", 1, |i| TransactionalSink::new(store.clone(), i));
        async move { job }
    })
    .await
    .unwrap();
    let handle = supervisor.handle();
    let mut status = supervisor.restarts();
    let run = tokio::spawn(supervisor.run());
    status.wait_for(|s| s.restarting).await.unwrap();
    let started = Instant::now();
    handle.stop();
    let result = tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("the stop ends the wait")
        .unwrap();
    assert!(result.is_err(), "the failure is reported");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(builds.load(Ordering::SeqCst), 1, "no second attempt");
}
