//! Where the files go: `s3://bucket/prefix` on an S3-compatible store (endpoint, region, keys,
//! path-style or virtual-host addressing) or `file:///dir` (or a plain path) on a local disk.
//! The S3 settings and client are `rivus-aws`'s, shared with the S3 checkpoint store.

use std::path::PathBuf;

pub use rivus_aws::s3::S3Options;
use rivus_aws::s3::{S3Client, S3Url, Writes};
use rivus_sdk::{Error, Result};

/// A parsed destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A bucket and a key prefix (no leading or trailing `/`; may be empty).
    #[allow(missing_docs)] // the variant's documentation names both
    S3 { bucket: String, prefix: String },
    /// A directory.
    Local(PathBuf),
}

impl Location {
    /// Parses `url`; errors name `path` (the option holding it).
    pub fn parse(url: &str, path: &str) -> Result<Location> {
        if let Some(s3) = S3Url::parse(url) {
            let S3Url { bucket, prefix } = s3.map_err(|e| e.under(path))?;
            return Ok(Location::S3 { bucket, prefix });
        }
        let dir = url.strip_prefix("file://").unwrap_or(url);
        if dir.is_empty() || dir.contains("://") {
            return Err(Error::config(
                path,
                format!("`{url}`: an s3://bucket/prefix URL, or file:///dir"),
            ));
        }
        Ok(Location::Local(PathBuf::from(dir)))
    }

    /// The URL, for logs and reports.
    pub fn url(&self) -> String {
        match self {
            Location::S3 { bucket, prefix } if prefix.is_empty() => format!("s3://{bucket}"),
            Location::S3 { bucket, prefix } => format!("s3://{bucket}/{prefix}"),
            Location::Local(dir) => format!("file://{}", dir.display()),
        }
    }
}

/// The client of an S3 location; a refusal names `s3`.
pub(crate) fn s3_client(bucket: &str, o: &S3Options) -> Result<S3Client> {
    S3Client::build(bucket, o, Writes::Plain).map_err(|e| e.under("s3"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_a_bucket_or_a_directory() {
        assert_eq!(
            Location::parse("s3://lake/orders/", "x").unwrap(),
            Location::S3 {
                bucket: "lake".into(),
                prefix: "orders".into()
            }
        );
        assert_eq!(
            Location::parse("file:///tmp/out", "x").unwrap(),
            Location::Local("/tmp/out".into())
        );
        let e = Location::parse("s3:///x", "url").unwrap_err();
        assert!(e.to_string().contains("`url`"), "{e}");
        assert!(Location::parse("gs://b", "x").is_err());
    }
}
