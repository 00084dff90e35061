//! JSON lines and CSV on a local disk, plain and compressed (gzip, zstd frames that end at
//! every checkpoint), read back by pyarrow; records that cannot be placed or encoded go to the
//! error policy whole; nothing stays under `_rivus/`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use rivus_connector_files::{Compression, FileFormat, FilesSink};
use rivus_sdk::error_policy::{ErrorPolicy, FileDeadLetterQueue};
use rivus_sdk::prelude::*;
use serde_json::{json, Value};

async fn write_and_read(py: &str, format: FileFormat, reader: &str, ext: &str) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let fmt = format.clone();
    let sink = move || {
        FilesSink::builder(&url)
            .format(fmt.clone())
            .schema(columns())
            .path("day={day}/")
            .target_file_size(64 * 1024)
            .build()
            .unwrap()
    };
    let backend = MemoryStateBackend::new();
    let name = rivus_testkit::services::unique_name("lines");
    job(
        &name,
        6_000,
        None,
        Arc::default(),
        sink,
        &backend,
        Duration::from_millis(50),
    )
    .run()
    .await
    .unwrap();
    let found = local_files(dir.path());
    assert!(found.len() > 28, "28 days, rolled on size: {}", found.len());
    assert!(
        found.iter().all(|f| f.to_string_lossy().ends_with(ext)),
        "{found:?}"
    );
    let staged = dir.path().join("_rivus").join(&name).join("inprogress");
    let left = std::fs::read_dir(&staged).map_or(0, |d| d.flatten().count());
    assert_eq!(left, 0, "nothing in progress is left");
    let (_, mut rows) = pyarrow_read(py, reader, &found);
    rows.sort_by_key(|r| r["id"].as_u64());
    assert_eq!(rows.len(), 6_000);
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_lines_gzip_and_plain_on_a_local_disk_read_by_pyarrow() {
    let Some(py) = python() else { return };
    for (c, ext) in [
        (Compression::Gzip, ".jsonl.gz"),
        (Compression::None, ".jsonl"),
    ] {
        let rows = write_and_read(&py, FileFormat::JsonLines(c), "json", ext).await;
        for (i, r) in rows.iter().enumerate() {
            let w = record(i as u64);
            assert_eq!(r["id"], w["id"], "{c:?}");
            assert_eq!(r["name"], w["name"], "{c:?}");
            assert_eq!(
                r["tags"], w["tags"],
                "{c:?}: JSON lines keep records as they are"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csv_zstd_on_a_local_disk_read_by_pyarrow() {
    let Some(py) = python() else { return };
    let rows = write_and_read(&py, FileFormat::Csv(Compression::Zstd), "csv", ".csv.zst").await;
    for (i, r) in rows.iter().enumerate() {
        let w = record(i as u64);
        assert_eq!(r["name"], w["name"]);
        assert_eq!(r["ok"], w["ok"]);
        assert_eq!(
            r["day"], w["day"],
            "pyarrow reads the date column as a date"
        );
        assert_eq!(
            r["tags"],
            json!(w["tags"].to_string()),
            "json columns as their text"
        );
    }
}

/// Records without their partition field, or with a field outside the schema, go to the
/// dead-letter file with their content; the rest are written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_that_fit_no_file_go_to_the_error_policy_whole() {
    let dir = tempfile::tempdir().unwrap();
    let dlq_path = dir.path().join("dead.jsonl");
    let dlq = Arc::new(FileDeadLetterQueue::open(&dlq_path).await.unwrap());
    let url = format!("file://{}/out", dir.path().display());
    let sink = move || {
        FilesSink::builder(&url)
            .format(FileFormat::Csv(Compression::None))
            .schema(columns())
            .path("kind={kind}/")
            .error_policy(ErrorPolicy::DeadLetter(dlq.clone()))
            .build()
            .unwrap()
    };
    let mut bad_field = record(1);
    bad_field["surprise"] = json!(1);
    let mut no_kind = record(2);
    no_kind.as_object_mut().unwrap().remove("kind");
    let mut bad_type = record(3);
    bad_type["id"] = json!("three");
    let input = vec![record(0), bad_field, no_kind, bad_type, record(4)];
    let splits = Arc::new(vec![input]);
    Pipeline::new("bad-records")
        .source("in", 1, move |i| {
            rivus_testkit::VecSource::new(splits.clone(), i, 1)
        })
        .sink("files", 1, move |_| sink())
        .unwrap()
        .run()
        .await
        .unwrap();
    let letters = FileDeadLetterQueue::read_all(&dlq_path).await.unwrap();
    let reasons: Vec<String> = letters.iter().map(|l| l.reason.clone()).collect();
    assert_eq!(letters.len(), 3, "{reasons:?}");
    assert!(
        reasons.iter().any(|r| r.contains("`surprise`")),
        "{reasons:?}"
    );
    assert!(reasons.iter().any(|r| r.contains("`kind`")), "{reasons:?}");
    assert!(
        reasons.iter().any(|r| r.contains("cannot hold")),
        "{reasons:?}"
    );
    for l in &letters {
        let v: Value = serde_json::from_slice(&l.payload).unwrap();
        assert!(
            v["id"].is_number() || v["id"] == json!("three"),
            "content kept: {v}"
        );
    }
    let written: Vec<_> = local_files(&dir.path().join("out"));
    let text: String = written
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    assert!(text.contains("name-0") && text.contains("name-4"), "{text}");
    assert!(
        !text.contains("name-1") && !text.contains("name-3"),
        "{text}"
    );
}
