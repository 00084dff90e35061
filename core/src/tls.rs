//! TLS files shared by connectors: a CA to trust and a client certificate with its key, as
//! paths checked when a job starts and read with the settings path in every error.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// The crypto provider of every rustls connection rivus makes itself (the CDC source's
/// PostgreSQL connections, Redis over TLS, the testkit's TLS front): *ring*'s.
///
/// rustls 0.23.48 deprecates it ("no support for post-quantum algorithms": *ring* has no
/// post-quantum key exchange) in favour of aws-lc-rs, whose C library and build tools every
/// machine building rivus would then need. Chosen here, once: classical key exchange
/// (X25519, P-256, P-384) until *ring* offers a hybrid one.
pub fn crypto_provider() -> rustls::crypto::CryptoProvider {
    #[allow(deprecated)]
    rustls::crypto::ring::default_provider()
}

/// Paths of PEM files for a TLS connection. Empty means the client's defaults (the system's
/// roots, no client certificate). Paths are not secret and show in `Debug`; the files'
/// contents never do.
#[derive(Clone, Default, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TlsFiles {
    /// A CA certificate (PEM) to trust.
    pub ca_file: Option<PathBuf>,
    /// A client certificate (PEM), with `client_key`.
    pub client_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM, PKCS#8 for most clients).
    pub client_key: Option<PathBuf>,
}

impl fmt::Debug for TlsFiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsFiles")
            .field("ca_file", &self.ca_file)
            .field("client_cert", &self.client_cert)
            .field(
                "client_key",
                &self.client_key.as_ref().map(|_| "<path set>"),
            )
            .finish()
    }
}

impl TlsFiles {
    /// No file set.
    pub fn is_empty(&self) -> bool {
        self.ca_file.is_none() && self.client_cert.is_none() && self.client_key.is_none()
    }

    /// Checks that a certificate comes with its key, that every file is readable, and — when
    /// any file is set — that `url` uses `tls_scheme` (`rediss://`, `amqps://`). The files
    /// sit at a section's `tls` field: errors name `tls.ca_file` and so on, relative to the
    /// section.
    pub fn validate(&self, url: &str, tls_scheme: &str) -> Result<()> {
        if self.is_empty() {
            return Ok(());
        }
        if !url.starts_with(tls_scheme) {
            return Err(Error::config(
                "tls",
                format!(
                    "certificate files are set but `{}` is not a {tls_scheme} URL",
                    crate::secrets::redact_url(url)
                ),
            ));
        }
        self.validate_files()
    }

    /// Checks that a certificate comes with its key and that every file is readable, for
    /// clients without a TLS URL scheme (Kafka, SQL). Errors name `tls.client_key` and so on.
    pub fn validate_files(&self) -> Result<()> {
        match (&self.client_cert, &self.client_key) {
            (Some(_), None) => {
                return Err(Error::config(
                    "tls.client_key",
                    "a client certificate needs its key",
                ))
            }
            (None, Some(_)) => {
                return Err(Error::config(
                    "tls.client_cert",
                    "a client key needs its certificate",
                ))
            }
            _ => {}
        }
        for (name, file) in self.named() {
            if let Some(p) = file {
                std::fs::metadata(p).map_err(|e| unreadable(name, p, e))?;
            }
        }
        Ok(())
    }

    /// The CA file's contents, if set.
    pub fn read_ca(&self) -> Result<Option<Vec<u8>>> {
        self.ca_file
            .as_deref()
            .map(|p| read("ca_file", p))
            .transpose()
    }

    /// The client certificate's and key's contents, if set.
    pub fn read_client(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        match (&self.client_cert, &self.client_key) {
            (Some(c), Some(k)) => Ok(Some((read("client_cert", c)?, read("client_key", k)?))),
            _ => Ok(None),
        }
    }

    fn named(&self) -> [(&'static str, &Option<PathBuf>); 3] {
        [
            ("ca_file", &self.ca_file),
            ("client_cert", &self.client_cert),
            ("client_key", &self.client_key),
        ]
    }
}

fn unreadable(name: &str, p: &Path, e: std::io::Error) -> Error {
    Error::config(
        format!("tls.{name}"),
        format!("cannot read {}: {e}", p.display()),
    )
}

fn read(name: &str, p: &Path) -> Result<Vec<u8>> {
    std::fs::read(p).map_err(|e| unreadable(name, p, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_field() {
        let t = TlsFiles {
            ca_file: Some("/no/such/ca.pem".into()),
            ..TlsFiles::default()
        };
        let e = t.validate("redis://h/", "rediss://").unwrap_err();
        assert!(e.to_string().contains("at `tls`"), "{e}");
        let e = t.validate("rediss://h/", "rediss://").unwrap_err();
        assert!(e.to_string().contains("at `tls.ca_file`"), "{e}");
        assert!(e.to_string().contains("/no/such/ca.pem"), "{e}");
        let t = TlsFiles {
            client_cert: Some("/etc/hostname".into()),
            ..TlsFiles::default()
        };
        let e = t.validate("amqps://h", "amqps://").unwrap_err();
        assert!(e.to_string().contains("at `tls.client_key`"), "{e}");
        assert!(TlsFiles::default().validate("amqp://h", "amqps://").is_ok());
    }
}
