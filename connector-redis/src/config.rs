//! Where Redis is and how to reach it: [`RedisConfig`] — one server or the seed nodes of a
//! cluster, TLS files, timeouts — checked by `validate`.

use std::path::PathBuf;
use std::time::Duration;

use rivus_sdk::tls::TlsFiles;
use rivus_sdk::{Error, Result};

use crate::redact;

/// How to reach Redis: one server (`redis://`, `rediss://` for TLS, `unix://`) or a cluster
/// (seed nodes; the rest of the topology is discovered), with the CA and client certificate
/// files for TLS and the timeouts.
///
/// A `&str` or `String` converts into a standalone endpoint, so `RedisSink::builder(url)` keeps
/// working; `RedisConfig::cluster([...])` names the seed nodes of a cluster.
#[derive(Clone)]
pub struct RedisConfig {
    pub(crate) urls: Vec<String>,
    pub(crate) cluster: bool,
    pub(crate) tls: TlsFiles,
    pub(crate) connect_timeout: Duration,
    pub(crate) response_timeout: Duration,
}

impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let urls: Vec<String> = self.urls.iter().map(|u| redact(u)).collect();
        f.debug_struct("RedisConfig")
            .field("urls", &urls)
            .field("cluster", &self.cluster)
            .field("tls", &self.tls)
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .finish()
    }
}

impl From<&str> for RedisConfig {
    fn from(url: &str) -> Self {
        RedisConfig::new(url)
    }
}

impl From<&String> for RedisConfig {
    fn from(url: &String) -> Self {
        RedisConfig::new(url.as_str())
    }
}

impl From<String> for RedisConfig {
    fn from(url: String) -> Self {
        RedisConfig::new(url)
    }
}

impl RedisConfig {
    /// One server: `redis://[user:password@]host:port/db`, `rediss://...` (TLS) or
    /// `unix:///path`.
    pub fn new(url: impl Into<String>) -> Self {
        RedisConfig {
            urls: vec![url.into()],
            cluster: false,
            tls: TlsFiles::default(),
            connect_timeout: Duration::from_secs(5),
            response_timeout: Duration::from_secs(10),
        }
    }

    /// A Redis Cluster, reached through any of these seed nodes (`redis://` or `rediss://`).
    /// Commands are routed by their key's hash slot.
    pub fn cluster<I: IntoIterator<Item = S>, S: Into<String>>(nodes: I) -> Self {
        let mut e = RedisConfig::new(String::new());
        e.urls = nodes.into_iter().map(Into::into).collect();
        e.cluster = true;
        e
    }

    rivus_sdk::setters! {
        /// Trust this CA (PEM) for `rediss://` instead of the system's roots.
        ca_file(path: impl Into<PathBuf>) => tls.ca_file = Some(path.into());
    }

    /// Present this client certificate and key (PEM) on `rediss://` (servers with
    /// `tls-auth-clients yes`).
    pub fn client_cert(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.tls.client_cert = Some(cert.into());
        self.tls.client_key = Some(key.into());
        self
    }

    rivus_sdk::setters! {
        /// All TLS files at once (CA, client certificate and key).
        tls(files: TlsFiles) => tls;

        /// Time to establish a connection (default 5 s).
        connect_timeout(d: Duration) => connect_timeout;

        /// Time to wait for a reply (default 10 s); a timeout counts as a lost connection and the
        /// pipeline or read is retried.
        response_timeout(d: Duration) => response_timeout;
    }

    /// True for a cluster endpoint.
    pub fn is_cluster(&self) -> bool {
        self.cluster
    }

    /// The URLs, redacted (for messages).
    pub fn describe(&self) -> String {
        let urls: Vec<String> = self.urls.iter().map(|u| redact(u)).collect();
        urls.join(",")
    }

    pub(crate) fn response_timeout_value(&self) -> Duration {
        self.response_timeout
    }

    /// Checks the URLs and the TLS files; errors name the field (`url`, `tls.ca_file`).
    pub(crate) fn validate(&self) -> Result<()> {
        if self.urls.is_empty() || self.urls.iter().any(|u| u.is_empty()) {
            return Err(Error::config("url", "no Redis URL given"));
        }
        for url in &self.urls {
            crate::open_client(url)?;
            if self.cluster && url.starts_with("unix://") {
                return Err(Error::config(
                    "url",
                    format!("`{}`: cluster nodes are reached over TCP", redact(url)),
                ));
            }
            self.tls.validate(url, "rediss://")?;
        }
        if self.response_timeout.is_zero() || self.connect_timeout.is_zero() {
            return Err(Error::config("timeout", "timeouts must be above zero"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_files_need_rediss_and_exist() {
        let e = RedisConfig::new("redis://127.0.0.1/").ca_file("/etc/hostname");
        let err = e.validate().unwrap_err().to_string();
        assert!(err.contains("`tls`"), "{err}");
        let e = RedisConfig::new("rediss://127.0.0.1/").ca_file("/no/such/ca.pem");
        let err = e.validate().unwrap_err().to_string();
        assert!(err.contains("`tls.ca_file`"), "{err}");
        assert!(err.contains("/no/such/ca.pem"), "{err}");
        let e = RedisConfig::cluster(["unix:///tmp/r.sock"]);
        assert!(e.validate().is_err());
        let e = RedisConfig::cluster(Vec::<String>::new());
        assert!(e.validate().is_err());
    }

    #[test]
    fn debug_redacts_passwords() {
        let e = RedisConfig::cluster(["redis://u:hunter2@127.0.0.1:7001/"]);
        let s = format!("{e:?}");
        assert!(!s.contains("hunter2"), "{s}");
    }
}
