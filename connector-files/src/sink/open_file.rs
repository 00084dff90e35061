//! One file being written: its encoder, the bytes encoded and not yet sent, and its upload.
//! Bytes go to the store as they fill a part (S3: `part_size`, uploaded while the next part is
//! encoded, one part in flight; a local disk: 1 MiB appends), so a file holds at most two
//! parts and its encoder's open row group in memory.

use std::time::Instant;

use tokio::task::JoinHandle;

use serde_json::Value;

use rivus_sdk::{Error, Result};

use crate::encode::{Encoder, Rejected};
use crate::staging::{Recoverable, Staging, Upload};

const LOCAL_WRITE: usize = 1 << 20;
/// S3's smallest part but the last.
const MIN_PART: usize = 5 << 20;

pub(crate) struct OpenFile {
    pub(crate) up: Upload,
    enc: Encoder,
    pending: Vec<u8>,
    /// The part being uploaded, and its length.
    inflight: Option<(JoinHandle<Result<String>>, u64)>,
    /// Bytes at the start of `pending` that tails of earlier checkpoints hold.
    kept: usize,
    pub(crate) opened: Instant,
}

impl OpenFile {
    pub(crate) fn new(up: Upload, enc: Encoder) -> OpenFile {
        OpenFile {
            up,
            enc,
            pending: Vec::new(),
            inflight: None,
            kept: 0,
            opened: Instant::now(),
        }
    }

    /// The file's size so far: bytes sent and encoded (a Parquet row group still open adds
    /// at most `row_group_bytes` before compression).
    pub(crate) fn size(&self) -> u64 {
        self.up.rec.len
            + self.inflight.as_ref().map_or(0, |(_, n)| *n)
            + self.pending.len() as u64
            + self.enc.buffered() as u64
    }

    pub(crate) async fn write(
        &mut self,
        staging: &Staging,
        records: &[&Value],
        part_size: usize,
    ) -> Result<Vec<Rejected>> {
        let rejected = self.enc.write(records)?;
        self.up.rec.records += (records.len() - rejected.len()) as u64;
        self.send(staging, part_size, false).await?;
        Ok(rejected)
    }

    /// Waits for the part in flight: its ETag joins the parts.
    async fn settle(&mut self) -> Result<()> {
        if let Some((h, n)) = self.inflight.take() {
            let etag = h
                .await
                .map_err(|e| Error::connector("files: uploading a part", e.to_string()))??;
            self.up.rec.parts.push(etag);
            self.up.rec.len += n;
        }
        Ok(())
    }

    /// Sends what fills a part (`all`: everything, and waits until it is stored).
    async fn send(&mut self, staging: &Staging, part_size: usize, all: bool) -> Result<()> {
        let ready = self.enc.take();
        if self.pending.is_empty() {
            self.pending = ready;
        } else {
            self.pending.extend_from_slice(&ready);
        }
        let threshold = if staging.takes_parts() {
            part_size
        } else {
            LOCAL_WRITE.min(part_size)
        };
        if self.pending.len() >= threshold || (all && !self.pending.is_empty()) {
            let bytes = std::mem::take(&mut self.pending);
            match staging {
                Staging::S3(s3) => {
                    self.settle().await?;
                    let n = bytes.len() as u64;
                    let h = s3.spawn_part(&self.up.rec, self.up.rec.parts.len(), bytes);
                    self.inflight = Some((h, n));
                }
                Staging::Local(_) => staging.write(&mut self.up, bytes).await?,
            }
            self.up.rec.tails.clear();
            self.kept = 0;
        }
        if all {
            self.settle().await?;
        }
        Ok(())
    }

    /// Makes everything so far durable for checkpoint `checkpoint`; what a restore needs.
    pub(crate) async fn checkpoint(
        &mut self,
        staging: &Staging,
        checkpoint: u64,
        part_size: usize,
    ) -> Result<Recoverable> {
        let trailer = self.enc.checkpoint()?;
        // On S3 the tail stays here (a part must be at least 5 MiB) and is kept beside;
        // locally everything is appended and synced.
        // A tail of 5 MiB or more may be a part of its own (S3's smallest): sent as one
        // rather than kept beside.
        let threshold = if staging.takes_parts() {
            MIN_PART
        } else {
            part_size
        };
        self.send(staging, threshold.min(part_size), !staging.takes_parts())
            .await?;
        // The part in flight must be stored: the checkpoint lists it.
        self.settle().await?;
        staging
            .keep_tail(&mut self.up, &self.pending[self.kept..], checkpoint)
            .await?;
        if staging.takes_parts() {
            self.kept = self.pending.len();
        }
        let mut rec = self.up.rec.clone();
        rec.set_trailer(&trailer);
        rec.sequence = Recoverable::open_at(checkpoint);
        Ok(rec)
    }

    /// Ends the file: every byte is sent (the last part may be small); it waits for its commit.
    pub(crate) async fn close(mut self, staging: &Staging) -> Result<Recoverable> {
        self.enc.finish()?;
        self.send(staging, usize::MAX, true).await?;
        if self.up.rec.parts.is_empty() && staging.takes_parts() {
            // An upload needs a part, even an empty one.
            staging.write(&mut self.up, Vec::new()).await?;
        }
        let mut rec = self.up.rec;
        rec.tails.clear();
        rec.trailer.clear();
        Ok(rec)
    }
}
