//! The testkit's suites for the Kafka source and sink, on any listener of the dev broker: a
//! [`Conn`] says which one and how the connector authenticates; topics are made and read
//! back through the plaintext listener.

use rdkafka::producer::FutureProducer;
use rivus_connector_kafka::{
    KafkaSink, KafkaSinkBuilder, KafkaSource, KafkaSourceBuilder, OutRecord, SaslAuth,
    StartOffsets, ValueDeserializer,
};
use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::prelude::*;
use rivus_sdk::schema::StringSchema;
use rivus_sdk::tls::TlsFiles;
use rivus_testkit::services::unique_name as unique;
use rivus_testkit::suite::{SinkExternal, SourceExternal};

use super::{create_topic, produce, producer, read_topic};

/// Where the connector under test connects, and how.
#[derive(Clone, Debug)]
pub(crate) struct Conn {
    /// The plaintext listener, for the test's own admin, producer and reader.
    pub admin: String,
    /// The listener the connector uses.
    pub bootstrap: String,
    pub tls: Option<TlsFiles>,
    pub sasl: Option<SaslAuth>,
}

impl Conn {
    /// The plaintext listener for everything.
    pub(crate) fn plain(bootstrap: &str) -> Self {
        Conn {
            admin: bootstrap.to_owned(),
            bootstrap: bootstrap.to_owned(),
            tls: None,
            sasl: None,
        }
    }

    pub(crate) fn source(&self) -> KafkaSourceBuilder {
        let mut b = KafkaSource::builder(&self.bootstrap);
        if let Some(t) = &self.tls {
            b = b.tls(t.clone());
        }
        if let Some(s) = &self.sasl {
            b = b.sasl(s.clone());
        }
        b
    }

    pub(crate) fn sink(&self) -> KafkaSinkBuilder {
        let mut b = KafkaSink::builder(&self.bootstrap);
        if let Some(t) = &self.tls {
            b = b.tls(t.clone());
        }
        if let Some(s) = &self.sasl {
            b = b.sasl(s.clone());
        }
        b
    }
}

pub(crate) struct SourceCtx {
    pub conn: Conn,
    pub topic: String,
    pub producer: FutureProducer,
}

impl SourceCtx {
    pub(crate) fn new(conn: Conn) -> Self {
        SourceCtx {
            producer: producer(&conn.admin),
            conn,
            topic: String::new(),
        }
    }
}

#[async_trait]
impl SourceExternal for SourceCtx {
    type Source = KafkaSource<String>;

    async fn prepare(&mut self, splits: usize) -> Result<()> {
        self.topic = unique("src");
        create_topic(&self.conn.admin, &self.topic, splits as i32).await;
        Ok(())
    }

    async fn write(&mut self, split: usize, records: &[String]) -> Result<()> {
        let values: Vec<Vec<u8>> = records.iter().map(|r| r.as_bytes().to_vec()).collect();
        produce(&self.producer, &self.topic, split as i32, &values).await;
        Ok(())
    }

    async fn write_bad(&mut self, split: usize) -> Result<bool> {
        produce(
            &self.producer,
            &self.topic,
            split as i32,
            &[vec![0xff, 0xfe, 0x00]],
        )
        .await;
        Ok(true)
    }

    fn create_source(&self, _: usize, _: usize, policy: ErrorPolicy) -> KafkaSource<String> {
        self.conn
            .source()
            .topics([self.topic.clone()])
            .group_id(format!("{}-group", self.topic))
            .start(StartOffsets::Committed {
                reset_to_earliest: true,
            })
            .error_policy(policy)
            .build(ValueDeserializer(StringSchema))
            .unwrap()
    }

    fn to_test_record(&self, record: &String) -> String {
        record.clone()
    }

    /// Offsets are committed to the group when a checkpoint completes.
    fn commits_positions(&self) -> bool {
        true
    }
}

pub(crate) struct SinkCtx {
    pub conn: Conn,
    pub topic: String,
    pub delivery: DeliveryGuarantee,
}

impl SinkCtx {
    pub(crate) fn new(conn: Conn, delivery: DeliveryGuarantee) -> Self {
        SinkCtx {
            conn,
            topic: String::new(),
            delivery,
        }
    }
}

#[async_trait]
impl SinkExternal for SinkCtx {
    type Record = String;
    type Sink = KafkaSink<String>;

    async fn prepare(&mut self) -> Result<()> {
        self.topic = unique("sink");
        create_topic(&self.conn.admin, &self.topic, 3).await;
        Ok(())
    }

    fn create_sink(&self, _: usize, _: usize, policy: ErrorPolicy) -> KafkaSink<String> {
        self.conn
            .sink()
            .topic(&self.topic)
            .guarantee(self.delivery)
            .transactional_id_prefix(self.topic.clone())
            .error_policy(policy)
            .property("linger.ms", "5")
            .build(|v: &String| {
                // Key by split, so each split's records share a partition and keep their order.
                let split = v.split('-').next().unwrap_or("").to_owned();
                Ok(OutRecord {
                    key: Some(split.into_bytes()),
                    value: Some(v.clone().into_bytes()),
                    ..Default::default()
                })
            })
            .unwrap()
    }

    fn to_record(&self, test: &str) -> String {
        test.to_owned()
    }

    async fn read_back(&self) -> Result<Vec<String>> {
        let (b, t) = (self.conn.admin.clone(), self.topic.clone());
        let got = tokio::task::spawn_blocking(move || read_topic(&b, &t))
            .await
            .unwrap();
        Ok(got.into_iter().map(|(_, v)| v).collect())
    }
}
