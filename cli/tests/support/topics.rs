//! One-partition topics for the format tests: created, and read back from the beginning.
#![allow(dead_code)] // each includer uses a part

use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use rivus_testkit::services::unique_name;

/// Creates a topic of one partition.
pub(crate) async fn topic(kafka: &str, name: &str) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", kafka)
        .create()
        .unwrap();
    let r = admin
        .create_topics(
            &[NewTopic::new(name, 1, TopicReplication::Fixed(1))],
            &AdminOptions::new(),
        )
        .await
        .unwrap();
    assert!(r[0].is_ok(), "{r:?}");
}

/// Every payload of `topic`'s one partition, in order, once `n` arrived (at most 60 s).
pub(crate) fn read(kafka: &str, topic: &str, n: usize) -> Vec<Vec<u8>> {
    read_messages(kafka, topic, n)
        .into_iter()
        .map(|m| m.payload)
        .collect()
}

/// One message read back: key, headers (name → value) and payload.
pub(crate) struct Read {
    pub key: Option<Vec<u8>>,
    pub headers: Vec<(String, Vec<u8>)>,
    pub payload: Vec<u8>,
}

/// Every message of `topic`'s one partition, in order, once `n` arrived (at most 60 s).
pub(crate) fn read_messages(kafka: &str, topic: &str, n: usize) -> Vec<Read> {
    use rdkafka::message::Headers;
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", kafka)
        .set("group.id", unique_name("formats-reader"))
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .unwrap();
    c.assign(&tpl).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut out = Vec::new();
    while out.len() < n {
        assert!(
            Instant::now() < deadline,
            "only {} of {n} messages arrived",
            out.len()
        );
        if let Some(m) = c.poll(Duration::from_millis(200)) {
            let m = m.unwrap();
            let headers = m
                .headers()
                .map(|h| {
                    h.iter()
                        .map(|h| (h.key.to_owned(), h.value.unwrap_or_default().to_vec()))
                        .collect()
                })
                .unwrap_or_default();
            out.push(Read {
                key: m.key().map(<[u8]>::to_vec),
                headers,
                payload: m.payload().unwrap_or_default().to_vec(),
            });
        }
    }
    out
}
