//! Files as S3 multipart uploads. Beside the data, under `<prefix>/_rivus/<job>/tails/`, the
//! sink keeps the pieces of tails of the checkpoints (`<id>/<checkpoint>`: a file's own pieces
//! are listed by its id alone). A restore lists the uploads in
//! progress under the prefix (`uploads.rs`) and aborts this job's that no checkpoint refers to:
//! a file's name carries its attempt and a hash of the job's name.

use std::collections::HashSet;
use std::sync::Arc;

use futures::TryStreamExt;
use object_store::aws::AmazonS3;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use rivus_sdk::{Error, Result};

use super::{Recoverable, Upload};
use rivus_aws::s3::S3Client;

/// An S3 destination.
#[derive(Debug)]
pub(crate) struct S3Staging {
    pub(crate) s3: S3Client,
    pub(crate) client: Arc<AmazonS3>,
    http: reqwest::Client,
    /// The destination's key prefix (may be empty).
    pub(crate) prefix: String,
    /// `<prefix>/_rivus/<job>`.
    pub(crate) own: String,
    pub(crate) url: String,
    /// The hash of the job's name in its files' names.
    pub(crate) job_tag: String,
}

fn io(what: String, e: object_store::Error) -> Error {
    crate::error::store_error(what, e)
}

impl S3Staging {
    pub(crate) fn new(s3: S3Client, prefix: &str, job: &str) -> S3Staging {
        let (client, bucket) = (Arc::clone(&s3.store), s3.bucket.clone());
        let join = |a: &str, b: &str| {
            if a.is_empty() {
                b.to_owned()
            } else {
                format!("{a}/{b}")
            }
        };
        S3Staging {
            s3,
            client,
            http: reqwest::Client::new(),
            prefix: prefix.to_owned(),
            own: join(prefix, &format!("_rivus/{job}")),
            url: join(&format!("s3://{bucket}"), prefix),
            job_tag: super::job_tag(job),
        }
    }

    fn path(&self, key: &str) -> Path {
        if self.prefix.is_empty() {
            Path::from(key)
        } else {
            Path::from(format!("{}/{key}", self.prefix))
        }
    }

    pub(crate) async fn begin(&self, key: &str, id: &str) -> Result<Upload> {
        let upload = self
            .client
            .create_multipart(&self.path(key))
            .await
            .map_err(|e| io(format!("files: starting {}/{key}", self.url), e))?;
        Ok(Upload {
            rec: Recoverable {
                key: key.to_owned(),
                id: id.to_owned(),
                upload,
                parts: Vec::new(),
                len: 0,
                tails: Vec::new(),
                trailer: String::new(),
                records: 0,
                sequence: 0,
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

    /// Uploads part `index` of `rec`'s file in a task of its own (the sink encodes on
    /// meanwhile); the part's ETag.
    pub(crate) fn spawn_part(
        self: &Arc<Self>,
        rec: &Recoverable,
        index: usize,
        bytes: Vec<u8>,
    ) -> tokio::task::JoinHandle<Result<String>> {
        let (this, rec) = (Arc::clone(self), rec.clone());
        tokio::spawn(async move { this.part(&rec, index, bytes).await })
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
            return Ok(());
        }
        let key = format!("{}/tails/{}/{checkpoint:020}", self.own, up.rec.id);
        self.client
            .put(&Path::from(key.as_str()), PutPayload::from(tail.to_vec()))
            .await
            .map_err(|e| {
                io(
                    format!("files: keeping the tail of {}/{}", self.url, up.rec.key),
                    e,
                )
            })?;
        up.rec.tails.push(key);
        Ok(())
    }

    pub(crate) async fn commit(&self, rec: &Recoverable) -> Result<()> {
        let path = self.path(&rec.key);
        let mut last = Vec::new();
        for tail in &rec.tails {
            match self.client.get(&Path::from(tail.as_str())).await {
                Ok(got) => last.extend_from_slice(
                    &got.bytes()
                        .await
                        .map_err(|e| io(format!("files: reading {tail}"), e))?,
                ),
                // Gone with a commit made before (tails are dropped after it).
                Err(object_store::Error::NotFound { .. }) => return self.committed(rec).await,
                Err(e) => return Err(io(format!("files: reading {tail}"), e)),
            }
        }
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

    /// The file must be visible now.
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
        Ok(())
    }

    /// Drops the tail pieces of `rec`'s file (its own prefix: no listing of other files').
    pub(crate) async fn forget(&self, rec: &Recoverable) {
        let prefix = Path::from(format!("{}/tails/{}", self.own, rec.id));
        let Ok(tails) = self
            .client
            .list(Some(&prefix))
            .try_collect::<Vec<_>>()
            .await
        else {
            return;
        };
        for t in tails {
            let _ = self.client.delete(&t.location).await;
        }
    }

    pub(crate) async fn clean(&self, keep: &HashSet<String>, attempt: &str) -> Result<u64> {
        let under = if self.prefix.is_empty() {
            String::new()
        } else {
            format!("{}/", self.prefix)
        };
        let mut aborted = 0;
        for (key, upload) in super::uploads::list(&self.http, &self.s3, &under).await? {
            let name = key.rsplit('/').next().unwrap_or_default();
            let Some(id) = super::id_of(name, &self.job_tag) else {
                continue;
            };
            if keep.contains(&id) || id.starts_with(&format!("{attempt}-")) {
                continue;
            }
            self.client
                .abort_multipart(&Path::from(key.as_str()), &upload)
                .await
                .map_err(|e| io(format!("files: aborting the upload of {key}"), e))?;
            tracing::info!(%key, "files: aborted an upload no checkpoint refers to");
            aborted += 1;
        }
        // Tails of files no checkpoint refers to.
        let prefix = Path::from(format!("{}/tails", self.own));
        let tails: Vec<_> = self
            .client
            .list(Some(&prefix))
            .try_collect()
            .await
            .map_err(|e| io(format!("files: listing {}/_rivus", self.url), e))?;
        for t in tails {
            // `…/tails/<id>/<checkpoint>`
            let mut parts = t.location.parts().collect::<Vec<_>>();
            parts.pop();
            let id = parts
                .last()
                .map(|p| p.as_ref().to_owned())
                .unwrap_or_default();
            if !keep.contains(&id) && !id.starts_with(&format!("{attempt}-")) {
                let _ = self.client.delete(&t.location).await;
            }
        }
        Ok(aborted)
    }
}
