//! Reaching the cluster before a job starts: one metadata round trip that turns librdkafka's
//! background retries into an answer — the brokers and topics, or an error that names the
//! endpoint, how the client authenticated and what the broker or the TLS layer refused.
//!
//! librdkafka reconnects forever and reports authentication and TLS failures only through its
//! error callback; without this a wrong password or an unknown CA is a job that hangs.

use parking_lot::Mutex;
use std::time::{Duration, Instant};

use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseProducer, Producer, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::ClientContext;
use rivus_sdk::{Error, Result};

use crate::config::KafkaConfig;

/// Properties only a consumer reads: a producer told them warns of each (`CONFWARN ... is a
/// consumer property and will be ignored by this producer instance`).
const CONSUMER_ONLY: &[&str] = &[
    "group.id",
    "group.instance.id",
    "group.protocol",
    "group.remote.assignor",
    "partition.assignment.strategy",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "max.poll.interval.ms",
    "enable.auto.commit",
    "auto.commit.interval.ms",
    "enable.auto.offset.store",
    "auto.offset.reset",
    "isolation.level",
    "queued.min.messages",
    "queued.max.messages.kbytes",
    "fetch.wait.max.ms",
    "fetch.queue.backoff.ms",
    "fetch.message.max.bytes",
    "fetch.max.bytes",
    "fetch.min.bytes",
    "fetch.error.backoff.ms",
    "enable.partition.eof",
    "check.crcs",
];

/// The probe's producer settings: the client's connection and security settings without
/// what only a consumer reads, and no topic created by asking about it.
fn probe_config(props: &KafkaConfig) -> rdkafka::ClientConfig {
    let mut c = props.client_config(&[("allow.auto.create.topics", "false")]);
    for key in CONSUMER_ONLY {
        c.remove(key);
    }
    c
}

/// What one metadata request found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterInfo {
    /// Brokers in the cluster.
    pub brokers: usize,
    /// Topics the client may see (all of them, or the ones asked for).
    pub topics: usize,
}

/// What librdkafka reported in the background: the first refusal (kept: a refusal is followed
/// by "all brokers are down") and the last error of any kind.
#[derive(Default)]
struct ErrorCapture(Mutex<Captured>);

#[derive(Default, Clone)]
struct Captured {
    refusal: Option<(RDKafkaErrorCode, String)>,
    last: Option<String>,
}

impl ClientContext for ErrorCapture {
    fn error(&self, error: KafkaError, reason: &str) {
        let code = error.rdkafka_error_code().unwrap_or(RDKafkaErrorCode::Fail);
        tracing::debug!(%error, reason, "kafka client error");
        let mut c = self.0.lock();
        if c.refusal.is_none() {
            if is_refusal(code) {
                c.refusal = Some((code, reason.to_owned()));
            } else if is_tls_alert(code, reason) {
                c.refusal = Some((RDKafkaErrorCode::SSL, reason.to_owned()));
            }
        }
        c.last = Some(reason.to_owned());
    }
}

impl ProducerContext for ErrorCapture {
    type DeliveryOpaque = ();

    fn delivery(&self, _: &rdkafka::message::DeliveryResult<'_>, _: ()) {}
}

impl ErrorCapture {
    fn captured(&self) -> Captured {
        self.0.lock().clone()
    }
}

/// Failures that retrying cannot fix.
fn is_refusal(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::Authentication
            | RDKafkaErrorCode::SaslAuthenticationFailed
            | RDKafkaErrorCode::SSL
            | RDKafkaErrorCode::UnsupportedSASLMechanism
            | RDKafkaErrorCode::IllegalSASLState
    )
}

/// A transport failure that is the server's TLS alert: it refused the client's certificate (or
/// its absence) after a handshake the client believed complete (TLS 1.3).
fn is_tls_alert(code: RDKafkaErrorCode, reason: &str) -> bool {
    code == RDKafkaErrorCode::BrokerTransportFailure
        && (reason.contains("SSL routines") || reason.contains("tls alert"))
}

