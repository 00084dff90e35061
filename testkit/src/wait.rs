//! Waiting in tests for something another task or a server does: poll a condition until it
//! holds, with a deadline that fails the test and says what never happened — never a bare
//! sleep hoping it is long enough.

use std::future::Future;
use std::time::{Duration, Instant};

/// Polls `check` every 50 ms until it returns true; panics with `what()` once `timeout` has
/// passed (the message is built then, so it can report the latest state).
pub async fn until<F, Fut, M>(timeout: Duration, mut check: F, what: impl Fn() -> M)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
    M: std::fmt::Display,
{
    let deadline = Instant::now() + timeout;
    while !check().await {
        assert!(Instant::now() < deadline, "{}", what());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls `counter` every 50 ms until it has not moved for ten polls in a row (half a
/// second): what it holds then — how far a source got before back-pressure stopped it.
/// Panics once `timeout` has passed with the counter still moving.
pub async fn until_still(counter: &std::sync::atomic::AtomicU64, timeout: Duration) -> u64 {
    let deadline = Instant::now() + timeout;
    let (mut last, mut still) = (u64::MAX, 0);
    while still < 10 {
        assert!(
            Instant::now() < deadline,
            "the counter kept moving for {timeout:?} (at {last})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = counter.load(std::sync::atomic::Ordering::Relaxed);
        still = if now == last { still + 1 } else { 0 };
        last = now;
    }
    last
}

/// Runs `job` until `ready()` holds, then cancels it — no final checkpoint: what a crash
/// leaves, in process. Panics when the job ends first, or with `what()` when `ready` does not
/// hold within a minute.
pub async fn cancel_when<M: std::fmt::Display>(
    job: rivus_sdk::prelude::Job,
    ready: impl Fn() -> bool,
    what: impl Fn() -> M,
) {
    let handle = job.handle();
    let running = tokio::spawn(job.run());
    until(
        Duration::from_secs(60),
        || async { ready() || running.is_finished() },
        what,
    )
    .await;
    assert!(
        !running.is_finished(),
        "the job ended early: {:?}",
        running.await
    );
    handle.cancel();
    let _ = running.await.unwrap();
}

/// [`cancel_when`] `counter` (records emitted, say) reaches `at`.
pub async fn cancel_at(
    job: rivus_sdk::prelude::Job,
    counter: &std::sync::atomic::AtomicU64,
    at: u64,
) {
    use std::sync::atomic::Ordering;
    cancel_when(
        job,
        || counter.load(Ordering::Relaxed) >= at,
        || format!("{} counted, never {at}", counter.load(Ordering::Relaxed)),
    )
    .await;
}

/// Runs the job `job` makes once per cut, cancelling each when the counter it was given
/// (records emitted, say) reaches the cut, then once to its end: the last run's summary, which
/// must have restored from a checkpoint of the runs before. The shape of every test that
/// cuts a job short and checks that what it wrote comes out exactly once.
pub async fn cut_then_finish(
    cuts: &[u64],
    job: impl Fn(std::sync::Arc<std::sync::atomic::AtomicU64>) -> rivus_sdk::prelude::Job,
) -> rivus_sdk::JobSummary {
    for &at in cuts {
        let emitted = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        cancel_at(job(emitted.clone()), &emitted, at).await;
    }
    let summary = job(Default::default()).run().await.unwrap();
    assert!(
        summary.restored_from.is_some(),
        "the last run restored from a checkpoint of the cut ones"
    );
    summary
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn returns_once_the_condition_holds() {
        let n = AtomicUsize::new(0);
        until(
            Duration::from_secs(5),
            || async { n.fetch_add(1, Ordering::Relaxed) >= 2 },
            || "never",
        )
        .await;
        assert_eq!(n.load(Ordering::Relaxed), 3);
    }

    #[tokio::test]
    #[should_panic(expected = "still 0")]
    async fn fails_with_the_message_after_the_deadline() {
        until(Duration::from_millis(120), || async { false }, || "still 0").await;
    }
}
