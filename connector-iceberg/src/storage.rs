//! The table's files — metadata JSON, manifest lists, manifests — read and written through
//! rivus's own store client (an S3 bucket with the files sink's options, or the local disk),
//! as iceberg's [`Storage`]: one client, one TLS stack and one set of credentials for the
//! data files and the table around them.

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
use rivus_connector_files::{Location, S3Options};
use rivus_core::Result;

/// Where the table's files are: a bucket (`s3://bucket/…` paths) or the local disk
/// (`file:///…` or absolute paths).
#[derive(Clone, Serialize, Deserialize)]
pub(crate) struct Store {
    /// `Some(bucket)` for S3, `None` for the local disk.
    bucket: Option<String>,
    /// The client; not carried by the serialized form (iceberg asks for one; a store read
    /// back from it refuses every call).
    #[serde(skip)]
    client: Option<Arc<DynObjectStore>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("bucket", &self.bucket)
            .finish()
    }
}

impl Store {
    /// The store of `location` (a warehouse or a table location), with the S3 options.
    pub(crate) fn new(location: &Location, s3: &S3Options) -> Result<Store> {
        match location {
            Location::S3 { bucket, .. } => {
                let client =
                    S3Client::build(bucket, s3, Writes::Conditional).map_err(|e| e.under("s3"))?;
                Ok(Store {
                    bucket: Some(bucket.clone()),
                    client: Some(client.store),
                })
            }
            Location::Local(_) => Ok(Store {
                bucket: None,
                client: Some(Arc::new(object_store::local::LocalFileSystem::new())),
            }),
        }
    }

    /// The client, or an error for a store read back from its serialized form.
    fn client(&self) -> iceberg::Result<&Arc<DynObjectStore>> {
        self.client.as_ref().ok_or_else(|| {
            IcebergError::new(
                ErrorKind::Unexpected,
                "a rivus store cannot be used after being serialized",
            )
        })
    }

    /// The objects below `path` (a directory), with their keys in the store.
    pub(crate) fn list(
        &self,
        path: &str,
    ) -> iceberg::Result<BoxStream<'static, object_store::Result<object_store::ObjectMeta>>> {
        let prefix = self.key(path)?;
        Ok(self.client()?.list(Some(&prefix)))
    }

    /// The key of `path` in the store: `s3://bucket/a/b` → `a/b` (the bucket must be the
    /// store's), `file:///a/b` or `/a/b` → `a/b`.
    pub(crate) fn key(&self, path: &str) -> iceberg::Result<StorePath> {
        let bad =
            |why: &str| IcebergError::new(ErrorKind::DataInvalid, format!("the path {path} {why}"));
        let rest = match &self.bucket {
            Some(bucket) => {
                let rest = path
                    .strip_prefix("s3://")
                    .or_else(|| path.strip_prefix("s3a://"))
                    .ok_or_else(|| bad("is not an s3:// path"))?;
                let (b, key) = rest.split_once('/').unwrap_or((rest, ""));
                if b != bucket {
                    return Err(bad(&format!("is not in the bucket `{bucket}`")));
                }
                key
            }
            None => {
                let rest = path.strip_prefix("file://").unwrap_or(path);
                rest.strip_prefix('/')
                    .ok_or_else(|| bad("is not an absolute file path"))?
            }
        };
        StorePath::parse(rest).map_err(|e| bad(&e.to_string()))
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
        match self.client()?.head(&self.key(path)?).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(failed("reading", path, e)),
        }
    }

    async fn metadata(&self, path: &str) -> iceberg::Result<FileMetadata> {
        let meta = self
            .client()?
            .head(&self.key(path)?)
            .await
            .map_err(|e| failed("reading", path, e))?;
        Ok(FileMetadata { size: meta.size })
    }

    async fn read(&self, path: &str) -> iceberg::Result<Bytes> {
        let got = self
            .client()?
            .get(&self.key(path)?)
            .await
            .map_err(|e| failed("reading", path, e))?;
        got.bytes().await.map_err(|e| failed("reading", path, e))
    }

    async fn reader(&self, path: &str) -> iceberg::Result<Box<dyn FileRead>> {
        Ok(Box::new(Reader {
            client: Arc::clone(self.client()?),
            key: self.key(path)?,
            path: path.to_owned(),
        }))
    }

    async fn write(&self, path: &str, bs: Bytes) -> iceberg::Result<()> {
        self.client()?
            .put(&self.key(path)?, PutPayload::from(bs))
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
        match self.client()?.delete(&self.key(path)?).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(failed("deleting", path, e)),
        }
    }

    async fn delete_prefix(&self, path: &str) -> iceberg::Result<()> {
        let client = self.client()?;
        let prefix = self.key(path)?;
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
