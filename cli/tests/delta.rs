//! Kafka → a Delta table on S3 through the `rivus` command: the job is SIGKILLed three times,
//! each time right after the table gained a version, and started again from its checkpoints;
//! the last run reads to the end. `deltalake` (delta-rs) then reads every record once — and
//! reading the table reads every file its log names, so none is missing. `rivus orphans`
//! lists no data file outside the log after the kills, and lists a stray one put there.

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

/// The versions in the table's log so far.
fn versions(endpoint: &str, table: &str) -> usize {
    s3_keys(endpoint, &format!("{table}/_delta_log/"))
        .iter()
        .filter(|k| k.ends_with(".json"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_to_delta_sigkilled_three_times_holds_every_record_once() {
    let (Some(kafka), Some(endpoint), Some(py)) = (
        require(Service::Kafka),
        require(Service::S3),
        python_with("deltalake, pyarrow"),
    ) else {
        return;
    };
    let (bucket, access, secret) = s3_credentials();
    let dir = tempfile::tempdir().unwrap();
    let unique = unique_name("delta-kill");
    let n: u64 = 150_000;
    let file = lake::orders_into(
        dir.path(),
        &kafka,
        &unique,
        n,
        "500ms",
        &format!(
            "type = \"delta\"\nurl = \"s3://{bucket}/{unique}\"\n\
             s3 = {{ endpoint = \"{endpoint}\", access_key = \"{access}\", secret_key = \"{secret}\" }}"
        ),
    )
    .await;
    kills::killed_after_commits(dir.path(), &file, || versions(&endpoint, &unique), &[]).await;
    rivus_succeeds(dir.path(), &["run", file.to_str().unwrap()]);
    let script = r#"
import os, sys
from deltalake import DeltaTable
uri, endpoint, access, secret = sys.argv[1:5]
t = DeltaTable(uri, storage_options={"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": access,
    "AWS_SECRET_ACCESS_KEY": secret, "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"})
ids = t.to_pyarrow_table(columns=["id"]).column("id").to_pylist()
print(len(ids), len(set(ids)), min(ids), max(ids), len(t.file_uris()))
sys.stdout.flush()
os._exit(0)
"#;
    let uri = format!("s3://{bucket}/{unique}");
    lake::every_record_once(&py, script, &[&uri, &endpoint, &access, &secret], n);
    assert_eq!(
        s3_open_uploads(&endpoint, &unique),
        0,
        "no upload left open"
    );

    // Nothing outside the log after the kills; a stray file is listed, by key.
    kills::orphans_listed(dir.path(), &file, "delta", || {
        s3_put(&endpoint, &format!("{unique}/part-stray.parquet"), b"PAR1")
    });
}
