//! The exactly-once sink next to the at-least-once sink in the same run: a sequence source →
//! Kafka sink job (parallelism 2, checkpoints into a directory), one child process per job so
//! each peak RSS is its own, rounds alternating which guarantee goes first. Prints the
//! throughput ratio exactly-once / at-least-once, each side's peak RSS, the largest checkpoint
//! file and the largest transaction log. Needs the broker from `dev/services up kafka`.
//!
//! `cargo bench -p rivus-connector-kafka --bench exactly_once` (`RIVUS_BENCH_RECORDS`, default
//! 1 000 000; `RIVUS_BENCH_ROUNDS`, default 3; `RIVUS_BENCH_FILTER` picks cases by label;
//! `RIVUS_BENCH_SINK_PROPS=k=v,k=v` adds producer properties to both sinks).
//! Cases: 100 B records with checkpoints every 1 s, 200 ms and 10 s; 1 KiB records every 1 s;
//! and Kafka → Kafka (`k2k`, a topic of 2 M records of 100 B on 2 partitions read by the Kafka
//! source) every 1 s.

use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rivus_connector_kafka::{KafkaSink, KafkaSource, OutRecord, StartOffsets, StopOffsets};
use rivus_sdk::prelude::*;
use rivus_testkit::bench::{child_case, peak_rss_mib, rounds, run_child, selected};
use rivus_testkit::services::{unique_name, Service};
use rivus_testkit::SequenceSource;

mod common;

const PARALLELISM: usize = 2;

/// (label, value bytes, checkpoint interval ms, records as a multiple of `RIVUS_BENCH_RECORDS`
/// in tenths): a 10 s interval needs a run long enough to take checkpoints at all. A label
/// starting with `k2k` reads its records from a Kafka topic instead of a sequence.
const CASES: [(&str, usize, u64, u64); 5] = [
    ("100B/1s", 100, 1000, 10),
    ("100B/200ms", 100, 200, 10),
    ("100B/10s", 100, 10_000, 60),
    ("1KiB/1s", 1024, 1000, 3),
    ("k2k-100B-1s", 100, 1000, 20),
];

/// Figures of one child run.
struct Run {
    rate: f64,
    rss: f64,
    checkpoint: u64,
    log: u64,
    checkpoints: u64,
}

fn largest_file(dir: &Path, suffix: &str) -> u64 {
    let mut max = 0;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() {
            max = max.max(largest_file(&path, suffix));
        } else if path.to_string_lossy().ends_with(suffix) {
            max = max.max(e.metadata().map_or(0, |m| m.len()));
        }
    }
    max
}

