//! The Iceberg sink next to the files sink writing the same Parquet (zstd, files of 64 MiB,
//! parts of 8 MiB) to S3 (SeaweedFS) in the same run, rounds alternating, checkpoints every
//! second: records/s and their ratio; the commit latency per checkpoint (from a checkpoint's
//! completion reaching the table to its snapshot committed in the SQL catalog on PostgreSQL);
//! the peak RSS of an Iceberg sink process; and how many files an hour 1 s checkpoints give.
//! Needs `dev/services up s3 postgres`.
//! `cargo bench -p rivus-connector-iceberg --bench table` (`RIVUS_BENCH_RECORDS`, default
//! 1 000 000).

#[path = "../../connector-files/benches/common/table.rs"]
mod table;

use rivus_connector_iceberg::{CatalogOptions, IcebergSink, IcebergSinkBuilder};
use rivus_testkit::services::{require, s3_credentials, Service};

/// A new table `bench.t` in a catalog of its own (named `prefix`), under `s3://…/prefix`.
fn iceberg_sink(prefix: &str, target: u64) -> IcebergSink {
    let (bucket, _, _) = s3_credentials();
    let pg = require(Service::Postgres).expect("the dev PostgreSQL: `dev/services up postgres`");
    let mut catalog = CatalogOptions::new(pg, format!("s3://{bucket}/{prefix}"));
    catalog.name = prefix.to_owned();
    IcebergSinkBuilder::new(catalog, "bench.t")
        .s3(table::s3())
        .create_table(true)
        .files(move |b| table::sized(b, target))
        .build()
        .unwrap()
}

fn main() {
    table::main(table::TableSink {
        name: "Iceberg",
        commit_seconds: "rivus_iceberg_commit_seconds",
        sink: iceberg_sink,
    });
}
