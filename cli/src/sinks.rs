//! The sinks a pipeline file can name, built from their `[sink]` section and wrapped in
//! [`Counted`].

use std::sync::Arc;

use serde_json::Value;

use rivus_connector_es::{EsAuth, EsConfig, EsSink};
use rivus_connector_jdbc::{JdbcSink, WriteMode};
use rivus_connector_kafka::{KafkaSink, SinkDelivery, ValueSerializer};
use rivus_connector_rabbitmq::{AmqpConfig, OutMessage, RabbitSink};
use rivus_connector_redis::{RedisCommand, RedisSink};
use rivus_core::error_policy::ErrorPolicy;
use rivus_core::prelude::*;
use rivus_core::runtime::Stream;
use rivus_core::schema::{JsonSchema, SchemaError};

use crate::config::{JdbcWriteMode, PipelineConfig, RedisCommandName, SinkConfig};
use crate::counted::{Counted, Counts, StdoutSink};

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

/// Ends `stream` in the sink of `config`. With `dry`, no setup script runs.
pub async fn attach(
    stream: Stream<Value>,
    config: &PipelineConfig,
    counts: &Arc<Counts>,
    policy: &ErrorPolicy,
    check_errors: bool,
    dry: bool,
) -> Result<Job> {
    Ok(match &config.sink {
        SinkConfig::Stdout => finish(stream, config, StdoutSink, counts, policy, check_errors)?,
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
            tls,
        } => {
            let mut b = JdbcSink::builder(url, table)
                .tls(tls.clone())
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
                let url = crate::endpoints::jdbc_url(url, tls, "sink")?;
                rivus_connector_jdbc::run_script(&url, sql).await?;
            }
            finish(stream, config, sink, counts, policy, check_errors)?
        }
        SinkConfig::Kafka {
            bootstrap_servers,
            topic,
            key_field,
            exactly_once,
            tls,
            sasl,
            properties,
        } => {
            let props =
                crate::endpoints::kafka_properties(bootstrap_servers, tls, sasl, properties);
            let b = KafkaSink::builder_with(props)
                .topic(topic)
                .delivery(if *exactly_once {
                    SinkDelivery::ExactlyOnce
                } else {
                    SinkDelivery::AtLeastOnce
                })
                .error_policy(policy.clone());
            let mut ser = ValueSerializer::new(JsonSchema::<Value>::new());
            if let Some(f) = key_field.clone() {
                ser = ser.with_key(move |v: &Value| match v.get(&f) {
                    Some(Value::String(s)) => s.as_bytes().to_vec(),
                    Some(other) => other.to_string().into_bytes(),
                    None => Vec::new(),
                });
            }
            let sink = b.build(ser)?;
            finish(stream, config, sink, counts, policy, check_errors)?
        }
        SinkConfig::Elasticsearch {
            url,
            index,
            id_field,
            max_actions,
            username,
            password,
            tls,
        } => {
            let mut es = EsConfig::new(url);
            es.tls = tls.clone();
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
            finish(stream, config, sink, counts, policy, check_errors)?
        }
        SinkConfig::Rabbitmq {
            uri,
            tls,
            exchange,
            routing_key,
            routing_key_field,
            correlation_id_field,
        } => {
            let (rk_field, cid_field) = (routing_key_field.clone(), correlation_id_field.clone());
            let sink = RabbitSink::builder(AmqpConfig {
                tls: tls.clone(),
                ..AmqpConfig::new(uri)
            })
            .exchange(exchange)
            .routing_key(routing_key)
            .error_policy(policy.clone())
            .build(move |v: &Value| {
                Ok(OutMessage {
                    routing_key: match &rk_field {
                        Some(f) => Some(field_text(v, f)?),
                        None => None,
                    },
                    correlation_id: match &cid_field {
                        Some(f) => Some(field_text(v, f)?),
                        None => None,
                    },
                    body: serde_json::to_vec(v).unwrap_or_default(),
                    content_type: Some("application/json".into()),
                    ..OutMessage::default()
                })
            })?;
            finish(stream, config, sink, counts, policy, check_errors)?
        }
        SinkConfig::Redis {
            url,
            cluster,
            tls,
            command,
            key,
            field,
            ttl_secs,
            maxlen,
        } => {
            let (command, key, field, ttl, maxlen) =
                (*command, key.clone(), field.clone(), *ttl_secs, *maxlen);
            if command == RedisCommandName::Hset && field.is_none() {
                return Err(Error::config("sink.field", "hset needs a hash field"));
            }
            let sink = RedisSink::builder(crate::endpoints::redis_endpoint(url, *cluster, tls))
                .error_policy(policy.clone())
                .build(move |v: &Value| {
                    let k = template(&key, v)?;
                    let body = || serde_json::to_vec(v).unwrap_or_default();
                    let cmd = match command {
                        RedisCommandName::Set => RedisCommand::Set {
                            key: k,
                            value: body(),
                            ttl_secs: ttl,
                        },
                        RedisCommandName::Hset => RedisCommand::HSet {
                            key: k,
                            field: template(field.as_deref().unwrap_or_default(), v)?,
                            value: body(),
                            ttl_secs: ttl,
                        },
                        RedisCommandName::Xadd => RedisCommand::XAdd {
                            key: k,
                            fields: match v {
                                Value::Object(m) => m
                                    .iter()
                                    .map(|(f, x)| (f.clone(), text_of(x).into_bytes()))
                                    .collect(),
                                other => vec![("value".into(), text_of(other).into_bytes())],
                            },
                            maxlen,
                        },
                        RedisCommandName::Lpush => RedisCommand::LPush {
                            key: k,
                            value: body(),
                        },
                        RedisCommandName::Rpush => RedisCommand::RPush {
                            key: k,
                            value: body(),
                        },
                        RedisCommandName::Sadd => RedisCommand::SAdd {
                            key: k,
                            member: body(),
                        },
                        RedisCommandName::Publish => RedisCommand::Publish {
                            channel: k,
                            message: body(),
                        },
                    };
                    Ok(vec![cmd])
                })?;
            finish(stream, config, sink, counts, policy, check_errors)?
        }
    })
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn field_text(v: &Value, field: &str) -> Result<String, SchemaError> {
    v.get(field)
        .map(text_of)
        .ok_or_else(|| SchemaError::new("record", "record", format!("no field `{field}`")))
}

