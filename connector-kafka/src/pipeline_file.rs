//! The `kafka` sections of a pipeline file (feature `pipeline-file`): `[source] type = "kafka"`,
//! `[sink] type = "kafka"` and `[errors.destination] type = "kafka"`, read by serde (unknown
//! fields refused), turned into the connector with JSON records
//! ([`SourceSection`], [`SinkSection`], [`DestinationSection`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use rivus_formats::{Codec, Format, Role, SubjectStrategy};
use rivus_pipeline_file::{
    text_of, CatalogEntry, DestinationSection, Health, SectionContext, SectionMetrics, SinkPlan,
    SinkSection, SourcePlan, SourceSection,
};
use rivus_sdk::error_policy::DeadLetterQueue;
use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::template::Template;
use rivus_sdk::tls::TlsFiles;
use rivus_sdk::{DeliveryGuarantee, Error, Result};

use crate::{
    KafkaConfig, KafkaDeadLetterQueue, KafkaSerializer, KafkaSink, KafkaSource, OutRecord,
    SaslAuth, StartOffsets, StopOffsets, ValueDeserializer,
};
use rivus_sdk::schema::SchemaError;

/// `[source] type = "kafka"`: topics, values decoded by `format` (JSON by default).
#[derive(Debug, Clone, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KafkaSourceSection {
    /// `host:port[,host:port...]`.
    pub bootstrap_servers: String,
    /// The topics to read.
    pub topics: Vec<String>,
    /// The consumer group offsets are committed to (default: the job's name).
    pub group_id: Option<String>,
    /// Where to start without a checkpoint.
    #[serde(default)]
    pub start: KafkaStart,
    /// Stop at the offsets that are the latest at start (a backfill that ends).
    #[serde(default)]
    pub bounded: bool,
    /// Subscribe through the consumer-group protocol: the group's members share the
    /// partitions, each restoring the offsets of those it is given; on by itself for
    /// `rivus run --worker`.
    #[serde(default)]
    pub group_mode: bool,
    /// How values are read: `json` (default), `text`, `bytes`, or a table for a format with
    /// a schema (`{ type = "avro", registry = { url = ... } }`).
    #[serde(default)]
    pub format: Format,
    /// TLS: `{ ca_file, client_cert, client_key }` (PEM files; `{}` trusts the system's
    /// roots). With a client certificate: mutual TLS.
    pub tls: Option<TlsFiles>,
    /// SASL over TLS: `{ mechanism, username, password }` (PLAIN, SCRAM-SHA-256,
    /// SCRAM-SHA-512).
    pub sasl: Option<SaslAuth>,
    /// Any librdkafka setting.
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
}

/// Where a Kafka source starts without a checkpoint.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, rivus_pipeline_file::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum KafkaStart {
    /// The group's committed offsets, else the earliest.
    #[default]
    Committed,
    /// The earliest offsets.
    Earliest,
    /// The latest offsets.
    Latest,
}

/// `[sink] type = "kafka"`: one topic, records written in `format` (JSON by default).
#[derive(Debug, Clone, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KafkaSinkSection {
    /// `host:port[,host:port...]`.
    pub bootstrap_servers: String,
    /// The topic written to: a name, or a template choosing it per record
    /// (`cdc.{source.schema}.{source.table}`; a record it cannot name goes to the error
    /// policy).
    pub topic: String,
    /// The field whose value is the message key; `%kafka.key` is the key a Kafka source read
    /// (or a VRL program set), kept as it came.
    pub key_field: Option<String>,
    /// How the key is written: as text (default) or in a format with a schema (its subject
    /// `{topic}-key`).
    pub key_format: Option<Format>,
    /// The field holding the message's headers, an object of name → text
    /// (`%kafka.headers`: those a Kafka source read, or a VRL program set).
    pub headers_field: Option<String>,
    /// Records are change records (`__deleted`, or Debezium's envelope, as the `postgres-cdc`
    /// source emits them): a write is its row, keyed; a delete a tombstone of its key (for
    /// compacted topics). Needs `key_field`.
    #[serde(default)]
    pub apply_changes: bool,
    /// One transaction per checkpoint (exactly-once) instead of flushing (at-least-once).
    #[serde(default)]
    pub exactly_once: bool,
    /// How values are written: `json` (default), `text`, `bytes`, or a table for a format
    /// with a schema (`{ type = "avro", registry = { url = ... } }`).
    #[serde(default)]
    pub format: Format,
    /// TLS, as for the source.
    pub tls: Option<TlsFiles>,
    /// SASL over TLS, as for the source.
    pub sasl: Option<SaslAuth>,
    /// Any librdkafka setting.
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
}

