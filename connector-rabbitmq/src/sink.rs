//! [`RabbitSink`]: publisher confirms with a bounded window of unconfirmed messages; all
//! confirms awaited at each checkpoint; nacks retried with backoff; unroutable and finally
//! refused messages go to the error policy.

use std::collections::VecDeque;
use std::sync::Arc;

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Connection};
use lapin::{Confirmation, PublisherConfirm};
use rivus_sdk::backoff::{Attempts, BackoffPolicy};
use rivus_sdk::error_policy::{ErrorHandler, ErrorPolicy};
use rivus_sdk::prelude::*;
use rivus_sdk::schema::SchemaError;

use crate::config::AmqpConfig;

/// A message to publish.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutMessage {
    /// Exchange (`None`: the sink's; `""` is the default exchange).
    pub exchange: Option<String>,
    /// Routing key (`None`: the sink's).
    pub routing_key: Option<String>,
    /// The body.
    pub body: Vec<u8>,
    /// Correlation id (lets a rivus RabbitMQ source deduplicate).
    pub correlation_id: Option<String>,
    /// Content type.
    pub content_type: Option<String>,
    /// String headers.
    pub headers: Vec<(String, String)>,
}

type Encoder<T> = dyn Fn(&T) -> Result<OutMessage, SchemaError> + Send + Sync;

/// What a [`RabbitSinkBuilder`] sets, shared by the subtasks of what it builds.
#[derive(Debug)]
struct Settings {
    config: AmqpConfig,
    exchange: String,
    routing_key: String,
    window: usize,
    /// Longest wait for a publish to be written or confirmed.
    confirm_timeout: std::time::Duration,
    persistent: bool,
    mandatory: bool,
    backoff: BackoffPolicy,
    policy: ErrorPolicy,
    guarantee: DeliveryGuarantee,
}

/// Builds a [`RabbitSink`].
#[derive(Debug)]
pub struct RabbitSinkBuilder {
    s: Settings,
}

impl RabbitSinkBuilder {
    rivus_sdk::setters! {
        /// Default exchange of messages (default `""`, the default exchange).
        exchange(e: impl Into<String>) => s.exchange = e.into();

        /// Default routing key (with the default exchange: the queue name).
        routing_key(k: impl Into<String>) => s.routing_key = k.into();

        /// Unconfirmed messages in flight at most (default 1000).
        confirm_window(n: usize) => s.window;

        /// Longest wait for the broker to take a publish or confirm it (default 30 s). Past it the
        /// connection counts as lost: the sink reconnects and publishes what is unconfirmed again
        /// (at-least-once) — a frozen broker or a dead network path sends no TCP error.
        confirm_timeout(d: std::time::Duration) => s.confirm_timeout;

        /// Persistent delivery mode (default true).
        persistent(on: bool) => s.persistent;

        /// Publish as mandatory: unroutable messages come back and go to the error policy
        /// (default true).
        mandatory(on: bool) => s.mandatory;

        /// Retries of nacked messages (default exponential, 8 retries).
        backoff(b: BackoffPolicy) => s.backoff;

        /// The delivery guarantee (default at-least-once: every publish is confirmed by the
        /// broker before a checkpoint completes). `AtMostOnce` does not wait for confirms at
        /// checkpoints. `ExactlyOnce` is refused at `build`: publishes cannot be taken back (a
        /// reader drops repeats by correlation id: the RabbitMQ source's `use_correlation_ids`).
        guarantee(g: DeliveryGuarantee) => s.guarantee;

        /// What happens to messages that cannot be encoded, are unroutable, or stay nacked.
        error_policy(p: ErrorPolicy) => s.policy;
    }

