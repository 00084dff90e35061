//! Parquet on S3 (SeaweedFS), read back by pyarrow: every record and every column type as
//! written, files rolled on size into partitions, and nothing left in progress.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use rivus_connector_files::{FileFormat, ParquetCompression};
use rivus_sdk::prelude::*;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parquet_files_on_s3_read_by_pyarrow_equal_what_was_written() {
    let (Some(b), Some(py)) = (Bucket::new("parquet-s3"), python()) else {
        return;
    };
    let n = 30_000;
    let sink = sink_into(&b, |s| {
        s.format(FileFormat::Parquet(ParquetCompression::Zstd))
            .path("kind={kind}/")
            .target_file_size(48 * 1024)
            .row_group_bytes(16 * 1024)
    });
    let emitted = Arc::default();
    let backend = MemoryStateBackend::new();
    let j = job(
        &b.prefix,
        n,
        None,
        emitted,
        sink,
        &backend,
        Duration::from_millis(100),
    );
    j.run().await.unwrap();

    let keys = b.keys(false).await;
    let per_kind = |k: &str| {
        keys.iter()
            .filter(|(key, _)| key.starts_with(&format!("kind={k}/")))
            .count()
    };
    assert!(
        per_kind("a") >= 2 && per_kind("b") >= 2 && per_kind("c") >= 2,
        "rolled on size: {keys:?}"
    );
    assert_eq!(
        keys.len(),
        per_kind("a") + per_kind("b") + per_kind("c"),
        "{keys:?}"
    );
    assert!(
        keys.iter().all(|(k, _)| k.ends_with(".parquet")),
        "{keys:?}"
    );

    let dir = tempfile::tempdir().unwrap();
    let files = b.download(dir.path()).await;
    let (schemas, rows) = pyarrow_read(&py, "parquet", &files);
    let want_schema = json!({
        "id": "int64", "name": "string", "price": "double", "ok": "bool", "kind": "string",
        "day": "date32[day]", "at": "timestamp[us, tz=+00:00]", "tags": "string"
    });
    assert!(
        schemas.iter().all(|s| *s == want_schema),
        "{:?}",
        schemas.first()
    );
    let by_id: BTreeMap<u64, Value> = rows
        .iter()
        .map(|r| (r["id"].as_u64().unwrap(), r.clone()))
        .collect();
    assert_eq!(rows.len() as u64, n, "every record once");
    assert_eq!(by_id.len() as u64, n, "every record once");
    for (i, r) in [0u64, 1, 7, 12_345, n - 1].iter().map(|&i| (i, &by_id[&i])) {
        let w = record(i);
        assert_eq!(r["name"], w["name"]);
        assert_eq!(r["price"].as_f64(), w["price"].as_f64());
        assert_eq!(r["ok"], w["ok"]);
        assert_eq!(r["kind"], w["kind"]);
        assert_eq!(r["day"], w["day"]);
        // pyarrow prints a timestamp as Python does: `2024-03-01 10:00:12.345000+00:00`
        // (the fraction only when there is one).
        let (secs, frac) = (i / 1000, i % 1000);
        let mut at = format!("2024-03-01 10:{:02}:{:02}", secs / 60, secs % 60);
        if frac > 0 {
            at.push_str(&format!(".{frac:03}000"));
        }
        assert_eq!(r["at"], json!(format!("{at}+00:00")), "{r}");
        assert_eq!(r["tags"], json!(w["tags"].to_string()));
    }
    assert_eq!(b.open_uploads(), 0, "no upload left open");
    let own: Vec<_> = b
        .keys(true)
        .await
        .into_iter()
        .filter(|(k, _)| k.starts_with("_rivus/"))
        .collect();
    assert!(
        own.is_empty(),
        "markers and tails are dropped once committed: {own:?}"
    );
}
