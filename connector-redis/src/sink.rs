//! [`RedisSink`]: records → commands → pipelines through core's BulkProcessor.

use std::sync::Arc;

use rivus_sdk::bulk::{BulkConfig, BulkProcessor, BulkSender, NoopListener, SendOutcome};
use rivus_sdk::error_policy::{ErrorHandler, ErrorPolicy};
use rivus_sdk::prelude::*;
use rivus_sdk::schema::SchemaError;

use crate::command::RedisCommand;
use crate::config::RedisConfig;
use crate::connection::{by_slot, RedisConnection};
use crate::redact;

type Mapper<T> = dyn Fn(&T) -> Result<Vec<RedisCommand>, SchemaError> + Send + Sync;

/// Sends one pipeline (on a cluster, one per hash slot, concurrently); per-command errors go
/// to the error policy.
struct PipelineSender {
    con: RedisConnection,
    handler: ErrorHandler,
    commands: metrics::Counter,
}

type Replies = redis::RedisResult<Vec<redis::RedisResult<redis::Value>>>;

impl PipelineSender {
    /// One pipeline: each command's replies (a command may be two, HSET + EXPIRE).
    async fn pipeline(&self, items: Vec<RedisCommand>) -> (Vec<RedisCommand>, Vec<usize>, Replies) {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        let replies: Vec<usize> = items.iter().map(|c| c.add_to(&mut pipe)).collect();
        let mut con = self.con.clone();
        let results = pipe.query_async(&mut con).await;
        (items, replies, results)
    }
}

#[async_trait]
impl BulkSender<RedisCommand> for PipelineSender {
    async fn send(&self, items: Vec<RedisCommand>) -> SendOutcome<RedisCommand> {
        let total = items.len();
        let groups = if self.con.is_cluster() {
            by_slot(items, |c| c.key())
        } else {
            vec![items]
        };
        let sent = futures::future::join_all(groups.into_iter().map(|g| self.pipeline(g))).await;
        let mut again = Vec::new();
        let mut reason = String::new();
        for (items, replies, results) in sent {
            let results = match results {
                Ok(r) => r,
                Err(e) if crate::transient(&e) => {
                    reason = redact(&e.to_string());
                    again.extend(items);
                    continue;
                }
                Err(e) => {
                    return SendOutcome::Failed(Error::connector(
                        "redis pipeline",
                        redact(&e.to_string()),
                    ))
                }
            };
            let mut at = 0;
            for (cmd, n) in items.into_iter().zip(replies) {
                let failed = results[at..(at + n).min(results.len())]
                    .iter()
                    .find_map(|r| r.as_ref().err());
                at += n;
                match failed {
                    None => {}
                    // The server is not ready (loading its data after a restart, TRYAGAIN, a
                    // slot moving...): the command is sent again, it is not the record's fault.
                    Some(e) if crate::transient(e) => {
                        reason = redact(&e.to_string());
                        again.push(cmd);
                    }
                    Some(e) => {
                        let position = format!("redis key {}", cmd.key());
                        if let Err(err) = self.handler.handle(position, e, &[]).await {
                            return SendOutcome::Failed(err);
                        }
                    }
                }
            }
        }
        self.commands.increment((total - again.len()) as u64);
        if again.is_empty() {
            SendOutcome::Done
        } else {
            SendOutcome::Retry {
                items: again,
                reason,
            }
        }
    }
}

/// What a [`RedisSinkBuilder`] sets, shared by the subtasks of what it builds.
#[derive(Debug)]
struct Settings {
    endpoint: RedisConfig,
    bulk: BulkConfig,
    policy: ErrorPolicy,
    guarantee: DeliveryGuarantee,
}

/// Builds a [`RedisSink`].
#[derive(Debug)]
pub struct RedisSinkBuilder {
    s: Settings,
}

impl RedisSinkBuilder {
    rivus_sdk::setters! {
        /// When pipelines are sent, how many are in flight and how failed ones are retried (default
        /// [`RedisSink::default_bulk`]: 1000 commands, 1 MiB, every 100 ms, one pipeline in
        /// flight). With one, the commands of a key apply in the order of the records, retries
        /// included; with more, two commands of one key in different pipelines may apply in either
        /// order (fine for SADD/PFADD/counters, not for SET). Pipelines that failed on the
        /// connection are retried with `bulk.backoff` (the connection manager reconnects
        /// meanwhile).
        bulk(bulk: BulkConfig) => s.bulk;

        /// Commands per pipeline (shortcut for `bulk.max_actions`).
        batch_size(n: usize) => s.bulk.max_actions;

        /// The delivery guarantee (default at-least-once: every pipelined command is answered
        /// before a checkpoint completes; `set`/`hset`/`sadd` rewrite the same value on replay).
        /// `AtMostOnce` does not wait at checkpoints. `ExactlyOnce` is refused at `build`: a
        /// pipeline is no transaction that a checkpoint could commit.
        guarantee(g: DeliveryGuarantee) => s.guarantee;

        /// Commands the server refuses (WRONGTYPE...) and records the mapper rejects: fail
        /// (default), skip, dead-letter.
        error_policy(p: ErrorPolicy) => s.policy;
    }

