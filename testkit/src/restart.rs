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
