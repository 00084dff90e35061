//! The connector's metrics against the real broker: the per-partition lag gauge (from
//! librdkafka's statistics) and the sink's back-pressure counter. Alone in their file: they
//! install the process's metrics recorder.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use rivus_connector_kafka::{KafkaSink, KafkaSource, OutRecord, StartOffsets, ValueDeserializer};
use rivus_sdk::prelude::*;
use rivus_sdk::schema::StringSchema;
use rivus_testkit::services::{require, unique_name, Service};
use rivus_testkit::{CollectingSink, SequenceSource};

mod common;
use common::{create_topic, produce, producer, read_topic};

/// The recorder of this test process, installed once.
fn snapshotter() -> &'static Snapshotter {
    static SNAP: OnceLock<Snapshotter> = OnceLock::new();
    SNAP.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snap = recorder.snapshotter();
        recorder.install().unwrap();
        snap
    })
}

/// The values of the series named `name` with label `label` = `value`.
fn series(snap: &Snapshotter, name: &str, label: &str, value: &str) -> Vec<DebugValue> {
    snap.snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| {
            let key = key.key();
            key.name() == name && key.labels().any(|l| l.key() == label && l.value() == value)
        })
        .map(|(.., v)| v)
        .collect()
}

/// The sum of counter `name` over the series whose `job` label is `job`.
fn counter(snap: &Snapshotter, name: &str, job: &str) -> u64 {
    series(snap, name, "job", job)
        .into_iter()
        .map(|v| match v {
            DebugValue::Counter(c) => c,
            _ => 0,
        })
        .sum()
}

/// The lag gauge of `topic`'s partition 0, if reported.
fn lag_of(snap: &Snapshotter, topic: &str) -> Option<f64> {
    let partition = format!("{topic}/0");
    series(snap, "rivus_kafka_consumer_lag", "partition", &partition)
        .into_iter()
        .find_map(|v| match v {
            DebugValue::Gauge(g) => Some(g.into_inner()),
            _ => None,
        })
}

/// Waits (up to 60 s) until the gauge satisfies `ok`; returns its value.
async fn wait_for_lag(snap: &Snapshotter, topic: &str, ok: impl Fn(f64) -> bool) -> f64 {
    rivus_testkit::wait::until(
        Duration::from_secs(60),
        || async { lag_of(snap, topic).is_some_and(&ok) },
        || format!("lag gauge of {topic}: {:?}", lag_of(snap, topic)),
    )
    .await;
    lag_of(snap, topic).expect("just seen")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lag_is_reported_per_partition_and_falls_to_zero() {
    let Some(bootstrap) = require(Service::Kafka) else {
        return;
    };
    let snap = snapshotter();

    let topic = unique_name("lag");
    create_topic(&bootstrap, &topic, 1).await;
    let values: Vec<Vec<u8>> = (0..20_000).map(|i| format!("v{i}").into_bytes()).collect();
    produce(&producer(&bootstrap), &topic, 0, &values).await;

    let source = KafkaSource::builder(&bootstrap)
        .topics([topic.clone()])
        .start(StartOffsets::Earliest)
        .property("statistics.interval.ms", "200")
        .build(ValueDeserializer(StringSchema))
        .unwrap();
    // A slow step after the source (0.1 ms a record, about 2 s in all): the consumer polls
    // between batches while the rest of the topic waits, so librdkafka reports a lag.
    let sink = CollectingSink::<String>::new();
    let job = Pipeline::new("lag")
        .source("kafka", 1, |_| source.clone())
        .map(|v: String| {
            std::thread::sleep(Duration::from_micros(100));
            v
        })
        .sink("collect", 1, |i| sink.for_subtask(i))
        .unwrap();
    let handle = job.handle();
    let running = tokio::spawn(job.run());

    let behind = wait_for_lag(snap, &topic, |v| v > 0.0).await;
    assert!(behind <= 20_000.0, "lag {behind} above the records written");
    rivus_testkit::wait::until(
        Duration::from_secs(60),
        || async { sink.values().len() >= 20_000 },
        || format!("{} of 20000", sink.values().len()),
    )
    .await;
    wait_for_lag(snap, &topic, |v| v == 0.0).await;
    handle.stop();
    running.await.unwrap().unwrap();
}

/// A producer queue far smaller than what is sent: the sink waits for deliveries to make room
/// (counted), sends the rest in bursts, and every record arrives once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_producer_queue_back_pressures_and_loses_nothing() {
    let Some(bootstrap) = require(Service::Kafka) else {
        return;
    };
    let snap = snapshotter();
    let topic = unique_name("queue-full");
    create_topic(&bootstrap, &topic, 1).await;
    const N: u64 = 20_000;
    let sink = KafkaSink::builder(&bootstrap)
        .topic(&topic)
        .property("queue.buffering.max.messages", "100")
        .property("linger.ms", "20")
        .build(|v: &u64| {
            Ok(OutRecord {
                value: Some(format!("n{v}").into_bytes()),
                ..Default::default()
            })
        })
        .unwrap();
    let job = Pipeline::new("queue-full")
        .source("seq", 1, |i| {
            SequenceSource::new(i, 1, Some(N), Arc::new(AtomicU64::new(0)))
        })
        .sink("kafka", 1, |_| sink.clone())
        .unwrap();
    job.run().await.unwrap();
    let waits = counter(snap, "rivus_kafka_producer_queue_full_total", "queue-full");
    assert!(waits > 0, "the 100-record queue was never full");
    let read = tokio::task::spawn_blocking(move || read_topic(&bootstrap, &topic))
        .await
        .unwrap();
    let values: Vec<String> = read.into_iter().map(|(_, v)| v).collect();
    let expected: Vec<String> = (0..N).map(|v| format!("n{v}")).collect();
    assert_eq!(values.len(), expected.len(), "records in the topic");
    assert!(values == expected, "every record once and in order");
    println!("{N} records through a queue of 100: {waits} waits for room");
}
