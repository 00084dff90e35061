//! The Iceberg sink next to the files sink writing the same Parquet (zstd, files of 64 MiB,
//! parts of 8 MiB) to S3 (SeaweedFS) in the same run, rounds alternating, checkpoints every
//! second: records/s and their ratio; the commit latency per checkpoint (from a checkpoint's
//! completion reaching the table to its snapshot committed in the SQL catalog on PostgreSQL);
//! the peak RSS of an Iceberg sink process; and how many files an hour 1 s checkpoints give.
//! Needs `dev/services up s3 postgres`.
//! `cargo bench -p rivus-connector-iceberg --bench table` (`RIVUS_BENCH_RECORDS`, default
//! 1 000 000; `RIVUS_BENCH_ROUNDS`, default 3).

use std::sync::Arc;
use std::time::{Duration, Instant};

use metrics_util::debugging::DebuggingRecorder;
use rivus_connector_files::{
    Column, ColumnType, FileFormat, FilesSink, FilesSinkBuilder, ParquetCompression, S3Options,
};
use rivus_connector_iceberg::{CatalogOptions, IcebergSink, IcebergSinkBuilder};
use rivus_sdk::prelude::*;
use rivus_testkit::bench::{
    child_case, compare, histogram, order, peak_rss_mib, quantiles, rounds, run_child, s3_endpoint,
};
use rivus_testkit::services::{require, s3_credentials, s3_keys, unique_name, Service};
use rivus_testkit::SequenceSource;

const PART: usize = 8 << 20;
const TARGET: u64 = 64 << 20;

fn columns() -> Vec<Column> {
    [
        ("id", ColumnType::Int64),
        ("user", ColumnType::String),
        ("amount", ColumnType::Float64),
        ("status", ColumnType::String),
        ("ts", ColumnType::Timestamp),
    ]
    .map(|(name, ty)| Column::nullable(name, ty))
    .into()
}

fn s3() -> S3Options {
    let (_, access, secret) = s3_credentials();
    S3Options {
        endpoint: Some(s3_endpoint()),
        access_key: Some(access),
        secret_key: Some(secret),
        ..Default::default()
    }
}

/// The files' options both sinks share; files close at `target` bytes.
fn sized(b: FilesSinkBuilder, target: u64) -> FilesSinkBuilder {
    b.schema(columns()).target_file_size(target).part_size(PART)
}

fn files_sink(prefix: &str) -> FilesSink {
    let (bucket, _, _) = s3_credentials();
    sized(
        FilesSink::builder(format!("s3://{bucket}/{prefix}")),
        TARGET,
    )
    .s3(s3())
    .format(FileFormat::Parquet(ParquetCompression::Zstd))
    .build()
    .unwrap()
}

/// A new table `bench.t` in a catalog of its own (named `prefix`), under `s3://…/prefix`.
fn iceberg_sink(prefix: &str, target: u64) -> IcebergSink {
    let (bucket, _, _) = s3_credentials();
    let pg = require(Service::Postgres).expect("the dev PostgreSQL: `dev/services up postgres`");
    let mut catalog = CatalogOptions::new(pg, format!("s3://{bucket}/{prefix}"));
    catalog.name = prefix.to_owned();
    IcebergSinkBuilder::new(catalog, "bench.t")
        .s3(s3())
        .create_table(true)
        .files(move |b| sized(b, target))
        .build()
        .unwrap()
}

/// `n` records into a new table (`iceberg`, files of `target` bytes) or files location,
/// checkpoints every second, `per_second` when paced: records per second, and the data files
/// made.
async fn run(n: u64, iceberg: Option<u64>, per_second: Option<u64>) -> (f64, usize) {
    let prefix = unique_name(if iceberg.is_some() {
        "bench-iceberg"
    } else {
        "bench-files"
    });
    let p = prefix.clone();
    let job = Pipeline::new(prefix.as_str())
        .checkpointing(CheckpointConfig::new(
            Duration::from_secs(1),
            Arc::new(MemoryStateBackend::new()),
        ))
        .source("seq", 1, move |i| {
            let s = SequenceSource::new(i, 1, Some(n), Default::default());
            match per_second {
                Some(r) => s.paced(r),
                None => s,
            }
        })
        .map(order)
        .sink("out", 1, move |_| match iceberg {
            Some(target) => iceberg_sink(&p, target),
            None => files_sink(&p),
        })
        .unwrap();
    let t = Instant::now();
    let summary = job.run().await.unwrap();
    let rate = n as f64 / t.elapsed().as_secs_f64();
    assert_eq!(summary.records_written, n);
    let files = s3_keys(&s3_endpoint(), &prefix)
        .iter()
        .filter(|k| k.ends_with(".parquet") && !k.contains("/_"))
        .count();
    (rate, files)
}

fn main() {
    let n: u64 = std::env::var("RIVUS_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    if child_case().is_some() {
        let (rate, _) = rt.block_on(run(n, Some(TARGET), None));
        println!("{rate:.0} {:.1}", peak_rss_mib().unwrap_or(f64::NAN));
        return;
    }
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().unwrap();
    compare(
        &format!(
            "{n} records as Parquet (zstd) to S3, files of 64 MiB, checkpoints every second: \
             the files sink (left) and the Iceberg sink (right)"
        ),
        "rec/s",
        rounds(3),
        |_| rt.block_on(run(n, None, None)).0,
        |_| rt.block_on(run(n, Some(TARGET), None)).0,
    );
    let line = run_child("iceberg", &[]);
    let mut it = line.split(' ');
    let (rate, rss) = (it.next().unwrap_or("?"), it.next().unwrap_or("?"));
    println!("Iceberg sink process: {rate} rec/s, peak RSS {rss} MiB");
    // 20 s at 50 000 records/s, 1 s checkpoints: files roll on size, not per checkpoint; a
    // snapshot whenever a file closed, and at the end.
    let (secs, rate) = (20u64, 50_000u64);
    let (_, files) = rt.block_on(run(secs * rate, Some(TARGET), Some(rate)));
    println!(
        "{secs} s at {rate} rec/s, 1 s checkpoints: {files} data file(s) of up to 64 MiB \
         ({:.0} an hour at this rate; one per checkpoint would be 3600)",
        files as f64 * 3600.0 / secs as f64
    );
    // The commit latency per checkpoint: the same with files of 256 KiB, which close about
    // every checkpoint, so nearly every checkpoint commits.
    let name = "rivus_iceberg_commit_seconds";
    let earlier = histogram(&snapshotter, name, 1e3);
    println!(
        "commit latency of the runs above: {} commits, {}",
        earlier.len(),
        quantiles(&earlier, "ms")
    );
    let (_, files) = rt.block_on(run(secs * rate, Some(256 << 10), Some(rate)));
    let ms = histogram(&snapshotter, name, 1e3);
    println!(
        "the same with files of 256 KiB: {files} data files; commit latency over {} commits: {}",
        ms.len(),
        quantiles(&ms, "ms")
    );
}
