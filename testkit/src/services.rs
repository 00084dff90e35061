//! Where the real servers are: one environment variable per service, with the loopback defaults
//! that `dev/services up` uses. [`require`] checks that a service answers and, when it does not,
//! fails the test — unless skipping was asked for explicitly (`RIVUS_SKIP_SERVICES=1`), never
//! under `CI=true`: a test never passes silently.
//!
//! A third-party connector names its own server with [`External`]: the environment variable
//! that holds its address, a default, and how to tell that it answers.

use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// A service started by `dev/services`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// Apache Kafka (KRaft), `RIVUS_KAFKA_BOOTSTRAP`, default `127.0.0.1:9092`.
    Kafka,
    /// The same broker's mutual-TLS listener, `RIVUS_KAFKA_SSL_BOOTSTRAP`, default
    /// `127.0.0.1:9094` (client certificate from [`tls_dir`] required).
    KafkaSsl,
    /// The same broker's SASL_SSL listener (SCRAM-SHA-512, SCRAM-SHA-256, PLAIN; see
    /// [`kafka_sasl_user`]), `RIVUS_KAFKA_SASL_BOOTSTRAP`, default `127.0.0.1:9095`.
    KafkaSasl,
    /// The same broker's plaintext listener that advertises the port of a test's fault proxy
    /// ([`kafka_proxy_addr`]), `RIVUS_KAFKA_PROXIED_LISTENER`, default `127.0.0.1:9096`:
    /// a client bootstrapping through a proxy there stays behind it.
    KafkaProxied,
    /// Elasticsearch 7.17, `RIVUS_ES_URL`, default `http://127.0.0.1:9200`.
    Elasticsearch,
    /// OpenSearch 2.19, `RIVUS_OPENSEARCH2_URL`, default `http://127.0.0.1:9202`.
    OpenSearch2,
    /// OpenSearch 3.x, `RIVUS_OPENSEARCH3_URL`, default `http://127.0.0.1:9203`.
    OpenSearch3,
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
    /// PostgreSQL over TLS (`sslmode=verify-full`, a user refused without TLS),
    /// `RIVUS_PG_TLS_URL`; the default trusts the CA in [`tls_dir`].
    PostgresTls,
    /// The same PostgreSQL as `rivus_cdc`, a user with the REPLICATION attribute and a
    /// password (logical decoding is on), `RIVUS_PG_CDC_URL`, default
    /// `postgres://rivus_cdc:rivus-cdc-pw@127.0.0.1:5432/rivus`.
    PostgresCdc,
    /// MariaDB over TLS (`ssl-mode=VERIFY_IDENTITY`, a user refused without TLS),
    /// `RIVUS_MYSQL_TLS_URL`; the default trusts the CA in [`tls_dir`].
    MySqlTls,
    /// An S3-compatible object store (SeaweedFS) for checkpoints, `RIVUS_S3_ENDPOINT`,
    /// default `http://127.0.0.1:8333`; bucket and keys from [`s3_credentials`].
    S3,
    /// A Confluent-compatible schema registry (Apicurio), `RIVUS_SCHEMA_REGISTRY_URL`,
    /// default `http://127.0.0.1:8085/apis/ccompat/v7`.
    SchemaRegistry,
    /// An Iceberg REST catalog (Project Nessie), `RIVUS_ICEBERG_REST_URL`, default
    /// `http://127.0.0.1:19120/iceberg`; its tables on the [`S3`](Service::S3) store.
    IcebergRest,
}