    /// Checks the settings; `mapper` turns each record into commands (a missing or mistyped
    /// field is a `SchemaError` naming the record and the field).
    pub fn build<T: Send + 'static>(
        self,
        mapper: impl Fn(&T) -> Result<Vec<RedisCommand>, SchemaError> + Send + Sync + 'static,
    ) -> Result<RedisSink<T>> {
        let s = self.s;
        s.endpoint.validate()?;
        s.bulk.validate()?;
        if s.guarantee == DeliveryGuarantee::ExactlyOnce {
            return Err(Error::config(
                "guarantee",
                "exactly-once is not offered (a pipeline is no transaction): use at-least-once \
                 with commands that rewrite the same value on replay (set, hset, sadd)",
            ));
        }
        Ok(RedisSink {
            settings: Arc::new(s),
            mapper: Arc::new(mapper),
            running: None,
        })
    }
}

/// A Redis sink. Clone it into each subtask.
pub struct RedisSink<T> {
    settings: Arc<Settings>,
    mapper: Arc<Mapper<T>>,
    running: Option<Running>,
}

/// What `open` creates and `close` ends.
struct Running {
    processor: BulkProcessor<RedisCommand>,
    handler: ErrorHandler,
}

impl<T> std::fmt::Debug for RedisSink<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSink")
            .field("endpoint", &self.settings.endpoint)
            .field("bulk", &self.settings.bulk)
            .finish()
    }
}

impl<T> Clone for RedisSink<T> {
    fn clone(&self) -> Self {
        RedisSink {
            settings: Arc::clone(&self.settings),
            mapper: Arc::clone(&self.mapper),
            running: None,
        }
    }
}

impl RedisSink<()> {
    /// The sink's batching when [`RedisSinkBuilder::bulk`] is not called: 1000 commands,
    /// 1 MiB, every 100 ms, one pipeline in flight, core's default backoff.
    pub fn default_bulk() -> BulkConfig {
        BulkConfig {
            max_actions: 1000,
            max_bytes: 1 << 20,
            flush_interval: Some(std::time::Duration::from_millis(100)),
            concurrent_requests: 1,
            ..BulkConfig::default()
        }
    }

    /// Starts a builder for a sink writing to `endpoint`: a URL
    /// (`redis://[user:password@]host:port/db`, `rediss://` for TLS) or an [`RedisConfig`] (a
    /// cluster, TLS files, timeouts).
    pub fn builder(config: impl Into<RedisConfig>) -> RedisSinkBuilder {
        RedisSinkBuilder {
            s: Settings {
                endpoint: config.into(),
                bulk: RedisSink::default_bulk(),
                policy: ErrorPolicy::Fail,
                guarantee: DeliveryGuarantee::AtLeastOnce,
            },
        }
    }
}

impl<T: Send + 'static> RedisSink<T> {
    fn running(&self) -> Result<&Running> {
        self.running
            .as_ref()
            .ok_or(Error::Closed("redis sink (not open)"))
    }
}

#[async_trait]
impl<T: Send + 'static> RichFunction for RedisSink<T> {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        let s = &self.settings;
        let con = s.endpoint.connect(true).await?;
        let handler = ErrorHandler::new(s.policy.clone(), ctx.display_name()).connector("redis");
        let sender = PipelineSender {
            con,
            handler: handler.clone(),
            commands: ctx.metrics().counter("rivus_redis_commands_total"),
        };
        let processor = BulkProcessor::with_parts(
            ctx.display_name(),
            s.bulk.clone(),
            Arc::new(sender),
            Arc::new(NoopListener),
            Arc::new(RedisCommand::size),
        )?;
        self.running = Some(Running { processor, handler });
        Ok(())
    }

    async fn close(&mut self) -> Result<()> {
        if let Some(r) = self.running.take() {
            if let Err(e) = r.processor.close().await {
                tracing::debug!(error = %e, "redis sink: closing with commands failed");
            }
        }
        Ok(())
    }
}

#[async_trait]
impl<T: Send + 'static> CheckpointedFunction for RedisSink<T> {
    type State = ();

    async fn snapshot_state(&mut self, _: u64) -> Result<()> {
        if self.settings.guarantee == DeliveryGuarantee::AtMostOnce {
            return Ok(());
        }
        self.running()?.processor.flush().await
    }
}

#[async_trait]
impl<T: Send + 'static> CheckpointListener for RedisSink<T> {}

#[async_trait]
impl<T: Send + 'static> SinkFunction<T> for RedisSink<T> {
    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        self.settings.guarantee
    }

    async fn invoke(&mut self, value: T, _: &SinkContext) -> Result<()> {
        let r = self.running()?;
        match (self.mapper)(&value) {
            Ok(cmds) => {
                for c in cmds {
                    r.processor.add(c).await?;
                }
                Ok(())
            }
            // Not the record's fault (a schema registry out of reach): fail and retry.
            Err(e) if e.transient => Err(Error::connector("redis sink: encoding", e)),
            Err(e) => r.handler.handle(&e.position, &e, &[]).await,
        }
    }

    async fn finish(&mut self) -> Result<()> {
        self.running()?.processor.flush().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guarantee_is_what_was_asked_and_exactly_once_is_refused_by_name() {
        let none = |_: &u32| Ok(Vec::new());
        let sink = RedisSink::builder("redis://127.0.0.1:6379/")
            .guarantee(DeliveryGuarantee::AtMostOnce)
            .build(none)
            .unwrap();
        assert_eq!(sink.delivery_guarantee(), DeliveryGuarantee::AtMostOnce);
        let sink = RedisSink::builder("redis://127.0.0.1:6379/")
            .build(none)
            .unwrap();
        assert_eq!(sink.delivery_guarantee(), DeliveryGuarantee::AtLeastOnce);
        let e = RedisSink::builder("redis://127.0.0.1:6379/")
            .guarantee(DeliveryGuarantee::ExactlyOnce)
            .build(none)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`guarantee`"), "{e}");
    }
}
