//! The `file` sections of a pipeline file: `[source] type = "file"` and `[sink] type =
//! "file"`, so that a `rivus` built with this connector (see `examples/custom-rivus`) runs
//! it from a file like any built-in one.

use std::path::PathBuf;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use rivus_pipeline_file::format::Format;
use rivus_pipeline_file::{
    CatalogEntry, Health, SectionContext, SinkPlan, SinkSection, SourcePlan, SourceSection,
};
use rivus_sdk::{Error, Result};

use crate::{FileSink, FileSource};

/// `[source] type = "file"`: the lines of the files in `dir`.
#[derive(Debug, Clone, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileSourceSection {
    /// The directory whose files are read (each file a split).
    pub dir: PathBuf,
    /// How lines are read: `json` (default), `text` or `bytes`.
    #[serde(default)]
    pub format: Format,
    /// End once every line is read (default: keep watching the files).
    #[serde(default)]
    pub bounded: bool,
}

/// `[sink] type = "file"`: lines appended to `dir/part-<subtask>`.
#[derive(Debug, Clone, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileSinkSection {
    /// The directory of the part files (created before the job when missing).
    pub dir: PathBuf,
    /// How records are written: `json` (default), `text` or `bytes`.
    #[serde(default)]
    pub format: Format,
}

/// A directory's health: it exists and can be listed.
fn reach(dir: &std::path::Path) -> Health {
    let outcome = std::fs::read_dir(dir)
        .map(|entries| format!("{} file(s)", entries.count()))
        .map_err(|e| format!("cannot list: {e}"));
    Health::new("file", dir.display().to_string(), outcome)
}

#[async_trait::async_trait]
impl SourceSection for FileSourceSection {
    const TYPE: &'static str = "file";
    const CATALOG: CatalogEntry = CatalogEntry {
        summary: "the lines of the files in a directory (each file a split)",
        guarantee: "exactly-once (byte offsets in checkpoints)",
    };

    fn build(&self, ctx: &SectionContext) -> Result<SourcePlan> {
        let format = self.format;
        let decode =
            Arc::new(move |line: &[u8]| format.decode(line, &"line").map_err(|e| e.to_string()));
        let source = FileSource::<Value>::with_decoder(&self.dir, ctx.policy.clone(), decode)
            .bounded(self.bounded);
        Ok(SourcePlan::cloned(source))
    }

    async fn check(&self, _ctx: &SectionContext) -> Health {
        reach(&self.dir)
    }
}

#[async_trait::async_trait]
impl SinkSection for FileSinkSection {
    const TYPE: &'static str = "file";
    const CATALOG: CatalogEntry = CatalogEntry {
        summary: "lines appended to part files in a directory, one per subtask",
        guarantee: "exactly-once (part files cut back to their checkpointed length on restore)",
    };

    fn build(&self, _ctx: &SectionContext) -> Result<SinkPlan> {
        let (dir, format) = (self.dir.clone(), self.format);
        Ok(SinkPlan::per_subtask(move |i| {
            FileSink::new(&dir, i).format(format)
        }))
    }

    async fn check(&self, _ctx: &SectionContext) -> Health {
        reach(&self.dir)
    }

    async fn prepare(&self, _ctx: &SectionContext) -> Result<()> {
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| Error::config("dir", format!("cannot create: {e}")))
    }
}