impl Service {
    /// The environment variable naming this service's address.
    pub fn env_var(self) -> &'static str {
        match self {
            Service::Kafka => "RIVUS_KAFKA_BOOTSTRAP",
            Service::KafkaSsl => "RIVUS_KAFKA_SSL_BOOTSTRAP",
            Service::KafkaSasl => "RIVUS_KAFKA_SASL_BOOTSTRAP",
            Service::KafkaProxied => "RIVUS_KAFKA_PROXIED_LISTENER",
            Service::Elasticsearch => "RIVUS_ES_URL",
            Service::OpenSearch2 => "RIVUS_OPENSEARCH2_URL",
            Service::OpenSearch3 => "RIVUS_OPENSEARCH3_URL",
            Service::RabbitMq => "RIVUS_AMQP_URL",
            Service::RabbitMqTls => "RIVUS_AMQPS_URL",
            Service::Redis => "RIVUS_REDIS_URL",
            Service::RedisTls => "RIVUS_REDIS_TLS_URL",
            Service::RedisCluster => "RIVUS_REDIS_CLUSTER_URLS",
            Service::Postgres => "RIVUS_PG_URL",
            Service::MySql => "RIVUS_MYSQL_URL",
            Service::PostgresTls => "RIVUS_PG_TLS_URL",
            Service::PostgresCdc => "RIVUS_PG_CDC_URL",
            Service::MySqlTls => "RIVUS_MYSQL_TLS_URL",
            Service::S3 => "RIVUS_S3_ENDPOINT",
            Service::SchemaRegistry => "RIVUS_SCHEMA_REGISTRY_URL",
            Service::IcebergRest => "RIVUS_ICEBERG_REST_URL",
        }
    }

    /// The loopback default used by `dev/services` (`{ca}` stands for the test CA's path).
    pub fn default_url(self) -> &'static str {
        match self {
            Service::Kafka => "127.0.0.1:9092",
            Service::KafkaSsl => "127.0.0.1:9094",
            Service::KafkaSasl => "127.0.0.1:9095",
            Service::KafkaProxied => "127.0.0.1:9096",
            Service::Elasticsearch => "http://127.0.0.1:9200",
            Service::OpenSearch2 => "http://127.0.0.1:9202",
            Service::OpenSearch3 => "http://127.0.0.1:9203",
            Service::RabbitMq => "amqp://guest:guest@127.0.0.1:5672/%2f",
            Service::RabbitMqTls => "amqps://guest:guest@127.0.0.1:5671/%2f",
            Service::Redis => "redis://127.0.0.1:6379/",
            Service::RedisTls => "rediss://127.0.0.1:6380/",
            Service::RedisCluster => {
                "redis://127.0.0.1:7001/,redis://127.0.0.1:7002/,redis://127.0.0.1:7003/"
            }
            Service::Postgres => "postgres://rivus@127.0.0.1:5432/rivus",
            Service::MySql => "mysql://root@127.0.0.1:3306/rivus",
            Service::PostgresTls => {
                "postgres://rivus_tls:rivus-pg-pw@127.0.0.1:5432/rivus?sslmode=verify-full&sslrootcert={ca}"
            }
            Service::PostgresCdc => "postgres://rivus_cdc:rivus-cdc-pw@127.0.0.1:5432/rivus",
            Service::MySqlTls => {
                "mysql://rivus_tls:rivus-mysql-pw@127.0.0.1:3306/rivus?ssl-mode=VERIFY_IDENTITY&ssl-ca={ca}"
            }
            Service::S3 => "http://127.0.0.1:8333",
            Service::SchemaRegistry => "http://127.0.0.1:8085/apis/ccompat/v7",
            Service::IcebergRest => "http://127.0.0.1:19120/iceberg",
        }
    }

    /// The address to use: the environment variable, or the default.
    pub fn url(self) -> String {
        std::env::var(self.env_var()).unwrap_or_else(|_| {
            let ca = tls_dir().join("ca.crt");
            self.default_url()
                .replace("{ca}", &ca.display().to_string())
        })
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
        None => repository().join("target/services/tls"),
    }
}

/// The checkout the tests run in: the nearest directory holding `dev/services` above the
/// running test's package (`CARGO_MANIFEST_DIR` as `cargo test` sets it when it runs the
/// test — not as it was when this crate was compiled: clones sharing one target directory
/// share this crate's build, and the clone that compiled it may be gone).
pub fn repository() -> std::path::PathBuf {
    let start = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    start
        .ancestors()
        .find(|d| d.join("dev/services").is_file())
        .map(std::path::Path::to_path_buf)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
}

/// Where a fault proxy in front of [`Service::KafkaProxied`] must listen — the address that
/// listener advertises: `RIVUS_KAFKA_PROXY_ADDR`, default `127.0.0.1:9097`.
pub fn kafka_proxy_addr() -> std::net::SocketAddr {
    env_or("RIVUS_KAFKA_PROXY_ADDR", "127.0.0.1:9097")
        .parse()
        .expect("RIVUS_KAFKA_PROXY_ADDR is host:port")
}

/// The SASL user with every right on the dev broker's SASL_SSL listener:
/// `RIVUS_KAFKA_SASL_USERNAME` / `RIVUS_KAFKA_SASL_PASSWORD` (defaults as `dev/services`).
pub fn kafka_sasl_user() -> (String, String) {
    (
        env_or("RIVUS_KAFKA_SASL_USERNAME", "rivus"),
        env_or("RIVUS_KAFKA_SASL_PASSWORD", "rivus-kafka-pw"),
    )
}

