//! Where the real servers are: one environment variable per service, with the loopback defaults
//! that `dev/services up` uses. [`require`] checks that a service answers and, when it does not,
//! fails under `CI=true` and skips visibly otherwise — a test never passes silently.

use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// A service started by `dev/services`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// Apache Kafka (KRaft), `RIVUS_KAFKA_BOOTSTRAP`, default `127.0.0.1:9092`.
    Kafka,
    /// Elasticsearch/OpenSearch, `RIVUS_ES_URL`, default `http://127.0.0.1:9200`.
    Elasticsearch,
    /// RabbitMQ, `RIVUS_AMQP_URL`, default `amqp://guest:guest@127.0.0.1:5672/%2f`.
    RabbitMq,
    /// The same RabbitMQ over AMQPS with client certificates required, `RIVUS_AMQPS_URL`,
    /// default `amqps://guest:guest@127.0.0.1:5671/%2f` (certificates in [`tls_dir`]).
    RabbitMqTls,
    /// Redis, `RIVUS_REDIS_URL`, default `redis://127.0.0.1:6379/`.
    Redis,
    /// The same Redis over TLS with client certificates required, `RIVUS_REDIS_TLS_URL`,
    /// default `rediss://127.0.0.1:6380/` (certificates in [`tls_dir`]).
    RedisTls,
    /// A Redis Cluster of three primaries, `RIVUS_REDIS_CLUSTER_URLS` (comma-separated seed
    /// nodes), default `redis://127.0.0.1:7001/,redis://127.0.0.1:7002/,redis://127.0.0.1:7003/`.
    RedisCluster,
    /// PostgreSQL, `RIVUS_PG_URL`, default `postgres://rivus@127.0.0.1:5432/rivus`.
    Postgres,
    /// MariaDB/MySQL, `RIVUS_MYSQL_URL`, default `mysql://root@127.0.0.1:3306/rivus`.
    MySql,
}

impl Service {
    /// The environment variable naming this service's address.
    pub fn env_var(self) -> &'static str {
        match self {
            Service::Kafka => "RIVUS_KAFKA_BOOTSTRAP",
            Service::Elasticsearch => "RIVUS_ES_URL",
            Service::RabbitMq => "RIVUS_AMQP_URL",
            Service::RabbitMqTls => "RIVUS_AMQPS_URL",
            Service::Redis => "RIVUS_REDIS_URL",
            Service::RedisTls => "RIVUS_REDIS_TLS_URL",
            Service::RedisCluster => "RIVUS_REDIS_CLUSTER_URLS",
            Service::Postgres => "RIVUS_PG_URL",
            Service::MySql => "RIVUS_MYSQL_URL",
        }
    }

    /// The loopback default used by `dev/services`.
    pub fn default_url(self) -> &'static str {
        match self {
            Service::Kafka => "127.0.0.1:9092",
            Service::Elasticsearch => "http://127.0.0.1:9200",
            Service::RabbitMq => "amqp://guest:guest@127.0.0.1:5672/%2f",
            Service::RabbitMqTls => "amqps://guest:guest@127.0.0.1:5671/%2f",
            Service::Redis => "redis://127.0.0.1:6379/",
            Service::RedisTls => "rediss://127.0.0.1:6380/",
            Service::RedisCluster => {
                "redis://127.0.0.1:7001/,redis://127.0.0.1:7002/,redis://127.0.0.1:7003/"
            }
            Service::Postgres => "postgres://rivus@127.0.0.1:5432/rivus",
            Service::MySql => "mysql://root@127.0.0.1:3306/rivus",
        }
    }

    /// The address to use: the environment variable, or the default.
    pub fn url(self) -> String {
        std::env::var(self.env_var()).unwrap_or_else(|_| self.default_url().to_owned())
    }

    /// `host:port` of the service, taken from its URL.
    pub fn host_port(self) -> String {
        host_port(&self.url())
    }
}

fn host_port(url: &str) -> String {
    let rest = url.split("://").nth(1).unwrap_or(url);
    let rest = rest.rsplit('@').next().unwrap_or(rest);
    let hp = rest.split(['/', '?', ',']).next().unwrap_or(rest);
    hp.to_owned()
}

/// The directory of the test certificates made by `dev/services` (`ca.crt`, `server.crt`,
/// `server.key`, `client.crt`, `client.key`): `RIVUS_TLS_DIR`, default `target/services/tls`
/// of this repository.
pub fn tls_dir() -> std::path::PathBuf {
    match std::env::var_os("RIVUS_TLS_DIR") {
        Some(d) => d.into(),
        None => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/services/tls"),
    }
}

/// A name no earlier test run used: `prefix-<nanoseconds since the epoch>` (for topics,
/// indexes, queues and tables on shared servers).
pub fn unique_name(prefix: &str) -> String {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{prefix}-{n}")
}

/// True when running under CI (`CI=true` or `CI=1`).
pub fn in_ci() -> bool {
    matches!(std::env::var("CI").as_deref(), Ok("true") | Ok("1"))
}

/// Checks that `service` accepts TCP connections. Returns its URL when it does. When it does
/// not: under CI, panics with a message naming the service and how to start it; elsewhere,
/// prints a visible SKIP line and returns `None`.
pub fn require(service: Service) -> Option<String> {
    let url = service.url();
    let hp = host_port(&url);
    let reachable = hp
        .to_socket_addrs()
        .ok()
        .into_iter()
        .flatten()
        .any(|a| TcpStream::connect_timeout(&a, Duration::from_secs(2)).is_ok());
    if reachable {
        return Some(url);
    }
    let msg = format!(
        "{service:?} is not reachable at {hp} ({} = {url}); start it with `dev/services up`",
        service.env_var()
    );
    if in_ci() {
        panic!("{msg}");
    }
    eprintln!("SKIP: {msg}");
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_port_from_urls() {
        assert_eq!(
            host_port("amqp://guest:guest@127.0.0.1:5672/%2f"),
            "127.0.0.1:5672"
        );
        assert_eq!(host_port("127.0.0.1:9092"), "127.0.0.1:9092");
        assert_eq!(
            host_port("postgres://rivus@127.0.0.1:5432/rivus"),
            "127.0.0.1:5432"
        );
        assert_eq!(host_port("http://127.0.0.1:9200"), "127.0.0.1:9200");
    }
}
