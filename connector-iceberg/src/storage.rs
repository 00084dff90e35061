//! The table's files — metadata JSON, manifest lists, manifests — read and written through
//! rivus's own store client (an S3 bucket with the files sink's options, or the local disk),
//! as iceberg's [`Storage`]: one client per bucket, one TLS stack and one set of credentials
//! for the data files and the table around them.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use iceberg::io::{
    FileMetadata, FileRead, FileWrite, InputFile, OutputFile, Storage, StorageConfig,
    StorageFactory,
};
use iceberg::{Error as IcebergError, ErrorKind};
use object_store::path::Path as StorePath;
use object_store::{DynObjectStore, ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};

use rivus_aws::s3::{S3Client, Writes};
use rivus_connector_files::S3Options;

/// The store of a catalog's files: S3 buckets (`s3://bucket/…` paths, a client per bucket
/// with the sink's S3 options, made at its first use) and the local disk (`file:///…` or
/// absolute paths).
#[derive(Clone, Serialize, Deserialize)]
pub(crate) struct Store {
    /// The clients; not carried by the serialized form (iceberg asks for one; a store read
    /// back from it refuses every call).
    #[serde(skip)]
    clients: Option<Arc<Clients>>,
}

struct Clients {
    s3: S3Options,
    buckets: parking_lot::Mutex<HashMap<String, Arc<DynObjectStore>>>,
    local: Arc<DynObjectStore>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let buckets: Vec<String> = self
            .clients
            .as_ref()
            .map(|c| c.buckets.lock().keys().cloned().collect())
            .unwrap_or_default();
        f.debug_struct("Store").field("buckets", &buckets).finish()
    }
}

impl Store {
    /// A store reaching S3 with `s3` and the local disk.
    pub(crate) fn new(s3: &S3Options) -> Store {
        Store {
            clients: Some(Arc::new(Clients {
                s3: s3.clone(),
                buckets: parking_lot::Mutex::new(HashMap::new()),
                local: Arc::new(object_store::local::LocalFileSystem::new()),
            })),
        }
    }

    /// The client holding `path`, and its key there: `s3://bucket/a/b` → bucket's client,
    /// `a/b`; `file:///a/b` or `/a/b` → the local disk, `a/b`.
    pub(crate) fn object(&self, path: &str) -> iceberg::Result<(Arc<DynObjectStore>, StorePath)> {
        let bad =
            |why: &str| IcebergError::new(ErrorKind::DataInvalid, format!("the path {path} {why}"));
        let clients = self.clients.as_ref().ok_or_else(|| {
            IcebergError::new(
                ErrorKind::Unexpected,
                "a rivus store cannot be used after being serialized",
            )
        })?;
        let (client, rest) = match path
            .strip_prefix("s3://")
            .or_else(|| path.strip_prefix("s3a://"))
        {
            Some(rest) => {
                let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
                if bucket.is_empty() {
                    return Err(bad("names no bucket"));
                }
                let mut buckets = clients.buckets.lock();
                let client = match buckets.get(bucket) {
                    Some(c) => Arc::clone(c),
                    None => {
                        let c: Arc<DynObjectStore> =
                            S3Client::build(bucket, &clients.s3, Writes::Conditional)
                                .map_err(|e| {
                                    IcebergError::new(
                                        ErrorKind::DataInvalid,
                                        format!("the S3 client of {path}: {e}"),
                                    )
                                })?
                                .store;
                        buckets.insert(bucket.to_owned(), Arc::clone(&c));
                        c
                    }
                };
                (client, key)
            }
            None if path.contains("://") && !path.starts_with("file://") => {
                return Err(bad("is neither s3:// nor file://"))
            }
            None => {
                let rest = path.strip_prefix("file://").unwrap_or(path);
                let rest = rest
                    .strip_prefix('/')
                    .ok_or_else(|| bad("is not an absolute file path"))?;
                (Arc::clone(&clients.local), rest)
            }
        };
        let key = StorePath::parse(rest).map_err(|e| bad(&e.to_string()))?;
        Ok((client, key))
    }

    /// The key of `path` in its store (see [`object`](Store::object)).
    pub(crate) fn key(&self, path: &str) -> iceberg::Result<StorePath> {
        Ok(self.object(path)?.1)
    }

    /// The objects below `path` (a directory), with their keys in its store.
    pub(crate) fn list(
        &self,
        path: &str,
    ) -> iceberg::Result<BoxStream<'static, object_store::Result<object_store::ObjectMeta>>> {
        let (client, prefix) = self.object(path)?;
        Ok(client.list(Some(&prefix)))
    }
}

