//! [`FileSource`]: lines of the files in a directory, byte offsets in checkpointed state.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::Duration;

use rivus_core::error_policy::{ErrorHandler, ErrorPolicy};
use rivus_core::prelude::*;

/// Reads `dir/*` line by line; file `k` (in name order) goes to subtask `k % parallelism`.
#[derive(Debug, Clone)]
pub struct FileSource {
    dir: PathBuf,
    policy: ErrorPolicy,
    handler: Option<ErrorHandler>,
    subtask: usize,
    parallelism: usize,
}

impl FileSource {
    /// A source over the files of `dir`; undecodable lines go to `policy`.
    pub fn new(dir: impl Into<PathBuf>, policy: ErrorPolicy) -> Self {
        FileSource {
            dir: dir.into(),
            policy,
            handler: None,
            subtask: 0,
            parallelism: 1,
        }
    }

    fn files(&self) -> Result<Vec<String>> {
        let mut names: Vec<String> = std::fs::read_dir(&self.dir)
            .map_err(|e| Error::io(format!("listing {}", self.dir.display()), e))?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        names.sort();
        Ok(names
            .into_iter()
            .enumerate()
            .filter(|(k, _)| k % self.parallelism == self.subtask)
            .map(|(_, n)| n)
            .collect())
    }

    /// Reads the complete lines of `name` from `offset`: (line bytes, offset after it).
    fn read_from(&self, name: &str, offset: u64) -> Result<Vec<(Vec<u8>, u64)>> {
        let path = self.dir.join(name);
        let mut f = std::fs::File::open(&path)
            .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
        f.seek(SeekFrom::Start(offset))
            .map_err(|e| Error::io(format!("seeking {}", path.display()), e))?;
        let mut buf = Vec::new();
        f.read_to_end(&mut buf)
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        let mut out = Vec::new();
        let mut start = 0;
        for (i, b) in buf.iter().enumerate() {
            if *b == b'\n' {
                out.push((buf[start..i].to_vec(), offset + i as u64 + 1));
                start = i + 1;
            }
        }
        Ok(out)
    }
}

#[async_trait]
impl RichFunction for FileSource {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        self.handler = Some(ErrorHandler::new(self.policy.clone(), ctx.display_name()));
        Ok(())
    }
}

#[async_trait]
impl SourceFunction for FileSource {
    type Out = String;
    /// File name → byte offset of the next line.
    type State = BTreeMap<String, u64>;

    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::ExactlyOnce
    }

    fn restore_state(&mut self, restored: Restored<Self::State>) -> Result<Self::State> {
        (self.subtask, self.parallelism) = (restored.subtask, restored.parallelism);
        Ok(restored.union().flatten().collect())
    }

    async fn run(&mut self, ctx: &mut SourceContext<String, Self::State>) -> Result<()> {
        let handler = self.handler.clone().expect("opened");
        // The restored state pools every old subtask's files: keep only ours, or our snapshot
        // would carry stale positions of files other subtasks now read.
        let owned = self.files()?;
        ctx.state_mut().retain(|name, _| owned.contains(name));
        while !ctx.is_stopping() {
            let mut progressed = false;
            for name in self.files()? {
                let offset = ctx.state().get(&name).copied().unwrap_or(0);
                for (line, next) in self.read_from(&name, offset)? {
                    ctx.state_mut().insert(name.clone(), next);
                    let position = format!("{name}@{offset}");
                    match String::from_utf8(line) {
                        Ok(s) => ctx.collect(s).await?,
                        Err(e) => {
                            handler
                                .handle(&position, "invalid UTF-8", e.as_bytes())
                                .await?
                        }
                    }
                    progressed = true;
                }
            }
            if !progressed
                && ctx
                    .wait_for(tokio::time::sleep(Duration::from_millis(10)))
                    .await?
                    .is_none()
            {
                break;
            }
        }
        Ok(())
    }
}
