//! `rivus check`: connects to every endpoint of a pipeline file and reports reachability and
//! authentication, one line each, without writing or reading records.

use std::time::Duration;

use rivus_connector_es::{EsAuth, EsConfig};
use rivus_core::secrets::redact_url;

use crate::config::{DeadLetterDestination, PipelineConfig, SinkConfig, SourceConfig};

/// One endpoint's result.
pub struct Reach {
    pub role: &'static str,
    pub kind: &'static str,
    pub address: String,
    pub outcome: Result<String, String>,
}

/// A Kafka source's or sink's reach: one metadata round trip through the connector's probe.
async fn kafka(role: &'static str, props: rivus_connector_kafka::KafkaProperties) -> Reach {
    let address = props.endpoint();
    let outcome = match props.validate("kafka") {
        Err(e) => Err(e.to_string()),
        Ok(()) => rivus_connector_kafka::connect::probe(&props, &[], Duration::from_secs(10))
            .await
            .map(|info| format!("{} broker(s), {} topic(s)", info.brokers, info.topics))
            .map_err(|e| e.to_string()),
    };
    Reach {
        role,
        kind: "kafka",
        address,
        outcome,
    }
}

async fn elasticsearch(config: EsConfig) -> Result<String, String> {
    let client = config.client("sink").map_err(|e| e.to_string())?;
    let r = client
        .info()
        .send()
        .await
        .map_err(|e| redact_url(&e.to_string()))?;
    let status = r.status_code();
    if !status.is_success() {
        return Err(format!("HTTP {status} (authentication?)"));
    }
    let v: serde_json::Value = r.json().await.map_err(|e| e.to_string())?;
    Ok(format!(
        "version {}",
        v["version"]["number"].as_str().unwrap_or("?")
    ))
}

async fn jdbc(url: &str, table: Option<&str>) -> Result<String, String> {
    match table {
        Some(t) => rivus_connector_jdbc::table_report(url, t, 1)
            .await
            .map(|(n, _)| format!("table `{t}` has {n} rows"))
            .map_err(|e| e.to_string()),
        None => rivus_connector_jdbc::run_script(url, "SELECT 1")
            .await
            .map(|_| "connected".to_owned())
            .map_err(|e| e.to_string()),
    }
}

/// A RabbitMQ source's, sink's or dead-letter queue's reach: connect, then close.
async fn rabbitmq(role: &'static str, uri: &str, tls: &rivus_core::tls::TlsFiles) -> Reach {
    Reach {
        role,
        kind: "rabbitmq",
        address: redact_url(uri),
        outcome: rabbitmq_connect(uri, tls).await,
    }
}

async fn rabbitmq_connect(uri: &str, tls: &rivus_core::tls::TlsFiles) -> Result<String, String> {
    let config = rivus_connector_rabbitmq::AmqpConfig {
        tls: tls.clone(),
        connect_timeout: Duration::from_secs(5),
        ..rivus_connector_rabbitmq::AmqpConfig::new(uri)
    };
    config.validate("rabbitmq").map_err(|e| e.to_string())?;
    let conn = config.connect().await.map_err(|e| e.to_string())?;
    let _ = conn.close(200, "rivus check".into()).await;
    Ok("connected".into())
}

/// A Redis source's, sink's or dead-letter stream's reach: a PING.
async fn redis(
    role: &'static str,
    kind: &'static str,
    url: &str,
    endpoint: rivus_connector_redis::Endpoint,
) -> Reach {
    Reach {
        role,
        kind,
        address: redact_url(url),
        outcome: redis_ping(endpoint).await,
    }
}

async fn redis_ping(endpoint: rivus_connector_redis::Endpoint) -> Result<String, String> {
    let endpoint = endpoint
        .connect_timeout(Duration::from_secs(5))
        .response_timeout(Duration::from_secs(5));
    let mut con = endpoint.open().await.map_err(|e| e.to_string())?;
    let pong: String = redis::cmd("PING")
        .query_async(&mut con)
        .await
        .map_err(|e| redact_url(&e.to_string()))?;
    Ok(pong)
}

