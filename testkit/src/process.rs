//! Helpers for crash tests that run a job in a child process and kill it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The path of example `name` of `package`, as `cargo test` builds it next to the test
/// binaries (`target/<profile>/examples/<name>`); built with `cargo build --example` first when
/// a filtered test run did not build it, or built it before a workspace source last changed
/// (a stale example would test old code).
pub fn example_binary(package: &str, name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps");
    let path = dir.join("examples").join(name);
    let built = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
    let stale = match (built, workspace_sources_changed()) {
        (None, _) => true,
        (Some(built), Some(changed)) => changed > built,
        (Some(_), None) => false,
    };
    if stale {
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

/// When a Rust source or manifest of the workspace last changed: the newest modification time
/// under each member's `src`, `examples` and `Cargo.toml` (members are the directories with a manifest
/// next to the test's package or in the workspace's `examples`). `None` outside `cargo test`.
fn workspace_sources_changed() -> Option<std::time::SystemTime> {
    fn newest(p: &Path, acc: &mut Option<std::time::SystemTime>) {
        let Ok(meta) = std::fs::metadata(p) else {
            return;
        };
        if meta.is_dir() {
            for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
                newest(&e.path(), acc);
            }
        } else if let Ok(t) = meta.modified() {
            *acc = (*acc).max(Some(t));
        }
    }
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR")?);
    let root = manifest.parent()?;
    let mut acc = None;
    let nested = std::fs::read_dir(root.join("examples"))
        .into_iter()
        .flatten();
    for member in std::fs::read_dir(root)
        .ok()?
        .flatten()
        .chain(nested.flatten())
    {
        let m = member.path();
        if m.join("Cargo.toml").is_file() {
            for part in ["src", "examples", "Cargo.toml"] {
                newest(&m.join(part), &mut acc);
            }
        }
    }
    acc
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

/// Starts the job with `spawn` `kills` times and kills each run with SIGKILL once
/// `written()` (the records the destination holds) has grown by `step` since that run
/// started — mid-stream however fast or slow the job is, with no guessed delay. Returns how
/// many kills came mid-stream (the run had written something, and fewer than `total`). A run
/// that makes no progress within 60 s, or ends by itself, is not killed and not counted.
pub async fn kill_after_progress<F, Fut>(
    spawn: impl Fn() -> std::process::Child,
    kills: usize,
    step: usize,
    total: usize,
    mut written: F,
) -> usize
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = usize>,
{
    let mut mid_stream = 0;
    for _ in 0..kills {
        let before = written().await;
        let mut child = spawn();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let mut now = before;
        while child.try_wait().expect("checking the job").is_none()
            && now < before + step
            && std::time::Instant::now() < deadline
        {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            now = written().await;
        }
        let running = child.try_wait().expect("checking the job").is_none();
        if running {
            child.kill().expect("SIGKILL");
        }
        child.wait().expect("reaping the job");
        let n = written().await;
        mid_stream += (running && n > before && n < total) as usize;
    }
    mid_stream
}
