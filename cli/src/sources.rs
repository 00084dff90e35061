//! The sources a pipeline file can name, built from their `[source]` section.

use serde_json::Value;

use rivus_connector_jdbc::JdbcSource;
use rivus_connector_kafka::{KafkaSource, StartOffsets, StopOffsets, ValueDeserializer};
use rivus_connector_rabbitmq::{AmqpConfig, RabbitSource};
use rivus_connector_redis::StreamsSource;
use rivus_core::error_policy::ErrorPolicy;
use rivus_core::prelude::*;
use rivus_core::runtime::Stream;
use rivus_core::schema::{DeserializationSchema, JsonSchema, SchemaError};

use crate::config::{JdbcSourceMode, KafkaStart, PipelineConfig, SourceConfig};
use crate::generator::{Generator, GeneratorTask};
use crate::replay::DeadLetterReplay;

/// Adds the source of `config` to `pipeline`; returns its stream and, when known, how many
/// records it will emit.
pub fn attach(
    pipeline: Pipeline,
    config: &PipelineConfig,
    policy: &ErrorPolicy,
) -> Result<(Stream<Value>, Option<u64>)> {
    let p = config.parallelism;
    Ok(match &config.source {
        SourceConfig::DeadLetters { path, connector } => {
            let replay = DeadLetterReplay::new(path.clone(), connector.clone(), policy.clone());
            let stream = pipeline.source("source", p, move |_| replay.clone());
            (stream, None)
        }
        SourceConfig::Generator { count, rate, users } => {
            let gen = Generator {
                count: *count,
                rate: *rate,
                users: *users,
            };
            let stream = pipeline.source("source", p, move |_| GeneratorTask::new(gen.clone()));
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
            tls,
        } => {
            let mut b = JdbcSource::builder(url)
                .tls(tls.clone())
                .track_by(track_by.clone());
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
            tls,
            sasl,
            properties,
        } => {
            let props =
                crate::endpoints::kafka_properties(bootstrap_servers, tls, sasl, properties);
            let mut b = KafkaSource::builder_with(props)
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
            let s = b.build(ValueDeserializer(JsonSchema::<Value>::new()))?;
            (pipeline.source("source", p, |_| s.clone()), None)
        }
        SourceConfig::Rabbitmq {
            uri,
            tls,
            queues,
            prefetch,
            declare,
            correlation_ids,
        } => {
            let mut b = RabbitSource::builder(AmqpConfig {
                tls: tls.clone(),
                ..AmqpConfig::new(uri)
            })
            .queues(queues.clone())
            .use_correlation_ids(*correlation_ids)
            .error_policy(policy.clone());
            if let Some(n) = prefetch {
                b = b.prefetch(*n);
            }
            if *declare {
                b = b.declare(lapin::options::QueueDeclareOptions {
                    durable: true,
                    ..Default::default()
                });
            }
            let s = b.build(|m| {
                let position = format!("queue {} delivery {}", m.queue, m.delivery_tag);
                JsonSchema::<Value>::new().deserialize(m.body, &position)
            })?;
            (pipeline.source("source", p, |_| s.clone()), None)
        }
        SourceConfig::RedisStreams {
            url,
            cluster,
            tls,
            streams,
            group,
            json_field,
        } => {
            let json_field = json_field.clone();
            let s = StreamsSource::builder(crate::endpoints::redis_endpoint(url, *cluster, tls))
                .streams(streams.clone())
                .group(group)
                .error_policy(policy.clone())
                .build(move |e| {
                    let position = format!("{}#{}", e.stream, e.id);
                    match &json_field {
                        Some(f) => {
                            let raw = e.field(f).ok_or_else(|| {
                                SchemaError::new("redis", &position, format!("no field `{f}`"))
                            })?;
                            JsonSchema::<Value>::new().deserialize(raw, &position)
                        }
                        None => Ok(Value::Object(
                            e.fields
                                .iter()
                                .map(|(k, v)| {
                                    (
                                        k.clone(),
                                        Value::from(String::from_utf8_lossy(v).into_owned()),
                                    )
                                })
                                .collect(),
                        )),
                    }
                })?;
            (pipeline.source("source", p, |_| s.clone()), None)
        }
    })
}
