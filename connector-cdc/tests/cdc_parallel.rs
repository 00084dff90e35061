//! The snapshot read by several subtasks at once: each reads its parts of the table inside
//! the one exported snapshot, subtask 0 streams once every part is through the job, and each
//! key's changes reach their sink in order (snapshot row first) — also when the job is
//! cancelled in the middle and restored at another parallelism.

mod common;

use std::time::Duration;

use common::*;
use rivus_sdk::prelude::*;
use rivus_testkit::{wait, TxnStore};
use serde_json::Value;
use sqlx::Connection;

/// Updates the last rows of each third of the 6 000 keys (the rows a part's reader emits
/// last), one transaction each, `rounds` times: their streamed changes would overtake those
/// rows if the stream began while they were still on their way.
async fn update_part_ends(url: String, table: String, rounds: i64) {
    let mut c = sqlx::PgConnection::connect(&url).await.unwrap();
    for r in 0..rounds {
        let id = (1 + r % 3) * 2_000 - (r * 7) % 150;
        sqlx::query(&format!("UPDATE {table} SET body = 'e{r}' WHERE id = {id}"))
            .execute(&mut c)
            .await
            .unwrap();
    }
}

/// The source subtasks' states in the newest checkpoint of `backend`.
fn source_states(backend: &MemoryStateBackend) -> Vec<Value> {
    let newest = backend
        .checkpoints()
        .into_iter()
        .last()
        .expect("a checkpoint");
    newest.operators["cdc"]
        .iter()
        .map(|s| s.clone().unwrap_or(Value::Null))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdc_a_snapshot_read_by_three_subtasks_keeps_each_key_in_order_into_the_stream() {
    let Some(mut f) = Fixture::new("cdc_wide", 6_000).await else {
        return;
    };
    let (backend, store) = (MemoryStateBackend::new(), TxnStore::<Value>::new());
    let writer = tokio::spawn(write(f.owner_url.clone(), f.name.clone(), 0, 300));
    let everywhere = tokio::spawn(update_part_ends(f.owner_url.clone(), f.name.clone(), 600));
    let job = job_wide(
        &f.name,
        source(&f, |b| b),
        3,
        &backend,
        &store,
        Duration::from_millis(50),
        Duration::from_millis(20),
    );
    let handle = job.handle();
    let running = tokio::spawn(job.run());
    writer.await.unwrap();
    everywhere.await.unwrap();
    until_replica_equals(&mut f, &store, 60, "three readers, then the stream").await;
    handle.stop();
    running.await.unwrap().unwrap();
    assert_no_duplicates(&store.committed());
    // Subtasks 1 and 2 read parts of their own: a part each, bounded by keys, read to its end.
    let states = source_states(&backend);
    assert_eq!(states.len(), 3);
    assert_eq!(states[0]["snapshot_done"], true);
    for (k, st) in states.iter().enumerate().skip(1) {
        assert_eq!(st["parts_read"], true, "subtask {k}: {st}");
        let parts = st["parts"].as_array().expect("parts");
        assert_eq!(parts.len(), 1, "subtask {k}: {st}");
        assert_eq!(parts[0]["part"], k);
        assert!(
            parts[0]["from"].is_array(),
            "subtask {k} starts after a key: {st}"
        );
        assert_eq!(parts[0]["ranges"][0]["upto"], "End", "subtask {k}: {st}");
    }
    assert!(states[1]["parts"][0]["to"].is_array(), "{}", states[1]);
    assert!(states[2]["parts"][0]["to"].is_null(), "{}", states[2]);
    f.clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdc_a_parallel_snapshot_cancelled_midway_resumes_at_another_parallelism() {
    let Some(mut f) = Fixture::new("cdc_widecut", 6_000).await else {
        return;
    };
    let (backend, store) = (MemoryStateBackend::new(), TxnStore::<Value>::new());
    let ms = Duration::from_millis;
    let src = source(&f, |b| b.chunk_rows(50));
    let writer = tokio::spawn(write(f.owner_url.clone(), f.name.clone(), 0, 200));
    let first = job_wide(&f.name, src.clone(), 3, &backend, &store, ms(30), ms(10));
    let handle = first.handle();
    let running = tokio::spawn(first.run());
    wait::until(
        Duration::from_secs(60),
        || async { store.committed_len() >= 1_000 || running.is_finished() },
        || format!("{} committed", store.committed_len()),
    )
    .await;
    handle.cancel();
    let _ = running.await.unwrap();
    let cut = store.committed_len();
    assert!(
        cut < 6_000,
        "cancelled inside the snapshot ({cut} committed)"
    );
    writer.await.unwrap();
    let second = job_wide(&f.name, src, 2, &backend, &store, ms(100), ms(0));
    let handle = second.handle();
    let running = tokio::spawn(second.run());
    until_replica_equals(&mut f, &store, 90, "after the restore at parallelism 2").await;
    handle.stop();
    assert!(running.await.unwrap().unwrap().restored_from.is_some());
    // Each part resumed after the last row its reader's checkpoint held: every record once.
    assert_no_duplicates(&store.committed());
    f.clean().await;
}
