//! How a file in progress becomes durable, then visible — the sink's two-phase commit:
//!
//! - on S3, a file is a multipart upload: parts of `part_size` go up as they fill; at a
//!   checkpoint the bytes after the last part that no earlier checkpoint kept are stored as an
//!   object of their own (a piece of the tail), so the checkpoint holds only the upload id, the
//!   part ETags and those objects' keys, and each byte goes up at most twice; the upload is
//!   completed when the checkpoint completes (`s3.rs`);
//! - on a local disk, a file is written under `_rivus/` and synced at a checkpoint, whose state
//!   holds its length; it is renamed into place when the checkpoint completes (`local.rs`).
//!
//! Either way a restore finishes each file of the checkpoint from what the checkpoint holds
//! (the parts, the tail, and the bytes that end the file in its format), and throws away what
//! no checkpoint refers to.

mod local;
mod s3;
mod uploads;

use std::sync::Arc;

use base64::Engine;
use serde::{Deserialize, Serialize};

use rivus_sdk::Result;

pub(crate) use local::LocalStaging;
pub(crate) use s3::S3Staging;

/// The hash of a job's name that its files' names carry (CRC-32, 8 hex digits: stable
/// across builds).
pub(crate) fn job_tag(job: &str) -> String {
    format!("{:08x}", crc32fast::hash(job.as_bytes()))
}

/// The id of the file named `name` (`part-<attempt>-<tag>-<subtask>-<seq>.<ext>`) when it is a
/// file of the job tagged `tag`.
pub(crate) fn id_of(name: &str, tag: &str) -> Option<String> {
    let id = name.strip_prefix("part-")?.split('.').next()?;
    (id.split('-').nth(1) == Some(tag)).then(|| id.to_owned())
}

/// A file as a checkpoint holds it: enough to finish it after a failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recoverable {
    /// The file's key under the destination (`dt=2024-03-01/part-….parquet`).
    pub key: String,
    /// Unique per file: `<attempt>-<job tag>-<subtask>-<sequence>`.
    pub id: String,
    /// The multipart upload (S3; empty on a local disk).
    pub upload: String,
    /// ETags of the parts uploaded, in order (S3).
    pub parts: Vec<String>,
    /// Bytes durable: in the parts (S3), in the file (local).
    pub len: u64,
    /// The objects holding the bytes after the parts, in order (S3): each checkpoint keeps
    /// what came since the one before.
    pub tails: Vec<String>,
    /// Bytes that end the file in its format (a Parquet footer), base64.
    pub trailer: String,
    /// Records in the file.
    pub records: u64,
    /// The file's place among its writer's publications to a table kept over the files
    /// ([`Publish`](crate::Publish)), which records each once: `2c` when checkpoint `c`
    /// pre-committed it closed, `2c + 1` when `c` held it open (a restore, or the end of the
    /// input, finishes it as `c` saw it); 0 before any checkpoint.
    #[serde(default)]
    pub sequence: u64,
}

impl Recoverable {
    /// The [`sequence`](Self::sequence) of a file checkpoint `c` pre-committed closed.
    pub(crate) fn closed_at(c: u64) -> u64 {
        2 * c
    }

    /// The [`sequence`](Self::sequence) of a file checkpoint `c` held open.
    pub(crate) fn open_at(c: u64) -> u64 {
        2 * c + 1
    }

    /// The subtask of a run that wrote the file: its id but the sequence,
    /// `<attempt>-<job tag>-<subtask>` (attempts are start times: they sort in time).
    pub fn writer(&self) -> &str {
        self.id.rsplit_once('-').map_or(&self.id, |(w, _)| w)
    }

    pub(crate) fn trailer_bytes(&self) -> Vec<u8> {
        base64::engine::general_purpose::STANDARD
            .decode(&self.trailer)
            .unwrap_or_default()
    }

    pub(crate) fn set_trailer(&mut self, bytes: &[u8]) {
        self.trailer = base64::engine::general_purpose::STANDARD.encode(bytes);
    }
}

/// A file being written: what has gone to the store so far, and its bytes not yet there.
#[derive(Debug)]
pub(crate) struct Upload {
    pub(crate) rec: Recoverable,
}

/// The store the sink writes to.
#[derive(Debug, Clone)]
pub(crate) enum Staging {
    S3(Arc<S3Staging>),
    Local(Arc<LocalStaging>),
}

impl Staging {
    /// Starts file `key` (id `id`).
    pub(crate) async fn begin(&self, key: &str, id: &str) -> Result<Upload> {
        match self {
            Staging::S3(s) => s.begin(key, id).await,
            Staging::Local(s) => s.begin(key, id).await,
        }
    }

    /// Whether bytes are sent as parts of at least `part_size` (S3), rather than appended.
    pub(crate) fn takes_parts(&self) -> bool {
        matches!(self, Staging::S3(_))
    }

    /// Adds `bytes` to the file (a part on S3, an append locally).
    pub(crate) async fn write(&self, up: &mut Upload, bytes: Vec<u8>) -> Result<()> {
        match self {
            Staging::S3(s) => s.put_part(up, bytes).await,
            Staging::Local(s) => s.append(up, bytes).await,
        }
    }

    /// Makes `tail` (bytes after what `write` took and earlier checkpoints kept) durable for
    /// checkpoint `checkpoint`.
    pub(crate) async fn keep_tail(
        &self,
        up: &mut Upload,
        tail: &[u8],
        checkpoint: u64,
    ) -> Result<()> {
        match self {
            Staging::S3(s) => s.keep_tail(up, tail, checkpoint).await,
            Staging::Local(s) => s.sync(up).await,
        }
    }

    /// Makes the file visible, finishing it from `rec` first: the tail and the trailer go
    /// after the parts. Done before (a completed upload, a renamed file): nothing to do.
    pub(crate) async fn commit(&self, rec: &Recoverable) -> Result<()> {
        match self {
            Staging::S3(s) => s.commit(rec).await,
            Staging::Local(s) => s.commit(rec).await,
        }
    }

    /// Throws away every file in progress of this sink that `keep` does not name (ids), but
    /// those of the attempt `attempt` (started now by other subtasks).
    pub(crate) async fn clean(
        &self,
        keep: &std::collections::HashSet<String>,
        attempt: &str,
    ) -> Result<u64> {
        match self {
            Staging::S3(s) => s.clean(keep, attempt).await,
            Staging::Local(s) => s.clean(keep, attempt).await,
        }
    }

    /// Drops the tail objects of a committed file (S3).
    pub(crate) async fn forget(&self, rec: &Recoverable) {
        if let Staging::S3(s) = self {
            s.forget(rec).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_say_whose_they_are() {
        let tag = job_tag("orders-to-s3");
        assert_eq!(tag.len(), 8);
        assert_ne!(tag, job_tag("orders-to-s4"));
        let name = crate::path::file_name("1796453773663", &tag, 2, 7, "parquet");
        assert_eq!(
            id_of(&name, &tag),
            Some(format!("1796453773663-{tag}-002-000007"))
        );
        assert_eq!(id_of(&name, &job_tag("other")), None);
        assert_eq!(id_of("notes.txt", &tag), None);
    }
}
