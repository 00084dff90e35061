//! The file sink on S3 (SeaweedFS) next to a hand-written `object_store` loop producing the
//! same bytes (JSON lines of the same records, multipart parts of the same size), in the same
//! run, rounds alternating; then Parquet alone, the peak RSS of a sink process, and how many
//! files an hour 1 s checkpoints give (files roll on size, not on checkpoints).
//! Needs `dev/services up s3`. `cargo bench -p rivus-connector-files --bench upload`
//! (`RIVUS_BENCH_RECORDS`, default 1 000 000; `RIVUS_BENCH_ROUNDS`, default 3).

// The table benches' shared part: the orders' columns and the dev S3 store.
#[allow(dead_code)]
#[path = "common/table.rs"]
mod table;

use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path;
use object_store::PutPayload;
use rivus_connector_files::{Compression, FileFormat, FilesSink, ParquetCompression};
use rivus_testkit::bench::{
    child_case, compare, order, peak_rss_mib, rounds, run_child, s3_endpoint,
};
use rivus_testkit::services::{s3_credentials, unique_name};

const PART: usize = 8 << 20;
const TARGET: u64 = 64 << 20;

fn client() -> Arc<AmazonS3> {
    let (bucket, access, secret) = s3_credentials();
    Arc::new(
        AmazonS3Builder::new()
            .with_endpoint(s3_endpoint())
            .with_allow_http(true)
            .with_bucket_name(bucket)
            .with_region("us-east-1")
            .with_access_key_id(access)
            .with_secret_access_key(secret)
            .build()
            .unwrap(),
    )
}

/// Records encoded as JSON lines into parts of `PART`, files of `TARGET`, one part in flight.
async fn raw(n: u64) -> f64 {
    let s3 = client();
    let prefix = unique_name("bench-raw");
    let t = Instant::now();
    let (mut file, mut parts, mut size, mut buf) = (
        0,
        Vec::<PartId>::new(),
        0u64,
        Vec::with_capacity(PART + 4096),
    );
    let mut path = Path::from(format!("{prefix}/part-{file}.jsonl"));
    let mut id = s3.create_multipart(&path).await.unwrap();
    for i in 0..n {
        serde_json::to_writer(&mut buf, &order(i)).unwrap();
        buf.push(b'\n');
        if buf.len() >= PART {
            size += buf.len() as u64;
            let bytes = std::mem::replace(&mut buf, Vec::with_capacity(PART + 4096));
            parts.push(
                s3.put_part(&path, &id, parts.len(), PutPayload::from(bytes))
                    .await
                    .unwrap(),
            );
            if size >= TARGET {
                s3.complete_multipart(&path, &id, std::mem::take(&mut parts))
                    .await
                    .unwrap();
                file += 1;
                size = 0;
                path = Path::from(format!("{prefix}/part-{file}.jsonl"));
                id = s3.create_multipart(&path).await.unwrap();
            }
        }
    }
    parts.push(
        s3.put_part(&path, &id, parts.len(), PutPayload::from(buf))
            .await
            .unwrap(),
    );
    s3.complete_multipart(&path, &id, parts).await.unwrap();
    n as f64 / t.elapsed().as_secs_f64()
}

fn sink(prefix: &str, format: FileFormat) -> FilesSink {
    let (bucket, _, _) = s3_credentials();
    FilesSink::builder(format!("s3://{bucket}/{prefix}"))
        .s3(table::s3())
        .format(format)
        .schema(table::columns())
        .target_file_size(TARGET)
        .part_size(PART)
        .build()
        .unwrap()
}

/// `n` records through the sink (checkpoints every `interval`, `per_second` when paced);
/// records per second, and how many files it made.
async fn rivus(
    n: u64,
    format: FileFormat,
    interval: Duration,
    per_second: Option<u64>,
) -> (f64, usize) {
    let prefix = unique_name("bench-rivus");
    let p = prefix.clone();
    let rate = table::orders_through(&prefix, n, interval, per_second, move || {
        sink(&p, format.clone())
    })
    .await;
    use futures::TryStreamExt;
    use object_store::ObjectStore;
    let listed: Vec<_> = client()
        .list(Some(&Path::from(prefix.as_str())))
        .try_collect()
        .await
        .unwrap();
    let files = listed
        .iter()
        .filter(|m| !m.location.as_ref().contains("/_rivus/"))
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
    if let Some(case) = child_case() {
        let format = match case.as_str() {
            "parquet" => FileFormat::Parquet(ParquetCompression::Zstd),
            _ => FileFormat::JsonLines(Compression::None),
        };
        let (rate, _) = rt.block_on(rivus(n, format, Duration::from_secs(1), None));
        println!("{rate:.0} {:.1}", peak_rss_mib().unwrap_or(f64::NAN));
        return;
    }
    // ~100 bytes a record.
    let mib = n as f64 * 100.0 / (1 << 20) as f64;
    let c = compare(
        &format!("{n} records as JSON lines (~{mib:.0} MiB) to S3, parts of 8 MiB, files of 64 MiB, checkpoints every second"),
        "rec/s",
        rounds(3),
        |_| rt.block_on(raw(n)),
        |_| rt.block_on(rivus(n, FileFormat::JsonLines(Compression::None), Duration::from_secs(1), None)).0,
    );
    let _ = c;
    // The same at 10 s checkpoints: what the sink's durability points cost at 1 s (the part in
    // flight awaited and a tail piece stored each second) shows as the difference.
    compare(
        &format!("{n} records as JSON lines to S3, the same, checkpoints every 10 seconds"),
        "rec/s",
        rounds(3),
        |_| rt.block_on(raw(n)),
        |_| {
            rt.block_on(rivus(
                n,
                FileFormat::JsonLines(Compression::None),
                Duration::from_secs(10),
                None,
            ))
            .0
        },
    );
    for case in ["jsonl", "parquet"] {
        let line = run_child(case, &[]);
        let mut it = line.split(' ');
        let (rate, rss) = (it.next().unwrap_or("?"), it.next().unwrap_or("?"));
        println!("sink process, {case}: {rate} rec/s, peak RSS {rss} MiB");
    }
    // Files at 1 s checkpoints: 40 s of 50 000 records/s, Parquet files of 64 MiB... and
    // small ones (1 MiB) to see them roll on size.
    let secs = 20u64;
    let rate = 50_000u64;
    let (_, files) = rt.block_on(rivus(
        secs * rate,
        FileFormat::Parquet(ParquetCompression::Zstd),
        Duration::from_secs(1),
        Some(rate),
    ));
    println!(
        "{secs} s at {rate} rec/s, 1 s checkpoints (~{secs} checkpoints): {files} Parquet file(s) of up to 64 MiB \
         ({:.0} files an hour at this rate; one per checkpoint would be 3600)",
        files as f64 * 3600.0 / secs as f64
    );
}
