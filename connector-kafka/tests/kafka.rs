//! The Kafka source and sink against the real broker started by `dev/services`.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use rivus_connector_kafka::{
    KafkaSink, KafkaSource, OutRecord, StartOffsets, StopOffsets, ValueDeserializer,
};
use rivus_sdk::prelude::*;
use rivus_sdk::schema::StringSchema;
use rivus_testkit::services::{require, Service};
use rivus_testkit::suite::{SinkSuite, SourceSuite};
use rivus_testkit::{CollectingSink, SequenceSource};

use rivus_testkit::services::unique_name as unique;

mod common;
use common::suites::{Conn, SinkCtx, SourceCtx};
use common::{assert_exactly_once, create_topic, produce, producer, read_topic};

// ---- conformance ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_passes_the_conformance_suite() {
    let Some(bootstrap) = require(Service::Kafka) else {
        return;
    };
    let mut suite =
        SourceSuite::new(SourceCtx::new(Conn::plain(&bootstrap))).records_per_split(200);
    if let Err(f) = suite.run_all().await {
        panic!("{f}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sink_passes_the_conformance_suite() {
    let Some(bootstrap) = require(Service::Kafka) else {
        return;
    };
    let mut suite = SinkSuite::new(SinkCtx::new(
        Conn::plain(&bootstrap),
        DeliveryGuarantee::AtLeastOnce,
    ))
    .records_per_split(200);
    if let Err(f) = suite.run_all().await {
        panic!("{f}");
    }
}

// ---- specific behaviour ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_source_ends_at_latest_offsets_seen_at_start() {
    let Some(bootstrap) = require(Service::Kafka) else {
        return;
    };
    let topic = unique("bounded");
    create_topic(&bootstrap, &topic, 3).await;
    let p = producer(&bootstrap);
    for part in 0..3 {
        let values: Vec<Vec<u8>> = (0..100)
            .map(|i| format!("{part}-{i}").into_bytes())
            .collect();
        produce(&p, &topic, part, &values).await;
    }
    let source = KafkaSource::builder(&bootstrap)
        .topics([topic.clone()])
        .start(StartOffsets::Earliest)
        .stop(StopOffsets::LatestAtStart)
        .build(ValueDeserializer(StringSchema))
        .unwrap();
    let mut got = rivus_testkit::read_all("bounded", source, 2).await;
    got.sort();
    got.dedup();
    assert_eq!(got.len(), 300);
}

