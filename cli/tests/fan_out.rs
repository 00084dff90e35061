//! `examples/kafka-fan-out.toml` against the real servers: one Kafka topic read once into
//! Parquet on S3 and PostgreSQL (both exactly-once) and OpenSearch, the job SIGKILLed three
//! times mid-run and started again from its checkpoints. Afterwards each destination holds
//! every record exactly once: the table (no key) and the files counted row by row, the index
//! by id; no upload is left open.

#[path = "support/cdc.rs"]
mod cdc;
#[path = "support/index.rs"]
mod index;
#[path = "support/parquet.rs"]
mod parquet;
#[path = "support/run.rs"]
mod run;
#[path = "support/topics.rs"]
mod topics;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rivus_testkit::services::{
    python_with, require, s3_credentials, s3_open_uploads, unique_name, Service,
};
use run::Succeeds;
use sqlx::{Connection, Row};

/// `examples/kafka-fan-out.toml` with its topic, table, index, prefix and state made unique.
fn example(dir: &Path, unique: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/kafka-fan-out.toml");
    let text = std::fs::read_to_string(path)
        .unwrap()
        .replace("name = \"kafka-fan-out\"", &format!("name = \"{unique}\""))
        .replace("target/examples/kafka-fan-out", "state")
        .replace("topics = [\"orders\"]", &format!("topics = [\"{unique}\"]"))
        .replace("orders_fan_out", unique)
        .replace("orders-fan-out", unique)
        .replace("/orders-lake", &format!("/{unique}"))
        .replace("rivus-orders-fan-out", unique);
    let file = dir.join("fan-out.toml");
    std::fs::write(&file, text).unwrap();
    file
}

/// `n` generated orders written to `topic` (a transactional producer: each once).
fn produce(dir: &Path, kafka: &str, topic: &str, n: u64) {
    let file = dir.join("produce.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"produce-{topic}\"\n[checkpoint]\ninterval = \"1s\"\ndir = \"produce-state\"\n\
             [source]\ntype = \"generator\"\ncount = {n}\n\
             [sink]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopic = \"{topic}\"\n\
             exactly_once = true\n"
        ),
    )
    .unwrap();
    Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["run", file.to_str().unwrap()])
        .current_dir(dir)
        .succeeds();
}

/// Rows and distinct ids in `table`.
async fn table_counts(pg: &str, table: &str) -> (i64, i64) {
    let mut c = sqlx::PgConnection::connect(pg).await.unwrap();
    match sqlx::query(&format!("SELECT COUNT(*), COUNT(DISTINCT id) FROM {table}"))
        .fetch_one(&mut c)
        .await
    {
        Ok(r) => (r.get(0), r.get(1)),
        Err(_) => (0, 0),
    }
}

///
/// Over 60 s (62 s here): three destinations written and read back after each of the kills.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_fanned_out_to_s3_postgres_and_opensearch_survives_sigkill_exactly_once() {
    let (Some(kafka), Some(pg), Some(s3), Some(os), Some(py)) = (
        require(Service::Kafka),
        require(Service::Postgres),
        require(Service::S3),
        require(Service::OpenSearch3),
        python_with("pyarrow.parquet"),
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let unique = unique_name("fan_out").replace('-', "_");
    let n: u64 = 300_000;
    topics::topic(&kafka, &unique).await;
    produce(dir.path(), &kafka, &unique, n);
    let file = example(dir.path(), &unique);
    let (bucket, access, secret) = s3_credentials();
    let env = [
        ("RIVUS_KAFKA_BOOTSTRAP", kafka.as_str()),
        ("RIVUS_PG_URL", pg.as_str()),
        ("RIVUS_S3_ENDPOINT", s3.as_str()),
        ("RIVUS_S3_BUCKET", bucket.as_str()),
        ("RIVUS_S3_ACCESS_KEY", access.as_str()),
        ("RIVUS_S3_SECRET_KEY", secret.as_str()),
        ("RIVUS_OPENSEARCH3_URL", os.as_str()),
    ];
    let mut kills = 0;
    for round in 0..3 {
        let before = table_counts(&pg, &unique).await.0;
        let mut job = cdc::rivus(dir.path(), &file, &format!("run{round}"), &env);
        // Killed once a checkpoint more has committed: in the middle of the next one.
        let deadline = Instant::now() + Duration::from_secs(120);
        let ended = loop {
            if job.child().try_wait().unwrap().is_some() {
                break true;
            }
            if table_counts(&pg, &unique).await.0 > before {
                break false;
            }
            assert!(
                Instant::now() < deadline,
                "round {round}: nothing committed in 120 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        if ended {
            break;
        }
        job.kill();
        kills += 1;
    }
    assert!(kills >= 2, "killed mid-run {kills} times");
    let mut last = cdc::rivus(dir.path(), &file, "last", &env);
    let status = last.child().wait().unwrap();
    let log = std::fs::read_to_string(dir.path().join("last.log")).unwrap();
    assert!(status.success(), "{log}");
    assert!(log.contains("resumed     from checkpoint"), "{log}");

    let n = n as i64;
    assert_eq!(
        table_counts(&pg, &unique).await,
        (n, n),
        "PostgreSQL: every order once"
    );
    let found = parquet::read(&py, &s3, &unique);
    let mut ids = found.ids.clone();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(
        (found.ids.len(), ids.len()),
        (n as usize, n as usize),
        "S3: every order in exactly one committed file"
    );
    assert_eq!(s3_open_uploads(&s3, &unique), 0, "no upload left open");
    let index = index::Index::connect(&os).await;
    assert_eq!(
        index.count(&unique).await,
        n,
        "OpenSearch: every order by id"
    );
    cdc::exec(&pg, &format!("DROP TABLE IF EXISTS {unique}")).await;
}