/// An object-store error as iceberg's, naming what was done.
fn failed(what: &str, path: &str, e: object_store::Error) -> IcebergError {
    let kind = match e {
        object_store::Error::NotFound { .. } => ErrorKind::DataInvalid,
        _ => ErrorKind::Unexpected,
    };
    IcebergError::new(kind, format!("{what} {path}")).with_source(e)
}

#[async_trait]
#[typetag::serde(name = "rivus")]
impl Storage for Store {
    async fn exists(&self, path: &str) -> iceberg::Result<bool> {
        let (client, key) = self.object(path)?;
        match client.head(&key).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(failed("reading", path, e)),
        }
    }

    async fn metadata(&self, path: &str) -> iceberg::Result<FileMetadata> {
        let (client, key) = self.object(path)?;
        let meta = client
            .head(&key)
            .await
            .map_err(|e| failed("reading", path, e))?;
        Ok(FileMetadata { size: meta.size })
    }

    async fn read(&self, path: &str) -> iceberg::Result<Bytes> {
        let (client, key) = self.object(path)?;
        let got = client
            .get(&key)
            .await
            .map_err(|e| failed("reading", path, e))?;
        got.bytes().await.map_err(|e| failed("reading", path, e))
    }

    async fn reader(&self, path: &str) -> iceberg::Result<Box<dyn FileRead>> {
        let (client, key) = self.object(path)?;
        Ok(Box::new(Reader {
            client,
            key,
            path: path.to_owned(),
        }))
    }

    async fn write(&self, path: &str, bs: Bytes) -> iceberg::Result<()> {
        let (client, key) = self.object(path)?;
        client
            .put(&key, PutPayload::from(bs))
            .await
            .map_err(|e| failed("writing", path, e))?;
        Ok(())
    }

    async fn writer(&self, path: &str) -> iceberg::Result<Box<dyn FileWrite>> {
        Ok(Box::new(Writer {
            store: self.clone(),
            path: path.to_owned(),
            buffer: Vec::new(),
        }))
    }

    async fn delete(&self, path: &str) -> iceberg::Result<()> {
        let (client, key) = self.object(path)?;
        match client.delete(&key).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(failed("deleting", path, e)),
        }
    }

    async fn delete_prefix(&self, path: &str) -> iceberg::Result<()> {
        let (client, prefix) = self.object(path)?;
        let keys: Vec<_> = client
            .list(Some(&prefix))
            .map_ok(|m| m.location)
            .try_collect()
            .await
            .map_err(|e| failed("listing", path, e))?;
        for key in keys {
            match client.delete(&key).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(failed("deleting", key.as_ref(), e)),
            }
        }
        Ok(())
    }

    async fn delete_stream(&self, mut paths: BoxStream<'static, String>) -> iceberg::Result<()> {
        while let Some(path) = paths.next().await {
            self.delete(&path).await?;
        }
        Ok(())
    }

    fn new_input(&self, path: &str) -> iceberg::Result<InputFile> {
        Ok(InputFile::new(Arc::new(self.clone()), path.to_owned()))
    }

    fn new_output(&self, path: &str) -> iceberg::Result<OutputFile> {
        Ok(OutputFile::new(Arc::new(self.clone()), path.to_owned()))
    }
}

/// The catalog's storage factory: every FileIO it makes is the table's [`Store`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Factory(pub(crate) Store);

#[typetag::serde(name = "rivus")]
impl StorageFactory for Factory {
    fn build(&self, _config: &StorageConfig) -> iceberg::Result<Arc<dyn Storage>> {
        Ok(Arc::new(self.0.clone()))
    }
}

/// Ranges of one object, read as asked.
struct Reader {
    client: Arc<DynObjectStore>,
    key: StorePath,
    path: String,
}

#[async_trait]
impl FileRead for Reader {
    async fn read(&self, range: Range<u64>) -> iceberg::Result<Bytes> {
        self.client
            .get_range(&self.key, range)
            .await
            .map_err(|e| failed("reading", &self.path, e))
    }
}

/// An object written whole at close (the table's own files are small: metadata, manifests).
struct Writer {
    store: Store,
    path: String,
    buffer: Vec<u8>,
}

#[async_trait]
impl FileWrite for Writer {
    async fn write(&mut self, bs: Bytes) -> iceberg::Result<()> {
        self.buffer.extend_from_slice(&bs);
        Ok(())
    }

    async fn close(&mut self) -> iceberg::Result<()> {
        let bytes = Bytes::from(std::mem::take(&mut self.buffer));
        self.store.write(&self.path, bytes).await
    }
}