/// `[errors.destination] type = "kafka"`: dead letters to a topic (acks=all, idempotent).
#[derive(Debug, Clone, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KafkaDestinationSection {
    /// `host:port[,host:port...]`.
    pub bootstrap_servers: String,
    /// The dead-letter topic.
    pub topic: String,
    /// TLS, as for the source.
    pub tls: Option<TlsFiles>,
    /// SASL over TLS, as for the source.
    pub sasl: Option<SaslAuth>,
    /// Any librdkafka setting.
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
}

/// Values (and keys) encoded by the section's formats; a format with a schema resolves it at
/// open.
struct CodecSerializer {
    /// The topic per record, when the section's topic is a template.
    topic: Option<Template>,
    value: Codec,
    /// The key's field, and its codec when not written as text.
    key: Option<(String, Option<Codec>)>,
    /// Records are change records: a write is its row, a delete a tombstone (no value).
    apply_changes: bool,
    /// The field holding the headers.
    headers: Option<String>,
}

#[async_trait::async_trait]
impl KafkaSerializer<Value> for CodecSerializer {
    fn serialize(&self, v: &Value) -> std::result::Result<OutRecord, SchemaError> {
        let mut out = self.change(v)?;
        if let Some((field, None)) = &self.key {
            if field.starts_with('%') {
                // The key from the record's metadata (a Kafka source's, or set by VRL); a
                // record read without a key is written without one.
                out.key =
                    rivus_sdk::metadata::lookup(v, field).and_then(rivus_sdk::metadata::to_bytes);
            }
        }
        if let Some(field) = &self.headers {
            out.headers = headers(v, field)?;
        }
        if let Some(t) = &self.topic {
            let topic = t
                .render(v)
                .map_err(|e| SchemaError::new("kafka", "record", format!("topic `{t}`: {e}")))?;
            out.topic = Some(topic.into_owned());
        }
        Ok(out)
    }

    async fn open(&self, topic: Option<&str>) -> Result<()> {
        // A template's records share one writer schema, whose subject does not come from
        // the topic (checked when the sink is built).
        let topic = topic
            .or(self.topic.as_ref().map(Template::as_str))
            .unwrap_or_default();
        self.value.open_writer(topic, Role::Value).await?;
        if let Some((_, Some(k))) = &self.key {
            k.open_writer(topic, Role::Key).await?;
        }
        Ok(())
    }
}

impl CodecSerializer {
    /// `v` as a record: a change record's row or tombstone with `apply_changes`, else `v`.
    fn change(&self, v: &Value) -> std::result::Result<OutRecord, SchemaError> {
        if self.apply_changes {
            return match rivus_sdk::change::Change::of(&rivus_sdk::metadata::without(v)) {
                // Kafka consumers of change streams expect Debezium's placeholder for a
                // value the change did not carry: it is written back as it came.
                Ok(rivus_sdk::change::Change::Write {
                    mut row, unchanged, ..
                }) => {
                    for c in unchanged {
                        row.insert(c, Value::from(rivus_sdk::change::UNCHANGED));
                    }
                    self.record(&Value::Object(row), true)
                }
                // A key change's first half is a delete of the old key here: a compacted topic
                // must not keep the row under it.
                Ok(rivus_sdk::change::Change::Delete(row))
                | Ok(rivus_sdk::change::Change::MovedOut { key: row, .. }) => {
                    self.record(&Value::Object(row), false)
                }
                Err(e) => Err(SchemaError::new("json", "record", e)),
            };
        }
        self.record(v, true)
    }

