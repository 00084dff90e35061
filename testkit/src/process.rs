//! Helpers for crash tests that run a job in a child process and kill it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The path of example `name` of `package`, as `cargo test` builds it next to the test
/// binaries (`target/<profile>/examples/<name>`); built with `cargo build --example` first when
/// a filtered test run did not build it.
pub fn example_binary(package: &str, name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps");
    let path = dir.join("examples").join(name);
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let ok = Command::new(cargo)
            .args(["build", "-p", package, "--example", name])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "building example {name} of {package}");
    }
    path
}

/// Every line of every file in `dir` (empty when it does not exist).
pub fn lines_in(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return vec![];
    };
    entries
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
        .flat_map(|t| t.lines().map(str::to_owned).collect::<Vec<_>>())
        .collect()
}

/// Starts the job with `spawn` once per entry of `waits`, lets it run that long, checks it is
/// still running and kills it with SIGKILL. After each kill `written()` says how many records
/// the destination holds; returns how many kills came mid-stream (some written, fewer than
/// `total`).
pub async fn kill_repeatedly<F, Fut>(
    spawn: impl Fn() -> std::process::Child,
    waits: &[std::time::Duration],
    total: usize,
    mut written: F,
) -> usize
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = usize>,
{
    let mut mid_stream = 0;
    for wait in waits {
        let mut child = spawn();
        tokio::time::sleep(*wait).await;
        assert!(
            child.try_wait().expect("checking the job").is_none(),
            "the job was still running"
        );
        child.kill().expect("SIGKILL");
        child.wait().expect("reaping the job");
        let n = written().await;
        mid_stream += (n > 0 && n < total) as usize;
    }
    mid_stream
}
