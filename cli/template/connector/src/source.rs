//! [`FileSource`]: lines of the files in a directory, byte offsets in checkpointed state.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rivus_sdk::error_policy::{ErrorHandler, ErrorPolicy};
use rivus_sdk::prelude::*;

/// Turns one line (without its newline) into a record; `Err` says why it cannot.
pub type Decode<T> = Arc<dyn Fn(&[u8]) -> std::result::Result<T, String> + Send + Sync>;

/// Reads `dir/*` line by line; the files, in name order, are the splits, shared among the
/// subtasks by [`RuntimeContext::share`].
#[derive(Clone)]
pub struct FileSource<T = String> {
    dir: PathBuf,
    policy: ErrorPolicy,
    decode: Decode<T>,
    bounded: bool,
    handler: Option<ErrorHandler>,
    share: Share,
}

impl<T> std::fmt::Debug for FileSource<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileSource")
            .field("dir", &self.dir)
            .field("bounded", &self.bounded)
            .finish_non_exhaustive()
    }
}

impl FileSource<String> {
    /// A source of the UTF-8 lines of the files of `dir`; other lines go to `policy`.
    pub fn new(dir: impl Into<PathBuf>, policy: ErrorPolicy) -> Self {
        FileSource::with_decoder(
            dir,
            policy,
            Arc::new(|line: &[u8]| {
                String::from_utf8(line.to_vec()).map_err(|_| "invalid UTF-8".to_owned())
            }),
        )
    }
}

impl<T> FileSource<T> {
    /// A source of the lines of the files of `dir`, each turned into a record by `decode`;
    /// lines it refuses go to `policy`.
    pub fn with_decoder(dir: impl Into<PathBuf>, policy: ErrorPolicy, decode: Decode<T>) -> Self {
        FileSource {
            dir: dir.into(),
            policy,
            decode,
            bounded: false,
            handler: None,
            share: Share::whole(),
        }
    }

    /// Ends once every line of every file is read (default: keeps watching for new lines).
    pub fn bounded(mut self, bounded: bool) -> Self {
        self.bounded = bounded;
        self
    }

    fn files(&self) -> Result<Vec<String>> {
        let mut names: Vec<String> = std::fs::read_dir(&self.dir)
            .map_err(|e| Error::io(format!("listing {}", self.dir.display()), e))?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        names.sort();
        Ok(self.share.pick(names).collect())
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
impl<T: Send + 'static> RichFunction for FileSource<T> {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        // The files are split among this process's subtasks only: another worker would read
        // them again.
        ctx.refuse_worker_mode("the file source")?;
        self.share = ctx.share();
        self.handler = Some(ErrorHandler::new(self.policy.clone(), ctx.display_name()));
        Ok(())
    }
}

#[async_trait]
impl<T: Send + 'static> SourceFunction for FileSource<T> {
    type Out = T;
    /// File name → byte offset of the next line.
    type State = BTreeMap<String, u64>;

    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::ExactlyOnce
    }

    /// Every old subtask's positions, pooled: `run` keeps those of the files this subtask
    /// reads now, so the parallelism may change between runs.
    fn restore_state(&mut self, restored: Restored<Self::State>) -> Result<Self::State> {
        Ok(restored.union().flatten().collect())
    }

    async fn run(&mut self, ctx: &mut SourceContext<T, Self::State>) -> Result<()> {
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
                    match (self.decode)(&line) {
                        Ok(record) => ctx.collect(record).await?,
                        Err(reason) => handler.handle(&position, reason, &line).await?,
                    }
                    progressed = true;
                }
            }
            if !progressed && self.bounded {
                break;
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