    /// `v`'s record: its key, and its value unless it is a tombstone.
    fn record(&self, v: &Value, with_value: bool) -> std::result::Result<OutRecord, SchemaError> {
        let key = match &self.key {
            // The metadata's key is set by `serialize` from the whole record.
            None => None,
            Some((field, None)) if field.starts_with('%') => None,
            Some((field, None)) => Some(v.get(field).map(text_of).unwrap_or_default().into_bytes()),
            Some((field, Some(codec))) => {
                let mut out = Vec::new();
                codec.encode(v.get(field).unwrap_or(&Value::Null), &mut out)?;
                Some(out)
            }
        };
        let value = if with_value {
            let mut value = Vec::new();
            self.value.encode(v, &mut value)?;
            Some(value)
        } else {
            None
        };
        Ok(OutRecord {
            key,
            value,
            ..Default::default()
        })
    }
}

/// The headers in the record's `field`: an object of name → text (or `{"base64": …}`); a
/// null value is no header. Anything else is the record's error.
fn headers(v: &Value, field: &str) -> std::result::Result<Vec<(String, Vec<u8>)>, SchemaError> {
    let refused = |what: String| SchemaError::new("kafka", "record", what);
    match rivus_sdk::metadata::field(v, field) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(m)) => m
            .iter()
            .filter(|(_, h)| !h.is_null())
            .map(|(name, h)| {
                rivus_sdk::metadata::to_bytes(h)
                    .map(|b| (name.clone(), b))
                    .ok_or_else(|| refused(format!("header `{name}` in `{field}` is not text")))
            })
            .collect(),
        Some(_) => Err(refused(format!(
            "`{field}` holds no headers (an object of name → text)"
        ))),
    }
}

/// A topic chosen per record cannot name the subject of a registry format: the records share
/// one writer schema.
fn refuse_topic_subjects(format: Option<&Format>, path: &str) -> Result<()> {
    let spec = match format {
        Some(Format::Avro(s) | Format::JsonSchema(s) | Format::Protobuf(s)) => s,
        _ => return Ok(()),
    };
    if spec.subject.is_none() && spec.subject_strategy != SubjectStrategy::Record {
        return Err(Error::config(
            format!("{path}.subject"),
            "with a topic chosen per record the subject cannot come from the topic: set \
             `subject`, or `subject_strategy = \"record\"`",
        ));
    }
    Ok(())
}

/// Records with their metadata (`@metadata.kafka`): `topic`, `partition`, `offset`,
/// `timestamp` (ms, when set), `key` and `headers` (name → value), bytes as text when UTF-8
/// and `{"base64": …}` otherwise ([`rivus_sdk::metadata::bytes`]). A value that is not a JSON
/// object (a `text` or `bytes` format) has no field to hold it and goes without.
pub struct WithMetadata(pub ValueDeserializer<Codec>);

impl crate::KafkaDeserializer<Value> for WithMetadata {
    fn deserialize(&self, r: &crate::KafkaRecord<'_>) -> std::result::Result<Value, SchemaError> {
        use rivus_sdk::metadata::bytes;
        let mut v = self.0.deserialize(r)?;
        let mut kafka = serde_json::Map::new();
        kafka.insert("topic".into(), Value::from(r.topic));
        kafka.insert("partition".into(), Value::from(r.partition));
        kafka.insert("offset".into(), Value::from(r.offset));
        if let Some(ts) = r.timestamp {
            kafka.insert("timestamp".into(), Value::from(ts));
        }
        if let Some(key) = r.key {
            kafka.insert("key".into(), bytes(key));
        }
        if !r.headers.is_empty() {
            let headers = r
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), v.as_deref().map_or(Value::Null, bytes)))
                .collect();
            kafka.insert("headers".into(), Value::Object(headers));
        }
        rivus_sdk::metadata::attach(&mut v, "kafka", kafka);
        Ok(v)
    }
}

