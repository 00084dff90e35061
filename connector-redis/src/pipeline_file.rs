//! The Redis sections of a pipeline file (feature `pipeline-file`): `[source] type =
//! "redis-streams"`, `[sink] type = "redis"` and `[errors.destination] type = "redis"`, read by
//! serde (unknown fields refused), turned into the connector with JSON records, and checked by
//! a healthcheck that sends a PING.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use rivus_formats::{Codec, Format, Role};
use rivus_pipeline_file::{
    text_of, CatalogEntry, DestinationSection, Health, SectionContext, SinkPlan, SinkSection,
    SourcePlan, SourceSection,
};
use rivus_sdk::bulk::BulkConfig;
use rivus_sdk::error_policy::DeadLetterQueue;
use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::options::{Batch, BatchDefaults, Retry};
use rivus_sdk::schema::SchemaError;
use rivus_sdk::secrets::redact_url;
use rivus_sdk::template::Template;
use rivus_sdk::tls::TlsFiles;
use rivus_sdk::{Error, Result};

use crate::{RedisCommand, RedisConfig, RedisDeadLetterQueue, RedisSink, RedisStreamsSource};

/// `[source] type = "redis-streams"`: streams through a consumer group.
#[derive(Debug, Clone, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RedisStreamsSection {
    /// `redis://` or `rediss://` URL (with `cluster`: seed nodes, separated by commas).
    pub url: String,
    /// A Redis Cluster.
    #[serde(default)]
    pub cluster: bool,
    /// For `rediss://`: `{ ca_file, client_cert, client_key }` (PEM files).
    #[serde(default)]
    pub tls: TlsFiles,
    /// The streams to read (spread over the subtasks).
    pub streams: Vec<String>,
    /// The consumer group.
    pub group: String,
    /// The entry field holding the record (in `format`, JSON by default); without it the
    /// record is the entry's fields as text.
    pub json_field: Option<String>,
    /// How `json_field` is read: `json` (default), `text`, `bytes`, or a format with a schema
    /// (`{ type = "avro", registry = { url = ... } }`).
    #[serde(default)]
    pub format: Format,
    /// Worker mode: entries pending longer than this are claimed from the consumer holding
    /// them (a worker that died) and processed (default `60s`).
    #[serde(default, deserialize_with = "rivus_pipeline_file::opt_duration")]
    #[schemars(with = "Option<rivus_pipeline_file::DurationText>")]
    pub claim_idle: Option<std::time::Duration>,
}

/// `[sink] type = "redis"`: one command per record.
#[derive(Debug, Clone, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RedisSinkSection {
    /// `redis://` or `rediss://` URL (with `cluster`: seed nodes, separated by commas).
    pub url: String,
    /// A Redis Cluster.
    #[serde(default)]
    pub cluster: bool,
    /// For `rediss://`: `{ ca_file, client_cert, client_key }` (PEM files).
    #[serde(default)]
    pub tls: TlsFiles,
    /// The command sent for each record.
    pub command: RedisCommandName,
    /// The key; `{field}` is replaced by the record's field (`order:{id}`).
    pub key: String,
    /// The hash field for `hset`, same templating.
    pub field: Option<String>,
    /// Expiry of the key, for `set` and `hset`.
    pub ttl_secs: Option<u64>,
    /// How values are written (every command but `xadd`, which writes fields): `json`
    /// (default), `text` or `bytes`.
    #[serde(default)]
    pub format: Format,
    /// Cap of the stream, for `xadd`.
    pub maxlen: Option<usize>,
    /// When a pipeline of commands is sent: `max_records` commands, `max_bytes`, `timeout`
    /// after the oldest, `in_flight` pipelines at once.
    #[serde(default)]
    pub batch: Batch<RedisBatch>,
    /// How a pipeline that failed in a way worth retrying (a lost connection, a cluster
    /// redirect storm) is retried.
    #[serde(default)]
    pub retry: Retry,
}

/// The Redis sink's batching defaults: [`RedisSink::default_bulk`]'s.
#[derive(Debug, Clone, Copy)]
pub struct RedisBatch;

impl BatchDefaults for RedisBatch {
    const NAME: &'static str = "Redis";
    fn defaults() -> BulkConfig {
        RedisSink::default_bulk()
    }
}

