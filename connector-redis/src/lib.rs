//! # rivus-connector-redis
//!
//! Redis for rivus, on the [redis](https://docs.rs/redis) crate:
//!
//! - [`RedisSink`]: a mapper turns each record into [`RedisCommand`]s (SET with TTL, HSET,
//!   HINCRBY, LPUSH, SADD, ZADD, PFADD, INCRBY, PUBLISH, XADD with MAXLEN, EXPIRE, ...); core's
//!   `BulkProcessor` sends them as pipelines (count, bytes, interval), per-command errors go to
//!   the error policy, and every checkpoint waits until nothing is pending — at-least-once
//!   (effectively exactly-once for idempotent commands: SET, HSET, SADD, ZADD, PFADD, DEL...).
//! - [`RedisStreamsSource`]: Redis Streams with a consumer group; stream `k` is read by subtask
//!   `k % parallelism` as consumer `<prefix>-<subtask>`; the last emitted entry id per stream is
//!   checkpointed and entries are XACKed when the checkpoint completes; on restart the
//!   consumer's pending entries come first, and those at or before the checkpointed id are
//!   acknowledged without being emitted again — exactly-once.
//! - [`RedisPubSubSource`]: channels and patterns; pub/sub keeps nothing, so it is at-most-once.

mod command;
mod config;
mod connection;
mod dead_letters;
mod error;
#[cfg(feature = "pipeline-file")]
pub mod pipeline_file;
mod pubsub;
mod sink;
mod streams;

pub use command::RedisCommand;
pub use config::RedisConfig;
pub use connection::RedisConnection;
pub use dead_letters::RedisDeadLetterQueue;
pub use pubsub::{RedisPubSubSource, RedisPubSubSourceBuilder};
pub use sink::{RedisSink, RedisSinkBuilder};
pub use streams::{RedisStreamsSource, RedisStreamsSourceBuilder, RedisStreamsState};

pub(crate) use error::{redis_error, transient};
pub use rivus_sdk::secrets::redact_url as redact;

pub(crate) fn open_client(url: &str) -> rivus_sdk::Result<redis::Client> {
    if !(url.starts_with("redis://") || url.starts_with("rediss://") || url.starts_with("unix://"))
    {
        return Err(rivus_sdk::Error::config(
            "url",
            format!(
                "`{}` must start with redis://, rediss:// or unix://",
                redact(url)
            ),
        ));
    }
    redis::Client::open(url).map_err(|e| rivus_sdk::Error::config("url", redact(&e.to_string())))
}

#[cfg(test)]
mod tests {
    #[test]
    fn urls_are_redacted() {
        assert_eq!(
            super::redact("redis://alice:pw@h:6379/0"),
            "redis://alice:<redacted>@h:6379/0"
        );
        assert_eq!(super::redact("redis://:pw@h"), "redis://:<redacted>@h");
        let err = super::open_client("http://x").unwrap_err();
        assert!(err.to_string().contains("`url`"));
    }
}
