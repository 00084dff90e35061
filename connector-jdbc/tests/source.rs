//! The SQL source against PostgreSQL and MariaDB from `dev/services`, and SQLite files.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{databases, Db};
use rivus_connector_jdbc::{JdbcConfig, JdbcSource, Row};
use rivus_sdk::checkpoint::{CheckpointConfig, MemoryStateBackend};
use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::prelude::*;
use rivus_sdk::schema::SchemaError;
use rivus_testkit::services::unique_name;
use rivus_testkit::suite::{BoundedSourceSuite, SourceExternal, SourceSuite};
use rivus_testkit::{TransactionalSink, TxnStore};

fn v_of(row: Row) -> Result<String, SchemaError> {
    let id = row.get("id").map(|v| v.to_string()).unwrap_or_default();
    row.get("v")
        .and_then(|v| v.as_str())
        .map(str::to_owned)
        .ok_or_else(|| SchemaError::new("row", format!("id {id}"), "column `v` is not text"))
}

/// One table per split; the source polls them (continuous) or reads the first by id ranges
/// (bounded: the bounded suite writes every split into the one table).
struct TablesCtx {
    db: Db,
    tables: Vec<String>,
    bounded: bool,
}

#[async_trait]
impl SourceExternal for TablesCtx {
    type Source = JdbcSource<String>;

    async fn prepare(&mut self, splits: usize) -> Result<()> {
        let splits = if self.bounded { 1 } else { splits };
        self.tables = (0..splits)
            .map(|_| unique_name("src").replace('-', "_"))
            .collect();
        for t in &self.tables {
            self.db
                .exec(&format!(
                    "CREATE TABLE {t} (id {}, v VARCHAR(64))",
                    self.db.serial()
                ))
                .await;
        }
        Ok(())
    }

    async fn write(&mut self, split: usize, records: &[String]) -> Result<()> {
        let split = if self.bounded { 0 } else { split };
        for chunk in records.chunks(500) {
            let values: Vec<String> = chunk.iter().map(|r| format!("('{r}')")).collect();
            self.db
                .exec(&format!(
                    "INSERT INTO {} (v) VALUES {}",
                    self.tables[split],
                    values.join(", ")
                ))
                .await;
        }
        Ok(())
    }

    async fn write_bad(&mut self, split: usize) -> Result<bool> {
        self.db
            .exec(&format!(
                "INSERT INTO {} (v) VALUES (NULL)",
                self.tables[split]
            ))
            .await;
        Ok(true)
    }

    fn create_source(&self, _: usize, _: usize, policy: ErrorPolicy) -> JdbcSource<String> {
        let mut b = JdbcSource::builder(JdbcConfig::new(&self.db.url).tls(self.db.tls.clone()));
        for t in &self.tables {
            b = b.query(format!("SELECT id, v FROM {t}"));
        }
        b = if self.bounded {
            b.bounded(None, None, 5)
        } else {
            b.continuous(Duration::from_millis(50))
        };
        b.track_by(["id"])
            .fetch_size(100)
            .error_policy(policy)
            .build(v_of)
            .unwrap()
    }

