//! What the Iceberg tests share: a fresh catalog (its own name in the SQL catalog tables of the
//! dev PostgreSQL, or a namespace of its own in the dev REST catalog) and warehouse (a prefix
//! of the dev object store), pyiceberg as the independent reader through the same catalog,
//! and small jobs.

#![allow(dead_code)]

#[path = "../../../connector-files/tests/common/table_job.rs"]
mod table_job;
#[allow(unused_imports)] // each test binary uses a part
pub(crate) use table_job::{columns, record, suite_files, table_job};

use std::process::Command;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use rivus_connector_files::{FilesSinkBuilder, S3Options};
use rivus_connector_iceberg::{CatalogOptions, IcebergSink, IcebergSinkBuilder};
use rivus_sdk::prelude::*;
use rivus_testkit::services::{require, s3_credentials, unique_name, Service};
use serde_json::{json, Value};

/// A fresh catalog and warehouse on the dev PostgreSQL (or REST catalog) and object store.
#[derive(Clone)]
pub(crate) struct Lake {
    pub catalog: CatalogOptions,
    pub s3: S3Options,
    endpoint: String,
    /// pyiceberg's catalog type (`sql`, `rest`) and URI.
    pub kind: &'static str,
    py_uri: String,
    /// The namespace of this lake's tables.
    pub namespace: String,
}

impl Lake {
    /// A SQL catalog of its own on the dev PostgreSQL; `None` when a service is not reachable
    /// and skipping was asked for.
    pub(crate) fn new(name: &str) -> Option<Lake> {
        let pg = require(Service::Postgres)?;
        let (bucket, _, _) = s3_credentials();
        let unique = unique_name(name);
        let mut catalog = CatalogOptions::new(&pg, format!("s3://{bucket}/{unique}"));
        catalog.name = unique;
        let py_uri = pg.replacen("postgres://", "postgresql+psycopg2://", 1);
        Lake::with(catalog, "sql", py_uri, "lake".into())
    }

    /// A namespace of its own in the dev REST catalog (Nessie).
    pub(crate) fn rest(name: &str) -> Option<Lake> {
        let uri = require(Service::IcebergRest)?;
        let (bucket, _, _) = s3_credentials();
        let unique = unique_name(name).replace('-', "_");
        let catalog = CatalogOptions::new(&uri, format!("s3://{bucket}/nessie"));
        Lake::with(catalog, "rest", uri, unique)
    }

    fn with(
        catalog: CatalogOptions,
        kind: &'static str,
        py_uri: String,
        namespace: String,
    ) -> Option<Lake> {
        let endpoint = require(Service::S3)?;
        let (_, access, secret) = s3_credentials();
        Some(Lake {
            catalog,
            s3: S3Options {
                endpoint: Some(endpoint.clone()),
                access_key: Some(access),
                secret_key: Some(secret),
                ..Default::default()
            },
            endpoint,
            kind,
            py_uri,
            namespace,
        })
    }

    /// The lake's table `name`: `<namespace>.<name>`.
    pub(crate) fn table(&self, name: &str) -> String {
        format!("{}.{name}", self.namespace)
    }

    pub(crate) fn builder(&self, table: &str) -> IcebergSinkBuilder {
        IcebergSinkBuilder::new(self.catalog.clone(), table).s3(self.s3.clone())
    }

    /// What pyiceberg reads of `table` through the same catalog: its snapshots' summaries,
    /// its columns (name → type, with field ids), its data files, every row (sorted by `id`).
    pub(crate) fn read(&self, py: &str, table: &str) -> Read {
        let text = self.python(py, READ, table);
        let mut lines = text.lines();
        let head: Value = serde_json::from_str(lines.next().expect("a head line")).unwrap();
        let mut rows: Vec<Value> = lines.map(|l| serde_json::from_str(l).unwrap()).collect();
        rows.sort_by_key(|r| r["id"].as_i64());
        Read {
            location: head["location"].as_str().unwrap().to_owned(),
            properties: head["properties"].clone(),
            summaries: head["summaries"].as_array().unwrap().clone(),
            schema: head["schema"].clone(),
            files: head["files"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| (f[0].as_str().unwrap().to_owned(), f[1].as_u64().unwrap()))
                .collect(),
            rows,
        }
    }
}

