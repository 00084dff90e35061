//! Client properties passed to librdkafka, with secrets redacted from `Debug` and errors.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use rdkafka::error::KafkaError;
use rdkafka::ClientConfig;
use rivus_sdk::tls::TlsFiles;
use rivus_sdk::{Error, Result};

use crate::security::{SaslAuth, Security};

/// Connection settings every client of the connector starts from, unless the properties set
/// them: `reconnect.backoff.ms=20` (librdkafka's default 100). librdkafka spaces a client's
/// connection attempts by half of it: after the bootstrap connection answers the first
/// metadata request and is dropped, the connection to the broker by id waited 50 ms — in the
/// probe, the producer and the consumer, one after the other on the way to a job's first
/// record; now 11 ms, librdkafka's floor. A failed broker's reconnections start at 20 ms and
/// double up to `reconnect.backoff.max.ms` (10 s), as before.
pub const CONNECTION: [(&str, &str); 1] = [("reconnect.backoff.ms", "20")];

/// Sets each of `defaults` that `config` does not set already (the user's properties win).
pub(crate) fn set_unless_given(config: &mut ClientConfig, defaults: &[(&str, &str)]) {
    for (k, v) in defaults {
        if config.get(k).is_none() {
            config.set(*k, *v);
        }
    }
}

/// librdkafka properties (`bootstrap.servers`, `security.protocol`, `sasl.password`, ...).
///
/// Values of keys that hold secrets (passwords, keys, tokens, JAAS configs) never appear in
/// `Debug` output or error messages.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct KafkaConfig {
    props: BTreeMap<String, String>,
    security: Security,
    connect_timeout: Option<Duration>,
}

/// How long opening a source or sink waits for the cluster's first answer by default.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// True when `key` names a secret.
pub fn is_secret(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    [
        "password",
        "secret",
        "token",
        "sasl.jaas",
        "ssl.key.pem",
        "private",
        "credential",
    ]
    .iter()
    .any(|s| k.contains(s))
}

impl fmt::Debug for KafkaConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut m = f.debug_map();
        for (k, v) in &self.props {
            if is_secret(k) {
                m.entry(k, &"<redacted>");
            } else {
                m.entry(k, v);
            }
        }
        if let Some(tls) = &self.security.tls {
            m.entry(&"tls", tls);
        }
        if let Some(sasl) = &self.security.sasl {
            m.entry(&"sasl", sasl);
        }
        m.finish()
    }
}

impl From<&str> for KafkaConfig {
    /// The settings of a client of `bootstrap_servers`, nothing else set.
    fn from(bootstrap_servers: &str) -> Self {
        KafkaConfig::new(bootstrap_servers)
    }
}

impl From<String> for KafkaConfig {
    /// The settings of a client of `bootstrap_servers`, nothing else set.
    fn from(bootstrap_servers: String) -> Self {
        KafkaConfig::new(bootstrap_servers)
    }
}

impl From<&String> for KafkaConfig {
    /// The settings of a client of `bootstrap_servers`, nothing else set.
    fn from(bootstrap_servers: &String) -> Self {
        KafkaConfig::new(bootstrap_servers.as_str())
    }
}

impl KafkaConfig {
    /// Properties with `bootstrap.servers` set.
    pub fn new(bootstrap_servers: impl Into<String>) -> Self {
        let mut p = KafkaConfig::default();
        p.set("bootstrap.servers", bootstrap_servers);
        p
    }

