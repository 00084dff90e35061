//! What the Delta tests share: a fresh table (a local directory or a prefix of the dev object
//! store), the `deltalake` Python package as the independent reader, and small jobs.

#![allow(dead_code)]

#[path = "../../../connector-files/tests/common/table_job.rs"]
mod table_job;
#[allow(unused_imports)] // each test binary uses a part
pub(crate) use table_job::{columns, record, suite_files, table_job};

use std::process::Command;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use rivus_connector_delta::{DeltaSink, DeltaSinkBuilder};
use rivus_connector_files::{Column, ColumnType, FilesSinkBuilder, S3Options};
use rivus_sdk::prelude::*;
use rivus_testkit::services::{require, s3_credentials, unique_name, Service};
use serde_json::{json, Value};

/// Where a test's table is.
pub(crate) enum Table {
    Local(tempfile::TempDir),
    S3 {
        url: String,
        s3: S3Options,
        endpoint: String,
    },
}

impl Table {
    pub(crate) fn local() -> Table {
        Table::Local(tempfile::tempdir().unwrap())
    }

    /// A fresh prefix of the dev bucket; `None` when the store is not reachable and skipping
    /// was asked for.
    pub(crate) fn s3(name: &str) -> Option<Table> {
        let endpoint = require(Service::S3)?;
        let (bucket, access, secret) = s3_credentials();
        Some(Table::S3 {
            url: format!("s3://{bucket}/{}", unique_name(name)),
            s3: S3Options {
                endpoint: Some(endpoint.clone()),
                access_key: Some(access),
                secret_key: Some(secret),
                ..Default::default()
            },
            endpoint,
        })
    }

    pub(crate) fn url(&self) -> String {
        match self {
            Table::Local(d) => format!("file://{}", d.path().display()),
            Table::S3 { url, .. } => url.clone(),
        }
    }

    pub(crate) fn builder(&self) -> DeltaSinkBuilder {
        let b = DeltaSinkBuilder::new(self.url());
        match self {
            Table::Local(_) => b,
            Table::S3 { s3, .. } => b.s3(s3.clone()),
        }
    }

    /// What `deltalake` reads: the table's version, its columns (name → Arrow type), its
    /// data files, every row (sorted by `id`).
    pub(crate) fn read(&self, py: &str) -> Read {
        let (uri, options) = match self {
            Table::Local(d) => (d.path().display().to_string(), json!({})),
            Table::S3 { url, endpoint, .. } => {
                let (_, access, secret) = s3_credentials();
                (
                    url.clone(),
                    json!({
                        "AWS_ENDPOINT_URL": endpoint,
                        "AWS_ACCESS_KEY_ID": access,
                        "AWS_SECRET_ACCESS_KEY": secret,
                        "AWS_REGION": "us-east-1",
                        "AWS_ALLOW_HTTP": "true",
                    }),
                )
            }
        };
        let out = Command::new(py)
            .args(["-c", READ, &uri, &options.to_string()])
            .output()
            .expect("python runs");
        assert!(
            out.status.success(),
            "deltalake failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let mut lines = text.lines();
        let head: Value = serde_json::from_str(lines.next().expect("a head line")).unwrap();
        let mut rows: Vec<Value> = lines.map(|l| serde_json::from_str(l).unwrap()).collect();
        rows.sort_by_key(|r| r["id"].as_i64());
        Read {
            version: head["version"].as_i64().unwrap(),
            schema: head["schema"].clone(),
            files: head["files"].as_array().unwrap().len() as u64,
            uris: head["files"]
                .as_array()
                .unwrap()
                .iter()
                .map(|u| u.as_str().unwrap().to_owned())
                .collect(),
            rows,
        }
    }
}

/// What `deltalake` read.
#[derive(Debug)]
pub(crate) struct Read {
    pub version: i64,
    pub schema: Value,
    pub files: u64,
    /// The data files' URIs, sorted.
    pub uris: Vec<String>,
    pub rows: Vec<Value>,
}

impl Read {
    /// The `id`s read, in order.
    pub(crate) fn ids(&self) -> Vec<u64> {
        self.rows
            .iter()
            .map(|r| r["id"].as_u64().unwrap())
            .collect()
    }
}

/// The reader: the table through `deltalake` (delta-rs).
const READ: &str = r##"
import json, os, sys
from deltalake import DeltaTable
uri, options = sys.argv[1], json.loads(sys.argv[2]) or None
t = DeltaTable(uri, storage_options=options)
data = t.to_pyarrow_table()
print(json.dumps({
    "version": t.version(),
    "schema": {f.name: str(f.type) for f in data.schema},
    "files": sorted(t.file_uris()),
}))
for r in data.to_pylist():
    print(json.dumps(r, default=str, sort_keys=True))
# Out without the interpreter's teardown, where delta-rs's runtime threads now and then end
# the process with "terminate called without an active exception" after the answer is out.
sys.stdout.flush()
os._exit(0)
"##;

/// Python with `deltalake` (`dev/python`), or a failure saying how to get it.
pub(crate) fn python() -> Option<String> {
    rivus_testkit::services::python_with("deltalake, pyarrow")
}

/// Sinks creating (when missing) and appending to `table`, as `tune` sets the files.
pub(crate) fn sink_into(
    table: &Table,
    tune: impl Fn(FilesSinkBuilder) -> FilesSinkBuilder + Clone + Send + Sync + 'static,
) -> impl Fn() -> DeltaSink + Clone + Send + Sync + 'static {
    let (url, s3) = match table {
        Table::Local(_) => (table.url(), None),
        Table::S3 { s3, .. } => (table.url(), Some(s3.clone())),
    };
    move || {
        let tune = tune.clone();
        let mut b = DeltaSinkBuilder::new(&url)
            .create_table(true)
            .files(move |f| tune(f.schema(columns())));
        if let Some(s3) = &s3 {
            b = b.s3(s3.clone());
        }
        b.build().unwrap()
    }
}

