//! The PostgreSQL CDC source against a real server with logical decoding: a snapshot taken
//! while a writer changes the table, then the stream, into an exactly-once sink; a graceful
//! stop, changes while the job is down, and a restore from the checkpoint. Afterwards the rows
//! rebuilt from the committed changes equal the table, and no change arrived twice.

mod common;

use std::time::Duration;

use rivus_sdk::prelude::*;
use rivus_testkit::TxnStore;
use serde_json::Value;

use common::{assert_no_duplicates, job, lsn, source, until_replica_equals, write, Fixture};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdc_snapshot_then_stream_then_restore_lose_and_double_nothing() {
    let Some(mut f) = Fixture::new("cdc_stream", 2_000).await else {
        return;
    };
    let backend = MemoryStateBackend::new();
    let store = TxnStore::<Value>::new();

    // The writer runs while the snapshot is read.
    let writer = tokio::spawn(write(f.owner_url.clone(), f.name.clone(), 0, 150));
    let src = source(&f, |b| b);
    let ms = Duration::from_millis;
    let first = job(&f.name, src.clone(), &backend, &store, ms(200), ms(0));
    let handle = first.handle();
    let running = tokio::spawn(first.run());
    writer.await.unwrap();
    until_replica_equals(&mut f, &store, 60, "the snapshot and the stream").await;
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
    let second = job(&f.name, src, &backend, &store, ms(200), ms(0));
    let handle = second.handle();
    let running = tokio::spawn(second.run());
    until_replica_equals(
        &mut f,
        &store,
        60,
        "the replica catches up after the restore",
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
    assert!(
        lsn(&after) > lsn(&before),
        "the slot moved on: {before} → {after}"
    );
    f.clean().await;
}
