//! [`KafkaSink`]: many sends in flight through a `ThreadedProducer`; a full local queue
//! back-pressures; at-least-once by flushing and checking every delivery report before a
//! checkpoint completes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::ClientContext;
use rivus_core::error_policy::{ErrorHandler, ErrorPolicy};
use rivus_core::prelude::*;

use crate::config::KafkaProperties;
use crate::record::KafkaSerializer;

/// What the sink promises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkDelivery {
    /// Send and forget: a failure may lose records.
    None,
    /// Every record sent before a checkpoint is acknowledged by the broker before that
    /// checkpoint completes; after a failure, records since the last checkpoint are sent again.
    AtLeastOnce,
}

/// Counts delivery reports; keeps the first failure.
#[derive(Default)]
struct Deliveries {
    acked: AtomicU64,
    failed: AtomicU64,
    first_error: Mutex<Option<String>>,
}

struct SinkClientContext(Arc<Deliveries>);

impl ClientContext for SinkClientContext {}

impl ProducerContext for SinkClientContext {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(_) => {
                self.0.acked.fetch_add(1, Ordering::Relaxed);
            }
            Err((e, m)) => {
                use rdkafka::Message;
                self.0.failed.fetch_add(1, Ordering::Relaxed);
                let mut first = self.0.first_error.lock().unwrap();
                if first.is_none() {
                    *first = Some(format!("{}/{}: {e}", m.topic(), m.partition()));
                }
            }
        }
    }
}

struct Settings<T> {
    props: KafkaProperties,
    topic: Option<String>,
    delivery: SinkDelivery,
    policy: ErrorPolicy,
    flush_timeout: Duration,
    serializer: Arc<dyn KafkaSerializer<T>>,
}

/// Builds a [`KafkaSink`].
pub struct KafkaSinkBuilder {
    props: KafkaProperties,
    topic: Option<String>,
    delivery: SinkDelivery,
    policy: ErrorPolicy,
    flush_timeout: Duration,
}

impl std::fmt::Debug for KafkaSinkBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSinkBuilder")
            .field("props", &self.props)
            .field("topic", &self.topic)
            .field("delivery", &self.delivery)
            .finish()
    }
}

impl KafkaSinkBuilder {
    /// The topic of records that do not name one.
    pub fn topic(mut self, topic: impl Into<String>) -> Self {
        self.topic = Some(topic.into());
        self
    }

    /// The delivery guarantee (default at-least-once).
    pub fn delivery(mut self, d: SinkDelivery) -> Self {
        self.delivery = d;
        self
    }

    /// What to do with records that cannot be serialized or that the client refuses
    /// (too large, unknown topic) (default: fail).
    pub fn error_policy(mut self, policy: ErrorPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Longest wait for outstanding deliveries at a checkpoint (default 60 s).
    pub fn flush_timeout(mut self, d: Duration) -> Self {
        self.flush_timeout = d;
        self
    }

    /// Any librdkafka producer property (`linger.ms`, `compression.codec`, `acks`, ...).
    pub fn property(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.props.set(key, value);
        self
    }

    /// Checks the settings and returns the sink (clone it into each subtask).
    pub fn build<T: Send + 'static>(
        self,
        serializer: impl KafkaSerializer<T>,
    ) -> Result<KafkaSink<T>> {
        self.props.validate("sink.kafka")?;
        if self.topic.as_deref().is_some_and(|t| t.trim().is_empty()) {
            return Err(Error::config("sink.kafka.topic", "must not be empty"));
        }
        if self.props.get("transactional.id").is_some() {
            return Err(Error::config(
                "sink.kafka.transactional.id",
                "transactions are managed by the sink's delivery mode, not set by hand",
            ));
        }
        if self.delivery == SinkDelivery::AtLeastOnce
            && self.props.get("acks").is_some_and(|a| a == "0")
        {
            return Err(Error::config(
                "sink.kafka.acks",
                "acks=0 cannot give at-least-once",
            ));
        }
        Ok(KafkaSink {
            settings: Arc::new(Settings {
                props: self.props,
                topic: self.topic,
                delivery: self.delivery,
                policy: self.policy,
                flush_timeout: self.flush_timeout,
                serializer: Arc::new(serializer),
            }),
            producer: None,
            deliveries: Arc::default(),
            handler: None,
            sent: None,
        })
    }
}

/// A Kafka sink. Clone it into each subtask: `stream.sink("kafka", 2, |_| sink.clone())`.
pub struct KafkaSink<T> {
    settings: Arc<Settings<T>>,
    producer: Option<Arc<ThreadedProducer<SinkClientContext>>>,
    deliveries: Arc<Deliveries>,
    handler: Option<ErrorHandler>,
    sent: Option<metrics::Counter>,
}

impl<T> std::fmt::Debug for KafkaSink<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSink")
            .field("props", &self.settings.props)
            .field("topic", &self.settings.topic)
            .field("delivery", &self.settings.delivery)
            .finish()
    }
}

impl<T> Clone for KafkaSink<T> {
    fn clone(&self) -> Self {
        KafkaSink {
            settings: Arc::clone(&self.settings),
            producer: None,
            deliveries: Arc::default(),
            handler: None,
            sent: None,
        }
    }
}

impl KafkaSink<()> {
    /// Starts a builder for a sink writing to `bootstrap_servers`.
    pub fn builder(bootstrap_servers: impl Into<String>) -> KafkaSinkBuilder {
        KafkaSinkBuilder {
            props: KafkaProperties::new(bootstrap_servers),
            topic: None,
            delivery: SinkDelivery::AtLeastOnce,
            policy: ErrorPolicy::Fail,
            flush_timeout: Duration::from_secs(60),
        }
    }
}

