//! Key changes applied by the SQL sink (`apply_changes`): an update that moved a row to a new
//! key and did not carry a large value (an unchanged TOASTed column) moves the row, keeping
//! the value — on every database, at-least-once and exactly-once, with the move alone in a
//! batch, among other changes of both keys, and chained (a key moved twice). With several sink
//! subtasks no statement can move a row between them: both halves go to the error policy.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::{databases, postgres, Db};
use rivus_connector_jdbc::{JdbcSink, WriteMode};
use rivus_sdk::change::{MOVED_FROM, MOVED_TO, UNCHANGED};
use rivus_sdk::checkpoint::{CheckpointConfig, MemoryStateBackend};
use rivus_sdk::error_policy::{ErrorPolicy, FileDeadLetterQueue};
use rivus_sdk::prelude::*;
use rivus_testkit::services::unique_name;
use rivus_testkit::VecSource;
use serde_json::{json, Value};

/// A Debezium envelope of table `t`.
fn envelope(op: &str, before: Value, after: Value) -> Value {
    json!({"op": op, "before": before, "after": after,
           "source": {"schema": "public", "table": "t"}})
}

/// The changes a writer makes, and the table they leave (id → (big, n)). Rows 1..=40 with
/// their `big`; then updates of `n` that leave `big` unchanged, key changes of rows 1..=20 to
/// 1000+id (`big` unchanged: the pair names both keys), row 1000+1 moved again to 2001, a
/// moved key reused by a new row, updates of moved rows, and a delete of a moved row.
fn changes() -> (Vec<Value>, BTreeMap<i64, (String, i64)>) {
    let mut model: BTreeMap<i64, (String, i64)> = BTreeMap::new();
    let mut out = Vec::new();
    let big = |id: i64| format!("big-{id}-").repeat(50);
    for id in 1..=40 {
        out.push(envelope(
            "r",
            Value::Null,
            json!({"id": id, "big": big(id), "n": 0}),
        ));
        model.insert(id, (big(id), 0));
    }
    let update = |out: &mut Vec<Value>, model: &mut BTreeMap<i64, (String, i64)>, id: i64| {
        let n = model[&id].1 + 1;
        out.push(envelope(
            "u",
            json!({"id": id}),
            json!({"id": id, "big": UNCHANGED, "n": n}),
        ));
        model.get_mut(&id).unwrap().1 = n;
    };
    let moved = |out: &mut Vec<Value>, model: &mut BTreeMap<i64, (String, i64)>, from, to| {
        let (big, n) = model.remove(&from).unwrap();
        let mut gone = envelope(
            "d",
            json!({"id": from, "big": null, "n": null}),
            Value::Null,
        );
        gone[MOVED_TO] = json!({"id": to});
        let mut into = envelope(
            "c",
            Value::Null,
            json!({"id": to, "big": UNCHANGED, "n": n + 1}),
        );
        into[MOVED_FROM] = json!({"id": from});
        out.extend([gone, into]);
        model.insert(to, (big, n + 1));
    };
    for id in 1..=40 {
        update(&mut out, &mut model, id);
    }
    for id in 1..=20 {
        moved(&mut out, &mut model, id, 1000 + id);
        if id % 3 == 0 {
            update(&mut out, &mut model, 1000 + id);
        }
    }
    moved(&mut out, &mut model, 1001, 2001);
    // Key 2 is free again: a new row takes it.
    out.push(envelope(
        "c",
        Value::Null,
        json!({"id": 2, "big": "fresh", "n": 7}),
    ));
    model.insert(2, ("fresh".into(), 7));
    out.push(envelope(
        "d",
        json!({"id": 1005, "big": null, "n": null}),
        Value::Null,
    ));
    model.remove(&1005);
    for id in [2001, 1010, 30] {
        update(&mut out, &mut model, id);
    }
    (out, model)
}

async fn rows_of(db: &Db, table: &str) -> BTreeMap<i64, (String, i64)> {
    db.strings(&format!(
        "SELECT CAST(id AS CHAR(12)) || '|' || big || '|' || CAST(n AS CHAR(12)) FROM {table}"
    ))
    .await
    .into_iter()
    .map(|line| {
        let mut parts = line.split('|');
        let id = parts.next().unwrap().trim().parse().unwrap();
        let big = parts.next().unwrap().to_owned();
        let n = parts.next().unwrap().trim().parse().unwrap();
        (id, (big, n))
    })
    .collect()
}

