//! Whole `rivus run` jobs for the CLI's benches: each run to its end, its wall and CPU time.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use rivus_testkit::services::unique_name;

pub(crate) fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU seconds (user + system) of the waited-for children so far.
fn children_cpu() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

/// Runs one pipeline file to its end: (wall seconds, CPU seconds).
pub(crate) fn run(dir: &Path, name: &str, body: &str) -> (f64, f64) {
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(&file, format!("name = \"{}\"\n{body}", unique_name(name))).unwrap();
    let cpu = children_cpu();
    let t = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["run", file.to_str().unwrap()])
        .current_dir(dir)
        .stdout(Stdio::null())
        .output()
        .unwrap();
    let wall = t.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (wall, children_cpu() - cpu)
}

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
