//! What the CDC source refuses at start, with an error that says what is missing and how to add
//! it: a publication that does not exist, a table outside the publication, a slot dropped
//! under a checkpointed job, wrong
//! credentials (the password never shown). And a source over TLS with SCRAM works.

mod common;

use std::time::Duration;

use rivus_connector_cdc::PostgresCdcSource;
use rivus_sdk::prelude::*;
use rivus_testkit::services::{require, Service};
use rivus_testkit::{wait, TxnStore};
use serde_json::Value;

use common::{job, source, Fixture};

const MS: fn(u64) -> Duration = Duration::from_millis;

/// Starts `src` checkpointed every `interval` and waits until the snapshot's three rows are
/// committed: the job's handle and its task.
async fn snapshot_read(
    name: &str,
    src: PostgresCdcSource,
    backend: &MemoryStateBackend,
    store: &TxnStore<Value>,
    interval: Duration,
) -> (JobHandle, tokio::task::JoinHandle<Result<JobSummary>>) {
    let run = job(name, src, backend, store, interval, MS(0));
    let handle = run.handle();
    let running = tokio::spawn(run.run());
    wait::until(
        Duration::from_secs(30),
        || async { store.committed_len() >= 3 },
        || "the snapshot's rows".to_owned(),
    )
    .await;
    (handle, running)
}

/// Runs `src` once with `backend` (it fails at start): the error's text.
async fn start_error(name: &str, src: PostgresCdcSource, backend: &MemoryStateBackend) -> String {
    let run = job(name, src, backend, &TxnStore::new(), MS(100), MS(0));
    match tokio::time::timeout(Duration::from_secs(60), run.run()).await {
        Ok(Err(e)) => e.to_string(),
        other => panic!("{name}: expected a refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdc_missing_publication_and_table_are_refused_naming_them() {
    let Some(f) = Fixture::new("cdc_refuse", 3).await else {
        return;
    };
    let backend = MemoryStateBackend::new();
    let refused = |src, parts: &'static [&'static str]| {
        let (name, backend) = (f.name.clone(), backend.clone());
        async move {
            let e = start_error(&name, src, &backend).await;
            assert!(parts.iter().all(|p| e.contains(p)), "{parts:?} in {e}");
        }
    };
    refused(
        source(&f, |b| b).with_publication("no_such_pub"),
        &[
            "(at `publication`)",
            "publication `no_such_pub` does not exist",
            "CREATE PUBLICATION",
        ],
    )
    .await;
    refused(
        source(&f, |b| b.tables(["public.not_published"])),
        &[
            "(at `tables[0]`)",
            "not in publication",
            "ALTER PUBLICATION",
        ],
    )
    .await;

    f.clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdc_a_slot_dropped_under_a_checkpointed_job_says_a_new_snapshot_is_needed() {
    let Some(mut f) = Fixture::new("cdc_lost", 3).await else {
        return;
    };
    let (backend, store) = (MemoryStateBackend::new(), TxnStore::<Value>::new());
    let (handle, running) =
        snapshot_read(&f.name, source(&f, |b| b), &backend, &store, MS(50)).await;
    handle.stop();
    running.await.unwrap().unwrap();
    f.exec(&format!("SELECT pg_drop_replication_slot('{}')", f.name))
        .await;
    let e = start_error(&f.name, source(&f, |b| b), &backend).await;
    assert!(
        e.contains("was dropped or invalidated") && e.contains("a new snapshot is needed"),
        "{e}"
    );
    f.clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdc_over_tls_with_scram_reads_and_a_wrong_password_is_refused_unshown() {
    let Some(f) = Fixture::new("cdc_tls", 5).await else {
        return;
    };
    let Some(tls_url) = require(Service::PostgresTls) else {
        return;
    };
    // The TLS user (SCRAM, TLS only) may replicate: it is a superuser of the dev server.
    let (backend, store) = (MemoryStateBackend::new(), TxnStore::<Value>::new());
    let src = PostgresCdcSource::builder(&tls_url, &f.name, &f.name)
        .build()
        .unwrap();
    let run = job(&f.name, src, &backend, &store, MS(50), MS(0));
    let handle = run.handle();
    let running = tokio::spawn(run.run());
    wait::until(
        Duration::from_secs(30),
        || async { store.committed_len() >= 5 || running.is_finished() },
        || "the snapshot's rows over TLS".to_owned(),
    )
    .await;
    handle.stop();
    running.await.unwrap().unwrap();
    assert_eq!(store.committed_len(), 5);

    let wrong = f.cdc_url.replace("rivus-cdc-pw", "wrong-secret-pw");
    let src = PostgresCdcSource::builder(&wrong, &f.name, &f.name)
        .build()
        .unwrap();
    let e = start_error(&format!("{}-pw", f.name), src, &MemoryStateBackend::new()).await;
    assert!(e.contains("password authentication failed"), "{e}");
    assert!(!e.contains("wrong-secret-pw"), "{e}");
    f.clean().await;
}

/// A heartbeat query runs at every status interval while the published table is idle, and the
/// slot's confirmed position keeps moving (its WAL is released); a heartbeat the user may not
/// run is refused at start, naming the option.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdc_heartbeats_move_an_idle_slot_and_a_forbidden_one_is_refused() {
    let Some(mut f) = Fixture::new("cdc_heartbeat", 3).await else {
        return;
    };
    let hb = format!("{}_hb", f.name);
    f.exec(&format!(
        "CREATE TABLE {hb} (id INT PRIMARY KEY, n INT NOT NULL); INSERT INTO {hb} VALUES (1, 0); \
         GRANT SELECT, UPDATE ON {hb} TO rivus_cdc"
    ))
    .await;
    let beat = format!("UPDATE {hb} SET n = n + 1 WHERE id = 1");
    let (backend, store) = (MemoryStateBackend::new(), TxnStore::<Value>::new());
    let src = source(&f, |b| {
        b.status_interval(MS(200)).heartbeat_query(beat.clone())
    });
    let (handle, running) = snapshot_read(&f.name, src, &backend, &store, MS(100)).await;
    let first = f.confirmed().await.expect("the slot");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let moved = common::lsn(&f.confirmed().await.unwrap()) > common::lsn(&first);
        if moved && beats(&f.owner_url, &hb).await >= 5 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "heartbeats {}, the slot at {first} still",
            beats(&f.owner_url, &hb).await
        );
        tokio::time::sleep(MS(100)).await;
    }
    handle.stop();
    running.await.unwrap().unwrap();
    assert_eq!(
        store.committed_len(),
        3,
        "the heartbeat table is not published"
    );

    f.exec(&format!("REVOKE UPDATE ON {hb} FROM rivus_cdc"))
        .await;
    let src = source(&f, |b| b.heartbeat_query(beat.clone()));
    let e = start_error(&format!("{}-hb", f.name), src, &MemoryStateBackend::new()).await;
    assert!(
        e.contains("(at `heartbeat_query`)") && e.contains("permission denied"),
        "{e}"
    );
    f.exec(&format!("DROP TABLE {hb}")).await;
    f.clean().await;
}

/// How often the heartbeat ran.
async fn beats(url: &str, table: &str) -> i32 {
    use sqlx::Connection;
    let mut c = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::query_scalar::<_, i32>(&format!("SELECT n FROM {table}"))
        .fetch_one(&mut c)
        .await
        .unwrap()
}
