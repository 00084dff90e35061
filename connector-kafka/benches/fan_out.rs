//! A fan-out next to a single path in the same run: Kafka → Kafka sink (one output topic)
//! against Kafka → fan-out → two Kafka sinks (two output topics), both at-least-once with
//! checkpoints every second, parallelism 2, one child process per job so each peak RSS is its
//! own, rounds alternating which goes first. Prints records per second per output, the ratio
//! fan-out / single path, both peak RSS, and the job process's CPU seconds per million records
//! written (single | fan-out). Needs the broker from `dev/services up kafka`.
//!
//! `cargo bench -p rivus-connector-kafka --bench fan_out` (`RIVUS_BENCH_RECORDS`, default
//! 1 000 000 records of 100 B on 2 partitions; `RIVUS_BENCH_ROUNDS`, default 3).

use std::time::{Duration, Instant};

use rivus_connector_kafka::{KafkaSink, KafkaSource, OutRecord, StartOffsets, StopOffsets};
use rivus_sdk::prelude::*;
use rivus_testkit::bench::{child_case, cpu_seconds, peak_rss_mib, rounds, run_child};
use rivus_testkit::services::{unique_name, Service};

mod common;

const PARALLELISM: usize = 2;

/// In the child: read `input` to its end into `outputs` (one topic: a single path; two: a
/// fan-out); print records per second per output and the peak RSS.
fn child(input: &str, outputs: &[&str], n: u64) {
    let rt = common::runtime();
    let dir = std::env::temp_dir().join(unique_name("rivus-bench-fan-out"));
    let p = Pipeline::new("bench-fan-out").checkpointing(CheckpointConfig::new(
        Duration::from_secs(1),
        std::sync::Arc::new(FsStateBackend::new(&dir, 3).unwrap()),
    ));
    let source = KafkaSource::builder(Service::Kafka.url())
        .topics([input])
        .start(StartOffsets::Earliest)
        .stop(StopOffsets::LatestAtStart)
        .build(common::Copy)
        .unwrap();
    // Records shared between the branches (an `Arc`): the split clones a pointer, and each
    // sink's serializer reads the one record.
    let stream = p
        .source("kafka-in", PARALLELISM, |_| source.clone())
        .map(std::sync::Arc::new);
    let branches = match outputs.len() {
        1 => vec![stream],
        n => stream.branches(n),
    };
    for (branch, topic) in branches.into_iter().zip(outputs) {
        let sink = KafkaSink::builder(Service::Kafka.url())
            .topic(*topic)
            .guarantee(DeliveryGuarantee::AtLeastOnce)
            .build(|r: &std::sync::Arc<OutRecord>| Ok(OutRecord::clone(r)))
            .unwrap();
        branch.sink_to(topic, PARALLELISM, |_| sink.clone());
    }
    let job = p.build().unwrap();
    let t = Instant::now();
    let summary = rt.block_on(job.run()).unwrap();
    let rate = n as f64 / t.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        summary.records_written,
        n * outputs.len() as u64,
        "every record into every output"
    );
    println!(
        "{rate:.0} {:.1} {:.2}",
        peak_rss_mib().unwrap_or(f64::NAN),
        cpu_seconds().unwrap_or(f64::NAN) * 1e6 / (n * outputs.len() as u64) as f64
    );
}

/// One child run of `case` (`single` or `fan-out`): (records/s per output, peak RSS MiB, CPU
/// seconds of the job's process per million records written).
fn run(case: &str, input: &str, outputs: &[String]) -> (f64, f64, f64) {
    let line = run_child(
        case,
        &[
            ("RIVUS_BENCH_INPUT", input),
            ("RIVUS_BENCH_OUTPUTS", &outputs.join(",")),
        ],
    );
    let f: Vec<f64> = line.split(' ').map(|x| x.parse().unwrap()).collect();
    (f[0], f[1], f[2])
}

fn main() {
    let n: u64 = std::env::var("RIVUS_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    if child_case().is_some() {
        let input = std::env::var("RIVUS_BENCH_INPUT").unwrap();
        let outputs = std::env::var("RIVUS_BENCH_OUTPUTS").unwrap();
        let outputs: Vec<&str> = outputs.split(',').collect();
        child(&input, &outputs, n);
        return;
    }
    let bootstrap = Service::Kafka.url();
    let input = unique_name("bench-fan-out-in");
    common::create_topics(&bootstrap, &[&input]);
    common::fill(&bootstrap, &input, n, 100);
    println!("Kafka → Kafka, {n} records of 100 B, parallelism {PARALLELISM}, checkpoints every 1 s, at-least-once; one process per job");
    println!(
        "{:<6} {:>16} {:>16} {:>7} {:>11} {:>11} {:>13}",
        "round",
        "single rec/s",
        "fan-out rec/s",
        "ratio",
        "single MiB",
        "fan-out MiB",
        "CPU s/M s|f"
    );
    let (mut ratios, mut rss_ratios) = (Vec::new(), Vec::new());
    let mut made = vec![input.clone()];
    for round in 0..rounds(3) {
        let single = vec![unique_name("bench-single")];
        let fanned = vec![unique_name("bench-fan-a"), unique_name("bench-fan-b")];
        let all: Vec<&str> = single.iter().chain(&fanned).map(String::as_str).collect();
        common::create_topics(&bootstrap, &all);
        made.extend(all.iter().map(|t| t.to_string()));
        let ((s, s_rss, s_cpu), (f, f_rss, f_cpu)) = if round % 2 == 0 {
            let s = run("single", &input, &single);
            (s, run("fan-out", &input, &fanned))
        } else {
            let f = run("fan-out", &input, &fanned);
            (run("single", &input, &single), f)
        };
        println!(
            "{round:<6} {s:>16.0} {f:>16.0} {:>7.2} {s_rss:>11.0} {f_rss:>11.0} {s_cpu:>6.2}|{f_cpu:<6.2}",
            f / s
        );
        ratios.push(f / s);
        rss_ratios.push(f_rss / s_rss);
    }
    let (r, lo, hi) = common::median(ratios);
    let (m, mlo, mhi) = common::median(rss_ratios);
    println!(
        "fan-out / single path: {r:.2} ({lo:.2}–{hi:.2}) records/s per output; peak RSS {m:.2} ({mlo:.2}–{mhi:.2})"
    );
    let made: Vec<&str> = made.iter().map(String::as_str).collect();
    common::delete_topics(&bootstrap, &made);
}
