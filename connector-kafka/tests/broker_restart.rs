//! The broker stops and starts again mid-stream (alone in this file: no other test runs while
//! the broker is down). Kafka → Kafka at-least-once keeps running through it and loses nothing.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use rivus_connector_kafka::{KafkaSink, KafkaSource, OutRecord, StartOffsets, ValueDeserializer};
use rivus_sdk::prelude::*;
use rivus_sdk::schema::StringSchema;
use rivus_testkit::services::{require, unique_name, Service};

async fn produce(bootstrap: &str, topic: &str, range: std::ops::Range<u32>) {
    let p: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let sends: Vec<_> = range
        .map(|i| {
            let v = format!("m{i:06}");
            let p = p.clone();
            let topic = topic.to_owned();
            async move {
                p.send(
                    FutureRecord::<(), String>::to(&topic).payload(&v),
                    Duration::from_secs(60),
                )
                .await
            }
        })
        .collect();
    for r in futures::future::join_all(sends).await {
        r.unwrap();
    }
}

/// Distinct values in `topic` so far.
fn distinct(bootstrap: &str, topic: &str) -> BTreeSet<String> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", unique_name("check"))
        .create()
        .unwrap();
    let (lo, hi) = match c.fetch_watermarks(topic, 0, Duration::from_secs(10)) {
        Ok(w) => w,
        Err(_) => return BTreeSet::new(),
    };
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Offset(lo))
        .unwrap();
    c.assign(&tpl).unwrap();
    let mut out = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut pos = lo;
    while pos < hi && Instant::now() < deadline {
        if let Some(Ok(m)) = c.poll(Duration::from_millis(200)) {
            pos = m.offset() + 1;
            out.insert(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
        }
    }
    out
}

async fn wait_for_count(bootstrap: &str, topic: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let (b, t) = (bootstrap.to_owned(), topic.to_owned());
        let got = tokio::task::spawn_blocking(move || distinct(&b, &t).len())
            .await
            .unwrap();
        if got >= n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "only {got} of {n} records arrived"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_restart_mid_stream_loses_nothing() {
    let Some(bootstrap) = require(Service::Kafka) else {
        return;
    };
    let (from, to) = (unique_name("restart-from"), unique_name("restart-to"));
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    admin
        .create_topics(
            &[
                NewTopic::new(&from, 1, TopicReplication::Fixed(1)),
                NewTopic::new(&to, 1, TopicReplication::Fixed(1)),
            ],
            &AdminOptions::new(),
        )
        .await
        .unwrap();
    produce(&bootstrap, &from, 0..5000).await;

    let source = KafkaSource::builder(&bootstrap)
        .topics([from.clone()])
        .start(StartOffsets::Earliest)
        .build(ValueDeserializer(StringSchema))
        .unwrap();
    let sink = KafkaSink::builder(&bootstrap)
        .topic(&to)
        .flush_timeout(Duration::from_secs(120))
        .build(|v: &String| {
            Ok(OutRecord {
                value: Some(v.clone().into_bytes()),
                ..Default::default()
            })
        })
        .unwrap();
    let job = Pipeline::new("restart")
        .checkpointing(
            CheckpointConfig::new(
                Duration::from_millis(200),
                Arc::new(MemoryStateBackend::new()),
            )
            .with_timeout(Duration::from_secs(180)),
        )
        .source("from", 1, |_| source.clone())
        .sink("to", 1, |_| sink.clone())
        .unwrap();
    let handle = job.handle();
    let running = tokio::spawn(job.run());

    wait_for_count(&bootstrap, &to, 5000).await;
    rivus_testkit::restart::bounce("kafka", Duration::from_secs(2)).await;
    produce(&bootstrap, &from, 5000..10000).await;
    wait_for_count(&bootstrap, &to, 10000).await;

    assert!(
        !running.is_finished(),
        "the job kept running through the restart"
    );
    handle.stop();
    running.await.unwrap().unwrap();
    let (b, t) = (bootstrap.clone(), to.clone());
    let got = tokio::task::spawn_blocking(move || distinct(&b, &t))
        .await
        .unwrap();
    let want: BTreeSet<String> = (0..10000).map(|i| format!("m{i:06}")).collect();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "every record arrived");
}
