//! Where the files go: `s3://bucket/prefix` on an S3-compatible store (endpoint, region, keys,
//! path-style or virtual-host addressing) or `file:///dir` (or a plain path) on a local disk.
//! The secret key never appears in `Debug` output or errors.

use std::path::PathBuf;
use std::sync::Arc;

use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey};
use rivus_core::{Error, Result};

/// The settings of an S3-compatible store.
#[derive(Clone, Default)]
pub struct S3Options {
    /// `http://127.0.0.1:8333` for a local store; none for AWS.
    pub endpoint: Option<String>,
    /// Default `us-east-1`.
    pub region: Option<String>,
    /// Access key id.
    pub access_key: Option<String>,
    /// Secret access key (never shown).
    pub secret_key: Option<String>,
    /// `https://bucket.host/key` instead of `https://host/bucket/key` (default false: path
    /// style, what most self-hosted stores want).
    pub virtual_hosted: bool,
    /// Take what is not set here from `AWS_*` variables.
    pub from_env: bool,
}

impl std::fmt::Debug for S3Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Options")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key", &self.access_key)
            .field(
                "secret_key",
                &self.secret_key.as_ref().map(|_| "<redacted>"),
            )
            .field("virtual_hosted", &self.virtual_hosted)
            .field("from_env", &self.from_env)
            .finish()
    }
}

/// A parsed destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A bucket and a key prefix (no leading or trailing `/`; may be empty).
    S3 { bucket: String, prefix: String },
    /// A directory.
    Local(PathBuf),
}

impl Location {
    /// Parses `url`; errors name `path` (the option holding it).
    pub fn parse(url: &str, path: &str) -> Result<Location> {
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(Error::config(
                    path,
                    format!("`{url}` names no bucket (s3://bucket/prefix)"),
                ));
            }
            return Ok(Location::S3 {
                bucket: bucket.to_owned(),
                prefix: prefix.trim_matches('/').to_owned(),
            });
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

/// An S3 client and where its requests go (for the calls `object_store` does not make).
#[derive(Debug, Clone)]
pub(crate) struct S3Client {
    pub(crate) store: Arc<AmazonS3>,
    pub(crate) bucket: String,
    pub(crate) region: String,
    /// `scheme://host[:port]` of the bucket's requests.
    pub(crate) origin: String,
    /// The `Host` header.
    pub(crate) host: String,
    /// The bucket's path: `/bucket` (path style) or empty (virtual host).
    pub(crate) bucket_path: String,
}

/// Builds the client of an S3 location.
pub(crate) fn s3_client(bucket: &str, o: &S3Options) -> Result<S3Client> {
    let mut b = if o.from_env {
        AmazonS3Builder::from_env()
    } else {
        AmazonS3Builder::new()
    };
    b = b
        .with_bucket_name(bucket)
        .with_virtual_hosted_style_request(o.virtual_hosted);
    if let Some(e) = &o.endpoint {
        b = b.with_endpoint(e).with_allow_http(e.starts_with("http://"));
    }
    let env_region = b.get_config_value(&AmazonS3ConfigKey::Region);
    let region = o
        .region
        .clone()
        .or(env_region)
        .unwrap_or_else(|| "us-east-1".to_owned());
    b = b.with_region(&region);
    if let Some(k) = &o.access_key {
        b = b.with_access_key_id(k);
    }
    if let Some(k) = &o.secret_key {
        b = b.with_secret_access_key(k);
    }
    let endpoint = b.get_config_value(&AmazonS3ConfigKey::Endpoint);
    let store = b
        .build()
        .map(Arc::new)
        .map_err(|e| Error::config("s3", format!("the S3 client for bucket `{bucket}`: {e}")))?;
    let (origin, bucket_path) = match (&endpoint, o.virtual_hosted) {
        (Some(e), false) => (e.trim_end_matches('/').to_owned(), format!("/{bucket}")),
        (Some(e), true) => {
            let (scheme, host) = e.split_once("://").unwrap_or(("https", e));
            (
                format!("{scheme}://{bucket}.{}", host.trim_end_matches('/')),
                String::new(),
            )
        }
        (None, false) => (
            format!("https://s3.{region}.amazonaws.com"),
            format!("/{bucket}"),
        ),
        (None, true) => (
            format!("https://{bucket}.s3.{region}.amazonaws.com"),
            String::new(),
        ),
    };
    let host = origin
        .split_once("://")
        .map_or(origin.as_str(), |(_, h)| h)
        .to_owned();
    Ok(S3Client {
        store,
        bucket: bucket.to_owned(),
        region,
        origin,
        host,
        bucket_path,
    })
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
        let shown = format!(
            "{:?}",
            S3Options {
                secret_key: Some("hunter2".into()),
                ..Default::default()
            }
        );
        assert!(!shown.contains("hunter2"), "{shown}");
    }
}
