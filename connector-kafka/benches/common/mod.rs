//! What the Kafka benches share: topics made and removed, a raw producer's send loop, and a
//! job that reads a topic to its end.
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

/// Counts a record's value bytes: a deserializer that costs next to nothing.
pub(crate) struct Len;

impl rivus_connector_kafka::KafkaDeserializer<usize> for Len {
    fn deserialize(
        &self,
        r: &rivus_connector_kafka::KafkaRecord<'_>,
    ) -> Result<usize, rivus_sdk::schema::SchemaError> {
        Ok(r.value.map_or(0, <[u8]>::len))
    }
}

/// Reads `topic` from its start to the offsets that are the latest at start through `config`
/// with the librdkafka properties `props` (`k=v,k=v`): records/s over `n` records, which
/// must all arrive.
pub(crate) async fn read_to_end(
    name: &str,
    config: impl Into<rivus_connector_kafka::KafkaConfig>,
    props: &str,
    topic: &str,
    n: u64,
) -> f64 {
    use rivus_connector_kafka::{KafkaSource, StartOffsets, StopOffsets};
    let mut b = KafkaSource::builder(config);
    for kv in props.split(',').filter(|s| !s.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap();
        b = b.property(k, v);
    }
    let source = b
        .topics([topic])
        .start(StartOffsets::Earliest)
        .stop(StopOffsets::LatestAtStart)
        .build(Len)
        .unwrap();
    let count = rivus_testkit::CountingSink::new();
    let job = rivus_sdk::Pipeline::new(name)
        .source("kafka", 1, |_| source.clone())
        .sink("null", 1, |_| count.clone())
        .unwrap();
    let t = std::time::Instant::now();
    job.run().await.unwrap();
    assert_eq!(count.count(), n, "every record read");
    n as f64 / t.elapsed().as_secs_f64()
}

/// Kafka records copied as they are, key and value: a source of Kafka → Kafka jobs.
pub(crate) struct Copy;

impl rivus_connector_kafka::KafkaDeserializer<rivus_connector_kafka::OutRecord> for Copy {
    fn deserialize(
        &self,
        r: &rivus_connector_kafka::KafkaRecord<'_>,
    ) -> Result<rivus_connector_kafka::OutRecord, rivus_sdk::schema::SchemaError> {
        Ok(rivus_connector_kafka::OutRecord {
            key: r.key.map(<[u8]>::to_vec),
            value: r.value.map(<[u8]>::to_vec),
            ..Default::default()
        })
    }
}

/// The median of `v`, with its least and greatest.
pub(crate) fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

/// A runtime of two worker threads, as the jobs of the benches run on.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}
