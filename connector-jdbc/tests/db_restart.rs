//! PostgreSQL, then MariaDB, stops and starts again mid-stream (alone in this file: no other
//! test runs while a server is down). The sink retries through the outage on new connections
//! and loses nothing.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rivus_connector_jdbc::{JdbcSink, Row, RowChange, WriteMode};
use rivus_core::bulk::BulkConfig;
use rivus_testkit::services::unique_name;

async fn count(db: &common::Db, table: &str) -> usize {
    db.count(table).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_restart_mid_stream_loses_nothing() {
    for db in common::databases() {
        let service = match db.name {
            "postgres" => "postgres",
            "mariadb" => "mariadb",
            _ => continue,
        };
        restart_mid_stream(db, service).await;
    }
}

async fn restart_mid_stream(db: common::Db, service: &'static str) {
    let table = unique_name("restart").replace('-', "_");
    db.exec(&format!("CREATE TABLE {table} (id BIGINT PRIMARY KEY)"))
        .await;
    let sink = JdbcSink::builder(&db.url, &table)
        .mode(WriteMode::Upsert)
        .timeout(Duration::from_secs(2))
        .bulk(BulkConfig {
            max_actions: 500,
            flush_interval: Some(Duration::from_millis(100)),
            concurrent_requests: 2,
            backoff: rivus_testkit::restart::outage_backoff(),
            ..BulkConfig::default()
        })
        .build(|n: &u64| {
            let mut row = Row::new();
            row.insert("id".into(), (*n).into());
            Ok(RowChange::Write(row))
        })
        .unwrap();
    let emitted = Arc::new(AtomicU64::new(0));
    let job = rivus_testkit::restart::sequence_job(
        &format!("restart-{service}"),
        Arc::clone(&emitted),
        |_| sink.clone(),
    )
    .unwrap();
    let handle = job.handle();
    let running = tokio::spawn(job.run());

    let wait_for = |n: usize| {
        let db = db.clone();
        let table = table.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(180);
            while count(&db, &table).await < n {
                assert!(Instant::now() < deadline, "fewer than {n} rows arrived");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    wait_for(5000).await;
    rivus_testkit::restart::bounce(service, Duration::from_secs(2)).await;
    let after = count(&db, &table).await;
    wait_for(after + 5000).await;
    assert!(
        !running.is_finished(),
        "the job kept running through the restart"
    );
    handle.stop();
    let summary = running.await.unwrap().unwrap();
    let n = summary.records_read;
    assert_eq!(emitted.load(Ordering::Relaxed), n);
    // Ids are the sequence numbers: every emitted record is one row.
    assert_eq!(
        count(&db, &table).await as u64,
        n,
        "all {n} emitted records are rows"
    );
}