impl Lake {
    /// What the Python `script` prints, run with the catalog's name, `table` and pyiceberg's
    /// options for the catalog (JSON) as its arguments; fails the test when it fails.
    pub(crate) fn python(&self, py: &str, script: &str, table: &str) -> String {
        let (_, access, secret) = s3_credentials();
        let options = json!({
            "type": self.kind,
            "uri": self.py_uri,
            "warehouse": self.catalog.warehouse,
            "s3.endpoint": self.endpoint,
            "s3.access-key-id": access,
            "s3.secret-access-key": secret,
            "s3.region": "us-east-1",
        });
        let out = Command::new(py)
            .args([
                "-c",
                script,
                &self.catalog.name,
                table,
                &options.to_string(),
            ])
            .output()
            .expect("python runs");
        assert!(
            out.status.success(),
            "pyiceberg failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

/// What pyiceberg read.
#[derive(Debug)]
pub(crate) struct Read {
    /// The table's location.
    pub location: String,
    /// The table's properties (a JSON object).
    pub properties: Value,
    /// Each snapshot's summary, oldest first.
    pub summaries: Vec<Value>,
    /// Column name → `"<id>:<type>"`.
    pub schema: Value,
    /// The data files the current snapshot names, sorted, with their sizes.
    pub files: Vec<(String, u64)>,
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

/// The reader: the table through pyiceberg's catalog of the same kind, its files through
/// pyarrow.
const READ: &str = r##"
import json, sys
from pyiceberg.catalog import load_catalog
name, table, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
t = load_catalog(name, **options).load_table(table)
scan = t.scan()
data = scan.to_arrow()
print(json.dumps({
    "location": t.location(),
    "properties": t.properties,
    "summaries": [dict(s.summary.additional_properties, operation=str(s.summary.operation))
                  for s in sorted(t.snapshots(), key=lambda s: s.sequence_number)],
    "schema": {f.name: "%d:%s" % (f.field_id, f.field_type) for f in t.schema().fields},
    "files": sorted([task.file.file_path, task.file.file_size_in_bytes]
                    for task in scan.plan_files()),
}))
for r in data.to_pylist():
    print(json.dumps(r, default=str, sort_keys=True))
"##;

/// Python with pyiceberg (`dev/python`), or a failure saying how to get it.
pub(crate) fn python() -> Option<String> {
    rivus_testkit::services::python_with(
        "pyiceberg.catalog.sql, pyiceberg.catalog.rest, psycopg2, pyarrow",
    )
}

/// Sinks creating (when missing) and appending to `table` of `lake`, as `tune` sets the files.
pub(crate) fn sink_into(
    lake: &Lake,
    table: &str,
    tune: impl Fn(FilesSinkBuilder) -> FilesSinkBuilder + Clone + Send + Sync + 'static,
) -> impl Fn() -> IcebergSink + Clone + Send + Sync + 'static {
    let lake = lake.clone();
    let table = table.to_owned();
    move || {
        let tune = tune.clone();
        lake.builder(&table)
            .create_table(true)
            .files(move |f| tune(f.schema(columns())))
            .build()
            .unwrap()
    }
}

/// `n` records `map` makes of a sequence (two source subtasks, paced when `per_second` is
/// given) into `sink` (two subtasks), checkpoints every 100 ms into `backend`.
pub(crate) fn job_of(
    map: fn(u64) -> Value,
    name: &str,
    n: u64,
    per_second: Option<u64>,
    emitted: Arc<AtomicU64>,
    sink: impl Fn() -> IcebergSink + Send + Sync + 'static,
    backend: &MemoryStateBackend,
) -> Job {
    table_job(
        map,
        name,
        n,
        2,
        per_second,
        emitted,
        ("iceberg", sink),
        backend,
    )
}
