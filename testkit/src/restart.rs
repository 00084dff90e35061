//! Restarting a real service from a test (`dev/services down NAME` then `up NAME`), for the
//! "server restart mid-stream" cases. Put such a test alone in its own test file: cargo runs
//! test binaries one after another, so no other test sees the service go away.

use std::path::PathBuf;
use std::process::Command;

/// The `dev/services` script of this repository.
fn script() -> PathBuf {
    crate::services::repository().join("dev/services")
}

fn run(args: &[&str]) {
    let out = Command::new("bash")
        .arg(script())
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running dev/services {args:?}: {e}"));
    assert!(
        out.status.success(),
        "dev/services {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Stops the service `name` (as `dev/services` knows it: `kafka`, `elasticsearch`, ...).
pub fn stop(name: &str) {
    run(&["down", name]);
}

/// Starts the service `name` and waits until it answers.
pub fn start(name: &str) {
    run(&["up", name]);
}

/// Stops the service `name`, keeps it down for `down`, and starts it again (waiting until it
/// answers) — from async code, without blocking the runtime's threads.
pub async fn bounce(name: &'static str, down: std::time::Duration) {
    tokio::task::spawn_blocking(move || stop(name))
        .await
        .expect("stopping the service");
    tokio::time::sleep(down).await;
    tokio::task::spawn_blocking(move || start(name))
        .await
        .expect("starting the service");
}

/// The retries a sink in a restart test is given: exponential from 100 ms to 1 s, 120 times
/// (enough to ride out a service restart).
pub fn outage_backoff() -> rivus_sdk::backoff::BackoffPolicy {
    rivus_sdk::backoff::BackoffPolicy::Exponential {
        initial: std::time::Duration::from_millis(100),
        max_delay: std::time::Duration::from_secs(1),
        max_retries: 120,
    }
}

/// A job writing 0, 1, 2, ... without end into the sink `sink(0)`, checkpointed every 500 ms
/// with a checkpoint timeout long enough to ride out an outage; `emitted` counts what the
/// source emitted. Stop it with its handle.
pub fn sequence_job<S, F>(
    name: &str,
    emitted: std::sync::Arc<std::sync::atomic::AtomicU64>,
    sink: F,
) -> rivus_sdk::Result<rivus_sdk::Job>
where
    S: rivus_sdk::SinkFunction<u64> + 'static,
    F: Fn(usize) -> S,
{
    use rivus_sdk::checkpoint::{CheckpointConfig, MemoryStateBackend};
    use std::time::Duration;
    rivus_sdk::Pipeline::new(name)
        .checkpointing(
            CheckpointConfig::new(
                Duration::from_millis(500),
                std::sync::Arc::new(MemoryStateBackend::new()),
            )
            .with_timeout(Duration::from_secs(300)),
        )
        .source("seq", 1, |i| {
            crate::SequenceSource::new(i, 1, None, std::sync::Arc::clone(&emitted))
        })
        .sink("sink", 1, sink)
}

/// What [`sink_restart_mid_stream`] saw: how many records the system held when the service was
/// stopped and once it answered again, and the job's summary.
#[derive(Debug)]
pub struct RestartReport {
    /// Distinct records held just before the stop.
    pub before_stop: u64,
    /// Distinct records held once the service answered again.
    pub after_restart: u64,
    /// The job's summary (stopped by the test).
    pub summary: rivus_sdk::JobSummary,
}

/// The "service restart mid-stream loses nothing" case for a sink, in one call: a
/// [`sequence_job`] writes 0, 1, 2, ... into `sink`; once the system holds `step` records,
/// the service `service` (as `dev/services` names it) is stopped for 2 s and started again;
/// the job must ride it out (it is still running once `step` more records arrived), and after
/// a graceful stop the system must hold every emitted record exactly once.
///
/// `held` counts the distinct records the system holds (ids are the sequence numbers, so a
/// replay overwrites and a loss shows). Put the test alone in its own file (see the module doc).
pub async fn sink_restart_mid_stream<S, H, Fut>(
    service: &'static str,
    sink: S,
    step: u64,
    held: H,
) -> RestartReport
where
    S: rivus_sdk::SinkFunction<u64> + Clone + 'static,
    H: Fn() -> Fut,
    Fut: std::future::Future<Output = u64>,
{
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    let emitted = Arc::new(AtomicU64::new(0));
    let job = sequence_job(&format!("{service}-restart"), Arc::clone(&emitted), |_| {
        sink.clone()
    })
    .expect("building the restart job");
    let handle = job.handle();
    let mut running = tokio::spawn(job.run());
    let mut wait_for = async |n: u64| {
        let deadline = Instant::now() + Duration::from_secs(180);
        while held().await < n {
            if running.is_finished() {
                panic!("the job ended: {:?}", (&mut running).await);
            }
            assert!(Instant::now() < deadline, "fewer than {n} records arrived");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    wait_for(step).await;
    let before_stop = held().await;
    bounce(service, Duration::from_secs(2)).await;
    let after_restart = held().await;
    wait_for(after_restart + step).await;
    assert!(
        !running.is_finished(),
        "the job kept running through the restart"
    );
    handle.stop();
    let summary = running
        .await
        .expect("the job task")
        .expect("the job ended without an error");
    let n = summary.records_read;
    assert_eq!(
        emitted.load(Ordering::Relaxed),
        n,
        "the source emitted what the job read"
    );
    assert_eq!(
        held().await,
        n,
        "all {n} emitted records arrived, once each"
    );
    RestartReport {
        before_stop,
        after_restart,
        summary,
    }
}
