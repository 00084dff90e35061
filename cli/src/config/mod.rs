//! The pipeline file: TOML read into typed settings, with `${VAR}` references to the
//! environment expanded first and every error naming the path of the bad field.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use rivus_connector_es::pipeline_file::EsSinkSection;
use rivus_connector_jdbc::pipeline_file::{JdbcSinkSection, JdbcSourceSection};
use rivus_connector_kafka::pipeline_file::{
    KafkaDestinationSection, KafkaSinkSection, KafkaSourceSection,
};
use rivus_connector_rabbitmq::pipeline_file::{
    RabbitDestinationSection, RabbitSinkSection, RabbitSourceSection,
};
use rivus_connector_redis::pipeline_file::{
    RedisDestinationSection, RedisSinkSection, RedisStreamsSection,
};
use serde::Deserialize;
use serde_json::Value;

mod env;
mod restart;

pub use env::expand_env;
pub use restart::RestartSection;
pub use rivus_core::pipeline_file::{duration, parse_duration};

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
    /// `rivus run --worker ID`: this process is one worker of the job (not in the file).
    #[serde(skip)]
    pub worker: Option<String>,
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
    /// Directory of the checkpoint files; a restart resumes from the newest. One of `dir`
    /// and `store`.
    pub dir: Option<String>,
    /// Or an object store, `s3://bucket/prefix` (endpoint, region and keys from
    /// `AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`): a
    /// process on another machine resumes from it.
    pub store: Option<String>,
    /// How many of the newest checkpoints are kept (default 3).
    pub retain: Option<usize>,
    /// With `store`: how long the owner's lease lasts unrenewed (default `30s`), the time
    /// before another process may take over from one that died.
    #[serde(default, deserialize_with = "rivus_core::pipeline_file::opt_duration")]
    pub lease: Option<Duration>,
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
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum DeadLetterDestination {
    /// A Kafka topic (acks=all, idempotent producer).
    Kafka(KafkaDestinationSection),
    /// A RabbitMQ queue (persistent messages, publisher confirms); the queue must exist.
    Rabbitmq(RabbitDestinationSection),
    /// A Redis stream (`XADD`).
    Redis(RedisDestinationSection),
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

/// `[source]`, by `type`: the built-in sources, and each connector's own section.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum SourceConfig {
    /// The records of a dead-letter file, payloads parsed as JSON (replaying what was
    /// rejected once the cause is fixed).
    DeadLetters(DeadLettersSection),
    /// Built-in generator of order-like records.
    Generator(GeneratorSection),
    /// A SQL query or table (rivus-connector-jdbc).
    Jdbc(JdbcSourceSection),
    /// Kafka topics; values read in `format` (JSON by default; rivus-connector-kafka).
    Kafka(KafkaSourceSection),
    /// RabbitMQ queues; bodies read in `format` (JSON by default; rivus-connector-rabbitmq).
    Rabbitmq(RabbitSourceSection),
    /// Redis Streams through a consumer group (rivus-connector-redis).
    RedisStreams(RedisStreamsSection),
}

/// `[source] type = "dead-letters"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeadLettersSection {
    /// The dead-letter file (JSON lines).
    pub path: String,
    /// Only the letters of this connector (`kafka`, `rabbitmq`, `redis-streams`, ...).
    pub connector: Option<String>,
}

/// `[source] type = "generator"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GeneratorSection {
    /// Records to emit; unbounded when absent.
    pub count: Option<u64>,
    /// Records per second per subtask (unlimited when absent).
    pub rate: Option<u64>,
    /// Distinct users in the records (default 50).
    #[serde(default = "fifty")]
    pub users: u64,
}

fn fifty() -> u64 {
    50
}

/// `[sink]`, by `type`: stdout, and each connector's own section.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum SinkConfig {
    /// Print each record as a JSON line.
    Stdout(StdoutSection),
    /// A SQL table (rivus-connector-jdbc).
    Jdbc(JdbcSinkSection),
    /// A Kafka topic; records written in `format` (JSON by default; rivus-connector-kafka).
    Kafka(KafkaSinkSection),
    /// An Elasticsearch index (rivus-connector-es).
    Elasticsearch(EsSinkSection),
    /// A RabbitMQ exchange; bodies in `format` (JSON by default; rivus-connector-rabbitmq).
    Rabbitmq(RabbitSinkSection),
    /// Redis commands (rivus-connector-redis).
    Redis(RedisSinkSection),
}

/// `[sink] type = "stdout"`: no settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StdoutSection {}

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
