//! What the Kafka benches share: topics made and removed, and a raw producer's send loop.
#![allow(dead_code)]

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::ClientConfig;

fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap()
}

/// Creates `topics` with two partitions each (blocking).
pub(crate) fn create_topics(bootstrap: &str, topics: &[&str]) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let new: Vec<NewTopic<'_>> = topics
        .iter()
        .map(|t| NewTopic::new(t, 2, TopicReplication::Fixed(1)))
        .collect();
    rt.block_on(admin(bootstrap).create_topics(&new, &AdminOptions::new()))
        .unwrap();
}

/// Deletes `topics` (blocking): rounds of millions of records add up on the broker.
pub(crate) fn delete_topics(bootstrap: &str, topics: &[&str]) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _ = rt.block_on(admin(bootstrap).delete_topics(topics, &AdminOptions::new()));
}

/// Sends `n` records (key: the index; value: `size` bytes) and waits for every delivery,
/// retrying while the local queue is full.
pub(crate) fn send_all<C: rdkafka::producer::ProducerContext>(
    p: &ThreadedProducer<C>,
    topic: &str,
    n: u64,
    size: usize,
) where
    C::DeliveryOpaque: Default,
{
    let payload = vec![b'x'; size];
    for i in 0..n {
        let key = i.to_le_bytes();
        let mut rec =
            BaseRecord::<[u8], [u8], C::DeliveryOpaque>::with_opaque_to(topic, Default::default())
                .key(&key[..])
                .payload(&payload[..]);
        while let Err((_, back)) = p.send(rec) {
            rec = back;
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    p.flush(Duration::from_secs(120)).unwrap();
}

/// Fills `topic` with `n` records of `size` bytes from a raw producer.
pub(crate) fn fill(bootstrap: &str, topic: &str, n: u64, size: usize) {
    let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "5")
        .set("batch.num.messages", "10000")
        .create()
        .unwrap();
    send_all(&p, topic, n, size);
}
