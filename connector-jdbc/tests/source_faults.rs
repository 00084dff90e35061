//! Network faults and a server restart between the continuous SQL source and PostgreSQL, then
//! MariaDB, through the testkit's fault proxy: a blackhole, connection resets every two
//! seconds, 200 ms latency, the server restarted, while the test keeps inserting rows. The
//! job keeps running or restarts itself and receives every row. Alone in this file: it
//! restarts the servers.

mod common;

use std::time::Duration;

use rivus_connector_jdbc::{JdbcConfig, JdbcSource, Row};
use rivus_sdk::schema::SchemaError;
use rivus_testkit::faults::source_under_fault;
use rivus_testkit::services::unique_name;

fn id_of(row: Row) -> Result<u64, SchemaError> {
    row.get("id")
        .and_then(|v| v.as_u64())
        .ok_or_else(|| SchemaError::new("row", "?", "no id"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continuous_source_rides_out_network_faults_and_server_restarts() {
    for db in common::servers() {
        let (service, (proxy, url, faults)) = (db.name, db.under_faults().await);
        for fault in faults {
            let table = unique_name("source_faults").replace('-', "_");
            db.exec(&format!("CREATE TABLE {table} (id BIGINT PRIMARY KEY)"))
                .await;
            let source = {
                let (url, table) = (url.clone(), table.clone());
                move || {
                    JdbcSource::builder(JdbcConfig::new(&url).timeout(Duration::from_secs(5)))
                        .table(&table)
                        .track_by(["id"])
                        .continuous(Duration::from_millis(50))
                        .fetch_size(200)
                        .build(id_of)
                        .unwrap()
                }
            };
            let produce = {
                let (db, table) = (db.clone(), table.clone());
                move |from: u64, to: u64| {
                    let (db, table) = (db.clone(), table.clone());
                    async move {
                        let values: Vec<String> = (from..to).map(|n| format!("({n})")).collect();
                        // Idempotent: an insert retried after a lost answer adds nothing twice.
                        let sql = if db.is("postgres") {
                            format!(
                                "INSERT INTO {table} (id) VALUES {} ON CONFLICT DO NOTHING",
                                values.join(",")
                            )
                        } else {
                            format!(
                                "INSERT IGNORE INTO {table} (id) VALUES {}",
                                values.join(",")
                            )
                        };
                        // Retried while the server restarts (a failed insert panics in its task).
                        loop {
                            let (db, sql) = (db.clone(), sql.clone());
                            if tokio::spawn(async move { db.exec(&sql).await })
                                .await
                                .is_ok()
                            {
                                return;
                            }
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                    }
                }
            };
            let r = source_under_fault(
                &format!("source-faults-{service}"),
                &proxy,
                fault,
                source,
                produce,
            )
            .await;
            proxy.clear();
            eprintln!(
                "{} | {} duplicates",
                r.run
                    .report(&format!("jdbc source {service} (exactly-once)")),
                r.duplicates
            );
        }
    }
}