/// The client properties of a section: bootstrap servers, TLS, SASL, then raw properties.
fn client(
    bootstrap_servers: &str,
    tls: &Option<TlsFiles>,
    sasl: &Option<SaslAuth>,
    properties: &BTreeMap<String, String>,
) -> KafkaConfig {
    let mut p = KafkaConfig::new(bootstrap_servers);
    for (k, v) in properties {
        p.set(k, v);
    }
    if let Some(t) = tls {
        p.set_tls(t.clone());
    }
    if let Some(s) = sasl {
        p.set_sasl(s.clone());
    }
    p
}

/// One metadata round trip through the connector's probe.
async fn healthcheck(props: KafkaConfig) -> Health {
    let address = props.endpoint();
    let outcome = match props.validate() {
        Err(e) => Err(e.to_string()),
        Ok(()) => crate::connect::probe(&props, &[], Duration::from_secs(10))
            .await
            .map(|info| format!("{} broker(s), {} topic(s)", info.brokers, info.topics))
            .map_err(|e| e.to_string()),
    };
    Health::new("kafka", address, outcome)
}

impl KafkaSourceSection {
    /// The client properties this section gives.
    pub fn properties(&self) -> KafkaConfig {
        client(
            &self.bootstrap_servers,
            &self.tls,
            &self.sasl,
            &self.properties,
        )
    }

    /// The source, values read in the section's format, bad records to `policy`.
    pub fn source(&self, policy: ErrorPolicy) -> Result<KafkaSource<Value>> {
        self.source_with(policy, false)
    }

    /// [`source`](Self::source); with `metadata`, each record carries its topic, partition,
    /// offset, timestamp, key and headers under `@metadata.kafka` (see [`WithMetadata`]).
    pub fn source_with(&self, policy: ErrorPolicy, metadata: bool) -> Result<KafkaSource<Value>> {
        let mut b = KafkaSource::builder(self.properties())
            .topics(self.topics.clone())
            .start(match self.start {
                KafkaStart::Committed => StartOffsets::Committed {
                    reset_to_earliest: true,
                },
                KafkaStart::Earliest => StartOffsets::Earliest,
                KafkaStart::Latest => StartOffsets::Latest,
            })
            .error_policy(policy);
        if let Some(g) = &self.group_id {
            b = b.group_id(g);
        }
        if self.bounded {
            b = b.stop(StopOffsets::LatestAtStart);
        }
        let codec = Codec::new(&self.format, "format")?;
        let b = b.group_mode(self.group_mode);
        if metadata {
            b.build(WithMetadata(ValueDeserializer(codec)))
        } else {
            b.build(ValueDeserializer(codec))
        }
    }

    /// Reaches the brokers (a metadata request), reading and writing nothing.
    pub async fn healthcheck(&self) -> Health {
        healthcheck(self.properties()).await
    }
}

impl KafkaSinkSection {
    /// The client properties this section gives.
    pub fn properties(&self) -> KafkaConfig {
        client(
            &self.bootstrap_servers,
            &self.tls,
            &self.sasl,
            &self.properties,
        )
    }

    /// The sink, records in the section's format, the key from `key_field`, bad records to
    /// `policy`.
    pub fn sink(&self, policy: ErrorPolicy) -> Result<KafkaSink<Value>> {
        let template = Template::parse(&self.topic).map_err(|e| Error::config("topic", e))?;
        let mut b = KafkaSink::builder(self.properties());
        if let Some(t) = template.fixed() {
            b = b.topic(t);
        } else {
            for (format, path) in [
                (Some(&self.format), "format"),
                (self.key_format.as_ref(), "key_format"),
            ] {
                refuse_topic_subjects(format, path)?;
            }
        }
        let b = b
            .guarantee(if self.exactly_once {
                DeliveryGuarantee::ExactlyOnce
            } else {
                DeliveryGuarantee::AtLeastOnce
            })
            .error_policy(policy);
        let value = Codec::new(&self.format, "format")?;
        let key = match (&self.key_field, &self.key_format) {
            (Some(f), Some(_)) if f.starts_with('%') => {
                return Err(rivus_sdk::Error::config(
                    "key_format",
                    "a key from the record's metadata is written as it came, in no format",
                ))
            }
            (Some(f), k) => Some((
                f.clone(),
                k.as_ref()
                    .map(|k| Codec::new(k, "key_format"))
                    .transpose()?,
            )),
            (None, Some(_)) => {
                return Err(rivus_sdk::Error::config(
                    "key_format",
                    "a key format without `key_field`: which field is the key?",
                ))
            }
            (None, None) => None,
        };
        if self.apply_changes && key.is_none() {
            return Err(rivus_sdk::Error::config(
                "apply_changes",
                "a delete becomes a tombstone of its key: set `key_field`",
            ));
        }
        b.build(CodecSerializer {
            topic: template.fixed().is_none().then_some(template),
            value,
            key,
            apply_changes: self.apply_changes,
            headers: self.headers_field.clone(),
        })
    }