/// The commands a `redis` sink sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RedisCommandName {
    /// `SET key <record as JSON>` (with `ttl_secs`).
    Set,
    /// `HSET key field <record as JSON>` (with `ttl_secs`).
    Hset,
    /// `XADD key * <field> <value>...` — the record's fields as text (with `maxlen`).
    Xadd,
    /// `LPUSH key <record as JSON>`.
    Lpush,
    /// `RPUSH key <record as JSON>`.
    Rpush,
    /// `SADD key <record as JSON>`.
    Sadd,
    /// `PUBLISH key <record as JSON>`.
    Publish,
}

/// `[errors.destination] type = "redis"`: dead letters to a stream (`XADD`).
#[derive(Debug, Clone, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RedisDestinationSection {
    /// `redis://` or `rediss://` URL.
    pub url: String,
    /// For `rediss://`: `{ ca_file, client_cert, client_key }` (PEM files).
    #[serde(default)]
    pub tls: TlsFiles,
    /// The dead-letter stream.
    pub stream: String,
}

/// One server, or a cluster whose seed nodes `url` lists (commas), with TLS files.
fn endpoint(url: &str, cluster: bool, tls: &TlsFiles) -> RedisConfig {
    let e = if cluster {
        RedisConfig::cluster(url.split(',').map(str::trim).filter(|u| !u.is_empty()))
    } else {
        RedisConfig::new(url)
    };
    e.tls(tls.clone())
}

/// Connects (TLS and AUTH included) and sends a PING.
async fn healthcheck(kind: &'static str, url: &str, endpoint: RedisConfig) -> Health {
    let outcome = async {
        let endpoint = endpoint
            .connect_timeout(Duration::from_secs(5))
            .response_timeout(Duration::from_secs(5));
        let mut con = endpoint.open().await.map_err(|e| e.to_string())?;
        redis::cmd("PING")
            .query_async::<String>(&mut con)
            .await
            .map_err(|e| redact_url(&e.to_string()))
    }
    .await;
    Health::new(kind, redact_url(url), outcome)
}

impl RedisStreamsSection {
    /// The endpoint this section names.
    pub fn endpoint(&self) -> RedisConfig {
        endpoint(&self.url, self.cluster, &self.tls)
    }

    /// The source, records from `json_field` (or the entry's fields as text), bad records to
    /// `policy`.
    pub fn source(&self, policy: ErrorPolicy) -> Result<RedisStreamsSource<Value>> {
        let json_field = self.json_field.clone();
        if json_field.is_none() && self.format != Format::default() {
            return Err(Error::config(
                "format",
                "a format reads the field named by `json_field`; none is set",
            ));
        }
        let codec = Codec::new(&self.format, "format")?;
        let mut builder = RedisStreamsSource::builder(self.endpoint());
        if let Some(d) = self.claim_idle {
            builder = builder.claim_idle(d);
        }
        builder
            .streams(self.streams.clone())
            .group(&self.group)
            .error_policy(policy)
            .build(move |e| {
                let position = format!("{}#{}", e.stream, e.id);
                match &json_field {
                    Some(f) => {
                        let raw = e.field(f).ok_or_else(|| {
                            SchemaError::new("redis", &position, format!("no field `{f}`"))
                        })?;
                        codec.decode_blocking(raw, &position)
                    }
                    None => Ok(Value::Object(
                        e.fields
                            .iter()
                            .map(|(k, v)| {
                                let text = String::from_utf8_lossy(v).into_owned();
                                (k.clone(), Value::from(text))
                            })
                            .collect(),
                    )),
                }
            })
    }

    /// Connects and sends a PING.
    pub async fn healthcheck(&self) -> Health {
        healthcheck("redis-streams", &self.url, self.endpoint()).await
    }
}