/// In the child: write `n` records of `size` bytes with `delivery` (read from the topic
/// `input` if given); print the figures.
fn child(
    topic: &str,
    input: Option<&str>,
    n: u64,
    size: usize,
    interval_ms: u64,
    delivery: DeliveryGuarantee,
) {
    let rt = common::runtime();
    let dir = std::env::temp_dir().join(unique_name("rivus-bench-eo"));
    let backend = Arc::new(FsStateBackend::new(&dir, 3).unwrap());
    // Watch the largest log while the job runs: logs are emptied as transactions commit.
    let log_dir = dir.join("local");
    let peak_log = Arc::new(AtomicU64::new(0));
    let watch = {
        let (log_dir, peak_log) = (log_dir.clone(), Arc::clone(&peak_log));
        rt.spawn(async move {
            loop {
                let now = largest_file(&log_dir, ".txlog");
                peak_log.fetch_max(now, std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let mut sink = KafkaSink::builder(Service::Kafka.url())
        .topic(topic)
        .guarantee(delivery)
        .transactional_id_prefix(topic);
    for kv in std::env::var("RIVUS_BENCH_SINK_PROPS")
        .unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty())
    {
        let (k, v) = kv.split_once('=').expect("RIVUS_BENCH_SINK_PROPS: k=v,k=v");
        sink = sink.property(k, v);
    }
    let pipeline = Pipeline::new("bench-exactly-once").checkpointing(CheckpointConfig::new(
        Duration::from_millis(interval_ms),
        backend,
    ));
    let job = match input {
        Some(input) => {
            let source = KafkaSource::builder(Service::Kafka.url())
                .topics([input])
                .start(StartOffsets::Earliest)
                .stop(StopOffsets::LatestAtStart)
                .build(common::Copy)
                .unwrap();
            let sink = sink.build(|r: &OutRecord| Ok(r.clone())).unwrap();
            pipeline
                .source("kafka-in", PARALLELISM, |_| source.clone())
                .sink("kafka", PARALLELISM, |_| sink.clone())
                .unwrap()
        }
        None => {
            let sink = sink
                .build(move |i: &u64| {
                    let mut value = vec![b'x'; size];
                    value[..8].copy_from_slice(&i.to_le_bytes());
                    Ok(OutRecord {
                        key: Some(i.to_le_bytes().to_vec()),
                        value: Some(value),
                        ..Default::default()
                    })
                })
                .unwrap();
            let emitted = Arc::new(AtomicU64::new(0));
            pipeline
                .source("sequence", PARALLELISM, |i| {
                    SequenceSource::new(i, PARALLELISM, Some(n), Arc::clone(&emitted))
                })
                .sink("kafka", PARALLELISM, |_| sink.clone())
                .unwrap()
        }
    };
    let t = Instant::now();
    let summary = rt.block_on(job.run()).unwrap();
    let rate = n as f64 / t.elapsed().as_secs_f64();
    watch.abort();
    assert_eq!(summary.records_written, n, "every record written");
    let checkpoint = largest_file(&dir, ".ckpt");
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "{rate:.0} {:.1} {checkpoint} {} {}",
        peak_rss_mib().unwrap_or(f64::NAN),
        peak_log.load(std::sync::atomic::Ordering::Relaxed),
        summary.checkpoints_completed
    );
}

fn run(case: &str, topic: &str, input: &str) -> Run {
    let line = run_child(
        case,
        &[("RIVUS_BENCH_TOPIC", topic), ("RIVUS_BENCH_INPUT", input)],
    );
    let f: Vec<&str> = line.split(' ').collect();
    Run {
        rate: f[0].parse().unwrap(),
        rss: f[1].parse().unwrap(),
        checkpoint: f[2].parse().unwrap(),
        log: f[3].parse().unwrap(),
        checkpoints: f[4].parse().unwrap(),
    }
}

fn main() {
    let base: u64 = std::env::var("RIVUS_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let records = |tenths: u64| base * tenths / 10;
    if let Some(case) = child_case() {
        let (label, delivery) = case.split_once(' ').unwrap();
        let &(_, size, interval, tenths) = CASES.iter().find(|c| c.0 == label).unwrap();
        let delivery = match delivery {
            "at-least-once" => DeliveryGuarantee::AtLeastOnce,
            _ => DeliveryGuarantee::ExactlyOnce,
        };
        let topic = std::env::var("RIVUS_BENCH_TOPIC").unwrap();
        let input = std::env::var("RIVUS_BENCH_INPUT").unwrap_or_default();
        let input = label.starts_with("k2k").then_some(input.as_str());
        child(&topic, input, records(tenths), size, interval, delivery);
        return;
    }
    let bootstrap = Service::Kafka.url();
    let rounds = rounds(3);
    println!(
        "sequence → Kafka sink, parallelism {PARALLELISM}, checkpoints into a directory; one process per job"
    );
    for (label, size, _, tenths) in CASES {
        if !selected(label) {
            continue;
        }
        println!("{label}: {} records", records(tenths));
        let input = unique_name("bench-eo-input");
        if label.starts_with("k2k") {
            common::create_topics(&bootstrap, &[&input]);
            common::fill(&bootstrap, &input, records(tenths), size);
        }
        println!(
            "{:<6} {:>14} {:>14} {:>7} {:>9} {:>9} {:>12} {:>12} {:>6}",
            "round",
            "ALO rec/s",
            "EO rec/s",
            "ratio",
            "ALO MiB",
            "EO MiB",
            "EO ckpt B",
            "EO log B",
            "ckpts"
        );
        let (mut ratios, mut alo_rate, mut eo_rate) = (Vec::new(), Vec::new(), Vec::new());
        let (mut alo_rss, mut eo_rss, mut ckpt, mut logs) = (vec![], vec![], vec![], vec![]);
        for round in 0..rounds {
            let (alo_topic, eo_topic) = (unique_name("bench-alo"), unique_name("bench-eo"));
            common::create_topics(&bootstrap, &[&alo_topic, &eo_topic]);
            let (alo, eo) = if round % 2 == 0 {
                let a = run(&format!("{label} at-least-once"), &alo_topic, &input);
                (a, run(&format!("{label} exactly-once"), &eo_topic, &input))
            } else {
                let e = run(&format!("{label} exactly-once"), &eo_topic, &input);
                (
                    run(&format!("{label} at-least-once"), &alo_topic, &input),
                    e,
                )
            };
            common::delete_topics(&bootstrap, &[&alo_topic, &eo_topic]);
            println!(
                "{round:<6} {:>14.0} {:>14.0} {:>7.2} {:>9.1} {:>9.1} {:>12} {:>12} {:>6}",
                alo.rate,
                eo.rate,
                eo.rate / alo.rate,
                alo.rss,
                eo.rss,
                eo.checkpoint,
                eo.log,
                eo.checkpoints
            );
            ratios.push(eo.rate / alo.rate);
            alo_rate.push(alo.rate);
            eo_rate.push(eo.rate);
            alo_rss.push(alo.rss);
            eo_rss.push(eo.rss);
            ckpt.push(eo.checkpoint as f64);
            logs.push(eo.log as f64);
        }
        let (r, rlo, rhi) = common::median(ratios);
        let (ar, _, _) = common::median(alo_rate);
        let (er, _, _) = common::median(eo_rate);
        let (a, _, ahi) = common::median(alo_rss);
        let (e, _, ehi) = common::median(eo_rss);
        let (c, _, chi) = common::median(ckpt);
        let (l, _, _) = common::median(logs);
        println!(
            "{label}: exactly-once / at-least-once throughput {r:.2} ({rlo:.2}–{rhi:.2}; medians {:.0} k and {:.0} k rec/s); peak RSS at-least-once {a:.0} MiB (max {ahi:.0}), exactly-once {e:.0} MiB (max {ehi:.0}); largest checkpoint {c:.0} B (max {chi:.0}); largest transaction log {:.1} MiB",
            er / 1000.0,
            ar / 1000.0,
            l / 1048576.0
        );
        if label.starts_with("k2k") {
            common::delete_topics(&bootstrap, &[&input]);
        }
    }
}
