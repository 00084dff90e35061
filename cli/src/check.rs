//! `rivus check`: connects to every endpoint of a pipeline file and reports reachability and
//! authentication, one line each, without writing or reading records. Each connector's
//! section does its own healthcheck; this file only asks them in turn.

use rivus_core::pipeline_file::Health;

use crate::config::{DeadLetterDestination, PipelineConfig, SinkConfig, SourceConfig};

/// One endpoint's result.
pub struct Reach {
    pub role: &'static str,
    pub kind: &'static str,
    pub address: String,
    pub outcome: Result<String, String>,
}

impl Reach {
    fn of(role: &'static str, h: Health) -> Self {
        Reach {
            role,
            kind: h.kind,
            address: h.address,
            outcome: h.outcome,
        }
    }
}

async fn source(s: &SourceConfig) -> Health {
    match s {
        SourceConfig::DeadLetters(s) => Health::new(
            "dead-letters",
            s.path.clone(),
            match std::fs::metadata(&s.path) {
                Ok(m) => Ok(format!("{} bytes", m.len())),
                Err(e) => Err(format!("cannot read: {e}")),
            },
        ),
        SourceConfig::Generator(_) => {
            Health::new("generator", "built in", Ok("nothing to reach".into()))
        }
        SourceConfig::Jdbc(s) => s.healthcheck().await,
        SourceConfig::Kafka(s) => s.healthcheck().await,
        SourceConfig::Rabbitmq(s) => s.healthcheck().await,
        SourceConfig::RedisStreams(s) => s.healthcheck().await,
    }
}

async fn sink(s: &SinkConfig) -> Health {
    match s {
        SinkConfig::Stdout(_) => {
            Health::new("stdout", "standard output", Ok("nothing to reach".into()))
        }
        SinkConfig::Jdbc(s) => s.healthcheck().await,
        SinkConfig::Kafka(s) => s.healthcheck().await,
        SinkConfig::Elasticsearch(s) => s.healthcheck().await,
        SinkConfig::Rabbitmq(s) => s.healthcheck().await,
        SinkConfig::Redis(s) => s.healthcheck().await,
    }
}

async fn dead_letters(d: &DeadLetterDestination) -> Health {
    match d {
        DeadLetterDestination::Kafka(d) => d.healthcheck().await,
        DeadLetterDestination::Rabbitmq(d) => d.healthcheck().await,
        DeadLetterDestination::Redis(d) => d.healthcheck().await,
    }
}

/// Checks the source, the sink and the dead-letter destination of `config`.
pub async fn check(config: &PipelineConfig) -> Vec<Reach> {
    let mut out = vec![
        Reach::of("source", source(&config.source).await),
        Reach::of("sink", sink(&config.sink).await),
    ];
    if let Some(d) = &config.errors.destination {
        out.push(Reach::of("dead letters", dead_letters(d).await));
    }
    out
}
