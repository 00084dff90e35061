//! Test helpers with rdkafka directly: topics, a producer, producing to a partition.
#![allow(dead_code)]

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use std::collections::BTreeMap;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use rivus_testkit::services::unique_name as unique;

pub(crate) mod suites;

pub(crate) async fn create_topic(bootstrap: &str, topic: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let r = admin
        .create_topics(
            &[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))],
            &AdminOptions::new(),
        )
        .await
        .unwrap();
    assert!(r[0].is_ok(), "{r:?}");
}

/// Kafka, a fault proxy on the listener that advertises the proxy's address, and that address
/// (`None` when skipping was asked for).
#[allow(dead_code)] // the fault tests use it
pub(crate) async fn behind_a_fault_proxy(
) -> Option<(String, rivus_testkit::fault_proxy::FaultProxy, String)> {
    use rivus_testkit::services::{kafka_proxy_addr, require, Service};
    let (Some(bootstrap), Some(listener)) =
        (require(Service::Kafka), require(Service::KafkaProxied))
    else {
        return None;
    };
    let proxy = rivus_testkit::fault_proxy::FaultProxy::start_on(kafka_proxy_addr(), &listener)
        .await
        .unwrap();
    let through = proxy.addr().to_string();
    Some((bootstrap, proxy, through))
}

pub(crate) fn producer(bootstrap: &str) -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "5")
        .create()
        .unwrap()
}

pub(crate) async fn produce(p: &FutureProducer, topic: &str, partition: i32, values: &[Vec<u8>]) {
    let sends: Vec<_> = values
        .iter()
        .map(|v| {
            p.send(
                FutureRecord::<(), [u8]>::to(topic)
                    .partition(partition)
                    .payload(v),
                Duration::from_secs(30),
            )
        })
        .collect();
    for s in futures::future::join_all(sends).await {
        s.unwrap();
    }
}

/// Every value in `topic` (all partitions), read with read_committed up to the current end.
pub(crate) fn read_topic(bootstrap: &str, topic: &str) -> Vec<(i32, String)> {
    read_topic_bytes(bootstrap, topic)
        .into_iter()
        .map(|(p, v)| (p, String::from_utf8_lossy(&v).into_owned()))
        .collect()
}

/// [`read_topic`] with the values' bytes.
pub(crate) fn read_topic_bytes(bootstrap: &str, topic: &str) -> Vec<(i32, Vec<u8>)> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", unique("reader"))
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let md = c
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    let mut ends = BTreeMap::new();
    for p in md.topics()[0].partitions() {
        let (lo, hi) = c
            .fetch_watermarks(topic, p.id(), Duration::from_secs(10))
            .unwrap();
        if hi > lo {
            ends.insert(p.id(), hi);
            tpl.add_partition_offset(topic, p.id(), Offset::Offset(lo))
                .unwrap();
        }
    }
    if ends.is_empty() {
        return vec![];
    }
    c.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    // Transaction markers take offsets too: a partition is read when the consumer's position
    // (which moves past them) reaches the high watermark.
    let all_read = |c: &BaseConsumer| {
        c.position().is_ok_and(|pos| {
            ends.iter().all(|(p, end)| {
                pos.elements().iter().any(|e| {
                    e.partition() == *p && matches!(e.offset(), Offset::Offset(o) if o >= *end)
                })
            })
        })
    };
    while !all_read(&c) && std::time::Instant::now() < deadline {
        if let Some(Ok(m)) = c.poll(Duration::from_millis(100)) {
            out.push((m.partition(), m.payload().unwrap_or_default().to_vec()));
        }
    }
    out
}

/// Reads `topic` read_committed and checks that it holds `n` distinct values, none twice;
/// `when` says after what, in the failure message.
pub(crate) async fn assert_exactly_once(bootstrap: &str, topic: &str, n: usize, when: &str) {
    let (b, t) = (bootstrap.to_owned(), topic.to_owned());
    let got = tokio::task::spawn_blocking(move || read_topic(&b, &t))
        .await
        .unwrap();
    let mut values: Vec<String> = got.into_iter().map(|(_, v)| v).collect();
    values.sort();
    let total = values.len();
    values.dedup();
    assert_eq!(total - values.len(), 0, "duplicated records {when}");
    assert_eq!(values.len(), n, "every input record {when}");
}
