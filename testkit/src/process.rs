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
