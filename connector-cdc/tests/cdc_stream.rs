//! The PostgreSQL CDC source against a real server with logical decoding: a snapshot taken
//! while a writer changes the table, then the stream, into an exactly-once sink; a graceful
//! stop, changes while the job is down, and a restore from the checkpoint. Afterwards the rows
//! rebuilt from the committed changes equal the table, and no change arrived twice.

mod common;

use std::sync::Arc;
use std::time::Duration;

use rivus_connector_cdc::{Envelope, PostgresCdcSource};
use rivus_core::prelude::*;
use rivus_testkit::{wait, TransactionalSink, TxnStore};
use serde_json::Value;

use common::{replay, Fixture};

/// Inserts, updates and deletes on `table`, `rounds` transactions of three statements each;
/// every value written is unique (`w{round}`), so a change that arrived twice is seen.
async fn write(url: String, table: String, from: i64, rounds: i64) {
    use sqlx::Connection;
    let mut c = sqlx::PgConnection::connect(&url).await.unwrap();
    for r in from..from + rounds {
        let mut tx = c.begin().await.unwrap();
        for sql in [
            format!(
                "INSERT INTO {table} (id, body, amount) VALUES ({}, 'w{r}', {r}.5)",
                100_000 + r
            ),
            format!(
                "UPDATE {table} SET body = 'w{r}u', amount = amount + 1 WHERE id = {}",
                1 + (r * 7) % 300
            ),
            format!("DELETE FROM {table} WHERE id = {}", 301 + r),
        ] {
            sqlx::query(&sql).execute(&mut *tx).await.unwrap();
        }
        tx.commit().await.unwrap();
    }
}

fn job(f: &Fixture, backend: &MemoryStateBackend, store: &TxnStore<Value>) -> Job {
    let source = PostgresCdcSource::builder(&f.cdc_url, &f.name, &f.name)
        .envelope(Envelope::Flat)
        .chunk_rows(97)
        .status_interval(Duration::from_millis(500))
        .build()
        .unwrap();
    let store = store.clone();
    Pipeline::new(f.name.as_str())
        .checkpointing(CheckpointConfig::new(
            Duration::from_millis(200),
            Arc::new(backend.clone()),
        ))
        .source("cdc", 1, move |_| source.clone())
        .sink("txn", 1, move |i| TransactionalSink::new(store.clone(), i))
        .unwrap()
}

/// Every committed change once: no two committed records are equal (each write is unique;
/// snapshot rows are the only records of their `__op`/value pair).
fn assert_no_duplicates(records: &[Value]) {
    let mut seen = std::collections::HashSet::new();
    for r in records {
        assert!(seen.insert(r.to_string()), "arrived twice: {r}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdc_snapshot_then_stream_then_restore_lose_and_double_nothing() {
    let Some(mut f) = Fixture::new("cdc_stream", 2_000).await else {
        return;
    };
    let backend = MemoryStateBackend::new();
    let store = TxnStore::<Value>::new();

    // The writer runs while the snapshot is read.
    let writer = tokio::spawn(write(f.owner_url.clone(), f.name.clone(), 0, 150));
    let first = job(&f, &backend, &store);
    let handle = first.handle();
    let running = tokio::spawn(first.run());
    writer.await.unwrap();
    let want = f.rows().await;
    wait::until(
        Duration::from_secs(60),
        || async { replay(&store.committed()) == want },
        || {
            let got = replay(&store.committed());
            format!(
                "the replica has {} rows, the table {}",
                got.len(),
                want.len()
            )
        },
    )
    .await;
    let snapshot_rows = store
        .committed()
        .iter()
        .filter(|r| r["__op"] == "r")
        .count();
    assert!(
        snapshot_rows >= 2_000 - 150,
        "{snapshot_rows} snapshot rows"
    );
    // The slot confirmed what the checkpoints hold.
    let before = f.confirmed().await.expect("the slot exists");
    handle.stop();
    running.await.unwrap().unwrap();

    // Changes while the job is down, then a restore.
    write(f.owner_url.clone(), f.name.clone(), 150, 100).await;
    let second = job(&f, &backend, &store);
    let handle = second.handle();
    let running = tokio::spawn(second.run());
    let want = f.rows().await;
    wait::until(
        Duration::from_secs(60),
        || async { replay(&store.committed()) == want },
        || "the replica catches up after the restore".to_owned(),
    )
    .await;
    handle.stop();
    let summary = running.await.unwrap().unwrap();
    assert!(
        summary.restored_from.is_some(),
        "restored from a checkpoint"
    );
    let committed = store.committed();
    assert_no_duplicates(&committed);
    assert_eq!(
        committed.iter().filter(|r| r["__op"] == "r").count(),
        snapshot_rows,
        "no snapshot again after the restore"
    );
    let after = f.confirmed().await.expect("the slot exists");
    let lsn = |s: &str| {
        let (a, b) = s.split_once('/').unwrap();
        (u64::from_str_radix(a, 16).unwrap() << 32) | u64::from_str_radix(b, 16).unwrap()
    };
    assert!(
        lsn(&after) > lsn(&before),
        "the slot moved on: {before} → {after}"
    );
    f.clean().await;
}
