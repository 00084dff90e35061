//! The frozen-broker runs: a `rivus run` job (an unbounded generator, 10 000 records/s on each
//! of 2 subtasks or unpaced with `RIVUS_FREEZE_RATE=0`, checkpoints every second) writes into
//! Kafka with `exactly_once = true`; after a warm-up the broker's processes are frozen with
//! SIGSTOP (`RIVUS_FREEZE_SECS`, default 35 s), then thawed.
//! Each run passes when
//! - the job recovers within 30 s of the thaw: a checkpoint completes and records reach the
//!   sink again,
//! - it stops within 10 s of SIGINT, and
//! - a `read_committed` reader finds every record the generator emitted exactly once (each
//!   subtask's ids a gap-free prefix of its share, no id twice).
//!
//! `cargo bench -p rivus-cli --bench freeze` after `dev/services up kafka`
//! (`RIVUS_FREEZE_RUNS`, default 20; the runs stop at the first failure). Not part of
//! `dev/test`: it freezes the shared broker. The broker is thawed again also when a run fails.

#[path = "../tests/support/committed.rs"]
mod committed;
#[path = "../tests/support/frozen.rs"]
mod frozen;
#[path = "../tests/support/http.rs"]
mod http;

use committed::committed_ids;
use frozen::{server_pids, signal, Frozen};

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rivus_testkit::services::{unique_name, Service};

