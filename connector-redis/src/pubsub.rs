//! [`RedisPubSubSource`]: messages of Redis pub/sub channels (or patterns). Pub/sub keeps nothing:
//! a message published while no subscriber listens (a restart, a slow reconnect) is gone, so
//! this source is honestly **at-most-once**, checkpoints or not.

use std::sync::Arc;

use futures::StreamExt;
use rivus_sdk::error_policy::{ErrorHandler, ErrorPolicy};
use rivus_sdk::prelude::*;
use rivus_sdk::schema::SchemaError;

use crate::config::RedisConfig;

type Decoder<T> = dyn Fn(&str, &[u8]) -> Result<T, SchemaError> + Send + Sync;

/// What a [`RedisPubSubSourceBuilder`] sets, shared by the subtasks of the built source.
#[derive(Debug)]
struct Settings {
    endpoint: RedisConfig,
    channels: Vec<String>,
    patterns: Vec<String>,
    policy: ErrorPolicy,
}

/// Builds a [`RedisPubSubSource`].
#[derive(Debug)]
pub struct RedisPubSubSourceBuilder {
    s: Settings,
}

impl RedisPubSubSourceBuilder {
    /// The channels to `SUBSCRIBE` to.
    pub fn channels<I: IntoIterator<Item = S>, S: Into<String>>(mut self, c: I) -> Self {
        self.s.channels = c.into_iter().map(Into::into).collect();
        self
    }

    /// The patterns to `PSUBSCRIBE` to (globs: `orders.*`).
    pub fn patterns<I: IntoIterator<Item = S>, S: Into<String>>(mut self, p: I) -> Self {
        self.s.patterns = p.into_iter().map(Into::into).collect();
        self
    }

    rivus_sdk::setters! {
        /// What to do with messages the decoder rejects. Default: fail.
        error_policy(p: ErrorPolicy) => s.policy;
    }

    /// Checks the settings; `decode` gets the channel name and the payload.
    pub fn build<T: Send + 'static>(
        self,
        decode: impl Fn(&str, &[u8]) -> Result<T, SchemaError> + Send + Sync + 'static,
    ) -> Result<RedisPubSubSource<T>> {
        let s = self.s;
        s.endpoint.validate()?;
        if s.endpoint.is_cluster() {
            return Err(Error::config(
                "url",
                "pub/sub needs one server, not a cluster",
            ));
        }
        if s.channels.is_empty() && s.patterns.is_empty() {
            return Err(Error::config("channels", "at least one channel or pattern"));
        }
        Ok(RedisPubSubSource {
            settings: Arc::new(s),
            decode: Arc::new(decode),
        })
    }
}

/// Subscribes to channels and patterns; every subtask receives every message (pub/sub fans
/// out), so run it with parallelism 1 unless duplicates across subtasks are wanted.
pub struct RedisPubSubSource<T> {
    settings: Arc<Settings>,
    decode: Arc<Decoder<T>>,
}

impl<T> Clone for RedisPubSubSource<T> {
    fn clone(&self) -> Self {
        RedisPubSubSource {
            settings: Arc::clone(&self.settings),
            decode: Arc::clone(&self.decode),
        }
    }
}

impl<T> std::fmt::Debug for RedisPubSubSource<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisPubSubSource")
            .field("settings", &self.settings)
            .finish()
    }
}

impl RedisPubSubSource<()> {
    /// Starts a builder for a source subscribing on one server: a URL (`redis://`,
    /// `rediss://`) or an [`RedisConfig`] with TLS files; not a cluster.
    pub fn builder(config: impl Into<RedisConfig>) -> RedisPubSubSourceBuilder {
        RedisPubSubSourceBuilder {
            s: Settings {
                endpoint: config.into(),
                channels: Vec::new(),
                patterns: Vec::new(),
                policy: ErrorPolicy::Fail,
            },
        }
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
        let s = &self.settings;
        let what = |e: redis::RedisError| {
            Error::connector(
                format!("redis pub/sub {}", s.endpoint.describe()),
                crate::redact(&e.to_string()),
            )
        };
        let client = s.endpoint.single_client()?;
        let mut pubsub = client.get_async_pubsub().await.map_err(what)?;
        for c in &s.channels {
            pubsub.subscribe(c).await.map_err(what)?;
        }
        for p in &s.patterns {
            pubsub.psubscribe(p).await.map_err(what)?;
        }
        let handler = ErrorHandler::new(s.policy.clone(), "redis-pubsub").connector("redis-pubsub");
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