    fn to_test_record(&self, record: &String) -> String {
        record.clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continuous_source_passes_the_conformance_suite_over_verified_tls() {
    for db in common::tls_servers() {
        passes_the_suite(db, 100, "over TLS").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continuous_source_passes_the_conformance_suite_on_every_database() {
    for db in databases() {
        passes_the_suite(db, 200, "").await;
    }
}

/// The continuous source over `db` passes the conformance suite (`per_split` records per
/// table); a failure names the database and `how` it was reached.
async fn passes_the_suite(db: Db, per_split: usize, how: &str) {
    let name = db.name;
    let mut suite = SourceSuite::new(TablesCtx {
        db,
        tables: vec![],
        bounded: false,
    })
    .records_per_split(per_split);
    if let Err(f) = suite.run_all().await {
        panic!("{name} {how}: {f}");
    }
}

async fn numbers_table(db: &Db, n: u64) -> String {
    let table = unique_name("nums").replace('-', "_");
    if db.is("mariadb") {
        db.exec("SET GLOBAL max_recursive_iterations = 1000000")
            .await;
    }
    db.exec(&format!(
        "CREATE TABLE {table} (id BIGINT PRIMARY KEY, v VARCHAR(20)); \
         INSERT INTO {table} (id, v) WITH RECURSIVE s(n) AS \
         (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < {n}) SELECT n, 'x' FROM s"
    ))
    .await;
    table
}

fn id_of(row: Row) -> Result<u64, SchemaError> {
    row.get("id")
        .and_then(|v| v.as_u64())
        .ok_or_else(|| SchemaError::new("row", "?", "no id"))
}

/// Ranges of the id split over 3 subtasks; every row once; positions checkpointed so a
/// cancelled run resumes without reading again what was committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_source_reads_every_row_once_and_resumes_from_its_checkpoint() {
    let n = 6000u64;
    for db in databases() {
        let table = numbers_table(&db, n).await;
        let source = JdbcSource::builder(&db.url)
            .table(&table)
            .track_by(["id"])
            .bounded(None, None, 7)
            .fetch_size(250)
            .build(id_of)
            .unwrap();
        let backend = MemoryStateBackend::new();
        let store = TxnStore::<u64>::new();
        let job = || {
            Pipeline::new(format!("bounded-{table}"))
                .checkpointing(CheckpointConfig::new(
                    Duration::from_millis(5),
                    Arc::new(backend.clone()),
                ))
                .batch_size(50)
                .channel_capacity(2)
                .source("sql", 3, |_| source.clone())
                .sink("txn", 1, |i| TransactionalSink::new(store.clone(), i))
                .unwrap()
        };
        // The first run is cancelled (no final checkpoint) once a checkpoint has committed.
        let first = job();
        let handle = first.handle();
        let running = tokio::spawn(first.run());
        while store.committed().is_empty() && !running.is_finished() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        handle.cancel();
        let _ = running.await.unwrap();
        let committed_first = store.committed().len() as u64;
        assert!(committed_first > 0, "{}: a checkpoint committed", db.name);
        let summary = job().run().await.unwrap();
        assert!(summary.restored_from.is_some(), "{}: restored", db.name);
        assert!(
            summary.records_read <= n - committed_first,
            "{}: did not read everything again ({})",
            db.name,
            summary.records_read
        );
        let mut got = store.committed();
        got.sort();
        assert!(
            got == (1..=n).collect::<Vec<_>>(),
            "{}: {} rows committed",
            db.name,
            got.len()
        );
    }
}

/// Rows tracked by a non-unique timestamp and a tie-breaking id: rows sharing a timestamp
/// across page boundaries are neither skipped nor repeated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tracking_columns_page_through_equal_timestamps() {
    for db in databases() {
        let table = timed_table(&db, "ts", "TIMESTAMPTZ").await;
        let rows: Vec<String> = (1..=95)
            .map(|i| format!("({i}, '2024-05-01 10:00:{:02}', 'r{i}')", (95 - i) / 10))
            .collect();
        db.exec(&format!("INSERT INTO {table} VALUES {}", rows.join(", ")))
            .await;
        let source = JdbcSource::builder(&db.url)
            .table(&table)
            .track_by(["at", "id"])
            .continuous(Duration::from_millis(20))
            .fetch_size(7)
            .build(v_of)
            .unwrap();
        let store = TxnStore::<String>::new();
        let job = Pipeline::new(format!("ts-{table}"))
            .checkpointing(CheckpointConfig::new(
                Duration::from_millis(20),
                Arc::new(MemoryStateBackend::new()),
            ))
            .source("sql", 1, |_| source.clone())
            .sink("txn", 1, |i| TransactionalSink::new(store.clone(), i))
            .unwrap();
        let handle = job.handle();
        let running = tokio::spawn(job.run());
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while store.committed().len() < 95 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        handle.stop();
        running.await.unwrap().unwrap();
        let got = store.committed();
        // Ordered by (at, id): the highest ids carry the earliest timestamps.
        let mut expected: Vec<(i32, i32)> = (1..=95).map(|i| ((95 - i) / 10, i)).collect();
        expected.sort();
        let expected: Vec<String> = expected.iter().map(|(_, i)| format!("r{i}")).collect();
        assert_eq!(got, expected, "{}", db.name);
    }
}

#[test]
fn source_configuration_is_checked() {
    let e = JdbcSource::builder("sqlite:x.db")
        .track_by(["id"])
        .build_json()
        .unwrap_err();
    assert!(e.to_string().contains("`query`"), "{e}");
    let e = JdbcSource::builder("sqlite:x.db")
        .table("t")
        .build_json()
        .unwrap_err();
    assert!(e.to_string().contains("`track_by`"), "{e}");
    let e = JdbcSource::builder("sqlite:x.db")
        .table("t")
        .track_by(["id"])
        .bounded(Some(10), Some(1), 2)
        .build_json()
        .unwrap_err();
    assert!(e.to_string().contains("`lower`"), "{e}");
    let e = JdbcSource::builder("redis://x")
        .table("t")
        .track_by(["id"])
        .build_json()
        .unwrap_err();
    assert!(e.to_string().contains("`url`"), "{e}");
}

/// A timestamp column split into ranges of Unix seconds across 2 subtasks, with the id as
/// tie-breaker: every row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_source_splits_a_time_column() {
    for db in databases() {
        let table = timed_table(&db, "times", "TIMESTAMP").await;
        // 1000 rows over about 4 hours, 4 rows per timestamp.
        let rows: Vec<String> = (0..1000)
            .map(|i| {
                let s = (i / 4) * 61;
                format!(
                    "({i}, '2024-05-01 {:02}:{:02}:{:02}', 'r{i}')",
                    10 + s / 3600,
                    (s / 60) % 60,
                    s % 60
                )
            })
            .collect();
        db.exec(&format!("INSERT INTO {table} VALUES {}", rows.join(", ")))
            .await;
        let source = JdbcSource::builder(&db.url)
            .table(&table)
            .track_by(["at", "id"])
            .bounded(None, None, 5)
            .fetch_size(64)
            .build(v_of)
            .unwrap();
        let store = TxnStore::<String>::new();
        Pipeline::new(format!("times-{table}"))
            .checkpointing(CheckpointConfig::new(
                Duration::from_millis(50),
                Arc::new(MemoryStateBackend::new()),
            ))
            .source("sql", 2, |_| source.clone())
            .sink("txn", 1, |i| TransactionalSink::new(store.clone(), i))
            .unwrap()
            .run()
            .await
            .unwrap();
        let mut got = store.committed();
        got.sort();
        let mut expected: Vec<String> = (0..1000).map(|i| format!("r{i}")).collect();
        expected.sort();
        assert!(got == expected, "{}: {} rows", db.name, got.len());
    }
}

/// The bounded-source suite on every database: ranges of the id, not whole splits, go to
/// the subtasks, so records of one split arrive in order only with one reader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_source_passes_the_bounded_source_suite_on_every_database() {
    for db in databases() {
        let mut suite = BoundedSourceSuite::new(TablesCtx {
            db: db.clone(),
            tables: vec![],
            bounded: true,
        })
        .records_per_split(300)
        .ordered(false);
        if let Err(f) = suite.run_all().await {
            panic!("{}: {f}", db.name);
        }
    }
}

/// A new table `(id, at, v)` whose `at` is a time: `pg_type` on PostgreSQL, `DATETIME`
/// elsewhere (SQLite keeps the text; the declared type tells the source it is a time).
async fn timed_table(db: &Db, prefix: &str, pg_type: &str) -> String {
    let table = unique_name(prefix).replace('-', "_");
    let ts_type = if db.is("postgres") {
        pg_type
    } else {
        "DATETIME"
    };
    db.exec(&format!(
        "CREATE TABLE {table} (id INT PRIMARY KEY, at {ts_type}, v VARCHAR(10))"
    ))
    .await;
    table
}
