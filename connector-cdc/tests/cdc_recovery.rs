//! The CDC source cancelled at the worst moments — inside a large transaction, in the middle
//! of the snapshot — and restored from its last checkpoint: every change of the database ends
//! up in the exactly-once sink, the streamed ones once each.

mod common;

use std::time::Duration;

use rivus_sdk::prelude::*;
use rivus_testkit::{wait, TxnStore};
use serde_json::Value;

use common::{assert_no_duplicates, job, replay, source, until_replica_equals, write, Fixture};

/// One transaction of 3 000 inserts, read while checkpoints complete in its middle; the job is
/// cancelled there and restored: the changes after the checkpoint's index come, none before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdc_a_job_cancelled_inside_a_large_transaction_resumes_at_the_checkpointed_change() {
    let Some(mut f) = Fixture::new("cdc_bigtx", 0).await else {
        return;
    };
    let (backend, store) = (MemoryStateBackend::new(), TxnStore::<Value>::new());
    let ms = Duration::from_millis;
    let src = source(&f, |b| b);
    let first = job(&f.name, src.clone(), &backend, &store, ms(30), ms(15));
    let handle = first.handle();
    let running = tokio::spawn(first.run());
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while f.confirmed().await.is_none() {
        assert!(!running.is_finished(), "the job ended early");
        assert!(
            std::time::Instant::now() < deadline,
            "the slot was never created"
        );
        tokio::time::sleep(ms(20)).await;
    }
    f.exec(&format!(
        "INSERT INTO {} (id, body, amount) SELECT i, 'big ' || i, i FROM generate_series(1, 3000) i",
        f.name
    ))
    .await;
    wait::until(
        Duration::from_secs(60),
        || async { store.committed_len() >= 500 || running.is_finished() },
        || format!("{} committed", store.committed_len()),
    )
    .await;
    handle.cancel();
    let _ = running.await.unwrap();
    let before = store.committed_len();
    assert!(
        before < 3000,
        "cancelled inside the transaction ({before} of 3000 committed)"
    );

    let summary_job = job(&f.name, src, &backend, &store, ms(30), ms(0));
    let handle = summary_job.handle();
    let running = tokio::spawn(summary_job.run());
    until_replica_equals(&mut f, &store, 60, "the 3 000 changes after the restore").await;
    handle.stop();
    assert!(running.await.unwrap().unwrap().restored_from.is_some());
    let got = store.committed();
    assert_eq!(got.len(), 3000, "each change once");
    assert_no_duplicates(&got);
    f.clean().await;
}

/// The job cancelled while it reads the snapshot (a writer changing the table meanwhile): the
/// restored job resumes the snapshot after the last row its checkpoint holds, inside a newer
/// snapshot, and streams from the slot's first position leaving out what the newer rows show:
/// the replica ends equal to the table and no record arrives twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdc_a_job_cancelled_during_the_snapshot_ends_with_the_table_after_its_restore() {
    let Some(mut f) = Fixture::new("cdc_snapcut", 3_000).await else {
        return;
    };
    let (backend, store) = (MemoryStateBackend::new(), TxnStore::<Value>::new());
    let ms = Duration::from_millis;
    let src = source(&f, |b| b.chunk_rows(50));
    let writer = tokio::spawn(write(f.owner_url.clone(), f.name.clone(), 0, 200));
    wait::cancel_when(
        job(&f.name, src.clone(), &backend, &store, ms(30), ms(20)),
        || (100..2_500).contains(&store.committed_len()),
        || format!("{} committed, never in the window", store.committed_len()),
    )
    .await;
    writer.await.unwrap();
    let second = job(&f.name, src, &backend, &store, ms(100), ms(0));
    let handle = second.handle();
    let running = tokio::spawn(second.run());
    until_replica_equals(&mut f, &store, 90, "after the restore").await;
    handle.stop();
    assert!(running.await.unwrap().unwrap().restored_from.is_some());
    // The snapshot resumed after the last row its checkpoint held, in a newer snapshot, and
    // the stream left out what that snapshot's rows showed: every record once.
    assert_no_duplicates(&store.committed());
    f.clean().await;
}

