//! Test helpers with rdkafka directly: topics, a producer, producing to a partition.
#![allow(dead_code)]

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::ClientConfig;

pub async fn create_topic(bootstrap: &str, topic: &str, partitions: i32) {
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

pub fn producer(bootstrap: &str) -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "5")
        .create()
        .unwrap()
}

pub async fn produce(p: &FutureProducer, topic: &str, partition: i32, values: &[Vec<u8>]) {
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
