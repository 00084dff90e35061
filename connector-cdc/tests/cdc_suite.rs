//! The testkit's source conformance suite against the CDC source: each case gets fresh tables
//! (one per split) in a publication of their own and a slot of its own; the suite's records
//! are inserted as rows (`v`) and read back from the snapshot or the stream. Snapshot mode
//! `when-needed`: a start without a checkpoint that finds its slot streams from the slot's
//! confirmed position, so the slot is the committed position the suite checks. With several
//! subtasks the snapshot of a table is read in parts at once: order holds per row, not per
//! table, so the verdicts leave order out (`cdc_parallel` checks per-key order).

use std::time::Duration;

use rivus_connector_cdc::{Envelope, PostgresCdcSource, SnapshotMode};
use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::prelude::*;
use rivus_testkit::services::{require, unique_name, Service};
use rivus_testkit::suite::{SourceExternal, SourceSuite};
use serde_json::Value;
use sqlx::{Connection, PgConnection};

struct Tables {
    owner: String,
    pool: sqlx::PgPool,
    cdc: String,
    /// The current case's name: its publication, its slot and the prefix of its tables.
    name: String,
    tables: Vec<String>,
    /// Every case's name, to drop at the end.
    made: Vec<(String, usize)>,
}

impl Tables {
    async fn exec(&self, sql: &str) {
        sqlx::raw_sql(sql).execute(&self.pool).await.unwrap();
    }
}

#[async_trait]
impl SourceExternal for Tables {
    type Source = PostgresCdcSource;

    async fn prepare(&mut self, splits: usize) -> Result<()> {
        self.name = unique_name("cdc_suite").replace('-', "_");
        self.tables = (0..splits).map(|i| format!("{}_{i}", self.name)).collect();
        let mut sql = String::new();
        for t in &self.tables {
            sql.push_str(&format!(
                "CREATE TABLE {t} (id BIGSERIAL PRIMARY KEY, v TEXT NOT NULL); \
                 GRANT SELECT ON {t} TO rivus_cdc; "
            ));
        }
        sql.push_str(&format!(
            "CREATE PUBLICATION {} FOR TABLE {}",
            self.name,
            self.tables.join(", ")
        ));
        self.exec(&sql).await;
        self.made.push((self.name.clone(), splits));
        Ok(())
    }

    async fn write(&mut self, split: usize, records: &[String]) -> Result<()> {
        for chunk in records.chunks(500) {
            let values: Vec<String> = chunk.iter().map(|r| format!("('{r}')")).collect();
            self.exec(&format!(
                "INSERT INTO {} (v) VALUES {}",
                self.tables[split],
                values.join(", ")
            ))
            .await;
        }
        Ok(())
    }

    fn create_source(&self, _: usize, _: usize, _: ErrorPolicy) -> PostgresCdcSource {
        PostgresCdcSource::builder(&self.cdc, &self.name, &self.name)
            .snapshot(SnapshotMode::WhenNeeded)
            .envelope(Envelope::Flat)
            .status_interval(Duration::from_millis(200))
            .build()
            .unwrap()
    }

    fn to_test_record(&self, record: &Value) -> String {
        record["v"].as_str().unwrap_or_default().to_owned()
    }

    fn commits_positions(&self) -> bool {
        true
    }

    /// Several subtasks read parts of a table's snapshot at once: order is kept per row.
    fn preserves_order(&self) -> bool {
        false
    }
}

impl Drop for Tables {
    fn drop(&mut self) {
        let (owner, made) = (self.owner.clone(), std::mem::take(&mut self.made));
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let mut c = PgConnection::connect(&owner).await.unwrap();
                for (name, splits) in made {
                    for _ in 0..100 {
                        let r = sqlx::query(&format!(
                            "SELECT pg_drop_replication_slot(slot_name) FROM \
                             pg_replication_slots WHERE slot_name = '{name}'"
                        ))
                        .execute(&mut c)
                        .await;
                        if r.is_ok() {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    let mut sql = format!("DROP PUBLICATION IF EXISTS {name};");
                    for i in 0..splits {
                        sql.push_str(&format!("DROP TABLE IF EXISTS {name}_{i};"));
                    }
                    let _ = sqlx::raw_sql(&sql).execute(&mut c).await;
                }
            });
        })
        .join();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdc_source_passes_the_conformance_suite() {
    let (Some(owner), Some(cdc)) = (require(Service::Postgres), require(Service::PostgresCdc))
    else {
        return;
    };
    let pool = sqlx::PgPool::connect(&owner).await.unwrap();
    let mut suite = SourceSuite::new(Tables {
        owner,
        pool,
        cdc,
        name: String::new(),
        tables: Vec::new(),
        made: Vec::new(),
    })
    .records_per_split(100);
    if let Err(f) = suite.run_all().await {
        panic!("{f}");
    }
}
