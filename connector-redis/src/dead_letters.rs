//! A dead-letter destination in Redis: each letter is an entry of a stream (`XADD`), with the
//! fields `position`, `reason` and `letter` (the JSON of
//! [`DeadLetter`](rivus_sdk::error_policy::DeadLetter)); `send` returns once the server
//! answered the `XADD`, so the letter is stored (as durably as the server's persistence
//! settings make it) before the checkpoint that passes the record.

use async_trait::async_trait;
use rivus_sdk::error_policy::{DeadLetter, DeadLetterQueue};
use rivus_sdk::{Error, Result};
use tokio::sync::OnceCell;

use crate::config::RedisConfig;
use crate::connection::RedisConnection;

/// Writes dead letters to a Redis stream.
pub struct RedisDeadLetterQueue {
    endpoint: RedisConfig,
    stream: String,
    conn: OnceCell<RedisConnection>,
}

impl std::fmt::Debug for RedisDeadLetterQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisDeadLetterQueue")
            .field("endpoint", &self.endpoint.describe())
            .field("stream", &self.stream)
            .finish()
    }
}

impl RedisDeadLetterQueue {
    /// Letters to `stream` on `endpoint`; it connects at the first letter (and reconnects by
    /// itself after).
    pub fn new(endpoint: RedisConfig, stream: impl Into<String>) -> Result<Self> {
        let stream = stream.into();
        if stream.is_empty() {
            return Err(Error::config("stream", "must not be empty"));
        }
        Ok(RedisDeadLetterQueue {
            endpoint,
            stream,
            conn: OnceCell::new(),
        })
    }
}

#[async_trait]
impl DeadLetterQueue for RedisDeadLetterQueue {
    async fn send(&self, letter: DeadLetter) -> Result<()> {
        let conn = self
            .conn
            .get_or_try_init(|| self.endpoint.connect(true))
            .await?;
        let mut conn = conn.clone();
        let json = letter.to_json();
        redis::cmd("XADD")
            .arg(&self.stream)
            .arg("*")
            .arg("position")
            .arg(&letter.position)
            .arg("reason")
            .arg(&letter.reason)
            .arg("letter")
            .arg(json)
            .query_async::<String>(&mut conn)
            .await
            .map(|_| ())
            .map_err(|e| {
                crate::redis_error(format!("redis dead-letter stream `{}`", self.stream), &e)
            })
    }
}
