//! The `rabbitmq` sections of a pipeline file (feature `pipeline-file`): `[source]`, `[sink]`
//! and `[errors.destination]` with `type = "rabbitmq"`, read by serde (unknown fields refused),
//! turned into the connector with bodies in the section's `format` (JSON by default), and checked by a healthcheck that connects and
//! closes.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use rivus_formats::{Codec, Format, Role};
use rivus_pipeline_file::{
    field_text, CatalogEntry, DestinationSection, Health, SectionContext, SinkPlan, SinkSection,
    SourcePlan, SourceSection,
};
use rivus_sdk::error_policy::DeadLetterQueue;
use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::schema::SchemaError;
use rivus_sdk::secrets::redact_url;
use rivus_sdk::template::Template;
use rivus_sdk::tls::TlsFiles;
use rivus_sdk::Result;

use crate::{
    AmqpConfig, OutMessage, QueueDeclare, RabbitDeadLetterQueue, RabbitSink, RabbitSource,
};

/// `[source] type = "rabbitmq"`: queues, bodies decoded by `format` (JSON by default).
#[derive(Debug, Clone, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RabbitSourceSection {
    /// `amqp://` or `amqps://` URI.
    pub uri: String,
    /// For `amqps://`: `{ ca_file, client_cert, client_key }` (PEM files).
    #[serde(default)]
    pub tls: TlsFiles,
    /// The queues to consume (spread over the subtasks).
    pub queues: Vec<String>,
    /// Unacknowledged messages per subtask (500).
    pub prefetch: Option<u16>,
    /// Declare the queues (durable) instead of using existing ones.
    #[serde(default)]
    pub declare: bool,
    /// Drop redeliveries by correlation id (exactly-once).
    #[serde(default)]
    pub correlation_ids: bool,
    /// How bodies are read: `json` (default), `text` or `bytes`.
    #[serde(default)]
    pub format: Format,
}

/// `[sink] type = "rabbitmq"`: bodies are the records in `format` (JSON by default).
#[derive(Debug, Clone, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RabbitSinkSection {
    /// `amqp://` or `amqps://` URI.
    pub uri: String,
    /// For `amqps://`: `{ ca_file, client_cert, client_key }` (PEM files).
    #[serde(default)]
    pub tls: TlsFiles,
    /// The exchange (default: the default exchange, routing straight to a queue).
    #[serde(default)]
    pub exchange: String,
    /// Routing key (for the default exchange: the queue): a name, or a template choosing it
    /// per record (`orders.{region}`, `{source.table}`).
    #[serde(default)]
    pub routing_key: String,
    /// Set the correlation id from this field (a rivus RabbitMQ source can then drop
    /// redeliveries).
    pub correlation_id_field: Option<String>,
    /// How bodies are written: `json` (default), `text` or `bytes`; the
    /// content type says which.
    #[serde(default)]
    pub format: Format,
}

/// `[errors.destination] type = "rabbitmq"`: dead letters to a queue (persistent, confirmed);
/// the queue must exist.
#[derive(Debug, Clone, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RabbitDestinationSection {
    /// `amqp://` or `amqps://` URI.
    pub uri: String,
    /// For `amqps://`: `{ ca_file, client_cert, client_key }` (PEM files).
    #[serde(default)]
    pub tls: TlsFiles,
    /// The dead-letter queue.
    pub queue: String,
}

fn config(uri: &str, tls: &TlsFiles) -> AmqpConfig {
    AmqpConfig {
        tls: tls.clone(),
        ..AmqpConfig::new(uri)
    }
}

/// Connects (TLS and login included), then closes.
async fn healthcheck(uri: &str, tls: &TlsFiles) -> Health {
    let outcome = async {
        let config = AmqpConfig {
            connect_timeout: Duration::from_secs(5),
            ..config(uri, tls)
        };
        config.validate().map_err(|e| e.to_string())?;
        let conn = config.connect().await.map_err(|e| e.to_string())?;
        crate::config::close_quietly(&conn, "rivus check").await;
        Ok("connected".to_owned())
    }
    .await;
    Health::new("rabbitmq", redact_url(uri), outcome)
}

impl RabbitSourceSection {
    /// The source, bodies read in the section's format, bad records to `policy`.
    pub fn source(&self, policy: ErrorPolicy) -> Result<RabbitSource<Value>> {
        self.source_with(policy, false)
    }

