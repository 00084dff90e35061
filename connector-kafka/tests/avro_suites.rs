//! The testkit's source and sink suites for Kafka with values in Avro (Confluent's wire format,
//! the schema in the dev registry): the source decodes with `rivus-formats`' codec on its
//! consumer thread, the sink encodes with it after registering its schema at open. A bad record
//! (not in the wire format) goes to the error policy like any other.

mod common;

use rdkafka::producer::FutureProducer;
use rivus_connector_kafka::{
    KafkaSerializer, KafkaSink, KafkaSource, OutRecord, StartOffsets, ValueDeserializer,
};
use rivus_formats::{Codec, Format, Role};
use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::prelude::*;
use rivus_sdk::schema::SchemaError;
use rivus_sdk::DeliveryGuarantee;
use rivus_testkit::services::{require, unique_name as unique, Service};
use rivus_testkit::suite::{SinkExternal, SinkSuite, SourceExternal, SourceSuite};
use serde_json::{json, Value};

use common::suites::Conn;
use common::{create_topic, produce, producer, read_topic_bytes};

const SCHEMA: &str = r#"{"type": "record", "name": "T", "namespace": "suite", "fields": [{"name": "v", "type": "string"}]}"#;

fn codec(registry: &str) -> Codec {
    let f: Format = serde_json::from_value(json!({
        "type": "avro", "registry": {"url": registry}, "schema": SCHEMA
    }))
    .unwrap();
    Codec::new(&f, "suite.format").unwrap()
}

struct AvroSource {
    conn: Conn,
    registry: String,
    topic: String,
    producer: FutureProducer,
    writer: Codec,
}

#[async_trait]
impl SourceExternal for AvroSource {
    type Source = KafkaSource<Value>;

    async fn prepare(&mut self, splits: usize) -> Result<()> {
        self.topic = unique("avro-src");
        create_topic(&self.conn.admin, &self.topic, splits as i32).await;
        self.writer = codec(&self.registry);
        self.writer.open_writer(&self.topic, Role::Value).await
    }

    async fn write(&mut self, split: usize, records: &[String]) -> Result<()> {
        let mut values = Vec::with_capacity(records.len());
        for r in records {
            let mut out = Vec::new();
            self.writer.encode(&json!({ "v": r }), &mut out)?;
            values.push(out);
        }
        produce(&self.producer, &self.topic, split as i32, &values).await;
        Ok(())
    }

    async fn write_bad(&mut self, split: usize) -> Result<bool> {
        produce(
            &self.producer,
            &self.topic,
            split as i32,
            &[b"{\"v\": 1}".to_vec()],
        )
        .await;
        Ok(true)
    }

    fn create_source(&self, _: usize, _: usize, policy: ErrorPolicy) -> KafkaSource<Value> {
        self.conn
            .source()
            .topics([self.topic.clone()])
            .group_id(format!("{}-group", self.topic))
            .start(StartOffsets::Committed {
                reset_to_earliest: true,
            })
            .error_policy(policy)
            .build(ValueDeserializer(codec(&self.registry)))
            .unwrap()
    }

    fn to_test_record(&self, record: &Value) -> String {
        record["v"].as_str().unwrap_or_default().to_owned()
    }

    fn commits_positions(&self) -> bool {
        true
    }
}

/// Values in Avro, keyed by split (each split's records keep their order in one partition).
struct AvroValues(Codec);

#[async_trait]
impl KafkaSerializer<Value> for AvroValues {
    fn serialize(&self, v: &Value) -> std::result::Result<OutRecord, SchemaError> {
        let text = v["v"].as_str().unwrap_or_default();
        let mut value = Vec::new();
        self.0.encode(v, &mut value)?;
        Ok(OutRecord {
            key: Some(text.split('-').next().unwrap_or("").as_bytes().to_vec()),
            value: Some(value),
            ..Default::default()
        })
    }

    async fn open(&self, topic: Option<&str>) -> Result<()> {
        self.0
            .open_writer(topic.unwrap_or_default(), Role::Value)
            .await
    }
}

struct AvroSink {
    conn: Conn,
    registry: String,
    topic: String,
    delivery: DeliveryGuarantee,
}

#[async_trait]
impl SinkExternal for AvroSink {
    type Record = Value;
    type Sink = KafkaSink<Value>;

    async fn prepare(&mut self) -> Result<()> {
        self.topic = unique("avro-sink");
        create_topic(&self.conn.admin, &self.topic, 3).await;
        Ok(())
    }

    fn create_sink(&self, _: usize, _: usize, policy: ErrorPolicy) -> KafkaSink<Value> {
        self.conn
            .sink()
            .topic(&self.topic)
            .guarantee(self.delivery)
            .transactional_id_prefix(self.topic.clone())
            .error_policy(policy)
            .property("linger.ms", "5")
            .build(AvroValues(codec(&self.registry)))
            .unwrap()
    }

    fn to_record(&self, test: &str) -> Value {
        json!({ "v": test })
    }

    async fn read_back(&self) -> Result<Vec<String>> {
        let (b, t) = (self.conn.admin.clone(), self.topic.clone());
        let got = tokio::task::spawn_blocking(move || read_topic_bytes(&b, &t))
            .await
            .unwrap();
        let reader = codec(&self.registry);
        let mut out = Vec::with_capacity(got.len());
        for (_, v) in got {
            let r = reader.decode(&v, &"read back").await?;
            out.push(r["v"].as_str().unwrap_or_default().to_owned());
        }
        Ok(out)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avro_source_passes_the_conformance_suite() {
    let (Some(bootstrap), Some(registry)) =
        (require(Service::Kafka), require(Service::SchemaRegistry))
    else {
        return;
    };
    let conn = Conn::plain(&bootstrap);
    let ctx = AvroSource {
        producer: producer(&conn.admin),
        writer: codec(&registry),
        conn,
        registry,
        topic: String::new(),
    };
    let mut suite = SourceSuite::new(ctx).records_per_split(100);
    if let Err(f) = suite.run_all().await {
        panic!("{f}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avro_sink_passes_the_conformance_suite_at_least_once_and_exactly_once() {
    let (Some(bootstrap), Some(registry)) =
        (require(Service::Kafka), require(Service::SchemaRegistry))
    else {
        return;
    };
    for delivery in [
        DeliveryGuarantee::AtLeastOnce,
        DeliveryGuarantee::ExactlyOnce,
    ] {
        let mut suite = SinkSuite::new(AvroSink {
            conn: Conn::plain(&bootstrap),
            registry: registry.clone(),
            topic: String::new(),
            delivery,
        })
        .records_per_split(100);
        if let Err(f) = suite.run_all().await {
            panic!("{delivery:?}: {f}");
        }
    }
}
