//! Client properties passed to librdkafka, with secrets redacted from `Debug` and errors.

use std::collections::BTreeMap;
use std::fmt;

use rdkafka::ClientConfig;
use rivus_core::{Error, Result};

/// librdkafka properties (`bootstrap.servers`, `security.protocol`, `sasl.password`, ...).
///
/// Values of keys that hold secrets (passwords, keys, tokens, JAAS configs) never appear in
/// `Debug` output or error messages.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct KafkaProperties {
    props: BTreeMap<String, String>,
}

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

impl fmt::Debug for KafkaProperties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut m = f.debug_map();
        for (k, v) in &self.props {
            if is_secret(k) {
                m.entry(k, &"<redacted>");
            } else {
                m.entry(k, v);
            }
        }
        m.finish()
    }
}

impl KafkaProperties {
    /// Properties with `bootstrap.servers` set.
    pub fn new(bootstrap_servers: impl Into<String>) -> Self {
        let mut p = KafkaProperties::default();
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

    /// Checks what rivus relies on; `path` prefixes field names (e.g. `source.kafka`).
    pub fn validate(&self, path: &str) -> Result<()> {
        match self.get("bootstrap.servers") {
            Some(s) if !s.trim().is_empty() => {}
            _ => {
                return Err(Error::config(
                    format!("{path}.bootstrap.servers"),
                    "required: a comma-separated list of host:port",
                ))
            }
        }
        for key in ["enable.auto.commit", "enable.auto.offset.store"] {
            if self.get(key) == Some("true") {
                return Err(Error::config(
                    format!("{path}.{key}"),
                    "must not be true: offsets are checkpointed and committed by rivus",
                ));
            }
        }
        Ok(())
    }

    /// The rdkafka configuration, with `overrides` applied last.
    pub(crate) fn client_config(&self, overrides: &[(&str, &str)]) -> ClientConfig {
        let mut c = ClientConfig::new();
        for (k, v) in &self.props {
            c.set(k, v);
        }
        for (k, v) in overrides {
            c.set(*k, *v);
        }
        c
    }

    /// Wraps an rdkafka error from building a client, without echoing secret values.
    pub(crate) fn build_error(&self, what: &str, e: rdkafka::error::KafkaError) -> Error {
        let mut msg = e.to_string();
        for (k, v) in &self.props {
            if is_secret(k) && !v.is_empty() {
                msg = msg.replace(v.as_str(), "<redacted>");
            }
        }
        Error::connector(format!("kafka: creating the {what}"), msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_and_bad_config_names_the_field() {
        let mut p = KafkaProperties::new("127.0.0.1:9092");
        p.set("sasl.password", "hunter2")
            .set("sasl.username", "alice");
        let shown = format!("{p:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("alice"));
        let err = KafkaProperties::default()
            .validate("source.kafka")
            .unwrap_err();
        assert!(
            err.to_string().contains("source.kafka.bootstrap.servers"),
            "{err}"
        );
        p.set("enable.auto.commit", "true");
        assert!(p
            .validate("x")
            .unwrap_err()
            .to_string()
            .contains("x.enable.auto.commit"));
    }
}
