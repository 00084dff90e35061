//! Where the cluster is and how to reach it: the node URL, authentication, TLS, timeouts, and
//! (for endpoints that do not answer `GET /`) which engine it is. Secrets never appear in
//! `Debug` output or errors.

use std::time::Duration;

use reqwest::Url;
use rivus_sdk::tls::TlsFiles;
use rivus_sdk::{Error, Result};

use crate::auth::EsAuth;
use crate::cluster::Cluster;

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
    /// The engine and version, when `GET /` must not be asked (OpenSearch Serverless does not
    /// answer it); `None` (the default): learnt from `GET /` at connect.
    pub cluster: Option<Cluster>,
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
            cluster: None,
        }
    }

    /// Checks the settings; errors name the field (`url`, `tls.ca_file`).
    pub fn validate(&self) -> Result<Url> {
        let url = Url::parse(&self.url)
            .map_err(|e| Error::config("url", format!("`{}`: {e}", self.url)))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Error::config("url", "scheme must be http or https"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(Error::config(
                "url",
                "put credentials in `auth`, not in the URL",
            ));
        }
        if self.timeout.is_zero() {
            return Err(Error::config("timeout", "must be positive"));
        }
        self.tls.validate(&self.url, "https://")?;
        if let EsAuth::AwsSigV4 {
            region, service, ..
        } = &self.auth
        {
            if region.trim().is_empty() {
                return Err(Error::config("auth.region", "required"));
            }
            if !matches!(service.as_str(), "es" | "aoss") {
                return Err(Error::config(
                    "auth.service",
                    format!("`{service}`: `es` (OpenSearch Service) or `aoss` (Serverless)"),
                ));
            }
        }
        if self.tls.client_cert.is_some() && self.auth != EsAuth::None {
            return Err(Error::config(
                "auth",
                "a client certificate is the credential: leave auth empty or drop the certificate",
            ));
        }
        Ok(url)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_fields_and_hides_secrets() {
        let mut c = EsConfig::new("ftp://x");
        assert!(c.validate().unwrap_err().to_string().contains("`url`"));
        c.url = "http://u:p@127.0.0.1:9200".into();
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("credentials"));
        c.url = "http://127.0.0.1:9200".into();
        c.auth = EsAuth::Basic {
            user: "elastic".into(),
            password: "hunter2".into(),
        };
        assert!(c.validate().is_ok());
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("hunter2") && shown.contains("elastic"),
            "{shown}"
        );
        c.auth = EsAuth::Bearer("tok3n".into());
        assert!(!format!("{c:?}").contains("tok3n"));
    }
}