impl<T: Send + 'static> KafkaSink<T> {
    fn producer(&self) -> &Arc<ThreadedProducer<SinkClientContext>> {
        self.producer.as_ref().expect("opened")
    }

    /// Waits for every outstanding delivery, then fails if any delivery failed.
    async fn flush(&self) -> Result<()> {
        let producer = Arc::clone(self.producer());
        let timeout = self.settings.flush_timeout;
        tokio::task::spawn_blocking(move || producer.flush(timeout))
            .await
            .map_err(|e| Error::connector("kafka sink: flush", e.to_string()))?
            .map_err(|e| Error::connector(format!("kafka sink: flush within {timeout:?}"), e))?;
        if self.settings.delivery == SinkDelivery::AtLeastOnce {
            if let Some(e) = self.deliveries.first_error.lock().unwrap().take() {
                let n = self.deliveries.failed.swap(0, Ordering::Relaxed);
                return Err(Error::connector(
                    "kafka sink: delivery",
                    format!("{n} records failed, first: {e}"),
                ));
            }
        }
        Ok(())
    }

    async fn send_one(&self, value: T) -> Result<()> {
        let handler = self.handler.as_ref().expect("opened");
        let rec = match self.settings.serializer.serialize(&value) {
            Ok(r) => r,
            Err(e) => return handler.handle(&e.position, &e, &[]).await,
        };
        let Some(topic) = rec.topic.as_deref().or(self.settings.topic.as_deref()) else {
            return handler
                .handle(
                    "(no topic)",
                    "the record names no topic and the sink has no default topic",
                    rec.value.as_deref().unwrap_or_default(),
                )
                .await;
        };
        let mut record: BaseRecord<'_, [u8], [u8], ()> = BaseRecord::to(topic);
        if !rec.headers.is_empty() {
            // Headers cost a C allocation per record: only when there are some.
            let mut headers = OwnedHeaders::new_with_capacity(rec.headers.len());
            for (k, v) in &rec.headers {
                headers = headers.insert(Header {
                    key: k,
                    value: Some(v),
                });
            }
            record = record.headers(headers);
        }
        if let Some(k) = &rec.key {
            record = record.key(k.as_slice());
        }
        if let Some(v) = &rec.value {
            record = record.payload(v.as_slice());
        }
        if let Some(p) = rec.partition {
            record = record.partition(p);
        }
        if let Some(ts) = rec.timestamp {
            record = record.timestamp(ts);
        }
        let producer = self.producer();
        loop {
            match producer.send(record) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    // The local queue is full: the broker is slower than us. Wait: back-pressure.
                    record = back;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                Err((e, _)) => {
                    let position = format!(
                        "{topic}/{}",
                        rec.partition.map_or("-".into(), |p| p.to_string())
                    );
                    return handler
                        .handle(position, e, rec.value.as_deref().unwrap_or_default())
                        .await;
                }
            }
        }
    }
}

#[async_trait]
impl<T: Send + 'static> RichFunction for KafkaSink<T> {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        let s = &self.settings;
        let overrides: &[(&str, &str)] = match s.delivery {
            SinkDelivery::AtLeastOnce => &[("enable.idempotence", "true")],
            SinkDelivery::None => &[],
        };
        let producer: ThreadedProducer<SinkClientContext> = s
            .props
            .client_config(overrides)
            .create_with_context(SinkClientContext(Arc::clone(&self.deliveries)))
            .map_err(|e| s.props.build_error("producer", e))?;
        self.producer = Some(Arc::new(producer));
        self.handler = Some(ErrorHandler::new(s.policy.clone(), ctx.display_name()));
        self.sent = Some(ctx.metrics().counter("rivus_kafka_records_sent_total"));
        Ok(())
    }

    async fn close(&mut self) -> Result<()> {
        if let Some(p) = self.producer.take() {
            tokio::task::spawn_blocking(move || {
                let _ = p.flush(Duration::from_secs(10));
                drop(p);
            })
            .await
            .map_err(|e| Error::connector("kafka sink: closing the producer", e.to_string()))?;
        }
        Ok(())
    }
}

#[async_trait]
impl<T: Send + 'static> CheckpointedFunction for KafkaSink<T> {
    type State = ();

    async fn snapshot_state(&mut self, _: u64) -> Result<()> {
        if self.settings.delivery == SinkDelivery::AtLeastOnce {
            self.flush().await?;
        }
        Ok(())
    }
}

#[async_trait]
impl<T: Send + 'static> CheckpointListener for KafkaSink<T> {}

#[async_trait]
impl<T: Send + 'static> SinkFunction<T> for KafkaSink<T> {
    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        match self.settings.delivery {
            SinkDelivery::None => DeliveryGuarantee::AtMostOnce,
            SinkDelivery::AtLeastOnce => DeliveryGuarantee::AtLeastOnce,
        }
    }

    async fn invoke(&mut self, value: T, _: &SinkContext) -> Result<()> {
        self.send_one(value).await?;
        if let Some(c) = &self.sent {
            c.increment(1);
        }
        Ok(())
    }

    async fn invoke_batch(&mut self, values: Vec<T>, _: &mut SinkContext) -> Result<()> {
        let n = values.len() as u64;
        for v in values {
            self.send_one(v).await?;
        }
        if let Some(c) = &self.sent {
            c.increment(n);
        }
        Ok(())
    }

    async fn finish(&mut self) -> Result<()> {
        self.flush().await
    }
}
