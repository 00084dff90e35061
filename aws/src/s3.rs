//! An S3 location: its settings, the one way its client is built, and the store's errors as
//! rivus errors. The files connector and the S3 checkpoint store both take it from here.
//! The secret key never appears in `Debug` output or errors.

use std::sync::Arc;

use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey, S3ConditionalPut};
use rivus_sdk::{Error, Fault, Result};

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
    /// Take what is not set here from the standard `AWS_*` variables (`AWS_ENDPOINT_URL`,
    /// `AWS_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, ...).
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

/// `s3://bucket/prefix`, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Url {
    /// The bucket.
    pub bucket: String,
    /// The key prefix, without leading or trailing `/` (may be empty).
    pub prefix: String,
}

impl S3Url {
    /// Reads `url` (`s3://bucket/prefix`, the prefix optional); `None` when it is not an
    /// `s3://` URL. An error (path-less, for the caller to place) when it names no bucket.
    pub fn parse(url: &str) -> Option<Result<S3Url>> {
        let rest = url.strip_prefix("s3://")?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Some(Err(Error::config(
                "",
                format!("`{url}` names no bucket (s3://bucket/prefix)"),
            )));
        }
        Some(Ok(S3Url {
            bucket: bucket.to_owned(),
            prefix: prefix.trim_matches('/').to_owned(),
        }))
    }

    /// The URL again, `s3://bucket[/prefix]`.
    pub fn url(&self) -> String {
        if self.prefix.is_empty() {
            format!("s3://{}", self.bucket)
        } else {
            format!("s3://{}/{}", self.bucket, self.prefix)
        }
    }
}

/// How writes to existing objects are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writes {
    /// As they come.
    Plain,
    /// Conditional on the object's ETag (`If-Match`), so that two writers cannot both replace
    /// the same version (the checkpoint store's lease).
    Conditional,
}

/// An S3 client and where its requests go (for the calls `object_store` does not make, signed
/// with [`sigv4`](crate::sigv4)).
#[derive(Debug, Clone)]
pub struct S3Client {
    /// The store.
    pub store: Arc<AmazonS3>,
    /// The bucket.
    pub bucket: String,
    /// The region requests are signed for.
    pub region: String,
    /// `scheme://host[:port]` of the bucket's requests.
    pub origin: String,
    /// The `Host` header.
    pub host: String,
    /// The bucket's path: `/bucket` (path style) or empty (virtual host).
    pub bucket_path: String,
}

impl S3Client {
    /// The client of `bucket` as `o` says (region `us-east-1` when neither `o` nor the
    /// environment names one; plain `http://` endpoints allowed). A refusal is a
    /// configuration error without a path, for the caller to place.
    pub fn build(bucket: &str, o: &S3Options, writes: Writes) -> Result<S3Client> {
        let mut b = if o.from_env {
            AmazonS3Builder::from_env()
        } else {
            AmazonS3Builder::new()
        };
        b = b
            .with_bucket_name(bucket)
            .with_virtual_hosted_style_request(o.virtual_hosted);
        if writes == Writes::Conditional {
            b = b.with_conditional_put(S3ConditionalPut::ETagMatch);
        }
        if let Some(e) = &o.endpoint {
            b = b.with_endpoint(e);
        }
        let endpoint = b.get_config_value(&AmazonS3ConfigKey::Endpoint);
        if endpoint
            .as_deref()
            .is_some_and(|e| e.starts_with("http://"))
        {
            b = b.with_allow_http(true);
        }
        let region = o
            .region
            .clone()
            .or_else(|| b.get_config_value(&AmazonS3ConfigKey::Region))
            .or_else(|| b.get_config_value(&AmazonS3ConfigKey::DefaultRegion))
            .unwrap_or_else(|| "us-east-1".to_owned());
        b = b.with_region(&region);
        if let Some(k) = &o.access_key {
            b = b.with_access_key_id(k);
        }
        if let Some(k) = &o.secret_key {
            b = b.with_secret_access_key(k);
        }
        let store = b
            .build()
            .map(Arc::new)
            .map_err(|e| Error::config("", format!("the S3 client for bucket `{bucket}`: {e}")))?;
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
}

/// What a restart would make of `e`: a refused key or permission is refused, an invalid path
/// or an operation the store does not support permanent, the rest (the store unreachable, a
/// 5xx) transient.
pub fn fault(e: &object_store::Error) -> Fault {
    use object_store::Error as E;
    match e {
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => Fault::Refused,
        E::InvalidPath { .. } | E::NotSupported { .. } | E::NotImplemented { .. } => {
            Fault::Permanent
        }
        _ => Fault::Transient,
    }
}

/// `e` as a rivus error, with what was being done (`files: listing s3://…`).
pub fn store_error(what: impl Into<String>, e: object_store::Error) -> Error {
    let fault = fault(&e);
    Error::client(what, e, fault)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_a_bucket() {
        let u = S3Url::parse("s3://lake/orders/").unwrap().unwrap();
        assert_eq!((u.bucket.as_str(), u.prefix.as_str()), ("lake", "orders"));
        assert_eq!(u.url(), "s3://lake/orders");
        assert_eq!(S3Url::parse("s3://b").unwrap().unwrap().url(), "s3://b");
        let e = S3Url::parse("s3:///x").unwrap().unwrap_err();
        assert!(e.to_string().contains("names no bucket"), "{e}");
        assert!(S3Url::parse("/var/lib/x").is_none());
    }

    #[test]
    fn the_secret_key_stays_out_of_debug() {
        let shown = format!(
            "{:?}",
            S3Options {
                access_key: Some("AKIDEXAMPLE".into()),
                secret_key: Some("hunter2".into()),
                ..Default::default()
            }
        );
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("AKIDEXAMPLE") && shown.contains("<redacted>"));
    }

    #[test]
    fn a_refused_key_is_not_retryable_and_a_lost_connection_is() {
        let denied = object_store::Error::PermissionDenied {
            path: "p".into(),
            source: "403".into(),
        };
        let e = store_error("writing x", denied);
        assert!(matches!(e, Error::Refused { .. }), "{e}");
        assert!(e.to_string().contains("writing x"), "{e}");
        let other = object_store::Error::Generic {
            store: "S3",
            source: "connection reset".into(),
        };
        assert!(store_error("reading y", other).is_retryable());
    }

    #[test]
    fn requests_go_to_the_endpoint_path_style_or_to_the_bucket_host() {
        let o = S3Options {
            endpoint: Some("http://127.0.0.1:8333/".into()),
            ..Default::default()
        };
        let c = S3Client::build("b", &o, Writes::Plain).unwrap();
        assert_eq!(
            (c.origin.as_str(), c.host.as_str(), c.bucket_path.as_str()),
            ("http://127.0.0.1:8333", "127.0.0.1:8333", "/b")
        );
        assert_eq!(c.region, "us-east-1");
        let o = S3Options {
            region: Some("eu-west-1".into()),
            virtual_hosted: true,
            ..Default::default()
        };
        let c = S3Client::build("b", &o, Writes::Conditional).unwrap();
        assert_eq!(c.origin, "https://b.s3.eu-west-1.amazonaws.com");
        assert_eq!(c.bucket_path, "");
    }
}
