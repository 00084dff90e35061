//! The pipeline file: TOML read into typed settings, with `${VAR}` references to the
//! environment expanded first and every error naming the path of the bad field.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use rivus_connector_kafka::SaslAuth;
use rivus_core::tls::TlsFiles;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

mod env;
mod restart;

pub use env::expand_env;
pub use restart::RestartSection;

/// A whole pipeline file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineConfig {
    /// The job's name (keys its checkpoints).
    pub name: String,
    /// Subtasks per stage (default 1).
    #[serde(default = "one")]
    pub parallelism: usize,
    /// Checkpoints: interval and state directory. Without it, no checkpoints.
    pub checkpoint: Option<CheckpointSection>,
    /// Restarts after a failure (default with checkpoints: exponential delay, unlimited).
    pub restart: Option<RestartSection>,
    /// What to do with records that cannot be read or written.
    #[serde(default)]
    pub errors: ErrorsSection,
    /// Where records come from.
    pub source: SourceConfig,
    /// Built-in transforms, in order.
    #[serde(default, rename = "transform")]
    pub transforms: Vec<TransformConfig>,
    /// Where records go.
    pub sink: SinkConfig,
}

fn one() -> usize {
    1
}

/// `[checkpoint]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointSection {
    /// How often (`500ms`, `2s`, `1m`).
    #[serde(deserialize_with = "duration")]
    pub interval: Duration,
    /// Directory of the checkpoint files; a restart resumes from the newest.
    pub dir: String,
}

/// `[errors]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorsSection {
    /// `fail` (default), `skip` or `dead-letter`.
    #[serde(default)]
    pub policy: PolicyName,
    /// The dead-letter file (JSON lines), for `dead-letter`.
    pub dead_letter: Option<String>,
    /// Or a dead-letter destination in Kafka, RabbitMQ or Redis, for `dead-letter`.
    pub destination: Option<DeadLetterDestination>,
}

/// `[errors.destination]`, by `type`: where dead letters go instead of a file. Each letter is
/// confirmed by the destination before the record counts as done.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum DeadLetterDestination {
    /// A Kafka topic (acks=all, idempotent producer).
    Kafka {
        bootstrap_servers: String,
        topic: String,
        tls: Option<TlsFiles>,
        sasl: Option<SaslAuth>,
        #[serde(default)]
        properties: BTreeMap<String, String>,
    },
    /// A RabbitMQ queue (persistent messages, publisher confirms); the queue must exist.
    Rabbitmq {
        uri: String,
        #[serde(default)]
        tls: TlsFiles,
        queue: String,
    },
    /// A Redis stream (`XADD`).
    Redis {
        url: String,
        #[serde(default)]
        tls: TlsFiles,
        stream: String,
    },
}

/// The error policies by name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyName {
    /// Stop at the first bad record.
    #[default]
    Fail,
    /// Count and log it, go on.
    Skip,
    /// Write it to the dead-letter file, go on.
    DeadLetter,
}

