//! [`FileSink`]: appends lines to `part-<subtask>`, exactly-once by truncating to the
//! checkpointed length on restore.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use rivus_pipeline_file::format::Format;
use rivus_sdk::prelude::*;
use serde_json::Value;

/// Writes each record as a line of `dir/part-<subtask>`: a `String` as it is, a JSON record
/// in the sink's [`Format`].
#[derive(Debug)]
pub struct FileSink {
    dir: PathBuf,
    subtask: usize,
    format: Format,
    out: Option<BufWriter<File>>,
}

impl FileSink {
    /// Subtask `subtask`'s sink writing into `dir`.
    pub fn new(dir: impl Into<PathBuf>, subtask: usize) -> Self {
        FileSink {
            dir: dir.into(),
            subtask,
            format: Format::Json,
            out: None,
        }
    }

    /// How JSON records are written (default `json`; `text` writes a string record as its
    /// text).
    pub fn format(mut self, format: Format) -> Self {
        self.format = format;
        self
    }

    fn write_line(&mut self, line: &[u8]) -> Result<()> {
        let path = self.path_of(self.subtask);
        let w = self.writer();
        w.write_all(line)
            .and_then(|_| w.write_all(b"\n"))
            .map_err(|e| io("writing", &path, e))
    }

    fn path_of(&self, subtask: usize) -> PathBuf {
        self.dir.join(format!("part-{subtask}"))
    }

    fn writer(&mut self) -> &mut BufWriter<File> {
        self.out.as_mut().expect("opened")
    }
}

fn io(what: &str, path: &std::path::Path, e: std::io::Error) -> Error {
    Error::io(format!("{what} {}", path.display()), e)
}

#[async_trait]
impl RichFunction for FileSink {
    async fn open(&mut self, _: &RuntimeContext) -> Result<()> {
        let path = self.path_of(self.subtask);
        let f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| io("opening", &path, e))?;
        self.out = Some(BufWriter::new(f));
        Ok(())
    }

    async fn close(&mut self) -> Result<()> {
        if let Some(mut w) = self.out.take() {
            w.flush()
                .map_err(|e| io("flushing", &self.path_of(self.subtask), e))?;
        }
        Ok(())
    }
}

#[async_trait]
impl CheckpointedFunction for FileSink {
    /// Part file index → its length at the checkpoint.
    type State = Vec<(usize, u64)>;

    /// Truncates every part file this subtask inherits to its checkpointed length, and those
    /// no checkpoint covers (written by a run that crashed before its first checkpoint) to 0.
    async fn initialize_state(&mut self, restored: Restored<Self::State>) -> Result<()> {
        let share = restored.share();
        let lengths: std::collections::BTreeMap<usize, u64> = restored.union().flatten().collect();
        let parts = std::fs::read_dir(&self.dir).map_err(|e| io("listing", &self.dir, e))?;
        for part in parts.filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_prefix("part-")?
                .parse::<usize>()
                .ok()
        }) {
            if share.owns(part) {
                let path = self.path_of(part);
                let f = OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .map_err(|e| io("opening", &path, e))?;
                f.set_len(lengths.get(&part).copied().unwrap_or(0))
                    .map_err(|e| io("truncating", &path, e))?;
            }
        }
        Ok(())
    }

    async fn snapshot_state(&mut self, _: u64) -> Result<Self::State> {
        let path = self.path_of(self.subtask);
        let w = self.writer();
        w.flush().map_err(|e| io("flushing", &path, e))?;
        w.get_ref()
            .sync_data()
            .map_err(|e| io("syncing", &path, e))?;
        let len = w
            .get_ref()
            .metadata()
            .map_err(|e| io("reading", &path, e))?
            .len();
        Ok(vec![(self.subtask, len)])
    }
}

#[async_trait]
impl CheckpointListener for FileSink {}

#[async_trait]
impl SinkFunction<String> for FileSink {
    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::ExactlyOnce
    }

    async fn invoke(&mut self, value: String, _: &SinkContext) -> Result<()> {
        self.write_line(value.as_bytes())
    }

    async fn finish(&mut self) -> Result<()> {
        let path = self.path_of(self.subtask);
        self.writer().flush().map_err(|e| io("flushing", &path, e))
    }
}

#[async_trait]
impl SinkFunction<Value> for FileSink {
    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::ExactlyOnce
    }

    async fn invoke(&mut self, value: Value, _: &SinkContext) -> Result<()> {
        let line = self.format.to_vec(&value)?;
        self.write_line(&line)
    }

    async fn finish(&mut self) -> Result<()> {
        <Self as SinkFunction<String>>::finish(self).await
    }
}