/// `n` records of `record` (a sequence source of `parallelism` subtasks, paced when
/// `per_second` is given) into `sink` (as many subtasks), checkpoints every 100 ms into
/// `backend`.
pub(crate) fn job(
    name: &str,
    n: u64,
    parallelism: usize,
    per_second: Option<u64>,
    emitted: Arc<AtomicU64>,
    sink: impl Fn() -> DeltaSink + Send + Sync + 'static,
    backend: &MemoryStateBackend,
) -> Job {
    job_of(
        record,
        name,
        n,
        parallelism,
        per_second,
        emitted,
        sink,
        backend,
    )
}

/// As [`job`], with the records `map` makes of the sequence.
#[allow(clippy::too_many_arguments)]
pub(crate) fn job_of(
    map: fn(u64) -> Value,
    name: &str,
    n: u64,
    parallelism: usize,
    per_second: Option<u64>,
    emitted: Arc<AtomicU64>,
    sink: impl Fn() -> DeltaSink + Send + Sync + 'static,
    backend: &MemoryStateBackend,
) -> Job {
    table_job(
        map,
        name,
        n,
        parallelism,
        per_second,
        emitted,
        ("delta", sink),
        backend,
    )
}

/// The application transactions (`txn`: app id → version) of a local table's log, from its
/// JSON commits.
pub(crate) fn local_txns(dir: &std::path::Path) -> std::collections::BTreeMap<String, Vec<i64>> {
    let mut out: std::collections::BTreeMap<String, Vec<i64>> = Default::default();
    let mut commits: Vec<_> = std::fs::read_dir(dir.join("_delta_log"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    commits.sort();
    for c in commits {
        for line in std::fs::read_to_string(&c).unwrap().lines() {
            let action: Value = serde_json::from_str(line).unwrap();
            if let Some(t) = action.get("txn") {
                out.entry(t["appId"].as_str().unwrap().to_owned())
                    .or_default()
                    .push(t["version"].as_i64().unwrap());
            }
        }
    }
    out
}

/// The columns of the tables changes are applied to by key: `id` (not null), `name`, `n`,
/// `doc`.
pub(crate) fn keyed_columns() -> Vec<Column> {
    vec![
        Column {
            name: "id".into(),
            ty: ColumnType::Int64,
            nullable: false,
            field_id: None,
        },
        Column::nullable("name", ColumnType::String),
        Column::nullable("n", ColumnType::Int64),
        Column::nullable("doc", ColumnType::String),
    ]
}

/// A sink applying changes by `id` to `url` (files of about 32 KiB), created when missing.
pub(crate) fn keyed_sink(url: String) -> impl Fn() -> DeltaSink + Clone + Send + Sync {
    move || {
        DeltaSinkBuilder::new(&url)
            .create_table(true)
            .apply_changes(vec!["id".into()])
            .files(|f| f.schema(keyed_columns()).target_file_size(32 * 1024))
            .build()
            .unwrap()
    }
}

/// Insert `i`: key `i` in order (for [`keyed_sink`]).
pub(crate) fn keyed_insert(i: u64) -> Value {
    json!({"op": "c", "before": null, "source": {"table": "t"},
        "after": {"id": i, "name": format!("name-{i}"), "n": 0, "doc": "x".repeat(40)}})
}
