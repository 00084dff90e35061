//! The files under the source's location, sorted by key: an S3 listing or a directory walk,
//! `_rivus/` (the sink's own objects) and other formats left out.

use std::sync::Arc;

use futures::TryStreamExt;
use object_store::aws::AmazonS3;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

use rivus_sdk::{Error, Result};

use crate::error::store_error;

use super::read::ReadFormat;

/// Where the files are.
#[derive(Debug, Clone)]
pub(crate) enum Files {
    S3 {
        client: Arc<AmazonS3>,
        prefix: String,
    },
    Local(std::path::PathBuf),
}

impl Files {
    /// `(key, size)` of every file of `format`, keys relative to the location, sorted.
    pub(crate) async fn list(&self, format: ReadFormat) -> Result<Vec<(String, u64)>> {
        let mut out: Vec<(String, u64)> = match self {
            Files::S3 { client, prefix } => {
                let at = Path::from(prefix.as_str());
                let listed: Vec<_> = client
                    .list(Some(&at))
                    .try_collect()
                    .await
                    .map_err(|e| store_error(format!("files: listing {prefix}"), e))?;
                let skip = if prefix.is_empty() {
                    0
                } else {
                    prefix.len() + 1
                };
                listed
                    .into_iter()
                    .map(|m| (m.location.to_string()[skip..].to_owned(), m.size))
                    .collect()
            }
            Files::Local(dir) => {
                let mut out = Vec::new();
                let mut stack = vec![dir.clone()];
                while let Some(d) = stack.pop() {
                    let entries = std::fs::read_dir(&d)
                        .map_err(|e| Error::io(format!("files: listing {}", d.display()), e))?;
                    for e in entries.flatten() {
                        let p = e.path();
                        if p.is_dir() {
                            stack.push(p);
                        } else if let Ok(rel) = p.strip_prefix(dir) {
                            let size = e.metadata().map(|m| m.len()).unwrap_or(0);
                            out.push((rel.to_string_lossy().into_owned(), size));
                        }
                    }
                }
                out
            }
        };
        out.retain(|(k, _)| {
            !k.starts_with("_rivus/") && !k.contains("/_rivus/") && format.matches(k)
        });
        out.sort();
        Ok(out)
    }

    /// The bytes of file `key`.
    pub(crate) async fn get(&self, key: &str) -> Result<bytes::Bytes> {
        match self {
            Files::S3 { client, prefix } => {
                let path = if prefix.is_empty() {
                    Path::from(key)
                } else {
                    Path::from(format!("{prefix}/{key}"))
                };
                let what = || format!("files: reading {key}");
                client
                    .get(&path)
                    .await
                    .map_err(|e| store_error(what(), e))?
                    .bytes()
                    .await
                    .map_err(|e| store_error(what(), e))
            }
            Files::Local(dir) => {
                let p = dir.join(key);
                std::fs::read(&p)
                    .map(bytes::Bytes::from)
                    .map_err(|e| Error::io(format!("files: reading {}", p.display()), e))
            }
        }
    }
}