/// `[source]`, by `type`.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum SourceConfig {
    /// The records of a dead-letter file, payloads parsed as JSON (replaying what was
    /// rejected once the cause is fixed).
    DeadLetters {
        /// The dead-letter file (JSON lines).
        path: String,
        /// Only the letters of this connector (`kafka`, `rabbitmq`, `redis-streams`, ...).
        connector: Option<String>,
    },
    /// Built-in generator of order-like records.
    Generator {
        /// Records to emit; unbounded when absent.
        count: Option<u64>,
        /// Records per second per subtask (unlimited when absent).
        rate: Option<u64>,
        /// Distinct users in the records (default 50).
        #[serde(default = "fifty")]
        users: u64,
    },
    /// A SQL query or table (rivus-connector-jdbc).
    Jdbc {
        url: String,
        table: Option<String>,
        query: Option<String>,
        track_by: Vec<String>,
        /// `continuous` (default) or `bounded`.
        #[serde(default)]
        mode: JdbcSourceMode,
        #[serde(default, deserialize_with = "opt_duration")]
        poll_interval: Option<Duration>,
        splits: Option<usize>,
        fetch_size: Option<usize>,
        /// TLS: `{ ca_file, client_cert, client_key }` (PEM files), added to the URL as the
        /// driver's parameters; with any file set and no `sslmode` / `ssl-mode` in the URL,
        /// the server's certificate and name are verified.
        #[serde(default)]
        tls: TlsFiles,
    },
    /// Kafka topics; values decoded as JSON (rivus-connector-kafka).
    Kafka {
        bootstrap_servers: String,
        topics: Vec<String>,
        group_id: Option<String>,
        /// `committed` (default), `earliest`, `latest`.
        #[serde(default)]
        start: KafkaStart,
        /// Stop at the offsets that are the latest at start (a backfill that ends).
        #[serde(default)]
        bounded: bool,
        /// TLS: `{ ca_file, client_cert, client_key }` (PEM files; `{}` trusts the system's
        /// roots). With a client certificate: mutual TLS.
        tls: Option<TlsFiles>,
        /// SASL over TLS: `{ mechanism, username, password }` (PLAIN, SCRAM-SHA-256,
        /// SCRAM-SHA-512).
        sasl: Option<SaslAuth>,
        /// Any librdkafka setting.
        #[serde(default)]
        properties: BTreeMap<String, String>,
    },
    /// RabbitMQ queues; bodies decoded as JSON (rivus-connector-rabbitmq).
    Rabbitmq {
        uri: String,
        /// For `amqps://`: `{ ca_file, client_cert, client_key }` (PEM files).
        #[serde(default)]
        tls: TlsFiles,
        queues: Vec<String>,
        /// Unacknowledged messages per queue (500).
        prefetch: Option<u16>,
        /// Declare the queues (durable) instead of using existing ones.
        #[serde(default)]
        declare: bool,
        /// Drop redeliveries by correlation id (exactly-once).
        #[serde(default)]
        correlation_ids: bool,
    },
    /// Redis Streams through a consumer group (rivus-connector-redis).
    RedisStreams {
        url: String,
        /// A Redis Cluster: `url` names one or more seed nodes, separated by commas.
        #[serde(default)]
        cluster: bool,
        /// For `rediss://`: `{ ca_file, client_cert, client_key }` (PEM files).
        #[serde(default)]
        tls: TlsFiles,
        streams: Vec<String>,
        group: String,
        /// The entry field holding the record as JSON; without it the record is the entry's
        /// fields as text.
        json_field: Option<String>,
    },
}

fn fifty() -> u64 {
    50
}

/// Continuous polling or bounded ranges.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JdbcSourceMode {
    #[default]
    Continuous,
    Bounded,
}

/// Where a Kafka source starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KafkaStart {
    #[default]
    Committed,
    Earliest,
    Latest,
}

