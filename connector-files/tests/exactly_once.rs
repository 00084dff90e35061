//! Exactly once through failures: jobs cancelled while files are open and rolled, restored from
//! their checkpoints — every record ends in exactly one committed file, every committed file
//! reads whole (Parquet footers included), and no upload is left open.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use rivus_connector_files::{Compression, FileFormat, FilesSinkBuilder, ParquetCompression};
use rivus_sdk::prelude::*;
use rivus_testkit::wait;

/// `n` records in `format` through cancels (when each attempt emitted `cancels[i]` records) and
/// restores (checkpoints every 100 ms); checks that nothing is left in progress, and downloads
/// the files.
#[allow(clippy::too_many_arguments)]
async fn through_cancels(
    b: &Bucket,
    n: u64,
    cancels: [u64; 2],
    format: FileFormat,
    ext: &str,
    path: &'static str,
    sized: impl Fn(FilesSinkBuilder) -> FilesSinkBuilder + Send + Sync + Copy + 'static,
) -> Vec<std::path::PathBuf> {
    let sink = sink_into(b, move |s| sized(s.format(format.clone()).path(path)));
    let backend = MemoryStateBackend::new();
    let ms = Duration::from_millis;
    wait::cut_then_finish(&cancels, |emitted| {
        job(
            &b.prefix,
            n,
            Some(40_000),
            emitted,
            sink.clone(),
            &backend,
            ms(100),
        )
    })
    .await;
    assert_eq!(b.open_uploads(), 0, "every upload completed or aborted");
    let keys = b.keys(false).await;
    assert!(keys.iter().all(|(k, _)| k.ends_with(ext)), "{keys:?}");
    let own: Vec<_> = b
        .keys(true)
        .await
        .into_iter()
        .filter(|(k, _)| k.contains("/uploads/"))
        .collect();
    assert!(own.is_empty(), "no marker of an upload left: {own:?}");
    let dir = tempfile::tempdir().unwrap().keep();
    b.download(&dir).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parquet_exactly_once_through_cancels_on_s3() {
    let (Some(b), Some(py)) = (Bucket::new("parquet-eo"), python()) else {
        return;
    };
    let files = through_cancels(
        &b,
        40_000,
        [8_000, 13_000],
        FileFormat::Parquet(ParquetCompression::Snappy),
        ".parquet",
        "kind={kind}/",
        |s| s.target_file_size(128 * 1024).row_group_bytes(32 * 1024),
    )
    .await;
    let (_, rows) = pyarrow_read(&py, "parquet", &files);
    let ids: Vec<u64> = rows.iter().map(|r| r["id"].as_u64().unwrap()).collect();
    let distinct: BTreeSet<u64> = ids.iter().copied().collect();
    assert_eq!(
        ids.len(),
        40_000,
        "each record once ({} distinct)",
        distinct.len()
    );
    assert_eq!(distinct, (0..40_000).collect(), "every record");
}

/// Files of several S3 parts: the restored ones end with their kept tails after the parts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_lines_of_several_parts_exactly_once_through_cancels_on_s3() {
    let (Some(b), Some(py)) = (Bucket::new("jsonl-eo"), python()) else {
        return;
    };
    let files = through_cancels(
        &b,
        100_000,
        [60_000, 15_000],
        FileFormat::JsonLines(Compression::None),
        ".jsonl",
        "",
        |s| s.target_file_size(12 << 20).part_size(5 << 20),
    )
    .await;
    // One file per attempt: each cancelled one committed by the restore as its checkpoint
    // held it; the first is larger than a part.
    assert_eq!(files.len(), 3, "{files:?}");
    let sizes: Vec<u64> = files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .collect();
    assert!(sizes[0] > 5 << 20, "{sizes:?}");
    let (_, rows) = pyarrow_read(&py, "json", &files);
    let ids: Vec<u64> = rows.iter().map(|r| r["id"].as_u64().unwrap()).collect();
    let distinct: BTreeSet<u64> = ids.iter().copied().collect();
    assert_eq!(
        ids.len(),
        100_000,
        "each record once ({} distinct)",
        distinct.len()
    );
    assert_eq!(distinct, (0..100_000).collect(), "every record");
}
