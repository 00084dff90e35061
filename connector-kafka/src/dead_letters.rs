//! A dead-letter destination in Kafka: each letter (the JSON of
//! [`DeadLetter`](rivus_sdk::error_policy::DeadLetter)) is produced to a topic, keyed by the
//! record's position, with `acks=all` and idempotence, and `send` returns only once the broker
//! acknowledged it — so the letter is stored before the checkpoint that passes the record.

use std::time::Duration;

use async_trait::async_trait;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rivus_sdk::error_policy::{DeadLetter, DeadLetterQueue};
use rivus_sdk::{Error, Result};

use crate::config::KafkaConfig;

/// Writes dead letters to a Kafka topic.
pub struct KafkaDeadLetterQueue {
    producer: FutureProducer,
    props: KafkaConfig,
    topic: String,
    timeout: Duration,
}

impl std::fmt::Debug for KafkaDeadLetterQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaDeadLetterQueue")
            .field("endpoint", &self.props.endpoint())
            .field("topic", &self.topic)
            .finish()
    }
}

impl KafkaDeadLetterQueue {
    /// A producer for `topic` on the cluster of `props` (security included); it connects
    /// lazily, so a wrong address shows at the first letter.
    pub fn new(props: KafkaConfig, topic: impl Into<String>) -> Result<Self> {
        let topic = topic.into();
        if topic.is_empty() {
            return Err(Error::config("topic", "must not be empty"));
        }
        props.validate()?;
        let producer: FutureProducer = props
            .client_config(&[("acks", "all"), ("enable.idempotence", "true")])
            .create()
            .map_err(|e| props.build_error("dead-letter producer", e))?;
        Ok(KafkaDeadLetterQueue {
            producer,
            props,
            topic,
            timeout: Duration::from_secs(60),
        })
    }

    /// The topic letters go to.
    pub fn topic(&self) -> &str {
        &self.topic
    }
}

#[async_trait]
impl DeadLetterQueue for KafkaDeadLetterQueue {
    async fn send(&self, letter: DeadLetter) -> Result<()> {
        let json = letter.to_json();
        let record = FutureRecord::to(&self.topic)
            .key(letter.position.as_bytes())
            .payload(&json);
        self.producer
            .send(record, self.timeout)
            .await
            .map(|_| ())
            .map_err(|(e, _)| {
                crate::kafka_err(
                    format!(
                        "kafka dead-letter topic `{}` on {}",
                        self.topic,
                        self.props.endpoint()
                    ),
                    e,
                )
            })
    }
}

impl Drop for KafkaDeadLetterQueue {
    fn drop(&mut self) {
        // Every send awaited its acknowledgement; nothing is left to flush but be tidy.
        let _ = self.producer.flush(Duration::from_secs(1));
    }
}
