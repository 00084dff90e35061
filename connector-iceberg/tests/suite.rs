//! The testkit's sink conformance suite against the Iceberg sink: each case appends to a fresh
//! table of one column `v` in a SQL catalog on SQLite, its files on the local disk, created by
//! the sink; what the table holds is read back by pyiceberg through the same catalog, so only
//! committed snapshots count.

mod common;

use std::process::Command;

use rivus_connector_iceberg::{CatalogOptions, IcebergSink, IcebergSinkBuilder};
use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::prelude::*;
use rivus_testkit::suite::{SinkExternal, SinkSuite};
use serde_json::{json, Value};

struct Iceberg {
    py: String,
    dir: Option<tempfile::TempDir>,
}

impl Iceberg {
    fn dir(&self) -> &std::path::Path {
        self.dir.as_ref().expect("prepared").path()
    }
}

#[async_trait]
impl SinkExternal for Iceberg {
    type Record = Value;
    type Sink = IcebergSink;

    async fn prepare(&mut self) -> Result<()> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("wh")).unwrap();
        self.dir = Some(dir);
        Ok(())
    }

    fn create_sink(&self, _: usize, _: usize, policy: ErrorPolicy) -> IcebergSink {
        let dir = self.dir();
        let catalog = CatalogOptions::new(
            format!("sqlite://{}?mode=rwc", dir.join("catalog.db").display()),
            format!("file://{}", dir.join("wh").display()),
        );
        IcebergSinkBuilder::new(catalog, "suite.t")
            .create_table(true)
            .files(move |f| common::suite_files(f, policy.clone()))
            .build()
            .unwrap()
    }

    fn to_record(&self, test: &str) -> Value {
        json!({ "v": test })
    }

    fn bad_record(&self) -> Option<Value> {
        Some(json!({ "w": "not a column" }))
    }

    async fn read_back(&self) -> Result<Vec<String>> {
        let dir = self.dir();
        let script = r#"
import json, sys
from pyiceberg.catalog.sql import SqlCatalog
db, wh = sys.argv[1:3]
catalog = SqlCatalog("rivus", uri=f"sqlite:///{db}", warehouse=f"file://{wh}")
if catalog.table_exists("suite.t"):
    for v in catalog.load_table("suite.t").scan().to_arrow().column("v").to_pylist():
        print(json.dumps(v))
"#;
        let out = Command::new(&self.py)
            .args(["-c", script])
            .arg(dir.join("catalog.db"))
            .arg(dir.join("wh"))
            .output()
            .expect("python runs");
        assert!(
            out.status.success(),
            "pyiceberg failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<String>(l).unwrap())
            .collect())
    }

    /// A subtask's records spread over several files, which a reader returns in any order.
    fn preserves_order(&self) -> bool {
        false
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iceberg_sink_passes_the_conformance_suite() {
    let Some(py) = common::python() else { return };
    let mut suite = SinkSuite::new(Iceberg { py, dir: None }).records_per_split(200);
    if let Err(f) = suite.run_all().await {
        panic!("{f}");
    }
}
