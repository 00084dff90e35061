//! The SQL sink against PostgreSQL and MariaDB from `dev/services`, and SQLite files.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{databases, postgres, servers, sqlite, tls_servers, Db};
use rivus_connector_jdbc::{JdbcConfig, JdbcSink, JdbcSinkState, PgMethod, RowChange, WriteMode};
use rivus_sdk::checkpoint::{CheckpointConfig, MemoryStateBackend};
use rivus_sdk::error_policy::{ErrorPolicy, FileDeadLetterQueue};
use rivus_sdk::prelude::*;
use rivus_sdk::Restored;
use rivus_testkit::services::unique_name;
use rivus_testkit::suite::{SinkExternal, SinkSuite};
use rivus_testkit::{run_records_into, VecSource};
use serde_json::{json, Value};

struct TableCtx {
    db: Db,
    table: String,
    exactly_once: bool,
}

#[async_trait]
impl SinkExternal for TableCtx {
    type Record = Value;
    type Sink = JdbcSink<Value>;

    async fn prepare(&mut self) -> Result<()> {
        self.table = unique_name("suite").replace('-', "_");
        self.db
            .exec(&format!(
                "CREATE TABLE {} (seq {}, v VARCHAR(64) NOT NULL CHECK (v <> 'reject-me'))",
                self.table,
                self.db.serial()
            ))
            .await;
        Ok(())
    }

    fn create_sink(&self, _: usize, _: usize, policy: ErrorPolicy) -> JdbcSink<Value> {
        JdbcSink::builder(
            JdbcConfig::new(&self.db.url).tls(self.db.tls.clone()),
            &self.table,
        )
        .columns(["v"])
        .batch_size(100)
        .guarantee(if self.exactly_once {
            DeliveryGuarantee::ExactlyOnce
        } else {
            DeliveryGuarantee::AtLeastOnce
        })
        .transaction_prefix(&self.table)
        .error_policy(policy)
        .build_json()
        .unwrap()
    }

    fn to_record(&self, test: &str) -> Value {
        json!({ "v": test })
    }

    fn bad_record(&self) -> Option<Value> {
        Some(json!({ "v": "reject-me" }))
    }

    async fn read_back(&self) -> Result<Vec<String>> {
        Ok(self
            .db
            .strings(&format!("SELECT v FROM {} ORDER BY seq", self.table))
            .await)
    }

    fn preserves_order(&self) -> bool {
        // Two batches in flight may commit in either order; one transaction at a time may not.
        self.exactly_once
    }
}

