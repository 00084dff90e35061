//! A table sink (Delta, Iceberg) next to the files sink writing the same Parquet (zstd, files
//! of 64 MiB, parts of 8 MiB) to S3 in the same run, rounds alternating, checkpoints every
//! second: records/s and their ratio, the table sink process's peak RSS, the data files an
//! hour of 1 s checkpoints gives, and the commit latency per checkpoint. The benches of the
//! table connectors include this file (`#[path]`) and give their sink.

use std::sync::Arc;
use std::time::{Duration, Instant};

use metrics_util::debugging::DebuggingRecorder;
use rivus_connector_files::{
    Column, ColumnType, FileFormat, FilesSink, FilesSinkBuilder, ParquetCompression, S3Options,
};
use rivus_sdk::prelude::*;
use rivus_testkit::bench::{
    child_case, compare, histogram, order, peak_rss_mib, quantiles, rounds, run_child, s3_endpoint,
};
use rivus_testkit::services::{s3_credentials, s3_keys, unique_name};
use rivus_testkit::SequenceSource;

const PART: usize = 8 << 20;
const TARGET: u64 = 64 << 20;

/// The table sink of a bench: its name, the histogram of its commit latency, and the sink
/// writing a new table under `prefix` with files of `target` bytes.
pub(crate) struct TableSink {
    pub name: &'static str,
    pub commit_seconds: &'static str,
    pub sink: fn(prefix: &str, target: u64) -> FilesSink,
}

/// The columns of the generated orders.
pub(crate) fn columns() -> Vec<Column> {
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

/// The dev S3 store.
pub(crate) fn s3() -> S3Options {
    let (_, access, secret) = s3_credentials();
    S3Options {
        endpoint: Some(s3_endpoint()),
        access_key: Some(access),
        secret_key: Some(secret),
        ..Default::default()
    }
}

/// The files' options both sinks share; files close at `target` bytes.
pub(crate) fn sized(b: FilesSinkBuilder, target: u64) -> FilesSinkBuilder {
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

/// `n` records into a new table (`table`, files of `target` bytes) or files location,
/// checkpoints every second, `per_second` when paced: records per second, and the data files
/// made.
async fn run(n: u64, table: Option<(&TableSink, u64)>, per_second: Option<u64>) -> (f64, usize) {
    let prefix = unique_name(&match table {
        Some((t, _)) => format!("bench-{}", t.name.to_lowercase()),
        None => "bench-files".to_owned(),
    });
    let (p, make) = (prefix.clone(), table.map(|(t, target)| (t.sink, target)));
    let rate = orders_through(
        &prefix,
        n,
        Duration::from_secs(1),
        per_second,
        move || match make {
            Some((sink, target)) => sink(&p, target),
            None => files_sink(&p),
        },
    )
    .await;
    let files = s3_keys(&s3_endpoint(), &prefix)
        .iter()
        .filter(|k| k.ends_with(".parquet") && !k.contains("/_"))
        .count();
    (rate, files)
}

/// `n` orders (paced at `per_second` when given) through one subtask of the sink `sink` makes,
/// checkpoints every `interval`: records per second. Every record must be written.
pub(crate) async fn orders_through(
    name: &str,
    n: u64,
    interval: Duration,
    per_second: Option<u64>,
    sink: impl Fn() -> FilesSink + Send + Sync + 'static,
) -> f64 {
    let job = Pipeline::new(name)
        .checkpointing(CheckpointConfig::new(
            interval,
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
        .sink("out", 1, move |_| sink())
        .unwrap();
    let t = Instant::now();
    let summary = job.run().await.unwrap();
    let rate = n as f64 / t.elapsed().as_secs_f64();
    assert_eq!(summary.records_written, n);
    rate
}

/// The bench of `table` (`RIVUS_BENCH_RECORDS`, default 1 000 000).
pub(crate) fn main(table: TableSink) {
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
        let (rate, _) = rt.block_on(run(n, Some((&table, TARGET)), None));
        println!("{rate:.0} {:.1}", peak_rss_mib().unwrap_or(f64::NAN));
        return;
    }
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().unwrap();
    compare(
        &format!(
            "{n} records as Parquet (zstd) to S3, files of 64 MiB, checkpoints every second: \
             the files sink (left) and the {} sink (right)",
            table.name
        ),
        "rec/s",
        rounds(3),
        |_| rt.block_on(run(n, None, None)).0,
        |_| rt.block_on(run(n, Some((&table, TARGET)), None)).0,
    );
    let line = run_child(&table.name.to_lowercase(), &[]);
    let mut it = line.split(' ');
    let (rate, rss) = (it.next().unwrap_or("?"), it.next().unwrap_or("?"));
    println!(
        "{} sink process: {rate} rec/s, peak RSS {rss} MiB",
        table.name
    );
    // 20 s at 50 000 records/s, 1 s checkpoints: files roll on size, not per checkpoint; a
    // commit whenever a file closed, and at the end.
    let (secs, rate) = (20u64, 50_000u64);
    let (_, files) = rt.block_on(run(secs * rate, Some((&table, TARGET)), Some(rate)));
    println!(
        "{secs} s at {rate} rec/s, 1 s checkpoints: {files} data file(s) of up to 64 MiB \
         ({:.0} an hour at this rate; one per checkpoint would be 3600)",
        files as f64 * 3600.0 / secs as f64
    );
    // The commit latency per checkpoint: the same with files of 256 KiB, which close about
    // every checkpoint, so nearly every checkpoint commits.
    let earlier = histogram(&snapshotter, table.commit_seconds, 1e3);
    println!(
        "commit latency of the runs above: {} commits, {}",
        earlier.len(),
        quantiles(&earlier, "ms")
    );
    let (_, files) = rt.block_on(run(secs * rate, Some((&table, 256 << 10)), Some(rate)));
    let ms = histogram(&snapshotter, table.commit_seconds, 1e3);
    println!(
        "the same with files of 256 KiB: {files} data files; commit latency over {} commits: {}",
        ms.len(),
        quantiles(&ms, "ms")
    );
}
