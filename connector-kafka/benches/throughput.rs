//! Kafka throughput, rivus next to the raw rdkafka client in the same run, same settings:
//! source → null sink vs a raw `BaseConsumer` poll loop, and sequence → sink vs a raw
//! `ThreadedProducer` send loop; 100-byte and 1 KiB records. Needs the broker from
//! `dev/services up kafka`.
//!
//! `cargo bench -p rivus-connector-kafka --bench throughput` (`RIVUS_BENCH_RECORDS` to change N;
//! `RIVUS_BENCH_KAFKA_LISTENER=sasl_ssl` or `mtls` runs both sides over the broker's SCRAM-SHA-512
//! or mutual-TLS listener, with the same client settings).

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{DefaultProducerContext, ThreadedProducer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use rivus_connector_kafka::{KafkaConfig, KafkaSink, OutRecord, SaslAuth};
use rivus_sdk::prelude::*;
use rivus_sdk::tls::TlsFiles;
use rivus_testkit::bench::{compare, rounds, runs_raw, selected};
use rivus_testkit::services::{kafka_sasl_user, tls_dir, Service};
use rivus_testkit::SequenceSource;

mod common;

const PARTITIONS: i32 = 2;
const PRODUCER_SETTINGS: [(&str, &str); 3] = [
    ("linger.ms", "5"),
    ("batch.num.messages", "10000"),
    ("queue.buffering.max.messages", "200000"),
];

use rivus_testkit::services::unique_name as unique;

/// Where both sides connect: the listener chosen by `RIVUS_BENCH_KAFKA_LISTENER`, as client
/// properties (TLS and SASL included). Topics are made and removed on the plaintext listener.
#[derive(Clone)]
struct Listener {
    props: KafkaConfig,
}

impl Listener {
    fn from_env() -> Self {
        let which = std::env::var("RIVUS_BENCH_KAFKA_LISTENER").unwrap_or_default();
        let ca = || TlsFiles {
            ca_file: Some(tls_dir().join("ca.crt")),
            ..TlsFiles::default()
        };
        let props = match which.as_str() {
            "" | "plaintext" => KafkaConfig::new(Service::Kafka.url()),
            "sasl_ssl" => {
                let (user, password) = kafka_sasl_user();
                let mut p = KafkaConfig::new(Service::KafkaSasl.url());
                p.set_tls(ca())
                    .set_sasl(SaslAuth::new("SCRAM-SHA-512", user, password));
                p
            }
            "mtls" => {
                let mut p = KafkaConfig::new(Service::KafkaSsl.url());
                p.set_tls(TlsFiles {
                    client_cert: Some(tls_dir().join("client.crt")),
                    client_key: Some(tls_dir().join("client.key")),
                    ..ca()
                });
                p
            }
            other => {
                panic!("RIVUS_BENCH_KAFKA_LISTENER: `{other}` is not plaintext, sasl_ssl or mtls")
            }
        };
        println!("listener: {}", props.endpoint());
        Listener { props }
    }

    /// The raw client's configuration: the same properties the connector gives librdkafka.
    fn raw(&self) -> ClientConfig {
        self.props.client_config(&[])
    }
}

async fn create_topic(bootstrap: &str, topic: &str) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    admin
        .create_topics(
            &[NewTopic::new(topic, PARTITIONS, TopicReplication::Fixed(1))],
            &AdminOptions::new(),
        )
        .await
        .unwrap();
}

/// Deletes the measured topics: rounds of a million records add up to gigabytes on the broker.
async fn delete_topics(bootstrap: &str, topics: &[&str]) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    admin
        .delete_topics(topics, &AdminOptions::new())
        .await
        .unwrap();
}

fn raw_produce(l: &Listener, topic: &str, n: u64, size: usize) -> f64 {
    // Timed from the client's creation, as the rivus job is timed from its start.
    let t = Instant::now();
    let mut c = l.raw();
    for (k, v) in PRODUCER_SETTINGS {
        c.set(k, v);
    }
    // What the at-least-once sink sets on its producer (no duplicates or reordering on retries).
    c.set("enable.idempotence", "true");
    let p: ThreadedProducer<DefaultProducerContext> = c.create().unwrap();
    common::send_all(&p, topic, n, size);
    n as f64 / t.elapsed().as_secs_f64()
}