/// Checks the source and the sink of `config`.
pub async fn check(config: &PipelineConfig) -> Vec<Reach> {
    let mut out = Vec::new();
    let source = match &config.source {
        SourceConfig::DeadLetters { path, .. } => Reach {
            role: "source",
            kind: "dead-letters",
            address: path.clone(),
            outcome: match std::fs::metadata(path) {
                Ok(m) => Ok(format!("{} bytes", m.len())),
                Err(e) => Err(format!("cannot read: {e}")),
            },
        },
        SourceConfig::Generator { .. } => Reach {
            role: "source",
            kind: "generator",
            address: "built in".into(),
            outcome: Ok("nothing to reach".into()),
        },
        SourceConfig::Jdbc {
            url, table, tls, ..
        } => Reach {
            role: "source",
            kind: "jdbc",
            address: redact_url(url),
            outcome: match crate::endpoints::jdbc_url(url, tls, "source") {
                Ok(url) => jdbc(&url, table.as_deref()).await,
                Err(e) => Err(e.to_string()),
            },
        },
        SourceConfig::Kafka {
            bootstrap_servers,
            tls,
            sasl,
            properties,
            ..
        } => {
            kafka(
                "source",
                crate::endpoints::kafka_properties(bootstrap_servers, tls, sasl, properties),
            )
            .await
        }
        SourceConfig::Rabbitmq { uri, tls, .. } => rabbitmq("source", uri, tls).await,
        SourceConfig::RedisStreams {
            url, cluster, tls, ..
        } => {
            redis(
                "source",
                "redis-streams",
                url,
                crate::endpoints::redis_endpoint(url, *cluster, tls),
            )
            .await
        }
    };
    out.push(source);
    let sink = match &config.sink {
        SinkConfig::Stdout => Reach {
            role: "sink",
            kind: "stdout",
            address: "standard output".into(),
            outcome: Ok("nothing to reach".into()),
        },
        SinkConfig::Jdbc {
            url,
            table,
            setup,
            tls,
            ..
        } => Reach {
            role: "sink",
            kind: "jdbc",
            address: redact_url(url),
            // A table the setup script creates may not exist yet.
            outcome: match crate::endpoints::jdbc_url(url, tls, "sink") {
                Ok(url) => jdbc(&url, setup.is_none().then_some(table.as_str())).await,
                Err(e) => Err(e.to_string()),
            },
        },
        SinkConfig::Kafka {
            bootstrap_servers,
            tls,
            sasl,
            properties,
            ..
        } => {
            kafka(
                "sink",
                crate::endpoints::kafka_properties(bootstrap_servers, tls, sasl, properties),
            )
            .await
        }
        SinkConfig::Elasticsearch {
            url,
            username,
            password,
            tls,
            ..
        } => {
            let mut es = EsConfig::new(url);
            es.tls = tls.clone();
            es.timeout = Duration::from_secs(5);
            if let Some(user) = username {
                es.auth = EsAuth::Basic {
                    user: user.clone(),
                    password: password.clone().unwrap_or_default(),
                };
            }
            Reach {
                role: "sink",
                kind: "elasticsearch",
                address: redact_url(url),
                outcome: elasticsearch(es).await,
            }
        }
        SinkConfig::Rabbitmq { uri, tls, .. } => rabbitmq("sink", uri, tls).await,
        SinkConfig::Redis {
            url, cluster, tls, ..
        } => {
            redis(
                "sink",
                "redis",
                url,
                crate::endpoints::redis_endpoint(url, *cluster, tls),
            )
            .await
        }
    };
    out.push(sink);
    if let Some(d) = &config.errors.destination {
        out.push(dead_letters(d).await);
    }
    out
}

/// The dead-letter destination's reach (role `dead letters`).
async fn dead_letters(d: &DeadLetterDestination) -> Reach {
    match d {
        DeadLetterDestination::Kafka {
            bootstrap_servers,
            tls,
            sasl,
            properties,
            ..
        } => {
            kafka(
                "dead letters",
                crate::endpoints::kafka_properties(bootstrap_servers, tls, sasl, properties),
            )
            .await
        }
        DeadLetterDestination::Rabbitmq { uri, tls, .. } => {
            rabbitmq("dead letters", uri, tls).await
        }
        DeadLetterDestination::Redis { url, tls, .. } => {
            redis(
                "dead letters",
                "redis",
                url,
                crate::endpoints::redis_endpoint(url, false, tls),
            )
            .await
        }
    }
}
