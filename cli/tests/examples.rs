//! The example pipelines of `examples/`, run in a chain against the real servers:
//! generator → Kafka, Kafka → PostgreSQL, PostgreSQL → Elasticsearch; and the secured one,
//! Kafka over SASL_SSL → PostgreSQL over verified TLS. Each runs with `--http`: its status API
//! and dashboard page answer while it runs.

#[path = "support/http.rs"]
mod http;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::{free_port, request};

use rivus_testkit::services::{require, unique_name, Service};
use sqlx::Connection;

fn run_example(dir: &Path, name: &str, unique: &str, env: &[(&str, String)]) -> String {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../examples/{name}.toml"));
    let text = std::fs::read_to_string(&source)
        .unwrap()
        .replace("\"orders\"", &format!("\"{unique}\""))
        .replace("EXISTS orders (", &format!("EXISTS {unique} ("))
        .replace("rivus-orders-to-postgres", &format!("{unique}-group"))
        .replace("rivus-orders-to-s3", &format!("{unique}-s3-group"))
        .replace("rivus-orders-to-delta", &format!("{unique}-delta-group"))
        .replace(
            "rivus-orders-to-iceberg",
            &format!("{unique}-iceberg-group"),
        )
        .replace("\"lake.orders\"", &format!("\"lake.{unique}\""))
        .replace("/orders\"", &format!("/{unique}\""))
        .replace("/orders-delta\"", &format!("/{unique}-delta\""))
        // Tests run side by side: one job name (and so one set of transactional ids) each.
        .replace(
            &format!("name = \"{name}\""),
            &format!("name = \"{unique}-{name}\""),
        );
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(&file, text).unwrap();
    // Each example runs with the dashboard on: its status API answers while the job runs.
    let port = free_port();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rivus"));
    cmd.args(["run", file.to_str().unwrap()])
        .args(["--http", &format!("127.0.0.1:{port}")])
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().unwrap();
    let running = Arc::new(AtomicBool::new(true));
    let poller = {
        let running = Arc::clone(&running);
        std::thread::spawn(move || {
            let mut seen: Option<serde_json::Value> = None;
            while running.load(Ordering::Relaxed) {
                if let Some((200, body)) = request(port, "GET", "/api/status", None) {
                    seen = serde_json::from_str(&body).ok();
                    let page = request(port, "GET", "/", None);
                    if seen.is_some() && page.is_some_and(|(c, p)| c == 200 && p.contains("<svg")) {
                        break;
                    }
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            seen
        })
    };
    let out = child.wait_with_output().unwrap();
    running.store(false, Ordering::Relaxed);
    let status = poller.join().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{name}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status = status.unwrap_or_else(|| panic!("{name}: the status API never answered"));
    assert_eq!(status["job"], format!("{unique}-{name}"), "{status}");
    let doc: toml::Table = std::fs::read_to_string(&file).unwrap().parse().unwrap();
    for part in ["source", "sink"] {
        assert_eq!(
            status["pipeline"][part]["type"].as_str(),
            doc[part]["type"].as_str(),
            "{status}"
        );
    }
    assert!(status["stages"].is_array() && status["checkpoints"].is_object());
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_pipelines_move_orders_from_a_generator_to_elasticsearch_and_opensearch() {
    let (Some(kafka), Some(pg), Some(es), Some(os)) = (
        require(Service::Kafka),
        require(Service::Postgres),
        require(Service::Elasticsearch),
        require(Service::OpenSearch3),
    ) else {
        return;
    };
    let env = [
        ("RIVUS_KAFKA_BOOTSTRAP", kafka),
        ("RIVUS_PG_URL", pg.clone()),
        ("RIVUS_ES_URL", es.clone()),
        ("RIVUS_OPENSEARCH3_URL", os.clone()),
    ];
    let dir = tempfile::tempdir().unwrap();
    let unique = unique_name("orders").replace('-', "_");
    // Orders with n % 3 == 0 have status "new" and are filtered out on the way to PostgreSQL.
    let kept = (0..10_000).filter(|n| n % 3 != 0).count();

    let out = run_example(dir.path(), "generator-to-kafka", &unique, &env);
    assert!(out.contains("written     10000 records"), "{out}");
    assert!(out.contains("guarantee   exactly-once"), "{out}");

    let out = run_example(dir.path(), "kafka-to-postgres", &unique, &env);
    assert!(out.contains("read        10000 records"), "{out}");
    assert!(
        out.contains(&format!("written     {kept} records")),
        "{out}"
    );
    assert!(out.contains(&format!("now holds {kept} rows")), "{out}");
    let mut c = sqlx::PgConnection::connect(&pg).await.unwrap();
    let (rows, new): (i64, i64) = sqlx::query_as(&format!(
        "SELECT COUNT(*), COUNT(*) FILTER (WHERE status = 'new') FROM {unique}"
    ))
    .fetch_one(&mut c)
    .await
    .unwrap();
    assert_eq!((rows, new), (kept as i64, 0));

    let out = run_example(dir.path(), "postgres-to-elasticsearch", &unique, &env);
    assert!(
        out.contains(&format!("written     {kept} records")),
        "{out}"
    );
    assert_index_holds(&es, &unique, kept).await;

    // The OpenSearch twin: the same sink, `type = "opensearch"`.
    let out = run_example(dir.path(), "postgres-to-opensearch", &unique, &env);
    assert!(
        out.contains(&format!("written     {kept} records")),
        "{out}"
    );
    assert_index_holds(&os, &unique, kept).await;
}

/// `index` of the search server at `url` holds `kept` orders, order 7 with its renamed field.
async fn assert_index_holds(url: &str, index: &str, kept: usize) {
    let client = rivus_connector_es::EsClient::connect(&rivus_connector_es::EsConfig::new(url))
        .await
        .unwrap();
    let call = |method: reqwest::Method, path: String| {
        let client = client.clone();
        async move {
            client
                .json_ok("test", method, &path, &[], None)
                .await
                .unwrap()
        }
    };
    call(reqwest::Method::POST, format!("/{index}/_refresh")).await;
    let count = call(reqwest::Method::GET, format!("/{index}/_count")).await;
    assert_eq!(count["count"], kept as u64, "{url}: {count}");
    let doc = call(reqwest::Method::GET, format!("/{index}/_doc/7")).await;
    assert_eq!(doc["_source"]["customer"], "user-7", "{url}: {doc}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_secured_example_reads_kafka_over_sasl_ssl_into_postgres_over_tls() {
    let (Some(kafka), Some(sasl), Some(pg_tls)) = (
        require(Service::Kafka),
        require(Service::KafkaSasl),
        require(Service::PostgresTls),
    ) else {
        return;
    };
    let (user, password) = rivus_testkit::services::kafka_sasl_user();
    let ca = rivus_testkit::services::tls_dir().join("ca.crt");
    let env = [
        ("RIVUS_KAFKA_BOOTSTRAP", kafka),
        ("RIVUS_KAFKA_SASL_BOOTSTRAP", sasl),
        ("RIVUS_KAFKA_SASL_USERNAME", user),
        ("RIVUS_KAFKA_SASL_PASSWORD", password.clone()),
        ("RIVUS_TLS_CA", ca.display().to_string()),
        ("RIVUS_PG_TLS_URL", pg_tls.clone()),
    ];
    let dir = tempfile::tempdir().unwrap();
    let unique = unique_name("orders_tls").replace('-', "_");
    let out = run_example(dir.path(), "generator-to-kafka", &unique, &env);
    assert!(out.contains("written     10000 records"), "{out}");
    let out = run_example(dir.path(), "kafka-sasl-to-postgres-tls", &unique, &env);
    assert!(out.contains("read        10000 records"), "{out}");
    assert!(out.contains("now holds 10000 rows"), "{out}");
    assert!(!out.contains(&password), "{out}");
    let mut c = sqlx::PgConnection::connect(&pg_tls).await.unwrap();
    let (rows, tls): (i64, bool) = sqlx::query_as(&format!(
        "SELECT (SELECT COUNT(*) FROM {unique}), ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"
    ))
    .fetch_one(&mut c)
    .await
    .unwrap();
    assert_eq!((rows, tls), (10_000, true));
}

/// What an example that wrote the generated orders to the dev S3 store leaves its reader.
struct OnS3 {
    py: String,
    unique: String,
    endpoint: String,
    bucket: String,
    access: String,
    secret: String,
}

impl OnS3 {
    /// What the Python `script` prints, given `args`; fails the test when it fails.
    fn python(&self, script: &str, args: &[&str]) -> String {
        let run = Command::new(&self.py)
            .args(["-c", script])
            .args(args)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&run.stdout).into_owned();
        assert!(
            run.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&run.stderr)
        );
        text
    }
}

/// generator → Kafka → `example` (a sink on the dev S3 store), every order read; `None` when a
/// service, or Python with `modules`, is missing and skipping was asked for.
fn orders_onto_s3(example: &str, modules: &str, more: &[(&str, String)]) -> Option<OnS3> {
    let (Some(kafka), Some(endpoint), Some(py)) = (
        require(Service::Kafka),
        require(Service::S3),
        rivus_testkit::services::python_with(modules),
    ) else {
        return None;
    };
    let (bucket, access, secret) = rivus_testkit::services::s3_credentials();
    let mut env = vec![
        ("RIVUS_KAFKA_BOOTSTRAP", kafka),
        ("RIVUS_S3_ENDPOINT", endpoint.clone()),
        ("RIVUS_S3_BUCKET", bucket.clone()),
        ("RIVUS_S3_ACCESS_KEY", access.clone()),
        ("RIVUS_S3_SECRET_KEY", secret.clone()),
    ];
    env.extend_from_slice(more);
    let dir = tempfile::tempdir().unwrap();
    let unique = unique_name("orders").replace('-', "_");
    run_example(dir.path(), "generator-to-kafka", &unique, &env);
    let out = run_example(dir.path(), example, &unique, &env);
    assert!(out.contains("read        10000 records"), "{out}");
    Some(OnS3 {
        py,
        unique,
        endpoint,
        bucket,
        access,
        secret,
    })
}

/// generator → Kafka → `kafka-to-delta`: a Delta table on S3 created by the sink, read back by
/// `deltalake` (delta-rs) with every order once, the declared types, and the columns the orders
/// added (`schema_evolution`) typed from their values.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_delta_example_writes_a_table_on_s3_that_deltalake_reads() {
    let Some(at) = orders_onto_s3("kafka-to-delta", "deltalake, pyarrow", &[]) else {
        return;
    };
    let script = r#"
import os, sys
from deltalake import DeltaTable
uri, endpoint, access, secret = sys.argv[1:5]
t = DeltaTable(uri, storage_options={"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": access,
    "AWS_SECRET_ACCESS_KEY": secret, "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"})
data = t.to_pyarrow_table()
ids = data.column("id").to_pylist()
print(len(ids), len(set(ids)))
print(data.schema.field("ts").type, data.schema.field("amount").type,
      data.schema.field("status").type)
print(sum(1 for a in data.column("amount").to_pylist() if a is None))
# Out without the interpreter's teardown (delta-rs's runtime threads can abort it there).
sys.stdout.flush()
os._exit(0)
"#;
    let uri = format!("s3://{}/{}-delta", at.bucket, at.unique);
    let text = at.python(script, &[&uri, &at.endpoint, &at.access, &at.secret]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "10000 10000", "every order once: {text}");
    assert_eq!(lines[1], "timestamp[us, tz=UTC] double string", "{text}");
    assert_eq!(lines[2], "0", "every order holds its amount: {text}");
}

/// generator → Kafka → `kafka-to-iceberg`: an Iceberg table of the SQL catalog on PostgreSQL,
/// created by the sink, its files on S3, read back by pyiceberg through the same catalog with
/// every order once, the declared types, the columns the orders added, and one snapshot per
/// commit naming its writer and checkpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_iceberg_example_writes_a_table_that_pyiceberg_reads() {
    let Some(pg) = require(Service::Postgres) else {
        return;
    };
    let Some(at) = orders_onto_s3(
        "kafka-to-iceberg",
        "pyiceberg.catalog.sql, psycopg2, pyarrow",
        &[("RIVUS_PG_URL", pg.clone())],
    ) else {
        return;
    };
    let script = r#"
import sys
from pyiceberg.catalog.sql import SqlCatalog
uri, bucket, table, endpoint, access, secret = sys.argv[1:7]
catalog = SqlCatalog("rivus", uri=uri, warehouse=f"s3://{bucket}/warehouse",
    **{"s3.endpoint": endpoint, "s3.access-key-id": access, "s3.secret-access-key": secret,
       "s3.region": "us-east-1"})
t = catalog.load_table(table)
data = t.scan().to_arrow()
ids = data.column("id").to_pylist()
print(len(ids), len(set(ids)))
print(data.schema.field("ts").type, data.schema.field("amount").type,
      data.schema.field("status").type)
print(sum(1 for a in data.column("amount").to_pylist() if a is None))
commits = [c for s in t.snapshots() if s.summary.get("rivus.writers")
           for c in s.summary["rivus.writers"].split(",")]
print(len(commits), len(set(commits)))
"#;
    let uri = pg.replacen("postgres://", "postgresql+psycopg2://", 1);
    let table = format!("lake.{}", at.unique);
    let text = at.python(
        script,
        &[
            &uri,
            &at.bucket,
            &table,
            &at.endpoint,
            &at.access,
            &at.secret,
        ],
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "10000 10000", "every order once: {text}");
    assert_eq!(
        lines[1], "timestamp[us, tz=UTC] double string",
        "declared and added types: {text}"
    );
    assert_eq!(lines[2], "0", "every order holds its amount: {text}");
    let commits: Vec<usize> = lines[3].split(' ').map(|n| n.parse().unwrap()).collect();
    assert!(
        commits[0] >= 1 && commits[0] == commits[1],
        "each (writer, checkpoint) appended once: {text}"
    );
}