/// A topic written in transactions ends in commit markers, offsets that carry no record: the
/// bounded source must still end (its position, not its last record, passes the stop offset).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_source_ends_on_a_transactional_topic() {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let Some(bootstrap) = require(Service::Kafka) else {
        return;
    };
    let topic = unique("txn-bounded");
    create_topic(&bootstrap, &topic, 2).await;
    let (b, t) = (bootstrap.clone(), topic.clone());
    tokio::task::spawn_blocking(move || {
        let p: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", &b)
            .set("transactional.id", format!("{t}-producer"))
            .create()
            .unwrap();
        p.init_transactions(Duration::from_secs(30)).unwrap();
        for round in 0..3 {
            p.begin_transaction().unwrap();
            for i in 0..50 {
                let v = format!("{round}-{i}");
                p.send(BaseRecord::<(), str>::to(&t).partition(i % 2).payload(&v))
                    .unwrap();
            }
            p.commit_transaction(Duration::from_secs(30)).unwrap();
        }
    })
    .await
    .unwrap();
    let source = KafkaSource::builder(&bootstrap)
        .topics([topic.clone()])
        .start(StartOffsets::Earliest)
        .stop(StopOffsets::LatestAtStart)
        .property("isolation.level", "read_committed")
        .build(ValueDeserializer(StringSchema))
        .unwrap();
    let mut got = rivus_testkit::read_all("txn-bounded", source, 2).await;
    got.sort();
    got.dedup();
    assert_eq!(got.len(), 150);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_starts_from_specific_offsets_and_commits_progress_to_the_group() {
    let Some(bootstrap) = require(Service::Kafka) else {
        return;
    };
    let topic = unique("specific");
    create_topic(&bootstrap, &topic, 1).await;
    let values: Vec<Vec<u8>> = (0..50).map(|i| format!("v{i:02}").into_bytes()).collect();
    produce(&producer(&bootstrap), &topic, 0, &values).await;
    let group = unique("group");
    let source = KafkaSource::builder(&bootstrap)
        .topics([topic.clone()])
        .group_id(&group)
        .start(StartOffsets::Specific([((topic.clone(), 0), 40)].into()))
        .stop(StopOffsets::LatestAtStart)
        .build(ValueDeserializer(StringSchema))
        .unwrap();
    let sink = CollectingSink::<String>::new();
    let backend = MemoryStateBackend::new();
    Pipeline::new("specific")
        .checkpointing(CheckpointConfig::new(
            Duration::from_millis(50),
            Arc::new(backend),
        ))
        .source("kafka", 1, |_| source.clone())
        .sink("collect", 1, |i| sink.for_subtask(i))
        .unwrap()
        .run()
        .await
        .unwrap();
    assert_eq!(
        sink.values(),
        (40..50).map(|i| format!("v{i:02}")).collect::<Vec<_>>()
    );
    // The final checkpoint's offsets were committed to the group.
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", &group)
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(&topic, 0);
    let committed = c.committed_offsets(tpl, Duration::from_secs(10)).unwrap();
    assert_eq!(committed.elements()[0].offset(), Offset::Offset(50));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sink_writes_per_record_topic_key_and_headers() {
    let Some(bootstrap) = require(Service::Kafka) else {
        return;
    };
    let (a, b) = (unique("route-a"), unique("route-b"));
    create_topic(&bootstrap, &a, 1).await;
    create_topic(&bootstrap, &b, 1).await;
    let (ta, tb) = (a.clone(), b.clone());
    let sink = KafkaSink::builder(&bootstrap)
        .build(move |v: &u64| {
            Ok(OutRecord {
                topic: Some(if v.is_multiple_of(2) {
                    ta.clone()
                } else {
                    tb.clone()
                }),
                key: Some(v.to_string().into_bytes()),
                value: Some(format!("n{v}").into_bytes()),
                headers: vec![("parity".into(), (v % 2).to_string().into_bytes())],
                ..Default::default()
            })
        })
        .unwrap();
    Pipeline::new("route")
        .source("seq", 1, |i| {
            SequenceSource::new(i, 1, Some(20), Arc::new(AtomicU64::new(0)))
        })
        .sink("kafka", 1, |_| sink.clone())
        .unwrap()
        .run()
        .await
        .unwrap();
    let (ba, bb) = (bootstrap.clone(), bootstrap.clone());
    let got_a = tokio::task::spawn_blocking(move || read_topic(&ba, &a))
        .await
        .unwrap();
    let got_b = tokio::task::spawn_blocking(move || read_topic(&bb, &b))
        .await
        .unwrap();
    assert_eq!(got_a.len(), 10);
    assert_eq!(got_b.len(), 10);
    assert!(got_a
        .iter()
        .all(|(_, v)| v.trim_start_matches('n').parse::<u64>().unwrap() % 2 == 0));
}

#[test]
fn bad_configuration_is_refused_with_the_field_path() {
    let err = KafkaSource::builder("")
        .topics(["t"])
        .build(ValueDeserializer(StringSchema))
        .unwrap_err();
    assert!(err.to_string().contains("`bootstrap.servers`"), "{err}");
    let err = KafkaSource::builder("h:1")
        .build(ValueDeserializer(StringSchema))
        .unwrap_err();
    assert!(err.to_string().contains("`topics`"), "{err}");
    let err = KafkaSource::builder("h:1")
        .topic_pattern("([")
        .build(ValueDeserializer(StringSchema))
        .unwrap_err();
    assert!(err.to_string().contains("`topic_pattern`"), "{err}");
    let err = KafkaSink::builder("h:1")
        .property("acks", "0")
        .build(|_: &String| Ok(OutRecord::default()))
        .unwrap_err();
    assert!(err.to_string().contains("`acks`"), "{err}");
    let b = KafkaSink::builder("h:1").property("sasl.password", "s3cr3t");
    assert!(!format!("{b:?}").contains("s3cr3t"));
}

// ---- exactly-once ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactional_sink_passes_the_conformance_suite_exactly_once() {
    let Some(bootstrap) = require(Service::Kafka) else {
        return;
    };
    let mut suite = SinkSuite::new(SinkCtx::new(
        Conn::plain(&bootstrap),
        DeliveryGuarantee::ExactlyOnce,
    ))
    .records_per_split(150);
    if let Err(f) = suite.run_all().await {
        panic!("{f}");
    }
}

