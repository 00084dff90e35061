//! The testkit's sink conformance suite against the file sink on S3 (CSV of one column `v`):
//! each case writes into a fresh prefix, and reads back only committed files.

mod common;

use common::Bucket;
use object_store::path::Path as Key;
use object_store::ObjectStoreExt;
use rivus_connector_files::{Column, ColumnType, Compression, FileFormat, FilesSink};
use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::prelude::*;
use rivus_testkit::suite::{SinkExternal, SinkSuite};
use serde_json::{json, Value};

struct Files {
    bucket: Option<Bucket>,
}

#[async_trait]
impl SinkExternal for Files {
    type Record = Value;
    type Sink = FilesSink;

    async fn prepare(&mut self) -> Result<()> {
        self.bucket = Bucket::new("files-suite");
        Ok(())
    }

    fn create_sink(&self, _: usize, _: usize, policy: ErrorPolicy) -> FilesSink {
        let b = self.bucket.as_ref().expect("prepared");
        FilesSink::builder(b.url())
            .s3(b.options())
            .format(FileFormat::Csv(Compression::None))
            .schema(vec![Column {
                name: "v".into(),
                ty: ColumnType::String,
                nullable: false,
                field_id: None,
            }])
            .target_file_size(4 * 1024)
            .error_policy(policy)
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
        let b = self.bucket.as_ref().expect("prepared");
        let mut out = Vec::new();
        for (k, _) in b.keys(false).await {
            let body = b
                .store
                .get(&Key::from(format!("{}/{k}", b.prefix)))
                .await
                .map_err(|e| Error::connector("s3", e.to_string()))?
                .bytes()
                .await
                .map_err(|e| Error::connector("s3", e.to_string()))?;
            let text = String::from_utf8_lossy(&body).into_owned();
            out.extend(text.lines().skip(1).map(str::to_owned));
        }
        Ok(out)
    }

    /// Records of a subtask spread over several files, read back in key order.
    fn preserves_order(&self) -> bool {
        false
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_sink_passes_the_conformance_suite() {
    if Bucket::new("files-suite").is_none() {
        return;
    }
    let mut suite = SinkSuite::new(Files { bucket: None }).records_per_split(200);
    if let Err(f) = suite.run_all().await {
        panic!("{f}");
    }
}