/// A table published while the job is down in the middle of its snapshot: the restore
/// finishes the snapshot it checkpointed, then reads the new table's rows as an added table —
/// none lost, though the publication listed it when the restored run began.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdc_a_table_published_while_a_snapshot_is_cut_is_read_after_the_restore() {
    let Some(mut f) = Fixture::new("cdc_snapadd", 3_000).await else {
        return;
    };
    let (backend, store) = (MemoryStateBackend::new(), TxnStore::<Value>::new());
    let ms = Duration::from_millis;
    let src = source(&f, |b| b.chunk_rows(50));
    wait::cancel_when(
        job(&f.name, src.clone(), &backend, &store, ms(30), ms(20)),
        || (100..2_500).contains(&store.committed_len()),
        || format!("{} committed, never in the window", store.committed_len()),
    )
    .await;
    let later = format!("{}_later", f.name);
    f.exec(&format!(
        "CREATE TABLE {later} (id INT PRIMARY KEY, body TEXT, amount NUMERIC(10,2), \
         at TIMESTAMPTZ NOT NULL DEFAULT now()); \
         INSERT INTO {later} (id, body, amount) SELECT i, 'later ' || i, i / 100.0 \
         FROM generate_series(1000001, 1000400) i; \
         GRANT SELECT ON {later} TO rivus_cdc; \
         ALTER PUBLICATION {} ADD TABLE {later}",
        f.name
    ))
    .await;
    let second = job(&f.name, src, &backend, &store, ms(100), ms(0));
    let handle = second.handle();
    let running = tokio::spawn(second.run());
    let mut want = f.rows().await;
    for i in 1_000_001..=1_000_400i64 {
        want.insert(
            i,
            (format!("later {i}"), format!("{:.2}", i as f64 / 100.0)),
        );
    }
    wait::until(
        Duration::from_secs(90),
        || async { replay(&store.committed()) == want },
        || {
            let got = replay(&store.committed());
            let later = got.keys().filter(|&&k| k > 1_000_000).count();
            format!(
                "the replica has {} rows ({later} of the later table's 400), the tables {}",
                got.len(),
                want.len()
            )
        },
    )
    .await;
    handle.stop();
    assert!(running.await.unwrap().unwrap().restored_from.is_some());
    assert_no_duplicates(&store.committed());
    f.exec(&format!("DROP TABLE {later}")).await;
    f.clean().await;
}

/// A slot that exists without a checkpoint (the first run died before its first checkpoint):
/// the job keeps it and reads the tables in a newer snapshot; the changes made before that
/// snapshot are in its rows and are left out of the stream, the later ones come once each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdc_a_slot_left_without_a_checkpoint_is_kept_and_nothing_is_lost_or_doubled() {
    let Some(mut f) = Fixture::new("cdc_orphan", 500).await else {
        return;
    };
    f.exec(&format!(
        "SELECT pg_create_logical_replication_slot('{}', 'pgoutput')",
        f.name
    ))
    .await;
    let before = f.confirmed().await.expect("the slot");
    write(f.owner_url.clone(), f.name.clone(), 0, 50).await;
    let (backend, store) = (MemoryStateBackend::new(), TxnStore::<Value>::new());
    let ms = Duration::from_millis;
    let run = job(&f.name, source(&f, |b| b), &backend, &store, ms(100), ms(0));
    let handle = run.handle();
    let running = tokio::spawn(run.run());
    until_replica_equals(&mut f, &store, 60, "the replica equals the table").await;
    write(f.owner_url.clone(), f.name.clone(), 50, 10).await;
    until_replica_equals(&mut f, &store, 60, "the replica follows the later changes").await;
    handle.stop();
    running.await.unwrap().unwrap();
    let got = store.committed();
    assert_no_duplicates(&got);
    let streamed = got.iter().filter(|r| r["__op"] != "r").count();
    assert_eq!(
        streamed, 30,
        "the 10 later transactions, three changes each, and no other"
    );
    let after = f.confirmed().await.expect("the slot");
    assert!(common::lsn(&after) > common::lsn(&before));
    f.clean().await;
}