/// Fetches the cluster's metadata (for `topics` only, when given) within `timeout`. Refused
/// authentication or TLS ends the wait at once; a topic the client may not read or write is an
/// authorization error naming the topic. Errors never contain secrets.
pub async fn probe(
    props: &KafkaConfig,
    topics: &[String],
    timeout: Duration,
) -> Result<ClusterInfo> {
    let endpoint = props.endpoint();
    // A producer: it closes at once (a consumer takes 100 ms to leave). It must not create the
    // topics it asks about.
    let client: BaseProducer<ErrorCapture> = probe_config(props)
        .create_with_context(ErrorCapture::default())
        .map_err(|e| props.build_error("client", e))?;
    let topics = topics.to_vec();
    let _waiting = rivus_sdk::activity::waiting("kafka: probing the brokers (metadata)");
    let outcome = tokio::task::spawn_blocking(move || fetch(&client, &topics, timeout))
        .await
        .map_err(|e| Error::connector("kafka: metadata task", e.to_string()))?;
    outcome.map_err(|(refused, m)| {
        Error::client(
            format!("kafka: cannot use {endpoint}"),
            props.redact(&m),
            if refused {
                rivus_sdk::Fault::Refused
            } else {
                rivus_sdk::Fault::Transient
            },
        )
    })
}

/// The blocking part of [`probe`]: short metadata requests until one answers, a refusal shows
/// in the error callback, or time is up. The error says whether it is a refusal
/// (authentication, TLS, authorization: a restart cannot fix it) and what happened.
fn fetch(
    client: &BaseProducer<ErrorCapture>,
    topics: &[String],
    timeout: Duration,
) -> std::result::Result<ClusterInfo, (bool, String)> {
    let deadline = Instant::now() + timeout;
    loop {
        let step = deadline
            .saturating_duration_since(Instant::now())
            .min(Duration::from_secs(1))
            .max(Duration::from_millis(100));
        // One topic per request: librdkafka asks for one topic or all of them.
        let answer = match topics {
            [] => client.client().fetch_metadata(None, step).map(|m| vec![m]),
            _ => topics
                .iter()
                .map(|t| client.client().fetch_metadata(Some(t), step))
                .collect(),
        };
        // Serving the client's events hands background errors to the context: every queued
        // one (`poll` serves events until its time is up; with no time, only one).
        client.poll(Duration::from_millis(1));
        if let Some((code, reason)) = client.context().captured().refusal {
            return Err((true, refusal_text(code, &reason)));
        }
        match answer {
            Ok(metadata) => {
                for m in &metadata {
                    for t in m.topics() {
                        if let Some(e) = t.error() {
                            let code = RDKafkaErrorCode::from(e);
                            if code == RDKafkaErrorCode::TopicAuthorizationFailed {
                                return Err((
                                    true,
                                    format!(
                                        "authorization refused: not allowed to use topic `{}` ({code})",
                                        t.name()
                                    ),
                                ));
                            }
                        }
                    }
                }
                let brokers = metadata.first().map_or(0, |m| m.brokers().len());
                let topics = metadata.iter().map(|m| m.topics().len()).sum();
                return Ok(ClusterInfo { brokers, topics });
            }
            Err(e) if Instant::now() >= deadline => {
                let background = client
                    .context()
                    .captured()
                    .last
                    .map(|r| format!(" (last client error: {r})"))
                    .unwrap_or_default();
                return Err((
                    false,
                    format!("no answer within {:?}: {e}{background}", timeout),
                ));
            }
            Err(_) => {}
        }
    }
}

fn refusal_text(code: RDKafkaErrorCode, reason: &str) -> String {
    let what = match code {
        RDKafkaErrorCode::SSL => "TLS handshake failed",
        _ => "authentication failed",
    };
    format!("{what}: {reason}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_drops_what_only_a_consumer_reads() {
        let mut props = KafkaConfig::new("127.0.0.1:9092");
        props.set("group.id", "g");
        props.set("queued.min.messages", "20000");
        props.set("socket.timeout.ms", "5000");
        let c = probe_config(&props);
        assert_eq!(c.get("group.id"), None);
        assert_eq!(c.get("queued.min.messages"), None);
        assert_eq!(c.get("socket.timeout.ms"), Some("5000"));
        assert_eq!(c.get("bootstrap.servers"), Some("127.0.0.1:9092"));
    }
}