impl RedisSinkSection {
    /// The sink: one `command` per record, key (and hash field) templated from the record.
    pub fn sink(&self, policy: ErrorPolicy) -> Result<RedisSink<Value>> {
        if self.command == RedisCommandName::Hset && self.field.is_none() {
            return Err(Error::config("field", "hset needs a hash field"));
        }
        let codec = Codec::new(&self.format, "format")?;
        let parse =
            |text: &str, path: &str| Template::parse(text).map_err(|e| Error::config(path, e));
        let key_template = parse(&self.key, "key")?;
        let field_template = parse(self.field.as_deref().unwrap_or_default(), "field")?;
        let render = |t: &Template, v: &Value| {
            t.render(v)
                .map(|s| s.into_owned())
                .map_err(|e| SchemaError::new("record", "record", format!("`{t}`: {e}")))
        };
        let (command, key, ttl, maxlen) =
            (self.command, self.key.clone(), self.ttl_secs, self.maxlen);
        RedisSink::builder(endpoint(&self.url, self.cluster, &self.tls))
            .error_policy(policy)
            .bulk(self.batch.bulk(&self.retry))
            .build(move |v: &Value| {
                // The subject of a format with a schema: `{key template}-value`, unless the
                // format names its `subject`.
                codec.prepare_blocking(&key, Role::Value)?;
                let key = render(&key_template, v)?;
                let body = || {
                    let mut out = Vec::new();
                    codec.encode(v, &mut out).map(|()| out)
                };
                Ok(vec![match command {
                    RedisCommandName::Set => RedisCommand::Set {
                        key,
                        value: body()?,
                        ttl_secs: ttl,
                    },
                    RedisCommandName::Hset => RedisCommand::HSet {
                        key,
                        field: render(&field_template, v)?,
                        value: body()?,
                        ttl_secs: ttl,
                    },
                    RedisCommandName::Xadd => RedisCommand::XAdd {
                        key,
                        fields: match v {
                            Value::Object(m) => m
                                .iter()
                                .filter(|(f, _)| f.as_str() != rivus_sdk::metadata::KEY)
                                .map(|(f, x)| (f.clone(), text_of(x).into_bytes()))
                                .collect(),
                            other => vec![("value".into(), text_of(other).into_bytes())],
                        },
                        maxlen,
                    },
                    RedisCommandName::Lpush => RedisCommand::LPush {
                        key,
                        value: body()?,
                    },
                    RedisCommandName::Rpush => RedisCommand::RPush {
                        key,
                        value: body()?,
                    },
                    RedisCommandName::Sadd => RedisCommand::SAdd {
                        key,
                        member: body()?,
                    },
                    RedisCommandName::Publish => RedisCommand::Publish {
                        channel: key,
                        message: body()?,
                    },
                }])
            })
    }

    /// Connects and sends a PING.
    pub async fn healthcheck(&self) -> Health {
        healthcheck(
            "redis",
            &self.url,
            endpoint(&self.url, self.cluster, &self.tls),
        )
        .await
    }
}

impl RedisDestinationSection {
    /// The dead-letter queue (connecting at the first letter).
    pub fn queue(&self) -> Result<RedisDeadLetterQueue> {
        RedisDeadLetterQueue::new(endpoint(&self.url, false, &self.tls), &self.stream)
    }

    /// Connects and sends a PING.
    pub async fn healthcheck(&self) -> Health {
        healthcheck("redis", &self.url, endpoint(&self.url, false, &self.tls)).await
    }
}

#[async_trait::async_trait]
impl SourceSection for RedisStreamsSection {
    const TYPE: &'static str = "redis-streams";
    const CATALOG: CatalogEntry = CatalogEntry {
        summary: "Redis Streams through a consumer group",
        guarantee: "exactly-once (entries acknowledged on completed checkpoints)",
    };

    fn build(&self, ctx: &SectionContext) -> Result<SourcePlan> {
        Ok(SourcePlan::cloned(self.source(ctx.policy.clone())?))
    }

    async fn check(&self, _ctx: &SectionContext) -> Health {
        self.healthcheck().await
    }
}

#[async_trait::async_trait]
impl SinkSection for RedisSinkSection {
    const TYPE: &'static str = "redis";
    const CATALOG: CatalogEntry = CatalogEntry {
        summary: "one Redis command per record (pipelined)",
        guarantee: "at-least-once (set/hset/sadd rewrite the same value on replay)",
    };

    fn build(&self, ctx: &SectionContext) -> Result<SinkPlan> {
        Ok(SinkPlan::cloned(self.sink(ctx.policy.clone())?))
    }

    async fn check(&self, _ctx: &SectionContext) -> Health {
        self.healthcheck().await
    }
}

#[async_trait::async_trait]
impl DestinationSection for RedisDestinationSection {
    const TYPE: &'static str = "redis";
    const CATALOG: CatalogEntry = CatalogEntry {
        summary: "dead letters to a Redis stream (XADD)",
        guarantee: "each letter stored before its record counts as done",
    };

    fn build(&self, _ctx: &SectionContext) -> Result<Arc<dyn DeadLetterQueue>> {
        Ok(Arc::new(self.queue()?))
    }

    async fn check(&self, _ctx: &SectionContext) -> Health {
        self.healthcheck().await
    }
}