/// The testkit's sink suite on each of `dbs`, at the guarantee `exactly_once` asks for.
async fn certify(dbs: Vec<Db>, exactly_once: bool) {
    for db in dbs {
        let mut suite = SinkSuite::new(TableCtx {
            db: db.clone(),
            table: String::new(),
            exactly_once,
        })
        .records_per_split(200);
        if let Err(f) = suite.run_all().await {
            panic!("{}: {f}", db.name);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sink_passes_the_conformance_suite_at_least_once_on_every_database() {
    certify(databases(), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sink_passes_the_conformance_suite_exactly_once_on_postgres_and_mariadb() {
    certify(servers(), true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sink_passes_the_conformance_suite_over_verified_tls() {
    certify(tls_servers(), false).await;
    certify(tls_servers(), true).await;
}

/// `(op, id, qty)`: `w` writes, `d` deletes.
type Op = (char, i64, i64);

/// Runs `ops` through an upsert sink with checkpoints every 30 ms; with `exactly_once` the
/// source pauses 10 ms every 50 records, so that checkpoints (and prepared transactions) fall
/// between the writes.
async fn run_ops(db: &Db, table: &str, ops: Vec<Op>, exactly_once: bool) -> JobSummary {
    let splits = Arc::new(vec![ops]);
    let sink = JdbcSink::builder(&db.url, table)
        .mode(WriteMode::Upsert)
        .batch_size(64)
        .guarantee(if exactly_once {
            DeliveryGuarantee::ExactlyOnce
        } else {
            DeliveryGuarantee::AtLeastOnce
        })
        .transaction_prefix(table)
        .build(|(op, id, qty): &Op| {
            let row = json!({"id": id, "name": format!("n{id}"), "qty": qty});
            let Value::Object(row) = row else {
                unreachable!()
            };
            Ok(if *op == 'd' {
                RowChange::Delete(row)
            } else {
                RowChange::Write(row)
            })
        })
        .unwrap();
    Pipeline::new(format!("ops-{table}"))
        .checkpointing(CheckpointConfig::new(
            Duration::from_millis(30),
            Arc::new(MemoryStateBackend::new()),
        ))
        .batch_size(50)
        .source("ops", 1, move |i| {
            let source = VecSource::new(Arc::clone(&splits), i, 1);
            if exactly_once {
                source.paced(50, Duration::from_millis(10))
            } else {
                source
            }
        })
        .sink("table", 1, move |_| sink.clone())
        .unwrap()
        .run()
        .await
        .unwrap()
}

fn ops_and_expectation() -> (Vec<Op>, Vec<String>) {
    let mut ops: Vec<Op> = (1..=300).map(|i| ('w', i, i)).collect();
    // Rewrites (several of the same key in one batch), then deletes, then a re-insert.
    for round in 0..3 {
        ops.extend((1..=100).map(|i| ('w', i, i * 10 + round)));
    }
    ops.extend((250..=300).map(|i| ('d', i, 0)));
    ops.push(('w', 300, 3000));
    let mut expected: Vec<String> = (1..=249)
        .map(|i: i64| {
            let qty = if i <= 100 { i * 10 + 2 } else { i };
            format!("{i}:{qty}")
        })
        .collect();
    expected.push("300:3000".into());
    (ops, expected)
}

async fn table_state(db: &Db, table: &str) -> Vec<String> {
    table_state_of(db, table, "qty").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upserts_and_deletes_leave_the_last_state_on_every_database() {
    for db in databases() {
        let table = unique_name("upsert").replace('-', "_");
        db.exec(&format!(
            "CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(40), qty BIGINT)"
        ))
        .await;
        if db.is("mariadb") {
            db.exec("SET GLOBAL sql_mode = CONCAT(@@sql_mode, ',PIPES_AS_CONCAT')")
                .await;
        }
        let (ops, expected) = ops_and_expectation();
        let summary = run_ops(&db, &table, ops.clone(), false).await;
        assert_eq!(summary.records_written, ops.len() as u64, "{}", db.name);
        let got = table_state(&db, &table).await;
        assert_eq!(got.len(), expected.len(), "{}: row count", db.name);
        assert!(got == expected, "{}: table differs", db.name);
    }
}

/// Consecutive checkpoints upsert the same keys: checkpoint N+1's writes wait on the row
/// locks of N's prepared transaction until it is committed, which must happen off the sink's
/// own task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_upserts_of_the_same_keys_across_checkpoints_do_not_deadlock() {
    for db in servers() {
        upserts_of_the_same_keys(&db).await;
    }
}

/// Checkpoint N+1's upserts wait on the row locks of N's prepared transaction until it is
/// committed: that commit must not depend on the blocked sink task.
async fn upserts_of_the_same_keys(db: &Db) {
    let table = unique_name("eo_upsert").replace('-', "_");
    db.exec(&format!(
        "CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(40), qty BIGINT)"
    ))
    .await;
    let mut ops: Vec<Op> = Vec::new();
    for round in 0..200 {
        ops.extend((1..=10).map(|i| ('w', i, round)));
    }
    let run = run_ops(db, &table, ops, true);
    let summary = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{}: the job did not finish (a lock wait on its own prepared transaction?)",
                db.name
            )
        });
    assert!(
        summary.checkpoints_completed >= 5,
        "{}: {summary:?}",
        db.name
    );
    let expected: Vec<String> = (1..=10).map(|i| format!("{i}:199")).collect();
    assert_eq!(table_state(db, &table).await, expected, "{}", db.name);
    let left = prepared_left(db, &table).await;
    assert!(
        left.is_empty(),
        "{}: prepared transactions left: {left:?}",
        db.name
    );
}

/// The prepared (PostgreSQL) or XA (MariaDB) transactions of `table`'s sink still open.
async fn prepared_left(db: &Db, table: &str) -> Vec<String> {
    let ours = format!("{table}:");
    if db.is("mariadb") {
        let all = db.xa_ids().await;
        return all.into_iter().filter(|x| x.starts_with(&ours)).collect();
    }
    db.strings(&format!(
        "SELECT gid FROM pg_prepared_xacts WHERE gid LIKE '{table}:%'"
    ))
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_rows_go_to_the_error_policy_and_the_rest_is_kept() {
    for db in databases() {
        let table = unique_name("refused").replace('-', "_");
        db.exec(&format!(
            "CREATE TABLE {table} (id INT PRIMARY KEY, qty INT NOT NULL, \
             code VARCHAR(8) CHECK (length(code) <= 3))"
        ))
        .await;
        let rows: Vec<Value> = (1..=50)
            .map(|i| match i {
                30 => json!({"id": i, "qty": null, "code": "ok"}),
                40 => json!({"id": i, "qty": i, "code": "toolong"}),
                45 => json!({"id": i, "qty": "abc", "code": "ok"}),
                _ => json!({"id": i, "qty": i, "code": "ok"}),
            })
            .chain([json!({"id": 20, "qty": 1, "code": "dup"})])
            .chain([json!({"id": 51, "qty": 51, "extra": 1})])
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let dlq_path = dir.path().join("letters.jsonl");
        let dlq = Arc::new(FileDeadLetterQueue::open(&dlq_path).await.unwrap());
        let sink = JdbcSink::builder(&db.url, &table)
            .batch_size(100)
            .error_policy(ErrorPolicy::DeadLetter(dlq))
            .build_json()
            .unwrap();
        run_records_into(&format!("refused-{table}"), rows, move |_| sink.clone())
            .await
            .unwrap();
        let letters = FileDeadLetterQueue::read_all(&dlq_path).await.unwrap();
        let mut by_id: Vec<(String, String)> = letters
            .iter()
            .map(|l| (l.position.clone(), l.reason.clone()))
            .collect();
        by_id.sort();
        assert_eq!(letters.len(), 5, "{}: {by_id:?}", db.name);
        let find = |id: &str| {
            letters
                .iter()
                .find(|l| l.position.contains(&format!("\"id\":{id}")))
                .unwrap_or_else(|| panic!("{}: no letter for id {id}: {by_id:?}", db.name))
        };
        let l = find("30");
        assert!(
            l.reason.to_lowercase().contains("qty"),
            "{}: {}",
            db.name,
            l.reason
        );
        let l = find("45");
        assert!(
            l.reason.contains("column `qty`: expected an integer"),
            "{}: {}",
            db.name,
            l.reason
        );
        let l = find("40");
        assert!(l.position.contains(&table), "{}", l.position);
        let l = find("20");
        let payload: Value = serde_json::from_slice(&l.payload).unwrap();
        assert_eq!(
            payload["code"], "dup",
            "{}: the refused record is kept",
            db.name
        );
        let l = find("51");
        assert!(
            l.reason.contains("field `extra`"),
            "{}: {}",
            db.name,
            l.reason
        );
        assert_eq!(
            db.count(&table).await,
            47,
            "{}: the other rows are written",
            db.name
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_methods_write_every_type() {
    let Some(db) = postgres() else { return };
    for method in [PgMethod::Values, PgMethod::Unnest, PgMethod::Copy] {
        let table = unique_name("types").replace('-', "_");
        db.exec(&format!(
            "CREATE TABLE {table} (id BIGINT PRIMARY KEY, at TIMESTAMPTZ, amount NUMERIC(10,2), \
             doc JSONB, flag BOOLEAN, raw BYTEA, note TEXT, f DOUBLE PRECISION, small SMALLINT)"
        ))
        .await;
        let rows: Vec<Value> = (0..3000)
            .map(|i| {
                json!({
                    "id": i,
                    "at": format!("2024-01-01T00:00:{:02}Z", i % 60),
                    "amount": format!("{}.25", i),
                    "doc": {"k": format!("v{i}"), "n": i},
                    "flag": i % 2 == 0,
                    "raw": "a,\"b\"\n",
                    "note": if i % 3 == 0 { Value::Null } else { json!(format!("say \"{i}\", ok")) },
                    "f": i as f64 / 4.0,
                    "small": i % 100,
                })
            })
            .collect();
        let sink = JdbcSink::builder(&db.url, &table)
            .postgres_method(method)
            .batch_size(1000)
            .build_json()
            .unwrap();
        run_records_into(&format!("types-{table}"), rows, move |_| sink.clone())
            .await
            .unwrap();
        assert_eq!(db.count(&table).await, 3000, "{method:?}");
        let row = db
            .strings(&format!(
                "SELECT concat_ws('|', to_char(at AT TIME ZONE 'UTC', 'SS'), amount, doc->>'k', \
                 flag, encode(raw, 'escape'), coalesce(note, 'NULL'), f, small) \
                 FROM {table} WHERE id IN (7, 9) ORDER BY id"
            ))
            .await;
        assert_eq!(
            row,
            [
                "07|7.25|v7|f|a,\"b\"\n|say \"7\", ok|1.75|7",
                "09|9.25|v9|f|a,\"b\"\n|NULL|2.25|9"
            ],
            "{method:?}"
        );
    }
}

/// Prepared transactions (PostgreSQL) and prepared XA transactions (MariaDB, their sessions
/// gone) of a crashed run are committed when the restored checkpoint lists them and rolled
/// back otherwise; after a change of parallelism each is resolved by one subtask.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_transactions_of_an_earlier_run_are_committed_or_rolled_back() {
    for db in servers() {
        recovers_prepared_transactions(&db).await;
    }
}

async fn recovers_prepared_transactions(db: &Db) {
    let table = unique_name("recover").replace('-', "_");
    db.exec(&format!("CREATE TABLE {table} (id INT PRIMARY KEY)"))
        .await;
    let prepare = |id: i32, gid: &str| match db.name {
        "mariadb" => format!(
            "XA START '{gid}'; INSERT INTO {table} VALUES ({id}); XA END '{gid}'; \
             XA PREPARE '{gid}'"
        ),
        _ => format!("BEGIN; INSERT INTO {table} VALUES ({id}); PREPARE TRANSACTION '{gid}'"),
    };
    // A crashed run left checkpoint 5 (stored) and 6 (never stored) prepared, and an old
    // subtask 3 of a run with more parallelism left checkpoint 5 prepared too. (On MariaDB the
    // numbers are the XA ids' own, chosen at the transaction's start.)
    for (id, gid) in [(1, "0:5"), (2, "0:6"), (3, "3:5"), (4, "1:5")] {
        db.exec(&prepare(id, &format!("{table}:{gid}"))).await;
    }
    let mut sink = JdbcSink::builder(&db.url, &table)
        .guarantee(DeliveryGuarantee::ExactlyOnce)
        .transaction_prefix(&table)
        .build_json()
        .unwrap();
    let state = |gids: &[&str]| {
        Some(JdbcSinkState {
            prepared: gids.iter().map(|g| format!("{table}:{g}")).collect(),
        })
    };
    // Subtask 0 of 3 now; the old run had 4 subtasks. Subtask 0 owns old 0 and 3.
    let restored = Restored::from_checkpoint(
        "table",
        0,
        3,
        5,
        vec![state(&["0:5"]), state(&["1:5"]), None, state(&["3:5"])],
    );
    sink.initialize_state(restored).await.unwrap();
    sink.open(&RuntimeContext::new("job", "table", 0, 3, Some(5)))
        .await
        .unwrap();
    sink.close().await.unwrap();
    let ids: Vec<String> = db
        .strings(&format!(
            "SELECT CAST(id AS CHAR(10)) FROM {table} ORDER BY id"
        ))
        .await
        .iter()
        .map(|s| s.trim().to_owned())
        .collect();
    assert_eq!(
        ids,
        ["1", "3"],
        "{}: 0:5 and 3:5 committed, 0:6 rolled back",
        db.name
    );
    assert_eq!(
        prepared_left(db, &table).await,
        [format!("{table}:1:5")],
        "{}: subtask 1's is left to subtask 1",
        db.name
    );
    let rollback = match db.name {
        "mariadb" => format!("XA ROLLBACK '{table}:1:5'"),
        _ => format!("ROLLBACK PREPARED '{table}:1:5'"),
    };
    db.exec(&rollback).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn positional_values_follow_the_configured_columns() {
    let db = sqlite();
    db.exec("CREATE TABLE p (id INTEGER PRIMARY KEY, name TEXT, qty INTEGER)")
        .await;
    let rows = vec![
        vec![json!(1), json!(5)],
        vec![json!(2)],
        vec![json!(3), json!("many")],
        vec![json!(4), json!("7")],
    ];
    let dir = tempfile::tempdir().unwrap();
    let dlq_path = dir.path().join("letters.jsonl");
    let dlq = Arc::new(FileDeadLetterQueue::open(&dlq_path).await.unwrap());
    let sink = JdbcSink::builder(&db.url, "p")
        .columns(["id", "qty"])
        .error_policy(ErrorPolicy::DeadLetter(dlq))
        .build(|v: &Vec<Value>| Ok(RowChange::WriteValues(v.clone())))
        .unwrap();
    run_records_into("positional", rows, move |_| sink.clone())
        .await
        .unwrap();
    let got = db
        .strings("SELECT CAST(id AS TEXT) || ':' || CAST(qty AS TEXT) FROM p ORDER BY id")
        .await;
    assert_eq!(got, ["1:5", "4:7"]);
    let letters = FileDeadLetterQueue::read_all(&dlq_path).await.unwrap();
    let reasons: Vec<&str> = letters.iter().map(|l| l.reason.as_str()).collect();
    assert_eq!(letters.len(), 2, "{reasons:?}");
    assert!(
        reasons[0].contains("1 values for 2 columns (id, qty)"),
        "{reasons:?}"
    );
    assert!(
        reasons[1].contains("column `qty`: expected an integer"),
        "{reasons:?}"
    );
    let payload: Value = serde_json::from_slice(&letters[1].payload).unwrap();
    assert_eq!(payload, json!({"id": 3, "qty": "many"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_of_your_own_runs_per_record_with_bound_fields() {
    for db in databases() {
        let table = unique_name("stmt").replace('-', "_");
        db.exec(&format!(
            "CREATE TABLE {table} (id INT PRIMARY KEY, total INT NOT NULL)"
        ))
        .await;
        let sql = match db.name {
            "postgres" => format!(
                "INSERT INTO {table} (id, total) VALUES ($1, $2) \
                 ON CONFLICT (id) DO UPDATE SET total = {table}.total + excluded.total"
            ),
            "mariadb" => format!(
                "INSERT INTO {table} (id, total) VALUES (?, ?) \
                 ON DUPLICATE KEY UPDATE total = total + VALUES(total)"
            ),
            _ => format!(
                "INSERT INTO {table} (id, total) VALUES (?, ?) \
                 ON CONFLICT (id) DO UPDATE SET total = total + excluded.total"
            ),
        };
        let mut rows: Vec<Value> = (0..100)
            .map(|i| json!({"id": i % 10, "amount": 1}))
            .collect();
        rows.insert(50, json!({"id": 3, "amount": null}));
        let sink = JdbcSink::with_statement(&db.url, sql, ["id", "amount"])
            .batch_size(16)
            .error_policy(ErrorPolicy::Skip)
            .build_json()
            .unwrap();
        run_records_into(&format!("stmt-{table}"), rows, move |_| sink.clone())
            .await
            .unwrap();
        let got = table_state_of(&db, &table, "total").await;
        let expected: Vec<String> = (0..10).map(|i| format!("{i}:10")).collect();
        assert_eq!(got, expected, "{}", db.name);
    }
}

async fn table_state_of(db: &Db, table: &str, column: &str) -> Vec<String> {
    db.strings(&format!(
        "SELECT CAST(id AS CHAR(12)) || ':' || CAST({column} AS CHAR(12)) FROM {table} ORDER BY id"
    ))
    .await
    .into_iter()
    .map(|s| s.replace(' ', ""))
    .collect()
}

/// The job fails with rows written into the open transaction and no checkpoint taken: closing
/// rolls them back and ends (the open transaction's connection must not keep the pool from
/// closing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_sink_closes_after_a_failure_with_an_open_transaction() {
    let Some(db) = postgres() else { return };
    let table = unique_name("eo_close").replace('-', "_");
    db.exec(&format!("CREATE TABLE {table} (id BIGINT NOT NULL)"))
        .await;
    // Record 300 is refused (NULL id) under the default policy: the sink itself fails.
    let sink = JdbcSink::builder(&db.url, &table)
        .guarantee(DeliveryGuarantee::ExactlyOnce)
        .transaction_prefix(&table)
        .batch_size(10)
        .build(|n: &u64| {
            let mut row = rivus_connector_jdbc::Row::new();
            let id = if *n == 300 { Value::Null } else { (*n).into() };
            row.insert("id".into(), id);
            Ok(RowChange::Write(row))
        })
        .unwrap();
    let splits = Arc::new(vec![(0..1000u64).collect::<Vec<_>>()]);
    let job = Pipeline::new(format!("eo-close-{table}"))
        .checkpointing(CheckpointConfig::new(
            Duration::from_secs(30),
            Arc::new(MemoryStateBackend::new()),
        ))
        .batch_size(10)
        .source("n", 1, |i| {
            VecSource::new(Arc::clone(&splits), i, 1).paced(10, Duration::from_millis(5))
        })
        .sink("table", 1, move |_| sink.clone())
        .unwrap();
    let result = tokio::time::timeout(Duration::from_secs(60), job.run())
        .await
        .expect("the failed job ended (the sink closed)");
    let e = result
        .expect_err("the refused record failed the job")
        .to_string();
    assert!(e.contains("null value"), "{e}");
    assert_eq!(
        db.count(&table).await,
        0,
        "unprepared rows were rolled back"
    );
}
