//! [`S3StateBackend`]: one object per checkpoint (`<prefix>/chk-<id>.ckpt`, core's checkpoint
//! format with its checksum), written only if absent; the newest intact one of the job is
//! restored, damaged ones skipped; the newest N kept.

use std::sync::Arc;

use async_trait::async_trait;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use rivus_sdk::checkpoint::{format, CompletedCheckpoint, Holder, OwnerLock, StateBackend};
use rivus_sdk::Result;

use crate::config::S3Config;
use crate::error::s3_error;
use crate::lease::{self, Fence};

/// Checkpoints in an S3 bucket under a prefix; see the [crate docs](crate).
#[derive(Clone)]
pub struct S3StateBackend {
    client: Arc<dyn ObjectStore>,
    config: Arc<S3Config>,
    fence: Arc<Fence>,
}

impl std::fmt::Debug for S3StateBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3StateBackend")
            .field("config", &self.config)
            .finish()
    }
}

impl S3StateBackend {
    /// A backend for `config`; refuses bad settings with the path of the field. Nothing is
    /// contacted before the job starts ([`lock`](StateBackend::lock) is the first request).
    pub fn new(config: S3Config) -> Result<Self> {
        config.validate()?;
        let client = Arc::new(config.client()?);
        Ok(S3StateBackend {
            client,
            config: Arc::new(config),
            fence: Arc::new(Fence::default()),
        })
    }

    fn path(&self, name: &str) -> Path {
        if self.config.prefix.is_empty() {
            Path::from(name)
        } else {
            Path::from(format!("{}/{name}", self.config.prefix))
        }
    }

    fn object_name(id: u64) -> String {
        format!("chk-{id:020}.ckpt")
    }

    /// The checkpoints present, newest first.
    async fn list(&self) -> Result<Vec<(u64, Path)>> {
        let prefix =
            (!self.config.prefix.is_empty()).then(|| Path::from(self.config.prefix.as_str()));
        let objects: Vec<_> = self
            .client
            .list(prefix.as_ref())
            .try_collect()
            .await
            .map_err(|e| s3_error(format!("listing {}", self.config.url()), e))?;
        let mut out: Vec<(u64, Path)> = objects
            .into_iter()
            .filter_map(|o| {
                let id = o
                    .location
                    .filename()?
                    .strip_prefix("chk-")?
                    .strip_suffix(".ckpt")?
                    .parse::<u64>()
                    .ok()?;
                Some((id, o.location))
            })
            .collect();
        out.sort_by_key(|e| std::cmp::Reverse(e.0));
        Ok(out)
    }
}

#[async_trait]
impl StateBackend for S3StateBackend {
    /// Writes the checkpoint as one object, only if no object of that id exists, after
    /// checking that this process still holds the lease; then removes those past `retain`.
    async fn store(&self, checkpoint: &CompletedCheckpoint) -> Result<u64> {
        let id = checkpoint.checkpoint_id;
        let url = self.config.url();
        self.fence.check(&url, id)?;
        let bytes = format::encode(checkpoint)?;
        let size = bytes.len() as u64;
        let name = Self::object_name(id);
        let path = self.path(&name);
        let payload = PutPayload::from(bytes);
        let created = self
            .client
            .put_opts(
                &path,
                payload.clone(),
                PutOptions {
                    mode: PutMode::Create,
                    ..Default::default()
                },
            )
            .await;
        match created {
            Ok(_) => {}
            // An object of this id exists: a damaged one (skipped on restore, so the ids
            // continue from below it) is replaced; an intact one means another writer.
            Err(object_store::Error::AlreadyExists { .. }) => {
                let existing = self.client.get(&path).await;
                let intact = match existing {
                    Ok(got) => got
                        .bytes()
                        .await
                        .ok()
                        .is_some_and(|b| format::decode(&b).is_ok()),
                    Err(_) => false,
                };
                if intact {
                    return Err(rivus_sdk::Error::owner(
                        &url,
                        format!("checkpoint {id} was written by another process"),
                    ));
                }
                self.client
                    .put(&path, payload)
                    .await
                    .map_err(|e| s3_error(format!("writing {url}/{name}"), e))?;
            }
            Err(e) => return Err(s3_error(format!("writing {url}/{name}"), e)),
        }
        for (old, path) in self.list().await?.into_iter().skip(self.config.retain) {
            if let Err(e) = self.client.delete(&path).await {
                tracing::warn!(checkpoint = old, path = %path, error = %e, "could not remove old checkpoint");
            }
        }
        Ok(size)
    }

    async fn latest(&self, job: &str) -> Result<Option<CompletedCheckpoint>> {
        for (id, path) in self.list().await? {
            let bytes = match self.client.get(&path).await {
                Ok(got) => got.bytes().await,
                Err(e) => Err(e),
            };
            let bytes = match bytes {
                Ok(b) => b,
                // Removed between the listing and the read (retention by a previous owner).
                Err(object_store::Error::NotFound { .. }) => continue,
                Err(e) => return Err(s3_error(format!("reading {path}"), e)),
            };
            match format::decode(&bytes) {
                Ok(cp) if cp.job == job => return Ok(Some(cp)),
                Ok(cp) => tracing::warn!(path = %path, found = %cp.job, expected = %job,
                    "skipping checkpoint of another job"),
                Err(why) => self.config.on_damaged.damaged(
                    id,
                    &format!("{}/{path}", self.config.url()),
                    &why,
                )?,
            }
        }
        Ok(None)
    }

    fn describe(&self) -> String {
        self.config.url()
    }

    /// The lease `<prefix>/_owner.json` (see [`S3Config::lease`]).
    async fn lock(&self, holder: &Holder) -> Result<OwnerLock> {
        lease::acquire(
            Arc::clone(&self.client),
            self.path("_owner.json"),
            self.config.url(),
            holder,
            self.config.lease,
            Arc::clone(&self.fence),
        )
        .await
    }
}
