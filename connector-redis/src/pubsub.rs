//! [`RedisPubSubSource`]: messages of Redis pub/sub channels (or patterns). Pub/sub keeps nothing:
//! a message published while no subscriber listens (a restart, a slow reconnect) is gone, so
//! this source is honestly **at-most-once**, checkpoints or not.

use std::sync::Arc;

use futures::StreamExt;
use rivus_core::error_policy::{ErrorHandler, ErrorPolicy};
use rivus_core::prelude::*;
use rivus_core::schema::SchemaError;

use crate::connection::Endpoint;

type Decoder<T> = dyn Fn(&str, &[u8]) -> Result<T, SchemaError> + Send + Sync;

/// Subscribes to channels and patterns; every subtask receives every message (pub/sub fans
/// out), so run it with parallelism 1 unless duplicates across subtasks are wanted.
pub struct RedisPubSubSource<T> {
    endpoint: Endpoint,
    channels: Vec<String>,
    patterns: Vec<String>,
    policy: ErrorPolicy,
    decode: Arc<Decoder<T>>,
}

impl<T> Clone for RedisPubSubSource<T> {
    fn clone(&self) -> Self {
        RedisPubSubSource {
            endpoint: self.endpoint.clone(),
            channels: self.channels.clone(),
            patterns: self.patterns.clone(),
            policy: self.policy.clone(),
            decode: Arc::clone(&self.decode),
        }
    }
}

impl<T> std::fmt::Debug for RedisPubSubSource<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisPubSubSource")
            .field("endpoint", &self.endpoint)
            .field("channels", &self.channels)
            .field("patterns", &self.patterns)
            .finish()
    }
}

impl<T: Send + 'static> RedisPubSubSource<T> {
    /// A source subscribed to `channels` and `patterns` (`PSUBSCRIBE` globs) on one server
    /// (a URL, or an [`Endpoint`] with TLS files; not a cluster); `decode` gets the channel
    /// name and the payload.
    pub fn new(
        endpoint: impl Into<Endpoint>,
        channels: Vec<String>,
        patterns: Vec<String>,
        policy: ErrorPolicy,
        decode: impl Fn(&str, &[u8]) -> Result<T, SchemaError> + Send + Sync + 'static,
    ) -> Result<Self> {
        let endpoint = endpoint.into();
        endpoint.validate("source.redis_pubsub")?;
        if endpoint.is_cluster() {
            return Err(Error::config(
                "source.redis_pubsub.url",
                "pub/sub needs one server, not a cluster",
            ));
        }
        if channels.is_empty() && patterns.is_empty() {
            return Err(Error::config(
                "source.redis_pubsub.channels",
                "at least one channel or pattern",
            ));
        }
        Ok(RedisPubSubSource {
            endpoint,
            channels,
            patterns,
            policy,
            decode: Arc::new(decode),
        })
    }
}

#[async_trait]
impl<T: Send + 'static> RichFunction for RedisPubSubSource<T> {}

#[async_trait]
impl<T: Send + 'static> SourceFunction for RedisPubSubSource<T> {
    type Out = T;
    type State = ();

    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::AtMostOnce
    }

    /// Nothing to restore: pub/sub has no positions.
    fn restore_state(&mut self, _: Restored<()>) -> Result<()> {
        Ok(())
    }

    async fn run(&mut self, ctx: &mut SourceContext<T, ()>) -> Result<()> {
        let what = |e: redis::RedisError| {
            Error::connector(
                format!("redis pub/sub {}", self.endpoint.describe()),
                crate::redact(&e.to_string()),
            )
        };
        let client = self.endpoint.single_client("source.redis_pubsub")?;
        let mut pubsub = client.get_async_pubsub().await.map_err(what)?;
        for c in &self.channels {
            pubsub.subscribe(c).await.map_err(what)?;
        }
        for p in &self.patterns {
            pubsub.psubscribe(p).await.map_err(what)?;
        }
        let handler =
            ErrorHandler::new(self.policy.clone(), "redis-pubsub").connector("redis-pubsub");
        let mut messages = pubsub.into_on_message();
        loop {
            let msg = match ctx.wait_for(messages.next()).await? {
                None => return Ok(()),
                Some(None) => {
                    return Err(Error::connector(
                        "redis pub/sub",
                        "the subscription connection closed",
                    ))
                }
                Some(Some(m)) => m,
            };
            let channel = msg.get_channel_name().to_owned();
            match (self.decode)(&channel, msg.get_payload_bytes()) {
                Ok(v) => ctx.collect(v).await?,
                Err(e) => {
                    handler
                        .handle(format!("channel {channel}"), &e, msg.get_payload_bytes())
                        .await?
                }
            }
        }
    }
}