/// `[sink]`, by `type`.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum SinkConfig {
    /// Print each record as a JSON line.
    Stdout,
    /// A SQL table (rivus-connector-jdbc).
    Jdbc {
        url: String,
        table: String,
        /// `insert` (default) or `upsert`.
        #[serde(default)]
        mode: JdbcWriteMode,
        key: Option<Vec<String>>,
        columns: Option<Vec<String>>,
        #[serde(default)]
        exactly_once: bool,
        batch_size: Option<usize>,
        /// SQL run once before the job starts (e.g. `CREATE TABLE IF NOT EXISTS ...`).
        setup: Option<String>,
        #[serde(default)]
        ignore_unknown_fields: bool,
        /// TLS, as for the `jdbc` source.
        #[serde(default)]
        tls: TlsFiles,
    },
    /// A Kafka topic; records written as JSON (rivus-connector-kafka).
    Kafka {
        bootstrap_servers: String,
        topic: String,
        /// The field whose value is the message key.
        key_field: Option<String>,
        #[serde(default)]
        exactly_once: bool,
        /// TLS, as for the Kafka source.
        tls: Option<TlsFiles>,
        /// SASL over TLS, as for the Kafka source.
        sasl: Option<SaslAuth>,
        #[serde(default)]
        properties: BTreeMap<String, String>,
    },
    /// An Elasticsearch index (rivus-connector-es).
    Elasticsearch {
        url: String,
        index: String,
        /// The field whose value is the document id (replays then overwrite).
        id_field: Option<String>,
        max_actions: Option<usize>,
        username: Option<String>,
        password: Option<String>,
        /// For `https://`: `{ ca_file, client_cert, client_key }` (PEM files).
        #[serde(default)]
        tls: TlsFiles,
    },
    /// A RabbitMQ exchange; bodies are the records as JSON (rivus-connector-rabbitmq).
    Rabbitmq {
        uri: String,
        /// For `amqps://`: `{ ca_file, client_cert, client_key }` (PEM files).
        #[serde(default)]
        tls: TlsFiles,
        /// The exchange (default: the default exchange, routing straight to a queue).
        #[serde(default)]
        exchange: String,
        /// Routing key (for the default exchange: the queue).
        #[serde(default)]
        routing_key: String,
        /// Take the routing key from this field instead.
        routing_key_field: Option<String>,
        /// Set the correlation id from this field (a rivus RabbitMQ source can then drop
        /// redeliveries).
        correlation_id_field: Option<String>,
    },
    /// Redis commands (rivus-connector-redis).
    Redis {
        url: String,
        /// A Redis Cluster: `url` names one or more seed nodes, separated by commas.
        #[serde(default)]
        cluster: bool,
        /// For `rediss://`: `{ ca_file, client_cert, client_key }` (PEM files).
        #[serde(default)]
        tls: TlsFiles,
        command: RedisCommandName,
        /// The key; `{field}` is replaced by the record's field (`order:{id}`).
        key: String,
        /// The hash field for `hset`, same templating.
        field: Option<String>,
        ttl_secs: Option<u64>,
        maxlen: Option<usize>,
    },
}

/// The Redis commands a `redis` sink sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
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

/// Insert or upsert.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JdbcWriteMode {
    #[default]
    Insert,
    Upsert,
}

/// `[[transform]]`, by `type`.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum TransformConfig {
    /// Keep records whose field compares true.
    Filter {
        field: String,
        op: CompareOp,
        /// The value compared with (not needed for `exists` / `missing`).
        value: Option<toml::Value>,
    },
    /// Rename fields: `{ old = "new" }`.
    Rename { fields: BTreeMap<String, String> },
    /// Remove fields.
    Drop { fields: Vec<String> },
    /// Set fields to constant values.
    Add {
        fields: BTreeMap<String, toml::Value>,
    },
    /// Parse a text field holding JSON; an object parsed from field `"."` becomes the record.
    ParseJson { field: String },
    /// Route records with the same value of `field` to the same sink subtask.
    Key { field: String },
}

/// Comparisons of a filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum CompareOp {
    #[serde(rename = "==")]
    Eq,
    #[serde(rename = "!=")]
    Ne,
    #[serde(rename = ">")]
    Gt,
    #[serde(rename = ">=")]
    Ge,
    #[serde(rename = "<")]
    Lt,
    #[serde(rename = "<=")]
    Le,
    #[serde(rename = "contains")]
    Contains,
    #[serde(rename = "exists")]
    Exists,
    #[serde(rename = "missing")]
    Missing,
}

/// `500ms`, `2s`, `1.5m`, `1h`: a positive duration.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit() && c != '.')?;
    let (n, unit) = s.split_at(split);
    let n: f64 = n.parse().ok()?;
    let secs = match unit.trim() {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return None,
    };
    (secs > 0.0).then(|| Duration::from_secs_f64(secs))
}

fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    parse_duration(&s).ok_or_else(|| {
        serde::de::Error::custom(format!(
            "`{s}` is not a duration: use a positive number with ms, s, m or h (`500ms`, `2s`)"
        ))
    })
}

fn opt_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    duration(d).map(Some)
}

/// Reads and checks `path`. The error names the file, the path of the bad field and what was
/// expected; it never repeats values (they may be secrets).
pub fn load(path: &Path) -> Result<PipelineConfig, String> {
    let raw = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    parse(&raw).map_err(|e| format!("{}: {e}", path.display()))
}

