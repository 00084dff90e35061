//! The error policy shared by all connectors: what happens to a record that cannot be decoded,
//! mapped or written — fail the job, skip it and count it, or send it to a dead-letter
//! destination whose write is confirmed before the record counts as done.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use tokio::io::AsyncWriteExt;
use tokio::sync::Mutex;

use crate::error::{Error, Result};

/// A record that failed, as handed to the error policy.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeadLetter {
    /// The task that rejected it, e.g. `kafka-source[2]`.
    pub origin: String,
    /// Where the record came from or was going: `topic/partition@offset`, a row key...
    pub position: String,
    /// Why it was rejected.
    pub reason: String,
    /// The record's raw bytes as received (or as encoded, for sinks), when available.
    pub payload: Vec<u8>,
}

impl fmt::Debug for DeadLetter {
    // The payload may hold anything, secrets included: print its size only.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeadLetter")
            .field("origin", &self.origin)
            .field("position", &self.position)
            .field("reason", &self.reason)
            .field("payload_len", &self.payload.len())
            .finish()
    }
}

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
    origin: String,
    skipped: Arc<AtomicU64>,
    dead_lettered: Arc<AtomicU64>,
}

impl ErrorHandler {
    /// A handler applying `policy` to records rejected by `origin`.
    pub fn new(policy: ErrorPolicy, origin: impl Into<String>) -> Self {
        ErrorHandler {
            policy,
            origin: origin.into(),
            skipped: Arc::default(),
            dead_lettered: Arc::default(),
        }
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
                    origin: self.origin.clone(),
                    position: position.to_string(),
                    reason: reason.to_string(),
                    payload: payload.to_vec(),
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

/// A dead-letter queue writing JSON lines to a local file, fsynced before `send` returns.
#[derive(Debug)]
pub struct FileDeadLetterQueue {
    path: PathBuf,
    file: Mutex<tokio::fs::File>,
}

impl FileDeadLetterQueue {
    /// Opens (appending) or creates the file at `path`.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|e| Error::io(format!("creating dead-letter dir {}", dir.display()), e))?;
        }
        let file = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .await
            .map_err(|e| Error::io(format!("opening dead-letter file {}", path.display()), e))?;
        Ok(FileDeadLetterQueue {
            path,
            file: Mutex::new(file),
        })
    }

    /// Reads every letter stored in the file at `path`.
    pub async fn read_all(path: impl AsRef<Path>) -> Result<Vec<DeadLetter>> {
        let path = path.as_ref();
        let text = tokio::fs::read_to_string(path)
            .await
            .map_err(|e| Error::io(format!("reading dead-letter file {}", path.display()), e))?;
        text.lines()
            .enumerate()
            .map(|(i, l)| {
                serde_json::from_str(l).map_err(|e| Error::Record {
                    position: format!("{}:{}", path.display(), i + 1),
                    reason: e.to_string(),
                })
            })
            .collect()
    }
}

#[async_trait]
impl DeadLetterQueue for FileDeadLetterQueue {
    async fn send(&self, letter: DeadLetter) -> Result<()> {
        let mut line = serde_json::to_vec(&letter).map_err(|e| Error::State {
            operator: "dead-letter".into(),
            source: e,
        })?;
        line.push(b'\n');
        let mut f = self.file.lock().await;
        let ctx = || format!("writing dead-letter file {}", self.path.display());
        f.write_all(&line).await.map_err(|e| Error::io(ctx(), e))?;
        f.sync_data().await.map_err(|e| Error::io(ctx(), e))?;
        Ok(())
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
