//! Change data capture through the `rivus` command, against the real PostgreSQL, Kafka,
//! Elasticsearch and S3 store: the `postgres-cdc-to-kafka`, `postgres-cdc-to-elasticsearch` and
//! `postgres-cdc-to-delta` examples, and a PostgreSQL replica through the SQL sink. A writer inserts, updates and deletes while
//! the jobs run; the Kafka and replica jobs are killed with SIGKILL twice (once while the
//! snapshot is read, once while the stream runs) and started again from their checkpoints;
//! the replica job writes with two sink subtasks, changes keyed by the primary key (per-key
//! order kept across the task boundary).
//! Afterwards the topic, compacted by key, the replica (`EXCEPT` both ways) and the index all
//! equal the table.

#[path = "support/cdc.rs"]
mod cdc;
#[path = "support/delta.rs"]
mod delta;
#[path = "support/index.rs"]
mod index;
#[path = "support/topics.rs"]
mod topics;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Message};
use rivus_testkit::services::{
    python_with, require, s3_credentials, s3_keys, unique_name, Service,
};

use cdc::{
    count, example_job, newest_checkpoint, rivus, stop, table, table_rows, wait, wait_rows, writer,
    Cleanup,
};
use delta::{delta_rows, text};
use index::Index;
use serde_json::Value;
use sqlx::{Connection, PgConnection};

/// Rows of the captured table (`RIVUS_CDC_ROWS`; the full run takes 200 000).
fn rows() -> i64 {
    cdc::env_count("RIVUS_CDC_ROWS", 20_000)
}

/// The documents of index `name` as the table's rows by id (`body`, `amount`).
async fn index_rows(index: &Index, name: &str) -> BTreeMap<String, (String, String)> {
    index
        .docs(name, "id", &["body", "amount"])
        .await
        .into_iter()
        .map(|(id, mut f)| (id, (f.remove(0), f.remove(0))))
        .collect()
}

/// The committed records of a topic, compacted by key as they arrive: a key's latest value,
/// gone after a tombstone.
struct Compacted {
    rows: Arc<Mutex<BTreeMap<String, Value>>>,
    stop: Arc<AtomicBool>,
}

impl Compacted {
    fn start(kafka: &str, topic: &str) -> Self {
        let c: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", kafka)
            .set("group.id", unique_name("cdc-reader"))
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .set("isolation.level", "read_committed")
            .create()
            .unwrap();
        c.subscribe(&[topic]).unwrap();
        let (rows, stop) = (
            Arc::new(Mutex::new(BTreeMap::new())),
            Arc::new(AtomicBool::new(false)),
        );
        let (r, s) = (Arc::clone(&rows), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                if let Some(Ok(m)) = c.poll(Duration::from_millis(100)) {
                    let key = String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned();
                    match m.payload() {
                        None => {
                            r.lock().remove(&key);
                        }
                        Some(p) => {
                            r.lock().insert(key, serde_json::from_slice(p).unwrap());
                        }
                    }
                }
            }
        });
        Compacted { rows, stop }
    }

    fn len(&self) -> usize {
        self.rows.lock().len()
    }

    /// As the table's rows.
    fn as_table(&self) -> BTreeMap<String, (String, String)> {
        self.rows
            .lock()
            .iter()
            .map(|(k, v)| {
                let text = |f: &str| v[f].as_str().unwrap_or_default().to_owned();
                (k.clone(), (text("body"), text("amount")))
            })
            .collect()
    }
}

impl Drop for Compacted {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdc_to_kafka_survives_kill_nine_and_the_compacted_topic_equals_the_table() {
    let (Some(pg), Some(cdc), Some(kafka)) = (
        require(Service::Postgres),
        require(Service::PostgresCdc),
        require(Service::Kafka),
    ) else {
        return;
    };
    let n = rows();
    let (name, _cleanup) = Cleanup::table(&pg, "cdc_kafka", false);
    table(&pg, &name, n).await;
    topics::topic(&kafka, &name).await;
    let dir = tempfile::tempdir().unwrap();
    let file = example_job(
        dir.path(),
        "postgres-cdc-to-kafka",
        &name,
        &["orders_cdc", "rivus_orders_to_kafka", "orders-changes"],
    );
    let env = [
        ("RIVUS_PG_CDC_URL", cdc.as_str()),
        ("RIVUS_KAFKA_BOOTSTRAP", kafka.as_str()),
    ];
    let topic = Compacted::start(&kafka, &name);
    let (done, halt) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let writing = writer(
        pg.clone(),
        name.clone(),
        4_000,
        Arc::clone(&halt),
        Arc::clone(&done),
    );

