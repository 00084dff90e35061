//! The connection the sink and the Streams source share: opened from a
//! [`RedisConfig`](crate::RedisConfig), to one server (reconnecting by itself) or a cluster.

use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{AsyncConnectionConfig, ClientTlsConfig, Cmd, Pipeline, RedisFuture, TlsCertificates};
use rivus_sdk::{Error, Result};

use crate::config::RedisConfig;

impl RedisConfig {
    fn certificates(&self) -> Result<Option<TlsCertificates>> {
        if self.tls.is_empty() {
            return Ok(None);
        }
        let root_cert = self.tls.read_ca()?;
        let client_tls = self
            .tls
            .read_client()?
            .map(|(client_cert, client_key)| ClientTlsConfig {
                client_cert,
                client_key,
            });
        Ok(Some(TlsCertificates {
            client_tls,
            root_cert,
        }))
    }

    /// Checks the settings and reads the TLS files, once per connection.
    fn prepare(&self) -> Result<Option<TlsCertificates>> {
        self.validate()?;
        if self.urls.iter().any(|u| u.starts_with("rediss://")) {
            // rustls needs a process-wide crypto provider; ring unless the program chose one.
            let _ = rivus_sdk::tls::crypto_provider().install_default();
        }
        self.certificates()
    }

    fn failed(&self, e: redis::RedisError) -> Error {
        crate::redis_error(format!("redis: connecting to {}", self.describe()), &e)
    }

    /// The client of a one-server endpoint.
    fn client(&self, certs: Option<TlsCertificates>) -> Result<redis::Client> {
        let url = self.urls[0].as_str();
        match certs {
            Some(c) => redis::Client::build_with_tls(url, c),
            None => redis::Client::open(url),
        }
        .map_err(|e| self.failed(e))
    }

    /// The client of a one-server endpoint, with its TLS files (pub/sub needs it: a cluster
    /// connection does not subscribe).
    pub(crate) fn single_client(&self) -> Result<redis::Client> {
        let certs = self.prepare()?;
        if self.cluster {
            return Err(Error::config("url", "needs one server, not a cluster"));
        }
        self.client(certs)
    }

    /// Opens a connection with these settings for your own commands (checks, setup, reading
    /// back what a job wrote).
    pub async fn open(&self) -> Result<RedisConnection> {
        self.connect(false).await
    }

    /// Opens a connection. `managed`: a standalone connection that reconnects by itself (the
    /// sink); otherwise a plain multiplexed one (the Streams source reconnects on its own
    /// terms). Cluster connections always reconnect to nodes by themselves.
    pub(crate) async fn connect(&self, managed: bool) -> Result<RedisConnection> {
        let certs = self.prepare()?;
        let failed = |e| self.failed(e);
        if self.cluster {
            let mut b = ClusterClientBuilder::new(self.urls.clone())
                .connection_timeout(self.connect_timeout)
                .response_timeout(self.response_timeout);
            if let Some(c) = certs {
                b = b.certs(c);
            }
            let client = b.build().map_err(failed)?;
            return Ok(RedisConnection::Cluster(
                client.get_async_connection().await.map_err(failed)?,
            ));
        }
        let client = self.client(certs)?;
        if managed {
            let cfg = ConnectionManagerConfig::new()
                .set_connection_timeout(Some(self.connect_timeout))
                .set_response_timeout(Some(self.response_timeout));
            Ok(RedisConnection::Managed(
                client
                    .get_connection_manager_with_config(cfg)
                    .await
                    .map_err(failed)?,
            ))
        } else {
            let cfg = AsyncConnectionConfig::new()
                .set_connection_timeout(Some(self.connect_timeout))
                .set_response_timeout(Some(self.response_timeout));
            Ok(RedisConnection::Plain(
                client
                    .get_multiplexed_async_connection_with_config(&cfg)
                    .await
                    .map_err(failed)?,
            ))
        }
    }
}

/// A connection to one server or to a cluster, opened by [`RedisConfig::open`]; it implements
/// `redis::aio::ConnectionLike`, so `redis::AsyncCommands` and pipelines work on it (on a
/// cluster, a pipeline must stay within one hash slot).
#[derive(Clone)]
#[non_exhaustive]
pub enum RedisConnection {
    /// One server, reconnecting by itself.
    Managed(ConnectionManager),
    /// One server.
    Plain(MultiplexedConnection),
    /// A cluster: commands are routed by hash slot; a pipeline must stay within one slot.
    Cluster(ClusterConnection),
}

impl RedisConnection {
    /// True for a cluster connection.
    pub fn is_cluster(&self) -> bool {
        matches!(self, RedisConnection::Cluster(_))
    }
}

impl redis::aio::ConnectionLike for RedisConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, redis::Value> {
        match self {
            RedisConnection::Managed(c) => c.req_packed_command(cmd),
            RedisConnection::Plain(c) => c.req_packed_command(cmd),
            RedisConnection::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<redis::Value>> {
        match self {
            RedisConnection::Managed(c) => c.req_packed_commands(pipeline, offset, count),
            RedisConnection::Plain(c) => c.req_packed_commands(pipeline, offset, count),
            RedisConnection::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            RedisConnection::Managed(c) => c.get_db(),
            RedisConnection::Plain(c) => c.get_db(),
            RedisConnection::Cluster(c) => c.get_db(),
        }
    }
}

/// Splits `items` into groups of one hash slot each (first-seen order; each group keeps the
/// items' order), for cluster pipelines.
pub(crate) fn by_slot<T>(items: Vec<T>, key: impl Fn(&T) -> &str) -> Vec<Vec<T>> {
    let mut index: std::collections::HashMap<redis::cluster_routing::Slot, usize> =
        std::collections::HashMap::new();
    let mut groups: Vec<Vec<T>> = Vec::new();
    for item in items {
        let slot = redis::cluster_routing::Slot::for_key(key(&item));
        let i = *index.entry(slot).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[i].push(item);
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_follow_hash_slots_and_keep_order() {
        let items = vec!["{a}1", "b", "{a}2", "c", "b"];
        let groups = by_slot(items, |s| s);
        assert!(groups.contains(&vec!["{a}1", "{a}2"]));
        assert!(groups.contains(&vec!["b", "b"]));
        assert_eq!(groups.iter().map(Vec::len).sum::<usize>(), 5);
    }
}
