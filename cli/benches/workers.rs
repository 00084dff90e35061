//! Scale-out on this machine: one Kafka → Kafka pipeline file (group-mode source, at-least-once
//! sink, checkpoints every second) run by 1, 2 and 3 `rivus run --worker` processes over a
//! pre-filled 12-partition topic, and the time from SIGKILL of one of three workers to its
//! partitions flowing again.
//!
//! Throughput: each round drains the same `RIVUS_BENCH_RECORDS` (default 600 000) records of
//! about 100 bytes with a fresh consumer group into a fresh output topic, and reports records
//! per second over the whole run (start of the processes to the last output record), in steady
//! state (first to last output record), the ratio to one worker, and the workers' summed peak
//! RSS. Takeover: three workers read a feed of about 15 000 records a second; one is killed
//! mid-stream; the figure is, for the partitions it held, the longest time from the kill to
//! the first output record of a record produced after it (the broker's minimum session
//! timeout, 6 s, as in the tests). Rounds: `RIVUS_BENCH_ROUNDS` (default 3).
//!
//! `cargo bench -p rivus-cli --bench workers` after `dev/services up kafka`
//! (`RIVUS_BENCH_FILTER=throughput` or `takeover` picks a case). Not part of `dev/test`.

#[path = "../tests/support/workers.rs"]
mod support;

use std::path::Path;
use std::process::Child;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::ClientConfig;
use rivus_testkit::bench::{rounds, rss_mib, selected};
use rivus_testkit::services::{require, unique_name, Service};
use support::*;

/// A pipeline file reading `input` in group mode (group `name`) into `output`.
fn pipeline(dir: &Path, kafka: &str, name: &str, input: &str, output: &str) -> std::path::PathBuf {
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(
        &file,
        format!(
            "name = \"{name}\"\n[checkpoint]\ninterval = \"1s\"\ndir = \"state\"\n\
             [source]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopics = [\"{input}\"]\n\
             start = \"earliest\"\n\
             properties = {{ \"session.timeout.ms\" = \"6000\", \"heartbeat.interval.ms\" = \"1000\" }}\n\
             [sink]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopic = \"{output}\"\n"
        ),
    )
    .unwrap();
    file
}

/// The records in `topic` (the sum of its partitions' high watermarks).
fn records_in(c: &BaseConsumer, topic: &str) -> u64 {
    (0..PARTITIONS)
        .map(|p| {
            c.fetch_watermarks(topic, p, Duration::from_secs(5))
                .map_or(0, |(_, high)| high as u64)
        })
        .sum()
}

