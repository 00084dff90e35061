//! Where the checkpoints go: `s3://bucket/prefix`, the endpoint, region and keys, how many
//! checkpoints are kept and how long a lease lasts.

use std::time::Duration;

use rivus_aws::s3::{S3Client, S3Options, S3Url, Writes};
use rivus_sdk::checkpoint::OnDamaged;
use rivus_sdk::{Error, Result};

/// Settings of an [`S3StateBackend`](crate::S3StateBackend). The secret key never appears in
/// `Debug` output.
#[derive(Clone)]
pub struct S3Config {
    pub(crate) bucket: String,
    pub(crate) prefix: String,
    /// Endpoint, region and keys, as the files connector takes them.
    pub(crate) s3: S3Options,
    pub(crate) retain: usize,
    pub(crate) lease: Duration,
    pub(crate) on_damaged: OnDamaged,
}

impl std::fmt::Debug for S3Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Config")
            .field("url", &self.url())
            .field("s3", &self.s3)
            .field("retain", &self.retain)
            .field("lease", &self.lease)
            .field("on_damaged", &self.on_damaged)
            .finish()
    }
}

impl S3Config {
    /// A store at `url` (`s3://bucket/prefix`, the prefix optional), with nothing taken from
    /// the environment: set the endpoint, region and keys here. Keeps 5 checkpoints; a lease
    /// lasts 30 s.
    pub fn new(url: &str) -> Result<Self> {
        let S3Url { bucket, prefix } = S3Url::parse(url)
            .ok_or_else(|| {
                Error::config(
                    "",
                    format!("`{url}` is not an s3:// URL (s3://bucket/prefix)"),
                )
            })
            .and_then(|parsed| parsed)
            .map_err(|e| e.under("checkpoint.store"))?;
        Ok(S3Config {
            bucket,
            prefix,
            s3: S3Options::default(),
            retain: 5,
            lease: Duration::from_secs(30),
            on_damaged: OnDamaged::default(),
        })
    }

    /// A store at `url` whose endpoint, region and keys come from the standard variables
    /// (`AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
    /// `AWS_SESSION_TOKEN`, `AWS_ALLOW_HTTP`, ...); settings made here override them.
    pub fn from_env(url: &str) -> Result<Self> {
        let mut c = Self::new(url)?;
        c.s3.from_env = true;
        Ok(c)
    }

    /// The S3 API's address (`http://127.0.0.1:8333`); default: AWS. `http://` is allowed.
    pub fn endpoint(mut self, url: impl Into<String>) -> Self {
        self.s3.endpoint = Some(url.into());
        self
    }

    /// The region (default `us-east-1`).
    pub fn region(mut self, region: impl Into<String>) -> Self {
        self.s3.region = Some(region.into());
        self
    }

    /// The access key id and the secret key.
    pub fn credentials(mut self, access_key: impl Into<String>, secret: impl Into<String>) -> Self {
        self.s3.access_key = Some(access_key.into());
        self.s3.secret_key = Some(secret.into());
        self
    }

    /// How many of the newest checkpoints are kept (default 5, at least 1).
    pub fn retain(mut self, n: usize) -> Self {
        self.retain = n;
        self
    }

    /// What a restore does when the newest checkpoint cannot be read (default: refuse).
    pub fn on_damaged(mut self, on: OnDamaged) -> Self {
        self.on_damaged = on;
        self
    }

    /// How long the owner's lease lasts without renewal (default 30 s, at least 3 s): the
    /// time after which another process may take the job over from a holder that died
    /// without letting go. Renewed every third of it.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// `s3://bucket/prefix`.
    pub fn url(&self) -> String {
        S3Url {
            bucket: self.bucket.clone(),
            prefix: self.prefix.clone(),
        }
        .url()
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if self.retain == 0 {
            return Err(Error::config("checkpoint.retain", "must be at least 1"));
        }
        if self.lease < Duration::from_secs(3) {
            return Err(Error::config("checkpoint.lease", "must be at least 3s"));
        }
        Ok(())
    }

    /// The client: conditional writes by ETag, path-style requests (what S3-compatible
    /// servers expect).
    pub(crate) fn client(&self) -> Result<object_store::aws::AmazonS3> {
        let client = S3Client::build(&self.bucket, &self.s3, Writes::Conditional)
            .map_err(|e| e.under("checkpoint.store"))?;
        Ok(std::sync::Arc::unwrap_or_clone(client.store))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_read_and_bad_ones_named() {
        let c = S3Config::new("s3://bucket/a/b/").unwrap();
        assert_eq!((c.bucket.as_str(), c.prefix.as_str()), ("bucket", "a/b"));
        assert_eq!(c.url(), "s3://bucket/a/b");
        assert_eq!(S3Config::new("s3://b").unwrap().url(), "s3://b");
        let e = S3Config::new("/var/lib/x").unwrap_err().to_string();
        assert!(
            e.contains("checkpoint.store") && e.contains("not an s3:// URL"),
            "{e}"
        );
        let e = S3Config::new("s3:///p").unwrap_err().to_string();
        assert!(e.contains("names no bucket"), "{e}");
        let e = S3Config::new("s3://b")
            .unwrap()
            .retain(0)
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("checkpoint.retain"), "{e}");
    }

    #[test]
    fn the_secret_key_stays_out_of_debug() {
        let c = S3Config::new("s3://b/p")
            .unwrap()
            .credentials("AKIDEXAMPLE", "very-secret-key");
        let d = format!("{c:?}");
        assert!(!d.contains("very-secret-key"), "{d}");
        assert!(d.contains("AKIDEXAMPLE") && d.contains("<redacted>"), "{d}");
    }
}