    /// [`source`](Self::source); with `metadata`, each record carries its queue, routing
    /// key, redelivered flag, and correlation and message ids (when set) under
    /// `@metadata.rabbitmq` ([`rivus_sdk::metadata`]).
    pub fn source_with(&self, policy: ErrorPolicy, metadata: bool) -> Result<RabbitSource<Value>> {
        let mut b = RabbitSource::builder(config(&self.uri, &self.tls))
            .queues(self.queues.clone())
            .use_correlation_ids(self.correlation_ids)
            .error_policy(policy);
        if let Some(n) = self.prefetch {
            b = b.prefetch(n);
        }
        if self.declare {
            b = b.declare(QueueDeclare::durable());
        }
        let codec = Codec::new(&self.format, "format")?;
        b.build(move |m| {
            let position = format!("queue {} delivery {}", m.queue, m.delivery_tag);
            let mut v = codec.decode_blocking(m.body, &position)?;
            if metadata {
                let mut r = serde_json::Map::new();
                r.insert("queue".into(), Value::from(m.queue));
                r.insert("routing_key".into(), Value::from(m.routing_key));
                r.insert("redelivered".into(), Value::from(m.redelivered));
                if let Some(c) = m.correlation_id {
                    r.insert("correlation_id".into(), Value::from(c));
                }
                if let Some(id) = m.message_id {
                    r.insert("message_id".into(), Value::from(id));
                }
                rivus_sdk::metadata::attach(&mut v, "rabbitmq", r);
            }
            Ok(v)
        })
    }

    /// Connects to the broker, then closes.
    pub async fn healthcheck(&self) -> Health {
        healthcheck(&self.uri, &self.tls).await
    }
}

impl RabbitSinkSection {
    /// The sink, bodies in the section's format, routing key and correlation id from fields
    /// when set.
    pub fn sink(&self, policy: ErrorPolicy) -> Result<RabbitSink<Value>> {
        let codec = Codec::new(&self.format, "format")?;
        // The subject of a format with a schema: `{routing key}-value` (or the exchange's).
        let target = if self.routing_key.is_empty() {
            self.exchange.clone()
        } else {
            self.routing_key.clone()
        };
        let cid_field = self.correlation_id_field.clone();
        let template = Template::parse(&self.routing_key)
            .map_err(|e| rivus_sdk::Error::config("routing_key", e))?;
        let fixed = template.fixed().unwrap_or_default().to_owned();
        let per_record = template.fixed().is_none().then_some(template);
        RabbitSink::builder(config(&self.uri, &self.tls))
            .exchange(&self.exchange)
            .routing_key(fixed)
            .error_policy(policy)
            .build(move |v: &Value| {
                codec.prepare_blocking(&target, Role::Value)?;
                let mut body = Vec::new();
                codec.encode(v, &mut body)?;
                Ok(OutMessage {
                    routing_key: per_record
                        .as_ref()
                        .map(|t| {
                            t.render(v).map(|k| k.into_owned()).map_err(|e| {
                                SchemaError::new(
                                    "record",
                                    "record",
                                    format!("routing key `{t}`: {e}"),
                                )
                            })
                        })
                        .transpose()?,
                    correlation_id: cid_field.as_deref().map(|f| field_text(v, f)).transpose()?,
                    body,
                    content_type: Some(codec.content_type().into()),
                    ..OutMessage::default()
                })
            })
    }

    /// Connects to the broker, then closes.
    pub async fn healthcheck(&self) -> Health {
        healthcheck(&self.uri, &self.tls).await
    }
}

impl RabbitDestinationSection {
    /// The dead-letter queue (connecting at the first letter).
    pub fn queue(&self) -> Result<RabbitDeadLetterQueue> {
        RabbitDeadLetterQueue::new(config(&self.uri, &self.tls), &self.queue)
    }

    /// Connects to the broker, then closes.
    pub async fn healthcheck(&self) -> Health {
        healthcheck(&self.uri, &self.tls).await
    }
}

#[async_trait::async_trait]
impl SourceSection for RabbitSourceSection {
    const TYPE: &'static str = "rabbitmq";
    const CATALOG: CatalogEntry = CatalogEntry {
        summary: "RabbitMQ queues, bodies decoded by format",
        guarantee: "at-least-once; exactly-once with correlation_ids = true",
    };

    fn build(&self, ctx: &SectionContext) -> Result<SourcePlan> {
        Ok(SourcePlan::cloned(
            self.source_with(ctx.policy.clone(), ctx.metadata)?,
        ))
    }

    async fn check(&self, _ctx: &SectionContext) -> Health {
        self.healthcheck().await
    }
}

#[async_trait::async_trait]
impl SinkSection for RabbitSinkSection {
    const TYPE: &'static str = "rabbitmq";
    const CATALOG: CatalogEntry = CatalogEntry {
        summary: "a RabbitMQ exchange, bodies encoded by format",
        guarantee: "at-least-once (publisher confirms)",
    };

    fn build(&self, ctx: &SectionContext) -> Result<SinkPlan> {
        Ok(SinkPlan::cloned(self.sink(ctx.policy.clone())?))
    }

    async fn check(&self, _ctx: &SectionContext) -> Health {
        self.healthcheck().await
    }
}

#[async_trait::async_trait]
impl DestinationSection for RabbitDestinationSection {
    const TYPE: &'static str = "rabbitmq";
    const CATALOG: CatalogEntry = CatalogEntry {
        summary: "dead letters to a RabbitMQ queue that exists (persistent, confirmed)",
        guarantee: "each letter confirmed before its record counts as done",
    };

    fn build(&self, _ctx: &SectionContext) -> Result<Arc<dyn DeadLetterQueue>> {
        Ok(Arc::new(self.queue()?))
    }

    async fn check(&self, _ctx: &SectionContext) -> Health {
        self.healthcheck().await
    }
}
