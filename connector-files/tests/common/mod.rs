//! What the file tests share: a fresh prefix in the dev object store (listing, reading, and
//! counting multipart uploads left open through the S3 API itself), pyarrow as the independent
//! reader, and small jobs.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt};
use rivus_connector_files::{FilesSink, FilesSinkBuilder, S3Options};
use rivus_sdk::prelude::*;
use rivus_testkit::services::{require, s3_credentials, unique_name, Service};
use rivus_testkit::SequenceSource;
use serde_json::{json, Value};

/// A fresh prefix in the dev bucket.
pub(crate) struct Bucket {
    pub endpoint: String,
    pub bucket: String,
    pub access: String,
    pub secret: String,
    pub prefix: String,
    pub store: Arc<AmazonS3>,
}

impl Bucket {
    /// `None` when the store is not reachable and skipping was asked for.
    pub(crate) fn new(name: &str) -> Option<Bucket> {
        let endpoint = require(Service::S3)?;
        let (bucket, access, secret) = s3_credentials();
        let store = AmazonS3Builder::new()
            .with_endpoint(&endpoint)
            .with_allow_http(true)
            .with_bucket_name(&bucket)
            .with_region("us-east-1")
            .with_access_key_id(&access)
            .with_secret_access_key(&secret)
            .build()
            .unwrap();
        Some(Bucket {
            endpoint,
            bucket,
            access,
            secret,
            prefix: unique_name(name),
            store: Arc::new(store),
        })
    }

    pub(crate) fn url(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.prefix)
    }

    pub(crate) fn options(&self) -> S3Options {
        S3Options {
            endpoint: Some(self.endpoint.clone()),
            access_key: Some(self.access.clone()),
            secret_key: Some(self.secret.clone()),
            ..Default::default()
        }
    }

    /// Every key under the prefix (relative to it), sorted; `_rivus/` left out unless asked.
    pub(crate) async fn keys(&self, with_own: bool) -> Vec<(String, u64)> {
        let listed: Vec<_> = self
            .store
            .list(Some(&Key::from(self.prefix.as_str())))
            .try_collect()
            .await
            .unwrap();
        let mut keys: Vec<(String, u64)> = listed
            .into_iter()
            .map(|m| {
                let k = m.location.to_string();
                (k[self.prefix.len() + 1..].to_owned(), m.size)
            })
            .filter(|(k, _)| with_own || !k.starts_with("_rivus/"))
            .collect();
        keys.sort();
        keys
    }

    /// Downloads every data file into `dir`, keeping their relative paths; the local paths.
    pub(crate) async fn download(&self, dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for (k, _) in self.keys(false).await {
            let body = self
                .store
                .get(&Key::from(format!("{}/{k}", self.prefix)))
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap();
            let path = dir.join(&k);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &body).unwrap();
            out.push(path);
        }
        out
    }

    /// Multipart uploads in progress under the prefix, as S3 lists them.
    pub(crate) fn open_uploads(&self) -> usize {
        rivus_testkit::services::s3_open_uploads(&self.endpoint, &self.prefix)
    }
}

/// Python with pyarrow (`dev/python`), or a failure saying how to get it.
pub(crate) fn python() -> Option<String> {
    rivus_testkit::services::python_with("pyarrow.parquet")
}

const READ: &str = r##"
import json, sys
import pyarrow.parquet as pq, pyarrow.csv as pc, pyarrow.json as pj
fmt = sys.argv[1]
for path in sys.argv[2:]:
    if fmt == "parquet":
        t = pq.read_table(path)
    elif fmt == "csv":
        t = pc.read_csv(path)
    else:
        t = pj.read_json(path)
    print("#schema " + json.dumps({f.name: str(f.type) for f in t.schema}, sort_keys=True))
    for row in t.to_pylist():
        print(json.dumps(row, default=str, sort_keys=True))
"##;

/// What pyarrow reads from `files` (`parquet`, `csv` or `json`): each file's schema (column →
/// Arrow type) and every row.
pub(crate) fn pyarrow_read(py: &str, format: &str, files: &[PathBuf]) -> (Vec<Value>, Vec<Value>) {
    let out = Command::new(py)
        .args(["-c", READ, format])
        .args(files)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "pyarrow failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (mut schemas, mut rows) = (Vec::new(), Vec::new());
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        match line.strip_prefix("#schema ") {
            Some(s) => schemas.push(serde_json::from_str(s).unwrap()),
            None => rows.push(serde_json::from_str(line).unwrap()),
        }
    }
    (schemas, rows)
}

/// Every data file under `dir` (not `_rivus/`), sorted.
pub(crate) fn local_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                if !p.ends_with("_rivus") {
                    stack.push(p);
                }
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Record `i` of the tests: every column type.
pub(crate) fn record(i: u64) -> Value {
    let kind = ["a", "b", "c"][(i % 3) as usize];
    json!({
        "id": i,
        "name": format!("name-{i}"),
        "price": i as f64 / 4.0,
        "ok": i.is_multiple_of(2),
        "kind": kind,
        "day": format!("2024-03-{:02}", 1 + i % 28),
        "at": 1_709_287_200_000u64 + i,
        "tags": ["x", format!("t{}", i % 5)],
    })
}

/// The columns of `record`.
pub(crate) fn columns() -> Vec<rivus_connector_files::Column> {
    use rivus_connector_files::{Column, ColumnType as T};
    [
        ("id", T::Int64),
        ("name", T::String),
        ("price", T::Float64),
        ("ok", T::Boolean),
        ("kind", T::String),
        ("day", T::Date),
        ("at", T::Timestamp),
        ("tags", T::Json),
    ]
    .map(|(name, ty)| Column::nullable(name, ty))
    .into()
}

/// Sinks writing `record`'s columns into `b`, as `tune` sets the rest.
pub(crate) fn sink_into(
    b: &Bucket,
    tune: impl Fn(FilesSinkBuilder) -> FilesSinkBuilder + Clone + Send + Sync + 'static,
) -> impl Fn() -> FilesSink + Clone + Send + Sync + 'static {
    let (url, opts) = (b.url(), b.options());
    move || {
        tune(FilesSink::builder(&url).s3(opts.clone()).schema(columns()))
            .build()
            .unwrap()
    }
}

/// Writes `n` records through `sink` as fast as they come, checkpointed every 100 ms, to the
/// end.
pub(crate) async fn write_all(
    name: &str,
    n: u64,
    sink: impl Fn() -> FilesSink + Send + Sync + 'static,
) {
    job(
        name,
        n,
        None,
        Arc::default(),
        sink,
        &MemoryStateBackend::new(),
        Duration::from_millis(100),
    )
    .run()
    .await
    .unwrap();
}

/// `n` records of `record` (a sequence source, paced when `per_second` is given) into `sink`,
/// checkpoints every `interval` into `backend`.
pub(crate) fn job(
    name: &str,
    n: u64,
    per_second: Option<u64>,
    emitted: Arc<AtomicU64>,
    sink: impl Fn() -> FilesSink + Send + Sync + 'static,
    backend: &MemoryStateBackend,
    interval: Duration,
) -> Job {
    Pipeline::new(name)
        .checkpointing(CheckpointConfig::new(interval, Arc::new(backend.clone())))
        .batch_size(500)
        .source("seq", 1, move |i| {
            let s = SequenceSource::new(i, 1, Some(n), emitted.clone());
            match per_second {
                Some(r) => s.paced(r),
                None => s,
            }
        })
        .map(record)
        .sink("files", 1, move |_| sink())
        .unwrap()
}
