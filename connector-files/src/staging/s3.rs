//! Files as S3 multipart uploads. Beside the data, under `<prefix>/_rivus/<job>/`, the sink
//! keeps a marker per upload in progress (`uploads/<id>`: its key and upload id, so that a
//! restore can abort uploads no checkpoint refers to — S3 lists them only with a raw API call)
//! and the tails of the checkpoints (`tails/<id>-<checkpoint>`).

use std::collections::HashSet;
use std::sync::Arc;

use futures::TryStreamExt;
use object_store::aws::AmazonS3;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path;
use object_store::{ObjectStore, PutPayload};

use rivus_core::{Error, Result};

use super::{Recoverable, Upload};

/// An S3 destination.
#[derive(Debug)]
pub(crate) struct S3Staging {
    pub(crate) client: Arc<AmazonS3>,
    /// The destination's key prefix (may be empty).
    pub(crate) prefix: String,
    /// `<prefix>/_rivus/<job>`.
    pub(crate) own: String,
    pub(crate) url: String,
}

fn io(what: String, e: object_store::Error) -> Error {
    Error::client(what, e.to_string(), false)
}

impl S3Staging {
    pub(crate) fn new(client: Arc<AmazonS3>, bucket: &str, prefix: &str, job: &str) -> S3Staging {
        let join = |a: &str, b: &str| {
            if a.is_empty() {
                b.to_owned()
            } else {
                format!("{a}/{b}")
            }
        };
        S3Staging {
            client,
            prefix: prefix.to_owned(),
            own: join(prefix, &format!("_rivus/{job}")),
            url: join(&format!("s3://{bucket}"), prefix),
        }
    }

    fn path(&self, key: &str) -> Path {
        if self.prefix.is_empty() {
            Path::from(key)
        } else {
            Path::from(format!("{}/{key}", self.prefix))
        }
    }

    fn marker(&self, id: &str) -> Path {
        Path::from(format!("{}/uploads/{id}", self.own))
    }

    /// Starts the upload and records its marker in a task of its own, so that a job cancelled
    /// meanwhile never leaves an upload without its marker (a process killed between the two
    /// requests can: an `AbortIncompleteMultipartUpload` lifecycle rule on the bucket is the
    /// net for that).
    pub(crate) async fn begin(self: &Arc<Self>, key: &str, id: &str) -> Result<Upload> {
        let (this, key, id) = (Arc::clone(self), key.to_owned(), id.to_owned());
        tokio::spawn(async move { this.begin_now(key, id).await })
            .await
            .map_err(|e| Error::connector("files: starting an upload", e.to_string()))?
    }

    async fn begin_now(&self, key: String, id: String) -> Result<Upload> {
        let path = self.path(&key);
        let upload = self
            .client
            .create_multipart(&path)
            .await
            .map_err(|e| io(format!("files: starting {}/{key}", self.url), e))?;
        let marker = serde_json::json!({"key": key, "upload": upload});
        self.client
            .put(&self.marker(&id), PutPayload::from(marker.to_string()))
            .await
            .map_err(|e| {
                io(
                    format!("files: recording the upload of {}/{key}", self.url),
                    e,
                )
            })?;
        Ok(Upload {
            rec: Recoverable {
                key,
                id,
                upload,
                parts: Vec::new(),
                len: 0,
                tail: None,
                trailer: String::new(),
                records: 0,
            },
        })
    }

    async fn part(&self, rec: &Recoverable, index: usize, bytes: Vec<u8>) -> Result<String> {
        let PartId { content_id } = self
            .client
            .put_part(
                &self.path(&rec.key),
                &rec.upload,
                index,
                PutPayload::from(bytes),
            )
            .await
            .map_err(|e| {
                io(
                    format!(
                        "files: uploading part {} of {}/{}",
                        index + 1,
                        self.url,
                        rec.key
                    ),
                    e,
                )
            })?;
        Ok(content_id)
    }

    pub(crate) async fn put_part(&self, up: &mut Upload, bytes: Vec<u8>) -> Result<()> {
        let n = bytes.len() as u64;
        let etag = self.part(&up.rec, up.rec.parts.len(), bytes).await?;
        up.rec.parts.push(etag);
        up.rec.len += n;
        Ok(())
    }

