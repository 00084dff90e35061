//! Where the cluster is and how to reach it: hosts, authentication, TLS and timeouts. Secrets
//! never appear in `Debug` output or errors.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use elasticsearch::auth::Credentials;
use elasticsearch::cert::{Certificate, CertificateValidation};
use elasticsearch::http::transport::{SingleNodeConnectionPool, TransportBuilder};
use elasticsearch::http::Url;
use elasticsearch::Elasticsearch;
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
    /// PEM file of a CA to trust (in addition to the system's).
    pub ca_file: Option<PathBuf>,
    /// Accept any server certificate (tests only).
    pub insecure: bool,
    /// Timeout of one request.
    pub timeout: Duration,
}

impl EsConfig {
    /// Settings for `url` with no auth and a 60 s timeout.
    pub fn new(url: impl Into<String>) -> Self {
        EsConfig {
            url: url.into(),
            auth: EsAuth::None,
            ca_file: None,
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
        if let Some(ca) = &self.ca_file {
            if !ca.is_file() {
                return Err(Error::config(
                    format!("{path}.ca_file"),
                    format!("{} is not a readable file", ca.display()),
                ));
            }
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
            EsAuth::None => b,
            EsAuth::Basic { user, password } => {
                b.auth(Credentials::Basic(user.clone(), password.clone()))
            }
            EsAuth::ApiKey { id, key } => b.auth(Credentials::ApiKey(id.clone(), key.clone())),
            EsAuth::Bearer(t) => b.auth(Credentials::Bearer(t.clone())),
        };
        if self.insecure {
            b = b.cert_validation(CertificateValidation::None);
        } else if let Some(ca) = &self.ca_file {
            let pem =
                std::fs::read(ca).map_err(|e| Error::io(format!("reading {}", ca.display()), e))?;
            let cert = Certificate::from_pem(&pem)
                .map_err(|e| Error::config(format!("{path}.ca_file"), e))?;
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