    /// Checks the settings.
    pub fn build<T: Send + 'static>(
        self,
        encode: impl Fn(&T) -> Result<OutMessage, SchemaError> + Send + Sync + 'static,
    ) -> Result<RabbitSink<T>> {
        let s = self.s;
        s.config.validate()?;
        if s.guarantee == DeliveryGuarantee::ExactlyOnce {
            return Err(Error::config(
                "guarantee",
                "exactly-once is not offered (a publish cannot be taken back): use \
                 at-least-once, and correlation ids for a reader that drops repeats",
            ));
        }
        if s.window == 0 {
            return Err(Error::config("confirm_window", "must be at least 1"));
        }
        Ok(RabbitSink {
            settings: Arc::new(s),
            encode: Arc::new(encode),
            conn: None,
            in_flight: VecDeque::new(),
            handler: None,
        })
    }
}

struct InFlight {
    /// `None`: to publish again (its connection was lost before the confirm).
    confirm: Option<PublisherConfirm>,
    msg: OutMessage,
    attempt: u32,
}

/// A RabbitMQ sink. Clone it into each subtask.
pub struct RabbitSink<T> {
    settings: Arc<Settings>,
    encode: Arc<Encoder<T>>,
    conn: Option<(Connection, Channel)>,
    in_flight: VecDeque<InFlight>,
    handler: Option<ErrorHandler>,
}

impl<T> std::fmt::Debug for RabbitSink<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RabbitSink")
            .field("config", &self.settings.config)
            .field("exchange", &self.settings.exchange)
            .field("routing_key", &self.settings.routing_key)
            .field("window", &self.settings.window)
            .finish()
    }
}

impl<T> Clone for RabbitSink<T> {
    fn clone(&self) -> Self {
        RabbitSink {
            settings: Arc::clone(&self.settings),
            encode: Arc::clone(&self.encode),
            conn: None,
            in_flight: VecDeque::new(),
            handler: None,
        }
    }
}

impl RabbitSink<()> {
    /// Starts a builder for a sink publishing to the broker at a URI
    /// (`amqp://user:password@host:5672/%2f`, `amqps://` for TLS) or an [`AmqpConfig`] (TLS
    /// files, timeouts, reconnect backoff).
    pub fn builder(config: impl Into<AmqpConfig>) -> RabbitSinkBuilder {
        RabbitSinkBuilder {
            s: Settings {
                config: config.into(),
                exchange: String::new(),
                routing_key: String::new(),
                window: 1000,
                confirm_timeout: std::time::Duration::from_secs(30),
                persistent: true,
                mandatory: true,
                backoff: BackoffPolicy::default(),
                policy: ErrorPolicy::Fail,
                guarantee: DeliveryGuarantee::AtLeastOnce,
            },
        }
    }
}

fn amqp(what: &str, e: impl std::fmt::Display) -> Error {
    crate::error::amqp(format!("rabbitmq sink: {what}"), e)
}

