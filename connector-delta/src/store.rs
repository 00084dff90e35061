//! Where the table is: its root URL and the store the kernel reads and writes it through — a
//! local directory, or an S3 bucket through the same client as the files (with conditional
//! writes: a log version is created only if absent, so two writers never both write it).

use std::sync::Arc;

use object_store::path::Path as StorePath;
use object_store::{DynObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use rivus_aws::s3::{store_error, S3Client, Writes};
use url::Url;

use rivus_connector_files::{Location, S3Options};
use rivus_sdk::{Error, Result};

/// The table's root (a directory URL, ending in `/`) and its store.
pub(crate) fn table_store(
    location: &Location,
    s3: &S3Options,
) -> Result<(Url, Arc<DynObjectStore>)> {
    match location {
        Location::Local(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::io(format!("delta: creating {}", dir.display()), e))?;
            let dir = dir
                .canonicalize()
                .map_err(|e| Error::io(format!("delta: reading {}", dir.display()), e))?;
            let root = Url::from_directory_path(&dir).map_err(|_| {
                Error::config("url", format!("{} is not a directory path", dir.display()))
            })?;
            Ok((root, Arc::new(object_store::local::LocalFileSystem::new())))
        }
        Location::S3 { bucket, prefix } => {
            let client =
                S3Client::build(bucket, s3, Writes::Conditional).map_err(|e| e.under("s3"))?;
            let root = if prefix.is_empty() {
                format!("s3://{bucket}/")
            } else {
                format!("s3://{bucket}/{prefix}/")
            };
            let root = Url::parse(&root).map_err(|e| Error::config("url", e.to_string()))?;
            Ok((root, client.store))
        }
    }
}

/// Refuses a store that does not honour `If-None-Match: *`: each log version is created only
/// if absent, and a store that overwrote instead would let two writers (two jobs, or a job and
/// another engine) both write one version, the second silently replacing the first. Creates an
/// object of its own under `_rivus_probe/` twice — the second must be refused — and removes it.
pub(crate) async fn check_conditional_writes(
    store: &DynObjectStore,
    root: &Url,
    root_path: &StorePath,
) -> Result<()> {
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    // Outside `_delta_log/`, whose listing tells whether the table exists (the sink's other
    // subtasks open at the same time), and outside `_rivus/`, which a restore clears.
    let probe = root_path
        .clone()
        .join("_rivus_probe")
        .join(format!("conditional-put-{}-{nonce}", std::process::id()));
    let create = || {
        store.put_opts(
            &probe,
            PutPayload::from_static(b"rivus: is a second create refused?"),
            PutOptions::from(PutMode::Create),
        )
    };
    let what = || format!("delta: checking conditional writes under {root}");
    create().await.map_err(|e| store_error(what(), e))?;
    let second = create().await;
    let _ = store.delete(&probe).await;
    match second {
        Err(object_store::Error::AlreadyExists { .. }) => Ok(()),
        Ok(_) => Err(Error::refused_at(
            "delta",
            "url",
            format!(
                "the store of {root} replaced an object written with `If-None-Match: *` \
                 instead of refusing it (412): without conditional writes two writers could \
                 both write one log version; use a store that honours them (AWS S3 since \
                 2024, MinIO, SeaweedFS, Ceph RGW 18+, Cloudflare R2)"
            ),
        )),
        Err(e) => Err(store_error(what(), e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::fmt;

    use futures::stream::BoxStream;
    use object_store::memory::InMemory;
    use object_store::{
        GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
        PutMultipartOptions, PutResult,
    };

    /// A store that takes every write as an overwrite, as one without conditional writes.
    #[derive(Debug, Default)]
    struct Overwrites(InMemory);

    impl fmt::Display for Overwrites {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("Overwrites")
        }
    }

    #[async_trait::async_trait]
    impl ObjectStore for Overwrites {
        async fn put_opts(
            &self,
            location: &StorePath,
            payload: PutPayload,
            _opts: PutOptions,
        ) -> object_store::Result<PutResult> {
            self.0
                .put_opts(location, payload, PutOptions::default())
                .await
        }
        async fn put_multipart_opts(
            &self,
            location: &StorePath,
            opts: PutMultipartOptions,
        ) -> object_store::Result<Box<dyn MultipartUpload>> {
            self.0.put_multipart_opts(location, opts).await
        }
        async fn get_opts(
            &self,
            location: &StorePath,
            options: GetOptions,
        ) -> object_store::Result<GetResult> {
            self.0.get_opts(location, options).await
        }
        fn delete_stream(
            &self,
            locations: BoxStream<'static, object_store::Result<StorePath>>,
        ) -> BoxStream<'static, object_store::Result<StorePath>> {
            self.0.delete_stream(locations)
        }
        fn list(
            &self,
            prefix: Option<&StorePath>,
        ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
            self.0.list(prefix)
        }
        async fn list_with_delimiter(
            &self,
            prefix: Option<&StorePath>,
        ) -> object_store::Result<ListResult> {
            self.0.list_with_delimiter(prefix).await
        }
        async fn copy_opts(
            &self,
            from: &StorePath,
            to: &StorePath,
            options: object_store::CopyOptions,
        ) -> object_store::Result<()> {
            self.0.copy_opts(from, to, options).await
        }
    }

    #[tokio::test]
    async fn a_store_that_overwrites_a_conditional_create_is_refused_by_name() {
        let root = Url::parse("s3://bucket/t/").unwrap();
        let path = StorePath::from("t");
        let err = check_conditional_writes(&Overwrites::default(), &root, &path)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("If-None-Match") && err.contains("url"),
            "{err}"
        );
        // The probe is gone; a store that refuses the second create passes.
        let honest = InMemory::new();
        check_conditional_writes(&honest, &root, &path)
            .await
            .unwrap();
        use futures::StreamExt;
        assert_eq!(honest.list(None).count().await, 0);
    }
}