/// generator → Kafka → `kafka-to-s3-parquet`: Parquet files on S3 in Hive-style directories
/// by day and hour, read back by pyarrow (as a partitioned dataset) with every order once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_parquet_example_writes_hive_partitions_on_s3_that_pyarrow_reads() {
    let Some(at) = orders_onto_s3("kafka-to-s3-parquet", "pyarrow.parquet", &[]) else {
        return;
    };
    let script = r#"
import sys, pyarrow.dataset as ds, pyarrow.fs as pfs
endpoint, bucket, prefix, access, secret = sys.argv[1:6]
fs = pfs.S3FileSystem(endpoint_override=endpoint, access_key=access, secret_key=secret,
                      scheme="http", region="us-east-1")
d = ds.dataset(f"{bucket}/{prefix}", filesystem=fs, format="parquet", partitioning="hive",
               exclude_invalid_files=False)
t = d.to_table()
ids = t.column("id").to_pylist()
print(len(ids), len(set(ids)), len(d.files))
print(sorted(set(str(v) for v in t.column("hour").to_pylist()))[:3])
print(t.schema.field("ts").type, t.schema.field("amount").type)
"#;
    let host = at.endpoint.trim_start_matches("http://");
    let text = at.python(
        script,
        &[host, &at.bucket, &at.unique, &at.access, &at.secret],
    );
    let lines: Vec<&str> = text.lines().collect();
    let counts: Vec<usize> = lines[0].split(' ').map(|n| n.parse().unwrap()).collect();
    assert_eq!(counts[..2], [10_000, 10_000], "every order once: {text}");
    assert!(counts[2] >= 3, "a file per hour directory at least: {text}");
    assert!(lines[1].contains("'22'"), "hour partitions: {text}");
    assert_eq!(lines[2], "timestamp[us, tz=+00:00] double", "{text}");
}
