//! The RabbitMQ source and sink against the real broker started by `dev/services`.

mod common;

use common::{channel, declare};

use lapin::options::{BasicAckOptions, BasicGetOptions, BasicPublishOptions};
use lapin::types::ShortString;
use lapin::{BasicProperties, Channel, Connection};
use rivus_connector_rabbitmq::{OutMessage, RabbitSink, RabbitSource};
use rivus_core::error_policy::ErrorPolicy;
use rivus_core::prelude::*;
use rivus_core::schema::{DeserializationSchema, StringSchema};
use rivus_testkit::services::{require, unique_name, Service};
use rivus_testkit::suite::{SinkExternal, SinkSuite, SourceExternal, SourceSuite};

struct SourceCtx {
    url: String,
    queues: Vec<String>,
    conn: Option<(Connection, Channel)>,
}

#[async_trait]
impl SourceExternal for SourceCtx {
    type Source = RabbitSource<String>;

    async fn prepare(&mut self, splits: usize) -> Result<()> {
        let (conn, ch) = channel(&self.url).await;
        self.queues = (0..splits).map(|_| unique_name("src")).collect();
        for q in &self.queues {
            declare(&ch, q).await;
        }
        self.conn = Some((conn, ch));
        Ok(())
    }

    async fn write(&mut self, split: usize, records: &[String]) -> Result<()> {
        let (_, ch) = self.conn.as_ref().unwrap();
        let mut confirms = Vec::new();
        for r in records {
            let props =
                BasicProperties::default().with_correlation_id(ShortString::from(r.as_str()));
            let c = ch
                .basic_publish(
                    "".into(),
                    self.queues[split].as_str().into(),
                    BasicPublishOptions::default(),
                    r.as_bytes(),
                    props,
                )
                .await
                .unwrap();
            confirms.push(c);
        }
        for c in confirms {
            assert!(c.await.unwrap().is_ack());
        }
        Ok(())
    }

    async fn write_bad(&mut self, split: usize) -> Result<bool> {
        let (_, ch) = self.conn.as_ref().unwrap();
        let props = BasicProperties::default().with_correlation_id(ShortString::from("bad"));
        ch.basic_publish(
            "".into(),
            self.queues[split].as_str().into(),
            BasicPublishOptions::default(),
            &[0xff, 0xfe],
            props,
        )
        .await
        .unwrap()
        .await
        .unwrap();
        Ok(true)
    }

    fn create_source(&self, _: usize, _: usize, policy: ErrorPolicy) -> RabbitSource<String> {
        RabbitSource::builder(&self.url)
            .queues(self.queues.clone())
            .use_correlation_ids(true)
            .prefetch(1000)
            .error_policy(policy)
            .build(|m| StringSchema.deserialize(m.body, &format!("{}#{}", m.queue, m.delivery_tag)))
            .unwrap()
    }

    fn to_test_record(record: &String) -> String {
        record.clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_passes_the_conformance_suite_exactly_once() {
    let Some(url) = require(Service::RabbitMq) else {
        return;
    };
    let mut suite = SourceSuite::new(SourceCtx {
        url,
        queues: vec![],
        conn: None,
    })
    .records_per_split(200);
    if let Err(f) = suite.run_all().await {
        panic!("{f}");
    }
}

struct SinkCtx {
    url: String,
    queue: String,
}

#[async_trait]
impl SinkExternal for SinkCtx {
    type Record = String;
    type Sink = RabbitSink<String>;

    async fn prepare(&mut self) -> Result<()> {
        self.queue = unique_name("sink");
        let (conn, ch) = channel(&self.url).await;
        declare(&ch, &self.queue).await;
        let _ = conn.close(200, "".into()).await;
        Ok(())
    }

    fn create_sink(&self, _: usize, _: usize, policy: ErrorPolicy) -> RabbitSink<String> {
        RabbitSink::builder(&self.url)
            .routing_key(&self.queue)
            .confirm_window(200)
            .error_policy(policy)
            .build(|v: &String| {
                Ok(OutMessage {
                    body: v.clone().into_bytes(),
                    correlation_id: Some(v.clone()),
                    ..Default::default()
                })
            })
            .unwrap()
    }

    fn to_record(test: &str) -> String {
        test.to_owned()
    }

    async fn read_back(&self) -> Result<Vec<String>> {
        let (conn, ch) = channel(&self.url).await;
        let mut out = Vec::new();
        while let Some(m) = ch
            .basic_get(self.queue.as_str().into(), BasicGetOptions::default())
            .await
            .unwrap()
        {
            out.push(String::from_utf8_lossy(&m.delivery.data).into_owned());
            m.delivery.ack(BasicAckOptions::default()).await.unwrap();
        }
        let _ = conn.close(200, "".into()).await;
        Ok(out)
    }

    fn preserves_order(&self) -> bool {
        false // several sink subtasks publish into one queue
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sink_passes_the_conformance_suite() {
    let Some(url) = require(Service::RabbitMq) else {
        return;
    };
    let mut suite = SinkSuite::new(SinkCtx {
        url,
        queue: String::new(),
    })
    .records_per_split(200);
    if let Err(f) = suite.run_all().await {
        panic!("{f}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unroutable_messages_go_to_the_error_policy() {
    let Some(url) = require(Service::RabbitMq) else {
        return;
    };
    let sink = RabbitSink::builder(&url)
        .routing_key(unique_name("no-such-queue"))
        .build(|v: &u64| {
            Ok(OutMessage {
                body: v.to_string().into_bytes(),
                ..Default::default()
            })
        })
        .unwrap();
    let err = rivus_testkit::run_sequence_into("unroutable", 3, 1, |_| sink.clone())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("unroutable"), "{err}");
}

#[test]
fn bad_configuration_is_refused_with_the_field_path() {
    let err = RabbitSource::builder("amqp://h")
        .build(|_| Ok(()))
        .unwrap_err();
    assert!(err.to_string().contains("source.rabbitmq.queues"), "{err}");
    let err = RabbitSource::builder("amqp://h")
        .queues(["q"])
        .prefetch(0)
        .build(|_| Ok(()))
        .unwrap_err();
    assert!(
        err.to_string().contains("source.rabbitmq.prefetch"),
        "{err}"
    );
    let err = RabbitSink::builder("amqp://h")
        .confirm_window(0)
        .build(|_: &u8| Ok(OutMessage::default()))
        .unwrap_err();
    assert!(
        err.to_string().contains("sink.rabbitmq.confirm_window"),
        "{err}"
    );
}
