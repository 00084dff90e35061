//! The file source: what the sink wrote to S3 (Parquet, gzip JSON lines, zstd CSV) read back
//! by two subtasks record for record; and the testkit's source conformance suite over a local
//! directory into which each write drops a new JSON lines file (continuous discovery).

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use rivus_connector_files::{Compression, FileFormat, FilesSource, ParquetCompression, ReadFormat};
use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::prelude::*;
use rivus_testkit::suite::{SourceExternal, SourceSuite};
use rivus_testkit::CollectingSink;
use serde_json::{json, Value};

async fn round_trip(format: FileFormat, read: ReadFormat) {
    let Some(b) = Bucket::new("files-source") else {
        return;
    };
    let n = 20_000;
    let fmt = format.clone();
    let sink = sink_into(&b, move |s| {
        s.format(fmt.clone())
            .path("kind={kind}/")
            .target_file_size(64 * 1024)
    });
    write_all(&b.prefix, n, sink).await;
    let collected = CollectingSink::<Value>::new();
    let out = collected.clone();
    let (url, opts) = (b.url(), b.options());
    Pipeline::new(format!("{}-read", b.prefix))
        .source("files", 2, move |_| {
            FilesSource::builder(&url, read)
                .s3(opts.clone())
                .build()
                .unwrap()
        })
        .sink("collect", 1, move |_| out.clone())
        .unwrap()
        .run()
        .await
        .unwrap();
    let got: BTreeMap<u64, Value> = collected
        .values()
        .into_iter()
        .map(|v| (v["id"].as_u64().unwrap(), v))
        .collect();
    assert_eq!(
        collected.values().len() as u64,
        n,
        "{format:?}: each record once"
    );
    assert_eq!(got.len() as u64, n, "{format:?}: every record");
    for i in [0, 1, 12_345, n - 1] {
        let (r, w) = (&got[&i], record(i));
        assert_eq!(r["name"], w["name"], "{format:?}");
        assert_eq!(r["kind"], w["kind"], "{format:?}");
        assert_eq!(r["price"].as_f64(), w["price"].as_f64(), "{format:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_source_reads_parquet_written_by_the_sink_on_s3() {
    round_trip(
        FileFormat::Parquet(ParquetCompression::Zstd),
        ReadFormat::Parquet,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_source_reads_compressed_json_lines_and_csv_written_by_the_sink_on_s3() {
    round_trip(
        FileFormat::JsonLines(Compression::Gzip),
        ReadFormat::JsonLines,
    )
    .await;
    round_trip(FileFormat::Csv(Compression::Zstd), ReadFormat::Csv).await;
}

/// A directory per case; each write is a new file, renamed into place whole.
struct Dir {
    root: tempfile::TempDir,
    case: PathBuf,
    files: AtomicUsize,
}

#[async_trait]
impl SourceExternal for Dir {
    type Source = FilesSource;

    async fn prepare(&mut self, _splits: usize) -> Result<()> {
        let n = self.files.fetch_add(1, Ordering::Relaxed);
        self.case = self.root.path().join(format!("case-{n}"));
        std::fs::create_dir_all(&self.case).unwrap();
        Ok(())
    }

    async fn write(&mut self, split: usize, records: &[String]) -> Result<()> {
        let text: String = records
            .iter()
            .map(|r| format!("{}\n", json!({ "v": r })))
            .collect();
        self.drop_file(split, &text);
        Ok(())
    }

    async fn write_bad(&mut self, split: usize) -> Result<bool> {
        self.drop_file(split, "{ this is not json\n");
        Ok(true)
    }

    fn create_source(&self, _: usize, _: usize, policy: ErrorPolicy) -> FilesSource {
        FilesSource::builder(
            format!("file://{}", self.case.display()),
            ReadFormat::JsonLines,
        )
        .discover(Duration::from_millis(50))
        .error_policy(policy)
        .build()
        .unwrap()
    }

    fn to_test_record(&self, record: &Value) -> String {
        record["v"].as_str().unwrap_or_default().to_owned()
    }

    /// Files of one split are read by the subtasks their keys hash to.
    fn preserves_order(&self) -> bool {
        false
    }
}

impl Dir {
    fn drop_file(&self, split: usize, text: &str) {
        let n = self.files.fetch_add(1, Ordering::Relaxed);
        let dir = self.case.join(format!("split-{split}"));
        std::fs::create_dir_all(&dir).unwrap();
        let tmp = self.case.join(format!(".{n}.tmp"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, dir.join(format!("{n:06}.jsonl"))).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_source_passes_the_conformance_suite() {
    let mut suite = SourceSuite::new(Dir {
        root: tempfile::tempdir().unwrap(),
        case: PathBuf::new(),
        files: AtomicUsize::new(0),
    })
    .records_per_split(100);
    if let Err(f) = suite.run_all().await {
        panic!("{f}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_source_reads_avro_written_by_the_sink_on_s3() {
    round_trip(
        FileFormat::Avro(rivus_connector_files::AvroCodec::Zstandard),
        ReadFormat::Avro,
    )
    .await;
}