    // Killed while the snapshot's rows arrive, then while the stream runs.
    let mut job = rivus(dir.path(), &file, "run1", &env);
    wait(
        &mut job,
        120,
        || topic.len() as i64 >= n / 3,
        || format!("{} keys", topic.len()),
    )
    .await;
    job.kill();
    // The second run is killed once the stream runs and a checkpoint after the snapshot
    // completed: a row inserted after the stream started is in the topic (committed).
    let mut job = rivus(dir.path(), &file, "run2", &env);
    let log = |l: &str| std::fs::read_to_string(dir.path().join(format!("{l}.log"))).unwrap();
    wait(
        &mut job,
        120,
        || log("run2").contains("postgres-cdc: streaming"),
        || log("run2"),
    )
    .await;
    let later = format!("{}", 1_000_000 + done.load(Ordering::SeqCst) + 20);
    wait(
        &mut job,
        120,
        || topic.rows.lock().contains_key(&later),
        || {
            let writes = done.load(Ordering::SeqCst);
            format!("{} keys, {writes} writes, no {later}", topic.len())
        },
    )
    .await;
    job.kill();
    // Changes while no job runs, then the last run.
    let at = done.load(Ordering::SeqCst);
    while done.load(Ordering::SeqCst) < at + 50 && !writing.is_finished() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut job = rivus(dir.path(), &file, "run3", &env);
    halt.store(true, Ordering::SeqCst);
    writing.await.unwrap();
    let want = table_rows(&pg, &name).await;
    wait(
        &mut job,
        120,
        || topic.as_table() == want,
        || {
            format!(
                "the compacted topic has {} keys, the table {} rows",
                topic.len(),
                want.len()
            )
        },
    )
    .await;
    stop(job, dir.path(), "run3");
    // `rivus check` reports the publication, the slot's position and the WAL it keeps.
    let out = Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["check", file.to_str().unwrap()])
        .current_dir(dir.path())
        .envs(env)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains(&format!(
            "publication `{name}` (1 table(s)); slot `{name}` at "
        )) && said.contains("bytes of WAL kept"),
        "{said}"
    );
    assert!(!said.contains("rivus-cdc-pw"), "{said}");
    assert!(
        !log("run3").contains("reading the snapshot again"),
        "killed while streaming, the job resumes the stream: {}",
        log("run3")
    );
    drop(topic);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdc_to_a_postgres_replica_survives_kill_nine_and_equals_the_table() {
    let (Some(pg), Some(cdc)) = (require(Service::Postgres), require(Service::PostgresCdc)) else {
        return;
    };
    let n = rows();
    let (name, _cleanup) = Cleanup::table(&pg, "cdc_replica", true);
    let replica = format!("{name}_copy");
    table(&pg, &name, n).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("job.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"{name}\"\nparallelism = 2\n\
             [checkpoint]\ninterval = \"300ms\"\ndir = \"state\"\n\
             [source]\ntype = \"postgres-cdc\"\nurl = \"{cdc}\"\npublication = \"{name}\"\n\
             slot = \"{name}\"\nenvelope = \"flat\"\n\
             [[transform]]\ntype = \"key\"\nfield = \"id\"\n\
             [sink]\ntype = \"jdbc\"\nurl = \"{pg}\"\ntable = \"{replica}\"\nmode = \"upsert\"\n\
             apply_changes = true\nexactly_once = true\n\
             setup = \"CREATE TABLE IF NOT EXISTS {replica} (id INT PRIMARY KEY, body TEXT, \
             amount NUMERIC(10,2), at TIMESTAMPTZ)\"\n"
        ),
    )
    .unwrap();
    let mut db = PgConnection::connect(&pg).await.unwrap();
    let (done, halt) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let writing = writer(
        pg.clone(),
        name.clone(),
        4_000,
        Arc::clone(&halt),
        Arc::clone(&done),
    );

    let mut job = rivus(dir.path(), &file, "run1", &[]);
    wait_rows(
        &mut job,
        &mut db,
        &replica,
        n / 3,
        "the replica did not fill",
    )
    .await;
    job.kill();
    let mut job = rivus(dir.path(), &file, "run2", &[]);
    let deadline = Instant::now() + Duration::from_secs(120);
    let from = done.load(Ordering::SeqCst);
    while done.load(Ordering::SeqCst) < from + 100 || count(&mut db, &replica).await < n - 100 {
        assert!(job.child().try_wait().unwrap().is_none(), "the job ended");
        assert!(Instant::now() < deadline, "the replica did not catch up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    job.kill();
    let job = rivus(dir.path(), &file, "run3", &[]);
    halt.store(true, Ordering::SeqCst);
    writing.await.unwrap();
    let differ = |a: &str, b: &str| {
        format!(
            "SELECT count(*) FROM (SELECT id, body, amount, at FROM {a} \
             EXCEPT SELECT id, body, amount, at FROM {b}) d"
        )
    };
    let (missing, extra) = (differ(&name, &replica), differ(&replica, &name));
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let m: i64 = sqlx::query_scalar(&missing)
            .fetch_one(&mut db)
            .await
            .unwrap();
        let e: i64 = sqlx::query_scalar(&extra).fetch_one(&mut db).await.unwrap();
        if m == 0 && e == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the replica differs: {m} rows missing or different, {e} extra"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop(job, dir.path(), "run3");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdc_to_elasticsearch_example_indexes_and_deletes_like_the_table() {
    let (Some(pg), Some(cdc), Some(es)) = (
        require(Service::Postgres),
        require(Service::PostgresCdc),
        require(Service::Elasticsearch),
    ) else {
        return;
    };
    let (name, _cleanup) = Cleanup::table(&pg, "cdc_es", false);
    table(&pg, &name, 6_000).await;
    let dir = tempfile::tempdir().unwrap();
    let file = example_job(
        dir.path(),
        "postgres-cdc-to-elasticsearch",
        &name,
        &["orders_es", "rivus_orders_to_es", "orders-live"],
    );
    let env = [
        ("RIVUS_PG_CDC_URL", cdc.as_str()),
        ("RIVUS_ES_URL", es.as_str()),
    ];
    let mut job = rivus(dir.path(), &file, "run", &env);
    let done = Arc::new(AtomicU64::new(0));
    writer(
        pg.clone(),
        name.clone(),
        300,
        Arc::default(),
        Arc::clone(&done),
    )
    .await
    .unwrap();
    let want = table_rows(&pg, &name).await;
    let index = Index::connect(&es).await;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let got = index_rows(&index, &name).await;
        if got == want {
            break;
        }
        assert!(job.child().try_wait().unwrap().is_none(), "the job ended");
        assert!(
            Instant::now() < deadline,
            "the index has {} documents, the table {} rows",
            got.len(),
            want.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    stop(job, dir.path(), "run");
}

/// `examples/postgres-cdc-fan-out.toml`: one change stream into a PostgreSQL replica and an
/// Elasticsearch index while a writer inserts, updates and deletes; the job is SIGKILLed once
/// mid-stream (after a checkpoint that followed the snapshot) and started again. Both copies
/// end equal to the table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdc_fanned_out_to_a_replica_and_an_index_survives_kill_nine_and_both_equal_the_table() {
    let (Some(pg), Some(cdc), Some(es)) = (
        require(Service::Postgres),
        require(Service::PostgresCdc),
        require(Service::Elasticsearch),
    ) else {
        return;
    };
    let (name, _cleanup) = Cleanup::table(&pg, "cdc_fan", true);
    let replica = format!("{name}_copy");
    table(&pg, &name, 5_000).await;
    let dir = tempfile::tempdir().unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/postgres-cdc-fan-out.toml");
    let text = std::fs::read_to_string(path)
        .unwrap()
        .replace(
            "name = \"postgres-cdc-fan-out\"",
            &format!("name = \"{name}\""),
        )
        .replace("interval = \"1s\"", "interval = \"300ms\"")
        .replace("target/examples/postgres-cdc-fan-out", "state")
        .replace("\"orders_fan_out\"", &format!("\"{name}\""))
        .replace("\"rivus_orders_fan_out\"", &format!("\"{name}\""))
        .replace("orders_replica", &replica)
        .replace("\"orders-live\"", &format!("\"{name}\""));
    let file = dir.path().join("job.toml");
    std::fs::write(&file, text).unwrap();
    let env = [
        ("RIVUS_PG_CDC_URL", cdc.as_str()),
        ("RIVUS_PG_URL", pg.as_str()),
        ("RIVUS_ES_URL", es.as_str()),
    ];
    let mut db = PgConnection::connect(&pg).await.unwrap();
    let (done, halt) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let writing = writer(
        pg.clone(),
        name.clone(),
        2_000,
        Arc::clone(&halt),
        Arc::clone(&done),
    );
    let mut job = rivus(dir.path(), &file, "run1", &env);
    let deadline = Instant::now() + Duration::from_secs(120);
    // Killed while streaming, once a checkpoint completed after the snapshot: the index is
    // written at least once, and a run killed before that keeps rows deleted between its
    // snapshot and the next run's (the CDC README's known limit).
    let log = || std::fs::read_to_string(dir.path().join("run1.log")).unwrap_or_default();
    let mut streaming = None;
    loop {
        if streaming.is_none() && log().contains("postgres-cdc: streaming") {
            streaming = Some(newest_checkpoint(dir.path()));
        }
        if streaming.is_some_and(|at| newest_checkpoint(dir.path()) > at)
            && count(&mut db, &replica).await >= 2_000
        {
            break;
        }
        assert!(
            job.child().try_wait().unwrap().is_none(),
            "the job ended: {}",
            log()
        );
        assert!(
            Instant::now() < deadline,
            "the replica did not fill: {}",
            log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    job.kill();
    let job = rivus(dir.path(), &file, "run2", &env);
    halt.store(true, Ordering::SeqCst);
    writing.await.unwrap();
    let want = table_rows(&pg, &name).await;
    let index = Index::connect(&es).await;
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let copy = table_rows(&pg, &replica).await;
        let got = index_rows(&index, &name).await;
        if copy == want && got == want {
            break;
        }
        let differ: Vec<_> = got
            .iter()
            .filter(|(k, v)| want.get(*k) != Some(v))
            .take(5)
            .map(|(k, v)| (k, v, want.get(k)))
            .collect();
        assert!(
            Instant::now() < deadline,
            "the table has {} rows; the replica {} ({} equal), the index {} ({} equal; \
             differing (id, index, table): {differ:?}); the second run's log:\n{}",
            want.len(),
            copy.len(),
            copy.iter().filter(|(k, v)| want.get(*k) == Some(v)).count(),
            got.len(),
            got.iter().filter(|(k, v)| want.get(*k) == Some(v)).count(),
            std::fs::read_to_string(dir.path().join("run2.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    stop(job, dir.path(), "run2");
}

/// The rows of the Delta table `uri` by id: `body`, `amount`, `note` (empty when null or not a
/// column yet).
fn delta_orders(py: &str, uri: &str, endpoint: &str) -> BTreeMap<String, Vec<String>> {
    delta_rows(py, uri, endpoint)
        .iter()
        .map(|r| {
            let cols = ["body", "amount", "note"].map(|k| text(r.get(k).unwrap_or(&Value::Null)));
            (text(&r["id"]), cols.to_vec())
        })
        .collect()
}

/// The table's rows as [`delta_orders`] shows them (`note` when the table has it).
async fn table_rows_with_note(pg: &str, name: &str, note: bool) -> BTreeMap<String, Vec<String>> {
    let mut c = PgConnection::connect(pg).await.unwrap();
    let note = if note { "coalesce(note, '')" } else { "''" };
    let rows: Vec<(String, String, String, String)> = sqlx::query_as(&format!(
        "SELECT id::text, coalesce(body, ''), coalesce(amount::text, ''), {note} FROM {name}"
    ))
    .fetch_all(&mut c)
    .await
    .unwrap();
    rows.into_iter()
        .map(|(id, b, a, n)| (id, vec![b, a, n]))
        .collect()
}

/// `examples/postgres-cdc-to-delta.toml`: the table's snapshot and a writer's inserts, updates
/// and deletes applied to a Delta table on S3; the job is SIGKILLed once after the snapshot's
/// first commits and once while the writer runs, and started again; then a column is added to
/// the source table and set on some rows. `deltalake` ends reading exactly the table's rows,
/// the added column included.
///
/// It runs alone (`.config/nextest.toml`): beside four other end-to-end tests on two cores the
/// job applied about 2 changes a second (one merge commit of 1–10 keys per checkpoint) and
/// missed the 120 s bound, where alone the whole test takes 5 s — a slowdown under CPU
/// contention still to explain (see the CDC README's open items).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdc_to_delta_example_survives_kill_nine_follows_an_added_column_and_equals_the_table() {
    let (Some(pg), Some(cdc), Some(endpoint), Some(py)) = (
        require(Service::Postgres),
        require(Service::PostgresCdc),
        require(Service::S3),
        python_with("deltalake, pyarrow"),
    ) else {
        return;
    };
    let (bucket, access, secret) = s3_credentials();
    let (name, _cleanup) = Cleanup::table(&pg, "cdc_delta", false);
    table(&pg, &name, 6_000).await;
    let dir = tempfile::tempdir().unwrap();
    let file = example_job(
        dir.path(),
        "postgres-cdc-to-delta",
        &name,
        &["orders_delta", "rivus_orders_to_delta"],
    );
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace("/orders-replica\"", &format!("/{name}\"")),
    )
    .unwrap();
    let env = [
        ("RIVUS_PG_CDC_URL", cdc.as_str()),
        ("RIVUS_S3_ENDPOINT", endpoint.as_str()),
        ("RIVUS_S3_BUCKET", bucket.as_str()),
        ("RIVUS_S3_ACCESS_KEY", access.as_str()),
        ("RIVUS_S3_SECRET_KEY", secret.as_str()),
        // Columns added, merges and restores in the logs a failure shows.
        (
            "RUST_LOG",
            "warn,rivus::status=info,rivus_connector_files=info,rivus_connector_delta=info",
        ),
    ];
    let uri = format!("s3://{bucket}/{name}");
    let versions = || {
        s3_keys(&endpoint, &format!("{name}/_delta_log/"))
            .iter()
            .filter(|k| k.ends_with(".json"))
            .count()
    };
    // Killed once the snapshot's first merge is in the table (version 0 is its creation).
    let mut job = rivus(dir.path(), &file, "run0", &env);
    let log = |label: &str| {
        std::fs::read_to_string(dir.path().join(format!("{label}.log"))).unwrap_or_default()
    };
    wait(&mut job, 90, || versions() >= 2, || log("run0")).await;
    job.kill();
    // Killed again while the writer runs, after the table gained versions.
    let mut job = rivus(dir.path(), &file, "run1", &env);
    let done = Arc::new(AtomicU64::new(0));
    let writing = writer(
        pg.clone(),
        name.clone(),
        300,
        Arc::default(),
        Arc::clone(&done),
    );
    let before = versions();
    wait(
        &mut job,
        90,
        || done.load(Ordering::SeqCst) >= 100 && versions() >= before + 3,
        || log("run1"),
    )
    .await;
    job.kill();
    let mut job = rivus(dir.path(), &file, "run2", &env);
    writing.await.unwrap();
    cdc::exec(
        &pg,
        &format!(
            "ALTER TABLE {name} ADD COLUMN note TEXT;
             UPDATE {name} SET note = 'note ' || id WHERE id % 10 = 0"
        ),
    )
    .await;
    let want = table_rows_with_note(&pg, &name, true).await;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let got = delta_orders(&py, &uri, &endpoint);
        if got == want {
            break;
        }
        assert!(
            job.child().try_wait().unwrap().is_none(),
            "the job ended: {}",
            log("run2")
        );
        if Instant::now() > deadline {
            let differ: Vec<_> = want
                .iter()
                .filter(|(k, v)| got.get(*k) != Some(v))
                .take(3)
                .map(|(k, v)| format!("{k}: table {v:?}, Delta {:?}", got.get(k)))
                .collect();
            let wrong = want.iter().filter(|(k, v)| got.get(*k) != Some(v)).count();
            panic!(
                "the Delta table has {} rows, the table {}; {wrong} differ, first {differ:?}; \
                 the last run's log ends:\n{}",
                got.len(),
                want.len(),
                cdc::log_tail(dir.path(), "run2", 40)
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    stop(job, dir.path(), "run2");
}