impl<T: Send + 'static> RabbitSink<T> {
    async fn open_channel(&self) -> Result<(Connection, Channel)> {
        let conn = self.settings.config.connect().await?;
        let ch = conn
            .create_channel()
            .await
            .map_err(|e| amqp("opening a channel", e))?;
        ch.confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| amqp("enabling publisher confirms", e))?;
        Ok((conn, ch))
    }

    /// After a lost connection: reconnects with backoff and publishes again, in order, every
    /// message not confirmed yet (at-least-once: the broker may have some of them already).
    async fn reconnect(&mut self, why: &str) -> Result<()> {
        tracing::warn!(
            reason = why,
            unconfirmed = self.in_flight.len(),
            "rabbitmq sink: connection lost, reconnecting"
        );
        metrics::counter!("rivus_rabbitmq_reconnects_total").increment(1);
        if let Some((conn, _)) = self.conn.take() {
            crate::config::close_quietly(&conn, "reconnecting").await;
        }
        let mut attempts =
            Attempts::new("rabbitmq sink: reconnect", &self.settings.config.reconnect);
        'connect: loop {
            let err = match self.open_channel().await {
                Ok(c) => {
                    self.conn = Some(c);
                    let unconfirmed: Vec<InFlight> = self.in_flight.drain(..).collect();
                    let mut rest = unconfirmed.into_iter();
                    while let Some(f) = rest.next() {
                        match self.publish_once(&f.msg).await {
                            Ok(confirm) => self.in_flight.push_back(InFlight {
                                confirm: Some(confirm),
                                ..f
                            }),
                            Err(e) => {
                                // Lost again: keep the remaining messages for the next try.
                                let mut keep: Vec<InFlight> = self.in_flight.drain(..).collect();
                                keep.push(f);
                                keep.extend(rest);
                                self.in_flight.extend(keep);
                                self.conn = None;
                                tracing::debug!(error = %e, "rabbitmq sink: republishing failed");
                                attempts.wait(e).await?;
                                continue 'connect;
                            }
                        }
                    }
                    return Ok(());
                }
                Err(e) => e,
            };
            attempts.wait(err).await?;
        }
    }

    fn channel(&self) -> Result<&Channel> {
        self.conn
            .as_ref()
            .map(|(_, c)| c)
            .ok_or(Error::Closed("rabbitmq sink"))
    }

    /// Publishes `msg`; on a lost connection reconnects (republishing what is unconfirmed)
    /// and publishes it again.
    async fn publish(&mut self, msg: &OutMessage) -> Result<PublisherConfirm> {
        match self.publish_once(msg).await {
            Ok(c) => Ok(c),
            Err(e) => {
                self.reconnect(&e.to_string()).await?;
                self.publish_once(msg).await
            }
        }
    }

    async fn publish_once(&self, msg: &OutMessage) -> Result<PublisherConfirm> {
        let s = &self.settings;
        let mut props = BasicProperties::default();
        if s.persistent {
            props = props.with_delivery_mode(2);
        }
        if let Some(c) = &msg.correlation_id {
            props = props.with_correlation_id(ShortString::from(c.as_str()));
        }
        if let Some(c) = &msg.content_type {
            props = props.with_content_type(ShortString::from(c.as_str()));
        }
        if !msg.headers.is_empty() {
            let mut t = FieldTable::default();
            for (k, v) in &msg.headers {
                t.insert(
                    ShortString::from(k.as_str()),
                    AMQPValue::LongString(v.as_str().into()),
                );
            }
            props = props.with_headers(t);
        }
        let exchange = msg.exchange.as_deref().unwrap_or(&s.exchange);
        let key = msg.routing_key.as_deref().unwrap_or(&s.routing_key);
        let publishing = self.channel()?.basic_publish(
            exchange.into(),
            key.into(),
            BasicPublishOptions {
                mandatory: s.mandatory,
                ..Default::default()
            },
            &msg.body,
            props,
        );
        match rivus_sdk::activity::bounded(s.confirm_timeout, "rabbitmq: publish", publishing).await
        {
            Some(r) => r.map_err(|e| amqp("publishing", e)),
            None => Err(Error::connector(
                "rabbitmq sink: publishing",
                format!("the broker took no publish within {:?}", s.confirm_timeout),
            )),
        }
    }

    /// Waits for the oldest unconfirmed message; retries it on nack.
    async fn settle_oldest(&mut self) -> Result<()> {
        let Some(f) = self.in_flight.pop_front() else {
            return Ok(());
        };
        let handler = self.handler.clone().ok_or(Error::Closed("rabbitmq sink"))?;
        let position = format!(
            "{}/{}",
            f.msg.exchange.as_deref().unwrap_or(&self.settings.exchange),
            f.msg
                .routing_key
                .as_deref()
                .unwrap_or(&self.settings.routing_key)
        );
        let Some(confirm) = f.confirm else {
            let confirm = self.publish(&f.msg).await?;
            self.in_flight.push_front(InFlight {
                confirm: Some(confirm),
                ..f
            });
            return Ok(());
        };
        let limit = self.settings.confirm_timeout;
        let confirmed = rivus_sdk::activity::bounded(limit, "rabbitmq: publisher confirm", confirm);
        let confirmation = match confirmed.await {
            Some(Ok(c)) => c,
            lost => {
                // Unconfirmed when the connection went (or no confirm came in time): publish
                // it (and the rest) again.
                let why = match lost {
                    Some(Err(e)) => e.to_string(),
                    _ => format!("no publisher confirm within {limit:?}"),
                };
                self.in_flight.push_front(InFlight {
                    confirm: None,
                    msg: f.msg,
                    attempt: f.attempt,
                });
                return self.reconnect(&why).await;
            }
        };
        match confirmation {
            Confirmation::Ack(None) | Confirmation::NotRequested => Ok(()),
            Confirmation::Ack(Some(_)) => {
                handler
                    .handle(position, "unroutable (returned by the broker)", &f.msg.body)
                    .await
            }
            Confirmation::Nack(_) => {
                let attempt = f.attempt + 1;
                match self.settings.backoff.delay(attempt) {
                    Some(wait) => {
                        tokio::time::sleep(wait).await;
                        let confirm = self.publish(&f.msg).await?;
                        self.in_flight.push_back(InFlight {
                            confirm: Some(confirm),
                            msg: f.msg,
                            attempt,
                        });
                        Ok(())
                    }
                    None => {
                        handler
                            .handle(position, format!("nacked {attempt} times"), &f.msg.body)
                            .await
                    }
                }
            }
        }
    }

    async fn settle_all(&mut self) -> Result<()> {
        while !self.in_flight.is_empty() {
            self.settle_oldest().await?;
        }
        Ok(())
    }
}

