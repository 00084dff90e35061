//! Restarting a real service from a test (`dev/services down NAME` then `up NAME`), for the
//! "server restart mid-stream" cases. Put such a test alone in its own test file: cargo runs
//! test binaries one after another, so no other test sees the service go away.

use std::path::PathBuf;
use std::process::Command;

/// The `dev/services` script of this repository.
fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../dev/services")
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
pub fn outage_backoff() -> rivus_core::backoff::BackoffPolicy {
    rivus_core::backoff::BackoffPolicy::Exponential {
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
) -> rivus_core::Result<rivus_core::Job>
where
    S: rivus_core::SinkFunction<u64> + 'static,
    F: Fn(usize) -> S,
{
    use rivus_core::checkpoint::{CheckpointConfig, MemoryStateBackend};
    use std::time::Duration;
    rivus_core::Pipeline::new(name)
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