/// Runs `records` through an applying sink of `parallelism` subtasks into `table`, batches of
/// `batch` records, a checkpoint every 20 ms while the source pauses every 25 records.
async fn run(
    db: &Db,
    table: &str,
    records: Vec<Value>,
    (batch, exactly_once, parallelism): (usize, bool, usize),
    policy: ErrorPolicy,
) -> JobSummary {
    let splits = Arc::new(vec![records]);
    let sink = JdbcSink::builder(&db.url, table)
        .mode(WriteMode::Upsert)
        .apply_changes(true)
        .batch_size(batch)
        .guarantee(if exactly_once {
            DeliveryGuarantee::ExactlyOnce
        } else {
            DeliveryGuarantee::AtLeastOnce
        })
        .transaction_prefix(table)
        .error_policy(policy)
        .build_json()
        .unwrap();
    let stream = Pipeline::new(format!("moves-{table}"))
        .checkpointing(CheckpointConfig::new(
            Duration::from_millis(20),
            Arc::new(MemoryStateBackend::new()),
        ))
        .batch_size(batch)
        .source("changes", 1, move |i| {
            VecSource::new(Arc::clone(&splits), i, 1).paced(25, Duration::from_millis(5))
        });
    // Each key's changes to one subtask, in order (as a CDC job keys them).
    let stream = if parallelism > 1 {
        stream.key_by(
            |v: &Value| v["after"]["id"].as_i64().or(v["before"]["id"].as_i64()),
            parallelism,
        )
    } else {
        stream
    };
    stream
        .sink("table", parallelism, move |_| sink.clone())
        .unwrap()
        .run()
        .await
        .unwrap()
}

async fn create(db: &Db) -> String {
    let table = unique_name("moves").replace('-', "_");
    db.exec(&format!(
        "CREATE TABLE {table} (id INT PRIMARY KEY, big TEXT, n BIGINT)"
    ))
    .await;
    if db.is("mariadb") {
        db.exec("SET GLOBAL sql_mode = CONCAT(@@sql_mode, ',PIPES_AS_CONCAT')")
            .await;
    }
    table
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_changes_move_rows_with_their_unchanged_values_on_every_database() {
    let (records, expected) = changes();
    for db in databases() {
        let modes: &[bool] = if db.is("sqlite") {
            &[false]
        } else {
            &[false, true]
        };
        for &exactly_once in modes {
            // Batches of one (each move alone) and of 64 (moves among both keys' changes).
            for batch in [1, 64] {
                let table = create(&db).await;
                run(
                    &db,
                    &table,
                    records.clone(),
                    (batch, exactly_once, 1),
                    ErrorPolicy::Fail,
                )
                .await;
                let got = rows_of(&db, &table).await;
                let wrong: Vec<_> = expected
                    .iter()
                    .filter(|(id, row)| got.get(id) != Some(row))
                    .map(|(id, _)| (id, got.get(id).map(|r| r.0.len())))
                    .collect();
                assert!(
                    wrong.is_empty() && got.len() == expected.len(),
                    "{} (exactly-once {exactly_once}, batch {batch}): {} rows for {}; \
                     differing (id, length of big): {wrong:?}",
                    db.name,
                    got.len(),
                    expected.len()
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_changes_are_refused_by_name_when_sink_subtasks_share_the_table() {
    let Some(db) = postgres() else { return };
    let (records, _) = changes();
    let moves = records
        .iter()
        .filter(|r| r.get(MOVED_FROM).is_some() || r.get(MOVED_TO).is_some())
        .count();
    let table = create(&db).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("letters.jsonl");
    let dlq = Arc::new(FileDeadLetterQueue::open(&path).await.unwrap());
    run(
        &db,
        &table,
        records,
        (16, true, 2),
        ErrorPolicy::DeadLetter(dlq),
    )
    .await;
    let letters = FileDeadLetterQueue::read_all(&path).await.unwrap();
    assert_eq!(letters.len(), moves, "both halves of every key change");
    for l in &letters {
        assert!(l.reason.contains("parallelism 1"), "{}", l.reason);
        let record: Value = serde_json::from_slice(&l.payload).unwrap();
        assert!(
            record.get(MOVED_FROM).is_some() || record.get(MOVED_TO).is_some(),
            "the record is kept whole: {record}"
        );
    }
    // The old keys keep their rows: nothing is lost, the refusals say what to do.
    let big = db
        .strings(&format!("SELECT big FROM {table} WHERE id = 1"))
        .await;
    assert_eq!(big, vec![format!("big-{}-", 1).repeat(50)]);
}