    /// Reaches the brokers (a metadata request), writing nothing.
    pub async fn healthcheck(&self) -> Health {
        healthcheck(self.properties()).await
    }
}

impl KafkaDestinationSection {
    /// The client properties this section gives.
    pub fn properties(&self) -> KafkaConfig {
        client(
            &self.bootstrap_servers,
            &self.tls,
            &self.sasl,
            &self.properties,
        )
    }

    /// The dead-letter queue (connecting at the first letter).
    pub fn queue(&self) -> Result<KafkaDeadLetterQueue> {
        KafkaDeadLetterQueue::new(self.properties(), &self.topic)
    }

    /// Reaches the brokers (a metadata request), writing nothing.
    pub async fn healthcheck(&self) -> Health {
        healthcheck(self.properties()).await
    }
}

#[async_trait::async_trait]
impl SourceSection for KafkaSourceSection {
    const TYPE: &'static str = "kafka";
    const CATALOG: CatalogEntry = CatalogEntry {
        summary: "Kafka topics, values decoded by format",
        guarantee: "exactly-once (offsets in checkpoints, committed to the group on completion)",
    };

    /// The group is the job's name unless the file names one; workers share the partitions
    /// through it (group mode is on by itself for `rivus run --worker`).
    fn build(&self, ctx: &SectionContext) -> Result<SourcePlan> {
        let mut s = self.clone();
        s.group_id.get_or_insert_with(|| ctx.job.clone());
        s.group_mode |= ctx.worker.is_some();
        Ok(SourcePlan::cloned(
            s.source_with(ctx.policy.clone(), ctx.metadata)?,
        ))
    }

    async fn check(&self, _ctx: &SectionContext) -> Health {
        self.healthcheck().await
    }

    fn metrics(&self) -> SectionMetrics {
        SectionMetrics {
            lag: Some("rivus_kafka_consumer_lag"),
        }
    }
}

#[async_trait::async_trait]
impl SinkSection for KafkaSinkSection {
    const TYPE: &'static str = "kafka";
    const CATALOG: CatalogEntry = CatalogEntry {
        summary: "one Kafka topic, records encoded by format",
        guarantee: "at-least-once; exactly-once with transactions (exactly_once = true)",
    };

    fn build(&self, ctx: &SectionContext) -> Result<SinkPlan> {
        Ok(SinkPlan::cloned(self.sink(ctx.policy.clone())?))
    }

    async fn check(&self, _ctx: &SectionContext) -> Health {
        self.healthcheck().await
    }
}

#[async_trait::async_trait]
impl DestinationSection for KafkaDestinationSection {
    const TYPE: &'static str = "kafka";
    const CATALOG: CatalogEntry = CatalogEntry {
        summary: "dead letters to a Kafka topic (acks=all, idempotent producer)",
        guarantee: "each letter acknowledged before its record counts as done",
    };

    fn build(&self, _ctx: &SectionContext) -> Result<Arc<dyn DeadLetterQueue>> {
        Ok(Arc::new(self.queue()?))
    }

    async fn check(&self, _ctx: &SectionContext) -> Health {
        self.healthcheck().await
    }
}
