//! Turns a [`PipelineConfig`] into a runnable job: the source by `type`, the transforms, the
//! sink by `type`, the checkpoint backend and the error policy.

use std::sync::Arc;

use serde_json::Value;

use rivus_connector_es::{EsAuth, EsConfig, EsSink};
use rivus_connector_jdbc::{JdbcSink, JdbcSource, WriteMode};
use rivus_connector_kafka::{
    KafkaSink, KafkaSource, SinkDelivery, StartOffsets, StopOffsets, ValueDeserializer,
    ValueSerializer,
};
use rivus_core::checkpoint::{CheckpointConfig, FsStateBackend};
use rivus_core::error_policy::{DeadLetter, DeadLetterQueue, ErrorPolicy, FileDeadLetterQueue};
use rivus_core::prelude::*;
use rivus_core::runtime::Stream;
use rivus_core::schema::JsonSchema;

use crate::config::{
    JdbcSourceMode, JdbcWriteMode, KafkaStart, PipelineConfig, PolicyName, SinkConfig,
    SourceConfig, TransformConfig,
};
use crate::counted::{Counted, Counts, StdoutSink};
use crate::generator::{Generator, GeneratorTask};
use crate::transform::Transforms;

/// A job ready to run, with what the status line and the report need.
pub struct Built {
    pub job: Job,
    pub counts: Arc<Counts>,
    /// Records the source will emit, when known (a bounded generator).
    pub total: Option<u64>,
}

/// Counts the records that reach the error policy (skip or dead letter), then passes them on.
#[derive(Debug)]
struct CountingQueue {
    inner: Option<Arc<dyn DeadLetterQueue>>,
    counts: Arc<Counts>,
}

#[async_trait]
impl DeadLetterQueue for CountingQueue {
    async fn send(&self, letter: DeadLetter) -> Result<()> {
        self.counts
            .errors
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match &self.inner {
            Some(q) => q.send(letter).await,
            None => {
                tracing::warn!(origin = %letter.origin, position = %letter.position,
                    reason = %letter.reason, "record skipped");
                Ok(())
            }
        }
    }
}

async fn policy(config: &PipelineConfig, counts: &Arc<Counts>, dry: bool) -> Result<ErrorPolicy> {
    let inner: Option<Arc<dyn DeadLetterQueue>> = match config.errors.policy {
        PolicyName::Fail => return Ok(ErrorPolicy::Fail),
        PolicyName::Skip => None,
        PolicyName::DeadLetter if dry => None,
        PolicyName::DeadLetter => {
            let path = config.errors.dead_letter.as_deref().unwrap_or_default();
            Some(Arc::new(FileDeadLetterQueue::open(path).await?))
        }
    };
    Ok(ErrorPolicy::DeadLetter(Arc::new(CountingQueue {
        inner,
        counts: Arc::clone(counts),
    })))
}

fn source(
    pipeline: Pipeline,
    config: &PipelineConfig,
    policy: &ErrorPolicy,
) -> Result<(Stream<Value>, Option<u64>)> {
    let p = config.parallelism;
    Ok(match &config.source {
        SourceConfig::Generator { count, rate, users } => {
            let gen = Generator {
                count: *count,
                rate: *rate,
                users: *users,
            };
            let stream = pipeline.source("source", p, |i| GeneratorTask {
                gen: gen.clone(),
                subtask: i as u64,
                parallelism: p as u64,
            });
            (stream, *count)
        }
        SourceConfig::Jdbc {
            url,
            table,
            query,
            track_by,
            mode,
            poll_interval,
            splits,
            fetch_size,
        } => {
            let mut b = JdbcSource::builder(url).track_by(track_by.clone());
            match (table, query) {
                (Some(_), Some(_)) => {
                    return Err(Error::config(
                        "source.query",
                        "set a table or a query, not both",
                    ))
                }
                (Some(t), None) => b = b.table(t),
                (None, Some(q)) => b = b.query(q),
                (None, None) => {
                    return Err(Error::config("source.table", "set a table or a query"))
                }
            }
            b = match mode {
                JdbcSourceMode::Bounded => b.bounded(None, None, splits.unwrap_or(p)),
                JdbcSourceMode::Continuous => {
                    b.continuous(poll_interval.unwrap_or(std::time::Duration::from_secs(1)))
                }
            };
            if let Some(n) = fetch_size {
                b = b.fetch_size(*n);
            }
            let s = b.error_policy(policy.clone()).build_json()?;
            (pipeline.source("source", p, |_| s.clone()), None)
        }
        SourceConfig::Kafka {
            bootstrap_servers,
            topics,
            group_id,
            start,
            bounded,
            properties,
        } => {
            let mut b = KafkaSource::builder(bootstrap_servers)
                .topics(topics.clone())
                .start(match start {
                    KafkaStart::Committed => StartOffsets::Committed {
                        reset_to_earliest: true,
                    },
                    KafkaStart::Earliest => StartOffsets::Earliest,
                    KafkaStart::Latest => StartOffsets::Latest,
                })
                .error_policy(policy.clone());
            if let Some(g) = group_id {
                b = b.group_id(g);
            }
            if *bounded {
                b = b.stop(StopOffsets::LatestAtStart);
            }
            for (k, v) in properties {
                b = b.property(k, v);
            }
            let s = b.build(ValueDeserializer(JsonSchema::<Value>::new()))?;
            (pipeline.source("source", p, |_| s.clone()), None)
        }
    })
}

