//! The dead-letter file: one JSON letter per line, fsynced before `send` returns, and read
//! back for inspection or replay.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use tokio::io::AsyncWriteExt;
use tokio::sync::Mutex;

use super::{DeadLetter, DeadLetterQueue};
use crate::error::{Error, Result};

/// A dead-letter queue writing JSON lines to a local file, fsynced before `send` returns.
#[derive(Debug)]
pub struct FileDeadLetterQueue {
    path: PathBuf,
    file: Mutex<tokio::fs::File>,
}

impl FileDeadLetterQueue {
    /// Opens (appending) or creates the file at `path`.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|e| Error::io(format!("creating dead-letter dir {}", dir.display()), e))?;
        }
        let file = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .await
            .map_err(|e| Error::io(format!("opening dead-letter file {}", path.display()), e))?;
        Ok(FileDeadLetterQueue {
            path,
            file: Mutex::new(file),
        })
    }

    /// Reads every letter stored in the file at `path`.
    pub async fn read_all(path: impl AsRef<Path>) -> Result<Vec<DeadLetter>> {
        let path = path.as_ref();
        let text = tokio::fs::read_to_string(path)
            .await
            .map_err(|e| Error::io(format!("reading dead-letter file {}", path.display()), e))?;
        text.lines()
            .enumerate()
            .map(|(i, l)| {
                serde_json::from_str(l).map_err(|e| Error::Record {
                    position: format!("{}:{}", path.display(), i + 1),
                    reason: e.to_string(),
                })
            })
            .collect()
    }
}

#[async_trait]
impl DeadLetterQueue for FileDeadLetterQueue {
    async fn send(&self, letter: DeadLetter) -> Result<()> {
        let mut line = letter.to_json();
        line.push(b'\n');
        let mut f = self.file.lock().await;
        let ctx = || format!("writing dead-letter file {}", self.path.display());
        f.write_all(&line).await.map_err(|e| Error::io(ctx(), e))?;
        f.sync_data().await.map_err(|e| Error::io(ctx(), e))?;
        Ok(())
    }
}
