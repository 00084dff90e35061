//! The Kafka source's memory against its prefetch settings: one process per setting (so each
//! peak RSS is its own), reading the same topic into a null sink — throughput and peak RSS side
//! by side, the trade-off curve behind the source's default prefetch. Needs the broker from
//! `dev/services up kafka`.
//!
//! `cargo bench -p rivus-connector-kafka --bench memory` (`RIVUS_BENCH_RECORDS`, default
//! 2 000 000 records of 100 B over 2 partitions; `RIVUS_BENCH_ROUNDS`, default 3).

mod common;

use rivus_testkit::bench::{child_case, peak_rss_mib, rounds, run_child};
use rivus_testkit::services::{unique_name, Service};

/// (name, librdkafka properties) — `default` is the source's `PREFETCH` (20 000 messages /
/// 4 MiB, backoff 10 ms); `before` what it set until the prefetch was bounded in bytes;
/// `min=50000,kb=8192` the default until the whole-job figures moved it.
const SETTINGS: [(&str, &str); 6] = [
    ("default", ""),
    ("before:min=1000000", "queued.min.messages=1000000"),
    ("min=100000", "queued.min.messages=100000"),
    (
        "min=100000,backoff=10",
        "queued.min.messages=100000,fetch.queue.backoff.ms=10",
    ),
    (
        "min=50000,kb=8192,backoff=10",
        "queued.min.messages=50000,queued.max.messages.kbytes=8192,fetch.queue.backoff.ms=10",
    ),
    (
        "min=5000,kb=2048,backoff=5",
        "queued.min.messages=5000,queued.max.messages.kbytes=2048,fetch.queue.backoff.ms=5",
    ),
];

/// In the child: read the whole topic with `props`, print "records/s peak-MiB".
fn child(topic: &str, n: u64, props: &str) {
    let rt = common::runtime();
    let rate = rt.block_on(common::read_to_end(
        "bench-source-memory",
        Service::Kafka.url(),
        props,
        topic,
        n,
    ));
    println!("{rate:.0} {:.1}", peak_rss_mib().unwrap_or(f64::NAN));
}

fn main() {
    let n: u64 = std::env::var("RIVUS_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000_000);
    if let Some(case) = child_case() {
        let topic = std::env::var("RIVUS_BENCH_TOPIC").unwrap();
        let props = SETTINGS
            .iter()
            .find(|(name, _)| *name == case)
            .map(|(_, p)| *p)
            .unwrap();
        child(&topic, n, props);
        return;
    }
    let bootstrap = Service::Kafka.url();
    let topic = unique_name("bench-memory");
    common::create_topics(&bootstrap, &[&topic]);
    common::fill(&bootstrap, &topic, n, 100);
    let rounds = rounds(3);
    println!("source: {n} records of 100 B, 2 partitions, read into a null sink");
    println!(
        "{:<30} {:>14} {:>14}",
        "prefetch", "records/s", "peak RSS MiB"
    );
    for (name, _) in SETTINGS {
        let mut rates = Vec::new();
        let mut rss = Vec::new();
        for _ in 0..rounds {
            let line = run_child(name, &[("RIVUS_BENCH_TOPIC", &topic)]);
            let (r, m) = line.split_once(' ').unwrap();
            rates.push(r.parse::<f64>().unwrap());
            rss.push(m.parse::<f64>().unwrap());
        }
        rates.sort_by(f64::total_cmp);
        rss.sort_by(f64::total_cmp);
        println!(
            "{name:<30} {:>14.0} {:>14.1}   (rates {:.0}–{:.0}, RSS {:.0}–{:.0})",
            rates[rates.len() / 2],
            rss[rss.len() / 2],
            rates[0],
            rates[rates.len() - 1],
            rss[0],
            rss[rss.len() - 1]
        );
    }
    common::delete_topics(&bootstrap, &[&topic]);
}