fn stop(workers: Vec<Child>) {
    for w in &workers {
        interrupt(w);
    }
    for w in workers {
        let out = w.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// One round with `k` workers: (whole-run rate, steady rate, summed peak RSS in MiB).
fn throughput_round(
    rt: &tokio::runtime::Runtime,
    kafka: &str,
    dir: &Path,
    input: &str,
    n: u64,
    k: usize,
) -> (f64, f64, f64) {
    let name = unique_name(&format!("bench-workers-{k}"));
    let output = unique_name("bench-workers-out");
    rt.block_on(create_topic(kafka, &output));
    let file = pipeline(dir, kafka, &name, input, &output);
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", kafka)
        .create()
        .unwrap();
    let t0 = Instant::now();
    let workers: Vec<Child> = (1..=k)
        .map(|i| worker(dir, &file, &format!("w{i}")))
        .collect();
    let deadline = t0 + Duration::from_secs(300);
    let mut first = None;
    loop {
        let got = records_in(&c, &output);
        if got > 0 && first.is_none() {
            first = Some(Instant::now());
        }
        if got >= n {
            break;
        }
        assert!(Instant::now() < deadline, "{k} workers: only {got} of {n}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let end = Instant::now();
    let rss: f64 = workers
        .iter()
        .filter_map(|w| rss_mib(&w.id().to_string()).map(|(_, peak)| peak))
        .sum();
    stop(workers);
    let whole = n as f64 / (end - t0).as_secs_f64();
    let steady = n as f64 / (end - first.unwrap()).as_secs_f64().max(1e-3);
    (whole, steady, rss)
}

fn throughput(kafka: &str, rounds: usize) {
    let n: u64 = std::env::var("RIVUS_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600_000);
    let input = unique_name("bench-workers-in");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        create_topic(kafka, &input).await;
        feed(kafka, &input, n, Duration::ZERO, Arc::default())
            .await
            .unwrap();
    });
    let dir = tempfile::tempdir().unwrap();
    let mut steady: Vec<Vec<f64>> = vec![Vec::new(); 3];
    println!(
        "workers throughput: {n} records of ~100 B, 12 partitions, at-least-once, checkpoints 1 s"
    );
    for round in 0..rounds {
        // Alternate the order: neither count always meets the warmer broker.
        let order: Vec<usize> = if round % 2 == 0 {
            vec![1, 2, 3]
        } else {
            vec![3, 2, 1]
        };
        for k in order {
            let (whole, st, rss) = throughput_round(&rt, kafka, dir.path(), &input, n, k);
            println!(
                "  round {round}: {k} worker(s): {whole:>9.0} records/s whole run, {st:>9.0} steady, peak RSS {rss:.0} MiB in all"
            );
            steady[k - 1].push(st);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let one = median(&mut steady[0].clone());
    for (i, v) in steady.iter_mut().enumerate() {
        let m = median(v);
        println!(
            "workers throughput {} worker(s): median steady {m:.0} records/s, {:.2}× one worker",
            i + 1,
            m / one
        );
    }
}

/// One takeover round: the seconds from the kill to the killed worker's partitions flowing.
async fn takeover_round(kafka: &str, dir: &Path) -> f64 {
    let (input, output) = (
        unique_name("bench-takeover-in"),
        unique_name("bench-takeover-out"),
    );
    create_topic(kafka, &input).await;
    create_topic(kafka, &output).await;
    let name = unique_name("bench-takeover");
    let file = pipeline(dir, kafka, &name, &input, &output);
    let reader = Reader::start(kafka, &output);
    let n = 150_000;
    let mut workers: Vec<Child> = (1..=3)
        .map(|i| worker(dir, &file, &format!("w{i}")))
        .collect();
    let (produced, feed) = paced_feed(kafka, &input, n);
    wait_produced(&produced, 45_000).await;
    reader
        .after
        .store(produced.load(Ordering::Relaxed) + 1500, Ordering::Relaxed);
    workers[1].kill().unwrap();
    let killed = Instant::now();
    let out = workers.remove(1).wait_with_output().unwrap();
    let held = held_at_the_end(&String::from_utf8_lossy(&out.stderr));
    assert!(!held.is_empty(), "the killed worker held no partition");
    feed.await.unwrap();
    reader.wait_for_all(n, "records arrived").await;
    reader.stop.store(true, Ordering::Relaxed);
    stop(workers);
    let first = reader.first_after.lock();
    held.iter()
        .map(|p| first[p].duration_since(killed).as_secs_f64())
        .fold(0.0, f64::max)
}

fn takeover(kafka: &str, rounds: usize) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut all = Vec::new();
    for round in 0..rounds {
        let s = rt.block_on(takeover_round(kafka, dir.path()));
        println!("  round {round}: the killed worker's partitions flowed again after {s:.1} s");
        all.push(s);
    }
    all.sort_by(f64::total_cmp);
    println!(
        "workers takeover (3 workers, one SIGKILLed, session timeout 6 s): median {:.1} s, range {:.1}–{:.1} s",
        all[all.len() / 2],
        all[0],
        all[all.len() - 1]
    );
}

fn main() {
    let Some(kafka) = require(Service::Kafka) else {
        return;
    };
    let rounds = rounds(3);
    if selected("throughput") {
        throughput(&kafka, rounds);
    }
    if selected("takeover") {
        takeover(&kafka, rounds);
    }
}