fn finish<S: SinkFunction<Value> + Clone + 'static>(
    stream: Stream<Value>,
    config: &PipelineConfig,
    sink: S,
    counts: &Arc<Counts>,
    policy: &ErrorPolicy,
    check_errors: bool,
) -> Result<Job> {
    let counts = Arc::clone(counts);
    let policy = policy.clone();
    stream.sink("sink", config.parallelism, move |_| Counted {
        inner: sink.clone(),
        counts: Arc::clone(&counts),
        policy: policy.clone(),
        check_errors,
        handler: None,
    })
}

/// Builds the job. With `dry`, nothing is created or contacted (validation): no dead-letter
/// file, no state directory, no setup script.
pub async fn build(config: &PipelineConfig, dry: bool) -> Result<Built> {
    let counts = Arc::new(Counts::default());
    let policy = policy(config, &counts, dry).await?;
    let mut pipeline = Pipeline::new(config.name.clone());
    if let Some(cp) = &config.checkpoint {
        let backend: Arc<dyn rivus_core::checkpoint::StateBackend> = if dry {
            Arc::new(MemoryStateBackend::new())
        } else {
            Arc::new(FsStateBackend::new(&cp.dir, 3)?)
        };
        pipeline = pipeline.checkpointing(CheckpointConfig::new(cp.interval, backend));
    }
    let (stream, total) = source(pipeline, config, &policy)?;
    let read = Arc::clone(&counts);
    let stream = stream.map(move |v| {
        read.read.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        v
    });
    let transforms = Transforms::new(&config.transforms);
    let check_errors = transforms.can_fail();
    let mut stream = if transforms.is_empty() {
        stream
    } else {
        stream.flat_map(move |v| transforms.apply(v))
    };
    for t in &config.transforms {
        if let TransformConfig::Key { field } = t {
            let field = field.clone();
            stream = stream.key_by(
                move |v: &Value| v.get(&field).map(Value::to_string).unwrap_or_default(),
                config.parallelism,
            );
        }
    }
    let job = match &config.sink {
        SinkConfig::Stdout => finish(stream, config, StdoutSink, &counts, &policy, check_errors)?,
        SinkConfig::Jdbc {
            url,
            table,
            mode,
            key,
            columns,
            exactly_once,
            batch_size,
            setup,
            ignore_unknown_fields,
        } => {
            let mut b = JdbcSink::builder(url, table)
                .mode(match mode {
                    JdbcWriteMode::Insert => WriteMode::Insert,
                    JdbcWriteMode::Upsert => WriteMode::Upsert,
                })
                .exactly_once(*exactly_once)
                .ignore_unknown_fields(*ignore_unknown_fields)
                .error_policy(policy.clone());
            if let Some(k) = key {
                b = b.key(k.clone());
            }
            if let Some(c) = columns {
                b = b.columns(c.clone());
            }
            if let Some(n) = batch_size {
                b = b.batch_size(*n);
            }
            let sink = b.build_json()?;
            if let (Some(sql), false) = (setup, dry) {
                rivus_connector_jdbc::run_script(url, sql).await?;
            }
            finish(stream, config, sink, &counts, &policy, check_errors)?
        }
        SinkConfig::Kafka {
            bootstrap_servers,
            topic,
            key_field,
            exactly_once,
            properties,
        } => {
            let mut b = KafkaSink::builder(bootstrap_servers)
                .topic(topic)
                .delivery(if *exactly_once {
                    SinkDelivery::ExactlyOnce
                } else {
                    SinkDelivery::AtLeastOnce
                })
                .error_policy(policy.clone());
            for (k, v) in properties {
                b = b.property(k, v);
            }
            let mut ser = ValueSerializer::new(JsonSchema::<Value>::new());
            if let Some(f) = key_field.clone() {
                ser = ser.with_key(move |v: &Value| match v.get(&f) {
                    Some(Value::String(s)) => s.as_bytes().to_vec(),
                    Some(other) => other.to_string().into_bytes(),
                    None => Vec::new(),
                });
            }
            let sink = b.build(ser)?;
            finish(stream, config, sink, &counts, &policy, check_errors)?
        }
        SinkConfig::Elasticsearch {
            url,
            index,
            id_field,
            max_actions,
            username,
            password,
        } => {
            let mut es = EsConfig::new(url);
            if let Some(user) = username {
                es.auth = EsAuth::Basic {
                    user: user.clone(),
                    password: password.clone().unwrap_or_default(),
                };
            }
            let mut b = EsSink::builder(url)
                .config(es)
                .failure_policy(policy.clone());
            if let Some(n) = max_actions {
                b = b.max_actions(*n);
            }
            let (index, id_field) = (index.clone(), id_field.clone());
            let sink = b.build(move |v: &Value, idx| {
                let id = id_field.as_ref().and_then(|f| match v.get(f) {
                    Some(Value::String(s)) => Some(s.clone()),
                    Some(Value::Null) | None => None,
                    Some(other) => Some(other.to_string()),
                });
                idx.index(index.clone(), id, v.clone());
                Ok(())
            })?;
            finish(stream, config, sink, &counts, &policy, check_errors)?
        }
    };
    Ok(Built { job, counts, total })
}
