//! TLS and SASL for Kafka clients: the `tls` and `sasl` options of sources and sinks, turned
//! into librdkafka's `security.protocol`, `ssl.*` and `sasl.*` properties.
//!
//! | options set | `security.protocol` |
//! |---|---|
//! | `tls` | `SSL` (with a client certificate: mutual TLS) |
//! | `sasl` (with or without `tls`) | `SASL_SSL` |
//! | `sasl` and the property `security.protocol = "SASL_PLAINTEXT"` | `SASL_PLAINTEXT` |
//!
//! Without `tls.ca_file`, certificates are checked against the system's roots (librdkafka's
//! `ssl.ca.location = probe`), as managed Kafka services expect. Host names are always verified.

use std::fmt;

use rdkafka::ClientConfig;
use rivus_sdk::tls::TlsFiles;
use rivus_sdk::{Error, Result};

/// The SASL mechanisms offered by name and password.
pub const SASL_MECHANISMS: [&str; 3] = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];

/// SASL authentication by user name and password (`PLAIN`, `SCRAM-SHA-256`,
/// `SCRAM-SHA-512`). The password never shows in `Debug` output or errors. OAUTHBEARER takes
/// its own librdkafka properties (`sasl.oauthbearer.*`) through `property`.
#[derive(Clone, PartialEq, Eq, serde::Deserialize)]
#[cfg_attr(feature = "pipeline-file", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SaslAuth {
    /// `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512` (any case).
    pub mechanism: String,
    /// The user name.
    pub username: String,
    /// The password.
    pub password: String,
}

impl SaslAuth {
    /// SASL with this mechanism, user and password.
    pub fn new(
        mechanism: impl Into<String>,
        username: impl Into<String>,
        password: impl Into<String>,
    ) -> Self {
        SaslAuth {
            mechanism: mechanism.into(),
            username: username.into(),
            password: password.into(),
        }
    }

    /// The mechanism as librdkafka spells it, if it is one of [`SASL_MECHANISMS`].
    fn mechanism_name(&self) -> Option<&'static str> {
        SASL_MECHANISMS
            .into_iter()
            .find(|m| m.eq_ignore_ascii_case(self.mechanism.trim()))
    }
}

impl fmt::Debug for SaslAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SaslAuth")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// The `tls` and `sasl` options of one client.
#[derive(Clone, Default, PartialEq, Eq, Debug)]
pub(crate) struct Security {
    pub tls: Option<TlsFiles>,
    pub sasl: Option<SaslAuth>,
}

