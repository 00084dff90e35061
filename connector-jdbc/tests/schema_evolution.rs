//! Tables chosen per record and schema evolution (`schema_evolution = basic`) against
//! PostgreSQL and MariaDB from `dev/services`, and SQLite files: tables created from the
//! source's column types or from JSON values, columns added mid-stream, exactly-once on
//! PostgreSQL across checkpoints, and records that cannot be placed sent to the error policy.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{databases, mariadb, postgres, Db};
use rivus_connector_jdbc::{JdbcSink, SchemaEvolution, WriteMode};
use rivus_sdk::checkpoint::{CheckpointConfig, MemoryStateBackend};
use rivus_sdk::error_policy::{ErrorPolicy, FileDeadLetterQueue};
use rivus_sdk::prelude::*;
use rivus_testkit::services::unique_name;
use rivus_testkit::{run_records_into, VecSource};
use serde_json::{json, Value};

/// A Debezium change of `table` carrying the column types a `postgres-cdc` source with
/// `column_types = true` gives (`email` from `with_email` on).
fn change(table: &str, op: &str, id: i64, amount: &str, email: Option<&str>) -> Value {
    let mut columns = vec![
        json!({"name": "id", "type": "integer", "key": true}),
        json!({"name": "amount", "type": "numeric(12,2)", "key": false}),
        json!({"name": "note", "type": "character varying(40)", "key": false}),
    ];
    let mut row = json!({"id": id, "amount": amount, "note": format!("n{id}")});
    if let Some(e) = email {
        columns.push(json!({"name": "email", "type": "text", "key": false}));
        row["email"] = json!(e);
    }
    let (before, after) = match op {
        "d" => (json!({"id": id}), Value::Null),
        _ => (Value::Null, row),
    };
    json!({"before": before, "after": after, "op": op,
           "source": {"schema": "public", "table": table}, "columns": columns})
}

/// The changes of two source tables, `orders` gaining a column `email` half-way.
fn changes() -> Vec<Value> {
    let mut out = Vec::new();
    for id in 1..=40 {
        out.push(change("orders", "c", id, &format!("{id}.50"), None));
        out.push(change("items", "c", id, "1.00", None));
    }
    for id in 1..=10 {
        out.push(change("orders", "u", id, "99.99", None));
        out.push(change("items", "d", id, "0", None));
    }
    for id in 41..=60 {
        out.push(change("orders", "c", id, "5.00", Some(&format!("u{id}@x"))));
    }
    out.push(change("orders", "u", 1, "1.25", Some("first@x")));
    out
}

async fn run_changes(db: &Db, template: &str, records: Vec<Value>, exactly_once: bool) {
    let sink = JdbcSink::builder(&db.url, template)
        .mode(WriteMode::Upsert)
        .apply_changes(true)
        .schema_evolution(SchemaEvolution::Basic)
        .batch_size(16)
        .guarantee(if exactly_once {
            DeliveryGuarantee::ExactlyOnce
        } else {
            DeliveryGuarantee::AtLeastOnce
        })
        .build_json()
        .unwrap();
    let splits = Arc::new(vec![records]);
    Pipeline::new(format!("evolve-{}", template.replace(['{', '}', '.'], "_")))
        .checkpointing(CheckpointConfig::new(
            Duration::from_millis(30),
            Arc::new(MemoryStateBackend::new()),
        ))
        .batch_size(8)
        .source("changes", 1, move |i| {
            VecSource::new(Arc::clone(&splits), i, 1).paced(8, Duration::from_millis(5))
        })
        .sink("replica", 1, move |_| sink.clone())
        .unwrap()
        .run()
        .await
        .unwrap();
}

/// `id:amount:email` of every row, in key order.
async fn rows(db: &Db, table: &str) -> Vec<String> {
    let concat = match db.name {
        "postgres" => {
            "CAST(id AS TEXT) || ':' || CAST(amount AS TEXT) || ':' || COALESCE(email, '-')"
        }
        // SQLite keeps a numeric(12,2) value as a REAL.
        "sqlite" => "id || ':' || printf('%.2f', amount) || ':' || COALESCE(email, '-')",
        _ => "CONCAT(id, ':', amount, ':', COALESCE(email, '-'))",
    };
    db.strings(&format!("SELECT {concat} FROM {table} ORDER BY id"))
        .await
}

fn expected_orders() -> Vec<String> {
    (1..=60)
        .map(|id| match id {
            1 => "1:1.25:first@x".to_owned(),
            2..=10 => format!("{id}:99.99:-"),
            11..=40 => format!("{id}:{id}.50:-"),
            _ => format!("{id}:5.00:u{id}@x"),
        })
        .collect()
}

