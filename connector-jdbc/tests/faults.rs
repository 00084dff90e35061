//! Network faults and a server restart between the exactly-once SQL sink and PostgreSQL, then
//! MariaDB, through the testkit's fault proxy: a blackhole mid-stream, connection resets every
//! two seconds, 200 ms latency, the server restarted. The job keeps running or restarts
//! itself, and ends with every record in the table exactly once (the table has no key: a
//! duplicate would be a second row). Alone in this file: it restarts the servers.

mod common;

use std::time::Duration;

use rivus_connector_jdbc::{JdbcConfig, JdbcSink, Row, RowChange};
use rivus_sdk::DeliveryGuarantee;
use rivus_testkit::faults::sink_under_fault;
use rivus_testkit::services::unique_name;

/// (rows, distinct ids, highest id), retried while the server is away (a failed query
/// panics in its own task).
async fn counts(db: &common::Db, table: &str) -> (u64, u64, i64) {
    let sql = format!(
        "SELECT CONCAT(COUNT(*), ',', COUNT(DISTINCT id), ',', COALESCE(MAX(id), -1)) FROM {table}"
    );
    loop {
        let (db, sql) = (db.clone(), sql.clone());
        let query = tokio::spawn(async move { db.strings(&sql).await });
        if let Ok(Ok(rows)) = tokio::time::timeout(Duration::from_secs(5), query).await {
            let parts: Vec<&str> = rows[0].split(',').collect();
            return (
                parts[0].parse().unwrap(),
                parts[1].parse().unwrap(),
                parts[2].parse().unwrap(),
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Over 60 s (71 s here): the faults last seconds each and both servers restart (PostgreSQL
/// and MariaDB), each restart followed by the recovery of the prepared transactions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_sink_rides_out_network_faults_and_server_restarts() {
    for db in common::servers() {
        let (service, (proxy, url, faults)) = (db.name, db.under_faults().await);
        for fault in faults {
            let table = unique_name("faults").replace('-', "_");
            db.exec(&format!("CREATE TABLE {table} (id BIGINT)")).await;
            let sink = {
                let (url, table) = (url.clone(), table.clone());
                move || {
                    JdbcSink::builder(
                        JdbcConfig::new(&url).timeout(Duration::from_secs(5)),
                        &table,
                    )
                    .guarantee(DeliveryGuarantee::ExactlyOnce)
                    .build(|n: &u64| {
                        let mut row = Row::new();
                        row.insert("id".into(), (*n).into());
                        Ok(RowChange::Write(row))
                    })
                    .unwrap()
                }
            };
            let run = sink_under_fault(
                &format!("faults-{service}"),
                &proxy,
                fault.clone(),
                2_000,
                sink,
                || {
                    let (db, table) = (db.clone(), table.clone());
                    async move { counts(&db, &table).await.1 }
                },
            )
            .await;
            proxy.clear();
            let (rows, distinct, max) = counts(&db, &table).await;
            let n = run.emitted;
            assert_eq!(
                (rows, distinct, max),
                (n, n, n as i64 - 1),
                "{service} under {}: every record exactly once",
                run.fault
            );
            eprintln!("{}", run.report(&format!("jdbc {service} exactly-once")));
        }
    }
}