impl Security {
    /// The protocol these options ask for, `None` when neither is set.
    fn protocol(&self) -> Option<&'static str> {
        match (&self.tls, &self.sasl) {
            (_, Some(_)) => Some("SASL_SSL"),
            (Some(_), None) => Some("SSL"),
            (None, None) => None,
        }
    }

    /// Checks the options against each other and against the raw `security.protocol`
    /// property (`explicit`).
    pub(crate) fn validate(&self, explicit: Option<&str>) -> Result<()> {
        if let Some(tls) = &self.tls {
            tls.validate_files()?;
        }
        if let Some(sasl) = &self.sasl {
            if sasl.mechanism_name().is_none() {
                return Err(Error::config(
                    "sasl.mechanism",
                    format!(
                        "`{}` is not one of {} (OAUTHBEARER: set its properties instead)",
                        sasl.mechanism,
                        SASL_MECHANISMS.join(", ")
                    ),
                ));
            }
            if sasl.username.is_empty() {
                return Err(Error::config("sasl.username", "must not be empty"));
            }
        }
        let (Some(derived), Some(explicit)) = (self.protocol(), explicit) else {
            return Ok(());
        };
        let explicit = explicit.trim().to_ascii_uppercase();
        let plaintext_sasl =
            self.tls.is_none() && self.sasl.is_some() && explicit == "SASL_PLAINTEXT";
        if explicit != derived && !plaintext_sasl {
            return Err(Error::config(
                "properties.security.protocol",
                format!("`{explicit}` contradicts the tls/sasl options, which mean `{derived}`"),
            ));
        }
        Ok(())
    }

    /// Sets the properties these options stand for (the raw properties were set before: an
    /// explicit `security.protocol` or `ssl.ca.location` wins).
    pub(crate) fn apply(&self, c: &mut ClientConfig) {
        let Some(protocol) = self.protocol() else {
            return;
        };
        if c.get("security.protocol").is_none() {
            c.set("security.protocol", protocol);
        }
        let tls = self.tls.clone().unwrap_or_default();
        match &tls.ca_file {
            Some(ca) => {
                c.set("ssl.ca.location", ca.display().to_string());
            }
            None if c.get("ssl.ca.location").is_none() => {
                c.set("ssl.ca.location", "probe");
            }
            None => {}
        }
        if let (Some(cert), Some(key)) = (&tls.client_cert, &tls.client_key) {
            c.set("ssl.certificate.location", cert.display().to_string());
            c.set("ssl.key.location", key.display().to_string());
        }
        if let Some(sasl) = &self.sasl {
            c.set(
                "sasl.mechanism",
                sasl.mechanism_name().unwrap_or(&sasl.mechanism),
            );
            c.set("sasl.username", &sasl.username);
            c.set("sasl.password", &sasl.password);
        }
    }

    /// How the client authenticates, for error messages: `SASL_SSL, SCRAM-SHA-512, user
    /// alice` (never the password).
    pub(crate) fn describe(&self, explicit: Option<&str>) -> String {
        let protocol = explicit
            .map(str::to_ascii_uppercase)
            .or(self.protocol().map(str::to_owned))
            .unwrap_or_else(|| "PLAINTEXT".into());
        match &self.sasl {
            Some(s) => format!(
                "{protocol}, {}, user {}",
                s.mechanism_name().unwrap_or(&s.mechanism),
                s.username
            ),
            None if self.tls.as_ref().is_some_and(|t| t.client_cert.is_some()) => {
                format!("{protocol}, client certificate")
            }
            None => protocol,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sasl() -> SaslAuth {
        SaslAuth::new("scram-sha-512", "alice", "hunter2")
    }

    #[test]
    fn protocol_follows_the_options() {
        let mut c = ClientConfig::new();
        Security {
            tls: None,
            sasl: Some(sasl()),
        }
        .apply(&mut c);
        assert_eq!(c.get("security.protocol"), Some("SASL_SSL"));
        assert_eq!(c.get("sasl.mechanism"), Some("SCRAM-SHA-512"));
        assert_eq!(c.get("ssl.ca.location"), Some("probe"));
        let mut c = ClientConfig::new();
        Security {
            tls: Some(TlsFiles {
                ca_file: Some("/ca.pem".into()),
                client_cert: Some("/c.pem".into()),
                client_key: Some("/k.pem".into()),
            }),
            sasl: None,
        }
        .apply(&mut c);
        assert_eq!(c.get("security.protocol"), Some("SSL"));
        assert_eq!(c.get("ssl.ca.location"), Some("/ca.pem"));
        assert_eq!(c.get("ssl.key.location"), Some("/k.pem"));
        assert_eq!(c.get("sasl.mechanism"), None);
    }

    #[test]
    fn refusals_name_the_field_and_hide_the_password() {
        let s = Security {
            tls: None,
            sasl: Some(SaslAuth::new("GSSAPI", "alice", "hunter2")),
        };
        let e = s.validate(None).unwrap_err().to_string();
        assert!(e.contains("`sasl.mechanism`"), "{e}");
        let s = Security {
            tls: None,
            sasl: Some(sasl()),
        };
        assert!(s.validate(Some("sasl_plaintext")).is_ok());
        let e = s.validate(Some("PLAINTEXT")).unwrap_err().to_string();
        assert!(e.contains("at `properties.security.protocol`"), "{e}");
        let shown = format!("{s:?}");
        assert!(
            !shown.contains("hunter2") && shown.contains("alice"),
            "{shown}"
        );
        assert_eq!(
            s.describe(None),
            "SASL_SSL, SCRAM-SHA-512, user alice".to_owned()
        );
    }
}