    pub(crate) async fn keep_tail(
        &self,
        up: &mut Upload,
        tail: &[u8],
        checkpoint: u64,
    ) -> Result<()> {
        if tail.is_empty() {
            up.rec.tail = None;
            return Ok(());
        }
        let key = format!("{}/tails/{}-{checkpoint:020}", self.own, up.rec.id);
        self.client
            .put(&Path::from(key.as_str()), PutPayload::from(tail.to_vec()))
            .await
            .map_err(|e| {
                io(
                    format!("files: keeping the tail of {}/{}", self.url, up.rec.key),
                    e,
                )
            })?;
        up.rec.tail = Some(key);
        Ok(())
    }

    pub(crate) async fn commit(&self, rec: &Recoverable) -> Result<()> {
        let path = self.path(&rec.key);
        let mut last = match &rec.tail {
            Some(tail) => match self.client.get(&Path::from(tail.as_str())).await {
                Ok(got) => got
                    .bytes()
                    .await
                    .map_err(|e| io(format!("files: reading {tail}"), e))?
                    .to_vec(),
                // Gone with a commit made before (tails are dropped after it).
                Err(object_store::Error::NotFound { .. }) => return self.committed(rec).await,
                Err(e) => return Err(io(format!("files: reading {tail}"), e)),
            },
            None => Vec::new(),
        };
        last.extend_from_slice(&rec.trailer_bytes());
        let mut parts: Vec<PartId> = rec
            .parts
            .iter()
            .map(|p| PartId {
                content_id: p.clone(),
            })
            .collect();
        if !last.is_empty() || parts.is_empty() {
            match self.part(rec, parts.len(), last).await {
                Ok(etag) => parts.push(PartId { content_id: etag }),
                Err(_) if self.exists(&path).await => return self.committed(rec).await,
                Err(e) => return Err(e),
            }
        }
        match self
            .client
            .complete_multipart(&path, &rec.upload, parts)
            .await
        {
            Ok(_) => {}
            Err(e) => {
                if !self.exists(&path).await {
                    return Err(io(
                        format!(
                            "files: completing {}/{} (upload {})",
                            self.url, rec.key, rec.upload
                        ),
                        e,
                    ));
                }
            }
        }
        self.committed(rec).await
    }

    async fn exists(&self, path: &Path) -> bool {
        self.client.head(path).await.is_ok()
    }

    /// The file is visible: its marker goes.
    async fn committed(&self, rec: &Recoverable) -> Result<()> {
        if !self.exists(&self.path(&rec.key)).await {
            return Err(Error::connector(
                "files",
                format!(
                    "{}/{} was neither committed nor can it be: its upload {} is gone",
                    self.url, rec.key, rec.upload
                ),
            ));
        }
        let _ = self.client.delete(&self.marker(&rec.id)).await;
        Ok(())
    }

    pub(crate) async fn forget(&self, rec: &Recoverable) {
        let prefix = Path::from(format!("{}/tails", self.own));
        let Ok(tails) = self
            .client
            .list(Some(&prefix))
            .try_collect::<Vec<_>>()
            .await
        else {
            return;
        };
        for t in tails {
            let name = t.location.filename().unwrap_or_default();
            if name.starts_with(&format!("{}-", rec.id)) {
                let _ = self.client.delete(&t.location).await;
            }
        }
    }

    pub(crate) async fn clean(&self, keep: &HashSet<String>, attempt: &str) -> Result<u64> {
        let prefix = Path::from(format!("{}/uploads", self.own));
        let markers: Vec<_> = self
            .client
            .list(Some(&prefix))
            .try_collect()
            .await
            .map_err(|e| io(format!("files: listing {}/_rivus", self.url), e))?;
        let mut aborted = 0;
        for m in markers {
            let id = m.location.filename().unwrap_or_default().to_owned();
            if keep.contains(&id) || id.starts_with(&format!("{attempt}-")) {
                continue;
            }
            let body = self
                .client
                .get(&m.location)
                .await
                .map_err(|e| io(format!("files: reading {}", m.location), e))?
                .bytes()
                .await
                .map_err(|e| io(format!("files: reading {}", m.location), e))?;
            let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            if let (Some(key), Some(upload)) = (v["key"].as_str(), v["upload"].as_str()) {
                let _ = self
                    .client
                    .abort_multipart(&self.path(key), &upload.to_owned())
                    .await;
                tracing::info!(
                    key,
                    upload,
                    "files: aborted an upload no checkpoint refers to"
                );
            }
            let rec = Recoverable {
                key: String::new(),
                id: id.clone(),
                upload: String::new(),
                parts: Vec::new(),
                len: 0,
                tail: None,
                trailer: String::new(),
                records: 0,
            };
            self.forget(&rec).await;
            let _ = self.client.delete(&m.location).await;
            aborted += 1;
        }
        Ok(aborted)
    }
}
