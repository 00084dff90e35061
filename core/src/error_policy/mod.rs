//! The error policy shared by all connectors: what happens to a record that cannot be decoded,
//! mapped or written — fail the job, skip it and count it, or send it to a dead-letter
//! destination whose write is confirmed before the record counts as done.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;

use crate::error::{Error, Result};

mod file;
pub(crate) mod letter;

pub use file::FileDeadLetterQueue;
pub use letter::DeadLetter;

/// A destination for rejected records. `send` returns only once the record is durably stored.
#[async_trait]
pub trait DeadLetterQueue: Send + Sync + fmt::Debug {
    /// Stores one rejected record; an error means it was not stored.
    async fn send(&self, letter: DeadLetter) -> Result<()>;
}

/// What to do with a record that cannot be processed.
#[derive(Clone, Debug, Default)]
pub enum ErrorPolicy {
    /// Fail the job with an error naming the record (the default: nothing is dropped silently).
    #[default]
    Fail,
    /// Skip the record, count it (`rivus_records_skipped_total`) and log it.
    Skip,
    /// Send the record to a dead-letter queue and go on once the write is confirmed.
    DeadLetter(Arc<dyn DeadLetterQueue>),
}

/// Applies an [`ErrorPolicy`] for one task and counts what it did.
#[derive(Debug, Clone)]
pub struct ErrorHandler {
    policy: ErrorPolicy,
    connector: String,
    origin: String,
    skipped: Arc<AtomicU64>,
    dead_lettered: Arc<AtomicU64>,
}

impl ErrorHandler {
    /// A handler applying `policy` to records rejected by `origin`.
    pub fn new(policy: ErrorPolicy, origin: impl Into<String>) -> Self {
        ErrorHandler {
            policy,
            connector: String::new(),
            origin: origin.into(),
            skipped: Arc::default(),
            dead_lettered: Arc::default(),
        }
    }

    setters! {
        /// Names the connector in the letters (`kafka`, `redis-streams`, ...).
        connector(name: impl Into<String>) => connector = name.into();
    }

    /// The policy in force.
    pub fn policy(&self) -> &ErrorPolicy {
        &self.policy
    }

    /// Handles one failed record. `Ok(())` means the record is done with (skipped or safely
    /// dead-lettered) and its position may be committed; `Err` means the job must fail.
    pub async fn handle(
        &self,
        position: impl fmt::Display,
        reason: impl fmt::Display,
        payload: &[u8],
    ) -> Result<()> {
        self.handle_fields(position, reason, payload, Vec::new())
            .await
    }

    /// [`handle`](Self::handle) for a record made of named fields (a Redis stream entry): the
    /// letter keeps each field.
    pub async fn handle_fields(
        &self,
        position: impl fmt::Display,
        reason: impl fmt::Display,
        payload: &[u8],
        fields: Vec<(String, Vec<u8>)>,
    ) -> Result<()> {
        match &self.policy {
            ErrorPolicy::Fail => Err(Error::Record {
                position: position.to_string(),
                reason: reason.to_string(),
            }),
            ErrorPolicy::Skip => {
                self.skipped.fetch_add(1, Ordering::Relaxed);
                metrics::counter!("rivus_records_skipped_total", "origin" => self.origin.clone())
                    .increment(1);
                tracing::warn!(origin = %self.origin, %position, %reason, "skipped a bad record");
                Ok(())
            }
            ErrorPolicy::DeadLetter(dlq) => {
                let letter = DeadLetter {
                    connector: self.connector.clone(),
                    origin: self.origin.clone(),
                    position: position.to_string(),
                    reason: reason.to_string(),
                    payload: payload.to_vec(),
                    fields,
                    time_ms: crate::calendar::now_ms(),
                };
                dlq.send(letter).await.map_err(|e| Error::Record {
                    position: position.to_string(),
                    reason: format!("{reason}; and the dead-letter write failed: {e}"),
                })?;
                self.dead_lettered.fetch_add(1, Ordering::Relaxed);
                metrics::counter!("rivus_records_dead_lettered_total", "origin" => self.origin.clone())
                    .increment(1);
                Ok(())
            }
        }
    }

    /// Records skipped so far by this handler (and its clones).
    pub fn skipped(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }

    /// Records dead-lettered so far by this handler (and its clones).
    pub fn dead_lettered(&self) -> u64 {
        self.dead_lettered.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn fail_skip_and_dead_letter() {
        let fail = ErrorHandler::new(ErrorPolicy::Fail, "t[0]");
        let err = fail
            .handle("orders/1@5", "bad json", b"{")
            .await
            .unwrap_err();
        assert!(err.to_string().contains("orders/1@5"), "{err}");

        let skip = ErrorHandler::new(ErrorPolicy::Skip, "t[0]");
        skip.handle("p@1", "x", b"").await.unwrap();
        skip.clone().handle("p@2", "x", b"").await.unwrap();
        assert_eq!(skip.skipped(), 2);

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dlq/letters.jsonl");
        let dlq = Arc::new(FileDeadLetterQueue::open(&path).await.unwrap());
        let h = ErrorHandler::new(ErrorPolicy::DeadLetter(dlq), "src[1]");
        h.handle("q#3", "not utf-8", &[0xff, 0x00]).await.unwrap();
        assert_eq!(h.dead_lettered(), 1);
        let letters = FileDeadLetterQueue::read_all(&path).await.unwrap();
        assert_eq!(letters.len(), 1);
        assert_eq!(letters[0].position, "q#3");
        assert_eq!(letters[0].payload, vec![0xff, 0x00]);
        assert!(
            !format!("{:?}", letters[0]).contains("255"),
            "payload not in Debug"
        );
    }

    #[derive(Debug)]
    struct BrokenQueue;

    #[async_trait]
    impl DeadLetterQueue for BrokenQueue {
        async fn send(&self, _: DeadLetter) -> Result<()> {
            Err(Error::Closed("dead-letter queue"))
        }
    }

    #[tokio::test]
    async fn failed_dead_letter_write_fails_the_record() {
        let h = ErrorHandler::new(ErrorPolicy::DeadLetter(Arc::new(BrokenQueue)), "x");
        let err = h.handle("p@9", "bad", b"z").await.unwrap_err();
        assert!(
            err.to_string().contains("dead-letter write failed"),
            "{err}"
        );
        assert_eq!(h.dead_lettered(), 0);
    }
}