/// Kafka → Kafka exactly-once in a separate process, killed with SIGKILL three times
/// mid-stream (wherever each run happens to be) and restarted: a read_committed reader sees
/// every input record exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_dash_nine_kafka_to_kafka_exactly_once() {
    let Some(bootstrap) = require(Service::Kafka) else {
        return;
    };
    let (from, to) = (unique("kill-from"), unique("kill-to"));
    create_topic(&bootstrap, &from, 3).await;
    create_topic(&bootstrap, &to, 3).await;
    let n = 300_000;
    let p = producer(&bootstrap);
    for part in 0..3 {
        let values: Vec<Vec<u8>> = (0..n / 3)
            .map(|i| format!("r{part}-{i:06}").into_bytes())
            .collect();
        produce(&p, &from, part, &values).await;
    }
    let dir = tempfile_dir();
    let args: Vec<String> = vec![
        bootstrap.clone(),
        from.clone(),
        to.clone(),
        dir.to_str().unwrap().to_owned(),
        to.clone(),
        "2".into(),
    ];
    // Each run's stderr goes to a file, for the failure message.
    let log = dir.join("runs.log");
    let run = {
        let log = log.clone();
        move || {
            let err = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .unwrap();
            std::process::Command::new(env!("CARGO_BIN_EXE_kafka-copy"))
                .args(&args)
                .stdout(std::process::Stdio::piped())
                .stderr(err)
                .spawn()
                .unwrap()
        }
    };
    // Each run is killed once it has written a further 20 000 records (open transactions
    // included): mid-stream, however fast the job is.
    let (b, t) = (bootstrap.clone(), to.clone());
    let kills = tokio::task::spawn_blocking({
        let run = run.clone();
        move || {
            // read_uncommitted: the high watermark, open transactions included. librdkafka's
            // default (read_committed) would give the last stable offset, which stands still
            // until a checkpoint commits — a run whose commits lag can then finish unkilled.
            let watch: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", &b)
                .set("isolation.level", "read_uncommitted")
                .create()
                .unwrap();
            let written = || -> i64 {
                (0..3)
                    .map(|p| {
                        watch
                            .fetch_watermarks(&t, p, Duration::from_secs(10))
                            .unwrap()
                            .1
                    })
                    .sum()
            };
            let mut kills = Vec::new();
            for _ in 0..3 {
                let start = written();
                let mut child = run();
                let deadline = std::time::Instant::now() + Duration::from_secs(60);
                while child.try_wait().unwrap().is_none()
                    && written() < start + 20_000
                    && std::time::Instant::now() < deadline
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
                match child.try_wait().unwrap() {
                    None => {
                        child.kill().unwrap(); // SIGKILL
                        kills.push("killed".to_owned());
                    }
                    Some(status) => kills.push(format!("ended by itself: {status}")),
                }
                child.wait().unwrap();
            }
            kills
        }
    })
    .await
    .unwrap();
    assert_eq!(
        kills,
        ["killed"; 3],
        "each run was killed mid-stream; their stderr:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let out = tokio::task::spawn_blocking(move || run().wait_with_output().unwrap())
        .await
        .unwrap();
    assert!(out.status.success(), "the final run completes");
    assert_exactly_once(&bootstrap, &to, n as usize, "after three kills").await;
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(unique("rivus-kafka-copy"));
    std::fs::create_dir_all(&d).unwrap();
    d
}