/// `template` with every `{field}` replaced by the record's value of that field.
fn template(template: &str, v: &Value) -> Result<String, SchemaError> {
    let mut out = String::with_capacity(template.len() + 16);
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let Some(end) = rest[start..].find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        out.push_str(&field_text(v, &rest[start + 1..start + end])?);
        rest = &rest[start + end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn templates_take_fields_from_the_record() {
        let v = json!({"id": 7, "user": "u1"});
        assert_eq!(
            super::template("order:{id}:{user}", &v).unwrap(),
            "order:7:u1"
        );
        let e = super::template("order:{nope}", &v).unwrap_err();
        assert!(e.to_string().contains("no field `nope`"), "{e}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

        /// Any template over any record: filled in, or refused naming the missing field.
        #[test]
        fn templates_never_panic_and_name_the_missing_field(
            template in "[a-z{}:]{0,30}",
            fields in proptest::collection::btree_map("[a-z]{1,3}", ".{0,8}", 0..4),
        ) {
            let record = serde_json::Value::Object(
                fields.iter().map(|(k, v)| (k.clone(), json!(v))).collect(),
            );
            match super::template(&template, &record) {
                Ok(out) => {
                    if !template.contains('{') {
                        proptest::prop_assert_eq!(out, template);
                    }
                }
                Err(e) => {
                    let text = e.to_string();
                    let missing = text
                        .split("no field `")
                        .nth(1)
                        .and_then(|r| r.split('`').next())
                        .unwrap_or_default()
                        .to_owned();
                    proptest::prop_assert!(template.contains(&format!("{{{missing}}}")), "{text}");
                    proptest::prop_assert!(!fields.contains_key(&missing));
                }
            }
        }
    }
}
