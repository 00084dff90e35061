//! Where the table is: its root URL and the store the kernel reads and writes it through — a
//! local directory, or an S3 bucket through the same client as the files (with conditional
//! writes: a log version is created only if absent, so two writers never both write it).

use std::sync::Arc;

use object_store::DynObjectStore;
use rivus_aws::s3::{S3Client, Writes};
use url::Url;

use rivus_connector_files::{Location, S3Options};
use rivus_core::{Error, Result};

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
