//! The file connector certified by the rivus conformance suites.
use std::io::Write;

use rivus_example_file_connector::{FileSink, FileSource};
use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::prelude::*;
use rivus_testkit::suite::{SinkExternal, SinkSuite, SourceExternal, SourceSuite};

struct Dir(tempfile::TempDir);
fn fresh() -> Dir {
    Dir(tempfile::tempdir().unwrap())
}

#[async_trait]
impl SourceExternal for Dir {
    type Source = FileSource;
    async fn prepare(&mut self, splits: usize) -> Result<()> {
        *self = fresh();
        (0..splits).for_each(|s| {
            drop(std::fs::File::create(self.0.path().join(format!("split-{s}"))).unwrap())
        });
        Ok(())
    }
    async fn write(&mut self, split: usize, records: &[String]) -> Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(self.0.path().join(format!("split-{split}")))
            .unwrap();
        let lines: String = records.iter().map(|r| format!("{r}\n")).collect();
        f.write_all(lines.as_bytes())
            .map_err(|e| Error::io("appending test lines", e))
    }
    fn create_source(&self, _: usize, _: usize, policy: ErrorPolicy) -> FileSource {
        FileSource::new(self.0.path(), policy)
    }
    fn to_test_record(&self, record: &String) -> String {
        record.clone()
    }
}

#[async_trait]
impl SinkExternal for Dir {
    type Record = String;
    type Sink = FileSink;
    async fn prepare(&mut self) -> Result<()> {
        *self = fresh();
        Ok(())
    }
    fn create_sink(&self, subtask: usize, _: usize, _: ErrorPolicy) -> FileSink {
        FileSink::new(self.0.path(), subtask)
    }
    fn to_record(&self, test: &str) -> String {
        test.to_owned()
    }
    fn preserves_order(&self) -> bool {
        false
    } // a split's lines spread over part files on rescale
    async fn read_back(&self) -> Result<Vec<String>> {
        let files = std::fs::read_dir(self.0.path())
            .unwrap()
            .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap());
        Ok(files
            .flat_map(|t| t.lines().map(str::to_owned).collect::<Vec<_>>())
            .collect())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_source_is_certified() {
    let report = SourceSuite::new(fresh())
        .run_all()
        .await
        .unwrap_or_else(|f| panic!("{f}"));
    // Files keep no consumer positions: a start without a checkpoint reads them again.
    assert_eq!(
        report.skipped().iter().map(|(c, _)| *c).collect::<Vec<_>>(),
        [
            "source::restart_without_checkpoint",
            "source::restart_without_checkpoint",
            "source::bad_records"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_sink_is_certified() {
    SinkSuite::new(fresh())
        .run_all()
        .await
        .unwrap_or_else(|f| panic!("{f}"));
}
