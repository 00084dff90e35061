//! Test helpers: a confirming channel and durable queues, with lapin directly.
#![allow(dead_code)]

use lapin::options::{
    BasicAckOptions, BasicGetOptions, BasicPublishOptions, ConfirmSelectOptions,
    QueueDeclareOptions,
};
use lapin::types::{FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};
use rivus_connector_rabbitmq::{AmqpConfig, OutMessage, RabbitSink, RabbitSource};
use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::prelude::*;
use rivus_sdk::schema::{DeserializationSchema, StringSchema};
use rivus_testkit::services::unique_name;
use rivus_testkit::suite::{SinkExternal, SourceExternal};

/// A connection and a channel with publisher confirms on.
pub(crate) async fn channel(url: &str) -> (Connection, Channel) {
    try_channel(url).await.unwrap()
}

/// [`channel`], or why the broker could not give one.
pub(crate) async fn try_channel(url: &str) -> Result<(Connection, Channel), lapin::Error> {
    let conn = Connection::connect(url, ConnectionProperties::default()).await?;
    let ch = conn.create_channel().await?;
    ch.confirm_select(ConfirmSelectOptions::default()).await?;
    Ok((conn, ch))
}

/// Publishes each of `bodies` to `queue`, persistent, with the body as its correlation id,
/// and waits for every confirm: whether the broker took them all.
pub(crate) async fn publish_with_ids(
    ch: &Channel,
    queue: &str,
    bodies: impl IntoIterator<Item = String>,
) -> Result<bool, lapin::Error> {
    let mut confirms = Vec::new();
    for body in bodies {
        let props = BasicProperties::default()
            .with_delivery_mode(2)
            .with_correlation_id(ShortString::from(body.as_str()));
        confirms.push(
            ch.basic_publish(
                "".into(),
                queue.into(),
                BasicPublishOptions::default(),
                body.as_bytes(),
                props,
            )
            .await?,
        );
    }
    let mut all = true;
    for c in confirms {
        all &= c.await?.is_ack();
    }
    Ok(all)
}

/// How many messages `queue` holds (a passive declare); `None` while the broker cannot be
/// reached.
pub(crate) async fn depth(url: &str, queue: &str) -> Option<u64> {
    let conn = Connection::connect(url, ConnectionProperties::default())
        .await
        .ok()?;
    let ch = conn.create_channel().await.ok()?;
    let q = ch
        .queue_declare(
            queue.into(),
            QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .ok()?;
    let _ = conn.close(200, "done".into()).await;
    Some(u64::from(q.message_count()))
}

/// Declares the durable queue `q`.
pub(crate) async fn declare(ch: &Channel, q: &str) {
    ch.queue_declare(
        q.into(),
        QueueDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .unwrap();
}

/// The source under the testkit's suite: queues written through `url` (plain AMQP), the
/// connector connecting with `config` (plain or AMQPS).
pub(crate) struct SourceCtx {
    pub url: String,
    pub config: AmqpConfig,
    pub queues: Vec<String>,
    pub conn: Option<(Connection, Channel)>,
}

impl SourceCtx {
    pub(crate) fn new(url: &str, config: impl Into<AmqpConfig>) -> Self {
        SourceCtx {
            url: url.to_owned(),
            config: config.into(),
            queues: vec![],
            conn: None,
        }
    }
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
        RabbitSource::builder(self.config.clone())
            .queues(self.queues.clone())
            .use_correlation_ids(true)
            .prefetch(1000)
            .error_policy(policy)
            .build(|m| StringSchema.deserialize(m.body, &format!("{}#{}", m.queue, m.delivery_tag)))
            .unwrap()
    }

    fn to_test_record(&self, record: &String) -> String {
        record.clone()
    }
    /// Deliveries are acknowledged to the broker when a checkpoint completes.
    fn commits_positions(&self) -> bool {
        true
    }
}

/// The sink under the testkit's suite: the connector publishes with `config`, the queue is
/// read back through `url`.
pub(crate) struct SinkCtx {
    pub url: String,
    pub config: AmqpConfig,
    pub queue: String,
}

impl SinkCtx {
    pub(crate) fn new(url: &str, config: impl Into<AmqpConfig>) -> Self {
        SinkCtx {
            url: url.to_owned(),
            config: config.into(),
            queue: String::new(),
        }
    }
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
        RabbitSink::builder(self.config.clone())
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

    fn to_record(&self, test: &str) -> String {
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