/// Records per second per subtask (two subtasks) unless `RIVUS_FREEZE_RATE` says otherwise
/// (`0`: as fast as the sink takes them).
fn rate() -> u64 {
    std::env::var("RIVUS_FREEZE_RATE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}
const METRICS_PORT: u16 = 9897;
/// How soon after the thaw the job must write again, and after SIGINT end.
const RECOVER_WITHIN: Duration = Duration::from_secs(30);
const STOP_WITHIN: Duration = Duration::from_secs(10);

/// The broker's processes.
fn broker_pids() -> Vec<u32> {
    server_pids("kafka")
}

/// The sum of a counter's samples on the job's metrics endpoint (`filter` picks the lines).
fn counter(name: &str, filter: &str) -> Option<u64> {
    let body = http::metrics(METRICS_PORT)?;
    let total: f64 = body
        .lines()
        .filter(|l| l.starts_with(name) && l.contains(filter))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum();
    Some(total as u64)
}

/// (records handed to the sink, checkpoints completed).
fn progress() -> Option<(u64, u64)> {
    Some((
        counter("rivus_records_in_total{", "task=\"sink\"")?,
        counter("rivus_checkpoints_completed_total", "")?,
    ))
}

/// What one run measured.
struct Run {
    recovered: Duration,
    stopped: Duration,
    records: usize,
}

fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> Option<Duration> {
    let t = Instant::now();
    while t.elapsed() < limit {
        if f() {
            return Some(t.elapsed());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

fn one_run(i: usize, dir: &Path, freeze: Duration) -> Result<Run, String> {
    let name = unique_name("freeze");
    let topic = format!("{name}-eo");
    let file = dir.join(format!("run-{i}.toml"));
    std::fs::write(
        &file,
        format!(
            "name = \"{name}\"\nparallelism = 2\n[checkpoint]\ninterval = \"1s\"\ndir = \"{}\"\n\
             [source]\ntype = \"generator\"\n{}\
             [sink]\ntype = \"kafka\"\nbootstrap_servers = \"{}\"\ntopic = \"{topic}\"\nexactly_once = true\n",
            dir.join(format!("state-{i}")).display(),
            match rate() {
                0 => String::new(),
                r => format!("rate = {r}\n"),
            },
            Service::Kafka.url()
        ),
    )
    .unwrap();
    let log = dir.join(format!("run-{i}.log"));
    let mut child: Child = Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["run", file.to_str().unwrap()])
        .args(["--metrics-addr", &format!("127.0.0.1:{METRICS_PORT}")])
        .env("RUST_LOG", "warn,rivus::status=info,rivus_sdk=info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let fail = |child: &mut Child, what: String| {
        let _ = child.kill();
        let _ = child.wait();
        Err(format!("{what} (log: {})", log.display()))
    };
    if wait_until(Duration::from_secs(60), || {
        progress().is_some_and(|(n, c)| n > 0 && c > 0)
    })
    .is_none()
    {
        return fail(&mut child, "no records and checkpoint within 60 s".into());
    }
    std::thread::sleep(Duration::from_secs(5));
    let frozen = Frozen::new(broker_pids());
    std::thread::sleep(freeze);
    let (in_at_thaw, cp_at_thaw) = progress().unwrap_or_default();
    drop(frozen);
    let Some(recovered) = wait_until(RECOVER_WITHIN, || {
        progress().is_some_and(|(n, c)| n > in_at_thaw && c > cp_at_thaw)
    }) else {
        return fail(
            &mut child,
            format!("no checkpoint and no record within {RECOVER_WITHIN:?} of the thaw"),
        );
    };
    // Running again for a while: the next checkpoints commit what waited.
    std::thread::sleep(Duration::from_secs(5));
    signal(&[child.id()], "INT");
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > STOP_WITHIN {
            return fail(
                &mut child,
                format!("did not stop within {STOP_WITHIN:?} of SIGINT"),
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stopped = t.elapsed();
    if !status.success() {
        return Err(format!("ended {status} (log: {})", log.display()));
    }
    // Exactly once: no id twice, and each subtask's ids (n % 2) a prefix without a gap.
    let ids = committed_ids(&topic);
    if let Some((id, n)) = ids.iter().find(|(_, n)| **n > 1) {
        return Err(format!("id {id} read {n} times (log: {})", log.display()));
    }
    for share in 0..2u64 {
        let mine: Vec<u64> = ids.keys().copied().filter(|id| id % 2 == share).collect();
        if let Some(w) = mine.windows(2).find(|w| w[1] != w[0] + 2) {
            return Err(format!(
                "subtask {share}: ids {} then {}: records lost (log: {})",
                w[0],
                w[1],
                log.display()
            ));
        }
        if mine.first().is_some_and(|f| *f != share) {
            return Err(format!("subtask {share} starts at {:?}", mine.first()));
        }
    }
    Ok(Run {
        recovered,
        stopped,
        records: ids.len(),
    })
}

fn main() {
    let freeze = Duration::from_secs(
        std::env::var("RIVUS_FREEZE_SECS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(35),
    );
    let runs: usize = std::env::var("RIVUS_FREEZE_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let dir = std::env::temp_dir().join(unique_name("rivus-freeze"));
    std::fs::create_dir_all(&dir).unwrap();
    println!(
        "generator ({} records/s × 2 subtasks, checkpoints every 1 s) → Kafka exactly-once; \
         the broker frozen (SIGSTOP) for {freeze:?}, {runs} runs; files in {}",
        match rate() {
            0 => "unpaced".to_owned(),
            r => r.to_string(),
        },
        dir.display()
    );
    let mut passed = Vec::new();
    for i in 1..=runs {
        match one_run(i, &dir, freeze) {
            Ok(r) => {
                println!(
                    "run {i:>2}: recovered {:>5.1} s after the thaw, stopped {:>4.1} s after SIGINT, {} records exactly once",
                    r.recovered.as_secs_f64(),
                    r.stopped.as_secs_f64(),
                    r.records
                );
                passed.push(r);
            }
            Err(e) => {
                println!("run {i:>2}: FAILED: {e}");
                println!("{} of {runs} runs passed before the failure", passed.len());
                std::process::exit(1);
            }
        }
    }
    let max =
        |f: fn(&Run) -> Duration| passed.iter().map(f).max().unwrap_or_default().as_secs_f64();
    println!(
        "{runs} of {runs} runs passed: recovered within {:.1} s of the thaw, stopped within {:.1} s of SIGINT, every record exactly once",
        max(|r| r.recovered),
        max(|r| r.stopped)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
