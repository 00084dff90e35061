//! Key changes and TRUNCATE from a real server. An update that changes the key while a large
//! value stays unchanged (stored out of line, so not in the WAL) becomes a delete and a write
//! naming each other (`__moved_to`, `__moved_from`), so that a sink can move the row and keep
//! the value; with `REPLICA IDENTITY FULL` a key change is a delete of the old key and a
//! complete write of the new one (it used to be an update of the new key alone, leaving the old
//! row in a replica). A TRUNCATE of a followed table stops the job, naming the table.

mod common;

use std::time::Duration;

use rivus_sdk::change::{MOVED_FROM, MOVED_TO, UNCHANGED};
use rivus_sdk::prelude::*;
use rivus_testkit::TxnStore;
use serde_json::{json, Value};

use common::{job, source, Fixture};

/// Waits until `store` holds `n` records, for at most 60 s; a job that ends first fails
/// the test with its outcome.
async fn until_records(
    store: &TxnStore<Value>,
    n: usize,
    running: &mut tokio::task::JoinHandle<rivus_sdk::Result<JobSummary>>,
) -> Vec<Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let got = store.committed();
        if got.len() >= n {
            return got;
        }
        if running.is_finished() {
            panic!(
                "the job ended with {} of {n} records: {:?}",
                got.len(),
                running.await
            );
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} of {n} records: {got:?}",
            got.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_changes_name_both_keys_when_the_new_row_lacks_a_value() {
    let Some(mut f) = Fixture::new("cdc_moves", 3).await else {
        return;
    };
    let t = f.name.clone();
    // `body` out of line and uncompressed for row 1; rows 2 and 3 small.
    f.exec(&format!(
        "ALTER TABLE {t} ALTER COLUMN body SET STORAGE EXTERNAL;
         UPDATE {t} SET body = repeat('x', 5000) WHERE id = 1"
    ))
    .await;
    let backend = MemoryStateBackend::new();
    let store = TxnStore::<Value>::new();
    let src = source(&f, |b| b);
    let ms = Duration::from_millis;
    let running = job(&t, src, &backend, &store, ms(100), ms(0));
    let handle = running.handle();
    let mut running = tokio::spawn(running.run());
    until_records(&store, 3, &mut running).await;
    f.exec(&format!(
        "UPDATE {t} SET id = 101, amount = 1 WHERE id = 1;
         UPDATE {t} SET id = 102 WHERE id = 2;
         ALTER TABLE {t} REPLICA IDENTITY FULL;
         UPDATE {t} SET id = 103, amount = 3 WHERE id = 3;
         UPDATE {t} SET amount = 4 WHERE id = 103"
    ))
    .await;
    let got = until_records(&store, 3 + 2 + 2 + 2 + 1, &mut running).await;
    handle.stop();
    running.await.unwrap().unwrap();
    let changes: Vec<&Value> = got.iter().filter(|r| r["__op"] != "r").collect();
    // Row 1: `body` unchanged and out of line — the pair names both keys.
    assert_eq!(changes[0]["id"], 1);
    assert_eq!(changes[0]["__op"], "d");
    assert_eq!(changes[0][MOVED_TO], json!({"id": 101}));
    assert_eq!(changes[1]["id"], 101);
    assert_eq!(changes[1]["__op"], "c");
    assert_eq!(changes[1]["body"], UNCHANGED);
    assert_eq!(changes[1][MOVED_FROM], json!({"id": 1}));
    // Row 2: every value in the new row — a plain delete and insert.
    assert_eq!(
        (changes[2]["__op"].clone(), changes[2]["id"].clone()),
        (json!("d"), json!(2))
    );
    assert_eq!(changes[3]["body"], "row 2");
    assert!(changes[2].get(MOVED_TO).is_none() && changes[3].get(MOVED_FROM).is_none());
    // Row 3 under REPLICA IDENTITY FULL: the old key deleted, the new row whole.
    assert_eq!(
        (changes[4]["__op"].clone(), changes[4]["id"].clone()),
        (json!("d"), json!(3))
    );
    assert_eq!(
        (changes[5]["__op"].clone(), changes[5]["id"].clone()),
        (json!("c"), json!(103))
    );
    assert_eq!(changes[5]["body"], "row 3");
    // An update that keeps the key stays an update.
    assert_eq!(
        (changes[6]["__op"].clone(), changes[6]["id"].clone()),
        (json!("u"), json!(103))
    );
    f.clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncate_of_a_followed_table_stops_the_job_by_name() {
    let Some(mut f) = Fixture::new("cdc_truncate", 5).await else {
        return;
    };
    let t = f.name.clone();
    let backend = MemoryStateBackend::new();
    let store = TxnStore::<Value>::new();
    let src = source(&f, |b| b);
    let running = job(
        &t,
        src,
        &backend,
        &store,
        Duration::from_millis(100),
        Duration::ZERO,
    );
    let mut running = tokio::spawn(running.run());
    until_records(&store, 5, &mut running).await;
    f.exec(&format!("INSERT INTO {t} (id, body) VALUES (6, 'six')"))
        .await;
    until_records(&store, 6, &mut running).await;
    f.exec(&format!("TRUNCATE {t}")).await;
    let e = tokio::time::timeout(Duration::from_secs(60), running)
        .await
        .expect("the job stops at the truncate")
        .unwrap()
        .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("TRUNCATE") && text.contains(&format!("public.{t}")),
        "{text}"
    );
    assert!(
        !e.is_retryable(),
        "a restart meets the same truncate: {text}"
    );
    f.clean().await;
}
