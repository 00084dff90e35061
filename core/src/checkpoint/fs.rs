//! [`FsStateBackend`]: checkpoints as files in a local directory, written atomically (temp
//! file, fsync, rename, fsync of the directory), checksummed, with the newest N retained; a
//! running job holds the directory through an exclusive lock on its `.owner` file.

use std::io::Write;
use std::path::{Path, PathBuf};

use async_trait::async_trait;

use super::{format, CompletedCheckpoint, Holder, OnDamaged, OwnerLock, StateBackend};
use crate::error::{Error, Result};

/// Stores each checkpoint as `chk-<id>.ckpt` in a directory.
///
/// Each file is one checkpoint in core's [format](super::format). A file whose length or
/// checksum does not match (a torn write, a damaged disk) stops the restore, naming it; with
/// [`OnDamaged::RestoreOlder`] it is skipped with a warning and the next older one is used.
#[derive(Debug, Clone)]
pub struct FsStateBackend {
    dir: PathBuf,
    retain: usize,
    on_damaged: OnDamaged,
}

impl FsStateBackend {
    /// A backend writing into `dir` (created if missing), keeping the newest `retain`
    /// checkpoints (at least 1).
    pub fn new(dir: impl Into<PathBuf>, retain: usize) -> Result<Self> {
        let dir = dir.into();
        if retain == 0 {
            return Err(Error::config("checkpoint.retain", "must be at least 1"));
        }
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::io(format!("creating checkpoint dir {}", dir.display()), e))?;
        Ok(FsStateBackend {
            dir,
            retain,
            on_damaged: OnDamaged::default(),
        })
    }

    /// What a restore does when the newest checkpoint cannot be read (default: refuse).
    pub fn on_damaged(mut self, on: OnDamaged) -> Self {
        self.on_damaged = on;
        self
    }

    /// The directory written to.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn file_name(id: u64) -> String {
        format!("chk-{id:020}.ckpt")
    }

    /// Ids of the checkpoint files present, newest first.
    fn list(&self) -> Result<Vec<(u64, PathBuf)>> {
        let entries = std::fs::read_dir(&self.dir)
            .map_err(|e| Error::io(format!("listing {}", self.dir.display()), e))?;
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if let Some(id) = name
                .strip_prefix("chk-")
                .and_then(|s| s.strip_suffix(".ckpt"))
                .and_then(|s| s.parse::<u64>().ok())
            {
                out.push((id, entry.path()));
            }
        }
        out.sort_by_key(|e| std::cmp::Reverse(e.0));
        Ok(out)
    }

    fn write_atomically(&self, checkpoint: &CompletedCheckpoint) -> Result<u64> {
        let id = checkpoint.checkpoint_id;
        let bytes = format::encode(checkpoint)?;
        let tmp = self.dir.join(format!(".chk-{id:020}.tmp"));
        let target = self.dir.join(Self::file_name(id));
        let io = |what: &str, e| Error::checkpoint(id, format!("{what} {}: {e}", tmp.display()));
        let mut f = std::fs::File::create(&tmp).map_err(|e| io("creating", e))?;
        f.write_all(&bytes).map_err(|e| io("writing", e))?;
        f.sync_all().map_err(|e| io("syncing", e))?;
        drop(f);
        std::fs::rename(&tmp, &target).map_err(|e| io("renaming", e))?;
        if let Ok(d) = std::fs::File::open(&self.dir) {
            let _ = d.sync_all();
        }
        for (old, path) in self.list()?.into_iter().skip(self.retain) {
            if let Err(e) = std::fs::remove_file(&path) {
                tracing::warn!(checkpoint = old, path = %path.display(), error = %e, "could not remove old checkpoint");
            }
        }
        Ok(bytes.len() as u64)
    }

    /// Reads and verifies one checkpoint file.
    pub fn read_file(path: &Path) -> std::result::Result<CompletedCheckpoint, String> {
        let data = std::fs::read(path).map_err(|e| e.to_string())?;
        format::decode(&data)
    }
}

#[async_trait]
impl StateBackend for FsStateBackend {
    async fn store(&self, checkpoint: &CompletedCheckpoint) -> Result<u64> {
        let this = self.clone();
        let cp = checkpoint.clone();
        tokio::task::spawn_blocking(move || this.write_atomically(&cp))
            .await
            .map_err(|e| Error::checkpoint(checkpoint.checkpoint_id, e))?
    }

    async fn latest(&self, job: &str) -> Result<Option<CompletedCheckpoint>> {
        let this = self.clone();
        let job = job.to_owned();
        tokio::task::spawn_blocking(move || {
            for (id, path) in this.list()? {
                match Self::read_file(&path) {
                    Ok(cp) if cp.job == job => return Ok(Some(cp)),
                    Ok(cp) => {
                        tracing::warn!(path = %path.display(), found = %cp.job, expected = %job,
                        "skipping checkpoint of another job")
                    }
                    Err(why) => this
                        .on_damaged
                        .damaged(id, &path.display().to_string(), &why)?,
                }
            }
            Ok(None)
        })
        .await
        .map_err(|e| Error::checkpoint(0, e))?
    }

    /// An exclusive lock (`flock`) on `<dir>/.owner`, which names the holder. The system
    /// releases it when the process ends, however it ends (SIGKILL included), so a stale
    /// holder never blocks a restart; `.owner` keeps the last holder's name, which only
    /// explains a refusal.
    async fn lock(&self, holder: &Holder) -> Result<OwnerLock> {
        let path = self.dir.join(".owner");
        let store = self.describe();
        let holder = holder.clone();
        tokio::task::spawn_blocking(move || {
            let io = |what: &str, e| Error::io(format!("{what} {}", path.display()), e);
            let mut file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(|e| io("opening", e))?;
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => {
                    let other = std::fs::read_to_string(&path).unwrap_or_default();
                    let other = serde_json::from_str::<Holder>(&other)
                        .map_or_else(|_| "another process".to_owned(), |h| h.to_string());
                    return Err(Error::owner(
                        store,
                        format!(
                            "held by {other}; stop that process first (one job, one owner;                              several processes share a job only as workers, `--worker ID`)"
                        ),
                    ));
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(io("locking", e)),
            }
            let text = serde_json::to_string(&holder).map_err(|e| Error::owner(&store, e))?;
            file.set_len(0).map_err(|e| io("writing", e))?;
            file.write_all(text.as_bytes())
                .and_then(|()| file.sync_all())
                .map_err(|e| io("writing", e))?;
            Ok(OwnerLock::new(file))
        })
        .await
        .map_err(|e| Error::owner(self.describe(), e))?
    }

    /// `<dir>/local`: files that checkpoints refer to live next to them.
    fn local_dir(&self) -> Option<PathBuf> {
        Some(self.dir.join("local"))
    }

    fn describe(&self) -> String {
        format!("fs:{}", self.dir.display())
    }
}
