//! Worker mode running a graph: `rivus run FILE --worker ID` twice on a file whose router
//! sends a Kafka topic's records to two topics by partition, one worker SIGKILLed mid-stream.

#[path = "support/workers.rs"]
mod support;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rivus_testkit::services::{require, unique_name, Service};
use support::*;

/// Workers run the whole graph: a Kafka topic routed by partition into two topics (`p < 6` to
/// one, the rest — the router's `_unmatched` — to the other), two workers, one SIGKILLed
/// mid-stream. The living worker takes its partitions over; every record arrives, in the topic
/// its route names and only there (at-least-once across workers: a fan-out's sinks cannot
/// both commit the source's offsets).
#[tokio::test]
async fn workers_run_a_routing_graph_and_take_over_a_killed_workers_partitions() {
    let Some(kafka) = require(Service::Kafka) else {
        return;
    };
    let (input, low, high) = (
        unique_name("workers-graph-in"),
        unique_name("workers-graph-low"),
        unique_name("workers-graph-high"),
    );
    for t in [&input, &low, &high] {
        create_topic(&kafka, t).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("graph.toml");
    let sink = |name: &str, input: &str, topic: &str| {
        format!(
            "[sinks.{name}]\ntype = \"kafka\"\ninputs = [\"{input}\"]\n\
             bootstrap_servers = \"{kafka}\"\ntopic = \"{topic}\"\n"
        )
    };
    std::fs::write(
        &file,
        format!(
            "name = \"{input}\"\n[checkpoint]\ninterval = \"500ms\"\ndir = \"state\"\n\
             [sources.orders]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\n\
             topics = [\"{input}\"]\n\
             properties = {{ \"session.timeout.ms\" = \"6000\", \"heartbeat.interval.ms\" = \"1000\" }}\n\
             [transforms.by_partition]\ntype = \"route\"\ninputs = [\"orders\"]\n\
             route.low = {{ field = \"p\", op = \"<\", value = 6 }}\n{}{}",
            sink("low", "by_partition.low", &low),
            sink("high", "by_partition._unmatched", &high),
        ),
    )
    .unwrap();
    let (low_reader, high_reader) = (Reader::start(&kafka, &low), Reader::start(&kafka, &high));
    let n: u64 = 90_000;
    let (produced, feed) = paced_feed(&kafka, &input, n);
    let w1 = worker(dir.path(), &file, "w1");
    let mut w2 = Watched::spawn(worker_command(dir.path(), &file, "w2"));
    wait_produced(&produced, 30_000).await;
    w2.wait_holding("w2", Duration::from_secs(60)).await;
    w2.child.kill().unwrap();
    let (_, w2_log) = w2.finish();
    assert!(
        !held_at_the_end(&w2_log).is_empty(),
        "w2 held no partition when it was killed: {w2_log}"
    );
    feed.await.unwrap();
    let is_low = |i: u64| i % 12 < 6;
    let (n_low, n_high) = (
        (0..n).filter(|i| is_low(*i)).count(),
        (0..n).filter(|i| !is_low(*i)).count(),
    );
    let deadline = Instant::now() + Duration::from_secs(90);
    while low_reader.distinct() < n_low || high_reader.distinct() < n_high {
        assert!(
            Instant::now() < deadline,
            "only {} of {n_low} low and {} of {n_high} high records arrived",
            low_reader.distinct(),
            high_reader.distinct()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for (reader, want_low, what) in [(&low_reader, true, "low"), (&high_reader, false, "high")] {
        reader.stop.store(true, Ordering::Relaxed);
        let ids = reader.ids.lock();
        assert!(
            ids.iter().all(|i| is_low(*i) == want_low),
            "{what}: a record of the other route"
        );
        assert_eq!(
            ids.len(),
            if want_low { n_low } else { n_high },
            "{what}: every record of its route"
        );
    }
    eprintln!(
        "workers running a graph: {n} records, {} low + {} high delivered ({} duplicates)",
        low_reader.total.load(Ordering::Relaxed),
        high_reader.total.load(Ordering::Relaxed),
        low_reader.total.load(Ordering::Relaxed) + high_reader.total.load(Ordering::Relaxed) - n
    );
    let logs = stop_kafka_workers(vec![("w1", w1)]);
    assert!(
        dir.path().join("state").join("w1").join(".owner").exists(),
        "w1 checkpointed under its own id: {logs:?}"
    );
}
