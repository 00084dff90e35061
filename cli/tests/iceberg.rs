//! Kafka → an Iceberg table (the SQL catalog on PostgreSQL, files on S3) through the `rivus`
//! command: the job is SIGKILLed three times, each time right after the table gained a
//! snapshot, and started again from its checkpoints; the last run reads to the end. pyiceberg
//! then reads every record once through the same catalog — and reading the table reads every
//! file its snapshots name, so none is missing. `rivus orphans` lists no data file outside
//! the table after the kills, and lists a stray one put there.

#[path = "support/cdc.rs"]
mod cdc;
#[path = "support/kills.rs"]
mod kills;
#[path = "support/lake.rs"]
mod lake;
#[path = "support/run.rs"]
mod run;
#[path = "support/topics.rs"]
mod topics;

use rivus_testkit::services::{
    python_with, require, s3_credentials, s3_keys, s3_open_uploads, s3_put, unique_name, Service,
};
use run::rivus_succeeds;

/// The table's metadata files so far: one per commit (and one for its creation).
fn commits(endpoint: &str, table: &str) -> usize {
    s3_keys(endpoint, &format!("{table}/metadata/"))
        .iter()
        .filter(|k| k.ends_with(".metadata.json"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_to_iceberg_sigkilled_three_times_holds_every_record_once() {
    let (Some(kafka), Some(endpoint), Some(pg), Some(py)) = (
        require(Service::Kafka),
        require(Service::S3),
        require(Service::Postgres),
        python_with("pyiceberg.catalog.sql, psycopg2, pyarrow"),
    ) else {
        return;
    };
    let (bucket, access, secret) = s3_credentials();
    let dir = tempfile::tempdir().unwrap();
    let unique = unique_name("iceberg-kill").replace('-', "_");
    let n: u64 = 300_000;
    // A catalog of its own (its name) and a warehouse of its own: tests run side by side.
    let warehouse = format!("s3://{bucket}/{unique}");
    let file = lake::orders_into(
        dir.path(),
        &kafka,
        &unique,
        n,
        "200ms",
        &format!(
            "type = \"iceberg\"\n\
             catalog = {{ uri = \"{pg}\", warehouse = \"{warehouse}\", name = \"{unique}\" }}\n\
             table = \"lake.orders\"\n\
             s3 = {{ endpoint = \"{endpoint}\", access_key = \"{access}\", secret_key = \"{secret}\" }}"
        ),
    )
    .await;
    let table = format!("{unique}/lake/orders");
    kills::killed_after_commits(
        dir.path(),
        &file,
        || commits(&endpoint, &table),
        &[("RUST_LOG", "warn,rivus_connector_iceberg=info")],
    )
    .await;
    rivus_succeeds(dir.path(), &["run", file.to_str().unwrap()]);
    let script = r#"
import sys
from pyiceberg.catalog.sql import SqlCatalog
name, uri, warehouse, endpoint, access, secret = sys.argv[1:7]
catalog = SqlCatalog(name, uri=uri, warehouse=warehouse,
    **{"s3.endpoint": endpoint, "s3.access-key-id": access, "s3.secret-access-key": secret,
       "s3.region": "us-east-1"})
t = catalog.load_table("lake.orders")
scan = t.scan(selected_fields=("id",))
ids = scan.to_arrow().column("id").to_pylist()
print(len(ids), len(set(ids)), min(ids), max(ids), len(list(scan.plan_files())))
"#;
    let uri = pg.replacen("postgres://", "postgresql+psycopg2://", 1);
    lake::every_record_once(
        &py,
        script,
        &[&unique, &uri, &warehouse, &endpoint, &access, &secret],
        n,
    );
    assert_eq!(
        s3_open_uploads(&endpoint, &unique),
        0,
        "no upload left open"
    );

    // Nothing outside the table after the kills; a stray file is listed, by key.
    kills::orphans_listed(dir.path(), &file, "iceberg", || {
        s3_put(
            &endpoint,
            &format!("{table}/data/part-stray.parquet"),
            b"PAR1",
        )
    });
}