/// The declared type of `column` of `table`, lower-case, as the catalog says it.
async fn column_type(db: &Db, table: &str, column: &str) -> String {
    let sql = match db.name {
        "postgres" => format!(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute \
             WHERE attrelid = '{table}'::regclass AND attname = '{column}'"
        ),
        "mariadb" => format!(
            "SELECT CAST(column_type AS CHAR) FROM information_schema.columns \
             WHERE table_schema = DATABASE() AND table_name = '{table}' \
             AND column_name = '{column}'"
        ),
        _ => format!("SELECT type FROM pragma_table_info('{table}') WHERE name = '{column}'"),
    };
    db.strings(&sql).await.join(",").to_lowercase()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_evolution_creates_each_tables_from_the_sources_types_and_adds_columns() {
    for db in databases() {
        let prefix = unique_name("se").replace('-', "_");
        run_changes(&db, &format!("{prefix}_{{source.table}}"), changes(), false).await;
        let orders = format!("{prefix}_orders");
        let items = format!("{prefix}_items");
        assert_eq!(rows(&db, &orders).await, expected_orders(), "{}", db.name);
        assert_eq!(db.count(&items).await, 30, "{}: deletes applied", db.name);
        let (amount, note) = match db.name {
            "mariadb" => ("decimal(12,2)", "varchar(40)"),
            _ => ("numeric(12,2)", "character varying(40)"),
        };
        assert_eq!(
            column_type(&db, &orders, "amount").await,
            amount,
            "{}",
            db.name
        );
        assert_eq!(column_type(&db, &orders, "note").await, note, "{}", db.name);
        // The key is the source's: a second run of the same changes leaves the same rows.
        run_changes(&db, &format!("{prefix}_{{source.table}}"), changes(), false).await;
        assert_eq!(rows(&db, &orders).await, expected_orders(), "{}", db.name);
        assert_eq!(db.count(&items).await, 30, "{}", db.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_evolution_exactly_once_on_postgres_adds_columns_inside_the_checkpoints() {
    let Some(db) = postgres() else { return };
    let prefix = unique_name("seeo").replace('-', "_");
    run_changes(&db, &format!("{prefix}_{{source.table}}"), changes(), true).await;
    let orders = format!("{prefix}_orders");
    assert_eq!(rows(&db, &orders).await, expected_orders());
    assert_eq!(db.count(&format!("{prefix}_items")).await, 30);
    let prepared = db
        .strings(&format!(
            "SELECT gid FROM pg_prepared_xacts WHERE gid LIKE '%{prefix}%'"
        ))
        .await;
    assert!(prepared.is_empty(), "left prepared: {prepared:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_evolution_from_json_values_waits_for_a_value_to_type_a_column() {
    for db in databases() {
        let table = unique_name("sej").replace('-', "_");
        let records = vec![
            json!({"id": 1, "name": "a", "score": 1.5, "ok": true, "later": null}),
            json!({"id": 2, "name": "b", "score": 2.5, "ok": false, "later": null}),
            json!({"id": 3, "name": "c", "score": 3.5, "ok": true, "later": 7}),
            json!({"id": 4, "name": "d", "tags": ["x"], "later": 8}),
        ];
        let sink = JdbcSink::builder(&db.url, &table)
            .schema_evolution(SchemaEvolution::Basic)
            .batch_size(1)
            .build_json()
            .unwrap();
        run_records_into(&format!("sej-{table}"), records, move |_| sink.clone())
            .await
            .unwrap();
        let text = if db.is("mariadb") { "CHAR" } else { "TEXT" };
        let later = db
            .strings(&format!(
                "SELECT COALESCE(CAST(later AS {text}), '-') FROM {table} ORDER BY id"
            ))
            .await;
        assert_eq!(later, ["-", "-", "7", "8"], "{}", db.name);
        let (int, float) = match db.name {
            "postgres" => ("bigint", "double precision"),
            "mariadb" => ("bigint(20)", "double"),
            _ => ("integer", "real"),
        };
        assert_eq!(column_type(&db, &table, "later").await, int, "{}", db.name);
        assert_eq!(
            column_type(&db, &table, "score").await,
            float,
            "{}",
            db.name
        );
        assert_eq!(db.count(&table).await, 4, "{}", db.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_without_a_table_go_to_the_error_policy_with_their_content() {
    for db in databases() {
        let prefix = unique_name("sem").replace('-', "_");
        db.exec(&format!(
            "CREATE TABLE {prefix}_a (id INT PRIMARY KEY, v INT)"
        ))
        .await;
        let records = vec![
            json!({"t": "a", "id": 1, "v": 1}),
            json!({"id": 2, "v": 2}),
            json!({"t": "missing", "id": 3, "v": 3}),
            json!({"t": "a", "id": 4, "v": 4}),
        ];
        let dir = tempfile::tempdir().unwrap();
        let dlq_path = dir.path().join("letters.jsonl");
        let dlq = Arc::new(FileDeadLetterQueue::open(&dlq_path).await.unwrap());
        let sink = JdbcSink::builder(&db.url, format!("{prefix}_{{t}}"))
            .ignore_unknown_fields(true)
            .error_policy(ErrorPolicy::DeadLetter(dlq))
            .build_json()
            .unwrap();
        run_records_into(&format!("sem-{prefix}"), records, move |_| sink.clone())
            .await
            .unwrap();
        let letters = FileDeadLetterQueue::read_all(&dlq_path).await.unwrap();
        let reasons: Vec<&str> = letters.iter().map(|l| l.reason.as_str()).collect();
        assert_eq!(letters.len(), 2, "{}: {reasons:?}", db.name);
        assert!(reasons[0].contains("field `t` is missing"), "{reasons:?}");
        assert!(
            reasons[1].contains(&format!("table `{prefix}_missing` does not exist")),
            "{reasons:?}"
        );
        let kept: Value = serde_json::from_slice(&letters[1].payload).unwrap();
        assert_eq!(kept["id"], 3, "the record is kept whole");
        assert_eq!(db.count(&format!("{prefix}_a")).await, 2, "{}", db.name);
    }
}

#[test]
fn schema_evolution_with_exactly_once_on_mariadb_is_refused_by_name() {
    let Some(db) = mariadb() else { return };
    let e = JdbcSink::builder(&db.url, "t")
        .mode(WriteMode::Upsert)
        .schema_evolution(SchemaEvolution::Basic)
        .guarantee(DeliveryGuarantee::ExactlyOnce)
        .build_json()
        .unwrap_err()
        .to_string();
    assert!(e.contains("`schema_evolution`") && e.contains("XA"), "{e}");
    let e = JdbcSink::builder(&db.url, "t_{a")
        .build_json()
        .unwrap_err()
        .to_string();
    assert!(e.contains("`table`") && e.contains("never closed"), "{e}");
}
