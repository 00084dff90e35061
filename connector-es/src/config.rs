//! Where the cluster is and how to reach it: hosts, authentication, TLS and timeouts. Secrets
//! never appear in `Debug` output or errors.

use std::fmt;
use std::time::Duration;

use elasticsearch::auth::{ClientCertificate, Credentials};
use elasticsearch::cert::{Certificate, CertificateValidation};
use elasticsearch::http::transport::{SingleNodeConnectionPool, TransportBuilder};
use elasticsearch::http::Url;
use elasticsearch::Elasticsearch;
use rivus_core::tls::TlsFiles;
use rivus_core::{Error, Result};

/// How to authenticate.
#[derive(Clone, PartialEq, Eq, Default)]
pub enum EsAuth {
    /// No authentication.
    #[default]
    None,
    /// HTTP basic authentication.
    Basic {
        /// User name.
        user: String,
        /// Password (redacted in `Debug`).
        password: String,
    },
    /// An API key (id and secret).
    ApiKey {
        /// Key id.
        id: String,
        /// Key secret (redacted in `Debug`).
        key: String,
    },
    /// A bearer token (redacted in `Debug`).
    Bearer(String),
}

impl fmt::Debug for EsAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EsAuth::None => f.write_str("None"),
            EsAuth::Basic { user, .. } => {
                write!(f, "Basic {{ user: {user:?}, password: <redacted> }}")
            }
            EsAuth::ApiKey { id, .. } => write!(f, "ApiKey {{ id: {id:?}, key: <redacted> }}"),
            EsAuth::Bearer(_) => f.write_str("Bearer(<redacted>)"),
        }
    }
}

/// Connection settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EsConfig {
    /// The node URL, e.g. `http://127.0.0.1:9200` or `https://es.example:9200`.
    pub url: String,
    /// Authentication.
    pub auth: EsAuth,
    /// For `https://`: a CA (PEM) to trust instead of the system's roots, and a client
    /// certificate with its key (PEM) for nodes that require one (PKI). A client certificate
    /// is the credential then: `auth` must stay `None`.
    pub tls: TlsFiles,
    /// Accept any server certificate (tests only).
    pub insecure: bool,
    /// Timeout of one request.
    pub timeout: Duration,
}

impl From<&str> for EsConfig {
    /// The settings of a client of the node at `url`, nothing else set.
    fn from(url: &str) -> Self {
        EsConfig::new(url)
    }
}

impl From<&String> for EsConfig {
    /// The settings of a client of the node at `url`, nothing else set.
    fn from(url: &String) -> Self {
        EsConfig::new(url.as_str())
    }
}

impl From<String> for EsConfig {
    /// The settings of a client of the node at `url`, nothing else set.
    fn from(url: String) -> Self {
        EsConfig::new(url)
    }
}

impl EsConfig {
    /// Settings for `url` with no auth and a 60 s timeout.
    pub fn new(url: impl Into<String>) -> Self {
        EsConfig {
            url: url.into(),
            auth: EsAuth::None,
            tls: TlsFiles::default(),
            insecure: false,
            timeout: Duration::from_secs(60),
        }
    }

    /// Checks the settings; `path` prefixes field names (e.g. `sink.elasticsearch`).
    pub fn validate(&self, path: &str) -> Result<Url> {
        let url = Url::parse(&self.url)
            .map_err(|e| Error::config(format!("{path}.url"), format!("`{}`: {e}", self.url)))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Error::config(
                format!("{path}.url"),
                "scheme must be http or https",
            ));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(Error::config(
                format!("{path}.url"),
                "put credentials in `auth`, not in the URL",
            ));
        }
        if self.timeout.is_zero() {
            return Err(Error::config(format!("{path}.timeout"), "must be positive"));
        }
        self.tls.validate(path, &self.url, "https://")?;
        if self.tls.client_cert.is_some() && self.auth != EsAuth::None {
            return Err(Error::config(
                format!("{path}.auth"),
                "a client certificate is the credential: leave auth empty or drop the certificate",
            ));
        }
        Ok(url)
    }

    /// A client for these settings.
    pub fn client(&self, path: &str) -> Result<Elasticsearch> {
        let url = self.validate(path)?;
        let mut b = TransportBuilder::new(SingleNodeConnectionPool::new(url))
            .timeout(self.timeout)
            .disable_proxy();
        b = match &self.auth {
            EsAuth::None => match self.tls.read_client(path)? {
                // reqwest reads the certificate and its key from one PEM text.
                Some((mut cert, key)) => {
                    cert.push(b'\n');
                    cert.extend_from_slice(&key);
                    b.auth(Credentials::Certificate(ClientCertificate::Pem(cert)))
                }
                None => b,
            },
            EsAuth::Basic { user, password } => {
                b.auth(Credentials::Basic(user.clone(), password.clone()))
            }
            EsAuth::ApiKey { id, key } => b.auth(Credentials::ApiKey(id.clone(), key.clone())),
            EsAuth::Bearer(t) => b.auth(Credentials::Bearer(t.clone())),
        };
        if self.insecure {
            b = b.cert_validation(CertificateValidation::None);
        } else if let Some(pem) = self.tls.read_ca(path)? {
            let cert = Certificate::from_pem(&pem)
                .map_err(|e| Error::config(format!("{path}.tls.ca_file"), e))?;
            b = b.cert_validation(CertificateValidation::Full(cert));
        }
        let transport = b
            .build()
            .map_err(|e| Error::connector("elasticsearch: building the client", e))?;
        Ok(Elasticsearch::new(transport))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_fields_and_hides_secrets() {
        let mut c = EsConfig::new("ftp://x");
        assert!(c
            .validate("sink.es")
            .unwrap_err()
            .to_string()
            .contains("sink.es.url"));
        c.url = "http://u:p@127.0.0.1:9200".into();
        assert!(c
            .validate("sink.es")
            .unwrap_err()
            .to_string()
            .contains("credentials"));
        c.url = "http://127.0.0.1:9200".into();
        c.auth = EsAuth::Basic {
            user: "elastic".into(),
            password: "hunter2".into(),
        };
        assert!(c.validate("sink.es").is_ok());
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("hunter2") && shown.contains("elastic"),
            "{shown}"
        );
        c.auth = EsAuth::Bearer("tok3n".into());
        assert!(!format!("{c:?}").contains("tok3n"));
    }
}
