//! The connection: URI (credentials redacted everywhere), TLS files, connecting with a
//! timeout.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use lapin::tcp::{OwnedIdentity, OwnedTLSConfig};
use lapin::{Connection, ConnectionProperties};
use rivus_sdk::tls::TlsFiles;
use rivus_sdk::{Error, Result};

/// Where the broker is. The URI may carry credentials and a vhost:
/// `amqp://user:password@host:5672/%2f` (or `amqps://` for TLS).
#[derive(Clone, PartialEq, Eq)]
pub struct AmqpConfig {
    /// The AMQP URI.
    pub uri: String,
    /// Longest wait for the connection (default 30 s).
    pub connect_timeout: Duration,
    /// Reconnecting after a lost connection (default: exponential from 100 ms to 5 s, 60
    /// attempts); when it gives up, the job fails and recovers from its last checkpoint.
    pub reconnect: rivus_sdk::backoff::BackoffPolicy,
    /// For `amqps://`: a CA (PEM) to trust besides the system's roots, and a client
    /// certificate with its PKCS#8 key (PEM) for brokers with `ssl_options.verify =
    /// verify_peer` and `fail_if_no_peer_cert = true`.
    pub tls: TlsFiles,
}

pub(crate) use rivus_sdk::secrets::redact_url as redact;

impl fmt::Debug for AmqpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AmqpConfig")
            .field("uri", &redact(&self.uri))
            .field("connect_timeout", &self.connect_timeout)
            .field("reconnect", &self.reconnect)
            .field("tls", &self.tls)
            .finish()
    }
}

impl From<&str> for AmqpConfig {
    fn from(uri: &str) -> Self {
        AmqpConfig::new(uri)
    }
}

impl From<&String> for AmqpConfig {
    fn from(uri: &String) -> Self {
        AmqpConfig::new(uri.as_str())
    }
}

impl From<String> for AmqpConfig {
    fn from(uri: String) -> Self {
        AmqpConfig::new(uri)
    }
}

impl AmqpConfig {
    /// A config for `uri`.
    pub fn new(uri: impl Into<String>) -> Self {
        AmqpConfig {
            uri: uri.into(),
            connect_timeout: Duration::from_secs(30),
            reconnect: rivus_sdk::backoff::BackoffPolicy::reconnect(),
            tls: TlsFiles::default(),
        }
    }

    rivus_sdk::setters! {
        /// Trusts this CA (PEM) for `amqps://`.
        with_ca_file(path: impl Into<PathBuf>) => tls.ca_file = Some(path.into());
    }

    /// Presents this client certificate and PKCS#8 key (PEM files) on `amqps://`.
    pub fn with_client_cert(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.tls.client_cert = Some(cert.into());
        self.tls.client_key = Some(key.into());
        self
    }

    fn tls(&self) -> Result<OwnedTLSConfig> {
        let cert_chain = match self.tls.read_ca()? {
            Some(pem) => Some(
                String::from_utf8(pem)
                    .map_err(|_| Error::config("tls.ca_file", "not a PEM text file"))?,
            ),
            None => None,
        };
        let identity = self
            .tls
            .read_client()?
            .map(|(pem, key)| OwnedIdentity::PKCS8 { pem, key });
        Ok(OwnedTLSConfig {
            identity,
            cert_chain,
        })
    }

    /// Checks the URI and the TLS files; errors name the field (`uri`, `tls.ca_file`).
    pub fn validate(&self) -> Result<()> {
        if !(self.uri.starts_with("amqp://") || self.uri.starts_with("amqps://")) {
            return Err(Error::config(
                "uri",
                format!(
                    "`{}` must start with amqp:// or amqps://",
                    redact(&self.uri)
                ),
            ));
        }
        self.tls.validate(&self.uri, "amqps://")
    }

    /// Connects (errors never show the password).
    pub async fn connect(&self) -> Result<Connection> {
        let what = || format!("rabbitmq: connecting to {}", redact(&self.uri));
        let tls = self.tls()?;
        let runtime = lapin::runtime::default_runtime()
            .map_err(|e| Error::connector(what(), e.to_string()))?;
        let connecting = Connection::connect_with_config(
            &self.uri,
            ConnectionProperties::default(),
            tls,
            runtime,
        );
        match tokio::time::timeout(self.connect_timeout, connecting).await {
            Ok(Ok(c)) => Ok(c),
            Ok(Err(e)) => Err(crate::error::amqp(what(), e)),
            Err(_) => Err(Error::connector(
                what(),
                format!("no answer within {:?}", self.connect_timeout),
            )),
        }
    }
}

/// Closes `conn`, waiting at most 2 s: a connection that is already gone may never answer the
/// close, and a reconnect (or the end of a job) must not wait on it.
pub(crate) async fn close_quietly(conn: &Connection, why: &str) {
    let closing = conn.close(200, why.into());
    if tokio::time::timeout(std::time::Duration::from_secs(2), closing)
        .await
        .is_err()
    {
        tracing::debug!(
            reason = why,
            "rabbitmq: no answer to the close within 2 s; dropped"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_show() {
        let c = AmqpConfig::new("amqp://guest:s3cret@127.0.0.1:5672/%2f");
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("s3cret") && shown.contains("guest:<redacted>@127.0.0.1"),
            "{shown}"
        );
        let err = AmqpConfig::new("http://x").validate().unwrap_err();
        assert!(err.to_string().contains("`uri`"), "{err}");
    }
}