#[async_trait]
impl<T: Send + 'static> RichFunction for RabbitSink<T> {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        self.conn = Some(self.open_channel().await?);
        self.handler = Some(
            ErrorHandler::new(self.settings.policy.clone(), ctx.display_name())
                .connector("rabbitmq"),
        );
        Ok(())
    }

    async fn close(&mut self) -> Result<()> {
        self.in_flight.clear();
        if let Some((conn, _)) = self.conn.take() {
            crate::config::close_quietly(&conn, "rivus sink closed").await;
        }
        Ok(())
    }
}

#[async_trait]
impl<T: Send + 'static> CheckpointedFunction for RabbitSink<T> {
    type State = ();

    async fn snapshot_state(&mut self, _: u64) -> Result<()> {
        if self.settings.guarantee == DeliveryGuarantee::AtMostOnce {
            return Ok(());
        }
        self.settle_all().await
    }
}

#[async_trait]
impl<T: Send + 'static> CheckpointListener for RabbitSink<T> {}

#[async_trait]
impl<T: Send + 'static> SinkFunction<T> for RabbitSink<T> {
    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        self.settings.guarantee
    }

    async fn invoke(&mut self, value: T, _: &SinkContext) -> Result<()> {
        let msg = match (self.encode)(&value) {
            Ok(m) => m,
            // Not the record's fault (a schema registry out of reach): fail and retry.
            Err(e) if e.transient => return Err(Error::connector("rabbitmq sink: encoding", e)),
            Err(e) => {
                let handler = self.handler.clone().ok_or(Error::Closed("rabbitmq sink"))?;
                return handler.handle(&e.position, &e, &[]).await;
            }
        };
        while self.in_flight.len() >= self.settings.window {
            self.settle_oldest().await?;
        }
        let confirm = self.publish(&msg).await?;
        self.in_flight.push_back(InFlight {
            confirm: Some(confirm),
            msg,
            attempt: 0,
        });
        Ok(())
    }

    async fn finish(&mut self) -> Result<()> {
        self.settle_all().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guarantee_is_what_was_asked_and_exactly_once_is_refused_by_name() {
        let encode = |_: &u32| Ok(OutMessage::default());
        let url = "amqp://guest:guest@127.0.0.1:5672/%2f";
        let sink = RabbitSink::builder(url)
            .guarantee(DeliveryGuarantee::AtMostOnce)
            .build(encode)
            .unwrap();
        assert_eq!(sink.delivery_guarantee(), DeliveryGuarantee::AtMostOnce);
        let sink = RabbitSink::builder(url).build(encode).unwrap();
        assert_eq!(sink.delivery_guarantee(), DeliveryGuarantee::AtLeastOnce);
        let e = RabbitSink::builder(url)
            .guarantee(DeliveryGuarantee::ExactlyOnce)
            .build(encode)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`guarantee`"), "{e}");
    }
}
