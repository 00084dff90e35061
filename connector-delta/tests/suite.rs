//! The testkit's sink conformance suite against the Delta sink: each case appends to a fresh
//! local table of one column `v`, created by the sink; what the table holds is read back by
//! `deltalake` (delta-rs), so only committed files count.

mod common;

use common::{python, Table};
use rivus_connector_delta::{DeltaSink, DeltaSinkBuilder};
use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::prelude::*;
use rivus_testkit::suite::{SinkExternal, SinkSuite};
use serde_json::{json, Value};

struct Delta {
    py: String,
    table: Option<Table>,
}

#[async_trait]
impl SinkExternal for Delta {
    type Record = Value;
    type Sink = DeltaSink;

    async fn prepare(&mut self) -> Result<()> {
        self.table = Some(Table::local());
        Ok(())
    }

    fn create_sink(&self, _: usize, _: usize, policy: ErrorPolicy) -> DeltaSink {
        let table = self.table.as_ref().expect("prepared");
        DeltaSinkBuilder::new(table.url())
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
        let table = self.table.as_ref().expect("prepared");
        let Table::Local(dir) = table else {
            unreachable!("a local table")
        };
        if !dir.path().join("_delta_log").exists() {
            return Ok(Vec::new());
        }
        Ok(table
            .read(&self.py)
            .rows
            .iter()
            .map(|r| r["v"].as_str().expect("a string column").to_owned())
            .collect())
    }

    /// A subtask's records spread over several files, which a reader returns in any order.
    fn preserves_order(&self) -> bool {
        false
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_sink_passes_the_conformance_suite() {
    let Some(py) = python() else { return };
    let mut suite = SinkSuite::new(Delta { py, table: None }).records_per_split(200);
    if let Err(f) = suite.run_all().await {
        panic!("{f}");
    }
}
