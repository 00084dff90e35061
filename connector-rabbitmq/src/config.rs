//! The connection: URI (credentials redacted everywhere), connecting with a timeout.

use std::fmt;
use std::time::Duration;

use lapin::{Connection, ConnectionProperties};
use rivus_core::{Error, Result};

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
    pub reconnect: rivus_core::backoff::BackoffPolicy,
}

pub use rivus_core::secrets::redact_url as redact;

impl fmt::Debug for AmqpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AmqpConfig")
            .field("uri", &redact(&self.uri))
            .field("connect_timeout", &self.connect_timeout)
            .field("reconnect", &self.reconnect)
            .finish()
    }
}

impl AmqpConfig {
    /// A config for `uri`.
    pub fn new(uri: impl Into<String>) -> Self {
        AmqpConfig {
            uri: uri.into(),
            connect_timeout: Duration::from_secs(30),
            reconnect: rivus_core::backoff::BackoffPolicy::reconnect(),
        }
    }

    /// Checks the URI; `path` prefixes field names.
    pub fn validate(&self, path: &str) -> Result<()> {
        if !(self.uri.starts_with("amqp://") || self.uri.starts_with("amqps://")) {
            return Err(Error::config(
                format!("{path}.uri"),
                format!(
                    "`{}` must start with amqp:// or amqps://",
                    redact(&self.uri)
                ),
            ));
        }
        Ok(())
    }

    /// Connects (errors never show the password).
    pub async fn connect(&self) -> Result<Connection> {
        let what = || format!("rabbitmq: connecting to {}", redact(&self.uri));
        let connecting = Connection::connect(&self.uri, ConnectionProperties::default());
        match tokio::time::timeout(self.connect_timeout, connecting).await {
            Ok(Ok(c)) => Ok(c),
            Ok(Err(e)) => Err(Error::connector(what(), redact(&e.to_string()))),
            Err(_) => Err(Error::connector(
                what(),
                format!("no answer within {:?}", self.connect_timeout),
            )),
        }
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
        let err = AmqpConfig::new("http://x")
            .validate("source.rabbitmq")
            .unwrap_err();
        assert!(err.to_string().contains("source.rabbitmq.uri"), "{err}");
    }
}