    /// Sets one property.
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<String>) -> &mut Self {
        self.props.insert(key.into(), value.into());
        self
    }

    /// A property's value.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.props.get(key).map(String::as_str)
    }

    /// Connects over TLS with these files (see [`security`](crate::security)).
    pub fn set_tls(&mut self, tls: TlsFiles) -> &mut Self {
        self.security.tls = Some(tls);
        self
    }

    /// Authenticates with SASL (over TLS unless `security.protocol` says `SASL_PLAINTEXT`).
    pub fn set_sasl(&mut self, sasl: SaslAuth) -> &mut Self {
        self.security.sasl = Some(sasl);
        self
    }

    /// How long opening a source or sink waits for the cluster's first answer before it fails
    /// (default [`DEFAULT_CONNECT_TIMEOUT`]); refused authentication or TLS fails at once.
    pub fn set_connect_timeout(&mut self, d: Duration) -> &mut Self {
        self.connect_timeout = Some(d);
        self
    }

    /// See [`set_connect_timeout`](Self::set_connect_timeout).
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout.unwrap_or(DEFAULT_CONNECT_TIMEOUT)
    }

    /// The bootstrap servers and how the client authenticates, for messages:
    /// `127.0.0.1:9095 (SASL_SSL, SCRAM-SHA-512, user alice)`.
    pub fn endpoint(&self) -> String {
        format!(
            "{} ({})",
            self.get("bootstrap.servers").unwrap_or("?"),
            self.security.describe(self.get("security.protocol"))
        )
    }

    /// Checks what rivus relies on; errors name the property or option (`bootstrap.servers`,
    /// `properties.linger.ms`, `sasl.username`).
    pub fn validate(&self) -> Result<()> {
        match self.get("bootstrap.servers") {
            Some(s) if !s.trim().is_empty() => {}
            _ => {
                return Err(Error::config(
                    "bootstrap.servers",
                    "required: a comma-separated list of host:port",
                ))
            }
        }
        for key in ["enable.auto.commit", "enable.auto.offset.store"] {
            if self.get(key) == Some("true") {
                return Err(Error::config(
                    key.to_string(),
                    "must not be true: offsets are checkpointed and committed by rivus",
                ));
            }
        }
        self.security.validate(self.get("security.protocol"))?;
        // librdkafka checks each property as it is set; a configuration built offline
        // refuses what a client would (unknown names, bad values, features not built in).
        self.client_config(&[])
            .create_native_config()
            .map_err(|e| match e {
                KafkaError::ClientConfig(_, desc, key, _) => Error::config(
                    format!("properties.{key}"),
                    self.redact(&format!("refused by librdkafka: {desc}")),
                ),
                other => Error::config("properties", self.redact(&other.to_string())),
            })?;
        Ok(())
    }

    /// `text` with every secret value replaced by `<redacted>`.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_owned();
        let secrets = self
            .props
            .iter()
            .filter(|(k, _)| is_secret(k))
            .map(|(_, v)| v.as_str())
            .chain(self.security.sasl.as_ref().map(|s| s.password.as_str()));
        for v in secrets {
            if !v.is_empty() {
                out = out.replace(v, "<redacted>");
            }
        }
        out
    }

    /// The rdkafka configuration the connector's clients start from ([`CONNECTION`], raw
    /// properties, then TLS and SASL), with `overrides` applied last — also for a raw client
    /// with the same settings.
    pub fn client_config(&self, overrides: &[(&str, &str)]) -> ClientConfig {
        let mut c = ClientConfig::new();
        for (k, v) in CONNECTION {
            c.set(k, v);
        }
        for (k, v) in &self.props {
            c.set(k, v);
        }
        self.security.apply(&mut c);
        for (k, v) in overrides {
            c.set(*k, *v);
        }
        c
    }

    /// Wraps an rdkafka error from building a client, without echoing secret values.
    pub(crate) fn build_error(&self, what: &str, e: KafkaError) -> Error {
        let fault = crate::error::fault_of(&e);
        Error::client(
            format!("kafka: creating the {what} for {}", self.endpoint()),
            self.redact(&e.to_string()),
            fault,
        )
    }
}

/// The connection setters the source and sink builders share (`tls`, `sasl`,
/// `connect_timeout`, `property`), each writing the builder's `s.props`; the argument
/// documents `property`.
macro_rules! connection_setters {
    ($property_doc:literal) => {
        /// Connects over TLS: a CA to trust (else the system's roots) and a client certificate
        /// for mutual TLS. See [`security`](crate::security).
        pub fn tls(mut self, tls: rivus_sdk::tls::TlsFiles) -> Self {
            self.s.props.set_tls(tls);
            self
        }

        /// Authenticates with SASL by user name and password, over TLS.
        pub fn sasl(mut self, sasl: crate::SaslAuth) -> Self {
            self.s.props.set_sasl(sasl);
            self
        }

        /// How long opening waits for the cluster's first answer (default 30 s); a refused
        /// password or certificate fails at once, naming the endpoint.
        pub fn connect_timeout(mut self, d: std::time::Duration) -> Self {
            self.s.props.set_connect_timeout(d);
            self
        }

        #[doc = $property_doc]
        pub fn property(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
            self.s.props.set(key, value);
            self
        }
    };
}
pub(crate) use connection_setters;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_and_bad_config_names_the_field() {
        let mut p = KafkaConfig::new("127.0.0.1:9092");
        p.set("sasl.password", "hunter2")
            .set("sasl.username", "alice");
        let shown = format!("{p:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("alice"));
        let err = KafkaConfig::default().validate().unwrap_err();
        assert!(err.to_string().contains("`bootstrap.servers`"), "{err}");
        p.set("enable.auto.commit", "true");
        assert!(p
            .validate()
            .unwrap_err()
            .to_string()
            .contains("at `enable.auto.commit`"));
    }

    #[test]
    fn librdkafka_refusals_name_the_property_without_its_secret() {
        let mut p = KafkaConfig::new("127.0.0.1:9092");
        p.set("security.protocol", "SASL_SSL")
            .set("sasl.mechanism", "SCRAM-SHA-512")
            .set("sasl.password", "hunter2");
        p.validate().expect("SSL and SASL are built in");
        p.set("fetch.wait.max.ms", "soon");
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("`properties.fetch.wait.max.ms`"), "{e}");
        p.set("fetch.wait.max.ms", "100")
            .set("no.such.property", "1");
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("`properties.no.such.property`"), "{e}");
        p.set("no.such.property", "hunter2");
        let e = p.validate().unwrap_err().to_string();
        assert!(!e.contains("hunter2"), "{e}");
        let mut p = KafkaConfig::new("h:9095");
        p.set_sasl(SaslAuth::new("PLAIN", "alice", "s3cr3t-pw"));
        assert_eq!(p.endpoint(), "h:9095 (SASL_SSL, PLAIN, user alice)");
        let shown = format!("{p:?}");
        assert!(
            !shown.contains("s3cr3t-pw") && shown.contains("alice"),
            "{shown}"
        );
        assert_eq!(p.redact("x s3cr3t-pw y"), "x <redacted> y");
    }
}
