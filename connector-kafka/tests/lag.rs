//! The per-partition lag gauge, from librdkafka's statistics, against the real broker (alone
//! in its file: it installs the process's metrics recorder).

use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use rivus_connector_kafka::{KafkaSource, StartOffsets, ValueDeserializer};
use rivus_core::prelude::*;
use rivus_core::schema::StringSchema;
use rivus_testkit::services::{require, unique_name, Service};
use rivus_testkit::CollectingSink;

mod common;
use common::{create_topic, produce, producer};

/// The lag gauge of `topic`'s partition 0, if reported.
fn lag_of(snap: &Snapshotter, topic: &str) -> Option<f64> {
    let partition = format!("{topic}/0");
    snap.snapshot()
        .into_vec()
        .into_iter()
        .find_map(|(key, _, _, value)| {
            let key = key.key();
            let ours = key.name() == "rivus_kafka_consumer_lag"
                && key
                    .labels()
                    .any(|l| l.key() == "partition" && l.value() == partition);
            match (ours, value) {
                (true, DebugValue::Gauge(g)) => Some(g.into_inner()),
                _ => None,
            }
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
    let recorder = DebuggingRecorder::new();
    let snap = recorder.snapshotter();
    recorder.install().unwrap();

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

    let behind = wait_for_lag(&snap, &topic, |v| v > 0.0).await;
    assert!(behind <= 20_000.0, "lag {behind} above the records written");
    rivus_testkit::wait::until(
        Duration::from_secs(60),
        || async { sink.values().len() >= 20_000 },
        || format!("{} of 20000", sink.values().len()),
    )
    .await;
    wait_for_lag(&snap, &topic, |v| v == 0.0).await;
    handle.stop();
    running.await.unwrap().unwrap();
}