async fn rivus_produce(l: &Listener, topic: &str, n: u64, size: usize) -> f64 {
    let mut b = KafkaSink::builder(l.props.clone()).topic(topic);
    for (k, v) in PRODUCER_SETTINGS {
        b = b.property(k, v);
    }
    let payload = Arc::new(vec![b'x'; size]);
    let sink = b
        .build(move |i: &u64| {
            Ok(OutRecord {
                key: Some(i.to_le_bytes().to_vec()),
                value: Some(payload.to_vec()),
                ..Default::default()
            })
        })
        .unwrap();
    let job = Pipeline::new("bench-sink")
        .source("seq", 1, |i| {
            SequenceSource::new(i, 1, Some(n), Arc::new(AtomicU64::new(0)))
        })
        .sink("kafka", 1, |_| sink.clone())
        .unwrap();
    let t = Instant::now();
    job.run().await.unwrap();
    n as f64 / t.elapsed().as_secs_f64()
}

fn raw_consume(l: &Listener, topic: &str, n: u64) -> f64 {
    let t = Instant::now();
    // The source's default prefetch, given to the raw consumer too (same settings).
    let mut cfg = l.raw();
    for (k, v) in rivus_connector_kafka::PREFETCH {
        cfg.set(k, v);
    }
    let c: BaseConsumer = cfg
        .set("group.id", unique("raw"))
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    c.assign(&tpl).unwrap();
    let mut seen = 0u64;
    let mut bytes = 0usize;
    while seen < n {
        if let Some(Ok(m)) = c.poll(Duration::from_millis(100)) {
            use rdkafka::Message;
            bytes += m.payload().map_or(0, <[u8]>::len);
            seen += 1;
        }
    }
    std::hint::black_box(bytes);
    n as f64 / t.elapsed().as_secs_f64()
}

async fn rivus_consume(l: &Listener, topic: &str, n: u64) -> f64 {
    let props = std::env::var("RIVUS_BENCH_CONSUMER_PROPS").unwrap_or_default();
    common::read_to_end("bench-source", l.props.clone(), &props, topic, n).await
}

fn main() {
    let bootstrap = Service::Kafka.url();
    let l = Listener::from_env();
    let base: u64 = std::env::var("RIVUS_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500_000);
    let rt = common::runtime();
    let rounds = rounds(3);
    for size in [100usize, 1024] {
        let n = if size == 100 { base } else { base / 2 };
        let topic = |who: &str, round: usize| format!("bench-{who}-{size}-{round}");
        let stamp = unique("t");
        let topics: Vec<(String, String)> = (0..rounds)
            .map(|r| {
                (
                    format!("{stamp}-{}", topic("raw", r)),
                    format!("{stamp}-{}", topic("rivus", r)),
                )
            })
            .collect();
        for (a, b) in &topics {
            rt.block_on(create_topic(&bootstrap, a));
            rt.block_on(create_topic(&bootstrap, b));
        }
        let produce = format!("produce {n} records of {size} B, {PARTITIONS} partitions");
        let consume = format!("consume {n} records of {size} B, {PARTITIONS} partitions");
        compare(
            &produce,
            "msgs/s",
            rounds,
            |r| raw_produce(&l, &topics[r].0, n, size),
            |r| rt.block_on(rivus_produce(&l, &topics[r].1, n, size)),
        );
        if selected(&consume) && !(selected(&produce) && runs_raw()) {
            // The raw producer did not write: the consume comparison still needs the records.
            for (t, _) in &topics {
                raw_produce(&l, t, n, size);
            }
        }
        // Both read the topics the raw producer wrote.
        compare(
            &consume,
            "msgs/s",
            rounds,
            |r| raw_consume(&l, &topics[r].0, n),
            |r| rt.block_on(rivus_consume(&l, &topics[r].0, n)),
        );
        let all: Vec<&str> = topics
            .iter()
            .flat_map(|(a, b)| [a.as_str(), b.as_str()])
            .collect();
        rt.block_on(delete_topics(&bootstrap, &all));
    }
}