/// The SASL user allowed only `public-*` topics and groups: `RIVUS_KAFKA_GUEST_USERNAME` /
/// `RIVUS_KAFKA_GUEST_PASSWORD`.
pub fn kafka_guest_user() -> (String, String) {
    (
        env_or("RIVUS_KAFKA_GUEST_USERNAME", "guest"),
        env_or("RIVUS_KAFKA_GUEST_PASSWORD", "guest-kafka-pw"),
    )
}

/// The dev object store's bucket and keys: `RIVUS_S3_BUCKET`, `RIVUS_S3_ACCESS_KEY`,
/// `RIVUS_S3_SECRET_KEY` (defaults as `dev/services`).
pub fn s3_credentials() -> (String, String, String) {
    (
        env_or("RIVUS_S3_BUCKET", "rivus"),
        env_or("RIVUS_S3_ACCESS_KEY", "rivus"),
        env_or("RIVUS_S3_SECRET_KEY", "rivus-s3-secret"),
    )
}

/// The Python of `dev/python` (`RIVUS_PYTHON`) when it imports every module of `modules`
/// (`"pyarrow.parquet, fastavro"`): the independent readers and clients of the interop tests.
/// Fails the test saying how to get it (or skips, when skipping was asked for).
pub fn python_with(modules: &str) -> Option<String> {
    let name = format!("Python with {modules}");
    let python = External::new(&name, "RIVUS_PYTHON", "/nonexistent/python")
        .how_to_start("eval \"$(dev/python)\"")
        .probe(|p| {
            let ok = std::process::Command::new(p)
                .args(["-c", &format!("import {modules}")])
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                Ok(())
            } else {
                Err(format!("{modules} does not import"))
            }
        })
        .require();
    python
}