/// Parses the text of a pipeline file.
pub fn parse(raw: &str) -> Result<PipelineConfig, String> {
    let text = expand_env(raw)?;
    let de = toml::Deserializer::parse(&text).map_err(|e| match e.span() {
        Some(span) => format!(
            "line {}: {}",
            text[..span.start.min(text.len())].matches('\n').count() + 1,
            e.message()
        ),
        None => e.message().to_owned(),
    })?;
    let config: PipelineConfig = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let message = inner.message().to_owned();
        if path == "." {
            message
        } else {
            format!("{}: {message}", refine(&text, &path, &message))
        }
    })?;
    if config.parallelism == 0 {
        return Err("parallelism: must be at least 1".into());
    }
    if let Some(r) = &config.restart {
        r.strategy().validate("restart").map_err(|e| match e {
            rivus_core::Error::Config { path, message } => format!("{path}: {message}"),
            e => e.to_string(),
        })?;
    }
    if config.errors.policy == PolicyName::DeadLetter {
        match (&config.errors.dead_letter, &config.errors.destination) {
            (None, None) => {
                return Err(
                    "errors.dead_letter: the dead-letter policy needs a file (or an \
                     errors.destination)"
                        .into(),
                )
            }
            (Some(_), Some(_)) => {
                return Err(
                    "errors.destination: give either a dead_letter file or a destination".into(),
                )
            }
            _ => {}
        }
    }
    for (i, t) in config.transforms.iter().enumerate() {
        if let TransformConfig::Filter { op, value, .. } = t {
            let needs = !matches!(op, CompareOp::Exists | CompareOp::Missing);
            if needs && value.is_none() {
                return Err(format!(
                    "transform[{i}].value: this comparison needs a value"
                ));
            }
        }
    }
    Ok(config)
}

/// Inside a section chosen by `type` or `strategy`, serde reports the section, not the field:
/// name the unknown field, or find the field holding the value the error quotes (an unknown
/// variant, a bad duration).
fn refine(text: &str, path: &str, message: &str) -> String {
    let unknown_field = message
        .strip_prefix("unknown field `")
        .and_then(|m| m.split('`').next());
    if let Some(field) = unknown_field {
        // Outside a tagged section serde's path already ends with the field.
        if path.rsplit('.').next() == Some(field) {
            return path.to_owned();
        }
    }
    let quoted = message.strip_prefix("unknown variant `").or_else(|| {
        message
            .strip_prefix('`')
            .filter(|_| message.contains("` is not a"))
    });
    let bad = quoted.and_then(|m| m.split('`').next());
    if unknown_field.is_none() && bad.is_none() {
        return path.to_owned();
    }
    let Some(node) = text
        .parse::<toml::Table>()
        .ok()
        .and_then(|root| lookup(toml::Value::Table(root), path))
    else {
        return path.to_owned();
    };
    // The key named by the error (an unknown field) or holding the quoted value, searched
    // through the section's nested tables (`tls = { cafile = .. }` → `sink.tls.cafile`).
    let found = find(&node, &|k, v| match unknown_field {
        Some(f) => k == f,
        None => v.as_str() == bad,
    });
    match found {
        Some(rest) => format!("{path}.{rest}"),
        None => path.to_owned(),
    }
}

/// The value at a serde path (`transform[0]`, `sink`).
fn lookup(mut node: toml::Value, path: &str) -> Option<toml::Value> {
    for part in path.split('.') {
        let (key, index) = match part.split_once('[') {
            Some((k, i)) => (k, i.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        let next = node.get(key)?.clone();
        node = match index {
            Some(i) => next.get(i)?.clone(),
            None => next,
        };
    }
    Some(node)
}

/// The dotted path, below `node`, of the first key for which `hit(key, value)` holds.
fn find(node: &toml::Value, hit: &dyn Fn(&str, &toml::Value) -> bool) -> Option<String> {
    let table = node.as_table()?;
    if let Some((k, _)) = table.iter().find(|(k, v)| hit(k, v)) {
        return Some(k.clone());
    }
    table
        .iter()
        .find_map(|(k, v)| find(v, hit).map(|rest| format!("{k}.{rest}")))
}

/// A TOML value as JSON.
pub fn to_json(v: &toml::Value) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests;
