//! A dead-letter destination in RabbitMQ: each letter (the JSON of
//! [`DeadLetter`](rivus_sdk::error_policy::DeadLetter)) is published persistent and
//! `mandatory` to a queue through the default exchange, on a channel with publisher confirms,
//! and `send` returns only once the broker confirmed it — so the letter is stored before the
//! checkpoint that passes the record. A lost connection is opened again at the next letter.

use async_trait::async_trait;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::ShortString;
use lapin::{BasicProperties, Channel, Confirmation, Connection};
use rivus_sdk::error_policy::{DeadLetter, DeadLetterQueue};
use rivus_sdk::{Error, Result};
use tokio::sync::Mutex;

use crate::config::{redact, AmqpConfig};

/// Writes dead letters to a RabbitMQ queue (which must exist: declare it durable).
pub struct RabbitDeadLetterQueue {
    config: AmqpConfig,
    queue: String,
    open: Mutex<Option<(Connection, Channel)>>,
}

impl std::fmt::Debug for RabbitDeadLetterQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RabbitDeadLetterQueue")
            .field("uri", &redact(&self.config.uri))
            .field("queue", &self.queue)
            .finish()
    }
}

impl RabbitDeadLetterQueue {
    /// Letters to `queue` on the broker of `config`; it connects at the first letter.
    pub fn new(config: impl Into<AmqpConfig>, queue: impl Into<String>) -> Result<Self> {
        let (config, queue) = (config.into(), queue.into());
        if queue.is_empty() {
            return Err(Error::config("queue", "must not be empty"));
        }
        config.validate()?;
        Ok(RabbitDeadLetterQueue {
            config,
            queue,
            open: Mutex::new(None),
        })
    }

    fn failed(&self, what: &str, e: impl std::fmt::Display) -> Error {
        crate::error::amqp(
            format!("rabbitmq dead-letter queue `{}`: {what}", self.queue),
            e,
        )
    }

    async fn channel(&self, open: &mut Option<(Connection, Channel)>) -> Result<Channel> {
        if let Some((conn, ch)) = open.as_ref() {
            if conn.status().connected() && ch.status().connected() {
                return Ok(ch.clone());
            }
        }
        let conn = self.config.connect().await?;
        let ch = conn
            .create_channel()
            .await
            .map_err(|e| self.failed("opening a channel", e))?;
        ch.confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| self.failed("enabling publisher confirms", e))?;
        *open = Some((conn, ch.clone()));
        Ok(ch)
    }
}

#[async_trait]
impl DeadLetterQueue for RabbitDeadLetterQueue {
    async fn send(&self, letter: DeadLetter) -> Result<()> {
        let json = letter.to_json();
        let mut open = self.open.lock().await;
        let ch = self.channel(&mut open).await?;
        let props = BasicProperties::default()
            .with_delivery_mode(2)
            .with_content_type(ShortString::from("application/json"));
        let confirm = ch
            .basic_publish(
                "".into(),
                self.queue.as_str().into(),
                BasicPublishOptions {
                    mandatory: true,
                    ..Default::default()
                },
                &json,
                props,
            )
            .await
            .map_err(|e| {
                *open = None;
                self.failed("publishing", e)
            })?;
        match confirm.await {
            Ok(Confirmation::Ack(None)) | Ok(Confirmation::NotRequested) => Ok(()),
            Ok(Confirmation::Ack(Some(_))) => Err(self.failed(
                "unroutable",
                "the broker returned the letter: does the queue exist?",
            )),
            Ok(Confirmation::Nack(_)) => Err(self.failed("publishing", "nacked by the broker")),
            Err(e) => {
                *open = None;
                Err(self.failed("waiting for the confirm", e))
            }
        }
    }
}
