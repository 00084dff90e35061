//! The Delta sink next to the files sink writing the same Parquet (zstd, files of 64 MiB,
//! parts of 8 MiB) to S3 (SeaweedFS) in the same run, rounds alternating, checkpoints every
//! second: records/s and their ratio; the commit latency per checkpoint (the time from a
//! checkpoint's completion reaching the table to its version being written, log checkpoints
//! included); the peak RSS of a Delta sink process; and how many files an hour 1 s checkpoints
//! give. Needs `dev/services up s3`.
//! `cargo bench -p rivus-connector-delta --bench table` (`RIVUS_BENCH_RECORDS`, default
//! 1 000 000).

#[path = "../../connector-files/benches/common/table.rs"]
mod table;

use rivus_connector_delta::{DeltaSink, DeltaSinkBuilder};
use rivus_testkit::services::s3_credentials;

fn delta_sink(prefix: &str, target: u64) -> DeltaSink {
    let (bucket, _, _) = s3_credentials();
    DeltaSinkBuilder::new(format!("s3://{bucket}/{prefix}"))
        .s3(table::s3())
        .create_table(true)
        .files(move |b| table::sized(b, target))
        .build()
        .unwrap()
}

fn main() {
    table::main(table::TableSink {
        name: "Delta",
        commit_seconds: "rivus_delta_commit_seconds",
        sink: delta_sink,
    });
}