/// A request to the dev bucket's S3 API, signed by curl (SigV4, unsigned payload): its body.
/// `query` in sorted order (curl signs it as given); `put`: the body to store.
fn s3_request(endpoint: &str, path_and_query: &str, put: Option<&[u8]>) -> String {
    use std::io::Write;
    let (_, access, secret) = s3_credentials();
    let url = format!("{endpoint}/{path_and_query}");
    let mut cmd = std::process::Command::new("curl");
    cmd.args(["-sf", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user"])
        .arg(format!("{access}:{secret}"))
        .args(["-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", &url]);
    if put.is_some() {
        cmd.args(["-X", "PUT", "--data-binary", "@-"]);
    }
    let mut child = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("curl runs");
    let mut stdin = child.stdin.take().expect("piped");
    if let Some(body) = put {
        stdin.write_all(body).expect("writing to curl");
    }
    drop(stdin);
    let out = child.wait_with_output().expect("curl runs");
    assert!(
        out.status.success(),
        "S3 request {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `v` as a query value is signed: `/` encoded (the names here have no other reserved byte).
fn query_value(v: &str) -> String {
    v.replace('/', "%2F")
}

/// Multipart uploads in progress under `prefix` of the dev bucket, as the store's S3 API lists
/// them (`GET /bucket?prefix=…&uploads=`): what a crashed writer left open.
pub fn s3_open_uploads(endpoint: &str, prefix: &str) -> usize {
    let (bucket, _, _) = s3_credentials();
    s3_request(
        endpoint,
        &format!("{bucket}?prefix={prefix}&uploads="),
        None,
    )
    .matches("<UploadId>")
    .count()
}

/// The keys under `prefix` of the dev bucket (the first 1 000), as its S3 API lists them.
pub fn s3_keys(endpoint: &str, prefix: &str) -> Vec<String> {
    let (bucket, _, _) = s3_credentials();
    let prefix = query_value(prefix);
    s3_request(
        endpoint,
        &format!("{bucket}?list-type=2&prefix={prefix}"),
        None,
    )
    .split("<Key>")
    .skip(1)
    .filter_map(|k| k.split_once("</Key>").map(|(k, _)| k.to_owned()))
    .collect()
}

/// Stores `body` at `key` of the dev bucket.
pub fn s3_put(endpoint: &str, key: &str, body: &[u8]) {
    let (bucket, _, _) = s3_credentials();
    s3_request(endpoint, &format!("{bucket}/{key}"), Some(body));
}

fn env_or(var: &str, default: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| default.to_owned())
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

/// True when skipping tests whose service is missing was asked for explicitly
/// (`RIVUS_SKIP_SERVICES=1`) and this is not CI, where nothing is skipped.
pub fn skipping_allowed() -> bool {
    !in_ci()
        && matches!(
            std::env::var("RIVUS_SKIP_SERVICES").as_deref(),
            Ok("1") | Ok("true")
        )
}

/// Tells whether a server answers at an address: `Err` says why not.
pub type Probe<'a> = Box<dyn Fn(&str) -> std::result::Result<(), String> + 'a>;

/// A server a test needs, named by its connector's author: the environment variable holding
/// its address, the default address, and how to tell that it answers.
pub struct External<'a> {
    name: &'a str,
    env_var: &'a str,
    default: &'a str,
    how_to_start: &'a str,
    probe: Probe<'a>,
}

impl<'a> External<'a> {
    /// A server called `name` at the address in `env_var` (or `default`), answering when it
    /// accepts a TCP connection at the URL's `host:port`.
    pub fn new(name: &'a str, env_var: &'a str, default: &'a str) -> Self {
        External {
            name,
            env_var,
            default,
            how_to_start: "start it",
            probe: Box::new(tcp_probe),
        }
    }

    rivus_sdk::setters! {
        /// How to start it, for the message when it does not answer (e.g. `dev/services up x`).
        how_to_start(how: &'a str) => how_to_start;

        /// Another check that it answers (a protocol greeting, a health endpoint): gets the
        /// address, returns why it does not answer.
        probe(probe: impl Fn(&str) -> std::result::Result<(), String> + 'a)
            => probe = Box::new(probe);
    }

    /// The address, when the server answers. When it does not, the test fails with a message
    /// naming the server, the variable and how to start it — or, when skipping was asked for
    /// explicitly ([`skipping_allowed`]), a visible SKIP line and `None`.
    pub fn require(&self) -> Option<String> {
        let url = std::env::var(self.env_var).unwrap_or_else(|_| self.default.to_owned());
        let why = match (self.probe)(&url) {
            Ok(()) => return Some(url),
            Err(why) => why,
        };
        let msg = format!(
            "{} does not answer at {url} ({} = {url}): {why}; {}",
            self.name, self.env_var, self.how_to_start
        );
        if skipping_allowed() {
            eprintln!("SKIP (RIVUS_SKIP_SERVICES=1): {msg}");
            return None;
        }
        panic!("{msg} (RIVUS_SKIP_SERVICES=1 skips such tests outside CI)");
    }
}

/// Answers when `host:port` of `url` accepts a TCP connection within 2 s.
pub fn tcp_probe(url: &str) -> std::result::Result<(), String> {
    let hp = host_port(url);
    let addrs: Vec<_> = hp
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {hp}: {e}"))?
        .collect();
    if addrs
        .iter()
        .any(|a| TcpStream::connect_timeout(a, Duration::from_secs(2)).is_ok())
    {
        Ok(())
    } else {
        Err(format!("nothing accepts connections at {hp}"))
    }
}

/// Checks that `service` accepts TCP connections and returns its URL. When it does not, the
/// test fails naming the service and how to start it — unless skipping was asked for
/// explicitly ([`skipping_allowed`]): then a visible SKIP line and `None`.
pub fn require(service: Service) -> Option<String> {
    let name = format!("{service:?}");
    let default = service.url();
    let external = External::new(&name, service.env_var(), &default)
        .how_to_start("start it with `dev/services up`");
    external.require()
}

/// For a test that loops over several optional services: fails when none of them answered,
/// unless skipping was asked for explicitly — a loop over nothing is a silent pass.
pub fn require_any<T>(what: &str, found: Vec<T>) -> Vec<T> {
    if found.is_empty() && !skipping_allowed() {
        panic!("none of {what} answers; start them with `dev/services up`");
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_server_fails_naming_itself_and_its_variable() {
        let r = std::panic::catch_unwind(|| {
            External::new("thing", "RIVUS_TEST_NO_SUCH_VAR", "thing://127.0.0.1:1/")
                .how_to_start("start the thing")
                .require()
        });
        if skipping_allowed() {
            assert_eq!(r.ok().flatten(), None);
            return;
        }
        let msg = *r.unwrap_err().downcast::<String>().unwrap();
        assert!(
            msg.contains("thing does not answer at thing://127.0.0.1:1/"),
            "{msg}"
        );
        assert!(msg.contains("RIVUS_TEST_NO_SUCH_VAR"), "{msg}");
        assert!(msg.contains("start the thing"), "{msg}");
    }

    #[test]
    fn a_custom_probe_decides() {
        let url = External::new("thing", "RIVUS_TEST_NO_SUCH_VAR", "thing://x/")
            .probe(|u| {
                if u.starts_with("thing://") {
                    Ok(())
                } else {
                    Err("no".into())
                }
            })
            .require();
        assert_eq!(url.as_deref(), Some("thing://x/"));
    }

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
