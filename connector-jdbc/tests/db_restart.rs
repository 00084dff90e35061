//! PostgreSQL, then MariaDB, stops and starts again mid-stream (alone in this file: no other
//! test runs while a server is down). The sink retries through the outage on new connections
//! and loses nothing.

mod common;

use std::time::Duration;

use rivus_connector_jdbc::{JdbcConfig, JdbcSink, Row, RowChange, WriteMode};
use rivus_sdk::bulk::BulkConfig;
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
    let sink = JdbcSink::builder(
        JdbcConfig::new(&db.url).timeout(Duration::from_secs(2)),
        &table,
    )
    .mode(WriteMode::Upsert)
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
    rivus_testkit::restart::sink_restart_mid_stream(service, sink, 5000, || async {
        count(&db, &table).await as u64
    })
    .await;
}
